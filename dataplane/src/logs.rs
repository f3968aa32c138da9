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
use std::pin::pin;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{DefaultFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

thread_local! {
    /// The id of the request being polled on this thread; empty between requests.
    static REQUEST: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Runs `fut` as the request `id`: every line it logs names the id.
pub async fn in_request<F: Future>(id: &str, fut: F) -> F::Output {
    let mut fut = pin!(fut);
    std::future::poll_fn(|cx| {
        let _scope = Scope::enter(id);
        fut.as_mut().poll(cx)
    })
    .await
}

/// The request's id in the thread's slot until dropped.
struct Scope;

impl Scope {
    fn enter(id: &str) -> Scope {
        REQUEST.with(|r| {
            let mut r = r.borrow_mut();
            r.clear();
            r.push_str(id);
        });
        Scope
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        REQUEST.with(|r| r.borrow_mut().clear());
    }
}

/// `f` of the id of the request being polled, if one is.
fn with_request<T>(f: impl FnOnce(Option<&str>) -> T) -> T {
    REQUEST.with(|r| {
        let r = r.borrow();
        f(Some(r.as_str()).filter(|s| !s.is_empty()))
    })
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
        logs.fmt_fields(WithRequest(DefaultFields::new())).init();
    }
}

/// The text format's fields, then `request=<id>` for a line logged in a request:
/// `2026-12-03T10:00:00.000000Z  WARN seckill_dataplane::shard: blocking a client … request=a1b2-7f`.
pub struct WithRequest<N>(N);

impl<'w, N> FormatFields<'w> for WithRequest<N>
where
    N: for<'a> FormatFields<'a>,
{
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        mut writer: Writer<'w>,
        fields: R,
    ) -> fmt::Result {
        self.0.format_fields(writer.by_ref(), fields)?;
        with_request(|id| match id {
            Some(id) => write!(writer, " request={id}"),
            None => Ok(()),
        })
    }
}

/// One JSON object a line: `timestamp`, `level`, `fields` (`message` among them), `target`,
/// and in a request `span` (`{"id", "name": "request"}`) and `spans`, the same keys
/// `tracing-subscriber`'s JSON format gives a line inside a span.
pub struct Json;

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
        let meta = event.metadata();
        let mut line = Map::new();
        line.insert("timestamp".into(), timestamp.into());
        line.insert("level".into(), meta.level().as_str().into());
        line.insert("fields".into(), Value::Object(fields.0));
        line.insert("target".into(), meta.target().into());
        with_request(|id| {
            if let Some(id) = id {
                let span = serde_json::json!({"id": id, "name": "request"});
                line.insert("spans".into(), Value::Array(vec![span.clone()]));
                line.insert("span".into(), span);
            }
        });
        let text = serde_json::to_string(&line).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// An event's fields as JSON values.
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
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
            let logs = logs.fmt_fields(WithRequest(DefaultFields::new()));
            tracing::subscriber::with_default(logs.finish(), f);
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
        futures::executor::block_on(in_request("trace-1", async {
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
            lines[0].ends_with("before campaign=\"c\" request=trace-1"),
            "{text}"
        );
        assert!(lines[1].ends_with("after n=3 request=trace-1"), "{text}");
        assert!(lines[2].ends_with("outside"), "{text}");
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
}
