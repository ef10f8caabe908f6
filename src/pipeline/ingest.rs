//! The ingest job: find input files, detect their formats, read them in parallel, write the
//! store in a deterministic order, and account for every record. This file runs the stages;
//! what a reader does is [`super::reader`]'s, what the writer does [`super::writer`]'s.
//!
//! Files are read by worker threads (up to `threads` at once); each file has its own bounded
//! channel, and one writer drains the channels in input order. So memory is bounded (a worker
//! waits when its file's channel is full) and the store's content does not depend on the thread
//! count.
//!
//! A caller may hand each stored conversation on to a [`Tap`] running on threads of its own
//! (the audit of raw inputs checks conversations there while the writer goes on).

use crate::ingest::Format;
use crate::store::atomic::{self, write_file, AtomicDir};
use crate::store::{Counts, StoreManifest, StoreWriter};
use hashbrown::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::Instant;

use super::inputs::{find_inputs, spool, FoundInputs};
use super::queue::{ByteBound, TapQueue};
use super::reader::{read_one, Inputs, Message, Reading};
use super::tap::{Tap, TapFiles, Tapped};
use super::writer::{write_skipped, ConversationRows, HeldRuns, Stitchers, Writer};

/// Input bytes per events part (an audit holds one part in memory at a time, so this bounds its
/// memory whatever the size of the input). Parts share the store writer's buffer budget, so
/// more, smaller parts make smaller row groups, which read back slower; 128 MB keeps a part's
/// audit well inside the memory budget.
const PART_INPUT_BYTES: u64 = 128 << 20;
/// Messages a file may have in flight before its reader waits for the writer (conversations are
/// bounded by bytes first: [`FILE_CHANNEL_BYTES`]).
const CHANNEL_DEPTH: usize = 4096;
/// Files past the one being written that readers may have started (each holds a channel of
/// [`CHANNEL_DEPTH`] slots, about 800 KB, and up to [`FILE_CHANNEL_BYTES`] of conversations).
const READ_AHEAD_FILES: usize = 16;
/// Bytes of conversations a file may have in flight before its reader waits for the writer.
/// The writer drains files in input order, so this is how far a reader of a later file gets
/// ahead: far enough to keep a core busy while the file being written waits on its reader;
/// bounded in bytes, not conversations, as agentfootprint sessions are a hundred times the size
/// of tau2 simulations. (Unit tests use a few KB, so their small inputs make readers wait too.)
const FILE_CHANNEL_BYTES: usize = if cfg!(test) { 4 << 10 } else { 16 << 20 };

#[derive(Debug, Clone, Default)]
pub struct IngestOptions {
    /// Read every file as this format instead of detecting it.
    pub format: Option<Format>,
    pub threads: usize,
    /// Show a progress bar (only drawn when stderr is a terminal).
    pub progress: bool,
    /// What an adapter may hold at once (the record limit).
    pub limits: crate::ingest::Limits,
    /// Input bytes per store part; 0 for the default (128 MB). Smaller parts are smaller units
    /// for an engine that distributes the parts of a store.
    pub part_bytes: u64,
    /// The most rows (runs plus events) a part holds before it is split; 0 for the default
    /// (`crate::store::split::PART_ROWS`).
    pub part_rows: u64,
}

/// What an ingest did.
#[derive(Debug, Clone)]
pub struct IngestSummary {
    pub store: PathBuf,
    pub manifest: StoreManifest,
}

/// Run an ingest of `inputs` (files and folders, local or object-storage URLs, plain or
/// compressed) into the store directory `out`, written whole or not at all; a folder that
/// traceaudit did not write is never replaced.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use traceaudit::{ingest, IngestOptions, Store};
///
/// let work = tempfile::tempdir()?;
/// let out = work.path().join("store");
/// let summary = ingest(&["testdata/tau2".into()], &out, &IngestOptions::default())?;
/// let counts = &summary.manifest.counts;
/// // Counts reconcile: every record read is stored or quarantined with its reason.
/// assert_eq!(counts.records_read, counts.records_stored + counts.records_quarantined);
/// // The store reads back a part at a time.
/// let store = Store::open(&out)?;
/// let conversations: usize =
///     (0..store.parts).map(|p| store.read_part(p).map(|c| c.len())).sum::<Result<_, _>>()?;
/// assert_eq!(conversations as u64, counts.conversations);
/// # Ok(())
/// # }
/// ```
pub fn ingest(inputs: &[PathBuf], out: &Path, opts: &IngestOptions) -> io::Result<IngestSummary> {
    if super::remote::is_url(out) {
        atomic::refuse_overlap(out, inputs)?;
        return super::remote::write_to_bucket(out, |local| {
            let mut summary = ingest(inputs, local, opts)?;
            summary.store = super::remote::shown(out);
            Ok(summary)
        });
    }
    ingest_tapped(inputs, out, opts, None).map(|(summary, _)| summary)
}

