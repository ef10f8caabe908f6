//! Cassette text as values: YAML documents turned into JSON values, with their nesting and
//! alias expansion bounded before and while they are built.

use crate::error::Error;
use crate::ingest::encoding::base64_lenient;
use crate::ingest::limits::NESTING_LIMIT;
use crate::ingest::Limits;
use serde::de::{DeserializeSeed, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};
use serde_json::{json, Map, Value};
use std::cell::Cell;

pub(super) fn yaml_to_json(v: serde_norway::Value) -> Value {
    use serde_norway::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                json!(i)
            } else if let Some(u) = n.as_u64() {
                json!(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .unwrap_or(Value::Null)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(yaml_to_json).collect()),
        Y::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let key = match k {
                    Y::String(s) => s,
                    other => serde_norway::to_string(&other)
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                };
                out.insert(key, yaml_to_json(v));
            }
            Value::Object(out)
        }
        Y::Tagged(t) => {
            // `!!binary` scalars: the decoded text when it is UTF-8, else nothing. (The YAML
            // parser resolves the core `!!binary` tag itself and hands over the base64 text as a
            // string: `body_of` decodes those.)
            let tag = t.tag.to_string();
            match (tag.trim_start_matches('!'), t.value) {
                ("binary", Y::String(s)) => base64_lenient(&s)
                    .and_then(|b| String::from_utf8(b).ok())
                    .map(Value::String)
                    .unwrap_or(Value::Null),
                (_, value) => yaml_to_json(value),
            }
        }
    }
}

/// What a look over a YAML text finds before it is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct YamlShape {
    /// The deepest nesting of flow collections (`[...]`, `{...}`), counted up to one past
    /// [`NESTING_LIMIT`].
    pub(super) flow_depth: usize,
    /// Aliases (`*name`): each repeats the node its anchor names.
    pub(super) aliases: usize,
}

/// Look over a YAML text for the deepest nesting of flow collections and for aliases, in one
/// linear pass, so that a text the parser would take too long on (its cost grows with the square
/// of the flow depth) is refused before it sees it. Quoted scalars, comments and block scalars
/// are stepped over; where the text is ambiguous the pass counts a bracket rather than miss
/// one, so it can only overstate the depth of a malformed text. It stops once the depth passes
/// the limit.
pub(super) fn yaml_shape(text: &str) -> YamlShape {
    let mut look = Look::default();
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if look.in_block_scalar(line) {
            continue;
        }
        if look.line(line) == Step::Stop {
            break;
        }
    }
    look.shape
}

#[derive(Clone, Copy, PartialEq, Default)]
enum Quote {
    #[default]
    None,
    Single,
    Double,
}

/// What a byte does to the look over the rest of its line.
#[derive(Clone, Copy, PartialEq)]
enum Step {
    Next,
    /// The rest of the line is a comment or a block scalar's header.
    EndOfLine,
    /// The depth passed the limit: the look is over.
    Stop,
}

/// The state of [`yaml_shape`]'s pass, carried from line to line.
struct Look {
    shape: YamlShape,
    depth: usize,
    quote: Quote,
    escaped: bool,
    /// A block scalar being stepped over: the indentation of the node that owns it, and that of
    /// its content once its first line is seen.
    block: Option<(usize, Option<usize>)>,
    /// A plain scalar in block context that the next line may continue: its node's column.
    plain_from: Option<usize>,
    /// Whether a node may start here, and (in block context) a key.
    at_node: bool,
    at_key: bool,
}

impl Default for Look {
    fn default() -> Look {
        Look {
            shape: YamlShape::default(),
            depth: 0,
            quote: Quote::None,
            escaped: false,
            block: None,
            plain_from: None,
            at_node: true,
            at_key: true,
        }
    }
}

