//! Digests: what a check keeps of a tool result so that an audit of a store can leave the
//! text of every tool result undecoded (it is most of a store's bytes).
//!
//! A check declares the digests it reads (`Pass::digests`); each has a stable name
//! and a version, and works its values out for a run. The ingest works them out before the
//! store writer, the store keeps them beside the text and names them in its manifest, and an
//! audit of the store hands them back on the events ([`Event::digests`](super::Event::digests)). A
//! check given a conversation without result text that finds a digest missing declines it,
//! and the conversation is read again whole.
//!
//! The store has columns for the kinds of value below, one digest of each kind.

use super::Run;
use serde::{Deserialize, Serialize};

/// What the evidence gate can ever look up in one tool result, worked out once when the result
/// is stored, so that an audit of the store judges answers without reading results again.
///
/// A watching index (the common case) keeps answer values only; every value is a token, made
/// of token characters only, and holds a digit unless a declared shape made it a value. The
/// digest keeps exactly the forms that could be one of them or spell one (`0x12ab` spells
/// `12ab`), and counts every form the walk offered for the budget. See
/// `EvidenceIndex::push_digest` for when it stands for the text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceDigest {
    /// The normalised forms the result offers that hold an ASCII digit and only token
    /// characters, in the order offered (repeats kept: removing them cost more at ingest than
    /// it saved), joined by `\n` (which no such form holds).
    pub forms: String,
    /// How many forms the walk of the whole result offered, repeats included.
    pub offered: u32,
}

impl EvidenceDigest {
    /// The forms, in order, repeats kept.
    ///
    /// Forms are a few bytes each: a byte loop finds their ends sooner than `str::split`,
    /// which calls `memchr` once a form.
    ///
    /// ```
    /// use traceaudit::model::digest::EvidenceDigest;
    /// let digest = EvidenceDigest { forms: "a-1042\n\n7\n7".into(), offered: 5 };
    /// assert_eq!(digest.listed().collect::<Vec<_>>(), ["a-1042", "7", "7"]);
    /// assert_eq!(EvidenceDigest::default().listed().count(), 0);
    /// ```
    pub fn listed(&self) -> impl Iterator<Item = &str> {
        let mut rest = self.forms.as_str();
        std::iter::from_fn(move || loop {
            if rest.is_empty() {
                return None;
            }
            let end = rest.bytes().position(|b| b == b'\n').unwrap_or(rest.len());
            let form = &rest[..end];
            rest = rest.get(end + 1..).unwrap_or("");
            if !form.is_empty() {
                return Some(form);
            }
        })
    }
}

/// The kinds of digest value a store has columns for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestKind {
    /// A fingerprint string (`result_fingerprint`).
    Fingerprint,
    /// A fingerprint string of a landing's arguments (`arguments_fingerprint`).
    ArgumentsFingerprint,
    /// Evidence forms and the count offered (`evidence_forms`, `evidence_offers`).
    Evidence,
}

/// One event's value of a digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DigestValue {
    Fingerprint(String),
    ArgumentsFingerprint(String),
    Evidence(EvidenceDigest),
}

impl DigestValue {
    pub fn kind(&self) -> DigestKind {
        match self {
            DigestValue::Fingerprint(_) => DigestKind::Fingerprint,
            DigestValue::ArgumentsFingerprint(_) => DigestKind::ArgumentsFingerprint,
            DigestValue::Evidence(_) => DigestKind::Evidence,
        }
    }
}

/// A digest a check reads. Its name and version are written into the store's manifest; a
/// change to what `compute` gives must come with a new version, so that stores holding the
/// old values are not read as holding this digest.
pub trait Digest: Sync + Send {
    /// The stable name (`result-fingerprint`).
    fn name(&self) -> &'static str;
    fn version(&self) -> u32;
    /// The kind of value it gives (the store column it is kept in).
    fn kind(&self) -> DigestKind;
    /// The values for the events of `run` that get one, by index into `run.events`. Every
    /// value is of [`Digest::kind`].
    fn compute(&self, run: &Run) -> Vec<(usize, DigestValue)>;
    /// The value for the run's answer ([`Run::answer_digests`]), if it gets one; of
    /// [`Digest::kind`].
    fn compute_answer(&self, _run: &Run) -> Option<DigestValue> {
        None
    }
}

/// The digests an event carries, by digest name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Digests(Vec<(&'static str, DigestValue)>);

impl Digests {
    pub fn get(&self, name: &str) -> Option<&DigestValue> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Set the value of digest `name`, replacing any it had.
    pub fn set(&mut self, name: &'static str, value: DigestValue) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => {
                // Most events carry one digest or none: a list grown by `push` would take room
                // for four, on every one of a part's events.
                self.0.reserve_exact(1);
                self.0.push((name, value));
            }
        }
    }

    /// The fingerprint value of digest `name`, if the event carries one.
    pub fn fingerprint(&self, name: &str) -> Option<&str> {
        match self.get(name)? {
            DigestValue::Fingerprint(f) => Some(f),
            _ => None,
        }
    }

    /// The arguments fingerprint of digest `name`, if the event carries one.
    pub fn arguments_fingerprint(&self, name: &str) -> Option<&str> {
        match self.get(name)? {
            DigestValue::ArgumentsFingerprint(f) => Some(f),
            _ => None,
        }
    }

    /// The evidence value of digest `name`, if the event carries one.
    pub fn evidence(&self, name: &str) -> Option<&EvidenceDigest> {
        match self.get(name)? {
            DigestValue::Evidence(d) => Some(d),
            _ => None,
        }
    }

    /// The value of the given kind, whatever its digest's name.
    pub fn of_kind(&self, kind: DigestKind) -> Option<(&'static str, &DigestValue)> {
        self.0
            .iter()
            .find(|(_, v)| v.kind() == kind)
            .map(|(n, v)| (*n, v))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Give the events of `run` the values of `digests` they do not carry yet.
pub fn fill(run: &mut Run, digests: &[&dyn Digest]) {
    for digest in digests {
        if run.answer_digests.get(digest.name()).is_none() {
            if let Some(value) = digest.compute_answer(run) {
                debug_assert_eq!(value.kind(), digest.kind());
                run.answer_digests.set(digest.name(), value);
            }
        }
        for (i, value) in digest.compute(run) {
            debug_assert_eq!(value.kind(), digest.kind());
            let e = &mut run.events[i];
            if e.digests.get(digest.name()).is_none() {
                e.digests.set(digest.name(), value);
            }
        }
    }
}
