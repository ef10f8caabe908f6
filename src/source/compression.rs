//! Compressed inputs: gzip and zstd, known by their magic numbers whatever the file is called.
//!
//! A compressed input is decompressed once, as a stream, into a file of the ingest's staging
//! directory, and the adapters read that copy as they read any file: formats that seek (the
//! JSON scanner, `.eval` archives) need a file, and the copy keeps memory at what the adapter
//! holds for one record whatever the file expands to. The copy is bounded by a limit the caller
//! gives, so a small file that expands without end fills neither memory nor the disk.

use super::hashing::HashingFile;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;

/// How an input is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// One gzip member or several one after another (what log rotation and `cat a.gz b.gz`
    /// make): every member is read.
    Gzip,
    /// One zstd frame or several, skippable frames passed over.
    Zstd,
}

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

impl Compression {
    /// The compression the first bytes of a file announce, if any.
    pub fn sniff(head: &[u8]) -> Option<Compression> {
        if head.starts_with(GZIP_MAGIC) {
            Some(Compression::Gzip)
        } else if head.starts_with(ZSTD_MAGIC) {
            Some(Compression::Zstd)
        } else {
            None
        }
    }

    /// The compression of the file at `path`, read from its first four bytes.
    pub fn of_file(path: &Path) -> io::Result<Option<Compression>> {
        let mut head = [0u8; 4];
        let mut file = std::fs::File::open(path)?;
        let mut n = 0;
        while n < head.len() {
            match file.read(&mut head[n..])? {
                0 => break,
                got => n += got,
            }
        }
        Ok(Compression::sniff(&head[..n]))
    }

    /// The name the manifest gives it.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }

    /// The name of the file inside one called `name`: its compression suffix taken off
    /// (`runs.jsonl.gz` holds `runs.jsonl`), and `name` itself when it has none, since the
    /// formats that are known by their names must still be known once decompressed.
    pub fn inner_name(self, name: &str) -> String {
        let suffixes: &[&str] = match self {
            Compression::Gzip => &[".gz", ".gzip"],
            Compression::Zstd => &[".zst", ".zstd"],
        };
        let lower = name.to_ascii_lowercase();
        for suffix in suffixes {
            if lower.len() > suffix.len() && lower.ends_with(suffix) {
                return name[..name.len() - suffix.len()].to_string();
            }
        }
        if self == Compression::Gzip && lower.ends_with(".tgz") {
            return format!("{}.tar", &name[..name.len() - 4]);
        }
        name.to_string()
    }

    fn decoder<'a>(self, input: impl BufRead + 'a) -> io::Result<Box<dyn Read + 'a>> {
        Ok(match self {
            Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(input)?),
        })
    }
}

/// How many times its size a compressed input is taken to expand to when nothing in it says:
/// JSON agent logs compress 5-10x under gzip or zstd (the tau2 recordings 6.6x).
pub const EXPECTED_RATIO: u64 = 6;

/// What an ingest's plan reads of an input before anything else is read: the bytes it is
/// expected to hold once decompressed, and its first bytes, decompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The bytes the file is expected to decompress to. The plan cuts the store into parts by
    /// input bytes, and the audit's memory goes with a part's rows, which go with the
    /// decompressed bytes: counted at its compressed size, a gzip'd night gets a sixth of the
    /// parts it needs, each then read back and rewritten to be cut by rows. A gzip file's
    /// trailer states the size of its last member (the whole file's for one member under
    /// 4 GiB), a zstd frame header may state its content size; when neither states more than the
    /// file's own size, six times the size is taken ([`expected_size_by_name`]). An uncompressed
    /// or unreadable file counts as its size.
    pub expected: u64,
    /// The first bytes asked for (fewer if the file holds fewer), decompressed when it is
    /// compressed; what a damaged stream gives before the damage.
    pub head: Vec<u8>,
}

