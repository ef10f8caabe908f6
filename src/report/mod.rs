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

use crate::cli::{fail, DiffArgs, ExplainArgs, ReportArgs};
use corpus::CorpusDir;
use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

/// Output formats of `report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    Table,
    Markdown,
    Json,
    Html,
}

/// Output formats of `diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffFormat {
    Markdown,
    Json,
}

/// Output formats of `explain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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

pub fn cli_report(args: ReportArgs) -> ExitCode {
    let run = || -> io::Result<()> {
        let corpus = CorpusDir::open(&args.corpus)?;
        let report = summary::build(
            &corpus,
            summary::ReportOptions {
                by: args.by,
                top: args.top,
            },
        )?;
        emit(&render_report(&report, args.format)?, args.out.as_deref())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail("report", e),
    }
}

/// Render a diff in `format`.
pub fn render_diff(d: &diff::Diff, format: DiffFormat) -> io::Result<String> {
    Ok(match format {
        DiffFormat::Markdown => diff::render_markdown(d),
        DiffFormat::Json => json(d)?,
    })
}

pub fn cli_diff(args: DiffArgs) -> ExitCode {
    let rules = match diff::Rules::parse(&args.fail_on) {
        Ok(r) => r,
        Err(e) => return fail("diff", format!("--fail-on: {e}")),
    };
    let run = || -> io::Result<diff::Diff> {
        let base = CorpusDir::open(&args.baseline)?;
        let cand = CorpusDir::open(&args.candidate)?;
        let d = diff::build(
            &base,
            &cand,
            &diff::DiffOptions {
                by: args.by,
                rules: rules.clone(),
                top: args.top,
            },
        )?;
        emit(&render_diff(&d, args.format)?, args.out.as_deref())?;
        Ok(d)
    };
    match run() {
        Ok(d) => {
            eprintln!("{}", diff::verdict_line(&d));
            if d.is_regression() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => fail("diff", e),
    }
}

pub fn cli_explain(args: ExplainArgs) -> ExitCode {
    let run = || -> io::Result<()> {
        let corpus = CorpusDir::open(&args.corpus)?;
        let e = explain::build(
            &corpus,
            &args.run_id,
            explain::ExplainOptions {
                preview: args.preview,
                max_steps: args.max_steps.max(2),
            },
        )?;
        let text = match args.format {
            ExplainFormat::Text => explain::render_text(&e),
            ExplainFormat::Json => json(&e)?,
        };
        emit(&text, args.out.as_deref())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail("explain", e),
    }
}
