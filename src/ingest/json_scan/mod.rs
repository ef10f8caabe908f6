//! Reading a large JSON document in big chunks and parsing each record of it from memory.
//!
//! serde_json's reader over a file takes one byte at a time; its slice reader is several times
//! faster. A [`Scanner`] reads the file a megabyte at a time and finds where each value of a big
//! list (or object) starts and ends by its structure alone (nesting depth, strings, backslash
//! escapes); the adapter then parses that one value with `serde_json::Deserializer::from_slice`
//! and a seed of its own. Memory is bounded by the largest single value the adapter asks for,
//! never by the file.
//!
//! The walk between values (commas, colons, keys, the end of a list) is checked here the way
//! serde_json's own list and object access checks it, and a syntax error is described in
//! serde_json's words, at the line and column a streaming parse of the whole document reports
//! ([`Scanner::describe`]): a document reads the same as it did through `json_pick::open_json`,
//! only faster. The byte offset given with an error is where the error is (the start of the value
//! plus the error's place in it); serde_json's stream reader, asked the same, answered up to a few
//! bytes further on, having read on to close the lists around the error before giving up. Values
//! skipped unbuilt ([`Scanner::skip`]) are still checked, one element at a time.
//!
//! Hostile input is bounded here too. A value longer than the scanner's value limit is not held:
//! its beginning is checked, the rest is passed over by its structure alone, and it comes back as
//! [`ScanError::Skipped`] with the scanner standing after it, so that the adapter quarantines that
//! one record and reads on; a value nested deeper than serde_json reads is passed over the same
//! way. The numbers Python's `json` module writes for IEEE specials (`NaN`, `Infinity`,
//! `-Infinity`), which are not JSON, are read as `null` and counted
//! ([`Scanner::take_python_numbers`]) so that the adapter can note them on the record.

use std::io::{self, Read, Seek, SeekFrom};
use std::marker::PhantomData;
use std::path::Path;

use serde::de::{DeserializeSeed, IgnoredAny};

mod bytes;
mod python;

use bytes::{find_mark, is_blank, is_delimiter, token_len};
pub(crate) use python::parse_python_lenient;
use python::{as_streamed, is_too_deep, locate, python_token, Patched};

use crate::ingest::json_pick::NotJson;
use crate::ingest::Limits;

/// How much of the file one read asks for.
const CHUNK: usize = 1 << 20;

/// A value still open after this many bytes has its beginning checked, so that a broken document
/// (an unbalanced bracket, a stray quote) is reported without reading the rest of the file into
/// memory. The threshold doubles after each check that finds the value sound so far.
const FIRST_CHECK: usize = 16 << 20;

/// A number or literal longer than this is taken as it stands (so that a run of garbage is not
/// read whole into memory).
const TOKEN_CAP: usize = 16 << 20;

/// serde_json's words for the syntax errors found between values (its `ErrorCode` texts).
const EOF_LIST: &str = "EOF while parsing a list";
const EOF_OBJECT: &str = "EOF while parsing an object";
const EOF_VALUE: &str = "EOF while parsing a value";
const EXPECTED_COLON: &str = "expected `:`";
const LIST_COMMA_OR_END: &str = "expected `,` or `]`";
const OBJECT_COMMA_OR_END: &str = "expected `,` or `}`";
const KEY_MUST_BE_A_STRING: &str = "key must be a string";
const TRAILING_CHARACTERS: &str = "trailing characters";
const TRAILING_COMMA: &str = "trailing comma";

/// Why a document could not be read on.
#[derive(Debug)]
pub(crate) enum ScanError {
    /// Reading the file failed.
    Io(io::Error),
    /// The document is not valid JSON. `what` is serde_json's description without a position;
    /// `at` is where serde_json places the error, as the number of bytes of the file it had taken
    /// when it found it (its byte of look-ahead included); `positioned` says whether serde_json
    /// would name a line and column.
    Syntax {
        what: String,
        at: u64,
        positioned: bool,
    },
    /// The value was passed over unparsed, for the reason given ("is 70 MiB (...), over the
    /// 32 MiB record limit"); the scanner stands after it and the walk can go on.
    Skipped(String),
}

