//! The ingest job: find input files, detect their formats, read them in parallel, write the
//! store in a deterministic order, and account for every record.
//!
//! Files are read by worker threads (up to `threads` at once); each file has its own bounded
//! channel, and one writer drains the channels in input order. So memory is bounded (a worker
//! waits when its file's channel is full) and the store's content does not depend on the thread
//! count.
//!
//! A caller may hand each stored conversation on to a [`Tap`] running on threads of its own
//! (the audit of raw inputs checks conversations there while the writer goes on).

use crate::ingest::{read_file, Format, Input, Locator, Quarantined, Severity, Sink};
use crate::model::Conversation;
use crate::store::atomic::{write_file, AtomicDir};
use crate::store::{Counts, InputEntry, Origin, StoreManifest, StoreWriter};
use std::collections::HashSet;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::Instant;

/// Input bytes per events part (an audit holds one part in memory at a time, so this bounds its
/// memory whatever the size of the input). Parts share the store writer's buffer budget, so
/// more parts make smaller row groups: at 64 MB a tau2 4 GB ingest wrote 60 parts of row groups
/// of about 900 rows, and its audit was 10-15% slower than with 128 MB parts.
const PART_INPUT_BYTES: u64 = 128 << 20;
/// Messages a file may have in flight before its reader waits for the writer (conversations are
/// bounded by bytes first: [`FILE_CHANNEL_BYTES`]).
const CHANNEL_DEPTH: usize = 4096;
/// Bytes of conversations a file may have in flight before its reader waits for the writer.
/// The writer drains files in input order, so this is how far a reader of a later file gets
/// ahead: far enough to keep a core busy while the file being written waits on its reader (at
/// 64 conversations, a core stood idle 15% of a tau2 audit); bounded in bytes, as
/// agentfootprint sessions are a hundred times the size of tau2 simulations. (Unit tests use a
/// few KB, so their small inputs make readers wait too.)
const FILE_CHANNEL_BYTES: usize = if cfg!(test) { 4 << 10 } else { 16 << 20 };

#[derive(Debug, Clone, Default)]
pub struct IngestOptions {
    /// Read every file as this format instead of detecting it.
    pub format: Option<Format>,
    pub threads: usize,
    /// Show a progress bar (only drawn when stderr is a terminal).
    pub progress: bool,
}

/// What an ingest did.
#[derive(Debug, Clone)]
pub struct IngestSummary {
    pub store: PathBuf,
    pub manifest: StoreManifest,
}

/// Work a caller wants done on each conversation once it is stored, on threads of its own and
/// so in parallel with reading and writing (an audit of raw inputs checks conversations here).
pub trait Tap: Sync {
    /// What to keep of `conversation`: one JSON value, written on one line. `None` when it
    /// cannot be done here (the caller then works from the store).
    fn conversation(&self, conversation: &Conversation) -> Option<Vec<u8>>;
}

/// Bytes of conversations (texts and envelopes) waiting for the tap: the writer waits
/// while more are queued, so one very large conversation at a time at most goes past it.
const TAP_QUEUE_BYTES: usize = 32 << 20;

/// Bytes in flight between threads, up to a ceiling: a sender waits while more than the ceiling
/// would be held, except that one item always goes (an item larger than the ceiling passes
/// alone).
struct ByteBound {
    ceiling: usize,
    held: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

impl ByteBound {
    fn new(ceiling: usize) -> ByteBound {
        ByteBound {
            ceiling,
            held: std::sync::Mutex::new(0),
            freed: std::sync::Condvar::new(),
        }
    }

    /// Take `size` bytes, first waiting while they would not fit.
    fn acquire(&self, size: usize) {
        let mut held = self.held.lock().expect("byte bound lock");
        while *held > 0 && *held + size > self.ceiling {
            held = self.freed.wait(held).expect("byte bound lock");
        }
        *held += size;
    }

