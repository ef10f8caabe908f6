//! The reading stage of an ingest: each input read by its adapter on a reader thread (an
//! object fetched, a compressed file decompressed first), its conversations, quarantine entries
//! and counts sent to the writer as messages.

use crate::ingest::{read_file, Format, Input, Locator, Quarantined, Severity, Sink};
use crate::model::Conversation;
use crate::store::atomic::{self};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use super::queue::{conversation_bytes, ByteBound};
use crate::source::{sha256_of, Compression, Cut};

pub(super) enum Message {
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
pub(super) struct ChannelSink<'a> {
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

/// Read input `i` into its channel: decompressed first into the spool folder when it is
/// compressed (the copy is removed once read).
pub(super) fn read_one(
    inputs: &Inputs<'_>,
    i: usize,
    reading: &Reading,
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
            match got {
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&fetched_folder);
                    return sink.fail(e.to_string());
                }
                // The object was hashed as it arrived: its copy is read without hashing it again.
                Ok(got) => sink.digest = Some(got.sha256),
            }
            fetched = copy;
            sink.etag = remote.etag.clone();
            fetched.as_path()
        }
    };
    if sink.digest.is_some() {
        crate::source::hashing::unhashed(|| read_local(inputs, i, path, reading, sink));
    } else {
        read_local(inputs, i, path, reading, sink);
    }
    let _ = std::fs::remove_dir_all(&fetched_folder);
}

/// Read input `i` from the local file `path` (the input, or the copy of an object).
pub(super) fn read_local(
    inputs: &Inputs<'_>,
    i: usize,
    path: &Path,
    reading: &Reading,
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
        return read_plain(
            path,
            inputs.sizes[i],
            display,
            reading,
            sink,
            None,
            &original,
        );
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
            crate::source::decompress(compression, path, &copy, reading.limits.decompressed_bytes)
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
                        crate::ingest::limits::size_text(reading.limits.decompressed_bytes)
                    ),
                };
                sink.records_read(1);
                sink.quarantine(Quarantined::dropped(display, Locator::File, reason));
            }
            let unpacked = Unpacked {
                compression,
                bytes: made.bytes,
                // A fetched object's digest, taken as it arrived (its copy is read unhashed).
                sha256: sink.digest.take().unwrap_or(made.sha256),
            };
            let name = compression.inner_name(&original);
            read_plain(
                &copy,
                made.bytes,
                display,
                reading,
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
pub(super) struct Unpacked {
    compression: Compression,
    bytes: u64,
    sha256: String,
}

/// Read one uncompressed file (an input, or a compressed input's copy) into its channel.
pub(super) fn read_plain(
    path: &Path,
    size: u64,
    display: &str,
    reading: &Reading,
    mut sink: ChannelSink<'_>,
    unpacked: Option<Unpacked>,
    name: &str,
) {
    let detected = match reading.format {
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
                limits: reading.limits,
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

/// The files an ingest reads, in input order.
pub(super) struct Inputs<'a> {
    pub(super) files: &'a [PathBuf],
    pub(super) sizes: &'a [u64],
    pub(super) displays: &'a [String],
    /// Where compressed inputs are decompressed to, and objects fetched to, while they are read.
    pub(super) spool_dir: &'a Path,
    /// The object each input is, if it is one.
    pub(super) remote: &'a [Option<crate::source::object::Remote>],
    /// Whether each input is a stream (read from its copy in the spool folder).
    pub(super) streams: &'a [bool],
}

/// What a reader needs of the ingest's options.
pub(super) struct Reading {
    /// Read every file as this format instead of detecting it.
    pub format: Option<Format>,
    pub limits: crate::ingest::Limits,
}
