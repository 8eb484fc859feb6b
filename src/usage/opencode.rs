//! OpenCode's `opencode run --format json` output.
//!
//! Every model step ends with a `step_finish` event whose `part.tokens`
//! holds `input`, `output` (reasoning *not* included), `reasoning` and
//! `cache.read` / `cache.write`, and whose `part.cost` is OpenCode's own
//! figure (0 for a provider it has no price for). A `step_finish` whose
//! `reason` is not `tool-calls` ends the run. The events name no model.

use serde_json::Value;

use super::format::UsageFormat;
use super::tokens::{amount, count, json_lines, Tokens, Usage};

fn tokens_of(t: &Value) -> Tokens {
    let cache = t.get("cache");
    let output = count(t, "output");
    let reasoning = count(t, "reasoning");
    Tokens {
        input: count(t, "input"),
        // Billed output is what OpenCode calls output plus reasoning.
        output: match (output, reasoning) {
            (None, None) => None,
            (o, r) => Some(o.unwrap_or(0).saturating_add(r.unwrap_or(0))),
        },
        cache_read: cache.and_then(|c| count(c, "read")),
        cache_write: cache.and_then(|c| count(c, "write")),
        cache_write_1h: None,
        reasoning,
    }
}

pub fn parse(text: &str) -> Usage {
    let mut u = Usage::new(UsageFormat::OpencodeJson);
    let mut finished = false;
    for v in json_lines(text) {
        if v.get("type").and_then(Value::as_str) != Some("step_finish") {
            continue;
        }
        let Some(part) = v.get("part") else { continue };
        if let Some(t) = part.get("tokens") {
            u.total.add(&tokens_of(t));
        }
        if let Some(c) = amount(part, "cost") {
            u.cli_cost_usd = Some(u.cli_cost_usd.unwrap_or(0.0) + c);
        }
        finished = part.get("reason").and_then(Value::as_str) != Some("tool-calls");
    }
    u.complete = finished;
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../tests/fixtures/agents/opencode-json.jsonl");

    #[test]
    fn steps_sum_with_reasoning_added_to_output() {
        let u = UsageFormat::OpencodeJson.parse(FIXTURE, "logs/cbrun/agent.log");
        assert!(u.complete, "the last step stopped");
        assert_eq!(u.total.input, Some(15));
        assert_eq!(u.total.cache_read, Some(1150));
        assert_eq!(u.total.cache_write, Some(168));
        assert_eq!(u.total.reasoning, Some(12));
        assert_eq!(u.total.output, Some(30 + 12 + 12));
        let cost = u.cli_cost_usd.unwrap();
        assert!((cost - 0.015).abs() < 1e-12, "{cost}");
    }

    #[test]
    fn a_run_cut_after_a_tool_step_is_incomplete() {
        let first = FIXTURE.lines().take(3).collect::<Vec<_>>().join("\n");
        let u = UsageFormat::OpencodeJson.parse(&first, "x");
        assert!(!u.complete);
        assert_eq!(u.total.input, Some(10));
    }
}