/// [`ingest`], with `tap` run on every conversation once it is stored (on `threads` threads of
/// its own, fed through a bounded queue); what it keeps is filed by store part under the given
/// directory.
pub fn ingest_tapped(
    inputs: &[PathBuf],
    out: &Path,
    opts: &IngestOptions,
    tap: Option<(&dyn Tap, &Path)>,
) -> io::Result<(IngestSummary, Option<Tapped>)> {
    let started = Instant::now();
    atomic::refuse_overlap(out, inputs)?;
    let found = find_inputs(inputs)?;
    refuse_no_files(&found)?;
    ingest_found(&found, out, opts, tap, None, started)
}

/// How one shard of a distributed ingest ([`super::shards`]) differs from a whole ingest: the
/// whole ingest's part count, its input index for each of the shard's files, and its last
/// input index (traces never completed are built after the last input, so take its index).
/// A shard may hold nothing: another shard may hold every record.
pub(super) struct Shard<'a> {
    pub parts: u32,
    pub indices: &'a [u32],
    pub last_index: u32,
}

/// The ingest of the files `found` lists, whole or as a shard.
pub(super) fn ingest_found(
    found: &FoundInputs,
    out: &Path,
    opts: &IngestOptions,
    tap: Option<(&dyn Tap, &Path)>,
    shard: Option<&Shard<'_>>,
    started: Instant,
) -> io::Result<(IngestSummary, Option<Tapped>)> {
    let staging = AtomicDir::create(out, &crate::store::store_layout())?;
    let mut written = ingest_into(found, staging.path(), opts, tap, shard, None, started)?;
    if shard.is_none() {
        crate::store::generations::first_generation(&mut written.manifest, out);
    }
    let text = serde_json::to_string_pretty(&written.manifest).map_err(io::Error::other)?;
    write_file(&staging.path().join("manifest.json"), text.as_bytes())?;
    let store = staging.commit()?;
    let tapped = match written.tap_files {
        Some(files) => Some(files.finish()?.refile(&written.split)?),
        None => None,
    };
    Ok((
        IngestSummary {
            store,
            manifest: written.manifest,
        },
        tapped,
    ))
}

/// What an ingest wrote into its directory, before its manifest is: the manifest it will write,
/// how its parts were split, and the tap's files.
pub(super) struct Written {
    pub manifest: StoreManifest,
    pub split: crate::store::split::Split,
    tap_files: Option<TapFiles>,
}

/// How an ingest adds a generation to a store ([`super::append`]): where its inputs' indices
/// start in the store's list, the runs the store holds already with their stored events (a run
/// read again is skipped as a duplicate, unless it now has more events: a log read while it
/// was still being written, then whole), and what to do once every input is read and before
/// the parts are closed (copy in the stored rows of the conversations it continues, but for
/// the runs it replaced).
pub(super) struct Extension<'a> {
    pub first_input: u32,
    pub known_runs: HeldRuns,
    pub before_finish: &'a mut BeforeFinish<'a>,
}

/// What an [`Extension`] does before the parts are closed, given the rows stored of each
/// conversation and the held runs replaced by longer copies.
pub(super) type BeforeFinish<'a> =
    dyn FnMut(&mut StoreWriter, &ConversationRows, &HashSet<String>) -> io::Result<()> + 'a;