impl Look {
    /// Is `line` part of the block scalar being stepped over (blank, or indented as its
    /// content)? A line that is not ends it.
    fn in_block_scalar(&mut self, line: &str) -> bool {
        let Some((owner, content)) = self.block else {
            return false;
        };
        let bytes = line.as_bytes();
        let indent = bytes.iter().take_while(|b| **b == b' ').count();
        let blank = bytes.iter().all(|b| matches!(b, b' ' | b'\t'));
        match content {
            _ if blank => true,
            Some(content) if indent >= content => true,
            None if indent > owner => {
                self.block = Some((owner, Some(indent)));
                true
            }
            _ => {
                self.block = None;
                false
            }
        }
    }

    /// Look over one line (not of a block scalar).
    fn line(&mut self, line: &str) -> Step {
        let bytes = line.as_bytes();
        let indent = bytes.iter().take_while(|b| **b == b' ').count();
        let mut i = 0;
        if self.quote == Quote::None {
            if self.depth == 0 {
                // A line indented past the node of a plain scalar continues that scalar.
                self.at_node = self.plain_from.is_none_or(|from| indent <= from);
                self.at_key = self.at_node;
                if self.at_node {
                    self.plain_from = None;
                }
                if bytes.starts_with(b"---") && bytes.get(3).is_none_or(|b| *b == b' ') {
                    i = 3;
                }
            }
            self.escaped = false;
        }
        // The column of the block node being read (a key, or a sequence entry).
        let mut node_col = indent;
        while i < bytes.len() {
            if self.quote != Quote::None {
                i = self.in_quote(bytes, i);
                continue;
            }
            match self.byte(line, &mut i, &mut node_col) {
                Step::Next => i += 1,
                Step::EndOfLine => return Step::Next,
                Step::Stop => return Step::Stop,
            }
        }
        Step::Next
    }

    /// Step over byte `i` of a quoted scalar; the index of the next byte.
    fn in_quote(&mut self, bytes: &[u8], mut i: usize) -> usize {
        let byte = bytes[i];
        match self.quote {
            Quote::Double => {
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.quote = Quote::None;
                    self.at_node = false;
                }
            }
            Quote::Single => {
                if byte == b'\'' {
                    if bytes.get(i + 1) == Some(&b'\'') {
                        i += 1;
                    } else {
                        self.quote = Quote::None;
                        self.at_node = false;
                    }
                }
            }
            Quote::None => {}
        }
        i + 1
    }

    /// What byte `*i` of `line`, outside quotes, opens, closes or starts (`*i` moves past an
    /// anchor, tag or alias name).
    fn byte(&mut self, line: &str, i: &mut usize, node_col: &mut usize) -> Step {
        let bytes = line.as_bytes();
        let byte = bytes[*i];
        let next_blank = bytes.get(*i + 1).is_none_or(|b| matches!(b, b' ' | b'\t'));
        let after_blank = *i == 0 || matches!(bytes[*i - 1], b' ' | b'\t');
        match byte {
            b' ' | b'\t' => {}
            b'#' if after_blank => return Step::EndOfLine,
            b'[' | b'{' if self.depth > 0 || self.at_node => {
                self.depth += 1;
                self.shape.flow_depth = self.shape.flow_depth.max(self.depth);
                if self.depth > NESTING_LIMIT {
                    return Step::Stop;
                }
                self.at_node = true;
                self.plain_from = None;
            }
            b']' | b'}' if self.depth > 0 => {
                self.depth -= 1;
                self.at_node = false;
            }
            b',' if self.depth > 0 => self.at_node = true,
            b'"' | b'\'' if self.at_node => {
                self.quote = if byte == b'"' {
                    Quote::Double
                } else {
                    Quote::Single
                };
                self.escaped = false;
                if self.depth == 0 && self.at_key {
                    *node_col = *i;
                }
                self.at_key = false;
            }
            b'-' | b'?' if self.depth == 0 && self.at_node && next_blank => {
                *node_col = *i;
                self.at_key = true;
            }
            b':' if next_blank => {
                self.at_node = true;
                self.at_key = false;
                self.plain_from = None;
            }
            b'|' | b'>' if self.depth == 0 && self.at_node => {
                let rest = line[*i + 1..]
                    .trim_start_matches(|c: char| c.is_ascii_digit() || c == '+' || c == '-');
                let rest = rest.trim_start_matches([' ', '\t']);
                if rest.is_empty() || rest.starts_with('#') {
                    self.block = Some((*node_col, None));
                    self.at_node = false;
                    return Step::EndOfLine;
                }
                self.at_node = false;
                self.at_key = false;
                self.plain_from = Some(*node_col);
            }
            b'&' | b'!' | b'*' if self.at_node => {
                if byte == b'*' {
                    self.shape.aliases += 1;
                }
                // The anchor, tag or alias name runs to the next blank (or flow indicator).
                while *i + 1 < bytes.len()
                    && !matches!(
                        bytes[*i + 1],
                        b' ' | b'\t' | b',' | b'[' | b']' | b'{' | b'}'
                    )
                {
                    *i += 1;
                }
                self.at_node = byte != b'*';
            }
            _ => {
                if self.at_node && self.depth == 0 {
                    // A plain scalar (a key, or a value) starts here.
                    if self.at_key {
                        *node_col = *i;
                    }
                    self.plain_from = Some(*node_col);
                }
                self.at_node = false;
                self.at_key = false;
            }
        }
        Step::Next
    }
}

