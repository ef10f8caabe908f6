//! What the fuzz targets share: handing fuzzed bytes to a reader through a file, and the rules
//! every read must keep whatever the bytes are.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use traceaudit::read::{read_file, Input};
use traceaudit::read::{Collect, Severity};
use traceaudit::Format;

/// Where inputs are written: /dev/shm when there is one, so that writing each input costs no
/// disk; the system temp directory otherwise.
fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let dir = base.join("traceaudit-fuzz");
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        dir
    })
}

/// Write `data` to a scratch file of this process's own, named after `name` (readers may go by
/// the name), and read it as `format` into memory; the file is removed again, so a long run
/// leaves nothing behind. The file is in memory, so reading it cannot fail for want of a disk:
/// an error here is the adapter giving up on content, which stops a whole ingest, and is a
/// finding.
pub fn read_bytes(format: Format, name: &str, data: &[u8]) -> Collect {
    let path = scratch().join(format!("{}-{name}", std::process::id()));
    std::fs::write(&path, data).expect("write the fuzz input");
    let mut sink = Collect::default();
    let input = Input::new(&path, name);
    let read = read_file(format, &input, &mut sink);
    let _ = std::fs::remove_file(&path);
    if let Err(e) = read {
        panic!("{format:?}: reading failed with an I/O error: {e}");
    }
    sink
}

/// Formats whose every record is one conversation (a list element, a sample, a trajectory).
fn one_conversation_per_record(format: Format) -> bool {
    [
        Format::TauBench,
        Format::Tau2,
        Format::SweAgent,
        Format::InspectAi,
    ]
    .contains(&format)
}

/// The reconciliation rule: every record read is stored or dropped, never both, never neither.
/// A sink only sees records, conversations and quarantine entries, so this checks what can be
/// seen of it: no more records dropped than read; something stored exactly when a conversation
/// came out; for formats of one conversation per record, records = conversations + dropped.
/// Every quarantine entry gives a reason.
pub fn check_reconciles(format: Format, sink: &Collect) {
    let dropped = sink
        .quarantined
        .iter()
        .filter(|q| q.severity == Severity::Dropped)
        .count() as u64;
    let summary = || {
        format!(
            "{format:?}: {} records read, {dropped} dropped, {} conversations; quarantine {:?}",
            sink.records,
            sink.conversations.len(),
            sink.quarantined
        )
    };
    assert!(
        dropped <= sink.records,
        "more dropped than read: {}",
        summary()
    );
    let stored = sink.records - dropped;
    if one_conversation_per_record(format) {
        assert_eq!(
            sink.records,
            sink.conversations.len() as u64 + dropped,
            "records != conversations + dropped: {}",
            summary()
        );
    } else {
        assert_eq!(
            stored > 0,
            !sink.conversations.is_empty(),
            "records stored but no conversation, or a conversation from no record: {}",
            summary()
        );
    }
    for q in &sink.quarantined {
        assert!(
            !q.reason.trim().is_empty(),
            "a quarantine entry without a reason: {q:?}"
        );
    }
}

/// Read `data` as `format` and check the result reconciles.
pub fn read_and_check(format: Format, name: &str, data: &[u8]) {
    let sink = read_bytes(format, name, data);
    check_reconciles(format, &sink);
}

/// A store of traceaudit's own, ingested once per process from the bundled agentfootprint
/// recordings: the files the store readers' targets replace one at a time.
pub fn base_store() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let inputs =
            [Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/agentfootprint/ndjson")];
        let out = scratch().join(format!("{}-base-store", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let opts = traceaudit::IngestOptions {
            format: None,
            threads: 1,
            progress: false,
            limits: traceaudit::Limits::default(),
            ..traceaudit::IngestOptions::default()
        };
        traceaudit::ingest(&inputs, &out, &opts).expect("ingest the base store");
        out
    })
}

/// The files of a store the store targets replace, by the selector byte in front of an input.
pub const STORE_FILES: [&str; 3] = [
    "events/part-00000.parquet",
    "runs/part-00000.parquet",
    "manifest.json",
];

/// Copy the base store to a scratch directory of this process, with the file `selector` picks
/// replaced by `data`, open it and read every part both ways. Errors are the expected outcome
/// for most inputs; a panic, or a part read back with events of runs it does not list, is a
/// finding.
pub fn read_store_with(selector: u8, data: &[u8]) {
    let base = base_store();
    let dir = scratch().join(format!("{}-store", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("events")).expect("scratch store");
    std::fs::create_dir_all(dir.join("runs")).expect("scratch store");
    for name in STORE_FILES {
        std::fs::copy(base.join(name), dir.join(name)).expect("copy the base store");
    }
    let target = STORE_FILES[selector as usize % STORE_FILES.len()];
    std::fs::write(dir.join(target), data).expect("write the fuzz input");
    if let Ok(store) = traceaudit::Store::open(&dir) {
        for part in 0..store.parts.min(4) {
            for conversations in [
                store.read_part_ordered(part),
                store.read_part_without_results(part),
            ] {
                let Ok(conversations) = conversations else {
                    continue;
                };
                for (_, c) in &conversations {
                    assert!(
                        c.runs.iter().all(|r| r.conversation_id == c.id),
                        "a run handed out under another conversation"
                    );
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