/// Ingest the files `found` lists into the directory `dir` (the caller owns its atomicity and
/// writes the manifest).
pub(super) fn ingest_into(
    found: &FoundInputs,
    dir: &Path,
    opts: &IngestOptions,
    tap: Option<(&dyn Tap, &Path)>,
    shard: Option<&Shard<'_>>,
    extension: Option<Extension<'_>>,
    started: Instant,
) -> io::Result<Written> {
    // Streams are copied in first: their size decides the parts, and they can be read once.
    let spool_dir = dir.join(".spool");
    let files = readable_copies(found, &spool_dir)?;
    let remote: Vec<_> = found.files.iter().map(|f| f.remote.clone()).collect();
    let streams: Vec<bool> = found.files.iter().map(|f| f.stream).collect();
    let sizes: Vec<u64> = files
        .iter()
        .zip(&remote)
        .map(|(f, r)| match r {
            Some(r) => r.size,
            None => std::fs::metadata(f).map(|m| m.len()).unwrap_or(0),
        })
        .collect();
    let total_bytes: u64 = sizes.iter().sum();
    let parts = match shard {
        Some(shard) => shard.parts,
        None => {
            let inputs = files.iter().zip(&remote).zip(&sizes);
            let inputs = inputs.map(|((f, r), &size)| (f.as_path(), r.as_ref(), size));
            planned_parts(inputs, opts.part_bytes)
        }
    };
    let store = StoreWriter::create(dir, parts, super::store_spec())?;
    let tap_files = match tap {
        Some((_, dir)) => Some(TapFiles::create(dir, parts)?),
        None => None,
    };
    let tap_queue = TapQueue::new();
    let mut quarantine = io::BufWriter::new(std::fs::File::create(dir.join("quarantine.jsonl"))?);
    write_skipped(&mut quarantine, &found.skipped)?;
    let displays: Vec<String> = found.files.iter().map(|f| f.display.clone()).collect();
    let first_input = extension.as_ref().map_or(0, |e| e.first_input);
    let identity: Vec<u32> = (first_input..first_input + files.len() as u32).collect();
    let (known_runs, mut before_finish) = match extension {
        Some(e) => (e.known_runs, Some(e.before_finish)),
        None => (HashMap::new(), None),
    };
    let mut writer = Writer {
        input_indices: shard.map_or(&identity, |s| s.indices),
        unfinished_index: shard.map_or((first_input + files.len() as u32).saturating_sub(1), |s| {
            s.last_index
        }),
        finishing: false,
        may_be_empty: shard.is_some(),
        store,
        quarantine,
        tap_files: tap_files.as_ref(),
        tap_queue: &tap_queue,
        displays: &displays,
        sizes: &sizes,
        counts: Counts {
            files: files.len() as u64,
            bytes: total_bytes,
            ..Counts::default()
        },
        entries: Vec::with_capacity(files.len()),
        seen_runs: super::run_keys::RunKeys::new(dir),
        held_runs: known_runs,
        replaced_runs: HashSet::new(),
        seen_conversations: Default::default(),
        conversation_row_limit: opts.limits.conversation_rows,
        left_out: HashMap::new(),
        part_rows: part_rows(opts.part_rows),
        fatal: None,
        first_reasons: Vec::new(),
        unrecognised: Vec::new(),
    };
    let progress = crate::progress::bar(opts.progress, total_bytes, "ingest");
    let inputs = Inputs {
        files: &files,
        sizes: &sizes,
        displays: &displays,
        spool_dir: &spool_dir,
        remote: &remote,
        streams: &streams,
    };
    let tap_error = run_stages(&inputs, opts, tap.map(|(t, _)| t), &mut writer, &progress)?;
    if let Some(e) = tap_error {
        return Err(e);
    }
    progress.finish_and_clear();
    if let Some(e) = writer.fatal.take() {
        return Err(e);
    }
    if let Some(before_finish) = before_finish.as_mut() {
        before_finish(
            &mut writer.store,
            &writer.seen_conversations,
            &writer.replaced_runs,
        )?;
    }
    let (manifest, split) = writer.finish(found.skipped.len() as u64, started)?;
    if spool_dir.exists() {
        std::fs::remove_dir_all(&spool_dir)
            .map_err(|e| atomic::with_path(e, "cannot remove", &spool_dir))?;
    }
    Ok(Written {
        manifest,
        split,
        tap_files,
    })
}

/// The most rows a part holds before it is split (`0`: the default).
pub(super) fn part_rows(part_rows: u64) -> u64 {
    if part_rows == 0 {
        crate::store::split::PART_ROWS
    } else {
        part_rows
    }
}

