//! Reading recorded runs: one file per source format, all producing the same canonical rows
//! ([`crate::model`]). Formats are detected from content; `--format` overrides detection.
//!
//! An adapter reads one input file and hands the [`Sink`] whole conversations (or, for formats
//! whose conversations span files, fragments of one: the store groups them) plus quarantine
//! records for anything it could not use. Records are the unit counts reconcile on: every record
//! an adapter reads is either stored or quarantined, never both, never neither.

pub mod agentfootprint;
pub mod any_agent;
pub(crate) mod chat;
pub mod claude_code;
pub mod codex;
pub mod encoding;
pub mod inspect;
pub(crate) mod json_pick;
pub(crate) mod json_scan;
pub(crate) mod jsonl;
pub mod limits;
#[cfg(test)]
pub(crate) mod linear_cost;
pub mod message_list;
pub mod mini_swe_agent;
#[cfg(fuzzing)]
#[doc(hidden)]
pub use json_scan::fuzz_scan_as_streamed;
pub mod openhands;
pub mod openinference;
pub mod otel;
pub mod registry;
pub mod swe_agent;
pub mod tau2;
pub mod tau_bench;
pub mod trajectory;
pub mod vcr;

pub use limits::Limits;

use crate::model::Conversation;
pub use registry::{Adapter, Format, Fragment, Head, Match, Stitch, DETECT_LIMIT};
use serde::Serialize;
use std::path::Path;

/// Where in a file a record sits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Locator {
    /// The whole file.
    File,
    /// 1-based line number.
    Line(u64),
    /// Byte offset.
    Byte(u64),
    /// 0-based index of the record in the file's list.
    Record(u64),
}

/// What became of a quarantined item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The record was not stored. Counts as quarantined.
    Dropped,
    /// The record was stored, but part of it could not be used (for example a tool result with
    /// no call). Not counted as a quarantined record; listed so nothing vanishes unexplained.
    Partial,
    /// A run whose id was already read from an earlier input: this copy was skipped.
    Duplicate,
    /// A file or folder among the inputs that was not read at all (not a regular file, a
    /// dangling link, a link loop, a folder that cannot be listed). Not a record.
    Skipped,
}

/// One entry of `quarantine.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quarantined {
    pub file: String,
    pub locator: Locator,
    pub severity: Severity,
    pub reason: String,
    pub format: Option<&'static str>,
}

impl Quarantined {
    pub fn dropped(file: &str, locator: Locator, reason: impl Into<String>) -> Self {
        Quarantined {
            file: file.to_string(),
            locator,
            severity: Severity::Dropped,
            reason: reason.into(),
            format: None,
        }
    }

    pub fn partial(file: &str, locator: Locator, reason: impl Into<String>) -> Self {
        Quarantined {
            severity: Severity::Partial,
            ..Quarantined::dropped(file, locator, reason)
        }
    }

    /// The note for a copy of run `run_id` (record `record` of `file`) that is skipped because
    /// an earlier input (or the store being added to) holds the run.
    pub fn duplicate_run(file: &str, record: u64, run_id: &str) -> Self {
        Quarantined {
            severity: Severity::Duplicate,
            ..Quarantined::dropped(
                file,
                Locator::Record(record),
                format!(
                    "run {run_id:?} was already read from an earlier input; this copy is skipped"
                ),
            )
        }
    }
}

/// Where an adapter puts what it reads.
pub trait Sink {
    /// A conversation (or a fragment of one, for formats whose conversations span files).
    /// `record` is the position of its first record in the file, for a stable order.
    fn conversation(&mut self, conversation: Conversation, record: u64);
    /// Something that could not be used.
    fn quarantine(&mut self, item: Quarantined);
    /// Count records read (stored or dropped).
    fn records_read(&mut self, n: u64);
    /// The sha256 of the input file (lower-case hex), from an adapter that read the file whole
    /// in one pass (`HashingFile::finish`); a sink that records inputs hashes any other file
    /// itself.
    fn file_digest(&mut self, _sha256: String) {}
    /// A piece of conversations that may continue in another file (`Adapter::stitcher`). A
    /// sink that sees every file of an ingest (the driver) joins fragments across files; the
    /// default builds this file's conversations at once, as if no other input existed.
    fn fragment(&mut self, fragment: Fragment) {
        let mut out = Collect::default();
        if let Some(mut stitch) = fragment.format.adapter().stitcher() {
            stitch.add(fragment, &mut out);
            stitch.finish(&mut out);
        }
        for q in out.quarantined {
            self.quarantine(q);
        }
        for (c, record) in out.conversations {
            self.conversation(c, record);
        }
    }
}

/// Everything an adapter needs to read one file.
pub struct Input<'a> {
    pub path: &'a Path,
    /// The path as written into the store (`runs.source`, quarantine `file`).
    pub display: &'a str,
    /// The recording's own path, which ids taken from a file name come from: `path`, except
    /// where `path` is a copy: for an object its URL, and for a compressed input the
    /// input's path without its compression suffix (`a.yaml.gz` holds the recording
    /// `a.yaml`), so that compressing or fetching a file does not change its ids.
    pub name: &'a str,
    /// How much of the file may be held at once.
    pub limits: Limits,
}

impl<'a> Input<'a> {
    /// An input read under the default [`Limits`].
    pub fn new(path: &'a Path, display: &'a str) -> Input<'a> {
        Input {
            path,
            display,
            name: path.to_str().unwrap_or(display),
            limits: Limits::default(),
        }
    }
}

/// Read one file in the given format.
pub fn read_file(format: Format, input: &Input<'_>, sink: &mut dyn Sink) -> std::io::Result<()> {
    format.adapter().read(input, sink)
}

/// A sink that keeps everything in memory (tests, small inputs).
#[derive(Debug, Default)]
pub struct Collect {
    pub conversations: Vec<(Conversation, u64)>,
    pub quarantined: Vec<Quarantined>,
    pub records: u64,
}

impl Sink for Collect {
    fn conversation(&mut self, conversation: Conversation, record: u64) {
        self.conversations.push((conversation, record));
    }
    fn quarantine(&mut self, item: Quarantined) {
        self.quarantined.push(item);
    }
    fn records_read(&mut self, n: u64) {
        self.records += n;
    }
}

/// Read a small file fully, for tests: detect (unless given), read, collect.
pub fn read_path(path: &Path, format: Option<Format>) -> std::io::Result<Collect> {
    let display = path.display().to_string();
    let mut sink = Collect::default();
    let format = match format {
        Some(f) => Some(f),
        None => {
            let head = read_head(path)?;
            Format::detect_file(path, &head)
        }
    };
    match format {
        Some(f) => read_file(f, &Input::new(path, &display), &mut sink)?,
        None => {
            sink.records_read(1);
            sink.quarantine(Quarantined::dropped(
                &display,
                Locator::File,
                "not a recognised recording format",
            ));
        }
    }
    Ok(sink)
}

/// The first 64 KiB of a file, for detection.
pub fn read_head(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0;
    while n < buf.len() {
        let got = f.read(&mut buf[n..])?;
        if got == 0 {
            break;
        }
        n += got;
    }
    buf.truncate(n);
    Ok(buf)
}
