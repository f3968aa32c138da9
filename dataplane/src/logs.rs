//! Log lines on stderr, text or JSON, each naming the request it was logged in.
//!
//! While a request's future runs, its id sits in a slot of the shard's thread (a shard
//! polls one future at a time), and the line formatters add it to whatever is logged
//! meanwhile. A `tracing` span per request would name it too, but its bookkeeping and
//! the formatting of its fields cost every request, logged or not, about 4% of the
//! shard's CPU on a refused purchase; the slot costs a copy of the id each time the
//! future is polled.

use serde_json::{Map, Value};
use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::FormattedFields;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

thread_local! {
    /// The id of the request being polled on this thread; empty between requests.
    static REQUEST: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Runs `fut` as the request `id`: every line it logs names the id, which comes back
/// with the output.
pub fn in_request<F: Future>(id: String, fut: F) -> InRequest<F> {
    InRequest { id, fut }
}

/// Runs `f` under the request id `id`, as [`in_request`] polls a future.
pub fn within<T>(id: &str, f: impl FnOnce() -> T) -> T {
    let _scope = Scope::enter(id);
    f()
}

pin_project_lite::pin_project! {
    /// A request's future polled under its id ([`in_request`]). One struct, not an
    /// `async fn`: every request's future is moved into hyper, and an `async fn` that
    /// takes a future keeps it twice, once as it came and once as it runs.
    pub struct InRequest<F> {
        id: String,
        #[pin]
        fut: F,
    }
}

impl<F: Future> Future for InRequest<F> {
    type Output = (F::Output, String);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let polled = within(this.id, || this.fut.poll(cx));
        polled.map(|out| (out, std::mem::take(this.id)))
    }
}

/// The request's id in the thread's slot until dropped; then whatever was there before
/// (nothing, unless one request's future runs inside another's).
struct Scope {
    outer: Option<String>,
}

impl Scope {
    fn enter(id: &str) -> Scope {
        let outer = REQUEST
            .try_with(|r| {
                let mut r = r.borrow_mut();
                let outer = (!r.is_empty()).then(|| std::mem::take(&mut *r));
                r.push_str(id);
                outer
            })
            .ok()
            .flatten();
        Scope { outer }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let outer = self.outer.take();
        let _ = REQUEST.try_with(|r| match outer {
            Some(outer) => *r.borrow_mut() = outer,
            None => r.borrow_mut().clear(),
        });
    }
}

/// The id of the request being polled on this thread, if one is. Read only when a line
/// is logged.
fn current_request() -> Option<String> {
    REQUEST
        .try_with(|r| {
            r.try_borrow()
                .ok()
                .filter(|r| !r.is_empty())
                .map(|r| r.clone())
        })
        .ok()
        .flatten()
}

/// Starts logging to stderr, lines filtered by `RUST_LOG` (default `info`).
pub fn init(json: bool) {
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if json {
        logs.event_format(Json).init();
    } else {
        logs.event_format(Text).init();
    }
}

/// The metadata of an event, with the real target and level of a line from the `log`
/// crate (glommio logs through it) rather than tracing's `log` stand-in.
fn metadata_of<'a>(
    event: &'a Event<'a>,
    normalized: &'a Option<tracing::Metadata<'a>>,
) -> &'a tracing::Metadata<'a> {
    normalized.as_ref().unwrap_or_else(|| event.metadata())
}

/// A text line, as `tracing-subscriber`'s full format writes it, with the request as its
/// innermost span: `2026-12-03T10:00:00.000000Z  WARN request{id=a1b2-7f}:
/// seckill_dataplane::shard: blocking a client …`.
pub struct Text;

impl<S, N> FormatEvent<S, N> for Text
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let normalized = event.normalized_metadata();
        let meta = metadata_of(event, &normalized);
        let ansi = writer.has_ansi_escapes();
        let level = *meta.level();
        if ansi {
            writer.write_str("\x1b[2m")?;
        }
        SystemTime.format_time(&mut writer)?;
        if ansi {
            let color = match level {
                Level::ERROR => 31,
                Level::WARN => 33,
                Level::INFO => 32,
                Level::DEBUG => 34,
                _ => 35,
            };
            write!(writer, "\x1b[0m \x1b[{color}m{:>5}\x1b[0m ", level.as_str())?;
        } else {
            write!(writer, " {:>5} ", level.as_str())?;
        }
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                write!(writer, "{}", span.name())?;
                let extensions = span.extensions();
                if let Some(fields) = extensions.get::<FormattedFields<N>>() {
                    if !fields.is_empty() {
                        write!(writer, "{{{fields}}}")?;
                    }
                }
                writer.write_str(": ")?;
            }
        }
        if let Some(id) = current_request() {
            write!(writer, "request{{id={id}}}: ")?;
        }
        write!(writer, "{}: ", meta.target())?;
        ctx.format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// One JSON object a line, in the keys and order of `tracing-subscriber`'s JSON format:
/// `timestamp`, `level`, `fields` (`message` among them), `target`, and in a request
/// `span` (`{"id", "name": "request"}`) and `spans`.
pub struct Json;