/// The parts of a store of `inputs` (each a local file or an object, and its size): one per
/// `part_bytes` (0: the default) of what they are expected to decompress to, or more when
/// their formats are expected to give more than [`crate::store::split::PART_ROWS`] rows a part
/// ([`Format::input_bytes_per_row`], of the format detected from each input's head). The
/// distributed ingest's plan makes the same count from the same files, whatever format or row
/// limit the readers are given, and a night of up to [`PROBED_OBJECTS`] objects gets the count
/// its local copy gets (past that, or where a probe fails, the objects probed stand for the
/// rest): counted by their sizes alone, dense logs in a bucket got too few parts, each then
/// read back and rewritten to be cut by rows. Each local file is opened once; heads are read
/// only when the inputs could hold more than a part's rows of the densest format (an object's
/// with a ranged request, [`crate::source::object::probe_objects`]).
pub(crate) fn planned_parts<'a>(
    inputs: impl Iterator<Item = (&'a Path, Option<&'a crate::source::object::Remote>, u64)>,
    part_bytes: u64,
) -> u32 {
    use crate::source::compression::{expected_size_by_name, probe, Probe, EXPECTED_RATIO};
    use crate::source::object::probe_objects;
    let part_bytes = resolved_part_bytes(part_bytes);
    let part_rows = u128::from(crate::store::split::PART_ROWS);
    let inputs: Vec<_> = inputs.collect();
    let densest = Format::ALL
        .iter()
        .filter_map(|f| f.input_bytes_per_row())
        .min();
    // An upper bound on the rows: every byte expanded as far as a size is ever assumed to.
    let raw: u64 = inputs.iter().map(|i| i.2).sum();
    let head_bytes = match densest {
        Some(per_row) if u128::from(raw.saturating_mul(EXPECTED_RATIO) / per_row) > part_rows => {
            64 << 10
        }
        _ => 0,
    };
    // Objects are probed together, a few requests in flight at once, and at most
    // `PROBED_OBJECTS` of them, the largest: a night of many small objects is planned from a
    // sample, where a request for each (thousands, at a bucket's latency) could cost more than
    // the rewrite it avoids. With no heads to read, only objects named as compressed are
    // probed (for the size their trailer or header states).
    let mut probed: Vec<usize> = (0..inputs.len())
        .filter(|&k| {
            inputs[k].1.is_some_and(|r| {
                head_bytes > 0 || expected_size_by_name(&r.file_name(), r.size) != r.size
            })
        })
        .collect();
    probed.sort_by_key(|&k| (std::cmp::Reverse(inputs[k].2), k));
    probed.truncate(PROBED_OBJECTS);
    let remotes: Vec<_> = probed.iter().filter_map(|&k| inputs[k].1).collect();
    let mut object_probes: Vec<Option<Probe>> = vec![None; inputs.len()];
    for (k, got) in probed.into_iter().zip(probe_objects(&remotes, head_bytes)) {
        object_probes[k] = got;
    }
    // Bytes expected of the inputs read (or probed), of those of a dense format, and of the
    // objects not probed.
    let (mut bytes, mut dense_rows, mut dense_bytes, mut unprobed) = (0u64, 0u128, 0u64, 0u64);
    for (k, (path, remote, size)) in inputs.into_iter().enumerate() {
        let probe = match remote {
            Some(r) => match object_probes[k].take() {
                Some(probe) => probe,
                None => {
                    unprobed += expected_size_by_name(&r.file_name(), size);
                    continue;
                }
            },
            None => probe(path, size, head_bytes),
        };
        let per_row = Format::detect(&probe.head).and_then(Format::input_bytes_per_row);
        let expected = probe.expected;
        bytes += expected;
        if let Some(per_row) = per_row {
            dense_rows += u128::from(expected / per_row.max(1));
            dense_bytes += expected;
        }
    }
    // The other inputs count as many rows as would fill parts of `part_bytes` exactly, and the
    // objects not probed as many rows a byte as those that were, on average.
    let mut rows =
        dense_rows + u128::from(bytes - dense_bytes) * part_rows / u128::from(part_bytes);
    rows += match bytes {
        0 => u128::from(unprobed) * part_rows / u128::from(part_bytes),
        _ => u128::from(unprobed) * rows / u128::from(bytes),
    };
    let by_bytes = parts_for(bytes + unprobed, part_bytes);
    let by_rows = rows.div_ceil(part_rows.max(1));
    u32::try_from(by_rows.max(u128::from(by_bytes))).unwrap_or(u32::MAX)
}

/// The most objects an ingest's plan probes (two small requests each at most; see
/// [`planned_parts`]).
const PROBED_OBJECTS: usize = 64;

/// `part_bytes` as asked, or the default for 0.
fn resolved_part_bytes(part_bytes: u64) -> u64 {
    if part_bytes == 0 {
        PART_INPUT_BYTES
    } else {
        part_bytes
    }
}

/// The parts of a store of inputs of `total_bytes`, `part_bytes` each (0: the default).
pub(super) fn parts_for(total_bytes: u64, part_bytes: u64) -> u32 {
    total_bytes.div_ceil(resolved_part_bytes(part_bytes)).max(1) as u32
}

