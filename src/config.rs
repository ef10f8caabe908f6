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
//! ```

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

impl Config {
    pub fn from_toml(text: &str) -> Result<Config, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    pub fn load(path: &Path) -> Result<(Config, String), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
        let config =
            Config::from_toml(&text).map_err(|e| format!("config {}: {e}", path.display()))?;
        config
            .evidence
            .compile()
            .map_err(|e| format!("config {}: {e}", path.display()))?;
        Ok((config, text))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tool_declarations() {
        let c =
            Config::from_toml("[tools.render_screen]\nrepeated_when = \"arguments\"\n").unwrap();
        assert_eq!(c.repeated_when("render_screen"), RepeatedWhen::Arguments);
        assert_eq!(c.repeated_when("lookup"), RepeatedWhen::ArgumentsAndResult);
        assert!(Config::from_toml("[tools.x]\nrepeated = 1\n").is_err());
    }
}
