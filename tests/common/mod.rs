//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn testdata(rel: &str) -> PathBuf {
    crate_dir().join("testdata").join(rel)
}

/// The shared real-data folder beside the checkout, when present.
pub fn shared_data(rel: &str) -> Option<PathBuf> {
    let p = crate_dir().join("..").join("shared").join("data").join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: {} is not present", p.display());
        None
    }
}

pub struct Output {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn traceaudit(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_traceaudit"))
        .args(args)
        .output()
        .expect("run traceaudit");
    Output {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}
