//! How much of one input an adapter may hold in memory at once, and how deep a value may nest.
//!
//! Adapters hold one record at a time: an NDJSON line (an OpenHands `output.jsonl`, Claude Code
//! transcript or Codex rollout line is one too), one element of a streamed list (a tau2
//! simulation, a tau-bench record, an Inspect sample), one length-prefixed OTLP protobuf
//! request, one decompressed archive member, or the whole document for formats read whole (an
//! agentfootprint Recording, a VCR cassette, a SWE-agent trajectory, an OpenHands event stream,
//! an any-agent trace, a bare message list, an OTLP JSON document, a one-request OTLP protobuf
//! file). Parsed into values and built into rows, such a record takes up to about ten times its
//! size at once, so the limit is set where a record at the limit still fits the engine's memory
//! budget (512 MB) with room to spare. Sizes are checked before anything is allocated: a file's
//! length, an archive member's declared size or a protobuf request's length prefix up front, and
//! every read is bounded as well, since a declared
//! size can lie. What is over a limit is quarantined with the limit named, and reading goes on
//! with the next record.
//!
//! Nesting is bounded too. serde_json stops at [`NESTING_LIMIT`] levels; YAML is held to the
//! same depth, checked on the text before the YAML parser sees it (its cost grows with the
//! square of the depth of nested flow collections).

/// The deepest nesting of lists and objects (YAML: sequences and mappings) read: serde_json's
/// own recursion limit, which it applies to every value it parses (it reads 127 levels and
/// stops at the 128th).
pub const NESTING_LIMIT: usize = 127;

/// The limits an adapter reads its input under. The defaults are far above anything a real
/// recording holds; they exist so that a hostile or broken file cannot take the process down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest record held in memory at once, in bytes (see the module documentation for
    /// what a record is in each format). A string inside a record is bounded by it too.
    pub record_bytes: u64,
    /// The most rows (runs plus their events) one conversation may hand to the store: the
    /// audit holds a conversation whole, at about 1.2 KB a row, so this bounds its memory
    /// whatever the rows' sizes. Runs past it are left out with a note naming the limit.
    pub conversation_rows: u64,
    /// The most bytes a compressed input is decompressed to. The copy goes to disk, not memory
    /// (the record limit bounds memory as for any file); this bounds the disk a small file
    /// that expands without end can take. What is past it is not read, with a note.
    pub decompressed_bytes: u64,
}

impl Limits {
    /// 64 GiB decompressed from one compressed input: far above a rotated log file (a few GiB
    /// at most), and a bound on the disk a file made to expand (deflate reaches about
    /// 1000:1, zstd more) can take while it is read.
    pub const DEFAULT_DECOMPRESSED_BYTES: u64 = 64 << 30;

    /// 32 MiB per record: a record of ordinary items takes about ten times its size while it is
    /// parsed, so one at the limit stays inside a 512 MB budget, and real records are far
    /// smaller (docs/limits.md has the measured peaks).
    pub const DEFAULT_RECORD_BYTES: u64 = 32 << 20;

    /// 250,000 rows: the audit holds a conversation whole, at about 1.3 KB a row, so this keeps
    /// one conversation to a few hundred MB; real conversations are orders of magnitude
    /// smaller (see docs/limits.md).
    pub const DEFAULT_CONVERSATION_ROWS: u64 = 250_000;

    /// The record limit as a `usize` (saturating on 32-bit targets).
    pub fn record_len(&self) -> usize {
        usize::try_from(self.record_bytes).unwrap_or(usize::MAX)
    }

    /// The words for a record of `bytes` that is over the record limit: "3.2 GiB (3435973837
    /// bytes), over the 32 MiB record limit".
    pub fn too_large(&self, bytes: u64) -> String {
        format!(
            "{} ({bytes} bytes), over the {} record limit",
            size_text(bytes),
            size_text(self.record_bytes)
        )
    }

