//! Codex's `codex exec --json` output.
//!
//! Every turn ends with `turn.completed` (or, in newer builds, a
//! `turn.failed` that may carry usage too) whose `usage` holds
//! `input_tokens` (cached ones included), `cached_input_tokens`,
//! `output_tokens` (reasoning included) and, when the build reports them,
//! `reasoning_output_tokens` and `cache_write_input_tokens`. The events
//! name no model: the run is priced as the trial's model.

use serde_json::Value;

use super::format::UsageFormat;
use super::tokens::{count, json_lines, Tokens, Usage};

fn tokens_of(u: &Value) -> Tokens {
    let cached = count(u, "cached_input_tokens");
    Tokens {
        // OpenAI counts cached input inside input; cbrun's `input` is the
        // uncached part.
        input: count(u, "input_tokens").map(|i| i.saturating_sub(cached.unwrap_or(0))),
        output: count(u, "output_tokens"),
        cache_read: cached,
        cache_write: count(u, "cache_write_input_tokens"),
        cache_write_1h: None,
        reasoning: count(u, "reasoning_output_tokens"),
    }
}

pub fn parse(text: &str) -> Usage {
    let mut u = Usage::new(UsageFormat::CodexJson);
    let (mut started, mut ended) = (0u64, 0u64);
    for v in json_lines(text) {
        match v.get("type").and_then(Value::as_str) {
            Some("turn.started") => started += 1,
            Some("turn.completed" | "turn.failed") => {
                ended += 1;
                if let Some(usage) = v.get("usage") {
                    u.total.add(&tokens_of(usage));
                }
            }
            _ => {}
        }
    }
    // A turn still open when the log ends was cut short: its usage is lost.
    u.complete = ended > 0 && ended >= started;
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../tests/fixtures/agents/codex-json.jsonl");

    #[test]
    fn turns_sum_with_cached_input_split_out() {
        let u = UsageFormat::CodexJson.parse(FIXTURE, "logs/cbrun/agent.log");
        assert!(u.complete);
        assert!(u.by_model.is_empty(), "codex names no model");
        assert_eq!(u.total.input, Some(2000 + 1000));
        assert_eq!(u.total.cache_read, Some(3000));
        assert_eq!(u.total.output, Some(750));
        assert_eq!(u.total.reasoning, Some(200));
        assert_eq!(u.total.cache_write, None, "not reported by this build");
        assert_eq!(u.cli_cost_usd, None);
    }

    #[test]
    fn an_open_turn_is_incomplete() {
        let text = "{\"type\":\"turn.started\"}\n{\"type\":\"item.completed\",\"item\":{}}\n";
        let u = UsageFormat::CodexJson.parse(text, "x");
        assert!(!u.complete);
        assert!(u.total.is_unreported());
        // Cached larger than input (a forged line) cannot go negative.
        let text = "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":5,\"cached_input_tokens\":9}}";
        let u = UsageFormat::CodexJson.parse(text, "x");
        assert_eq!(u.total.input, Some(0));
    }
}