/// No file to read is an error that says what was passed over, if anything.
fn refuse_no_files(found: &FoundInputs) -> io::Result<()> {
    if !found.files.is_empty() {
        return Ok(());
    }
    let mut msg = String::from("no input files found");
    if let Some((path, why)) = found.skipped.first() {
        msg.push_str(&format!(
            " ({} passed over; the first: {path}: {why})",
            found.skipped.len()
        ));
    }
    Err(io::Error::new(io::ErrorKind::NotFound, msg))
}

/// The file each input is read from: itself, or for a stream its copy in `spool_dir`.
fn readable_copies(found: &FoundInputs, spool_dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = Vec::with_capacity(found.files.len());
    for (n, input) in found.files.iter().enumerate() {
        files.push(if input.stream {
            spool(input, spool_dir, n)?
        } else {
            input.path.clone()
        });
    }
    Ok(files)
}

/// Run the readers, the tap's threads and the writer loop until every file is drained. The
/// tap's first error, if any, is returned; the writer's is left in [`Writer::fatal`].
fn run_stages(
    inputs: &Inputs<'_>,
    opts: &IngestOptions,
    tap: Option<&dyn Tap>,
    writer: &mut Writer<'_>,
    progress: &indicatif::ProgressBar,
) -> io::Result<Option<io::Error>> {
    let files = inputs.files;
    // A file's channel is made when its reader starts it, and freed once the writer has
    // drained it: a bounded channel allocates all its slots at once (about 800 KB), so one
    // made ahead for every input held memory in proportion to the number of files.
    let handover = Handover::new(files.len());
    let bounds: Vec<ByteBound> = files
        .iter()
        .map(|_| ByteBound::new(FILE_CHANNEL_BYTES))
        .collect();
    let next = AtomicUsize::new(0);
    let threads = opts.threads.max(1).min(files.len());
    // A panic in a spawned task would abort the process without a handler; with one, the
    // task's sender is dropped and the writer reports the failure (see `Message::Digesting`).
    let digest_pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads.max(1))
        .panic_handler(|_| {})
        .build()
        .map_err(io::Error::other)?;
    let tap_error: std::sync::Mutex<Option<io::Error>> = std::sync::Mutex::new(None);
    // Conversations spread over files (OpenTelemetry traces) are joined here, in input order.
    let stitchers = std::cell::RefCell::new(Stitchers::default());
    let (tap_files, tap_queue) = (writer.tap_files, writer.tap_queue);
    let reading = Reading {
        format: opts.format,
        limits: opts.limits,
    };
    std::thread::scope(|scope| {
        if let (Some(tap), Some(tap_files)) = (tap, tap_files) {
            for _ in 0..opts.threads.max(1) {
                scope.spawn(|| run_tap(tap, tap_files, tap_queue, &tap_error));
            }
        }
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= files.len() {
                    break;
                }
                let tx = handover.start(i);
                read_one(inputs, i, &reading, &tx, &bounds[i], &digest_pool);
            });
        }
        // The writer: drain each file's channel in input order.
        let last_input = files.len() - 1;
        for (i, bound) in bounds.iter().enumerate() {
            let rx = handover.take(i);
            writer.drain_file(i, rx, bound, &stitchers, i == last_input);
            progress.inc(inputs.sizes[i]);
        }
        // The tap's threads stop once the queue is empty.
        tap_queue.close();
    });
    Ok(tap_error.into_inner().expect("tap error lock"))
}

/// Each file's receiver, handed from the reader that starts the file to the writer, which
/// takes the files in input order. Readers take files in that order too, and start one only
/// within [`READ_AHEAD_FILES`] of the file being written: without that, readers of small files
/// ran through the whole input while the writer was still storing the first ones, holding every
/// file's channel and conversations. The file the writer waits for is always within the window,
/// so it is always started.
struct Handover {
    state: std::sync::Mutex<HandoverState>,
    changed: std::sync::Condvar,
}

struct HandoverState {
    receivers: Vec<Option<Receiver<Message>>>,
    /// Files the writer has taken.
    taken: usize,
}

impl Handover {
    fn new(files: usize) -> Handover {
        Handover {
            state: std::sync::Mutex::new(HandoverState {
                receivers: (0..files).map(|_| None).collect(),
                taken: 0,
            }),
            changed: std::sync::Condvar::new(),
        }
    }