impl From<io::Error> for ScanError {
    fn from(err: io::Error) -> Self {
        ScanError::Io(err)
    }
}

/// A list or object being walked: whether its first member is still to come, and which of
/// serde_json's two ways of checking its commas applies (a visitor's `SeqAccess`/`MapAccess`, or
/// the `IgnoredAny` skip, which words a trailing comma differently).
pub(crate) struct Walk {
    first: bool,
    ignore: bool,
}

/// Where the value being captured stands, so that a scan can stop at the end of the buffer and
/// go on after the next read.
#[derive(Clone, Copy)]
struct Nest {
    depth: u64,
    in_string: bool,
    escaped: bool,
    /// Bytes of a `\u` escape still to pass over: serde_json takes the four bytes after `\u`
    /// whatever they are, so the capture must hold them too, even a `"` among them, for the
    /// slice to fail where the whole document fails.
    hex: u8,
}

/// The bytes of one value in the buffer.
struct Span {
    start: usize,
    end: usize,
    kind: SpanKind,
}

enum SpanKind {
    /// A complete list, object or string.
    Whole,
    /// A number, a literal or garbage: the token and the byte after it (serde_json looks one byte
    /// past a number). How much the parser used is worked out once it has succeeded.
    Token,
    /// A list, object or string that does not end: the file ends first, or (`Some`) its
    /// beginning was found broken by the size check and this is the error found there.
    Cut(Option<serde_json::Error>),
    /// A value longer than the value limit, passed over: its length. The span is empty and
    /// stands after it.
    TooLarge(u64),
}

/// A JSON document read in chunks. See the module documentation.
pub(crate) struct Scanner<R> {
    reader: R,
    /// The file's bytes from `base` on are `buf[..filled]`; the rest of `buf` is room to read into.
    buf: Vec<u8>,
    filled: usize,
    /// The next byte to look at.
    pos: usize,
    base: u64,
    eof: bool,
    chunk: usize,
    first_check: usize,
    /// Where the document starts (after a byte-order mark and leading blanks): line 1, column 0
    /// for serde_json.
    start: u64,
    /// The longest value held for parsing; a longer one is passed over.
    limit: usize,
    /// Whether the value last captured has a `N` or `I` outside its strings: a number Python
    /// writes for an IEEE special, or garbage.
    python: bool,
    /// Python's special numbers read as `null` since last taken.
    python_numbers: u64,
}

impl Scanner<crate::source::HashingFile> {
    /// Open a file after a UTF-8 byte-order mark and leading blanks. `Ok(Err(..))` when the file
    /// is empty or does not start a JSON object or list (the same verdicts as `open_json`). The
    /// file is hashed as it is read. No value longer than `limits.record_bytes` is held.
    pub(crate) fn open(path: &Path, limits: &Limits) -> io::Result<Result<Self, NotJson>> {
        let opened = Self::start(crate::source::HashingFile::open(path)?, CHUNK, FIRST_CHECK)?;
        Ok(opened.map(|mut scan| {
            scan.limit = limits.record_len();
            scan
        }))
    }

    /// The file's sha256, when everything so far read it whole and in order
    /// ([`crate::source::HashingFile::finish`]).
    pub(crate) fn file_digest(&mut self) -> Option<String> {
        self.reader.finish()
    }
}

impl<R: Read + Seek> Scanner<R> {
    /// Start reading `reader`, `chunk` bytes at a time.
    pub(crate) fn start(
        reader: R,
        chunk: usize,
        first_check: usize,
    ) -> io::Result<Result<Self, NotJson>> {
        let chunk = chunk.max(1);
        let mut scan = Scanner {
            reader,
            buf: Vec::new(),
            filled: 0,
            pos: 0,
            base: 0,
            eof: false,
            chunk,
            first_check: first_check.max(1),
            start: 0,
            limit: usize::MAX,
            python: false,
            python_numbers: 0,
        };
        scan.want(3)?;
        let mut skipped = false;
        if scan.buf[..scan.filled].starts_with(b"\xEF\xBB\xBF") {
            scan.pos = 3;
            skipped = true;
        }
        let first = loop {
            if scan.pos == scan.filled && !scan.more(None)? {
                return Ok(Err(if skipped {
                    NotJson::Blank
                } else {
                    NotJson::Empty
                }));
            }
            let byte = scan.buf[scan.pos];
            if !is_blank(byte) {
                break byte;
            }
            scan.pos += 1;
            skipped = true;
        };
        if first != b'{' && first != b'[' {
            scan.want(24)?;
            let end = scan.filled.min(scan.pos + 24);
            let start = String::from_utf8_lossy(&scan.buf[scan.pos..end]).into_owned();
            return Ok(Err(NotJson::Starts(start)));
        }
        scan.start = scan.at(scan.pos);
        Ok(Ok(scan))
    }

