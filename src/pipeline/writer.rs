//! The writing stage of an ingest: each file's messages taken in input order, fragments joined
//! by the stitchers, conversations stored (each run once), quarantine entries filed and the
//! counts kept, and the store's manifest made at the end.

use crate::ingest::{Locator, Quarantined, Severity};
use crate::model::Conversation;
use crate::store::{Counts, InputEntry, Origin, StoreManifest, StoreWriter};
use hashbrown::{HashMap, HashSet};
use std::io::{self, Write};
use std::sync::mpsc::Receiver;
use std::time::Instant;

use super::queue::{ByteBound, TapQueue};
use super::reader::Message;
use super::run_keys::RunKeys;
use super::tap::TapFiles;

/// An id as the writer remembers it: the first 128 bits of its SHA-256, about 20 bytes with
/// its table slot where the id's string took about 60. A collision would store a run as a
/// duplicate of another, or count two conversations as one, so the digest is a cryptographic
/// one: ids are recorded text, and a crafted pair of ids must not be able to hide a run.
pub(super) fn id_key(id: &str) -> u128 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(id.as_bytes());
    let mut first = [0u8; 16];
    first.copy_from_slice(&digest[..16]);
    u128::from_le_bytes(first)
}

/// [`id_key`] as two halves, aligned to 8: the key of a map whose values are narrower than 16
/// bytes.
pub(super) fn halves(key: u128) -> [u64; 2] {
    [key as u64, (key >> 64) as u64]
}

/// The runs a store holds already, by their ids' [`halves`], with the events each holds: an
/// append to a store of millions of runs holds one entry a run.
pub(super) type HeldRuns = HashMap<[u64; 2], u32>;

/// The rows (runs plus events) an ingest has stored of each conversation, by [`id_key`]: a
/// night holds hundreds of thousands of conversations, and the map grows with it. A slot is 24
/// bytes (the key as two `u64`s: a `u128` is aligned to 16 and would pad it to 32), where an
/// id's string took 32 with its count and about 40 more on the heap.
#[derive(Default)]
pub(super) struct ConversationRows(HashMap<[u64; 2], u64>);

impl ConversationRows {
    /// The key of conversation `id` in the map: worked out once per conversation read, as it
    /// is a SHA-256.
    pub(super) fn key(id: &str) -> [u64; 2] {
        halves(id_key(id))
    }

    /// The rows stored of the conversation of `key` so far (0 if none).
    pub(super) fn get(&self, key: [u64; 2]) -> u64 {
        self.0.get(&key).copied().unwrap_or(0)
    }

    pub(super) fn contains(&self, key: [u64; 2]) -> bool {
        self.0.contains_key(&key)
    }

    /// Count `rows` more of the conversation of `key`; returns whether it is the first of it.
    pub(super) fn add(&mut self, key: [u64; 2], rows: u64) -> bool {
        let mut first = false;
        *self.0.entry(key).or_insert_with(|| {
            first = true;
            0
        }) += rows;
        first
    }

    /// The conversations stored.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

/// Run the stitcher and turn what it built into the writer's messages.
pub(super) fn stitched(
    stitchers: &std::cell::RefCell<Stitchers>,
    step: impl FnOnce(&mut Stitchers, &mut crate::ingest::Collect),
) -> Vec<Message> {
    let mut out = crate::ingest::Collect::default();
    step(&mut stitchers.borrow_mut(), &mut out);
    let quarantined = out.quarantined.into_iter().map(Message::Quarantine);
    let built = out.conversations.into_iter().map(|(mut c, record)| {
        super::fill_digests(&mut c);
        Message::Conversation(c, record, 0)
    });
    quarantined.chain(built).collect()
}

/// One stitcher per format whose conversations span files, made when its first fragment
/// arrives; fragments reach them in input order.
#[derive(Default)]
pub(super) struct Stitchers(Vec<(crate::ingest::Format, Box<dyn crate::ingest::Stitch>)>);

impl Stitchers {
    pub(super) fn add(
        &mut self,
        fragment: crate::ingest::Fragment,
        out: &mut crate::ingest::Collect,
    ) {
        let format = fragment.format;
        let at = match self.0.iter().position(|(f, _)| *f == format) {
            Some(at) => at,
            None => match format.adapter().stitcher() {
                Some(stitch) => {
                    self.0.push((format, stitch));
                    self.0.len() - 1
                }
                None => unreachable!("{format} hands over fragments without a stitcher"),
            },
        };
        self.0[at].1.add(fragment, out);
    }

