//! Reading the forms out of a JSON tool result straight from its text, without building a
//! `serde_json::Value` first.
//!
//! The index's reference walk ([`super::index`]) parses a result into a `Value` and visits its
//! keys and leaves in JavaScript property order. Building that tree (an ordered map per object,
//! a `String` per leaf) costs more than the checks that read it on an audit of a store. This module visits the same
//! keys and leaves as the parser meets them and writes their normalised forms into one reused
//! buffer. Its output equals the reference walk's whenever the two can be told apart only by
//! order or by duplicates:
//!
//! - order: every form of one result is stamped with the same turn, so the order they reach the
//!   index matters only if the form budget runs out part-way through the result. The caller
//!   applies the gathered forms only when the budget covers all of them
//!   ([`Gathered::fits_within`]), and otherwise takes the reference walk;
//! - duplicate keys: `JSON.parse` keeps the last value of a repeated key, so the earlier value's
//!   forms must not be indexed. Repeated keys are detected per object and reported as
//!   [`Outcome::Fallback`];
//! - text the strict parser refuses (lone surrogate escapes, bad JSON, nesting deeper than the
//!   parser's limit) is also [`Outcome::Fallback`]: the reference path knows what to do with it.

use super::normalize::{
    for_each_token, for_each_token_or_word, is_ascii_word, is_single_token, normalize_into,
};
use crate::js;
use rustc_hash::FxHasher;
use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use std::fmt;
use std::hash::Hasher;

/// What [`Gathered::read`] made of a text.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every key and leaf was read; the forms are in the buffer.
    Complete,
    /// The text needs the reference walk (see the module notes); the buffer means nothing.
    Fallback,
}

/// The normalised forms of one JSON result, end to end in one string, reused from result to
/// result so reading allocates nothing once the buffers have grown.
#[derive(Debug, Default)]
pub struct Gathered {
    text: String,
    ends: Vec<usize>,
    /// Hashes of the keys of the objects being read, innermost object last.
    key_hashes: Vec<u64>,
    scratch: String,
    /// `Some`: a digest's reading, which keeps only forms that hold a digit. A key, leaf or
    /// token that is a word (ASCII, no digit, not all decoration: [`is_ascii_word`]) is then
    /// counted here instead of gathered.
    words: Option<usize>,
}

impl Gathered {
    /// A reading for a digest: words are counted ([`Gathered::words`]), not gathered.
    pub fn counting_words() -> Gathered {
        Gathered {
            words: Some(0),
            ..Gathered::default()
        }
    }

    /// How many words the last [`read`](Gathered::read) counted instead of gathering (0 for a
    /// reading that gathers every form).
    pub fn words(&self) -> usize {
        self.words.unwrap_or(0)
    }

    /// Read `json` (already trimmed, opening with `{` or `[`).
    pub fn read(&mut self, json: &str) -> Outcome {
        self.text.clear();
        self.ends.clear();
        self.key_hashes.clear();
        if let Some(words) = &mut self.words {
            *words = 0;
        }
        let mut de = serde_json::Deserializer::from_str(json);
        let read = Node(self).deserialize(&mut de).and_then(|()| de.end());
        if read.is_ok() {
            Outcome::Complete
        } else {
            Outcome::Fallback
        }
    }

    /// Can a budget of `budget` new forms take every gathered form without running out before
    /// the last? Each gathered form stands for at most two index entries (its `0x` spellings).
    pub fn fits_within(&self, budget: usize) -> bool {
        self.ends.len().saturating_mul(2) < budget
    }

    /// The gathered forms, in reading order.
    pub fn forms(&self) -> impl Iterator<Item = &str> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let form = &self.text[start..end];
            start = end;
            form
        })
    }

    fn push_normalized(&mut self, norm: &str) {
        if !norm.is_empty() {
            self.text.push_str(norm);
            self.ends.push(self.text.len());
        }
    }

    /// Is `raw` a word this reading counts instead of gathering?
    fn counts_as_word(&mut self, raw: &str) -> bool {
        match &mut self.words {
            Some(words) if is_ascii_word(raw) => {
                *words += 1;
                true
            }
            _ => false,
        }
    }

    /// A leaf or key taken whole.
    fn add(&mut self, raw: &str) {
        if self.counts_as_word(raw) {
            return;
        }
        let mut norm = std::mem::take(&mut self.scratch);
        normalize_into(raw, &mut norm);
        self.push_normalized(&norm);
        self.scratch = norm;
    }

    fn string_leaf(&mut self, s: &str) {
        // As the reference walk: the whole leaf (it may hold spaces and still be one value),
        // then each of its tokens.
        self.add(s);
        // A leaf that is a single token gives the same form again; offering it twice in a row
        // changes nothing in the index (the second only re-stamps the first with the same
        // turn), so it is offered once.
        if is_single_token(s) {
            return;
        }
        if self.words.is_none() {
            for_each_token(s, |token| {
                self.push_normalized(token);
                true
            });
            return;
        }
        for_each_token_or_word(s, |token| {
            match token {
                Some(form) => self.push_normalized(form),
                None => *self.words.as_mut().expect("a reading that counts words") += 1,
            }
            true
        });
    }

    /// A number leaf, as `Number.prototype.toString()` prints it. That text is already its own
    /// normalised form: lower-case, nothing to trim or strip, no thousands commas, and when it
    /// is a plain decimal of at most 15 digits, reading it back gives the same double (the
    /// printed digits are the shortest that do), which prints the same. So it is not
    /// normalised again; the tests compare this with the reference walk, which does.
    fn number_leaf(&mut self, n: f64) {
        js::write_number(&mut self.text, n);
        self.ends.push(self.text.len());
    }
}

/// Any JSON value, read into the buffer.
struct Node<'g>(&'g mut Gathered);

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E>(self, b: bool) -> Result<(), E> {
        self.0.add(if b { "true" } else { "false" });
        Ok(())
    }

    // The double `JSON.parse` gives, as `Value::as_f64` would.
    fn visit_i64<E>(self, n: i64) -> Result<(), E> {
        self.0.number_leaf(n as f64);
        Ok(())
    }

    fn visit_u64<E>(self, n: u64) -> Result<(), E> {
        self.0.number_leaf(n as f64);
        Ok(())
    }

    fn visit_f64<E>(self, n: f64) -> Result<(), E> {
        self.0.number_leaf(n);
        Ok(())
    }

    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        self.0.string_leaf(s);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Node(&mut *self.0))?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let g = self.0;
        let first_key = g.key_hashes.len();
        while map.next_key_seed(Key(&mut *g))?.is_some() {
            map.next_value_seed(Node(&mut *g))?;
        }
        // A repeated key (or, rarely, two keys with one hash: the reference walk is then merely
        // taken without need) sends the whole result to the reference walk.
        let keys = &mut g.key_hashes[first_key..];
        keys.sort_unstable();
        if keys.windows(2).any(|w| w[0] == w[1]) {
            return Err(A::Error::custom("repeated key"));
        }
        g.key_hashes.truncate(first_key);
        Ok(())
    }
}

/// An object key: recorded whole (keys are not tokenised) and remembered for the repeat test.
struct Key<'g>(&'g mut Gathered);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, key: &str) -> Result<(), E> {
        let mut h = FxHasher::default();
        h.write(key.as_bytes());
        self.0.key_hashes.push(h.finish());
        self.0.add(key);
        Ok(())
    }
}