/// Probe the local file at `path`, of `size` bytes, reading at most `head_bytes` of its
/// decompressed head (0: none), in one open of the file.
pub fn probe(path: &Path, size: u64, head_bytes: usize) -> Probe {
    let unread = Probe {
        expected: size,
        head: Vec::new(),
    };
    let Ok(file) = std::fs::File::open(path) else {
        return unread;
    };
    let mut file = BufReader::new(file);
    let Ok(start) = file.fill_buf() else {
        return unread;
    };
    let compression = Compression::sniff(start);
    let zstd_stated = zstd_stated_size(compression, start);
    let expected = expected_size(compression, size, || match compression {
        Some(Compression::Gzip) => gzip_trailer_size(&mut file, size),
        _ => zstd_stated,
    });
    let head = match head_bytes {
        0 => Vec::new(),
        n => decompressed_head(file, compression, n),
    };
    Probe { expected, head }
}

/// Probe an input of `size` bytes that is not a local file (an object in a bucket) from its
/// first bytes, `start`, and, when those announce gzip, its last four, `trailer`. `start` is
/// the whole input or a prefix of it; [`probe`] of a local copy gives the same, provided
/// `start` is long enough to decompress to `head_bytes` ([`probe_prefix`] bytes are).
pub fn probe_start(start: &[u8], trailer: Option<[u8; 4]>, size: u64, head_bytes: usize) -> Probe {
    let compression = Compression::sniff(start);
    let expected = expected_size(compression, size, || match compression {
        Some(Compression::Gzip) if size >= GZIP_SMALLEST => {
            trailer.map(|t| u64::from(u32::from_le_bytes(t)))
        }
        Some(Compression::Gzip) => None,
        _ => zstd_stated_size(compression, start),
    });
    let head = match head_bytes {
        0 => Vec::new(),
        n => decompressed_head(BufReader::new(start), compression, n),
    };
    Probe { expected, head }
}

/// How much of an input's start [`probe_start`] needs for a head of `head_bytes`: never less
/// than a zstd frame header, and for a head, enough that a compressed prefix decompresses to
/// all of it. A gzip stream gives its bytes as they are read, and neither format expands
/// stored data by more than a few bytes a block; but zstd gives none of a block until the
/// whole block is read, and a compressed block holds up to [`ZSTD_BLOCK_MAX`] bytes (a block
/// of text that compresses less than 2x, such as base64 attachments, is longer than a 64 KiB
/// head), so a head's prefix takes one more whole block.
pub fn probe_prefix(head_bytes: usize) -> usize {
    match head_bytes {
        0 => 4 << 10,
        n => n + ZSTD_BLOCK_MAX + (4 << 10),
    }
}

/// The most bytes a zstd block decompresses to, and so the most a compressed block holds
/// (the format's `Block_Maximum_Size`).
const ZSTD_BLOCK_MAX: usize = 128 << 10;

/// The smallest gzip file with a trailer worth reading: a header and a trailer, 10 and 8 bytes.
pub const GZIP_SMALLEST: u64 = 18;

/// The content size a zstd frame header states, if `start` begins one that states it.
fn zstd_stated_size(compression: Option<Compression>, start: &[u8]) -> Option<u64> {
    match compression {
        Some(Compression::Zstd) => zstd::zstd_safe::get_frame_content_size(start)
            .ok()
            .flatten(),
        _ => None,
    }
}

/// The bytes an input of `size` bytes compressed with `compression` is expected to decompress
/// to: what it states (`stated`, asked only of a compressed input), when that is more than
/// its size, or [`EXPECTED_RATIO`] times its size.
fn expected_size(
    compression: Option<Compression>,
    size: u64,
    stated: impl FnOnce() -> Option<u64>,
) -> u64 {
    if compression.is_none() {
        return size;
    }
    match stated() {
        Some(bytes) if bytes > size => bytes,
        _ => size.saturating_mul(EXPECTED_RATIO),
    }
}

