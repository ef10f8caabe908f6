//! The audit configuration (`traceaudit.toml`). Every table is optional.
//!
//! ```toml
//! # A tool whose result stamps a fresh value each time: repeats are judged on arguments alone.
//! [tools.render_screen]
//! repeated_when = "arguments"
//!
//! # How the evidence gate reads answers (defaults shown).
//! [evidence]
//! min_digits = 4
//! exempt_values = []
//! exempt_patterns = []
//! shapes = []            # [{ name = "ticket", pattern = "tkt-[0-9]+" }]
//! max_forms = 200000
//!
//! # The output contract of some runs: a JSON Schema file (relative to this file) chosen by agent
//! # id or by a glob over the run's source path, and optionally the retry budget.
//! [[schemas]]
//! source = "**/g_output_schema*"
//! schema = "schemas/storage_report.json"
//! retries = 2
//! ```

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Per-tool declarations, by tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolConfig>,
    /// The evidence gate's reading (prior-turn-evidence): value shapes, exemptions, ceilings.
    #[serde(default)]
    pub evidence: crate::evidence::EvidenceConfig,
    /// Output contracts (JSON Schemas) for runs, first match wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schemas: Vec<SchemaConfig>,
}

/// One output contract: which runs it covers and the JSON Schema their answers must satisfy.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SchemaConfig {
    /// Runs whose agent id is exactly this.
    #[serde(default)]
    pub agent: Option<String>,
    /// Runs whose source path matches this glob (`*` and `?` within a path segment, `**` across
    /// segments).
    #[serde(default)]
    pub source: Option<String>,
    /// Path of a JSON Schema file, relative to the configuration file.
    #[serde(default)]
    pub schema: Option<String>,
    /// The schema itself, inline, as JSON text (instead of `schema`).
    #[serde(default)]
    pub schema_json: Option<String>,
    /// Corrective re-asks the agent was configured with, when known.
    #[serde(default)]
    pub retries: Option<u32>,
    /// The parsed schema, filled in by [`Config::resolve_files`] (or from `schema_json`). It is
    /// part of the configuration hash, so a changed schema file changes the hash.
    #[serde(default, skip_deserializing)]
    pub resolved: Option<serde_json::Value>,
}

impl SchemaConfig {
    /// Does this entry cover a run with this agent id and source path?
    pub fn covers(&self, agent: Option<&str>, source: &str) -> bool {
        if self.agent.is_none() && self.source.is_none() {
            return false;
        }
        let agent_ok = match &self.agent {
            Some(a) => agent == Some(a.as_str()),
            None => true,
        };
        let source_ok = match &self.source {
            Some(g) => glob_matches(g, source),
            None => true,
        };
        agent_ok && source_ok
    }
}

