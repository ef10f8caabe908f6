//! The formats the engine reads: one [`Adapter`] per format, each in its own file, and one
//! ordered list of them, [`Format::ALL`]. Adding a format is one file (the adapter, and its
//! [`Format`] constant) and one line in that list.
//!
//! Detection asks every adapter about the head of a file, in list order. The first that is sure
//! ([`Match::Strong`]) wins; otherwise the first that recognises the head at all
//! ([`Match::Weak`]: a shape another format could also have) does. So the order only matters
//! between formats whose heads overlap, and the list says which wins.

use super::{Input, Sink};
use std::any::Any;
use std::io;
use std::path::{Path, PathBuf};

/// How far into a file a second look past its head ([`Adapter::detect_past_head`]) may read:
/// the record limit's default, since a file of a format read whole is one record.
pub const DETECT_LIMIT: u64 = super::Limits::DEFAULT_RECORD_BYTES;

/// What detection sees of a file.
pub struct Head<'a> {
    /// The first bytes (64 KiB when the file has them).
    pub bytes: &'a [u8],
    /// The same as text (invalid UTF-8 replaced), without a byte-order mark and leading white
    /// space.
    pub text: &'a str,
    /// The file, when detection is asked about one (not about bytes alone): for a binary format
    /// without a magic number, whose name and length are part of what identifies it.
    pub path: Option<&'a Path>,
}

/// How an adapter answers for a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Match {
    No,
    /// A shape this format has, but another one could have too: it wins only when no format
    /// is sure.
    Weak,
    /// This format's own shape.
    Strong,
}

impl Match {
    pub fn strong_if(yes: bool) -> Match {
        if yes {
            Match::Strong
        } else {
            Match::No
        }
    }
}

/// One source format: how to recognise it, and how to read it into canonical rows.
pub trait Adapter: Sync + Send {
    /// The stable name written into the store (`runs.format`) and taken by `--format`.
    fn name(&self) -> &'static str;
    /// The family written as `source` in the corpus (one name per framework).
    fn family(&self) -> &'static str;
    /// One line for `--help`.
    fn about(&self) -> &'static str;
    /// Does this head look like this format?
    fn detect(&self, head: &Head<'_>) -> Match;
    /// Read one file: whole conversations (or fragments, see [`Adapter::stitcher`]) and
    /// quarantine records go to the sink.
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()>;
    /// Files read through this one (a dir layout's record files beside their index): when an
    /// ingest has both among its inputs, they are read once, through this file.
    fn companions(&self, _path: &Path) -> Vec<PathBuf> {
        Vec::new()
    }
    /// A second look at a file no format recognised from its head, and which goes on past the
    /// head: a large value written first can push this format's marker keys out of the head
    /// (a trajectory whose `info` holds a 1 MB submission before `messages`). Asked only in
    /// that case, so it may read further into the file, within [`DETECT_LIMIT`] bytes; the
    /// head it gets is the same as [`Adapter::detect`]'s.
    fn detect_past_head(&self, _head: &Head<'_>, _path: &Path) -> Match {
        Match::No
    }
    /// For a format whose conversations can span files: what joins the fragments its reader
    /// hands over ([`Sink::fragment`]) across every file of an ingest.
    fn stitcher(&self) -> Option<Box<dyn Stitch>> {
        None
    }
    /// The input bytes a stored row (a run or an event) takes in this format, at the low end
    /// of what its recordings show, for formats where that is under about 700 bytes. A store
    /// plans its parts by input bytes before reading, and a format this dense would fill a
    /// part with more rows than it holds, and the part be rewritten to be cut: with this, the
    /// plan makes enough parts for the rows too. `None`: the bytes alone plan well.
    fn input_bytes_per_row(&self) -> Option<u64> {
        None
    }
}

/// Joins the fragments of conversations that span files (OpenTelemetry traces split over
/// exports) and builds each conversation once it is complete.
pub trait Stitch: Send {
    /// Take one file's fragment; hand over every conversation it completes.
    fn add(&mut self, fragment: Fragment, sink: &mut dyn Sink);
    /// The inputs are done: build what is still incomplete, with notes.
    fn finish(&mut self, sink: &mut dyn Sink);
    /// The keys under which `fragment` joins fragments of other files (trace ids): files whose
    /// fragments share no key are joined the same whether they are read together or apart.
    fn keys(&self, fragment: &Fragment) -> Vec<String>;
}

/// A piece of one or more conversations that may continue in another file, in the adapter's
/// own representation; only its format's [`Stitch`] opens it.
pub struct Fragment {
    /// The format whose stitcher joins it.
    pub format: Format,
    pub data: Box<dyn Any + Send>,
}

/// A source format: a handle on its registered `Adapter`. Equal when the names are.
#[derive(Clone, Copy)]
pub struct Format(pub(crate) &'static dyn Adapter);

impl Format {
    /// Every format, in detection order.
    pub const ALL: &'static [Format] = &[
        Format::InspectAi,
        Format::SweAgent,
        Format::MiniSweAgent,
        Format::Otel,
        Format::OpenInference,
        Format::OtlpProto,
        Format::AnyAgent,
        Format::AgentfootprintNdjson,
        Format::AgentfootprintRecording,
        Format::TauBench,
        Format::Tau2,
        Format::OpenHandsEvents,
        Format::OpenHandsOutput,
        Format::Vcr,
        Format::ClaudeCode,
        Format::Codex,
        Format::MessageList,
    ];

    pub fn adapter(self) -> &'static dyn Adapter {
        self.0
    }

