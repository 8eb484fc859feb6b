//! Token counts times list prices.
//!
//! A run with per-model counts is priced model by model; otherwise its
//! totals are priced as the trial's model. One model without a price
//! makes the whole cost unknown (`None`, never 0), and its name is listed.

use serde::Serialize;

use super::pricing::{ModelPrice, PriceTable};
use super::tokens::{Tokens, Usage};

/// What a run cost by the table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cost {
    /// `None` when a model has no price.
    pub cost_usd: Option<f64>,
    /// `pricing-table:<date>` when priced.
    pub cost_source: Option<String>,
    /// Names of models with usage and a price.
    pub priced_models: Vec<String>,
    /// Names of models with usage and no price (`(unknown model)` when the
    /// run names none and the trial has no model).
    pub unpriced_models: Vec<String>,
}

/// Placeholder name for a run whose model nobody named.
pub const UNKNOWN_MODEL: &str = "(unknown model)";

/// The price of `t` at `p`, in USD.
pub fn tokens_cost(t: &Tokens, p: &ModelPrice) -> f64 {
    let n = |v: Option<u64>| v.unwrap_or(0) as f64;
    let hour = t
        .cache_write_1h
        .unwrap_or(0)
        .min(t.cache_write.unwrap_or(0));
    let short = t.cache_write.unwrap_or(0) - hour;
    (n(t.input) * p.input
        + n(t.cache_read) * p.cache_read_price()
        + short as f64 * p.cache_write_price()
        + hour as f64 * p.cache_write_1h_price()
        + n(t.output) * p.output)
        / 1e6
}

/// Prices `usage`; `trial_model` stands for a run that names no model.
pub fn price(usage: &Usage, trial_model: Option<&str>, table: &PriceTable) -> Cost {
    let mut parts: Vec<(String, Tokens)> = usage
        .by_model
        .iter()
        .filter(|(_, t)| t.total() > 0)
        .map(|(m, t)| (m.clone(), *t))
        .collect();
    if usage.by_model.is_empty() || (parts.is_empty() && usage.total.total() > 0) {
        let name = trial_model
            .filter(|m| !m.trim().is_empty())
            .unwrap_or(UNKNOWN_MODEL);
        parts = vec![(name.to_owned(), usage.total)];
    }
    let mut cost = Cost {
        cost_usd: None,
        cost_source: None,
        priced_models: Vec::new(),
        unpriced_models: Vec::new(),
    };
    let mut sum = 0.0;
    for (model, t) in &parts {
        match table.lookup(model).filter(|_| model != UNKNOWN_MODEL) {
            Some(p) => {
                sum += tokens_cost(t, p);
                cost.priced_models.push(model.clone());
            }
            None => cost.unpriced_models.push(model.clone()),
        }
    }
    if cost.unpriced_models.is_empty() {
        cost.cost_usd = Some(sum);
        cost.cost_source = Some(table.source_label());
    }
    cost
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::format::UsageFormat;

    fn table() -> PriceTable {
        PriceTable::parse(
            r#"
date = "2026-11-30"
currency = "USD"
[[model]]
id = "vendor/big"
aliases = ["big-latest"]
input = 2.0
output = 10.0
cache_read = 0.2
cache_write = 2.5
cache_write_1h = 4.0
[[model]]
id = "vendor/small"
input = 1.0
output = 4.0
"#,
            "t.toml",
        )
        .unwrap()
    }

    fn toks(input: u64, cr: u64, cw: u64, cw1h: u64, out: u64) -> Tokens {
        Tokens {
            input: Some(input),
            output: Some(out),
            cache_read: Some(cr),
            cache_write: Some(cw),
            cache_write_1h: Some(cw1h),
            reasoning: None,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn cache_reads_and_both_write_lifetimes_have_their_prices() {
        let t = table();
        let big = t.lookup("big").unwrap();
        // 1M of each: input 2 + read 0.2 + (1M-250k) 5m writes at 2.5 +
        // 250k 1h writes at 4 + output 10.
        let c = tokens_cost(
            &toks(1_000_000, 1_000_000, 1_000_000, 250_000, 1_000_000),
            big,
        );
        assert!(close(c, 2.0 + 0.2 + 0.75 * 2.5 + 0.25 * 4.0 + 10.0), "{c}");
        // No separate cache prices: reads and writes cost input.
        let small = t.lookup("small").unwrap();
        let c = tokens_cost(&toks(0, 500_000, 500_000, 500_000, 0), small);
        assert!(close(c, 1.0), "{c}");
    }

    #[test]
    fn per_model_usage_is_priced_per_model_aliases_included() {
        let mut u = Usage::new(UsageFormat::ClaudeStreamJson);
        u.by_model
            .insert("big-latest-20261001".into(), toks(1_000_000, 0, 0, 0, 0));
        u.by_model
            .insert("vendor/small".into(), toks(0, 0, 0, 0, 1_000_000));
        u.by_model.insert("unused".into(), Tokens::default());
        let c = price(&u, Some("ignored"), &table());
        assert!(close(c.cost_usd.unwrap(), 2.0 + 4.0), "{c:?}");
        assert_eq!(c.cost_source.as_deref(), Some("pricing-table:2026-11-30"));
        assert_eq!(c.priced_models, ["big-latest-20261001", "vendor/small"]);
        assert!(
            c.unpriced_models.is_empty(),
            "a model that used nothing needs no price"
        );
    }

    #[test]
    fn totals_are_priced_as_the_trial_model() {
        let mut u = Usage::new(UsageFormat::CodexJson);
        u.total = toks(1_000_000, 0, 0, 0, 0);
        let c = price(&u, Some("vendor/big"), &table());
        assert!(close(c.cost_usd.unwrap(), 2.0));
        assert_eq!(c.priced_models, ["vendor/big"]);
    }

    #[test]
    fn an_unpriced_model_makes_the_cost_unknown_not_zero() {
        let mut u = Usage::new(UsageFormat::ClaudeStreamJson);
        u.by_model.insert("big".into(), toks(10, 0, 0, 0, 0));
        u.by_model.insert("mystery-1".into(), toks(10, 0, 0, 0, 0));
        let c = price(&u, None, &table());
        assert_eq!(c.cost_usd, None);
        assert_eq!(c.cost_source, None);
        assert_eq!(c.unpriced_models, ["mystery-1"]);
        let mut u = Usage::new(UsageFormat::CodexJson);
        u.total = toks(10, 0, 0, 0, 0);
        let c = price(&u, None, &table());
        assert_eq!(c.cost_usd, None);
        assert_eq!(c.unpriced_models, [UNKNOWN_MODEL]);
        // A priced model with no tokens at all costs 0, known.
        let u = Usage::new(UsageFormat::CodexJson);
        let c = price(&u, Some("small"), &table());
        assert_eq!(c.cost_usd, Some(0.0));
    }
}