/// The size a gzip file's trailer states: of its last member, modulo 2^32. `file` is left at
/// its start.
fn gzip_trailer_size(file: &mut BufReader<std::fs::File>, size: u64) -> Option<u64> {
    use std::io::{Seek, SeekFrom};
    if size < GZIP_SMALLEST {
        return None;
    }
    file.seek(SeekFrom::End(-4)).ok()?;
    let mut isize = [0u8; 4];
    let read = file.read_exact(&mut isize);
    file.seek(SeekFrom::Start(0)).ok()?;
    read.ok()?;
    Some(u64::from(u32::from_le_bytes(isize)))
}

/// The first `n` bytes read from `input` (at its start), through its decoder if compressed.
fn decompressed_head<'a>(
    input: impl BufRead + 'a,
    compression: Option<Compression>,
    n: usize,
) -> Vec<u8> {
    let mut reader: Box<dyn Read + 'a> = match compression {
        None => Box::new(input),
        Some(c) => match c.decoder(input) {
            Ok(decoder) => decoder,
            Err(_) => return Vec::new(),
        },
    };
    let mut head = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match reader.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    head.truncate(got);
    head
}

/// The bytes an object called `name`, of `size` bytes, is expected to hold once decompressed,
/// known by its name alone (an object is not read before it is fetched): a compression suffix
/// counts it at six times its size.
pub fn expected_size_by_name(name: &str, size: u64) -> u64 {
    let lower = name.to_ascii_lowercase();
    let compressed = [".gz", ".gzip", ".tgz", ".zst", ".zstd"]
        .iter()
        .any(|suffix| lower.ends_with(suffix));
    if compressed {
        size.saturating_mul(EXPECTED_RATIO)
    } else {
        size
    }
}

/// What decompressing one input gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decompressed {
    /// Bytes written to the copy.
    pub bytes: u64,
    /// The sha256 of the compressed file as it is on disk (what identifies the input).
    pub sha256: String,
    /// Why the copy holds less than the file, if it does. What was decompressed before that
    /// is in the copy.
    pub cut: Option<Cut>,
}

/// Why a decompressed copy stops before the end of its stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cut {
    /// The stream is damaged or cut short: what the decoder said.
    Damaged(String),
    /// It expands past the limit.
    OverLimit,
}

/// Decompress the file at `from` into a new file `to`, writing at most `limit` bytes.
///
/// A damaged or cut-short stream, or one that expands past `limit`, is not an error: the copy
/// holds what came before, and [`Decompressed::cut`] says why it stops there. Errors are those of
/// reading `from` or writing `to`, with their paths.
pub fn decompress(
    compression: Compression,
    from: &Path,
    to: &Path,
    limit: u64,
) -> io::Result<Decompressed> {
    let with_path = |e: io::Error, what: &str, path: &Path| {
        io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
    };
    let file = HashingFile::open(from).map_err(|e| with_path(e, "read", from))?;
    let mut compressed = BufReader::with_capacity(256 * 1024, file);
    let mut out = std::fs::File::create_new(to).map_err(|e| with_path(e, "create", to))?;
    let mut decoder = compression
        .decoder(&mut compressed)
        .map_err(|e| with_path(e, "read", from))?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut bytes = 0u64;
    let mut cut = None;
    loop {
        let n = match decoder.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                cut = Some(Cut::Damaged(damaged(compression, bytes, &e)));
                break;
            }
        };
        let room = limit - bytes;
        if n as u64 > room {
            out.write_all(&buf[..room as usize])
                .map_err(|e| with_path(e, "write", to))?;
            bytes = limit;
            cut = Some(Cut::OverLimit);
            break;
        }
        out.write_all(&buf[..n])
            .map_err(|e| with_path(e, "write", to))?;
        bytes += n as u64;
    }
    drop(decoder);
    out.flush().map_err(|e| with_path(e, "write", to))?;
    // The digest is of the whole compressed file: what the decoder left unread is hashed too.
    io::copy(&mut compressed, &mut io::sink()).map_err(|e| with_path(e, "read", from))?;
    let sha256 = compressed.get_mut().finish().unwrap_or_default();
    Ok(Decompressed { bytes, sha256, cut })
}

