//! The ingest stage: reader threads, the writer loop and the manifest. The ingest job: find input files, detect their formats, read them in parallel, write the
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
use crate::store::atomic::{self, write_file, AtomicDir};
use crate::store::{Counts, InputEntry, Origin, StoreManifest, StoreWriter};
use hashbrown::{HashMap, HashSet};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::Instant;

use super::inputs::{find_inputs, spool, FoundInputs};
use super::queue::{conversation_bytes, ByteBound, TapQueue};
use super::tap::{Tap, TapFiles, Tapped};
use crate::source::{sha256_of, Compression, Cut};

/// Input bytes per events part (an audit holds one part in memory at a time, so this bounds its
/// memory whatever the size of the input). Parts share the store writer's buffer budget, so
/// more, smaller parts make smaller row groups, which read back slower; 128 MB keeps a part's
/// audit well inside the memory budget.
const PART_INPUT_BYTES: u64 = 128 << 20;
/// Messages a file may have in flight before its reader waits for the writer (conversations are
/// bounded by bytes first: [`FILE_CHANNEL_BYTES`]).
const CHANNEL_DEPTH: usize = 4096;
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
    /// ([`crate::store::split::PART_ROWS`]).
    pub part_rows: u64,
}

/// What an ingest did.
#[derive(Debug, Clone)]
pub struct IngestSummary {
    pub store: PathBuf,
    pub manifest: StoreManifest,
}

enum Message {
    /// A conversation, the number of its record, and the bytes it holds of its file's
    /// [`ByteBound`] (0 when it holds none).
    Conversation(Conversation, u64, usize),
    /// A conversation whose digests are being worked out on the digest pool
    /// ([`super::fill_digests`]); it arrives on the receiver. Record and bytes as for
    /// `Conversation`.
    Digesting(Receiver<Conversation>, u64, usize),
    Quarantine(Quarantined),
    Records(u64),
    /// A fragment of conversations that may continue in another file, joined across files by
    /// the writer's stitchers.
    Fragment(crate::ingest::Fragment),
    Done {
        format: Option<Format>,
        sha256: String,
        /// How the file was compressed, and the size of its decompressed copy.
        decompressed: Option<(Compression, u64)>,
        /// An object's ETag, as listed.
        etag: Option<String>,
        error: Option<String>,
    },
}

/// Hands an adapter's output to the writer. Record counts are summed here and sent along with
/// the next message (one message per line would cost more than the line).
struct ChannelSink<'a> {
    tx: &'a SyncSender<Message>,
    bound: &'a ByteBound,
    records: u64,
    /// The file's sha256, when its adapter read it whole in one pass.
    digest: Option<String>,
    /// The ETag of the object the file was fetched from, if it was.
    etag: Option<String>,
    /// Where the digests of a conversation's tool results are worked out.
    pool: &'a rayon::ThreadPool,
}

impl ChannelSink<'_> {
    /// End the file with an error: nothing of it could be read.
    fn fail(mut self, error: String) {
        let etag = self.etag.take();
        self.send(Message::Done {
            format: None,
            sha256: String::new(),
            decompressed: None,
            etag,
            error: Some(error),
        });
    }

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
            super::fill_digests(&mut conversation);
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
    fn file_digest(&mut self, sha256: String) {
        self.digest = Some(sha256);
    }
    fn fragment(&mut self, fragment: crate::ingest::Fragment) {
        self.send(Message::Fragment(fragment));
    }
}

