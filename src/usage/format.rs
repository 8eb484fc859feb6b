//! The output formats cbrun reads usage from, as a spec names them in
//! `usage_format`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::tokens::Usage;

/// One CLI's machine-readable output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UsageFormat {
    /// `claude -p --output-format stream-json --verbose`: a final `result`
    /// event with `usage`, `modelUsage` and `total_cost_usd`; `assistant`
    /// events with per-call usage.
    #[serde(rename = "claude-stream-json")]
    ClaudeStreamJson,
    /// `codex exec --json`: `turn.completed` (and `turn.failed`) events
    /// with `usage`.
    #[serde(rename = "codex-json")]
    CodexJson,
    /// `opencode run --format json`: `step_finish` events with
    /// `part.tokens` and `part.cost`.
    #[serde(rename = "opencode-json")]
    OpencodeJson,
    /// `cursor-agent -p --output-format stream-json`: a final `result`
    /// event with camelCase `usage`.
    #[serde(rename = "cursor-stream-json")]
    CursorStreamJson,
}

impl UsageFormat {
    pub const ALL: [UsageFormat; 4] = [
        UsageFormat::ClaudeStreamJson,
        UsageFormat::CodexJson,
        UsageFormat::OpencodeJson,
        UsageFormat::CursorStreamJson,
    ];

    pub fn name(self) -> &'static str {
        match self {
            UsageFormat::ClaudeStreamJson => "claude-stream-json",
            UsageFormat::CodexJson => "codex-json",
            UsageFormat::OpencodeJson => "opencode-json",
            UsageFormat::CursorStreamJson => "cursor-stream-json",
        }
    }

    /// Parses one log's text. `source` names the log in the result.
    pub fn parse(self, text: &str, source: &str) -> Usage {
        let mut u = match self {
            UsageFormat::ClaudeStreamJson => super::claude::parse(text),
            UsageFormat::CodexJson => super::codex::parse(text),
            UsageFormat::OpencodeJson => super::opencode::parse(text),
            UsageFormat::CursorStreamJson => super::cursor::parse(text),
        };
        u.total = u.total.clamp();
        for t in u.by_model.values_mut() {
            *t = t.clamp();
        }
        u.sources = vec![source.to_owned()];
        u
    }
}

impl fmt::Display for UsageFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for UsageFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        UsageFormat::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = UsageFormat::ALL.iter().map(|f| f.name()).collect();
                format!("unknown usage format {s:?} (known: {})", known.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in UsageFormat::ALL {
            assert_eq!(f.name().parse::<UsageFormat>().unwrap(), f);
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{}\"", f.name()));
            assert_eq!(serde_json::from_str::<UsageFormat>(&json).unwrap(), f);
        }
        let e = "claude-json".parse::<UsageFormat>().unwrap_err();
        assert!(e.contains("claude-stream-json"), "{e}");
    }
}