/// Parse a cassette's YAML, refusing (with the reason) a text nested too deep for the parser to
/// read in reasonable time, or one whose aliases would expand it past the record limit.
pub(super) fn parse_yaml(text: &str, limits: &Limits) -> crate::error::Result<serde_norway::Value> {
    let shape = yaml_shape(text);
    if shape.flow_depth > NESTING_LIMIT {
        return Err(Error::Malformed(format!(
            "the cassette {}; it was not parsed",
            crate::ingest::limits::too_deep()
        )));
    }
    let not_yaml = |e: serde_norway::Error| {
        let text = e.to_string();
        Error::Malformed(match text.strip_prefix("recursion limit exceeded") {
            Some(at) => format!("the cassette {}{at}", crate::ingest::limits::too_deep()),
            None => format!("cassette is not valid YAML: {text}"),
        })
    };
    if shape.aliases > 0 {
        // Counted before anything is built: an alias repeats its anchor's whole node.
        let total = Cell::new(0);
        let counted = Expanded {
            total: &total,
            limit: limits.record_bytes,
        }
        .deserialize(serde_norway::Deserializer::from_str(text));
        if let Err(e) = counted {
            return Err(if total.get() > limits.record_bytes {
                Error::Malformed(format!(
                    "the cassette's {} alias(es) expand it past the {} record limit; it was not \
                     read",
                    shape.aliases,
                    crate::ingest::limits::size_text(limits.record_bytes)
                ))
            } else {
                not_yaml(e)
            });
        }
    }
    serde_norway::from_str::<serde_norway::Value>(text).map_err(not_yaml)
}

/// Counts what a YAML document expands to, aliases repeated (a node costs its text and
/// [`NODE_BYTES`]), and gives up once the count passes `limit`.
#[derive(Clone, Copy)]
pub(super) struct Expanded<'a> {
    total: &'a Cell<u64>,
    limit: u64,
}

/// What [`Expanded`] counts for a node besides its text: about what the parsed value takes.
pub(super) const NODE_BYTES: u64 = 32;

impl Expanded<'_> {
    fn add<E: serde::de::Error>(&self, text: usize) -> Result<(), E> {
        let total = self.total.get() + text as u64 + NODE_BYTES;
        self.total.set(total);
        if total > self.limit {
            return Err(E::custom("expands past the limit"));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Expanded<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Expanded<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a YAML node")
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.add(0)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.add(0)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.add(0)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.add(0)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        self.add(v.len())
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.add(0)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        self.add(0)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.add(0)?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.add(0)?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        // A tagged node: its tag, then the node.
        let (tag, node) = data.variant::<String>()?;
        self.add(tag.len())?;
        node.newtype_variant_seed(self)
    }
}
