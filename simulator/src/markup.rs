//! The pieces the HTML report is written with: text escaped, figures and table cells
//! that name their place in the JSON report (JSON pointers), verdicts and tables.

use std::fmt::Write;

/// `&`, `<`, `>` and `"` as entities: names and outcomes come from the run.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The JSON pointer (RFC 6901) of a field of the JSON report: `/ledger/held`.
pub(crate) fn pointer(path: &[&str]) -> String {
    path.iter()
        .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// A figure inline, with where the JSON report holds it.
pub(crate) fn figure(path: &[&str], text: impl std::fmt::Display) -> String {
    format!(
        "<span data-json=\"{}\">{}</span>",
        escape(&pointer(path)),
        escape(&text.to_string())
    )
}

pub(crate) fn verdict(ok: bool) -> &'static str {
    if ok {
        r#"<span class="pass">PASS</span>"#
    } else {
        r#"<span class="fail">FAIL</span>"#
    }
}

/// The attribute of the element holding a verdict: the list in the JSON report that
/// decides it (violations, failures), PASS when it is empty.
pub(crate) fn decided_by(path: &[&str]) -> String {
    format!("data-verdict=\"{}\"", escape(&pointer(path)))
}

/// A table cell: its text and its attributes.
pub(crate) struct Cell {
    text: String,
    attrs: String,
}

impl Cell {
    /// A figure, with where the JSON report holds it.
    pub(crate) fn json(path: &[&str], text: impl std::fmt::Display) -> Cell {
        Cell::from(text.to_string()).with("data-json", &pointer(path))
    }

    pub(crate) fn with(mut self, name: &str, value: &str) -> Cell {
        let _ = write!(self.attrs, " {name}=\"{}\"", escape(value));
        self
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell {
            text,
            attrs: String::new(),
        }
    }
}

/// A table: a header row, then rows of cells; cells that parse as numbers align right.
pub(crate) fn table(head: &[&str], rows: impl IntoIterator<Item = Vec<Cell>>) -> String {
    let mut out = String::from("<table><tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out += "</tr>";
    for row in rows {
        out += "<tr>";
        for Cell { text, attrs } in row {
            let class = if text.trim_end_matches('%').parse::<f64>().is_ok() {
                " class=\"n\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}{attrs}>{}</td>", escape(&text));
        }
        out += "</tr>";
    }
    out + "</table>\n"
}