    /// "over the 32 MiB record limit", for a record whose size is not known past the limit.
    pub fn over(&self) -> String {
        format!("over the {} record limit", size_text(self.record_bytes))
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            record_bytes: Self::DEFAULT_RECORD_BYTES,
            conversation_rows: Self::DEFAULT_CONVERSATION_ROWS,
            decompressed_bytes: Self::DEFAULT_DECOMPRESSED_BYTES,
        }
    }
}

/// The words for a value nested deeper than [`NESTING_LIMIT`].
pub fn too_deep() -> String {
    format!("nests lists and objects deeper than {NESTING_LIMIT} levels")
}

/// A quarantine reason for a serde_json error: its own words, except that a value nested past
/// serde_json's recursion limit is said in plain words.
pub fn json_error(err: &serde_json::Error) -> String {
    let text = err.to_string();
    match text.strip_prefix("recursion limit exceeded") {
        Some(position) => format!("the value {}{position}", too_deep()),
        None => text,
    }
}

/// A byte count in binary units, as people say it: "512 B", "64 MiB", "3.2 GiB".
pub fn size_text(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    let mut whole = bytes;
    while whole >= 1024 && unit + 1 < UNITS.len() {
        whole /= 1024;
        unit += 1;
    }
    let scale = 1u64 << (10 * unit);
    if bytes.is_multiple_of(scale) || whole >= 100 {
        format!("{whole} {}", UNITS[unit])
    } else {
        format!("{:.1} {}", bytes as f64 / scale as f64, UNITS[unit])
    }
}

/// `bytes` without a leading UTF-8 byte-order mark.
pub fn strip_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

