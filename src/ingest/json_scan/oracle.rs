//! The scanner's walk of a document and serde_json's streaming walk of the same document, for
//! the tests and the fuzz target that hold them equal.

use super::python::replace_python_numbers;
use super::*;
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::Deserializer as _;
use serde_json::{json, Value};
use std::cell::Cell;
use std::fmt;
use std::io::Cursor;
use std::rc::Rc;

/// What a document reads as: the values taken (see [`walk`]) and the error it stopped on, if
/// any, as (serde_json's message, byte offset).
pub(crate) type Reading = (Vec<Value>, Option<(String, u64)>);

/// Walk a document with the scanner: a top-level list is read element by element; in a
/// top-level object, `list` is streamed when it is a list (drained when an object), `pick` is
/// parsed whole, anything else is skipped.
pub(crate) fn walk(text: &[u8], chunk: usize, first_check: usize) -> Reading {
    let mut scan = match Scanner::start(Cursor::new(text.to_vec()), chunk, first_check) {
        Ok(Ok(scan)) => scan,
        _ => return (Vec::new(), Some(("not a document".to_string(), 0))),
    };
    let mut out = Vec::new();
    let outcome = walk_document(&mut scan, &mut out).and_then(|()| scan.end());
    (out, outcome.err().map(|e| scan.describe(e).unwrap()))
}

fn walk_list(scan: &mut Scanner<Cursor<Vec<u8>>>, out: &mut Vec<Value>) -> Result<(), ScanError> {
    let mut list = scan.enter();
    while scan.next_element(&mut list)? {
        out.push(scan.parse(PhantomData::<Value>)?);
    }
    Ok(())
}

fn walk_document(
    scan: &mut Scanner<Cursor<Vec<u8>>>,
    out: &mut Vec<Value>,
) -> Result<(), ScanError> {
    if scan.peek()? == Some(b'[') {
        return walk_list(scan, out);
    }
    let mut object = scan.enter();
    while let Some(key) = scan.next_key(&mut object)? {
        match key.as_str() {
            "list" => match scan.peek()? {
                Some(b'[') => walk_list(scan, out)?,
                Some(b'{') => {
                    scan.drain_object()?;
                    out.push(json!("an object"));
                }
                _ => out.push(scan.parse(PhantomData::<Value>)?),
            },
            "pick" => out.push(scan.parse(PhantomData::<Value>)?),
            _ => scan.skip()?,
        }
    }
    Ok(())
}

/// A reader that counts the bytes it hands out.
struct Counting(Cursor<Vec<u8>>, Rc<Cell<u64>>);

impl Read for Counting {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.0.read(out)?;
        self.1.set(self.1.get() + n as u64);
        Ok(n)
    }
}

/// The document with each of Python's numbers that the scanner reads as `null` replaced by a
/// JSON number of the same length (`0.0`, `1.000000`, `-1.000000`), so that serde_json
/// places every error where it stands in the original; `None` when it holds none.
pub(crate) fn python_stand_ins(text: &[u8]) -> Option<Vec<u8>> {
    let stand_in = |len: usize| -> &'static [u8] {
        match len {
            3 => b"0.0",
            8 => b"1.000000",
            _ => b"-1.000000",
        }
    };
    replace_python_numbers(text, stand_in).map(|(bytes, _)| bytes)
}

/// A value with `null` and the stand-ins' numbers (0 and ±1) made one, for comparing a walk
/// of a document holding Python's numbers with the walk of its stand-in.
pub(crate) fn blur(v: &Value) -> Value {
    match v {
        Value::Number(n) if matches!(n.as_f64(), Some(x) if x == 0.0 || x.abs() == 1.0) => {
            Value::Null
        }
        Value::Array(items) => Value::Array(items.iter().map(blur).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), blur(v))).collect())
        }
        other => other.clone(),
    }
}

/// Panic unless the scanner's walk of `text` at several chunk sizes and size-check
/// thresholds is serde_json's streaming walk: the same values, the same error at the same
/// place. Documents that open as no list or object are left out (there is nothing to walk).
pub(crate) fn check_as_streamed(text: &[u8]) {
    let opens = Scanner::start(Cursor::new(text.to_vec()), 1, 1).map(|s| s.is_ok());
    if !matches!(opens, Ok(true)) {
        return;
    }
    // The scanner reads Python's special numbers as `null`; serde_json refuses them. A
    // document holding some is held to serde_json's walk of the same document with a plain
    // number of the same length in each one's place: the same errors at the same places,
    // the same values but for those numbers.
    let stand_in = python_stand_ins(text);
    let blur = |(values, error): Reading| -> Reading {
        match stand_in {
            Some(_) => (values.iter().map(blur).collect(), error),
            None => (values, error),
        }
    };
    let want = blur(reference(stand_in.as_deref().unwrap_or(text)));
    for (chunk, first_check) in [(1, 1), (3, 1 << 20), (5, 6), (1 << 20, 1 << 20)] {
        let got = blur(walk(text, chunk, first_check));
        assert_eq!(got, want, "chunk {chunk}, check {first_check}");
    }
}

/// The same walk with serde_json's streaming reader: what the adapters did before the
/// scanner, and what it must match.
pub(crate) fn reference(text: &[u8]) -> Reading {
    let mut skipped = if text.starts_with(b"\xEF\xBB\xBF") {
        3
    } else {
        0
    };
    skipped += text[skipped..].iter().take_while(|b| is_blank(**b)).count();
    let taken = Rc::new(Cell::new(skipped as u64));
    let reader = Counting(Cursor::new(text[skipped..].to_vec()), Rc::clone(&taken));
    let mut de = serde_json::Deserializer::from_reader(reader);
    let mut out = Vec::new();
    let outcome = (&mut de)
        .deserialize_any(Top(&mut out))
        .and_then(|()| de.end());
    let error = outcome.err().map(|e| {
        // Where the error is: its line and column, counted as serde_json counts them from
        // the document's start. (The reader may have taken a byte or two more by the time
        // the error is seen: serde_json goes on to close the enclosing lists.)
        let doc = &text[skipped..];
        let line_start = match e.line() {
            1 => 0,
            n => {
                let newlines = doc.iter().enumerate().filter(|(_, b)| **b == b'\n');
                newlines.map(|(i, _)| i).nth(n - 2).unwrap() + 1
            }
        };
        let at = (skipped + line_start + e.column()) as u64;
        assert!(at <= taken.get());
        (e.to_string(), at)
    });
    (out, error)
}

struct Top<'a>(&'a mut Vec<Value>);

impl<'de> Visitor<'de> for Top<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a document")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        List(self.0).visit_seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "list" => map.next_value_seed(List(&mut *self.0))?,
                "pick" => self.0.push(map.next_value()?),
                _ => crate::ingest::json_pick::skip(&mut map)?,
            }
        }
        Ok(())
    }
}

/// A `list` value: its elements, or a word for an object, or the value itself.
struct List<'a>(&'a mut Vec<Value>);

impl<'de> DeserializeSeed<'de> for List<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for List<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(value) = seq.next_element()? {
            self.0.push(value);
        }
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        crate::ingest::json_pick::drain_map(map)?;
        self.0.push(json!("an object"));
        Ok(())
    }
    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.0.push(json!(v));
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.0.push(json!(v));
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.0.push(json!(v));
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        self.0.push(json!(v));
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.0.push(json!(v));
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.push(Value::Null);
        Ok(())
    }
}