    /// Give back `size` bytes taken by [`ByteBound::acquire`].
    fn release(&self, size: usize) {
        *self.held.lock().expect("byte bound lock") -= size;
        self.freed.notify_one();
    }
}

/// The tap's queue: a channel, and the bytes it holds.
struct TapQueue {
    tx: std::sync::Mutex<Option<SyncSender<(Conversation, Origin, usize)>>>,
    rx: std::sync::Mutex<Receiver<(Conversation, Origin, usize)>>,
    bound: ByteBound,
}

impl TapQueue {
    fn new() -> TapQueue {
        // The byte budget bounds the queue; the channel's own bound only has to be above it.
        let (tx, rx) = sync_channel(4096);
        TapQueue {
            tx: std::sync::Mutex::new(Some(tx)),
            rx: std::sync::Mutex::new(rx),
            bound: ByteBound::new(TAP_QUEUE_BYTES),
        }
    }

    /// Queue a conversation, first waiting while the queue holds more than its budget.
    fn push(&self, conversation: Conversation, origin: Origin) {
        let size = conversation_bytes(&conversation);
        self.bound.acquire(size);
        if let Some(tx) = self.tx.lock().expect("tap queue lock").as_ref() {
            let _ = tx.send((conversation, origin, size));
        }
    }

    /// The next queued conversation, or `None` once the queue is closed and empty.
    fn pop(&self) -> Option<(Conversation, Origin, usize)> {
        self.rx.lock().expect("tap queue lock").recv().ok()
    }

    /// A popped conversation is done with: its bytes leave the budget.
    fn done(&self, size: usize) {
        self.bound.release(size);
    }

    fn close(&self) {
        self.tx.lock().expect("tap queue lock").take();
    }
}

/// The bytes a conversation takes (the measure of the tap queue's budget), counted as the store
/// writer counts its rows.
fn conversation_bytes(conversation: &Conversation) -> usize {
    use crate::store::write::{event_bytes, run_bytes};
    conversation
        .runs
        .iter()
        .map(|r| run_bytes(r) + r.events.iter().map(event_bytes).sum::<usize>())
        .sum()
}

/// What a [`Tap`] kept, filed by store part.
pub struct Tapped {
    /// Per part, a file of lines `[input_index, record_index, conversation_id, kept]`, in no
    /// particular order (the tap runs on several threads).
    pub files: Vec<PathBuf>,
    /// Per part, the conversations whose kept value must not be used: stored in more than one
    /// piece (fragments, or a conversation id met again in a later input), stored without some
    /// of its runs (duplicates of runs read before), or not kept at all.
    pub stale: Vec<HashSet<String>>,
}

/// Where a tap's values are written during an ingest, a file per store part.
struct TapFiles {
    files: Vec<PathBuf>,
    writers: Vec<std::sync::Mutex<io::BufWriter<std::fs::File>>>,
    stale: std::sync::Mutex<Vec<HashSet<String>>>,
}

impl TapFiles {
    fn create(dir: &Path, parts: u32) -> io::Result<TapFiles> {
        std::fs::create_dir_all(dir)?;
        let files: Vec<PathBuf> = (0..parts)
            .map(|p| dir.join(format!("part-{p:05}.jsonl")))
            .collect();
        let writers = files
            .iter()
            .map(|f| {
                let file = std::fs::File::create(f)?;
                Ok(std::sync::Mutex::new(io::BufWriter::new(file)))
            })
            .collect::<io::Result<_>>()?;
        Ok(TapFiles {
            files,
            writers,
            stale: std::sync::Mutex::new(vec![HashSet::new(); parts as usize]),
        })
    }

    fn part(&self, conversation_id: &str) -> usize {
        crate::store::write::part_of(conversation_id, self.files.len() as u32) as usize
    }

    /// What was or will be kept of this conversation does not stand.
    fn mark_stale(&self, conversation_id: &str) {
        let p = self.part(conversation_id);
        self.stale.lock().expect("stale lock")[p].insert(conversation_id.to_string());
    }

    /// Run the tap on one stored conversation and file what it keeps (or, when it keeps
    /// nothing, mark the conversation stale).
    fn run(&self, tap: &dyn Tap, conversation: &Conversation, origin: Origin) -> io::Result<()> {
        let Some(kept) = tap.conversation(conversation) else {
            self.mark_stale(&conversation.id);
            return Ok(());
        };
        let p = self.part(&conversation.id);
        let mut line = Vec::with_capacity(kept.len() + conversation.id.len() + 32);
        write!(line, "[{},{},", origin.input_index, origin.record_index)?;
        serde_json::to_writer(&mut line, &conversation.id).map_err(io::Error::other)?;
        line.push(b',');
        line.extend_from_slice(&kept);
        line.extend_from_slice(b"]\n");
        let mut out = self.writers[p].lock().expect("tap file lock");
        out.write_all(&line)
    }