/// Match a path against a glob: `**` spans segments, `*` and `?` stay within one. Both sides
/// are compared with `/` as the separator.
pub fn glob_matches(glob: &str, path: &str) -> bool {
    let path = path.replace('\\', "/");
    let mut pattern = String::from("^");
    let chars: Vec<char> = glob.replace('\\', "/").chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '*' && chars.get(i + 1) == Some(&'*') {
            // `**/` matches zero or more whole segments; a bare `**` anything at all.
            if chars.get(i + 2) == Some(&'/') {
                pattern.push_str("(?:.*/)?");
                i += 3;
            } else {
                pattern.push_str(".*");
                i += 2;
            }
            continue;
        }
        match c {
            '*' => pattern.push_str("[^/]*"),
            '?' => pattern.push_str("[^/]"),
            other => pattern.push_str(&regex::escape(&other.to_string())),
        }
        i += 1;
    }
    pattern.push('$');
    match regex::Regex::new(&pattern) {
        // A relative glob may match the end of an absolute path.
        Ok(re) => {
            re.is_match(&path)
                || (!glob.starts_with('/')
                    && path
                        .match_indices('/')
                        .any(|(i, _)| re.is_match(&path[i + 1..])))
        }
        Err(_) => false,
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// `arguments`: a repeat is the same arguments, whatever the result.
    #[serde(default)]
    pub repeated_when: Option<RepeatedWhen>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RepeatedWhen {
    /// The default: same arguments and same result.
    ArgumentsAndResult,
    /// Same arguments alone (the tool stamps its result).
    Arguments,
}

/// The most a configuration file or a schema file it names may hold. A real one is a few KiB;
/// the bound keeps a path such as `/dev/zero` from reading until memory runs out.
pub const MAX_CONFIG_FILE_BYTES: u64 = 16 << 20;

/// Read a text file of the configuration, refusing one past [`MAX_CONFIG_FILE_BYTES`].
fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::{Error, ErrorKind, Read};
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_CONFIG_FILE_BYTES {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!(
                "it holds more than {} MiB, more than a configuration or schema file does",
                MAX_CONFIG_FILE_BYTES >> 20
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|_| Error::new(ErrorKind::InvalidData, "it is not UTF-8 text"))
}

impl Config {
    /// A configuration from the text of a `traceaudit.toml`; an unknown table or key is an
    /// error ([`Error::Config`](crate::Error::Config)), so a misspelt setting is not ignored.
    ///
    /// ```
    /// use traceaudit::{Config, RepeatedWhen};
    ///
    /// let config = Config::from_toml("[tools.render_screen]\nrepeated_when = \"arguments\"\n");
    /// let tool = &config.unwrap().tools["render_screen"];
    /// assert_eq!(tool.repeated_when, Some(RepeatedWhen::Arguments));
    /// assert!(Config::from_toml("[tool.render_screen]\n").is_err());
    /// ```
    pub fn from_toml(text: &str) -> Result<Config> {
        toml::from_str(text).map_err(|e| Error::Config(e.to_string()))
    }

    pub fn load(path: &Path) -> Result<(Config, String)> {
        let text = read_bounded(path)
            .map_err(|e| Error::Config(format!("cannot read config {}: {e}", path.display())))?;
        let in_file = |e: Error| Error::Config(format!("config {}: {e}", path.display()));
        let mut config = Config::from_toml(&text).map_err(in_file)?;
        config.evidence.compile().map_err(in_file)?;
        let base = path.parent().unwrap_or(Path::new("."));
        config.resolve_files(base).map_err(in_file)?;
        Ok((config, text))
    }

    /// Read and parse the schema files the configuration names (relative to `base`), and the
    /// inline schemas; each must compile as a JSON Schema.
    pub fn resolve_files(&mut self, base: &Path) -> Result<()> {
        for (i, entry) in self.schemas.iter_mut().enumerate() {
            let what = format!("schemas[{i}]");
            if entry.agent.is_none() && entry.source.is_none() {
                return Err(Error::Config(format!(
                    "{what}: give `agent` or `source` to say which runs it covers"
                )));
            }
            let text = match (&entry.schema, &entry.schema_json) {
                (Some(file), None) => read_bounded(&base.join(file)).map_err(|e| {
                    Error::Config(format!("{what}: cannot read schema {file}: {e}"))
                })?,
                (None, Some(inline)) => inline.clone(),
                _ => {
                    return Err(Error::Config(format!(
                        "{what}: give exactly one of `schema` or `schema_json`"
                    )))
                }
            };
            let value: serde_json::Value = crate::js::parse_json(&text)
                .map_err(|e| Error::Config(format!("{what}: the schema is not JSON: {e}")))?;
            compile_schema(&value)
                .map_err(|e| Error::Config(format!("{what}: not a usable JSON Schema: {e}")))?;
            entry.resolved = Some(value);
        }
        Ok(())
    }

    /// The configured output contract of a run, if any entry covers it.
    pub fn schema_for(&self, agent: Option<&str>, source: &str) -> Option<&SchemaConfig> {
        self.schemas.iter().find(|s| s.covers(agent, source))
    }

    pub fn repeated_when(&self, tool: &str) -> RepeatedWhen {
        self.tools
            .get(tool)
            .and_then(|t| t.repeated_when)
            .unwrap_or(RepeatedWhen::ArgumentsAndResult)
    }

    /// A stable hash of the configuration as the engine understood it.
    pub fn hash(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        crate::js::fingerprint(&text)
    }
}

/// Compile a JSON Schema (draft from `$schema`, 2020-12 by default). Remote references are
/// never fetched: the crate is built without its resolvers. A configured schema must compile
/// when the configuration is loaded; the schema-attempt check compiles recorded ones too.
pub fn compile_schema(schema: &serde_json::Value) -> Result<jsonschema::Validator> {
    jsonschema::options().build(schema).map_err(|e| {
        // The error kind's variant name (`Required`, `Type`, ...), without its fields.
        let kind = format!("{:?}", e.kind());
        let name: String = kind.chars().take_while(|c| c.is_alphanumeric()).collect();
        Error::Config(format!("{name} (at {})", e.schema_path().as_str()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_key_is_refused_in_every_table() {
        for (text, key) in [
            ("[evidence]\nexempt_pattern = [\"x\"]\n", "exempt_pattern"),
            ("[evidence]\nmin_digit = 2\n", "min_digit"),
            (
                "[evidence]\nshapes = [{ name = \"t\", patern = \"t-[0-9]+\" }]\n",
                "patern",
            ),
            ("[tools.x]\nrepeated = \"arguments\"\n", "repeated"),
            (
                "[[schemas]]\nsource = \"*\"\nschema_jsn = \"{}\"\n",
                "schema_jsn",
            ),
            ("[evidense]\n", "evidense"),
        ] {
            let err = Config::from_toml(text).expect_err(text).to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
        // The keys that are there still read.
        let c =
            Config::from_toml("[evidence]\nmin_digits = 2\nexempt_patterns = [\"x\"]\n").unwrap();
        assert_eq!(c.evidence.min_digits, 2);
    }

    #[test]
    fn configuration_and_schema_files_are_read_within_a_bound() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("traceaudit.toml");
        std::fs::write(
            &config,
            "[[schemas]]\nsource = \"*\"\nschema = \"/dev/zero\"\n",
        )
        .unwrap();
        let err = Config::load(&config).expect_err("refused").to_string();
        assert!(
            err.contains("schemas[0]") && err.contains("more than 16 MiB"),
            "{err}"
        );
        let err = Config::load(Path::new("/dev/zero"))
            .expect_err("refused")
            .to_string();
        assert!(
            err.contains("/dev/zero") && err.contains("more than 16 MiB"),
            "{err}"
        );
    }

    #[test]
    fn parses_tool_declarations() {
        let c =
            Config::from_toml("[tools.render_screen]\nrepeated_when = \"arguments\"\n").unwrap();
        assert_eq!(c.repeated_when("render_screen"), RepeatedWhen::Arguments);
        assert_eq!(c.repeated_when("lookup"), RepeatedWhen::ArgumentsAndResult);
        assert!(Config::from_toml("[tools.x]\nrepeated = 1\n").is_err());
    }

    #[test]
    fn schema_entries_resolve_and_match() {
        let mut c = Config::from_toml(
            "[[schemas]]\nsource = \"**/g_*.ndjson\"\nschema_json = '{\"type\":\"object\"}'\nretries = 2\n",
        )
        .unwrap();
        c.resolve_files(Path::new(".")).unwrap();
        let entry = c
            .schema_for(None, "/data/ndjson/g_output_schema.ndjson")
            .unwrap();
        assert_eq!(entry.retries, Some(2));
        assert!(entry.resolved.is_some());
        assert!(c.schema_for(None, "/data/ndjson/f_x.ndjson").is_none());
        // An empty file is the default configuration; a schema entry changes the hash.
        assert_eq!(
            Config::default().hash(),
            Config::from_toml("").unwrap().hash()
        );
        assert_ne!(Config::default().hash(), c.hash());
        let mut bad =
            Config::from_toml("[[schemas]]\nagent = \"a\"\nschema_json = '{\"type\":7}'\n")
                .unwrap();
        assert!(bad.resolve_files(Path::new(".")).is_err());
        assert!(glob_matches("test_*/x?.yaml", "/a/b/test_ollama/x1.yaml"));
        assert!(!glob_matches("test_*/x?.yaml", "/a/b/test_ollama/x12.yaml"));
        assert!(glob_matches("**", "anything/at/all"));
    }
}