#[derive(serde::Serialize)]
struct JsonLine<'a> {
    timestamp: String,
    level: &'a str,
    fields: Map<String, Value>,
    target: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    span: Option<RequestSpan<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spans: Option<[RequestSpan<'a>; 1]>,
}

#[derive(serde::Serialize, Clone, Copy)]
struct RequestSpan<'a> {
    id: &'a str,
    name: &'static str,
}

impl<S, N> FormatEvent<S, N> for Json
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        let normalized = event.normalized_metadata();
        let meta = metadata_of(event, &normalized);
        let id = current_request();
        let span = id.as_deref().map(|id| RequestSpan {
            id,
            name: "request",
        });
        let text = serde_json::to_string(&JsonLine {
            timestamp,
            level: meta.level().as_str(),
            fields: fields.0,
            target: meta.target(),
            span,
            spans: span.map(|s| [s]),
        })
        .map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// An event's fields as JSON values; a line from the `log` crate leaves out the `log.*`
/// fields that stand for its metadata.
struct Fields(Map<String, Value>);

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        let name = field.name();
        if !name.starts_with("log.") {
            let name = name.strip_prefix("r#").unwrap_or(name);
            self.0.insert(name.into(), value);
        }
    }
}

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// The lines logged by `f` through a subscriber set up as [`init`] sets one up.
    fn logged(json: bool, f: impl FnOnce()) -> String {
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = out.clone();
        let writer = move || Sink(sink.clone());
        let logs = tracing_subscriber::fmt()
            .with_writer(writer)
            .with_ansi(false);
        if json {
            tracing::subscriber::with_default(logs.event_format(Json).finish(), f);
        } else {
            tracing::subscriber::with_default(logs.event_format(Text).finish(), f);
        }
        let bytes = out.lock().expect("the sink").clone();
        String::from_utf8(bytes).expect("UTF-8 lines")
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("the sink").extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A request that logs before and after it waits, and a line logged after it.
    fn a_request() {
        futures::executor::block_on(in_request("trace-1".into(), async {
            tracing::warn!(campaign = "c", "before");
            let mut once = true;
            std::future::poll_fn(|cx| {
                if std::mem::take(&mut once) {
                    cx.waker().wake_by_ref();
                    std::task::Poll::Pending
                } else {
                    std::task::Poll::Ready(())
                }
            })
            .await;
            tracing::warn!(n = 3, "after");
        }));
        tracing::warn!("outside");
    }

    #[test]
    fn text_lines_name_the_request_they_were_logged_in() {
        let text = logged(false, a_request);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].contains(
                " WARN request{id=trace-1}: seckill_dataplane::logs::tests: before campaign=\"c\""
            ),
            "{text}"
        );
        assert!(
            lines[1]
                .ends_with(" WARN request{id=trace-1}: seckill_dataplane::logs::tests: after n=3"),
            "{text}"
        );
        assert!(
            lines[2].ends_with(" WARN seckill_dataplane::logs::tests: outside"),
            "{text}"
        );
        assert!(lines.iter().all(|l| l.contains("WARN")), "{text}");
    }

    #[test]
    fn json_lines_carry_the_request_as_a_span() {
        let text = logged(true, a_request);
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("each line is JSON"))
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        for line in &lines[..2] {
            assert_eq!(line["span"]["id"], "trace-1", "{line}");
            assert_eq!(line["span"]["name"], "request", "{line}");
            assert_eq!(line["spans"][0]["id"], "trace-1", "{line}");
            assert_eq!(line["level"], "WARN", "{line}");
            assert!(line["timestamp"].is_string(), "{line}");
            assert_eq!(line["target"], module_path!(), "{line}");
        }
        assert_eq!(lines[0]["fields"]["message"], "before");
        assert_eq!(lines[0]["fields"]["campaign"], "c");
        assert_eq!(lines[1]["fields"]["n"], 3);
        assert_eq!(lines[2]["fields"]["message"], "outside");
        assert!(lines[2].get("span").is_none(), "{}", lines[2]);
    }

    /// glommio logs through the `log` crate: its lines keep their own target and level,
    /// without the fields that carry them across.
    #[test]
    fn json_lines_from_the_log_crate_keep_their_target() {
        let text = logged(true, || {
            let record = log::Record::builder()
                .args(format_args!("task queue stalled"))
                .level(log::Level::Warn)
                .target("glommio::executor::stall")
                .module_path(Some("glommio::executor::stall"))
                .file(Some("stall.rs"))
                .line(Some(81))
                .build();
            tracing_log::format_trace(&record).expect("a line");
        });
        let line: Value = serde_json::from_str(text.trim()).expect("a JSON line");
        assert_eq!(line["target"], "glommio::executor::stall", "{line}");
        assert_eq!(line["level"], "WARN", "{line}");
        assert_eq!(line["fields"]["message"], "task queue stalled", "{line}");
        let fields = line["fields"].as_object().expect("fields");
        assert!(fields.keys().all(|k| !k.starts_with("log.")), "{line}");
        assert!(
            text.starts_with("{\"timestamp\":")
                && text.contains("\",\"level\":\"WARN\",\"fields\":{"),
            "keys in the usual order: {text}"
        );
    }
}
