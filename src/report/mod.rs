//! The reports people read, all computed from lazy Polars scans over a corpus's Parquet files
//! (and its store's `runs.parquet` and events, for groups and for `explain`):
//! - [`summary`]: `traceaudit report`, dispositions and rates per check and group, top
//!   findings, agreement with recorded verdicts; as a terminal table, Markdown, JSON or one
//!   self-contained HTML file ([`html`], like the diff and the trend pages),
//!   with the findings listed per check and kind and the runs they fired in ([`findings`]);
//! - [`diff`]: `traceaudit diff`, the regression report between two corpora;
//! - [`explain`]: `traceaudit explain`, one run told as a story;
//! - [`trend`]: `traceaudit trend`, the fail rates night by night and the nights the diff's
//!   rules would have flagged.
//!
//! Recorded text is untrusted; [`text`] bounds and escapes it for each medium.

pub mod corpus;
pub mod diff;
pub mod explain;
pub mod findings;
pub mod groups;
pub mod html;
pub mod stats;
pub mod summary;
pub mod text;
pub mod trend;

use std::io::{self, Write};
use std::path::Path;

/// Output formats of `report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    Table,
    Markdown,
    Json,
    Html,
}

/// Output formats of `diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffFormat {
    Markdown,
    Json,
    Html,
}

/// Output formats of `trend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrendFormat {
    Table,
    Json,
    Html,
}

/// Output formats of `explain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExplainFormat {
    Text,
    Json,
}

/// Write `text` to `out` (atomically, through a temporary file beside it) or to stdout.
pub fn emit(text: &str, out: Option<&Path>) -> io::Result<()> {
    match out {
        Some(path) => {
            let tmp = path.with_extension("partial");
            std::fs::write(&tmp, text)?;
            std::fs::rename(&tmp, path)
        }
        None => {
            let mut stdout = io::stdout().lock();
            stdout.write_all(text.as_bytes())?;
            stdout.flush()
        }
    }
}

fn json<T: serde::Serialize>(value: &T) -> io::Result<String> {
    let mut s = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    s.push('\n');
    Ok(s)
}

/// Render a report in `format`; the HTML page also lists `findings` (the other formats have
/// no room for them).
pub fn render_report(
    r: &summary::Report,
    findings: Option<&findings::Findings>,
    format: ReportFormat,
) -> io::Result<String> {
    Ok(match format {
        ReportFormat::Table => summary::render_table(r),
        ReportFormat::Markdown => summary::render_markdown(r),
        ReportFormat::Json => json(r)?,
        ReportFormat::Html => html::render_html(r, findings),
    })
}

/// Render a diff in `format`.
pub fn render_diff(d: &diff::Diff, format: DiffFormat) -> io::Result<String> {
    Ok(match format {
        DiffFormat::Markdown => diff::render_markdown(d),
        DiffFormat::Json => json(d)?,
        DiffFormat::Html => html::diff::render_html(d),
    })
}

/// Render a trend in `format`.
pub fn render_trend(t: &trend::Trend, format: TrendFormat) -> io::Result<String> {
    Ok(match format {
        TrendFormat::Table => trend::render_table(t),
        TrendFormat::Json => json(t)?,
        TrendFormat::Html => html::trend::render_html(t),
    })
}

/// Render an explained run in `format`.
pub fn render_explain(e: &explain::Explanation, format: ExplainFormat) -> io::Result<String> {
    Ok(match format {
        ExplainFormat::Text => explain::render_text(e),
        ExplainFormat::Json => json(e)?,
    })
}
