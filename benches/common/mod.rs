//! What the end-to-end benches share: child processes timed with their own rusage, medians,
//! and where their corpora and results go.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

pub fn env_list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// `<target>` from this binary's path (`<target>/<profile>/deps/end_to_end-<hash>`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// One timed child process.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub seconds: f64,
    pub max_rss_kb: i64,
    pub cpu_seconds: f64,
}

/// Run a command to completion; its wall time and its own rusage (`wait4`).
pub fn timed(cmd: &mut Command, log: &Path) -> Sample {
    let out = std::fs::File::create(log).expect("log file");
    let err = out.try_clone().expect("log file");
    let started = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it for the child we started and
    // have not waited for (the `Child` handle is dropped without waiting).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let seconds = started.elapsed().as_secs_f64();
    drop(child);
    assert_eq!(rc, pid, "wait4 failed for {cmd:?}");
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    if !ok {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        panic!("{cmd:?} failed (status {status}):\n{text}");
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Sample {
        seconds,
        max_rss_kb: usage.ru_maxrss,
        cpu_seconds: tv(usage.ru_utime) + tv(usage.ru_stime),
    }
}

pub fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}
