//! Reading large JSON documents one record at a time with serde, without building them whole:
//! the toolkit the tau-bench, tau2, Inspect and SWE-agent adapters share.
//!
//! - Picking: an adapter walks an object key by key ([`Pick`]), keeps the few keys it needs and
//!   lets the parser [`skip`] the rest unbuilt. [`Picked`] and [`ListOf`] read a value that has
//!   the wrong kind (a string where a record should be, `null` for a list) as a named problem
//!   ([`Shape`]) rather than a parse error, so that one odd record is quarantined and the stream
//!   goes on. [`Tracked`] marks the record being parsed, so that a syntax error can name it.
//! - Documents: [`open_json`] opens a file after a byte-order mark and leading blanks, or says
//!   why it holds no JSON document ([`NotJson`]); [`JsonDoc::offset`] says how far the parser
//!   got, so that a document that breaks can say where. The SWE-agent adapter reads its
//!   documents this way; tau2, tau-bench and Inspect read theirs with
//!   [`json_scan`](crate::ingest::json_scan), which hands each record to these seeds from memory.
//! - Quarantine entries tagged with the adapter's format, and [`broken_at`] for a document the
//!   parser stopped in.
//! - Text out of values: [`scalar_text`], [`non_empty`], [`content_text`], [`first_key`].

use std::cell::Cell;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::marker::PhantomData;
use std::path::Path;
use std::rc::Rc;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::ingest::{Input, Locator, Quarantined, Sink};

// ---------------------------------------------------------------------------------------------
// Picking keys out of objects.
// ---------------------------------------------------------------------------------------------

/// A value that should have been an object (or a list): `Err` says what it was instead, in words
/// fit for a quarantine reason ("a string", "null", ...).
pub(crate) type Shape<T> = Result<T, &'static str>;

/// An object of which only some keys matter.
pub(crate) trait Pick {
    /// Read the value of `key` (or [`skip`] it).
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error>;
}

/// Skip the value of the current key unread.
pub(crate) fn skip<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    map.next_value::<IgnoredAny>().map(|_| ())
}

/// The words for a JSON value's kind.
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Read one value into `T` when it is an object. Anything else is consumed whole (so the parser
/// stays in step) and comes back as `Err(what it was)`.
pub(crate) struct Picked<T>(pub T);

impl<'de, T: Pick> DeserializeSeed<'de> for Picked<T> {
    type Value = Shape<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Shape<T>, D::Error> {
        deserializer.deserialize_any(ObjectVisitor(self.0))
    }
}

/// Scalars are never what a [`Shape`] visitor wants: name them.
macro_rules! scalars_are_wrong {
    () => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Err("a boolean"))
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Err("a number"))
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Err("a number"))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Err("a number"))
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Err("a string"))
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Err("null"))
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(Err("null"))
        }
    };
}
pub(crate) use scalars_are_wrong;

struct ObjectVisitor<T>(T);

impl<'de, T: Pick> Visitor<'de> for ObjectVisitor<T> {
    type Value = Shape<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Shape<T>, A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            self.0.pick(&key, &mut map)?;
        }
        Ok(Ok(self.0))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Shape<T>, A::Error> {
        drain_seq(seq)?;
        Ok(Err("a list"))
    }

    scalars_are_wrong!();
}

/// Read a list of objects, each into a fresh `T`.
pub(crate) struct ListOf<T>(PhantomData<T>);

impl<T> ListOf<T> {
    pub(crate) fn new() -> Self {
        ListOf(PhantomData)
    }
}

impl<'de, T: Pick + Default> DeserializeSeed<'de> for ListOf<T> {
    type Value = Shape<Vec<Shape<T>>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, T: Pick + Default> Visitor<'de> for ListOf<T> {
    type Value = Shape<Vec<Shape<T>>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Picked(T::default()))? {
            items.push(item);
        }
        Ok(Ok(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map)?;
        Ok(Err("an object"))
    }

    scalars_are_wrong!();
}