    fn finish(self) -> io::Result<Tapped> {
        for w in self.writers {
            w.into_inner().expect("tap file lock").flush()?;
        }
        Ok(Tapped {
            files: self.files,
            stale: self.stale.into_inner().expect("stale lock"),
        })
    }
}

enum Message {
    /// A conversation, the number of its record, and the bytes it holds of its file's
    /// [`ByteBound`] (0 when it holds none).
    Conversation(Conversation, u64, usize),
    /// A conversation whose digests are being worked out on the digest pool
    /// ([`crate::store::digest::fill`]); it arrives on the receiver. Record and bytes as for
    /// `Conversation`.
    Digesting(Receiver<Conversation>, u64, usize),
    Quarantine(Quarantined),
    Records(u64),
    /// One file's OpenTelemetry spans, joined across files by the writer's stitcher.
    Spans(crate::ingest::otel::SpanBatch),
    Done {
        format: Option<Format>,
        sha256: String,
        error: Option<String>,
    },
}

/// Hands an adapter's output to the writer. Record counts are summed here and sent along with
/// the next message (one message per line would cost more than the line).
struct ChannelSink<'a> {
    tx: &'a SyncSender<Message>,
    bound: &'a ByteBound,
    records: u64,
    /// Where the digests of a conversation's tool results are worked out.
    pool: &'a rayon::ThreadPool,
}

impl ChannelSink<'_> {
    fn send(&mut self, message: Message) {
        if self.records > 0 {
            let _ = self
                .tx
                .send(Message::Records(std::mem::take(&mut self.records)));
        }
        let _ = self.tx.send(message);
    }
}

impl Sink for ChannelSink<'_> {
    fn conversation(&mut self, mut conversation: Conversation, record: u64) {
        let size = conversation_bytes(&conversation);
        self.bound.acquire(size);
        // The digests (a walk over every tool result) are worked out on the pool while this
        // reader reads on; the writer, which stores them, waits for them in file order.
        let (done, digested) = sync_channel(1);
        self.pool.spawn(move || {
            crate::store::digest::fill(&mut conversation);
            let _ = done.send(conversation);
        });
        self.send(Message::Digesting(digested, record, size));
    }
    fn quarantine(&mut self, item: Quarantined) {
        self.send(Message::Quarantine(item));
    }
    fn records_read(&mut self, n: u64) {
        self.records += n;
    }
    fn otel_spans(&mut self, batch: crate::ingest::otel::SpanBatch) {
        self.send(Message::Spans(batch));
    }
}

/// Run the stitcher and turn what it built into the writer's messages.
fn stitched(
    stitcher: &std::cell::RefCell<crate::ingest::otel::Stitcher>,
    step: impl FnOnce(&mut crate::ingest::otel::Stitcher, &mut crate::ingest::Collect),
) -> Vec<Message> {
    let mut out = crate::ingest::Collect::default();
    step(&mut stitcher.borrow_mut(), &mut out);
    let quarantined = out.quarantined.into_iter().map(Message::Quarantine);
    let built = out.conversations.into_iter().map(|(mut c, record)| {
        crate::store::digest::fill(&mut c);
        Message::Conversation(c, record, 0)
    });
    quarantined.chain(built).collect()
}

/// Every file under the given paths (directories recursively), sorted, de-duplicated.
pub fn expand_inputs(inputs: &[PathBuf]) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot read input {}: {e}", input.display()),
            )
        })?;
        if meta.is_dir() {
            walk(input, &mut files)?;
        } else {
            files.push(input.clone());
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let ty = entry.file_type()?;
        if ty.is_dir() {
            walk(&path, out)?;
        } else if ty.is_file() || (ty.is_symlink() && path.is_file()) {
            out.push(path);
        }
    }
    Ok(())
}