    /// The stable name written into the store (`runs.format`, `--format`).
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// The family name used as `source` in the corpus (one name per framework).
    pub fn family(self) -> &'static str {
        self.0.family()
    }

    /// The format of this name.
    pub fn named(name: &str) -> Option<Format> {
        Format::ALL.iter().copied().find(|f| f.name() == name)
    }

    /// Guess the format of the file at `path` from its first bytes, `head` ([`read_head`]'s):
    /// as [`Format::detect`], and when no format recognises the head and the file is longer than
    /// it, from a second look past it (`Adapter::detect_past_head`).
    ///
    /// [`read_head`]: crate::ingest::read_head
    pub fn detect_file(path: &Path, head: &[u8]) -> Option<Format> {
        if let Some(format) = Format::detect_in(head, Some(path)) {
            return Some(format);
        }
        let longer = std::fs::metadata(path).is_ok_and(|m| m.len() > head.len() as u64);
        if head.is_empty() || !longer {
            return None;
        }
        let text = String::from_utf8_lossy(head);
        let head = Head {
            bytes: head,
            text: text.trim_start_matches('\u{feff}').trim_start(),
            path: Some(path),
        };
        let mut weak = None;
        for &format in Format::ALL {
            match format.0.detect_past_head(&head, path) {
                Match::Strong => return Some(format),
                Match::Weak if weak.is_none() => weak = Some(format),
                _ => {}
            }
        }
        weak
    }

    /// Guess the format from the first bytes of a file (at least a few KiB when available).
    /// Returns `None` when nothing matches; the caller quarantines the file.
    pub fn detect(head: &[u8]) -> Option<Format> {
        Format::detect_in(head, None)
    }

    /// The input bytes a stored row (a run or an event) takes in this format, when it is
    /// dense enough in rows that a store plans its parts by rows as well as bytes.
    pub fn input_bytes_per_row(self) -> Option<u64> {
        self.0.input_bytes_per_row()
    }

    /// [`Format::detect`], with the file the head is of when there is one.
    fn detect_in(head: &[u8], path: Option<&Path>) -> Option<Format> {
        let text = String::from_utf8_lossy(head);
        let head = Head {
            bytes: head,
            text: text.trim_start_matches('\u{feff}').trim_start(),
            path,
        };
        let mut weak = None;
        for &format in Format::ALL {
            match format.0.detect(&head) {
                Match::Strong => return Some(format),
                Match::Weak if weak.is_none() => weak = Some(format),
                _ => {}
            }
        }
        weak
    }
}