/// Consume the rest of a list unread.
pub(crate) fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Consume the rest of an object unread.
pub(crate) fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Marks which record is being parsed while it is parsed, so that a syntax error can name it.
/// The mark is set once the record starts and cleared once it is complete: an error between
/// records (a missing comma) leaves no mark, and names a byte.
pub(crate) struct Tracked<'c, S> {
    pub(crate) current: &'c Cell<Option<u64>>,
    pub(crate) index: u64,
    pub(crate) inner: S,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Tracked<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.current.set(Some(self.index));
        let value = self.inner.deserialize(deserializer)?;
        self.current.set(None);
        Ok(value)
    }
}

// ---------------------------------------------------------------------------------------------
// Opening documents.
// ---------------------------------------------------------------------------------------------

/// A reader that counts the bytes handed to the parser (exact to its one byte of look-ahead).
pub(crate) struct Counted<R> {
    inner: R,
    taken: Rc<Cell<u64>>,
}

impl<R: BufRead> Read for Counted<R> {
    /// serde_json asks for one byte at a time, so this path copies straight out of the buffer:
    /// a call through `BufReader::read` per byte is a large share of a streamed ingest.
    #[inline]
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let available = self.inner.fill_buf()?;
        let n = available.len().min(out.len());
        if n == 1 {
            out[0] = available[0];
        } else {
            out[..n].copy_from_slice(&available[..n]);
        }
        self.inner.consume(n);
        self.taken.set(self.taken.get() + n as u64);
        Ok(n)
    }
}

/// A JSON document opened for streaming.
pub(crate) struct JsonDoc {
    pub(crate) de: serde_json::Deserializer<serde_json::de::IoRead<Counted<BufReader<File>>>>,
    taken: Rc<Cell<u64>>,
}

impl JsonDoc {
    /// Bytes of the file read so far, a skipped byte-order mark and leading blanks included.
    pub(crate) fn offset(&self) -> u64 {
        self.taken.get()
    }
}

/// Why a file could not be opened as a JSON document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotJson {
    /// Not a byte.
    Empty,
    /// Only blanks (and perhaps a byte-order mark).
    Blank,
    /// Something other than `{` or `[` comes first: the file's first bytes.
    Starts(String),
}

impl NotJson {
    /// The reason for a quarantine entry. Adapters word two of the three cases their own way
    /// (what fills a blank file, what the file is not), so they pass those words in.
    pub(crate) fn reason(&self, blank: &str, expected: &str) -> String {
        match self {
            NotJson::Empty => "the file is empty".to_string(),
            NotJson::Blank => format!("the file holds {blank}"),
            NotJson::Starts(start) => format!("not {expected} (the file starts with {start:?})"),
        }
    }
}

/// Open a file for streaming after a UTF-8 byte-order mark and leading blanks. `Ok(Err(..))`
/// when the file is empty or does not start a JSON object or list.
pub(crate) fn open_json(path: &Path) -> io::Result<Result<JsonDoc, NotJson>> {
    let mut reader = BufReader::with_capacity(256 * 1024, File::open(path)?);
    let mut skipped = 0u64;
    if reader.fill_buf()?.starts_with(b"\xEF\xBB\xBF") {
        reader.consume(3);
        skipped += 3;
    }
    loop {
        let buf = reader.fill_buf()?;
        let Some(&first) = buf.first() else {
            return Ok(Err(if skipped == 0 {
                NotJson::Empty
            } else {
                NotJson::Blank
            }));
        };
        let blanks = buf
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
            .count();
        if blanks == 0 {
            if first != b'{' && first != b'[' {
                let start = String::from_utf8_lossy(&buf[..buf.len().min(24)]).into_owned();
                return Ok(Err(NotJson::Starts(start)));
            }
            break;
        }
        reader.consume(blanks);
        skipped += blanks as u64;
    }
    let taken = Rc::new(Cell::new(skipped));
    let counted = Counted {
        inner: reader,
        taken: Rc::clone(&taken),
    };
    Ok(Ok(JsonDoc {
        de: serde_json::Deserializer::from_reader(counted),
        taken,
    }))
}