/// Read all of `reader` into memory when it holds at most `limit` bytes: `Ok(Err(n))` when it
/// holds more (`n` bytes were read before giving up, `limit + 1`), with no more than that held.
/// `capacity_hint` is the size the reader is expected to have. The buffer grows by doubling but
/// never past `limit + 1`, so that reading a reader that is over the limit holds about the limit,
/// not twice it.
pub fn read_bounded<R: std::io::Read>(
    mut reader: R,
    limit: u64,
    capacity_hint: u64,
) -> std::io::Result<Result<Vec<u8>, u64>> {
    let most = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
    let hint = usize::try_from(capacity_hint.saturating_add(1)).unwrap_or(usize::MAX);
    let mut out = vec![0u8; hint.min(most).max(1)];
    let mut filled = 0;
    loop {
        if filled == out.len() {
            if filled >= most {
                return Ok(Err(filled as u64));
            }
            let grown = (filled * 2).max(64 << 10).min(most);
            out.reserve_exact(grown - filled);
            out.resize(grown, 0);
        }
        match reader.read(&mut out[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    out.truncate(filled);
    Ok(Ok(out))
}

/// What [`read_line_bounded`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// A line held in the buffer: its length with its `\n` (0 at the end of the input).
    Held(u64),
    /// A line longer than the limit, read through without being held: its length.
    TooLong(u64),
}

/// Read one line of `reader` into `buf` (cleared first), its `\n` included, when it is at most
/// `limit` bytes long before its `\n`; a longer line is read through to its end without being
/// held.
pub fn read_line_bounded<R: std::io::BufRead>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    limit: u64,
) -> std::io::Result<Line> {
    use std::io::{BufRead, Read};
    buf.clear();
    let held = reader
        .by_ref()
        .take(limit.saturating_add(1))
        .read_until(b'\n', buf)? as u64;
    if held <= limit || buf.last() == Some(&b'\n') {
        return Ok(Line::Held(held));
    }
    buf.clear();
    let rest = reader.skip_until(b'\n')? as u64;
    Ok(Line::TooLong(held + rest))
}

/// Read a file that is one record (a document read whole) into memory, a leading byte-order
/// mark left out. `Ok(Err(reason))` when the file is over the record limit; then no more than
/// the limit was read.
pub fn read_document(
    path: &std::path::Path,
    limits: &Limits,
) -> std::io::Result<crate::error::Result<Vec<u8>>> {
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let whole = "; a file of this format is read whole, as one record";
    if len > limits.record_bytes {
        return Ok(Err(crate::error::Error::Malformed(format!(
            "the file is {}{whole}",
            limits.too_large(len)
        ))));
    }
    let mut bytes = match read_bounded(file, limits.record_bytes, len)? {
        Ok(bytes) => bytes,
        Err(_) => {
            return Ok(Err(crate::error::Error::Malformed(format!(
                "the file grew {}{whole}",
                limits.over()
            ))))
        }
    };
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes.drain(..3);
    }
    Ok(Ok(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_words() {
        assert_eq!(size_text(512), "512 B");
        assert_eq!(size_text(64 << 20), "64 MiB");
        assert_eq!(size_text(3 << 29), "1.5 GiB");
        assert_eq!(size_text(500_000_000), "476 MiB");
        assert_eq!(
            Limits::default().too_large(10 << 30),
            "10 GiB (10737418240 bytes), over the 32 MiB record limit"
        );
    }

    #[test]
    fn bounded_reads_stop_past_the_limit() {
        let text = vec![b'x'; 100];
        assert_eq!(read_bounded(&text[..], 100, 0).unwrap(), Ok(text.clone()));
        assert_eq!(read_bounded(&text[..], 99, 1 << 40).unwrap(), Err(100));
        assert_eq!(read_bounded(&text[..], 99, 0).unwrap(), Err(100));
        assert_eq!(read_bounded(&text[..], 1000, 0).unwrap(), Ok(text.clone()));
        assert_eq!(read_bounded(&b""[..], 10, 5).unwrap(), Ok(Vec::new()));
        assert_eq!(strip_bom(b"\xEF\xBB\xBF{}"), b"{}");
        assert_eq!(strip_bom(b"{}"), b"{}");
    }

    #[test]
    fn long_lines_are_read_through_unheld() {
        let text = format!("short\n{}\nlast", "x".repeat(100));
        let mut reader = std::io::BufReader::with_capacity(16, text.as_bytes());
        let mut buf = Vec::new();
        assert_eq!(
            read_line_bounded(&mut reader, &mut buf, 10).unwrap(),
            Line::Held(6)
        );
        assert_eq!(buf, b"short\n");
        assert_eq!(
            read_line_bounded(&mut reader, &mut buf, 10).unwrap(),
            Line::TooLong(101)
        );
        assert!(buf.is_empty());
        assert_eq!(
            read_line_bounded(&mut reader, &mut buf, 10).unwrap(),
            Line::Held(4)
        );
        assert_eq!(buf, b"last");
        assert_eq!(
            read_line_bounded(&mut reader, &mut buf, 10).unwrap(),
            Line::Held(0)
        );
        // A line of exactly the limit, and one a byte over, with and without a newline.
        for (text, limit, want) in [
            ("abc\n", 3, Line::Held(4)),
            ("abcd\n", 3, Line::TooLong(5)),
            ("abc", 3, Line::Held(3)),
            ("abcd", 3, Line::TooLong(4)),
        ] {
            let mut reader = text.as_bytes();
            assert_eq!(
                read_line_bounded(&mut reader, &mut buf, limit).unwrap(),
                want
            );
        }
    }

    #[test]
    fn recursion_errors_are_said_plainly() {
        let deep = "[".repeat(200);
        let err = serde_json::from_str::<serde_json::Value>(&deep).unwrap_err();
        assert_eq!(
            json_error(&err),
            "the value nests lists and objects deeper than 127 levels at line 1 column 128"
        );
        let err = serde_json::from_str::<serde_json::Value>("[1,").unwrap_err();
        assert_eq!(json_error(&err), err.to_string());
    }
}
