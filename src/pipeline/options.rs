//! What a front door (the command line, the Python module) is given, resolved once into the
//! jobs' options, so both resolve a thread count or a configuration file alike. Only the
//! telling differs: the command line prints the notes, the Python module returns none.

use super::audit::AuditOptions;
use std::path::Path;

/// A thread count as asked for: `None` or 0 for every core, capped at the cores available
/// (the work is CPU-bound). The note says when the request was capped.
pub fn threads(requested: Option<usize>) -> (usize, Option<String>) {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    match requested.filter(|&n| n > 0) {
        None => (cores, None),
        Some(n) if n > cores => (
            cores,
            Some(format!(
                "--threads {n} capped at {cores}, the cores available"
            )),
        ),
        Some(n) => (n, None),
    }
}

/// An audit's options from what a front door was given: a configuration file (its settings,
/// and its text for the corpus manifest), the checks to run, the threads. The rest is
/// [`AuditOptions::default`]'s, for the caller to set. Also the notes to tell the user.
pub fn audit_options(
    config: Option<&Path>,
    checks: Option<Vec<String>>,
    threads_requested: Option<usize>,
) -> crate::error::Result<(AuditOptions, Vec<String>)> {
    let (config, config_text) = match config {
        Some(path) => {
            let (settings, text) = crate::config::Config::load(path)?;
            (settings, Some(text))
        }
        None => (crate::config::Config::default(), None),
    };
    let (threads, note) = threads(threads_requested);
    Ok((
        AuditOptions {
            config,
            config_text,
            checks,
            threads,
            ..AuditOptions::default()
        },
        note.into_iter().collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_count_past_the_cores_is_capped_with_a_note() {
        let cores = std::thread::available_parallelism().unwrap().get();
        assert_eq!(threads(None), (cores, None));
        assert_eq!(threads(Some(0)), (cores, None));
        assert_eq!(threads(Some(1)), (1, None));
        let (n, note) = threads(Some(cores + 3));
        assert_eq!(n, cores);
        assert!(note.unwrap().contains(&format!("--threads {}", cores + 3)));
    }

    #[test]
    fn a_configuration_file_is_read_with_its_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("traceaudit.toml");
        std::fs::write(&path, "[evidence]\nmin_digits = 3\n").unwrap();
        let (opts, notes) = audit_options(Some(&path), None, Some(1)).unwrap();
        assert_eq!(
            opts.config_text.as_deref(),
            Some("[evidence]\nmin_digits = 3\n")
        );
        assert_eq!(opts.threads, 1);
        assert!(notes.is_empty());
        let err = audit_options(Some(&dir.path().join("missing.toml")), None, None)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("missing.toml"), "{err}");
    }
}