    /// The file offset of `buf[index]`.
    fn at(&self, index: usize) -> u64 {
        self.base + index as u64
    }

    /// Hold no value longer than `bytes`.
    #[cfg(test)]
    pub(crate) fn set_limit(&mut self, bytes: usize) {
        self.limit = bytes.max(1);
    }

    /// How many of Python's special numbers (`NaN`, `Infinity`, `-Infinity`) were read as
    /// `null` since the last call.
    pub(crate) fn take_python_numbers(&mut self) -> u64 {
        std::mem::take(&mut self.python_numbers)
    }

    /// Read more of the file, keeping `buf[keep..]` (moved to the front; `keep` is updated, and
    /// `keep: None` keeps from `pos` on). False at the end of the file.
    fn more(&mut self, keep: Option<&mut usize>) -> io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        let from = keep.as_ref().map_or(self.pos, |k| **k);
        if from > 0 {
            self.buf.copy_within(from..self.filled, 0);
            self.filled -= from;
            self.pos -= from;
            self.base += from as u64;
            if let Some(k) = keep {
                *k = 0;
            }
        }
        if self.buf.len() - self.filled < self.chunk {
            // Doubling, but not far past what the value limit lets a value hold.
            let cap = self.limit.saturating_add(2 * self.chunk);
            let grown = (self.buf.len() * 2).min(cap).max(self.filled + self.chunk);
            self.buf.resize(grown, 0);
        }
        let end = self.filled + self.chunk;
        loop {
            match self.reader.read(&mut self.buf[self.filled..end]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.filled += n;
                    return Ok(true);
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
    }

    /// Have at least `n` bytes from `pos` on in the buffer, when the file has them.
    fn want(&mut self, n: usize) -> io::Result<()> {
        while self.filled - self.pos < n && self.more(None)? {}
        Ok(())
    }

    /// The first byte of the next value, blanks skipped (not consumed); `None` at the end of the
    /// file.
    pub(crate) fn peek(&mut self) -> Result<Option<u8>, ScanError> {
        loop {
            while self.pos < self.filled {
                let byte = self.buf[self.pos];
                if !is_blank(byte) {
                    return Ok(Some(byte));
                }
                self.pos += 1;
            }
            if !self.more(None)? {
                return Ok(None);
            }
        }
    }

    /// A syntax error at the byte just peeked (`peeked`), or at the end of the file.
    fn error(&self, what: &str, peeked: bool) -> ScanError {
        ScanError::Syntax {
            what: what.to_string(),
            at: self.at(self.pos) + u64::from(peeked),
            positioned: true,
        }
    }

    /// Enter the list or object whose first byte [`peek`](Self::peek) just returned.
    pub(crate) fn enter(&mut self) -> Walk {
        debug_assert!(matches!(self.buf.get(self.pos), Some(b'[' | b'{')));
        self.pos += 1;
        Walk {
            first: true,
            ignore: false,
        }
    }

    /// Move to the next element of the list being walked: `true` when there is one (parse or
    /// skip it next), `false` when the list has ended (its `]` is consumed).
    pub(crate) fn next_element(&mut self, walk: &mut Walk) -> Result<bool, ScanError> {
        let first = std::mem::replace(&mut walk.first, false);
        match self.peek()? {
            None => Err(self.error(EOF_LIST, false)),
            Some(b']') => {
                self.pos += 1;
                Ok(false)
            }
            Some(_) if first => Ok(true),
            Some(b',') => {
                self.pos += 1;
                match self.peek()? {
                    None => Err(self.error(EOF_VALUE, false)),
                    // The skip reads on and finds no value; a visitor's list names the comma.
                    Some(b']') if !walk.ignore => Err(self.error(TRAILING_COMMA, true)),
                    Some(_) => Ok(true),
                }
            }
            Some(_) => Err(self.error(LIST_COMMA_OR_END, true)),
        }
    }

    /// Move to the next key of the object being walked and past its colon: `Some(key)` when
    /// there is one (parse or skip its value next), `None` when the object has ended.
    pub(crate) fn next_key(&mut self, walk: &mut Walk) -> Result<Option<String>, ScanError> {
        let first = std::mem::replace(&mut walk.first, false);
        match self.peek()? {
            None => return Err(self.error(EOF_OBJECT, false)),
            Some(b'}') => {
                self.pos += 1;
                return Ok(None);
            }
            Some(b'"') if first => {}
            Some(_) if first => return Err(self.error(KEY_MUST_BE_A_STRING, true)),
            Some(b',') => {
                self.pos += 1;
                match self.peek()? {
                    Some(b'"') => {}
                    Some(b'}') if !walk.ignore => return Err(self.error(TRAILING_COMMA, true)),
                    Some(_) => return Err(self.error(KEY_MUST_BE_A_STRING, true)),
                    None if walk.ignore => return Err(self.error(EOF_OBJECT, false)),
                    None => return Err(self.error(EOF_VALUE, false)),
                }
            }
            Some(_) => return Err(self.error(OBJECT_COMMA_OR_END, true)),
        }
        // Keys are checked as the two ways of reading them do: a visitor's key is text (valid
        // UTF-8), a skipped one is not.
        let key = if walk.ignore {
            self.parse(PhantomData::<IgnoredAny>)?;
            String::new()
        } else {
            self.parse(PhantomData::<String>)?
        };
        match self.peek()? {
            Some(b':') => {
                self.pos += 1;
                Ok(Some(key))
            }
            Some(_) => Err(self.error(EXPECTED_COLON, true)),
            None => Err(self.error(EOF_OBJECT, false)),
        }
    }

    /// Parse the next value from memory with `seed`.
    pub(crate) fn parse<S, V>(&mut self, seed: S) -> Result<V, ScanError>
    where
        S: for<'de> DeserializeSeed<'de, Value = V>,
    {
        let span = self.capture()?;
        if let SpanKind::TooLarge(length) = span.kind {
            self.pos = span.end;
            let limit = Limits {
                record_bytes: self.limit as u64,
                ..Limits::default()
            };
            return Err(ScanError::Skipped(format!(
                "is {}",
                limit.too_large(length)
            )));
        }
        let bytes = &self.buf[span.start..span.end];
        if matches!(span.kind, SpanKind::Token) {
            if let Some(len) = python_token(bytes) {
                // `NaN`, `Infinity` or `-Infinity` standing alone.
                let value = seed
                    .deserialize(&mut serde_json::Deserializer::from_slice(b"null"))
                    .map_err(|err| self.slice_error(err, span.start, span.end))?;
                self.python_numbers += 1;
                self.pos = span.start + len;
                return Ok(value);
            }
        }
        // A value the file cuts short is patched too: its error must be the one serde_json
        // meets past the Python numbers in it.
        let patched = match (&span.kind, self.python) {
            (SpanKind::Whole | SpanKind::Cut(None), true) => Patched::new(bytes),
            _ => None,
        };
        let text = patched.as_ref().map_or(bytes, |p| &p.bytes);
        let mut de = serde_json::Deserializer::from_slice(text);
        let outcome = seed.deserialize(&mut de);
        let (value, used) = match (outcome, span.kind) {
            (Ok(value), SpanKind::Whole) => {
                self.python_numbers += patched.as_ref().map_or(0, |p| p.count());
                (value, bytes.len())
            }
            // Nested past serde_json's limit: the value is sound as far as its brackets go, so
            // the walk can go on after it.
            (Err(err), SpanKind::Whole) if is_too_deep(&err) => {
                self.pos = span.end;
                return Err(ScanError::Skipped(crate::ingest::limits::too_deep()));
            }
            (Err(err), SpanKind::Whole | SpanKind::Cut(None)) if patched.is_some() => {
                let patched = patched.as_ref().expect("patched");
                return Err(self.patched_error(err, span.start, span.end, patched));
            }
            (Ok(value), SpanKind::Token) => (value, token_len(bytes)),
            // A value cut short cannot be parsed: the error is its beginning's (below).
            (Ok(_), SpanKind::Cut(Some(early))) => {
                return Err(self.slice_error(early, span.start, span.end))
            }
            (Err(err), SpanKind::Cut(Some(early)))
                if err.classify() == serde_json::error::Category::Eof =>
            {
                return Err(self.slice_error(early, span.start, span.end))
            }
            // Cannot happen (a value the file cuts short does not parse); said as serde_json
            // would, should it ever.
            (Ok(_), SpanKind::Cut(None)) => {
                self.pos = span.end;
                return Err(self.error(EOF_VALUE, false));
            }
            (Err(err), _) => return Err(self.slice_error(err, span.start, span.end)),
            (_, SpanKind::TooLarge(_)) => unreachable!("returned above"),
        };
        self.pos = span.start + used;
        Ok(value)
    }

    /// Skip the next value unbuilt, checking it as serde_json's `IgnoredAny` would: a list or an
    /// object one member at a time, so that only one member is ever held. A member too large or
    /// too deep to parse is passed over without complaint: nothing of it was wanted.
    pub(crate) fn skip(&mut self) -> Result<(), ScanError> {
        let list = match self.peek()? {
            Some(b'[') => true,
            Some(b'{') => false,
            _ => return self.ignore(),
        };
        let mut walk = self.enter();
        walk.ignore = true;
        if list {
            while self.next_element(&mut walk)? {
                self.ignore()?;
            }
        } else {
            while self.next_key(&mut walk)?.is_some() {
                self.ignore()?;
            }
        }
        Ok(())
    }

    /// Parse the next value into nothing; one passed over is fine.
    fn ignore(&mut self) -> Result<(), ScanError> {
        match self.parse(PhantomData::<IgnoredAny>) {
            Ok(_) | Err(ScanError::Skipped(_)) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Read through the object whose `{` [`peek`](Self::peek) just returned, its keys checked
    /// and its values skipped, as a visitor draining it would.
    pub(crate) fn drain_object(&mut self) -> Result<(), ScanError> {
        let mut walk = self.enter();
        while self.next_key(&mut walk)?.is_some() {
            self.skip()?;
        }
        Ok(())
    }

    /// Read through the list whose `[` [`peek`](Self::peek) just returned, its elements skipped,
    /// as a visitor draining it would.
    pub(crate) fn drain_list(&mut self) -> Result<(), ScanError> {
        let mut walk = self.enter();
        while self.next_element(&mut walk)? {
            self.skip()?;
        }
        Ok(())
    }

    /// Check that only blanks follow the document.
    pub(crate) fn end(&mut self) -> Result<(), ScanError> {
        match self.peek()? {
            None => Ok(()),
            Some(_) => Err(self.error(TRAILING_CHARACTERS, true)),
        }
    }

    /// The bytes of the next value, read in as needed.
    fn capture(&mut self) -> Result<Span, ScanError> {
        let Some(first) = self.peek()? else {
            return Ok(Span {
                start: self.pos,
                end: self.pos,
                kind: SpanKind::Cut(None),
            });
        };
        let mut start = self.pos;
        let mut nest = match first {
            b'[' | b'{' => Nest {
                depth: 1,
                in_string: false,
                escaped: false,
                hex: 0,
            },
            b'"' => Nest {
                depth: 0,
                in_string: true,
                escaped: false,
                hex: 0,
            },
            _ => return self.capture_token(),
        };
        self.pos += 1;
        self.python = false;
        let mut check_at = self.first_check;
        loop {
            if let Some(end) = self.scan(&mut nest) {
                let kind = if end - start > self.limit {
                    SpanKind::TooLarge((end - start) as u64)
                } else {
                    SpanKind::Whole
                };
                return Ok(Span { start, end, kind });
            }
            let held = self.filled - start;
            let too_large = held > self.limit;
            if held >= check_at || too_large {
                // Checked up to its last delimiter: a number cut short by the buffer would read
                // as an error of its own.
                let read = &self.buf[start..self.filled];
                let sound_to = read
                    .iter()
                    .rposition(|b| is_delimiter(*b))
                    .map_or(0, |i| i + 1);
                // Python's numbers are not errors; an error found past them is left for the
                // parse of the whole value to place.
                let patched = if self.python {
                    Patched::new(&read[..sound_to])
                } else {
                    None
                };
                let text = patched.as_ref().map_or(&read[..sound_to], |p| &p.bytes);
                let mut de = serde_json::Deserializer::from_slice(text);
                match <IgnoredAny as serde::Deserialize>::deserialize(&mut de) {
                    Err(err)
                        if err.classify() != serde_json::error::Category::Eof
                            && patched.is_none()
                            && !is_too_deep(&err) =>
                    {
                        return Ok(Span {
                            start,
                            end: self.filled,
                            kind: SpanKind::Cut(Some(err)),
                        })
                    }
                    _ => check_at = check_at.saturating_mul(2),
                }
            }
            if too_large {
                return self.pass_over(start, nest);
            }
            if !self.more(Some(&mut start))? {
                return Ok(Span {
                    start,
                    end: self.filled,
                    kind: SpanKind::Cut(None),
                });
            }
        }
    }

    /// Go past the rest of a value too long to hold, by its structure alone, holding nothing of
    /// it. `buf[start..]` is its beginning, all scanned.
    fn pass_over(&mut self, start: usize, mut nest: Nest) -> Result<Span, ScanError> {
        let begin = self.at(start);
        // The buffer grew to hold the beginning; it goes back to its working size.
        self.base += self.filled as u64;
        self.filled = 0;
        self.pos = 0;
        self.buf = Vec::new();
        loop {
            if !self.more(None)? {
                return Err(ScanError::Syntax {
                    what: EOF_VALUE.to_string(),
                    at: self.at(self.filled),
                    positioned: true,
                });
            }
            if let Some(end) = self.scan(&mut nest) {
                return Ok(Span {
                    start: end,
                    end,
                    kind: SpanKind::TooLarge(self.at(end) - begin),
                });
            }
        }
    }

    /// Capture a number, a literal or garbage: the bytes up to the next delimiter, and that
    /// delimiter (serde_json looks at it to end a number or to report it).
    fn capture_token(&mut self) -> Result<Span, ScanError> {
        let mut start = self.pos;
        loop {
            while self.pos < self.filled && !is_delimiter(self.buf[self.pos]) {
                self.pos += 1;
            }
            if self.pos < self.filled {
                return Ok(Span {
                    start,
                    end: self.pos + 1,
                    kind: SpanKind::Token,
                });
            }
            if self.pos - start >= TOKEN_CAP || !self.more(Some(&mut start))? {
                return Ok(Span {
                    start,
                    end: self.filled,
                    kind: SpanKind::Token,
                });
            }
        }
    }

    /// Look for the end of the value being captured in `buf[pos..filled]`: the index just past
    /// it, or `None` (all of the buffer scanned, `nest` saved) when more must be read.
    fn scan(&mut self, nest: &mut Nest) -> Option<usize> {
        let buf = &self.buf[..self.filled];
        let mut i = self.pos;
        let Nest {
            mut depth,
            mut in_string,
            mut escaped,
            mut hex,
        } = *nest;
        let mut python = false;
        loop {
            if escaped {
                if i == buf.len() {
                    break;
                }
                if buf[i] == b'u' {
                    hex = 4;
                }
                i += 1;
                escaped = false;
            }
            if hex > 0 {
                let passed = usize::from(hex).min(buf.len() - i);
                i += passed;
                hex -= passed as u8;
                if hex > 0 {
                    break;
                }
            }
            let Some(mark) = find_mark(buf, i, in_string) else {
                i = buf.len();
                break;
            };
            i = mark + 1;
            match buf[mark] {
                b'"' => {
                    in_string = !in_string;
                    if !in_string && depth == 0 {
                        self.pos = i;
                        self.python |= python;
                        return Some(i);
                    }
                }
                b'\\' => escaped = true,
                b'[' | b'{' => depth += 1,
                b'N' | b'I' => python = true,
                _ => {
                    depth -= 1;
                    if depth == 0 {
                        self.pos = i;
                        self.python |= python;
                        return Some(i);
                    }
                }
            }
        }
        self.pos = i;
        self.python |= python;
        *nest = Nest {
            depth,
            in_string,
            escaped,
            hex,
        };
        None
    }

    /// A serde_json error from parsing `buf[start..end]`, placed in the file.
    fn slice_error(&self, err: serde_json::Error, start: usize, end: usize) -> ScanError {
        if err.is_io() {
            return ScanError::Io(err.into());
        }
        let bytes = &self.buf[start..end];
        match locate(&err, bytes) {
            (what, None) => ScanError::Syntax {
                what,
                at: self.at(end),
                positioned: false,
            },
            (what, Some(index)) => {
                let index = as_streamed(&what, bytes, index);
                ScanError::Syntax {
                    what,
                    at: self.at(start) + index as u64,
                    positioned: true,
                }
            }
        }
    }

    /// [`slice_error`](Self::slice_error) for an error in the patched copy of `buf[start..end]`:
    /// placed where it is in the file.
    fn patched_error(
        &self,
        err: serde_json::Error,
        start: usize,
        end: usize,
        patched: &Patched,
    ) -> ScanError {
        if err.is_io() {
            return ScanError::Io(err.into());
        }
        match locate(&err, &patched.bytes) {
            (what, None) => ScanError::Syntax {
                what,
                at: self.at(end),
                positioned: false,
            },
            (what, Some(index)) => {
                let index = as_streamed(&what, &patched.bytes, index);
                ScanError::Syntax {
                    what,
                    at: self.at(start) + patched.original(index) as u64,
                    positioned: true,
                }
            }
        }
    }

    /// Put an error in serde_json's words: its description with the line and column of the
    /// document, and the byte offset reached. A failure to read the file is returned as such.
    pub(crate) fn describe(&mut self, err: ScanError) -> io::Result<(String, u64)> {
        match err {
            ScanError::Io(err) => Err(err),
            ScanError::Skipped(reason) => {
                let at = self.at(self.pos);
                let (line, column) = self.line_column(at)?;
                Ok((
                    format!("the value ending at line {line} column {column} {reason}"),
                    at,
                ))
            }
            ScanError::Syntax {
                what,
                at,
                positioned: false,
            } => Ok((what, at)),
            ScanError::Syntax { what, at, .. } => {
                let (line, column) = self.line_column(at)?;
                Ok((format!("{what} at line {line} column {column}"), at))
            }
        }
    }

    /// The line and column serde_json counts after taking the document's bytes up to `at`
    /// (read again from the file: errors are rare, and counting lines on the way would cost every
    /// document).
    fn line_column(&mut self, at: u64) -> io::Result<(u64, u64)> {
        self.reader.seek(SeekFrom::Start(self.start))?;
        let mut left = at.saturating_sub(self.start);
        let (mut line, mut column) = (1u64, 0u64);
        let mut chunk = vec![0u8; 64 * 1024];
        while left > 0 {
            let want = chunk.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            let n = match self.reader.read(&mut chunk[..want]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            };
            let part = &chunk[..n];
            match part.iter().rposition(|b| *b == b'\n') {
                Some(last) => {
                    line += part.iter().filter(|b| **b == b'\n').count() as u64;
                    column = (n - last - 1) as u64;
                }
                None => column += n as u64,
            }
            left -= n as u64;
        }
        Ok((line, column))
    }
}

#[cfg(any(test, fuzzing))]
pub(crate) mod oracle;

/// Walk `text` with the scanner at several chunk sizes and size-check thresholds, and panic
/// unless each walk takes the values, and stops at the error, that serde_json's streaming reader
/// does. Documents that open as no JSON list or object are left out (there is nothing to walk).
#[cfg(fuzzing)]
#[doc(hidden)]
pub fn fuzz_scan_as_streamed(text: &[u8]) {
    oracle::check_as_streamed(text);
}

#[cfg(test)]
mod tests;
