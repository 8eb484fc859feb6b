//! Cursor's `cursor-agent -p --output-format stream-json` output.
//!
//! The run ends with one `result` event; its `usage` is camelCase
//! (`inputTokens`, `outputTokens`, `cacheReadTokens`, `cacheWriteTokens`).
//! Cursor's documentation lists no usage; these are the fields its CLI
//! has been seen to print. No model is named and no cost is given.

use serde_json::Value;

use super::format::UsageFormat;
use super::tokens::{count, json_lines, Tokens, Usage};

pub fn parse(text: &str) -> Usage {
    let mut u = Usage::new(UsageFormat::CursorStreamJson);
    let mut results = 0u64;
    for v in json_lines(text) {
        if v.get("type").and_then(Value::as_str) != Some("result") {
            continue;
        }
        results += 1;
        if let Some(usage) = v.get("usage") {
            u.total.add(&Tokens {
                input: count(usage, "inputTokens"),
                output: count(usage, "outputTokens"),
                cache_read: count(usage, "cacheReadTokens"),
                cache_write: count(usage, "cacheWriteTokens"),
                cache_write_1h: None,
                reasoning: None,
            });
        }
    }
    u.complete = results > 0;
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../tests/fixtures/agents/cursor-stream-json.jsonl");

    #[test]
    fn result_usage_in_camel_case() {
        let u = UsageFormat::CursorStreamJson.parse(FIXTURE, "logs/cbrun/agent.log");
        assert!(u.complete);
        assert_eq!(u.total.input, Some(800));
        assert_eq!(u.total.output, Some(150));
        assert_eq!(u.total.cache_read, Some(4000));
        assert_eq!(u.total.cache_write, Some(0));
        assert_eq!(u.total.reasoning, None);
        let u = UsageFormat::CursorStreamJson.parse("{\"type\":\"assistant\"}", "x");
        assert!(!u.complete);
    }
}
