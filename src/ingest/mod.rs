//! Reading recorded runs: one file per source format, all producing the same canonical rows
//! ([`crate::model`]). Formats are detected from content; `--format` overrides detection.
//!
//! An adapter reads one input file and hands the [`Sink`] whole conversations (or, for formats
//! whose conversations span files, fragments of one: the store groups them) plus quarantine
//! records for anything it could not use. Records are the unit counts reconcile on: every record
//! an adapter reads is either stored or quarantined, never both, never neither.

pub mod agentfootprint;
pub(crate) mod chat;
pub mod driver;
pub mod inspect;
pub(crate) mod json_pick;
pub(crate) mod json_scan;
#[cfg(fuzzing)]
#[doc(hidden)]
pub use json_scan::fuzz_scan_as_streamed;
pub mod openinference;
pub mod otel;
pub mod swe_agent;
pub mod tau2;
pub mod tau_bench;
pub mod trajectory;
pub mod vcr;

use crate::model::Conversation;
use serde::Serialize;
use std::path::Path;

/// A source format the engine reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum Format {
    /// agentfootprint NDJSON: one event envelope per line.
    AgentfootprintNdjson,
    /// agentfootprint Recording document `{snapshot, events, structure}`.
    AgentfootprintRecording,
    /// tau-bench v1: a JSON list of `{task_id, trial, reward, info, traj}`.
    TauBench,
    /// tau2-bench simulations (a results document, a wrapped list, or a bare list).
    Tau2,
    /// Inspect AI eval logs: a JSON log or an `.eval` ZIP archive.
    InspectAi,
    /// SWE-agent `.traj` trajectories.
    SweAgent,
    /// VCR HTTP cassettes of model calls (YAML `interactions`), as pydantic-ai records them.
    Vcr,
    /// OpenTelemetry GenAI spans: an OTLP JSON export, or one export request per line.
    Otel,
    /// OpenInference (Arize Phoenix) spans in an OTLP JSON export; read by the same adapter.
    #[value(name = "openinference")]
    OpenInference,
}

impl Format {
    pub const ALL: [Format; 9] = [
        Format::AgentfootprintNdjson,
        Format::AgentfootprintRecording,
        Format::TauBench,
        Format::Tau2,
        Format::InspectAi,
        Format::SweAgent,
        Format::Vcr,
        Format::Otel,
        Format::OpenInference,
    ];

    /// The stable name written into the store (`runs.format`, `--format`).
    pub fn name(self) -> &'static str {
        match self {
            Format::AgentfootprintNdjson => "agentfootprint-ndjson",
            Format::AgentfootprintRecording => "agentfootprint-recording",
            Format::TauBench => "tau-bench",
            Format::Tau2 => "tau2",
            Format::InspectAi => "inspect-ai",
            Format::SweAgent => "swe-agent",
            Format::Vcr => "vcr",
            Format::Otel => "otel",
            Format::OpenInference => "openinference",
        }
    }

    /// The family name used as `source` in the corpus (one name per framework).
    pub fn family(self) -> &'static str {
        match self {
            Format::AgentfootprintNdjson | Format::AgentfootprintRecording => "agentfootprint",
            Format::TauBench => "tau-bench",
            Format::Tau2 => "tau2",
            Format::InspectAi => "inspect-ai",
            Format::SweAgent => "swe-agent",
            Format::Vcr => "vcr",
            Format::Otel => "otel",
            Format::OpenInference => "openinference",
        }
    }

    /// Guess the format from the first bytes of a file (at least a few KiB when available).
    /// Returns `None` when nothing matches; the caller quarantines the file.
    pub fn detect(head: &[u8]) -> Option<Format> {
        if inspect::is_eval_archive(head) {
            return Some(Format::InspectAi);
        }
        let text = String::from_utf8_lossy(head);
        let trimmed = text.trim_start_matches('\u{feff}').trim_start();
        if inspect::is_json_log(trimmed) {
            return Some(Format::InspectAi);
        }
        if swe_agent::is_trajectory(trimmed) {
            return Some(Format::SweAgent);
        }
        if let Some(format) = otel::detect(trimmed) {
            return Some(format);
        }
        if trimmed.starts_with('{') {
            // One envelope per line: the first line is a complete object with a dotted type.
            let first_line = trimmed.lines().next().unwrap_or("");
            if first_line.contains("\"type\"")
                && first_line.contains("\"agentfootprint.")
                && first_line.contains("\"meta\"")
            {
                return Some(Format::AgentfootprintNdjson);
            }
            if trimmed.contains("\"snapshot\"") && trimmed.contains("\"sharedState\"") {
                return Some(Format::AgentfootprintRecording);
            }
            if trimmed.contains("\"simulations\"") {
                return Some(Format::Tau2);
            }
            // A tau2 results document whose task list pushes `simulations` past the head.
            if trimmed.contains("\"agent_info\"")
                && trimmed.contains("\"user_info\"")
                && trimmed.contains("\"environment_info\"")
            {
                return Some(Format::Tau2);
            }
            if trimmed.contains("\"snapshot\"") && trimmed.contains("agentfootprint.") {
                return Some(Format::AgentfootprintRecording);
            }
            return None;
        }
        if trimmed.starts_with('[') {
            if trimmed.contains("\"traj\"") {
                return Some(Format::TauBench);
            }
            if trimmed.contains("\"messages\"")
                && (trimmed.contains("\"termination_reason\"") || trimmed.contains("\"task_id\""))
            {
                return Some(Format::Tau2);
            }
        }
        // A YAML document with an `interactions:` list: a VCR cassette.
        if vcr::looks_like_cassette(trimmed) {
            return Some(Format::Vcr);
        }
        None
    }
}

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
    /// One file's OpenTelemetry spans, grouped by trace. A trace can continue in another file,
    /// so a sink that sees every file of an ingest (the driver) joins them across files with an
    /// [`otel::Stitcher`]; the default builds this file's traces at once.
    fn otel_spans(&mut self, batch: otel::SpanBatch) {
        let mut out = Collect::default();
        otel::assemble_batch(batch, &mut out);
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
}

