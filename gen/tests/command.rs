//! The `traceaudit-gen` command writes a corpus and says what it injected.

use std::process::Command;

#[test]
fn the_command_writes_a_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c");
    let run = Command::new(env!("CARGO_BIN_EXE_traceaudit-gen"))
        .args(["--format", "tau2", "--runs", "30", "--seed", "3", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("repeated-call"), "{stdout}");
    assert!(out.join("expected.json").exists());
    assert!(out.join("traceaudit.toml").exists());
    assert!(out.join("input/tau2-0000.json").exists());
}
