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

/// `f_prior_turn_evidence.ndjson` with over `LATENESS_BYTES` of lines of a never-ending run
/// after each of the first two of `sess-f-conv`'s three runs: the agentfootprint adapter then
/// hands that session on in three fragments.
pub fn fragmented_session_ndjson() -> String {
    use traceaudit::internals::LATENESS_BYTES;
    let text = std::fs::read_to_string(testdata(
        "agentfootprint/ndjson/f_prior_turn_evidence.ndjson",
    ))
    .unwrap();
    let pad = "x".repeat(64 << 10);
    let filler = format!(
        "{{\"type\":\"agentfootprint.stream.llm_start\",\"payload\":{{\"pad\":\"{pad}\"}},\
         \"meta\":{{\"runId\":\"filler\",\"sessionId\":\"filler\"}}}}\n"
    );
    let block = filler.repeat((LATENESS_BYTES as usize).div_ceil(filler.len()) + 20);
    let mut padded = String::new();
    let mut ended = 0;
    for line in text.lines() {
        padded.push_str(line);
        padded.push('\n');
        if line.contains("integrity.disposition") && line.contains("sess-f-conv") {
            ended += 1;
            if ended <= 2 {
                padded.push_str(&block);
            }
        }
    }
    assert_eq!(ended, 3);
    padded
}