    pub(super) fn finish(&mut self, out: &mut crate::ingest::Collect) {
        for (_, stitch) in &mut self.0 {
            stitch.finish(out);
        }
    }
}

/// The runs of a conversation left out at the rows-per-conversation limit: where the first
/// was read, and how many runs and rows.
pub(super) struct LeftOut {
    input: usize,
    record: u64,
    runs: u64,
    rows: u64,
}

/// The writer stage: takes each file's messages in input order, stores conversations (each run
/// id once), files quarantine entries and keeps the counts.
pub(super) struct Writer<'a> {
    /// The input index each file is stored under (its position, or in a shard its position
    /// in the whole ingest).
    pub(super) input_indices: &'a [u32],
    /// The input index of conversations built once every input was read.
    pub(super) unfinished_index: u32,
    /// Building what the stitchers could not complete, after the last input.
    pub(super) finishing: bool,
    /// A store that holds nothing is no error (a shard's records may all be elsewhere).
    pub(super) may_be_empty: bool,
    pub(super) store: StoreWriter,
    pub(super) quarantine: io::BufWriter<std::fs::File>,
    pub(super) tap_files: Option<&'a TapFiles>,
    pub(super) tap_queue: &'a TapQueue,
    pub(super) displays: &'a [String],
    pub(super) sizes: &'a [u64],
    pub(super) counts: Counts,
    pub(super) entries: Vec<InputEntry>,
    /// The runs stored so far by this ingest, by [`id_key`]: a night holds millions of run
    /// ids, so most of these keys wait in spill files (see [`RunKeys`]).
    pub(super) seen_runs: RunKeys,
    /// The runs an earlier generation of the store holds, with their events: one read again is
    /// a duplicate, unless it has more events (then it replaces the stored one).
    pub(super) held_runs: HeldRuns,
    /// The held runs replaced by a longer copy.
    pub(super) replaced_runs: HashSet<String>,
    /// Rows (runs plus events) stored of each conversation so far.
    pub(super) seen_conversations: ConversationRows,
    /// [`crate::ingest::Limits::conversation_rows`], and what was left out of the
    /// conversations that reached it.
    pub(super) conversation_row_limit: u64,
    pub(super) left_out: HashMap<String, LeftOut>,
    /// The most rows a part holds before it is split.
    pub(super) part_rows: u64,
    /// The first error; messages after it are received (readers must not block) but not used.
    pub(super) fatal: Option<io::Error>,
    /// The first reasons records were dropped for, for the message when nothing could be read.
    pub(super) first_reasons: Vec<String>,
    /// The first files no format recognised, with why, for the same message.
    pub(super) unrecognised: Vec<String>,
}

