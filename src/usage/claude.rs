//! Claude Code's `stream-json` output.
//!
//! Each `claude -p` run ends with one `result` event: `usage` (the run's
//! sum: `input_tokens`, `output_tokens`, `cache_read_input_tokens`,
//! `cache_creation_input_tokens`, `cache_creation.ephemeral_1h_input_tokens`),
//! `modelUsage` (the same per model, camelCase, background calls to other
//! models included) and `total_cost_usd` (its own estimate). Before it,
//! every API response shows as `assistant` events carrying
//! `message.usage`, repeated per content block under one `message.id`.
//! Without a `result` (the CLI was killed), those per-call lines are
//! summed once per id; they may undercount output. Failed calls show as
//! `assistant` events of model `<synthetic>`, which used nothing.

use std::collections::BTreeMap;

use serde_json::Value;

use super::format::UsageFormat;
use super::tokens::{amount, count, json_lines, Tokens, Usage};

/// The usage object of a result or an API response.
fn tokens_of(u: &Value) -> Tokens {
    Tokens {
        input: count(u, "input_tokens"),
        output: count(u, "output_tokens"),
        cache_read: count(u, "cache_read_input_tokens"),
        cache_write: count(u, "cache_creation_input_tokens"),
        cache_write_1h: u
            .get("cache_creation")
            .and_then(|c| count(c, "ephemeral_1h_input_tokens")),
        reasoning: None,
    }
}

/// One model's entry of `modelUsage`.
fn model_tokens(m: &Value) -> Tokens {
    Tokens {
        input: count(m, "inputTokens"),
        output: count(m, "outputTokens"),
        cache_read: count(m, "cacheReadInputTokens"),
        cache_write: count(m, "cacheCreationInputTokens"),
        cache_write_1h: None,
        reasoning: None,
    }
}

const SYNTHETIC: &str = "<synthetic>";

pub fn parse(text: &str) -> Usage {
    let mut from_results = Usage::new(UsageFormat::ClaudeStreamJson);
    let mut results = 0usize;
    // message id -> (model, usage): the last line of an id wins.
    let mut calls: BTreeMap<String, (String, Tokens)> = BTreeMap::new();
    for v in json_lines(text) {
        match v.get("type").and_then(Value::as_str) {
            Some("result") => {
                results += 1;
                add_result(&mut from_results, &v);
            }
            Some("assistant") => {
                let Some(msg) = v.get("message") else {
                    continue;
                };
                let (Some(id), Some(usage)) =
                    (msg.get("id").and_then(Value::as_str), msg.get("usage"))
                else {
                    continue;
                };
                let model = msg.get("model").and_then(Value::as_str).unwrap_or("");
                if model == SYNTHETIC {
                    continue;
                }
                calls.insert(id.to_owned(), (model.to_owned(), tokens_of(usage)));
            }
            _ => {}
        }
    }
    // 1-hour cache writes per model, which `modelUsage` does not split.
    let mut hour: BTreeMap<String, u64> = BTreeMap::new();
    for (model, t) in calls.values() {
        if let Some(h) = t.cache_write_1h {
            *hour.entry(model.clone()).or_default() += h;
        }
    }
    if results > 0 {
        for (model, t) in from_results.by_model.iter_mut() {
            if let Some(h) = hour.get(model) {
                t.cache_write_1h = Some(*h);
            }
        }
        return from_results;
    }
    let mut u = Usage::new(UsageFormat::ClaudeStreamJson);
    u.complete = false;
    for (model, t) in calls.into_values() {
        u.total.add(&t);
        if !model.is_empty() {
            u.by_model.entry(model).or_default().add(&t);
        }
    }
    u
}

fn add_result(u: &mut Usage, v: &Value) {
    let total = v.get("usage").map(tokens_of).unwrap_or_default();
    let per_model: BTreeMap<String, Tokens> = v
        .get("modelUsage")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(name, _)| name.as_str() != SYNTHETIC)
                .map(|(name, t)| (name.clone(), model_tokens(t)))
                .collect()
        })
        .unwrap_or_default();
    if per_model.is_empty() {
        u.total.add(&total);
    } else {
        // The per-model figures are what gets priced; the total is their
        // sum, with the 1-hour split only `usage` carries.
        let mut sum = Tokens::default();
        for (name, t) in per_model {
            sum.add(&t);
            u.by_model.entry(name).or_default().add(&t);
        }
        sum.cache_write_1h = total.cache_write_1h;
        u.total.add(&sum);
    }
    if let Some(c) = amount(v, "total_cost_usd") {
        u.cli_cost_usd = Some(u.cli_cost_usd.unwrap_or(0.0) + c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../tests/fixtures/agents/claude-stream-json.jsonl");
    const KILLED: &str =
        include_str!("../../tests/fixtures/agents/claude-stream-json-killed.jsonl");

    #[test]
    fn result_event_with_model_usage() {
        let u = UsageFormat::ClaudeStreamJson.parse(FIXTURE, "logs/cbrun/agent.log");
        assert!(u.complete);
        assert_eq!(u.sources, ["logs/cbrun/agent.log"]);
        // Two models: the main one and a background call.
        let main = &u.by_model["claude-sonnet-5-5"];
        assert_eq!(main.input, Some(2100));
        assert_eq!(main.output, Some(640));
        assert_eq!(main.cache_read, Some(30_000));
        assert_eq!(main.cache_write, Some(4000));
        assert_eq!(main.cache_write_1h, Some(1000), "from the per-call lines");
        let bg = &u.by_model["claude-haiku-5-5"];
        assert_eq!((bg.input, bg.output), (Some(300), Some(20)));
        assert_eq!(bg.cache_write_1h, None);
        assert_eq!(u.total.input, Some(2400));
        assert_eq!(u.total.output, Some(660));
        assert_eq!(u.total.cache_write_1h, Some(1000));
        assert_eq!(
            u.total.reasoning, None,
            "Claude Code does not split reasoning"
        );
        assert_eq!(u.cli_cost_usd, Some(0.0421));
        assert!(!u.by_model.contains_key(SYNTHETIC));
    }

    #[test]
    fn a_killed_run_falls_back_to_per_call_lines_once_per_id() {
        let u = UsageFormat::ClaudeStreamJson.parse(KILLED, "logs/cbrun/agent.log");
        assert!(!u.complete);
        // msg_a appears twice (two content blocks): counted once, with its
        // last line's numbers; the synthetic error message adds nothing.
        assert_eq!(u.total.input, Some(100 + 50));
        assert_eq!(u.total.output, Some(9 + 4));
        assert_eq!(u.by_model.len(), 1);
        assert_eq!(u.cli_cost_usd, None);
    }

    #[test]
    fn hostile_lines_are_skipped() {
        let text = "{\"type\":\"result\",\"usage\":{\"input_tokens\":-5,\"output_tokens\":\"9\"},\"total_cost_usd\":\"NaN\"}\nnot json\n{\"type\":\"assistant\",\"message\":7}\n";
        let u = UsageFormat::ClaudeStreamJson.parse(text, "x");
        assert!(u.complete);
        assert_eq!(u.total.input, None);
        assert_eq!(u.total.output, None);
        assert_eq!(u.cli_cost_usd, None);
        let u = UsageFormat::ClaudeStreamJson.parse("", "x");
        assert!(!u.complete, "no summary at all is incomplete");
        assert!(u.total.is_unreported());
    }
}