/// Run the stitcher and turn what it built into the writer's messages.
fn stitched(
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
struct Stitchers(Vec<(crate::ingest::Format, Box<dyn crate::ingest::Stitch>)>);

impl Stitchers {
    fn add(&mut self, fragment: crate::ingest::Fragment, out: &mut crate::ingest::Collect) {
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

    fn finish(&mut self, out: &mut crate::ingest::Collect) {
        for (_, stitch) in &mut self.0 {
            stitch.finish(out);
        }
    }
}

/// Read input `i` into its channel: decompressed first into the spool folder when it is
/// compressed (the copy is removed once read).
fn read_one(
    inputs: &Inputs<'_>,
    i: usize,
    opts: &IngestOptions,
    tx: &SyncSender<Message>,
    bound: &ByteBound,
    pool: &rayon::ThreadPool,
) {
    let mut sink = ChannelSink {
        tx,
        bound,
        records: 0,
        digest: None,
        etag: None,
        pool,
    };
    // An object is fetched first, then read as a local file is; its copy goes with the folder.
    let fetched_folder = inputs.spool_dir.join(format!("fetched-{i:05}"));
    let fetched;
    let path = match &inputs.remote[i] {
        None => inputs.files[i].as_path(),
        Some(remote) => {
            let copy = fetched_folder.join(remote.file_name());
            let got = std::fs::create_dir_all(&fetched_folder)
                .map_err(|e| atomic::with_path(e, "cannot create", &fetched_folder))
                .and_then(|()| crate::source::object::fetch(remote, &copy));
            if let Err(e) = got {
                let _ = std::fs::remove_dir_all(&fetched_folder);
                return sink.fail(e.to_string());
            }
            fetched = copy;
            sink.etag = remote.etag.clone();
            fetched.as_path()
        }
    };
    read_local(inputs, i, path, opts, sink);
    let _ = std::fs::remove_dir_all(&fetched_folder);
}

/// Read input `i` from the local file `path` (the input, or the copy of an object).
fn read_local(
    inputs: &Inputs<'_>,
    i: usize,
    path: &Path,
    opts: &IngestOptions,
    mut sink: ChannelSink<'_>,
) {
    let display = inputs.displays[i].as_str();
    // The input's own path (an object's URL, a stream's name), whatever copy `path` is.
    let original = if inputs.streams[i] {
        std::borrow::Cow::Borrowed(display)
    } else {
        inputs.files[i].to_string_lossy()
    };
    let compression = match Compression::of_file(path) {
        Ok(compression) => compression,
        Err(e) => return sink.fail(format!("cannot read {display}: {e}")),
    };
    let Some(compression) = compression else {
        return read_plain(path, inputs.sizes[i], display, opts, sink, None, &original);
    };
    let folder = inputs.spool_dir.join(format!("decompressed-{i:05}"));
    let name = path.file_name().map_or_else(
        || "input".to_string(),
        |n| compression.inner_name(&n.to_string_lossy()),
    );
    let copy = folder.join(name);
    let made = std::fs::create_dir_all(&folder)
        .map_err(|e| atomic::with_path(e, "cannot create", &folder))
        .and_then(|()| {
            crate::source::decompress(compression, path, &copy, opts.limits.decompressed_bytes)
        });
    match made {
        Err(e) => sink.fail(format!("cannot decompress {display}: {e}")),
        Ok(made) => {
            if let Some(cut) = &made.cut {
                // The rest of the file is lost: one record read and quarantined stands for it.
                let reason = match cut {
                    Cut::Damaged(why) => why.clone(),
                    Cut::OverLimit => format!(
                        "decompresses to more than the {} limit for one decompressed input; \
                         what is past it is not read",
                        crate::ingest::limits::size_text(opts.limits.decompressed_bytes)
                    ),
                };
                sink.records_read(1);
                sink.quarantine(Quarantined::dropped(display, Locator::File, reason));
            }
            let unpacked = Unpacked {
                compression,
                bytes: made.bytes,
                sha256: made.sha256,
            };
            let name = compression.inner_name(&original);
            read_plain(
                &copy,
                made.bytes,
                display,
                opts,
                sink,
                Some(unpacked),
                &name,
            );
        }
    }
    // A copy that cannot be removed now is removed with the staging folder.
    let _ = std::fs::remove_dir_all(&folder);
}

/// A compressed input's decompressed copy: how it was compressed, its size, and the digest of
/// the compressed file (what the manifest names the input by).
struct Unpacked {
    compression: Compression,
    bytes: u64,
    sha256: String,
}

/// Read one uncompressed file (an input, or a compressed input's copy) into its channel.
fn read_plain(
    path: &Path,
    size: u64,
    display: &str,
    opts: &IngestOptions,
    mut sink: ChannelSink<'_>,
    unpacked: Option<Unpacked>,
    name: &str,
) {
    let detected = match opts.format {
        Some(f) => Ok(Ok(f)),
        None => crate::ingest::read_head(path).map(|head| match Format::detect_file(path, &head) {
            Some(format) if !head.is_empty() => Ok(format),
            _ => Err(head),
        }),
    };
    let (format, error) = match detected {
        Err(e) => (None, Some(format!("cannot read {display}: {e}"))),
        Ok(Err(_)) if size == 0 => {
            // An empty file where a recording should be (a write cut short): a lost record.
            sink.records_read(1);
            sink.quarantine(Quarantined::dropped(display, Locator::File, "empty file"));
            (None, None)
        }
        Ok(Err(head)) => {
            // Not a recording of any format: not a record either. It is listed, and counted as
            // unrecognised, so that a folder of the wrong files does not read as an empty success.
            sink.quarantine(Quarantined {
                severity: Severity::Skipped,
                ..Quarantined::dropped(
                    display,
                    Locator::File,
                    format!(
                        "not a recognised recording format: {}",
                        crate::ingest::registry::why_unrecognised(&head)
                    ),
                )
            });
            (None, None)
        }
        Ok(Ok(format)) => {
            let input = Input {
                limits: opts.limits,
                name,
                ..Input::new(path, display)
            };
            // A decompressed copy's own digest is not the input's: it is not worked out.
            let mut read = || read_file(format, &input, &mut sink);
            let result = if unpacked.is_some() {
                crate::source::hashing::unhashed(read)
            } else {
                read()
            };
            match result {
                Ok(()) => (Some(format), None),
                Err(e) => (Some(format), Some(format!("cannot read {display}: {e}"))),
            }
        }
    };
    // Adapters that read their file in one pass hashed it on the way; the rest are read again.
    // A compressed input is named by the digest of the file as it is on disk.
    let digest = sink.digest.take();
    let (sha256, decompressed) = match unpacked {
        Some(u) => (u.sha256, Some((u.compression, u.bytes))),
        None => (
            digest.unwrap_or_else(|| sha256_of(path).unwrap_or_default()),
            None,
        ),
    };
    let etag = sink.etag.take();
    sink.send(Message::Done {
        format,
        sha256,
        decompressed,
        etag,
        error,
    });
}

/// Run an ingest of `inputs` into the store directory `out`.
pub fn ingest(inputs: &[PathBuf], out: &Path, opts: &IngestOptions) -> io::Result<IngestSummary> {
    if super::remote::is_url(out) {
        return super::remote::write_to_bucket(out, |local| {
            let mut summary = ingest(inputs, local, opts)?;
            summary.store = out.to_path_buf();
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
/// start in the store's list, the runs the store holds already (each skipped as a duplicate),
/// and what to do once every input is read and before the parts are closed (copy in the
/// stored rows of the conversations it continues).
pub(super) struct Extension<'a> {
    pub first_input: u32,
    pub known_runs: HashSet<String>,
    #[allow(clippy::type_complexity)]
    pub before_finish: &'a mut dyn FnMut(&mut StoreWriter, &HashMap<String, u64>) -> io::Result<()>,
}

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
        None => parts_for(total_bytes, opts.part_bytes),
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
        None => (HashSet::new(), None),
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
        seen_runs: known_runs,
        seen_conversations: HashMap::new(),
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
        before_finish(&mut writer.store, &writer.seen_conversations)?;
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

/// The runs of a conversation left out at the rows-per-conversation limit: where the first
/// was read, and how many runs and rows.
struct LeftOut {
    input: usize,
    record: u64,
    runs: u64,
    rows: u64,
}

/// The most rows a part holds before it is split (`0`: the default).
pub(super) fn part_rows(part_rows: u64) -> u64 {
    if part_rows == 0 {
        crate::store::split::PART_ROWS
    } else {
        part_rows
    }
}

/// The parts of a store of inputs of `total_bytes`, `part_bytes` each (0: the default).
pub(super) fn parts_for(total_bytes: u64, part_bytes: u64) -> u32 {
    let part_bytes = if part_bytes == 0 {
        PART_INPUT_BYTES
    } else {
        part_bytes
    };
    total_bytes.div_ceil(part_bytes).max(1) as u32
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

/// The files an ingest reads, in input order.
struct Inputs<'a> {
    files: &'a [PathBuf],
    sizes: &'a [u64],
    displays: &'a [String],
    /// Where compressed inputs are decompressed to, and objects fetched to, while they are read.
    spool_dir: &'a Path,
    /// The object each input is, if it is one.
    remote: &'a [Option<crate::source::object::Remote>],
    /// Whether each input is a stream (read from its copy in the spool folder).
    streams: &'a [bool],
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
    let mut senders: Vec<std::sync::Mutex<Option<SyncSender<Message>>>> =
        Vec::with_capacity(files.len());
    let mut receivers: Vec<Receiver<Message>> = Vec::with_capacity(files.len());
    for _ in files {
        let (tx, rx) = sync_channel(CHANNEL_DEPTH);
        senders.push(std::sync::Mutex::new(Some(tx)));
        receivers.push(rx);
    }
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
                let tx = senders[i].lock().expect("sender lock").take();
                if let Some(tx) = tx {
                    read_one(inputs, i, opts, &tx, &bounds[i], &digest_pool);
                }
            });
        }
        // The writer: drain each file's channel in input order.
        let last_input = files.len() - 1;
        for (i, rx) in receivers.into_iter().enumerate() {
            writer.drain_file(i, rx, &bounds[i], &stitchers, i == last_input);
            progress.inc(inputs.sizes[i]);
        }
        // The tap's threads stop once the queue is empty.
        tap_queue.close();
    });
    Ok(tap_error.into_inner().expect("tap error lock"))
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

/// The writer stage: takes each file's messages in input order, stores conversations (each run
/// id once), files quarantine entries and keeps the counts.
struct Writer<'a> {
    /// The input index each file is stored under (its position, or in a shard its position
    /// in the whole ingest).
    input_indices: &'a [u32],
    /// The input index of conversations built once every input was read.
    unfinished_index: u32,
    /// Building what the stitchers could not complete, after the last input.
    finishing: bool,
    /// A store that holds nothing is no error (a shard's records may all be elsewhere).
    may_be_empty: bool,
    store: StoreWriter,
    quarantine: io::BufWriter<std::fs::File>,
    tap_files: Option<&'a TapFiles>,
    tap_queue: &'a TapQueue,
    displays: &'a [String],
    sizes: &'a [u64],
    counts: Counts,
    entries: Vec<InputEntry>,
    seen_runs: HashSet<String>,
    /// Rows (runs plus events) stored of each conversation so far.
    seen_conversations: HashMap<String, u64>,
    /// [`crate::ingest::Limits::conversation_rows`], and what was left out of the
    /// conversations that reached it.
    conversation_row_limit: u64,
    left_out: HashMap<String, LeftOut>,
    /// The most rows a part holds before it is split.
    part_rows: u64,
    /// The first error; messages after it are received (readers must not block) but not used.
    fatal: Option<io::Error>,
    /// The first reasons records were dropped for, for the message when nothing could be read.
    first_reasons: Vec<String>,
    /// The first files no format recognised, with why, for the same message.
    unrecognised: Vec<String>,
}