impl Writer<'_> {
    /// Take every message of input `i`, joining fragments with the stitchers; after the last
    /// input, the traces that never became complete are built.
    pub(super) fn drain_file(
        &mut self,
        i: usize,
        rx: Receiver<Message>,
        bound: &ByteBound,
        stitchers: &std::cell::RefCell<Stitchers>,
        last: bool,
    ) {
        let mut entry = InputEntry {
            path: self.displays[i].clone(),
            size: self.sizes[i],
            ..InputEntry::default()
        };
        let messages = rx.into_iter().flat_map(|m| match m {
            Message::Fragment(fragment) => stitched(stitchers, |s, out| s.add(fragment, out)),
            other => vec![other],
        });
        for message in messages {
            self.use_message(i, message, bound, &mut entry);
        }
        if last {
            self.finishing = true;
            for message in stitched(stitchers, |s, out| s.finish(out)) {
                self.use_message(i, message, bound, &mut entry);
            }
            self.finishing = false;
        }
        self.counts.records_read += entry.records;
        self.counts.records_quarantined += entry.quarantined;
        self.entries.push(entry);
    }

    pub(super) fn use_message(
        &mut self,
        i: usize,
        message: Message,
        bound: &ByteBound,
        entry: &mut InputEntry,
    ) {
        let Some(message) = self.receive(message, bound) else {
            return;
        };
        if self.fatal.is_some() {
            return;
        }
        if let Err(e) = self.take(i, message, entry) {
            self.fatal = Some(e);
        }
    }

    /// A message as the writer uses it: a conversation whose digests were being worked out
    /// arrives with them (`None` when that failed, which is fatal). Once received, a
    /// conversation's bytes leave its file's bound, so the reader may read on whatever becomes
    /// of it (the store writer and the tap's queue have bounds of their own).
    pub(super) fn receive(&mut self, message: Message, bound: &ByteBound) -> Option<Message> {
        let message = match message {
            Message::Digesting(digested, record, size) => match digested.recv() {
                Ok(conversation) => Message::Conversation(conversation, record, size),
                Err(_) => {
                    // The worker panicked: a bug, reported as such.
                    bound.release(size);
                    self.fatal.get_or_insert_with(|| {
                        io::Error::other("working out the digests of a conversation failed")
                    });
                    return None;
                }
            },
            other => other,
        };
        if let Message::Conversation(_, _, size) = &message {
            bound.release(*size);
        }
        Some(message)
    }

    /// Use one message of input `i`.
    pub(super) fn take(
        &mut self,
        i: usize,
        message: Message,
        entry: &mut InputEntry,
    ) -> io::Result<()> {
        match message {
            Message::Records(n) => {
                entry.records += n;
                Ok(())
            }
            Message::Quarantine(q) => {
                match q.severity {
                    Severity::Dropped => {
                        entry.quarantined += 1;
                        if self.first_reasons.len() < 3 {
                            self.first_reasons.push(format!("{}: {}", q.file, q.reason));
                        }
                    }
                    Severity::Partial => self.counts.partial_notes += 1,
                    // From a reader, a skipped entry is a file no format recognised (the
                    // inputs passed over are filed before reading starts).
                    Severity::Skipped => {
                        self.counts.unrecognised_files += 1;
                        if self.unrecognised.len() < 3 {
                            let why = q
                                .reason
                                .trim_start_matches("not a recognised recording format: ");
                            self.unrecognised.push(format!("{} ({why})", q.file));
                        }
                    }
                    Severity::Duplicate => {}
                }
                write_quarantine(&mut self.quarantine, &q)
            }
            Message::Conversation(conversation, record, _) => {
                self.store_conversation(i, conversation, record)
            }
            Message::Fragment(_) => Ok(()),
            Message::Digesting(..) => unreachable!("received as a conversation first"),
            Message::Done {
                format,
                sha256,
                decompressed,
                etag,
                error,
            } => {
                entry.format = format.map(|f| f.name().to_string());
                entry.sha256 = sha256;
                entry.etag = etag;
                if let Some((compression, bytes)) = decompressed {
                    entry.compression = Some(compression.name().to_string());
                    entry.decompressed_size = Some(bytes);
                }
                match error {
                    Some(e) => Err(io::Error::other(e)),
                    None => Ok(()),
                }
            }
        }
    }

    /// Store a conversation of input `i` without the runs already read from an earlier input
    /// (each quarantined as a duplicate), and queue it for the tap when the store holds it
    /// exactly as read.
    pub(super) fn store_conversation(
        &mut self,
        i: usize,
        mut conversation: Conversation,
        record: u64,
    ) -> io::Result<()> {
        let mut result = Ok(());
        if let (cleared @ 1.., Some(first)) = conversation.clear_impossible_times() {
            self.counts.partial_notes += 1;
            let q = Quarantined {
                file: self.displays[i].clone(),
                locator: Locator::Record(record),
                severity: Severity::Partial,
                reason: format!(
                    "conversation {:?}: {cleared} recorded time(s) lie outside the years 1990 to \
                     2200 (the first, {first}, read as milliseconds since 1970: a unit mistake?) \
                     and are stored as absent",
                    conversation.id
                ),
                format: None,
            };
            result = write_quarantine(&mut self.quarantine, &q);
        }
        let mut skipped = Vec::new();
        let (seen, held, replaced) = (
            &mut self.seen_runs,
            &mut self.held_runs,
            &mut self.replaced_runs,
        );
        let mut spill_failed = None;
        let mut insert = |key| {
            seen.insert(key).unwrap_or_else(|e| {
                // The run is kept, and the ingest fails on the error after this conversation.
                spill_failed.get_or_insert(e);
                true
            })
        };
        conversation.runs.retain(|r| {
            let key = id_key(&r.run_id);
            let fresh = match held.get(&halves(key)) {
                // Stored cut off (its log was still being written), now read whole.
                Some(&stored) if r.events.len() as u64 > stored as u64 => {
                    held.remove(&halves(key));
                    replaced.insert(r.run_id.clone());
                    insert(key)
                }
                Some(_) => false,
                None => insert(key),
            };
            if !fresh {
                skipped.push(r.run_id.clone());
            }
            fresh
        });
        if let Some(e) = spill_failed {
            result = result.and(Err(e));
        }
        let mut skipped_none = skipped.is_empty();
        let key = ConversationRows::key(&conversation.id);
        if self.cut_to_the_row_limit(i, &mut conversation, key, record) {
            skipped_none = false;
        }
        for run_id in skipped {
            self.counts.duplicate_runs += 1;
            let q = Quarantined::duplicate_run(&self.displays[i], record, &run_id);
            result = result.and(write_quarantine(&mut self.quarantine, &q));
        }
        let origin = Origin {
            input_index: if self.finishing {
                self.unfinished_index
            } else {
                self.input_indices[i]
            },
            record_index: record,
        };
        if conversation.runs.is_empty() {
            if let Some(files) = self.tap_files {
                files.mark_stale(&conversation.id);
            }
            return result;
        }
        let rows: u64 = conversation
            .runs
            .iter()
            .map(|r| 1 + r.events.len() as u64)
            .sum();
        let first = self.seen_conversations.add(key, rows);
        self.counts.user_turn_runs +=
            conversation.runs.iter().filter(|r| r.turn >= 1).count() as u64;
        let result = result.and(self.store.write(&conversation, origin));
        // The tap's view stands only if the store holds the conversation exactly as read: in
        // one piece, with all of its runs.
        if let Some(files) = self.tap_files {
            if first && skipped_none {
                self.tap_queue.push(conversation, origin);
            } else {
                files.mark_stale(&conversation.id);
            }
        }
        result
    }

    /// Leave out the runs that would take the conversation past the rows-per-conversation limit,
    /// counting what earlier pieces of it stored, and note what was left out
    /// ([`Writer::note_left_out`]). Runs are kept in the order read, up to the first that does
    /// not fit, and once one is left out so are all later pieces of the conversation. Returns
    /// whether runs were left out.
    pub(super) fn cut_to_the_row_limit(
        &mut self,
        i: usize,
        conversation: &mut Conversation,
        key: [u64; 2],
        record: u64,
    ) -> bool {
        let limit = self.conversation_row_limit;
        let fit = if self.left_out.contains_key(&conversation.id) {
            0
        } else {
            let mut rows = self.seen_conversations.get(key);
            conversation
                .runs
                .iter()
                .take_while(|r| {
                    rows += 1 + r.events.len() as u64;
                    rows <= limit
                })
                .count()
        };
        if fit == conversation.runs.len() {
            return false;
        }
        let cut = conversation.runs.split_off(fit);
        let first = LeftOut {
            input: i,
            record,
            runs: 0,
            rows: 0,
        };
        let left = self
            .left_out
            .entry(conversation.id.clone())
            .or_insert(first);
        left.runs += cut.len() as u64;
        left.rows += cut.iter().map(|r| 1 + r.events.len() as u64).sum::<u64>();
        true
    }

    /// One partial note per conversation that reached the rows-per-conversation limit, at the
    /// record where it did, in input order.
    pub(super) fn note_left_out(&mut self) -> io::Result<()> {
        let limit = self.conversation_row_limit;
        let mut list: Vec<(&String, &LeftOut)> = self.left_out.iter().collect();
        list.sort_by_key(|(id, l)| (l.input, l.record, id.as_str()));
        for (id, l) in list {
            let stored = self.seen_conversations.get(ConversationRows::key(id));
            let q = Quarantined {
                file: self.displays[l.input].clone(),
                locator: Locator::Record(l.record),
                severity: Severity::Partial,
                reason: format!(
                    "conversation {id:?}: {} run(s) from here on ({} rows with their events) are \
                     not stored: they would take it past the {limit} rows-per-conversation \
                     limit (runs plus their events; the audit holds a conversation whole); \
                     {stored} rows of it are stored",
                    l.runs, l.rows,
                ),
                format: None,
            };
            self.counts.partial_notes += 1;
            write_quarantine(&mut self.quarantine, &q)?;
        }
        Ok(())
    }

    /// Returns the manifest, and how the store's parts were split by rows.
    pub(super) fn finish(
        mut self,
        skipped_inputs: u64,
        started: Instant,
    ) -> io::Result<(StoreManifest, crate::store::split::Split)> {
        self.note_left_out()?;
        self.quarantine.flush()?;
        drop(self.quarantine);
        let mut counts = self.counts;
        counts.conversations = self.seen_conversations.len() as u64;
        counts.runs = self.store.runs_written;
        counts.events = self.store.events_written;
        counts.landings = self.store.landings_written;
        counts.records_stored = counts.records_read - counts.records_quarantined;
        counts.skipped_inputs = skipped_inputs;
        if counts.records_stored == 0 && !self.may_be_empty {
            // Nothing to store: no output is left that looks like a (possibly empty) result.
            let why = if counts.records_read == 0 && counts.unrecognised_files > 0 {
                let more = counts.unrecognised_files - self.unrecognised.len() as u64;
                format!(
                    "no adapter recognised {} of {} file(s): {}{}",
                    counts.unrecognised_files,
                    counts.files,
                    self.unrecognised.join(", "),
                    if more > 0 {
                        format!(", and {more} more")
                    } else {
                        String::new()
                    }
                )
            } else if counts.records_read == 0 {
                format!("no records found in {} file(s)", counts.files)
            } else {
                format!(
                    "all {} record(s) were quarantined; the first: {}",
                    counts.records_read,
                    self.first_reasons.join("; ")
                )
            };
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("nothing could be read: {why}"),
            ));
        }
        let (part_names, split) = if self.may_be_empty {
            // A shard: split once merged, as the whole store would be.
            (self.store.finish()?, crate::store::split::Split::default())
        } else {
            let dir = self.store.dir().to_path_buf();
            let parts = self.store.part_count();
            self.store.finish()?;
            let split = crate::store::split::split_large_parts(&dir, parts, self.part_rows)?;
            (crate::store::write::part_names(split.parts), split)
        };
        let manifest = StoreManifest {
            engine: crate::store::ENGINE.into(),
            engine_version: crate::store::ENGINE_VERSION.into(),
            store_schema_version: crate::store::schema::STORE_SCHEMA_VERSION,
            parts: part_names,
            inputs: self.entries,
            counts,
            seconds: started.elapsed().as_secs_f64(),
            digests: Some(super::store_spec().digest_entries()),
            envelope_types: Some(
                super::store_spec()
                    .envelope_types
                    .iter()
                    .map(|t| t.to_string())
                    .collect(),
            ),
            store_id: None,
            generations: None,
            retired: Vec::new(),
        };
        Ok((manifest, split))
    }
}

