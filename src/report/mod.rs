//! The reports people read, all computed from lazy Polars scans over a corpus's Parquet files
//! (and its store's runs and events, for groups and for `explain`):
//! - [`summary`]: `traceaudit report`, dispositions and rates per check and group, top
//!   findings, agreement with recorded verdicts; as a terminal table, Markdown, JSON or one
//!   self-contained HTML file ([`html`], like the diff and the trend pages),
//!   with the findings listed per check and kind and the runs they fired in ([`findings`]);
//! - [`diff`]: `traceaudit diff`, the regression report between two corpora;
//! - [`explain`]: `traceaudit explain`, one run told as a story ([`story`] tells it as text);
//! - [`trend`]: `traceaudit trend`, the fail rates night by night and the nights the diff's
//!   rules would have flagged.
//!
//! Each report's tables are one row model ([`table`]) that every renderer lays out; recorded
//! text is untrusted, and [`text`] bounds and escapes it for each medium.

pub mod corpus;
pub mod diff;
pub mod explain;
pub mod findings;
pub mod groups;
pub mod html;
pub mod stats;
pub mod story;
pub mod summary;
pub mod table;
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

/// Write `text` to `out`, or to stdout without one. A regular file (or a link to one) is
/// replaced whole, through a temporary file of a name no other file has, created beside it and
/// removed when the write fails, so a reader never sees half a report; a pipe, FIFO or device
/// (`/dev/stdout`, `>(cmd)`) is written into, never replaced; anything else is refused. Every
/// error names the path.
pub fn emit(text: &str, out: Option<&Path>) -> io::Result<()> {
    let Some(path) = out else {
        let mut stdout = io::stdout().lock();
        stdout.write_all(text.as_bytes())?;
        return stdout.flush();
    };
    let named = |e: io::Error, doing: &str, at: &Path| {
        io::Error::new(e.kind(), format!("{doing} {}: {e}", at.display()))
    };
    let target = match std::fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => path.to_path_buf(),
        Err(e) => return Err(named(e, "cannot write the report to", path)),
        Ok(meta) if meta.is_dir() => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "cannot write the report to {}: it is a directory; give --out a file name",
                    path.display()
                ),
            ))
        }
        Ok(meta) if !meta.is_file() => {
            // A pipe, FIFO, socket or device: written into as it is.
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| named(e, "cannot write the report to", path))?;
            return f
                .write_all(text.as_bytes())
                .and_then(|()| f.flush())
                .map_err(|e| named(e, "cannot write the report to", path));
        }
        // A regular file, perhaps through links: the file itself is replaced, the links stay.
        Ok(_) => std::fs::canonicalize(path).map_err(|e| named(e, "cannot resolve", path))?,
    };
    let (tmp, mut file) = temporary_beside(&target)?;
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| named(e, "cannot write the report to", &tmp))
        .and_then(|()| {
            std::fs::rename(&tmp, &target)
                .map_err(|e| named(e, "cannot write the report to", &target))
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A new file beside `target` under a name nothing else has (created exclusively).
fn temporary_beside(target: &Path) -> io::Result<(std::path::PathBuf, std::fs::File)> {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut last = None;
    for attempt in 0..100u32 {
        let tmp = dir.join(format!(
            ".{name}.{}-{nanos}-{attempt}.traceaudit-tmp",
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot write the report to {}: {e}", target.display()),
                ))
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "cannot write the report to {}: no free temporary name beside it ({})",
            target.display(),
            last.map(|e| e.to_string()).unwrap_or_default()
        ),
    ))
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
        ExplainFormat::Text => story::render_text(e),
        ExplainFormat::Json => json(e)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_report_file_is_replaced_and_nothing_beside_it_is_touched() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("weekly.html");
        // The old temporary name was the output's with `.partial`: a user's file of that name.
        std::fs::write(dir.path().join("weekly.partial"), "canary").unwrap();
        std::fs::write(&out, "old").unwrap();
        emit("new", Some(&out)).unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("weekly.partial")).unwrap(),
            "canary"
        );
        assert_eq!(names_in(dir.path()), ["weekly.html", "weekly.partial"]);
    }

    #[test]
    fn a_directory_is_refused_by_name_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("reports");
        std::fs::create_dir(&out).unwrap();
        let err = emit("x", Some(&out)).unwrap_err().to_string();
        assert!(
            err.contains("reports") && err.contains("directory"),
            "{err}"
        );
        assert_eq!(names_in(dir.path()), ["reports"]);
        assert!(names_in(&out).is_empty());
        // A missing folder: named too, nothing left behind.
        let err = emit("x", Some(&dir.path().join("no/such/r.html")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no/such/r.html"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_link_keeps_pointing_at_the_replaced_file() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.md");
        std::fs::write(&real, "old").unwrap();
        let link = dir.path().join("latest.md");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        emit("new", Some(&link)).unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        assert_eq!(names_in(dir.path()), ["latest.md", "real.md"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_written_into_not_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        emit("through the pipe", Some(&fifo)).unwrap();
        assert_eq!(reader.join().unwrap(), "through the pipe");
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        // A device: written into, the node stays.
        emit("discarded", Some(Path::new("/dev/null"))).unwrap();
        assert!(std::fs::symlink_metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }
}