/// Hash a file in a pass of its own (for adapters that do not read their file in one pass).
fn sha256_of(path: &Path) -> io::Result<String> {
    let file = crate::ingest::HashingFile::open(path)?;
    let len = file.len();
    crate::ingest::clear_read_digest();
    io::copy(
        &mut io::BufReader::with_capacity(1 << 20, file),
        &mut io::sink(),
    )?;
    Ok(crate::ingest::take_read_digest(len).unwrap_or_default())
}

/// Read one file into its channel.
fn read_one(
    path: &Path,
    size: u64,
    display: &str,
    forced: Option<Format>,
    tx: &SyncSender<Message>,
    bound: &ByteBound,
    pool: &rayon::ThreadPool,
) {
    let mut sink = ChannelSink {
        tx,
        bound,
        records: 0,
        pool,
    };
    crate::ingest::clear_read_digest();
    let detected = match forced {
        Some(f) => Ok(Some(f)),
        None => crate::ingest::read_head(path).map(|head| {
            if head.is_empty() {
                None
            } else {
                Format::detect(&head)
            }
        }),
    };
    let (format, error) = match detected {
        Err(e) => (None, Some(format!("cannot read {display}: {e}"))),
        Ok(None) => {
            let empty = size == 0;
            sink.records_read(1);
            sink.quarantine(Quarantined::dropped(
                display,
                Locator::File,
                if empty {
                    "empty file".to_string()
                } else {
                    "not a recognised recording format (no known format matched its content)"
                        .to_string()
                },
            ));
            (None, None)
        }
        Ok(Some(format)) => {
            let input = Input::new(path, display);
            match read_file(format, &input, &mut sink) {
                Ok(()) => (Some(format), None),
                Err(e) => (Some(format), Some(format!("cannot read {display}: {e}"))),
            }
        }
    };
    // Adapters that read their file in one pass hashed it on the way; the rest are read again.
    let sha256 = crate::ingest::take_read_digest(size)
        .unwrap_or_else(|| sha256_of(path).unwrap_or_default());
    sink.send(Message::Done {
        format,
        sha256,
        error,
    });
}