// ---------------------------------------------------------------------------------------------
// Quarantine entries.
// ---------------------------------------------------------------------------------------------

/// A dropped quarantine entry tagged with the adapter's format.
pub(crate) fn dropped(
    input: &Input<'_>,
    format: &'static str,
    locator: Locator,
    reason: impl Into<String>,
) -> Quarantined {
    Quarantined {
        format: Some(format),
        ..Quarantined::dropped(input.display, locator, reason)
    }
}

/// Open a file that is one record, parsed whole (a trajectory): counts the record, and when the
/// file is over the record limit or holds no JSON document, quarantines it (dropped, with the
/// reason) and gives `None`.
pub(crate) fn open_record_file(
    input: &Input<'_>,
    sink: &mut dyn Sink,
    format: &'static str,
) -> io::Result<Option<JsonDoc>> {
    sink.records_read(1);
    let len = std::fs::metadata(input.path)?.len();
    let reason = if len > input.limits.record_bytes {
        format!(
            "the file is {}; a file of this format is read whole, as one record",
            input.limits.too_large(len)
        )
    } else {
        match open_json(input.path)? {
            Ok(doc) => return Ok(Some(doc)),
            Err(not_json) => not_json.reason("nothing but blanks", "a JSON document"),
        }
    };
    sink.quarantine(dropped(input, format, Locator::File, reason));
    Ok(None)
}

/// A partial quarantine entry tagged with the adapter's format.
pub(crate) fn partial(
    input: &Input<'_>,
    format: &'static str,
    locator: Locator,
    reason: impl Into<String>,
) -> Quarantined {
    Quarantined {
        format: Some(format),
        ..Quarantined::partial(input.display, locator, reason)
    }
}

/// The note for a record (or a document) in which Python's special numbers were read as `null`.
pub(crate) fn python_note(count: u64, place: &str) -> String {
    format!(
        "{count} number(s) {place} written as NaN or Infinity were read as null: Python's json \
         module writes them, JSON has no such numbers and JavaScript's JSON.parse rejects them"
    )
}

/// The whole file could not be used: it counts as one record, dropped.
pub(crate) fn whole_file(
    input: &Input<'_>,
    sink: &mut dyn Sink,
    format: &'static str,
    reason: impl Into<String>,
) {
    sink.records_read(1);
    sink.quarantine(dropped(input, format, Locator::File, reason));
}

/// The parser stopped on an error (in words: a [`Scanner`](crate::ingest::json_scan::Scanner)
/// describes its own). Everything emitted so far stays; what could not be read is one dropped
/// entry: the record being parsed when it broke (`current`), or else the byte where it broke.
/// `record` and `document` are the adapter's words for them ("sample" and "log", ...).
pub(crate) fn broken_at(
    input: &Input<'_>,
    sink: &mut dyn Sink,
    format: &'static str,
    [record, document]: [&str; 2],
    err: &str,
    current: Option<u64>,
    offset: u64,
) {
    sink.records_read(1);
    let (locator, reason) = match current {
        Some(index) => (
            Locator::Record(index),
            format!(
                "{record} {index} could not be read: {err} (near byte {offset}); nothing after \
                 it was read"
            ),
        ),
        None => (
            Locator::Byte(offset),
            format!("the {document} breaks near byte {offset}: {err}; nothing after it was read"),
        ),
    };
    sink.quarantine(dropped(input, format, locator, reason));
}

// ---------------------------------------------------------------------------------------------
// Text out of values.
// ---------------------------------------------------------------------------------------------

/// The first key of the JSON object `text` starts with (leading blanks allowed), when it has no
/// escapes. Detection uses it: writers put their format's telltale key first.
pub(crate) fn first_key(text: &str) -> Option<&str> {
    let rest = text.trim_start().strip_prefix('{')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let end = rest.find(['"', '\\'])?;
    (rest[end..].starts_with('"')).then_some(&rest[..end])
}