/// Read one file in the given format.
pub fn read_file(format: Format, input: &Input<'_>, sink: &mut dyn Sink) -> std::io::Result<()> {
    match format {
        Format::AgentfootprintNdjson => agentfootprint::read_ndjson(input, sink),
        Format::AgentfootprintRecording => agentfootprint::read_recording(input, sink),
        Format::TauBench => tau_bench::read(input, sink),
        Format::Tau2 => tau2::read(input, sink),
        Format::InspectAi => inspect::read(input, sink),
        Format::SweAgent => swe_agent::read(input, sink),
        Format::Vcr => vcr::read(input, sink),
        Format::Otel | Format::OpenInference => otel::read(input, sink),
    }
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
            Format::detect(&head)
        }
    };
    match format {
        Some(f) => read_file(
            f,
            &Input {
                path,
                display: &display,
            },
            &mut sink,
        )?,
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

// -------------------------------------------------------------------------------------------
// Hashing an input while it is parsed.
// -------------------------------------------------------------------------------------------

thread_local! {
    /// The sha256 of the last input file read whole, in one pass, on this thread through
    /// [`HashingFile`]: (file length, digest).
    static READ_DIGEST: std::cell::RefCell<Option<(u64, [u8; 32])>> =
        const { std::cell::RefCell::new(None) };
}

/// A file read in one sequential pass that computes its sha256 on the way, so the manifest's
/// digest does not cost a second read of the input (it was 12-20% of an audit, issue 8). The
/// digest is kept only when the whole file went through in order; a seek, or a file closed
/// early, leaves the caller to hash the file separately.
pub(crate) struct HashingFile {
    file: std::fs::File,
    hasher: sha2::Sha256,
    read: u64,
    len: u64,
    in_order: bool,
}

impl HashingFile {
    /// The file's length when it was opened.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    pub(crate) fn open(path: &std::path::Path) -> std::io::Result<HashingFile> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        Ok(HashingFile {
            file,
            hasher: sha2::Digest::new(),
            read: 0,
            len,
            in_order: true,
        })
    }
}

impl std::io::Read for HashingFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        if self.in_order {
            sha2::Digest::update(&mut self.hasher, &buf[..n]);
            self.read += n as u64;
        }
        Ok(n)
    }
}

impl std::io::Seek for HashingFile {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        self.in_order = false;
        self.file.seek(pos)
    }
}

impl Drop for HashingFile {
    fn drop(&mut self) {
        if self.in_order && self.read == self.len {
            let hasher = std::mem::take(&mut self.hasher);
            let digest: [u8; 32] = sha2::Digest::finalize(hasher).into();
            READ_DIGEST.with(|d| *d.borrow_mut() = Some((self.len, digest)));
        }
    }
}

/// Forget any digest left by an earlier read on this thread.
pub(crate) fn clear_read_digest() {
    READ_DIGEST.with(|d| *d.borrow_mut() = None);
}

/// The digest of the last file of length `len` read whole on this thread, as lower-case hex.
pub(crate) fn take_read_digest(len: u64) -> Option<String> {
    READ_DIGEST
        .with(|d| d.borrow_mut().take())
        .filter(|(n, _)| *n == len)
        .map(|(_, digest)| digest.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod hashing_tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom};

    #[test]
    fn a_file_read_whole_in_order_is_hashed_on_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.ndjson");
        let text: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
        std::fs::write(&path, &text).unwrap();
        let expected: String =
            sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new_with_prefix(&text))
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
        let len = text.len() as u64;

        clear_read_digest();
        let mut all = Vec::new();
        std::io::BufReader::new(HashingFile::open(&path).unwrap())
            .read_to_end(&mut all)
            .unwrap();
        assert_eq!(take_read_digest(len), Some(expected));
        // Taken once.
        assert_eq!(take_read_digest(len), None);

        // Stopped early: no digest, the caller hashes the file itself.
        clear_read_digest();
        let mut part = [0u8; 1000];
        HashingFile::open(&path)
            .unwrap()
            .read_exact(&mut part)
            .unwrap();
        assert_eq!(take_read_digest(len), None);

        // Read whole but out of order: no digest either.
        clear_read_digest();
        let mut f = HashingFile::open(&path).unwrap();
        f.seek(SeekFrom::Start(10)).unwrap();
        f.seek(SeekFrom::Start(0)).unwrap();
        let mut again = Vec::new();
        f.read_to_end(&mut again).unwrap();
        drop(f);
        assert_eq!(take_read_digest(len), None);
    }
}