fn damaged(compression: Compression, bytes: u64, e: &io::Error) -> String {
    let what = if e.kind() == io::ErrorKind::UnexpectedEof {
        "is cut short".to_string()
    } else {
        format!("is damaged ({e})")
    };
    format!(
        "its {} stream {what} after {bytes} decompressed bytes; what follows is not read",
        compression.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn run(compression: Compression, file: &[u8], limit: u64) -> (Decompressed, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("in"), dir.path().join("out"));
        std::fs::write(&from, file).unwrap();
        let got = decompress(compression, &from, &to, limit).unwrap();
        (got, std::fs::read(&to).unwrap())
    }

    fn sha256(bytes: &[u8]) -> String {
        hex(&sha2::Digest::finalize(
            <sha2::Sha256 as sha2::Digest>::new_with_prefix(bytes),
        ))
    }
    use crate::source::hashing::hex;

    fn expected(file: &[u8], name: &str) -> (u64, u64) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, file).unwrap();
        let size = file.len() as u64;
        (
            probe(&path, size, 0).expected,
            expected_size_by_name(name, size),
        )
    }

    #[test]
    fn the_head_of_a_file_is_its_first_bytes_decompressed() {
        let dir = tempfile::tempdir().unwrap();
        let text: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let zstd = zstd::bulk::compress(&text, 3).unwrap();
        let mut cut = gzip(&text);
        cut.truncate(cut.len() / 2);
        for (name, file) in [
            ("plain", text.clone()),
            ("gz", gzip(&text)),
            ("zst", zstd),
            ("cut.gz", cut),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, &file).unwrap();
            // With the file's size, a gzip trailer is read first: the head is read from the start.
            let size = file.len() as u64;
            assert_eq!(probe(&path, size, 1000).head, &text[..1000], "{name}");
        }
        let short = dir.path().join("short.gz");
        std::fs::write(&short, gzip(b"{}")).unwrap();
        assert_eq!(probe(&short, 0, 1000).head, b"{}");
        std::fs::write(&short, b"").unwrap();
        assert!(probe(&short, 0, 1000).head.is_empty());
    }

    #[test]
    fn the_expected_size_is_what_the_file_states_or_six_times_its_size() {
        let text = b"{\"a\": 1}\n".repeat(10_000);
        let len = text.len() as u64;
        // One gzip member: its trailer's size; the name alone gives six times the file.
        let one = gzip(&text);
        let n = one.len() as u64;
        assert_eq!(expected(&one, "a.jsonl.gz"), (len, 6 * n));
        // Several members: the last one's size, under the file's own, so six times the file.
        let mut two = gzip(&text);
        two.extend(gzip(b"{}\n"));
        let n = two.len() as u64;
        assert_eq!(expected(&two, "a.jsonl.gz"), (6 * n, 6 * n));
        // zstd with the content size in its frame header, and streamed without it.
        let sized = zstd::bulk::compress(&text, 3).unwrap();
        let n = sized.len() as u64;
        assert_eq!(expected(&sized, "a.zst"), (len, 6 * n));
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        for half in text.chunks(text.len() / 2) {
            encoder.write_all(half).unwrap();
            encoder.flush().unwrap();
        }
        let streamed = encoder.finish().unwrap();
        assert!(zstd::zstd_safe::get_frame_content_size(&streamed)
            .unwrap()
            .is_none());
        let n = streamed.len() as u64;
        assert_eq!(expected(&streamed, "a.ZSTD"), (6 * n, 6 * n));
        // Plain files, and a gzip file under a plain name (known by its magic number here, by
        // its name alone as an object).
        assert_eq!(expected(&text, "a.jsonl"), (len, len));
        assert_eq!(expected(&one, "a.jsonl").0, len);
        assert_eq!(expected(&one, "a.jsonl").1, one.len() as u64);
        assert_eq!(expected(b"", "empty.gz").0, 0);
    }

    /// An object is probed from a prefix and, when gzip'd, its last four bytes (two ranged
    /// requests): that gives what probing its local copy gives, heads and expected sizes,
    /// whether the data compresses well or not at all.
    #[test]
    fn a_prefix_and_a_trailer_probe_as_the_whole_file_does() {
        let text = b"{\"a\": 1}\n".repeat(20_000);
        // Bytes no compressor shrinks: the prefix must still decompress to the whole head.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<u8> = (0..300_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        // Text that compresses less than 2x (base64, as of an attachment in a log): a zstd
        // block of it is longer than a 64 KiB head.
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let base64: Vec<u8> = noise
            .iter()
            .map(|b| alphabet[usize::from(b % 64)])
            .collect();
        let mut two = gzip(&text);
        two.extend(gzip(b"{}\n"));
        let mut streamed = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        streamed.write_all(&text).unwrap();
        let mut cut = gzip(&noise);
        cut.truncate(cut.len() / 2);
        let files = [
            ("plain", text.clone()),
            ("gzip", gzip(&text)),
            ("two members", two),
            ("gzip noise", gzip(&noise)),
            ("zstd sized", zstd::bulk::compress(&text, 3).unwrap()),
            ("zstd noise", zstd::bulk::compress(&noise, 3).unwrap()),
            ("zstd streamed", streamed.finish().unwrap()),
            ("zstd base64", zstd::bulk::compress(&base64, 3).unwrap()),
            ("gzip base64", gzip(&base64)),
            ("gzip cut", cut),
            ("tiny gzip", gzip(b"{}")),
            ("empty", Vec::new()),
        ];
        // Real recordings too, as they are and compressed, each longer than the prefix: two
        // agentfootprint Recording documents, and the bundled NDJSON logs one after another.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/agentfootprint");
        let mut logs: Vec<_> = std::fs::read_dir(root.join("ndjson"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        logs.sort();
        let log: Vec<u8> = logs
            .iter()
            .flat_map(|p| std::fs::read(p).unwrap())
            .collect();
        let mut real = Vec::new();
        for bytes in [
            std::fs::read(root.join("recordings/g-01-sess-g-retry-pass-turn1.json")).unwrap(),
            std::fs::read(root.join("recordings/g-02-sess-g-exhausted-turn1.json")).unwrap(),
            log,
        ] {
            assert!(bytes.len() > probe_prefix(64 << 10));
            real.push(("real gzip", gzip(&bytes)));
            real.push(("real zstd", zstd::bulk::compress(&bytes, 3).unwrap()));
            real.push(("real plain", bytes));
        }
        let dir = tempfile::tempdir().unwrap();
        for (name, file) in files.into_iter().chain(real) {
            let path = dir.path().join("copy");
            std::fs::write(&path, &file).unwrap();
            let size = file.len() as u64;
            for head_bytes in [0, 1000, 64 << 10] {
                let start = &file[..file.len().min(probe_prefix(head_bytes))];
                let trailer = (Compression::sniff(start) == Some(Compression::Gzip)
                    && size >= GZIP_SMALLEST)
                    .then(|| file[file.len() - 4..].try_into().unwrap());
                let local = probe(&path, size, head_bytes);
                if name.contains("noise") && head_bytes > 0 {
                    assert_eq!(local.head, &noise[..head_bytes], "{name}");
                }
                assert_eq!(
                    probe_start(start, trailer, size, head_bytes),
                    local,
                    "{name}, a head of {head_bytes}"
                );
            }
        }
    }

    #[test]
    fn every_gzip_member_is_read_and_the_compressed_file_is_hashed() {
        let mut file = gzip(b"{\"a\":1}\n");
        file.extend(gzip(b"{\"b\":2}\n"));
        assert_eq!(Compression::sniff(&file), Some(Compression::Gzip));
        let (got, copy) = run(Compression::Gzip, &file, 1 << 20);
        assert_eq!(copy, b"{\"a\":1}\n{\"b\":2}\n");
        assert_eq!(got.bytes, 16);
        assert_eq!(got.sha256, sha256(&file));
        assert_eq!(got.cut, None);
    }

    #[test]
    fn every_zstd_frame_is_read() {
        let mut file = zstd::encode_all(&b"one\n"[..], 3).unwrap();
        file.extend(zstd::encode_all(&b"two\n"[..], 19).unwrap());
        assert_eq!(Compression::sniff(&file), Some(Compression::Zstd));
        let (got, copy) = run(Compression::Zstd, &file, 1 << 20);
        assert_eq!(copy, b"one\ntwo\n");
        assert_eq!((got.sha256, got.cut), (sha256(&file), None));
    }

    #[test]
    fn a_stream_cut_short_keeps_what_came_before_and_says_so() {
        let text: Vec<u8> = (0..20_000u32)
            .flat_map(|i| format!("{i}\n").into_bytes())
            .collect();
        let file = gzip(&text);
        let (got, copy) = run(Compression::Gzip, &file[..file.len() / 2], 1 << 20);
        assert!(!copy.is_empty() && text.starts_with(&copy));
        let Some(Cut::Damaged(cut)) = got.cut else {
            panic!("{:?}", got.cut)
        };
        assert!(
            cut.starts_with("its gzip stream is cut short after"),
            "{cut}"
        );
        assert_eq!(got.sha256, sha256(&file[..file.len() / 2]));
    }

    #[test]
    fn damaged_bytes_are_named_as_damage() {
        let mut file = gzip(&vec![b'x'; 100_000]);
        let middle = file.len() / 2;
        file[middle..middle + 8].copy_from_slice(b"garbage!");
        let (got, _) = run(Compression::Gzip, &file, 1 << 20);
        let Some(Cut::Damaged(cut)) = got.cut else {
            panic!("{:?}", got.cut)
        };
        assert!(cut.starts_with("its gzip stream is damaged"), "{cut}");
    }

    #[test]
    fn a_file_that_expands_past_the_limit_stops_at_the_limit() {
        // 64 MiB of zeros in about 64 KiB.
        let file = gzip(&vec![0u8; 64 << 20]);
        assert!(file.len() < 100_000);
        let (got, copy) = run(Compression::Gzip, &file, 1 << 20);
        assert_eq!((got.bytes, copy.len()), (1 << 20, 1 << 20));
        assert_eq!(got.cut, Some(Cut::OverLimit));
        // The digest is still of the whole compressed file.
        assert_eq!(got.sha256, sha256(&file));
    }

    #[test]
    fn inner_names_lose_the_compression_suffix_only() {
        let gz = Compression::Gzip;
        assert_eq!(gz.inner_name("runs.jsonl.gz"), "runs.jsonl");
        assert_eq!(gz.inner_name("RUNS.JSON.GZ"), "RUNS.JSON");
        assert_eq!(gz.inner_name("logs.tgz"), "logs.tar");
        assert_eq!(gz.inner_name("batch-0001"), "batch-0001");
        assert_eq!(gz.inner_name(".gz"), ".gz");
        assert_eq!(Compression::Zstd.inner_name("a.ndjson.zst"), "a.ndjson");
    }

    #[test]
    fn plain_text_and_short_files_are_not_compressed() {
        assert_eq!(Compression::sniff(b""), None);
        assert_eq!(Compression::sniff(&[0x1f]), None);
        assert_eq!(Compression::sniff(&[0x28, 0xb5, 0x2f]), None);
        assert_eq!(Compression::sniff(b"PK\x03\x04"), None);
    }
}
