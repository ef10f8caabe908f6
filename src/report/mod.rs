//! The reports people read, all computed from lazy Polars scans over a corpus's Parquet files
//! (and its store's `runs.parquet` and events, for groups and for `explain`):
//! - [`summary`]: `traceaudit report`, dispositions and rates per check and group, top
//!   findings, agreement with recorded verdicts; as a terminal table, Markdown, JSON or one
//!   self-contained HTML file ([`html`]);
//! - [`diff`]: `traceaudit diff`, the regression report between two corpora;
//! - [`explain`]: `traceaudit explain`, one run told as a story.
//!
//! Recorded text is untrusted; [`text`] bounds and escapes it for each medium.

pub mod corpus;
pub mod diff;
pub mod explain;
pub mod groups;
pub mod html;
pub mod stats;
pub mod summary;
pub mod text;

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

/// Render a report in `format`.
pub fn render_report(r: &summary::Report, format: ReportFormat) -> io::Result<String> {
    Ok(match format {
        ReportFormat::Table => summary::render_table(r),
        ReportFormat::Markdown => summary::render_markdown(r),
        ReportFormat::Json => json(r)?,
        ReportFormat::Html => html::render_html(r),
    })
}

/// Render a diff in `format`.
pub fn render_diff(d: &diff::Diff, format: DiffFormat) -> io::Result<String> {
    Ok(match format {
        DiffFormat::Markdown => diff::render_markdown(d),
        DiffFormat::Json => json(d)?,
    })
}

/// Render an explained run in `format`.
pub fn render_explain(e: &explain::Explanation, format: ExplainFormat) -> io::Result<String> {
    Ok(match format {
        ExplainFormat::Text => explain::render_text(e),
        ExplainFormat::Json => json(e)?,
    })
}
