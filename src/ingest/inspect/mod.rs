//! Inspect AI eval logs, in both of the shapes Inspect writes:
//! - a JSON log `{version, status, eval, plan, results, stats, samples[], reductions}`;
//! - an `.eval` ZIP archive with a `header.json` (or, while the eval runs,
//!   `_journal/start.json`) and one member `samples/<id>_epoch_<n>.json` per sample, each
//!   compressed with DEFLATE or zstd.
//!
//! A sample (id and epoch) is one conversation, `<task>/<eval id>/<sample id>/<epoch>`. Its
//! `messages` are the trajectory, built into runs by [`trajectory::build`]: assistant
//! `tool_calls[{id, function, arguments}]` paired with the tool messages that answer them
//! (`tool_call_id`, `function`, `error`) are the landings. The sample's tool events
//! (`{event: "tool", id, function, arguments, result, error, timestamp, completed,
//! working_time}`) add what the messages lack: when each call started, how long it took, and
//! whether it failed.
//!
//! Inspect keeps a sample compact in two ways, both undone here:
//! - content over a size limit is replaced by `attachment://<hash>` and stored once in the
//!   sample's `attachments` map. A reference the map does not hold is kept as it is written and
//!   reported as a partial quarantine entry.
//! - newer logs pool the messages that model events repeat (`events_data.messages`) and give
//!   each model event ranges into the pool (`input_refs: [[start, end), ...]`) instead of its
//!   input. A sample whose `messages` list is missing or empty is rebuilt from its last
//!   top-level model event (the pooled or inline input, then the output message), with a note.
//!
//! Logs reach gigabytes, so exactly one sample is held at a time: the JSON log is read with a
//! `json_scan::Scanner`, which hands each sample over as bytes in memory (unneeded keys are
//! skipped unread, model event inputs are kept only for the latest event), and archive members
//! are decompressed one after the other. Records are samples. A sample (or member) over the
//! record limit of [`Limits`] is quarantined unread and the next one is read; Python's `NaN` and
//! `Infinity` are read as `null`, with a note on the sample.

mod archive;
mod json_log;
mod sample;
#[cfg(test)]
mod tests;

use std::fs::File;
use std::io::{self, Read};

use crate::ingest::json_pick::first_key;
use crate::ingest::{Input, Sink};

/// Read one Inspect log, an `.eval` archive or a JSON log.
pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let mut magic = [0u8; 2];
    let mut file = File::open(input.path)?;
    let mut got = 0;
    while got < magic.len() {
        let n = file.read(&mut magic[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    drop(file);
    if got == 2 && &magic == b"PK" {
        archive::read_archive(input, sink)
    } else {
        json_log::read_json(input, sink)
    }
}

/// Does the start of a file look like an `.eval` archive: a ZIP whose first member is one that
/// Inspect writes?
pub(crate) fn is_eval_archive(head: &[u8]) -> bool {
    if !head.starts_with(b"PK\x03\x04") || head.len() < 30 {
        return false;
    }
    let name_len = u16::from_le_bytes([head[26], head[27]]) as usize;
    let Some(name) = head.get(30..30 + name_len) else {
        return false;
    };
    let name = String::from_utf8_lossy(name);
    matches!(
        name.as_ref(),
        "header.json" | "summaries.json" | "reductions.json"
    ) || name.starts_with("_journal/")
        || name.starts_with("samples/")
}

/// Does the start of a file look like a JSON log? Inspect writes `version` first and the `eval`
/// spec soon after it.
pub(crate) fn is_json_log(text: &str) -> bool {
    first_key(text) == Some("version")
        && text.contains("\"eval\"")
        && (text.contains("\"task\"") || text.contains("\"samples\""))
}

/// Inspect AI eval logs: a JSON log or an `.eval` ZIP archive.
pub struct InspectAdapter;

impl crate::ingest::Adapter for InspectAdapter {
    fn name(&self) -> &'static str {
        "inspect-ai"
    }
    fn family(&self) -> &'static str {
        "inspect-ai"
    }
    fn about(&self) -> &'static str {
        "Inspect AI eval logs: a JSON log or an .eval ZIP archive"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        crate::ingest::Match::strong_if(is_eval_archive(head.bytes) || is_json_log(head.text))
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> std::io::Result<()> {
        read(input, sink)
    }
}

impl crate::ingest::Format {
    #[allow(non_upper_case_globals)]
    pub const InspectAi: crate::ingest::Format = crate::ingest::Format(&InspectAdapter);
}
