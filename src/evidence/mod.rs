//! The evidence gate, re-implemented from agentfootprint's behaviour (spec section 4): the
//! token normaliser and tokeniser ([`normalize_token`], [`tokenize`]), the rule that picks the
//! values out of an answer ([`answer_values`]), the turn-stamped index of what tool results
//! served ([`build_index`]), and the reading of an answer against that index
//! ([`read_answer`]) with the prior-turn-evidence disposition ([`disposition`]).
//!
//! Typical use, once per judged answer:
//!
//! ```
//! use traceaudit::evidence::{build_index, disposition, read_answer, EvidenceConfig};
//! use traceaudit::model::{HistoryMessage, Role};
//!
//! let cfg = EvidenceConfig::default().compile().unwrap();
//! let msg = |role, text| HistoryMessage { role, text, tool_name: None, call_id: None };
//! let history = [
//!     msg(Role::User, "What arrays are there?"),
//!     msg(Role::Tool, r#"{"arrays":[{"name":"SHPMAXDLVAP001","capacity_gb":41200}]}"#),
//!     msg(Role::User, "How full is it?"),
//! ];
//! let index = build_index(&history, &[], &cfg);
//! let reading = read_answer("SHPMAXDLVAP001 is at 41200 GB", &index, &cfg);
//! assert_eq!(disposition(&reading).0, traceaudit::Disposition::CheckedFail);
//! ```
//!
//! Decisions taken where the spec leaves room (each is pinned by a test in `tests.rs`):
//! - The index stores both spellings of a `0x` value, and a lookup tries both.
//! - Re-serving a form already indexed re-stamps it without spending budget, but only until the
//!   budget is spent; from then on no further text is read.
//! - The framework's `candidates` count is taken before run-supplied values are set aside and
//!   after declared exemptions are: see [`Reading::candidates`].
//! - Declared exempt values act in the extractor only (spec 4.2), not in the index's exempt set.

pub(crate) mod index;
pub(crate) mod normalize;
pub(crate) mod reading;
pub(crate) mod values;
mod walk;

#[cfg(test)]
mod tests;

#[cfg(fuzzing)]
pub use index::assert_direct_walk_as_reference;
pub use index::{
    build_index, build_watching_index, digest_result, digest_text, is_framework_frame,
    EvidenceDigest, EvidenceIndex,
};
pub use normalize::{lookup_forms, normalize_token, tokenize};
pub use reading::{disposition, read_answer, read_values, reported_value, GroundedValue, Reading};
pub use values::{answer_values, answer_values_from_digest, Candidate};

use crate::error::{Error, Result};
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// A value shape a deployment declares: tokens matching `pattern` as a whole are values of
/// shape `name`, tested before the built-in rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeDecl {
    pub name: String,
    pub pattern: String,
}

/// The `[evidence]` configuration table. Patterns use the `regex` crate's syntax and are
/// matched against a whole normalised (lower-case) token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvidenceConfig {
    /// Digits a number needs before it counts as a value (at least 1).
    pub min_digits: usize,
    /// Declared value shapes, tried in order.
    pub shapes: Vec<ShapeDecl>,
    /// Values that are never values, compared after normalising.
    pub exempt_values: Vec<String>,
    /// Tokens matching one of these as a whole are never values.
    pub exempt_patterns: Vec<String>,
    /// Ceiling on distinct indexed forms (and, separately, on distinct exempt forms).
    pub max_forms: usize,
    /// Ceiling on answer tokens read.
    pub max_answer_tokens: usize,
}

impl Default for EvidenceConfig {
    fn default() -> Self {
        EvidenceConfig {
            min_digits: 4,
            shapes: Vec::new(),
            exempt_values: Vec::new(),
            exempt_patterns: Vec::new(),
            max_forms: 200_000,
            max_answer_tokens: 20_000,
        }
    }
}

/// Anchor a declared pattern to the whole token and compile it.
fn compile_anchored(pattern: &str, what: &str) -> Result<Regex> {
    Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
        Error::Config(format!(
            "evidence: {what} has an invalid pattern `{pattern}`: {e}"
        ))
    })
}

impl EvidenceConfig {
    /// Validate the table and compile its patterns once. Errors name the offending entry.
    pub fn compile(&self) -> Result<CompiledEvidence> {
        if self.min_digits == 0 {
            return Err(Error::Config(
                "evidence: min_digits must be at least 1".to_string(),
            ));
        }
        let mut shapes = Vec::with_capacity(self.shapes.len());
        let mut names = HashSet::new();
        for decl in &self.shapes {
            let name = decl.name.trim();
            if name.is_empty() {
                return Err(Error::Config(format!(
                    "evidence: the shape with pattern `{}` needs a non-empty name",
                    decl.pattern
                )));
            }
            if !names.insert(name.to_string()) {
                return Err(Error::Config(format!(
                    "evidence: two shapes are named '{name}'"
                )));
            }
            let re = compile_anchored(&decl.pattern, &format!("shape '{name}'"))?;
            shapes.push((name.to_string(), re));
        }
        let mut exempt_values = HashSet::new();
        for raw in &self.exempt_values {
            let norm = normalize_token(raw);
            for form in lookup_forms(&norm).filter(|f| !f.is_empty()) {
                exempt_values.insert(form.to_string());
            }
        }
        let exempt_patterns = self
            .exempt_patterns
            .iter()
            .map(|p| compile_anchored(p, "exempt pattern"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CompiledEvidence {
            min_digits: self.min_digits,
            max_forms: self.max_forms,
            max_answer_tokens: self.max_answer_tokens,
            shapes,
            exempt_values,
            exempt_patterns,
        })
    }
}

/// An [`EvidenceConfig`] ready to use: patterns compiled and anchored, exempt values normalised
/// (both spellings of a `0x` value).
#[derive(Debug, Clone)]
pub struct CompiledEvidence {
    pub min_digits: usize,
    pub max_forms: usize,
    pub max_answer_tokens: usize,
    shapes: Vec<(String, Regex)>,
    exempt_values: HashSet<String>,
    exempt_patterns: Vec<Regex>,
}

impl Default for CompiledEvidence {
    fn default() -> Self {
        EvidenceConfig::default()
            .compile()
            .expect("the default evidence configuration is valid")
    }
}

impl CompiledEvidence {
    /// Is this normalised token declared exempt (by value or by pattern)?
    pub fn is_declared_exempt(&self, token: &str) -> bool {
        self.exempt_values.contains(token) || self.exempt_patterns.iter().any(|p| p.is_match(token))
    }

    /// Are value shapes declared? A declared shape can make a token without a digit a value.
    pub fn has_shapes(&self) -> bool {
        !self.shapes.is_empty()
    }

    /// The first declared shape this normalised token matches as a whole.
    pub fn shape_of(&self, token: &str) -> Option<&str> {
        self.shapes
            .iter()
            .find(|(_, re)| re.is_match(token))
            .map(|(name, _)| name.as_str())
    }
}