/// Run an ingest of `inputs` into the store directory `out`.
pub fn ingest(inputs: &[PathBuf], out: &Path, opts: &IngestOptions) -> io::Result<IngestSummary> {
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
    let files = expand_inputs(inputs)?;
    if files.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "no input files found",
        ));
    }
    let sizes: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .collect();
    let total_bytes: u64 = sizes.iter().sum();
    let parts = total_bytes.div_ceil(PART_INPUT_BYTES).max(1) as u32;
    let staging = AtomicDir::create(out, "manifest.json")?;
    let mut writer = StoreWriter::create(staging.path(), parts)?;
    let tap_files = match tap {
        Some((_, dir)) => Some(TapFiles::create(dir, parts)?),
        None => None,
    };
    let tap = tap.map(|(t, _)| t);
    let tap_queue = TapQueue::new();
    let tap_error: std::sync::Mutex<Option<io::Error>> = std::sync::Mutex::new(None);
    let mut quarantine = io::BufWriter::new(std::fs::File::create(
        staging.path().join("quarantine.jsonl"),
    )?);

    let displays: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let mut senders: Vec<Option<SyncSender<Message>>> = Vec::with_capacity(files.len());
    let mut receivers: Vec<Receiver<Message>> = Vec::with_capacity(files.len());
    for _ in &files {
        let (tx, rx) = sync_channel(CHANNEL_DEPTH);
        senders.push(Some(tx));
        receivers.push(rx);
    }
    let bounds: Vec<ByteBound> = files
        .iter()
        .map(|_| ByteBound::new(FILE_CHANNEL_BYTES))
        .collect();
    let senders: Vec<std::sync::Mutex<Option<SyncSender<Message>>>> =
        senders.into_iter().map(std::sync::Mutex::new).collect();
    let next = AtomicUsize::new(0);
    let threads = opts.threads.max(1).min(files.len());
    // A panic in a spawned task would abort the process without a handler; with one, the
    // task's sender is dropped and the writer reports the failure (see `Message::Digesting`).
    let digest_pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads.max(1))
        .panic_handler(|_| {})
        .build()
        .map_err(io::Error::other)?;
    let progress = crate::progress::bar(opts.progress, total_bytes, "ingest");

    let mut counts = Counts {
        files: files.len() as u64,
        bytes: total_bytes,
        ..Counts::default()
    };
    let mut entries: Vec<InputEntry> = Vec::with_capacity(files.len());
    let mut seen_runs: HashSet<String> = HashSet::new();
    let mut seen_conversations: HashSet<String> = HashSet::new();
    let mut fatal: Option<io::Error> = None;
    // Traces whose spans are spread over files are joined here, in input order.
    let stitcher = std::cell::RefCell::new(crate::ingest::otel::Stitcher::default());
    let last_input = files.len() - 1;

    std::thread::scope(|scope| {
        if let (Some(tap), Some(tap_files)) = (tap, tap_files.as_ref()) {
            for _ in 0..opts.threads.max(1) {
                scope.spawn(|| {
                    while let Some((conversation, origin, size)) = tap_queue.pop() {
                        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            tap_files.run(tap, &conversation, origin)
                        }));
                        match ran {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => {
                                tap_error.lock().expect("tap error lock").get_or_insert(e);
                            }
                            // A panic here (a bug in a check) must not leave the writer
                            // waiting on this thread's queue: the conversation is marked
                            // stale instead, so it is checked again from the store after the
                            // ingest, where the panic surfaces as in an audit of a store.
                            Err(_) => tap_files.mark_stale(&conversation.id),
                        }
                        drop(conversation);
                        tap_queue.done(size);
                    }
                });
            }
        }
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= files.len() {
                    break;
                }
                let tx = senders[i].lock().expect("sender lock").take();
                if let Some(tx) = tx {
                    read_one(
                        &files[i],
                        sizes[i],
                        &displays[i],
                        opts.format,
                        &tx,
                        &bounds[i],
                        &digest_pool,
                    );
                }
            });
        }
        // The writer: drain each file's channel in input order.
        for (i, rx) in receivers.into_iter().enumerate() {
            let mut entry = InputEntry {
                path: displays[i].clone(),
                size: sizes[i],
                ..InputEntry::default()
            };
            // After the last input, the traces that never became complete are built.
            let unfinished = (i == last_input)
                .then_some(())
                .into_iter()
                .flat_map(|()| stitched(&stitcher, |s, out| s.finish(out)));
            let messages = rx
                .into_iter()
                .flat_map(|m| match m {
                    Message::Spans(batch) => stitched(&stitcher, |s, out| s.add(batch, out)),
                    other => vec![other],
                })
                .chain(unfinished);
            for message in messages {
                let message = match message {
                    Message::Digesting(digested, record, size) => match digested.recv() {
                        Ok(conversation) => Message::Conversation(conversation, record, size),
                        Err(_) => {
                            // The worker panicked: a bug, reported as such.
                            bounds[i].release(size);
                            fatal.get_or_insert_with(|| {
                                io::Error::other("working out the digests of a conversation failed")
                            });
                            continue;
                        }
                    },
                    other => other,
                };
                // Received: the reader may read on, whatever becomes of the message (the
                // writer's own buffers and the checking queue have bounds of their own).
                if let Message::Conversation(_, _, size) = &message {
                    bounds[i].release(*size);
                }
                if fatal.is_some() {
                    continue;
                }
                let result = match message {
                    Message::Records(n) => {
                        entry.records += n;
                        Ok(())
                    }
                    Message::Quarantine(q) => {
                        match q.severity {
                            Severity::Dropped => entry.quarantined += 1,
                            Severity::Partial => counts.partial_notes += 1,
                            Severity::Duplicate => {}
                        }
                        write_quarantine(&mut quarantine, &q)
                    }
                    Message::Conversation(mut conversation, record, _) => {
                        let mut skipped = Vec::new();
                        conversation.runs.retain(|r| {
                            let fresh = seen_runs.insert(r.run_id.clone());
                            if !fresh {
                                skipped.push(r.run_id.clone());
                            }
                            fresh
                        });
                        let mut result = Ok(());
                        let skipped_none = skipped.is_empty();
                        for run_id in skipped {
                            counts.duplicate_runs += 1;
                            let q = Quarantined {
                                file: displays[i].clone(),
                                locator: Locator::Record(record),
                                severity: Severity::Duplicate,
                                reason: format!(
                                    "run {run_id:?} was already read from an earlier input; \
                                     this copy is skipped"
                                ),
                                format: None,
                            };
                            result = result.and(write_quarantine(&mut quarantine, &q));
                        }
                        let origin = Origin {
                            input_index: i as u32,
                            record_index: record,
                        };
                        if conversation.runs.is_empty() {
                            if let Some(files) = &tap_files {
                                files.mark_stale(&conversation.id);
                            }
                            result
                        } else {
                            let first = !seen_conversations.contains(&conversation.id);
                            if first {
                                seen_conversations.insert(conversation.id.clone());
                            }
                            counts.user_turn_runs +=
                                conversation.runs.iter().filter(|r| r.turn >= 1).count() as u64;
                            let result = result.and(writer.write(&conversation, origin));
                            // The tap's view stands only if the store holds the conversation
                            // exactly as read: in one piece, with all of its runs.
                            if let Some(files) = &tap_files {
                                if first && skipped_none {
                                    tap_queue.push(conversation, origin);
                                } else {
                                    files.mark_stale(&conversation.id);
                                }
                            }
                            result
                        }
                    }
                    Message::Spans(_) => Ok(()),
                    Message::Digesting(..) => unreachable!("received as a conversation above"),
                    Message::Done {
                        format,
                        sha256,
                        error,
                    } => {
                        entry.format = format.map(|f| f.name().to_string());
                        entry.sha256 = sha256;
                        progress.inc(sizes[i]);
                        match error {
                            Some(e) => Err(io::Error::other(e)),
                            None => Ok(()),
                        }
                    }
                };
                if let Err(e) = result {
                    fatal = Some(e);
                }
            }
            counts.records_read += entry.records;
            counts.records_quarantined += entry.quarantined;
            entries.push(entry);
        }
        // The tap's threads stop once the queue is empty.
        tap_queue.close();
    });
    if let Some(e) = tap_error.into_inner().expect("tap error lock") {
        return Err(e);
    }
    progress.finish_and_clear();
    if let Some(e) = fatal {
        return Err(e);
    }
    quarantine.flush()?;
    drop(quarantine);
    counts.conversations = seen_conversations.len() as u64;
    counts.runs = writer.runs_written;
    counts.events = writer.events_written;
    counts.landings = writer.landings_written;
    counts.records_stored = counts.records_read - counts.records_quarantined;
    let part_names = writer.finish()?;
    let manifest = StoreManifest {
        engine: crate::store::ENGINE.into(),
        engine_version: crate::store::ENGINE_VERSION.into(),
        store_schema_version: crate::store::schema::STORE_SCHEMA_VERSION,
        parts: part_names,
        inputs: entries,
        counts,
        seconds: started.elapsed().as_secs_f64(),
    };
    let text = serde_json::to_string_pretty(&manifest).map_err(io::Error::other)?;
    write_file(&staging.path().join("manifest.json"), text.as_bytes())?;
    let store = staging.commit()?;
    let tapped = tap_files.map(TapFiles::finish).transpose()?;
    Ok((IngestSummary { store, manifest }, tapped))
}

fn write_quarantine(out: &mut impl Write, q: &Quarantined) -> io::Result<()> {
    serde_json::to_writer(&mut *out, q).map_err(io::Error::other)?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keeps each conversation's id, and panics on one of them.
    struct Panicky;

    impl Tap for Panicky {
        fn conversation(&self, conversation: &Conversation) -> Option<Vec<u8>> {
            assert!(conversation.id != "sess-f-conv", "a check failed");
            serde_json::to_vec(&conversation.id).ok()
        }
    }

    /// A sender waits while its bytes would go over the ceiling, and goes once enough are given
    /// back; an item over the ceiling waits for an empty bound and then goes alone.
    #[test]
    fn a_byte_bound_holds_senders_at_its_ceiling() {
        use std::time::Duration;
        let bound = ByteBound::new(10);
        bound.acquire(6);
        bound.acquire(4);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                bound.acquire(3);
                tx.send(3).unwrap();
                bound.acquire(25);
                tx.send(25).unwrap();
            });
            assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
            bound.release(6);
            assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(3));
            // 7 held: the large item waits until nothing is.
            bound.release(4);
            assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
            bound.release(3);
            assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(25));
        });
        assert_eq!(*bound.held.lock().unwrap(), 25);
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
}