/// A string or a number as text (ids are written either way).
pub(crate) fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A string value that is not blank, trimmed.
pub(crate) fn non_empty(value: Option<&Value>) -> Option<String> {
    value
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// A non-empty string value as written (not trimmed, unlike [`non_empty`]).
pub(crate) fn non_empty_str(value: &Value) -> Option<String> {
    value.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

/// The text of a chat message's `content`: a string as it is, or the `text` of each text part
/// of a part list, one per line (images, reasoning and other parts carry no text here).
pub(crate) fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| match part {
                Value::String(s) => Some(s.as_str()),
                Value::Object(o) => {
                    let is_text = o
                        .get("type")
                        .and_then(Value::as_str)
                        .is_none_or(|t| t == "text");
                    if is_text {
                        o.get("text").and_then(Value::as_str)
                    } else {
                        None
                    }
                }
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Default, Debug)]
    struct Two {
        a: Option<Value>,
        b: Option<Value>,
    }

    impl Pick for Two {
        fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
            match key {
                "a" => self.a = Some(map.next_value()?),
                "b" => self.b = Some(map.next_value()?),
                _ => skip(map)?,
            }
            Ok(())
        }
    }

    fn list(text: &str) -> Shape<Vec<Shape<Two>>> {
        let mut de = serde_json::Deserializer::from_str(text);
        let out = ListOf::<Two>::new().deserialize(&mut de).unwrap();
        de.end().unwrap();
        out
    }

    #[test]
    fn picks_keys_and_names_wrong_kinds() {
        let items = list(
            r#"[{"a": 1, "skip": {"deep": [1, 2]}, "b": "x"}, null, [1, {"a": 2}], "s", 3, true]"#,
        )
        .unwrap();
        let first = items[0].as_ref().unwrap();
        assert_eq!(first.a, Some(json!(1)));
        assert_eq!(first.b, Some(json!("x")));
        let kinds: Vec<_> = items[1..].iter().map(|i| i.as_ref().unwrap_err()).collect();
        assert_eq!(
            kinds,
            vec![&"null", &"a list", &"a string", &"a number", &"a boolean"]
        );
        assert_eq!(list(r#"{"a": [1]}"#).unwrap_err(), "an object");
    }

    #[test]
    fn tracked_marks_only_while_a_record_is_read() {
        let current = Cell::new(None);
        let mut de = serde_json::Deserializer::from_str(r#"{"a": 1} {"a": [2"#);
        let seed = |index| Tracked {
            current: &current,
            index,
            inner: Picked(Two::default()),
        };
        assert!(seed(0).deserialize(&mut de).unwrap().is_ok());
        assert_eq!(current.get(), None);
        assert!(seed(1).deserialize(&mut de).is_err());
        assert_eq!(current.get(), Some(1));
    }

    fn open_text(text: &[u8]) -> Result<JsonDoc, NotJson> {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut file, text).unwrap();
        open_json(file.path()).unwrap()
    }

    #[test]
    fn opening_skips_a_byte_order_mark_and_blanks() {
        let mut doc = open_text(b"\xEF\xBB\xBF \n[1]").unwrap();
        assert_eq!(doc.offset(), 5);
        assert_eq!(Value::deserialize(&mut doc.de).unwrap(), json!([1]));
        for (text, verdict) in [
            (&b""[..], NotJson::Empty),
            (&b" \r\n\t"[..], NotJson::Blank),
            (&b"\xEF\xBB\xBF"[..], NotJson::Blank),
            (&b" 12"[..], NotJson::Starts("12".to_string())),
        ] {
            assert_eq!(open_text(text).err(), Some(verdict));
        }
        assert_eq!(
            NotJson::Starts("x".to_string()).reason("only blanks", "a JSON list"),
            "not a JSON list (the file starts with \"x\")"
        );
        assert_eq!(
            NotJson::Blank.reason("only blanks", "a JSON list"),
            "the file holds only blanks"
        );
    }

    #[test]
    fn first_keys() {
        assert_eq!(first_key("{\n  \"version\": 2"), Some("version"));
        assert_eq!(first_key(" {\"a\\\"b\": 1}"), None);
        assert_eq!(first_key("[{\"a\": 1}]"), None);
        assert_eq!(first_key("{}"), None);
    }

    #[test]
    fn content_parts() {
        assert_eq!(content_text(Some(&json!("plain"))), "plain");
        let parts = json!([
            {"type": "reasoning", "reasoning": "hidden"},
            {"type": "text", "text": "one"},
            {"type": "image", "image": "data:..."},
            {"text": "two"}
        ]);
        assert_eq!(content_text(Some(&parts)), "one\ntwo");
        assert_eq!(content_text(None), "");
        assert_eq!(content_text(Some(&Value::Null)), "");
    }
}

// ---------------------------------------------------------------------------------------------
// Skimming a document's top level.
// ---------------------------------------------------------------------------------------------

/// One member of the object a document starts with, as [`skim_members`] saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) key: String,
    /// The keys of the value, when it is an object (their values are not read).
    pub(crate) keys: Vec<String>,
    /// The value, when it is a string of at most [`SKIM_TEXT`] bytes.
    pub(crate) text: Option<String>,
}