/// Why no format recognised a file, from its head, in a few words: what the content is, and
/// for JSON what it holds at its top level (a format is recognised by its telltale keys).
pub fn why_unrecognised(head: &[u8]) -> String {
    let text = String::from_utf8_lossy(head);
    let text = text.trim_start_matches('\u{feff}').trim_start();
    if head.starts_with(b"PK\x03\x04") {
        return "a ZIP archive that is not an Inspect .eval log".to_string();
    }
    let quoted = |s: &str| format!("{:?}", s.chars().take(24).collect::<String>());
    match text.chars().next() {
        None => "nothing but blanks".to_string(),
        Some('{') => match top_keys(text.as_bytes()) {
            keys if keys.is_empty() => {
                "a JSON object with no keys, or one broken at its start".to_string()
            }
            keys => {
                let shown: Vec<String> = keys.iter().take(4).map(|k| format!("{k:?}")).collect();
                let more = if keys.len() > 4 { ", ..." } else { "" };
                format!(
                    "a JSON object whose keys ({}{more}) are no format's",
                    shown.join(", ")
                )
            }
        },
        Some('[') => "a JSON list whose items are no format's".to_string(),
        Some(_) if std::str::from_utf8(head).is_err() && !text.is_empty() => {
            "binary content, not text".to_string()
        }
        Some(_) => format!(
            "text that no format starts like (it starts with {})",
            quoted(text)
        ),
    }
}

/// The top-level keys of a JSON object, as far as the head holds them.
fn top_keys(text: &[u8]) -> Vec<String> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    struct Keys<'a>(&'a mut Vec<String>);
    impl<'de> Visitor<'de> for Keys<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                self.0.push(key);
                map.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
    }
    let mut keys = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(text);
    // A head cut inside the object ends the walk with an error: the keys read so far stand.
    let _ = de.deserialize_map(Keys(&mut keys));
    keys
}

impl PartialEq for Format {
    fn eq(&self, other: &Format) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Format {}

impl std::hash::Hash for Format {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state);
    }
}

impl PartialOrd for Format {
    fn partial_cmp(&self, other: &Format) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Format {
    fn cmp(&self, other: &Format) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl std::fmt::Debug for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        for (i, f) in Format::ALL.iter().enumerate() {
            assert_eq!(Format::named(f.name()), Some(*f));
            assert!(Format::ALL[..i].iter().all(|g| g.name() != f.name()));
        }
        assert_eq!(Format::named("nope"), None);
    }

    #[test]
    fn a_sure_format_beats_an_earlier_unsure_one() {
        // A Recording-like document (a snapshot naming agentfootprint events) that is also a
        // tau2 results document: tau2 is sure, the Recording only recognises the shape.
        let head = br#"{"snapshot": {"x": "agentfootprint.agent"}, "simulations": []}"#;
        assert_eq!(Format::detect(head), Some(Format::Tau2));
        let head = br#"{"snapshot": {"x": "agentfootprint.agent"}}"#;
        assert_eq!(Format::detect(head), Some(Format::AgentfootprintRecording));
        // A list holding both shapes is tau-bench's: it comes first.
        let head = br#"[{"traj": [], "messages": [], "task_id": 1}]"#;
        assert_eq!(Format::detect(head), Some(Format::TauBench));
        // A JSON object is never a cassette, even with the word in it.
        assert_eq!(Format::detect(b"{\"a\": \"x\ninteractions:\"}"), None);
        assert_eq!(
            Format::detect(b"interactions:\n- request: {}\n"),
            Some(Format::Vcr)
        );
    }
}