impl Writer<'_> {
    /// Take every message of input `i`, joining fragments with the stitchers; after the last
    /// input, the traces that never became complete are built.
    fn drain_file(
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

    fn use_message(
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
    fn receive(&mut self, message: Message, bound: &ByteBound) -> Option<Message> {
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
    fn take(&mut self, i: usize, message: Message, entry: &mut InputEntry) -> io::Result<()> {
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
    fn store_conversation(
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
        conversation.runs.retain(|r| {
            let fresh = self.seen_runs.insert(r.run_id.clone());
            if !fresh {
                skipped.push(r.run_id.clone());
            }
            fresh
        });
        let mut skipped_none = skipped.is_empty();
        if self.cut_to_the_row_limit(i, &mut conversation, record) {
            skipped_none = false;
        }
        for run_id in skipped {
            self.counts.duplicate_runs += 1;
            let q = Quarantined {
                file: self.displays[i].clone(),
                locator: Locator::Record(record),
                severity: Severity::Duplicate,
                reason: format!(
                    "run {run_id:?} was already read from an earlier input; this copy is skipped"
                ),
                format: None,
            };
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
        let first = !self.seen_conversations.contains_key(&conversation.id);
        let rows: u64 = conversation
            .runs
            .iter()
            .map(|r| 1 + r.events.len() as u64)
            .sum();
        *self
            .seen_conversations
            .entry(conversation.id.clone())
            .or_default() += rows;
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
    fn cut_to_the_row_limit(
        &mut self,
        i: usize,
        conversation: &mut Conversation,
        record: u64,
    ) -> bool {
        let limit = self.conversation_row_limit;
        let fit = if self.left_out.contains_key(&conversation.id) {
            0
        } else {
            let mut rows = self
                .seen_conversations
                .get(&conversation.id)
                .copied()
                .unwrap_or(0);
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
    fn note_left_out(&mut self) -> io::Result<()> {
        let limit = self.conversation_row_limit;
        let mut list: Vec<(&String, &LeftOut)> = self.left_out.iter().collect();
        list.sort_by_key(|(id, l)| (l.input, l.record, id.as_str()));
        for (id, l) in list {
            let stored = self.seen_conversations.get(id).copied().unwrap_or(0);
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
    fn finish(
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
    use super::*;

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