impl Member {
    pub(crate) fn has_key(&self, key: &str) -> bool {
        self.keys.iter().any(|k| k == key)
    }
}

/// The longest string value a skim keeps.
pub(crate) const SKIM_TEXT: usize = 256;

/// Detection's second look at a file whose head no format recognised: when the head's first
/// key is one of `first_keys`, the file's top-level members are skimmed (within `limit` bytes,
/// see [`skim_members`]) and handed to `judge`. False when the key is another or the file
/// cannot be skimmed.
pub(crate) fn skim_if_first_key(
    head: &str,
    path: &Path,
    limit: u64,
    first_keys: &[&str],
    judge: impl FnOnce(&[Member]) -> bool,
) -> bool {
    first_key(head).is_some_and(|key| first_keys.contains(&key))
        && skim_members(path, limit).is_ok_and(|members| judge(&members))
}

/// The members of the JSON object a file starts with (after a byte-order mark and blanks), read
/// without building their values: each key is kept with, for an object, its own keys, and for a
/// short string, the string; everything below is passed over by the parser unbuilt. Reading
/// stops at the end of that object (the first line of a JSON-lines file), after `limit` bytes, or
/// at a syntax error, and what was seen by then is returned. A skim costs the bytes it passes
/// over, and memory for the keys and for the longest string written directly under the object.
pub(crate) fn skim_members(path: &Path, limit: u64) -> io::Result<Vec<Member>> {
    let mut reader = BufReader::with_capacity(64 * 1024, File::open(path)?.take(limit));
    if reader.fill_buf()?.starts_with(b"\xEF\xBB\xBF") {
        reader.consume(3);
    }
    let mut members = Vec::new();
    let mut de = serde_json::Deserializer::from_reader(reader);
    if let Err(e) = (&mut de).deserialize_map(Members(&mut members)) {
        if e.is_io() {
            return Err(e.into());
        }
    }
    Ok(members)
}

struct Members<'m>(&'m mut Vec<Member>);

impl<'de> Visitor<'de> for Members<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            self.0.push(Member {
                key,
                ..Member::default()
            });
            if let Some(member) = self.0.last_mut() {
                map.next_value_seed(MemberValue(member))?;
            }
        }
        Ok(())
    }
}

struct MemberValue<'m>(&'m mut Member);

impl<'de> DeserializeSeed<'de> for MemberValue<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MemberValue<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            self.0.keys.push(key);
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        if v.len() <= SKIM_TEXT {
            self.0.text = Some(v.to_string());
        }
        Ok(())
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}