/// The quarantine entries of the inputs passed over before reading (`path`, why).
pub(super) fn write_skipped(out: &mut impl Write, skipped: &[(String, String)]) -> io::Result<()> {
    for (path, why) in skipped {
        write_quarantine(
            out,
            &Quarantined {
                file: path.clone(),
                locator: Locator::File,
                severity: Severity::Skipped,
                reason: why.clone(),
                format: None,
            },
        )?;
    }
    Ok(())
}

pub(super) fn write_quarantine(out: &mut impl Write, q: &Quarantined) -> io::Result<()> {
    serde_json::to_writer(&mut *out, q).map_err(io::Error::other)?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    /// The first 128 bits of SHA-256, little-endian: the vector of FIPS 180-2 for "abc".
    #[test]
    fn an_id_key_is_the_first_half_of_the_ids_sha256() {
        let digest: [u8; 16] = [
            0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae,
            0x22, 0x23,
        ];
        assert_eq!(super::id_key("abc"), u128::from_le_bytes(digest));
        assert_ne!(super::id_key("abc"), super::id_key("abd"));
        // Low half first, as the key's little-endian bytes read.
        assert_eq!(super::halves((1u128 << 64) | 7), [7, 1]);
    }

    #[test]
    fn conversation_rows_add_up_by_id() {
        use super::ConversationRows;
        let [c1, c2, c3] = ["c-1", "c-2", "c-3"].map(ConversationRows::key);
        let mut rows = ConversationRows::default();
        assert!(rows.add(c1, 3));
        assert!(!rows.add(c1, 4));
        assert!(rows.add(c2, 1));
        assert_eq!((rows.get(c1), rows.get(c2), rows.get(c3)), (7, 1, 0));
        assert!(rows.contains(c2) && !rows.contains(c3));
        assert_eq!(rows.len(), 2);
    }
}