    /// Wait until `file` is within reach of the writer, then make its channel and put its
    /// receiver here.
    fn start(&self, file: usize) -> SyncSender<Message> {
        let mut state = self.state.lock().expect("handover lock");
        while file >= state.taken + READ_AHEAD_FILES {
            state = self.changed.wait(state).expect("handover lock");
        }
        let (tx, rx) = sync_channel(CHANNEL_DEPTH);
        state.receivers[file] = Some(rx);
        self.changed.notify_all();
        tx
    }

    /// The receiver of `file`, waiting for its reader to start it.
    fn take(&self, file: usize) -> Receiver<Message> {
        let mut state = self.state.lock().expect("handover lock");
        loop {
            if let Some(rx) = state.receivers[file].take() {
                state.taken = file + 1;
                self.changed.notify_all();
                return rx;
            }
            state = self.changed.wait(state).expect("handover lock");
        }
    }
}

/// A tap thread: run the tap on queued conversations until the queue is closed and empty.
fn run_tap(
    tap: &dyn Tap,
    tap_files: &TapFiles,
    tap_queue: &TapQueue,
    tap_error: &std::sync::Mutex<Option<io::Error>>,
) {
    while let Some((conversation, origin, size)) = tap_queue.pop() {
        let id = conversation.id.clone();
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            tap_files.run(tap, conversation, origin)
        }));
        match ran {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tap_error.lock().expect("tap error lock").get_or_insert(e);
            }
            // A panic here (a bug in a check) must not leave the writer waiting on this
            // thread's queue: the conversation is marked stale instead, so it is checked again
            // from the store after the ingest, where the panic surfaces as in an audit of a
            // store.
            Err(_) => tap_files.mark_stale(&id),
        }
        tap_queue.done(size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Conversation;

    /// A reader may start a file only within `READ_AHEAD_FILES` of the one the writer takes,
    /// and the writer gets each file's receiver, in order, once it is started.
    #[test]
    fn readers_start_files_only_within_reach_of_the_writer() {
        let files = READ_AHEAD_FILES + 4;
        let handover = Handover::new(files);
        let (started, starts) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            let handover = &handover;
            scope.spawn(move || {
                for i in 0..files {
                    let tx = handover.start(i);
                    tx.send(Message::Records(i as u64)).unwrap();
                    started.send(i).unwrap();
                }
            });
            let firsts: Vec<usize> = starts.iter().take(READ_AHEAD_FILES).collect();
            assert_eq!(firsts, (0..READ_AHEAD_FILES).collect::<Vec<_>>());
            // The next file waits for the writer: nothing comes, however long one waits.
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(starts.try_recv().is_err());
            for i in 0..files {
                match handover.take(i).recv().unwrap() {
                    Message::Records(n) => assert_eq!(n, i as u64),
                    _ => panic!("file {i} got another message"),
                }
            }
            assert_eq!(starts.iter().count(), 4);
        });
    }

    /// Files of `size` bytes (sparse: nothing past the head is written) beginning with `head`.
    fn sparse(dir: &Path, name: &str, head: &[u8], size: u64) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, head).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(size)
            .unwrap();
        path
    }

    #[test]
    fn parts_are_planned_for_the_rows_of_dense_formats_as_well_as_for_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
        let ndjson =
            std::fs::read(testdata.join("agentfootprint/ndjson/a_repeated_identical_call.ndjson"))
                .unwrap();
        let tau2 = std::fs::read(
            testdata.join("tau2/grok/2025-10-05T07-52-52_telecom_grok-3.excerpt.json"),
        )
        .unwrap();
        let plan = |files: &[PathBuf]| {
            let inputs = files.iter().map(|f| {
                let size = std::fs::metadata(f).unwrap().len();
                (f.as_path(), None, size)
            });
            planned_parts(inputs, 0)
        };
        let mb = 1_000_000;
        // 300 MB of agentfootprint NDJSON: 3 parts by bytes (128 MiB each), 300 MB / 360 bytes
        // = 833,333 rows, 5 parts of 200,000 rows.
        let dense: Vec<PathBuf> = (0..3)
            .map(|i| sparse(dir.path(), &format!("af-{i}.ndjson"), &ndjson, 100 * mb))
            .collect();
        assert_eq!(plan(&dense), 5);
        // 300 MB of tau2 results: by bytes alone.
        let tau2_files: Vec<PathBuf> = (0..3)
            .map(|i| sparse(dir.path(), &format!("tau2-{i}.json"), &tau2, 100 * mb))
            .collect();
        assert_eq!(plan(&tau2_files), 3);
        // Both: 600 MB, 5 parts by bytes; 833,333 rows plus the tau2 files' 300 MB counted as
        // filling parts of 128 MiB (447,034 rows): 7 parts.
        let both: Vec<PathBuf> = dense.iter().chain(&tau2_files).cloned().collect();
        assert_eq!(plan(&both), 7);
        // Under 72 MB (200,000 rows of 360 bytes) the bytes decide.
        let small = sparse(dir.path(), "small.ndjson", &ndjson, 70 * mb);
        assert_eq!(plan(std::slice::from_ref(&small)), 1);
        // Too dense for one part: 80 MB is 222,222 rows.
        let over = sparse(dir.path(), "over.ndjson", &ndjson, 80 * mb);
        assert_eq!(plan(std::slice::from_ref(&over)), 2);
    }

    /// An object whose probe fails (gone since it was listed) counts as the objects not probed
    /// do: as many rows a byte as the objects probed, or by its bytes when none was probed.
    #[test]
    fn an_object_whose_probe_fails_counts_at_the_density_of_those_probed() {
        use crate::source::object::{Bucket, Remote};
        let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
        let mut head =
            std::fs::read(testdata.join("agentfootprint/ndjson/a_repeated_identical_call.ndjson"))
                .unwrap();
        // Past the probe's prefix; the listed size says how large each object is.
        head.resize(128 << 10, 0);
        let names: Vec<String> = (0..3).map(|i| format!("af-{i}.ndjson")).collect();
        let objects: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &head[..])).collect();
        let bucket = Bucket::in_memory(&objects);
        let mb = 1_000_000;
        let remote = |key: &str| Remote {
            bucket: bucket.clone(),
            location: key.into(),
            size: 100 * mb,
            etag: None,
        };
        let plan = |keys: &[&str]| {
            let remotes: Vec<Remote> = keys.iter().map(|k| remote(k)).collect();
            planned_parts(remotes.iter().map(|r| (Path::new(""), Some(r), r.size)), 0)
        };
        // As the local files of the test above: 833,333 rows of 360 bytes, 5 parts.
        assert_eq!(plan(&["af-0.ndjson", "af-1.ndjson", "af-2.ndjson"]), 5);
        // One gone: the two probed stand for it.
        assert_eq!(plan(&["af-0.ndjson", "af-1.ndjson", "gone.ndjson"]), 5);
        // All gone: by their 300 MB alone, 3 parts of 128 MiB.
        assert_eq!(
            plan(&["gone-0.ndjson", "gone-1.ndjson", "gone-2.ndjson"]),
            3
        );
    }

    /// Keeps each conversation's id, and panics on one of them.
    struct Panicky;

    impl Tap for Panicky {
        fn conversation(&self, conversation: Conversation) -> Option<Vec<u8>> {
            assert!(conversation.id != "sess-f-conv", "a check failed");
            serde_json::to_vec(&conversation.id).ok()
        }
    }

    /// A tap that panics on a conversation neither hangs the ingest nor loses the conversation:
    /// it is marked stale (to be checked from the store), and the others are kept.
    #[test]
    fn a_panicking_tap_marks_the_conversation_stale() {
        let dir = tempfile::tempdir().unwrap();
        let input =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/agentfootprint/ndjson");
        let opts = IngestOptions {
            threads: 2,
            ..IngestOptions::default()
        };
        let checked = dir.path().join("checked");
        let (summary, tapped) = ingest_tapped(
            &[input],
            &dir.path().join("store"),
            &opts,
            Some((&Panicky, &checked)),
        )
        .unwrap();
        let tapped = tapped.unwrap();
        let stale: Vec<&String> = tapped.stale.iter().flatten().collect();
        assert_eq!(stale, ["sess-f-conv"]);
        let kept: usize = tapped
            .files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap().lines().count())
            .sum();
        assert_eq!(kept as u64 + 1, summary.manifest.counts.conversations);
    }

    /// A conversation past the rows-per-conversation limit keeps the runs that fit, in the
    /// order read; the rest are named in a partial note, and nothing else changes.
    #[test]
    fn runs_past_the_conversation_row_limit_are_left_out_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let input =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/agentfootprint/ndjson");
        let ingest_with = |limit: u64, name: &str| {
            let mut opts = IngestOptions::default();
            opts.limits.conversation_rows = limit;
            let out = dir.path().join(name);
            let summary = ingest(std::slice::from_ref(&input), &out, &opts).unwrap();
            let runs = crate::store::read::read_runs(&out).unwrap();
            let notes: Vec<String> = std::fs::read_to_string(out.join("quarantine.jsonl"))
                .unwrap()
                .lines()
                .filter(|l| l.contains("rows-per-conversation limit"))
                .map(str::to_string)
                .collect();
            (summary.manifest.counts, runs, notes)
        };
        let (whole, all_runs, none) =
            ingest_with(crate::ingest::Limits::DEFAULT_CONVERSATION_ROWS, "whole");
        assert!(none.is_empty());
        let mut rows: HashMap<&str, u64> = HashMap::new();
        for r in &all_runs {
            *rows.entry(r.run.conversation_id.as_str()).or_default() += 1 + r.events as u64;
        }
        let largest = *rows.values().max().unwrap();
        let limit = largest / 2;
        let (cut, kept_runs, notes) = ingest_with(limit, "cut");
        let mut kept_rows: HashMap<&str, u64> = HashMap::new();
        for r in &kept_runs {
            *kept_rows.entry(r.run.conversation_id.as_str()).or_default() += 1 + r.events as u64;
        }
        assert!(kept_rows.values().all(|&n| n <= limit), "{kept_rows:?}");
        let over = rows.values().filter(|&&n| n > limit).count();
        assert_eq!(notes.len(), over, "{notes:?}");
        // Every run is stored or counted in a note.
        let left_out: u64 = notes
            .iter()
            .map(|n| {
                let at = n.find(" run(s) from here on").unwrap();
                let digits: String = n[..at]
                    .chars()
                    .rev()
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits
                    .chars()
                    .rev()
                    .collect::<String>()
                    .parse::<u64>()
                    .unwrap()
            })
            .sum();
        assert!(left_out > 0);
        assert_eq!(cut.runs + left_out, whole.runs);
        assert_eq!(cut.records_read, whole.records_read);
        assert_eq!(
            cut.records_stored + cut.records_quarantined,
            cut.records_read
        );
        assert_eq!(cut.partial_notes, whole.partial_notes + over as u64);
        // The runs kept are the first ones read of each conversation.
        let by_origin = |runs: &[crate::store::read::RunRow], id: &str| -> Vec<String> {
            let mut of: Vec<&crate::store::read::RunRow> = runs
                .iter()
                .filter(|r| r.run.conversation_id == id)
                .collect();
            of.sort_by_key(|r| (r.origin, r.run.run_id.clone()));
            of.iter().map(|r| r.run.run_id.clone()).collect()
        };
        for (id, _) in rows.iter().filter(|(_, &n)| n > limit) {
            let kept = by_origin(&kept_runs, id);
            let all = by_origin(&all_runs, id);
            assert!(all.starts_with(&kept), "{id}: {kept:?} of {all:?}");
        }
    }

    /// Keeps each conversation's id.
    struct Ids;

    impl Tap for Ids {
        fn conversation(&self, conversation: Conversation) -> Option<Vec<u8>> {
            serde_json::to_vec(&conversation.id).ok()
        }
    }

    /// Parts split by rows take the tap's values with them: each part's file holds the values
    /// of that part's conversations.
    #[test]
    fn a_tap_s_values_follow_their_conversations_into_split_parts() {
        let dir = tempfile::tempdir().unwrap();
        let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata");
        let inputs = ["tau-bench", "tau2", "agentfootprint"].map(|d| data.join(d));
        let opts = IngestOptions {
            threads: 2,
            part_rows: 300,
            ..IngestOptions::default()
        };
        let store = dir.path().join("store");
        let (summary, tapped) = ingest_tapped(
            &inputs,
            &store,
            &opts,
            Some((&Ids, &dir.path().join("tap"))),
        )
        .unwrap();
        let tapped = tapped.unwrap();
        let parts = summary.manifest.parts.len();
        assert!(parts >= 3, "{parts} parts");
        assert_eq!(tapped.files.len(), parts);
        assert_eq!(tapped.stale.len(), parts);
        let mut of_part: Vec<HashSet<String>> = vec![HashSet::new(); parts];
        for r in crate::store::read::read_runs(&store).unwrap() {
            of_part[r.part as usize].insert(r.run.conversation_id);
        }
        for (p, file) in tapped.files.iter().enumerate() {
            let ids: HashSet<String> = std::fs::read_to_string(file)
                .unwrap()
                .lines()
                .map(|l| {
                    let (_, _, id, _): (u32, u64, String, String) =
                        serde_json::from_str(l).unwrap();
                    id
                })
                .chain(tapped.stale[p].iter().cloned())
                .collect();
            assert_eq!(ids, of_part[p], "part {p}");
        }
    }
}
