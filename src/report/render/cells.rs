//! How numbers read in a table cell, the same in every text format.
//!
//! Two markers, never a 0 in their place: `n/a` is a value the records do
//! not hold (no `cost_usd`, no time to submission in an older record);
//! `-` is a value that does not apply (no submission to time, no trial
//! that ran to cost).

use crate::report::tables::{CostSum, MeanTime, TokenSum};

pub const NA: &str = "n/a";
pub const NONE: &str = "-";

/// `42.0s`, `12m 05s`, `2h 03m`.
pub fn secs(s: f64) -> String {
    if s < 59.95 {
        return format!("{s:.1}s");
    }
    let total = s.round() as u64;
    if total < 3600 {
        format!("{}m {:02}s", total / 60, total % 60)
    } else {
        let minutes = (total + 30) / 60;
        format!("{}h {:02}m", minutes / 60, minutes % 60)
    }
}

/// `$12.34`; a known cost below a cent is `<$0.01`, not `$0.00`.
pub fn usd(c: f64) -> String {
    if c > 0.0 && c < 0.005 {
        "<$0.01".into()
    } else {
        format!("${c:.2}")
    }
}

/// `62.5%`.
pub fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// `30.6–86.3%`.
pub fn ci(c: Option<[f64; 2]>) -> String {
    match c {
        Some([a, b]) => format!("{:.1}–{:.1}%", a * 100.0, b * 100.0),
        None => NA.into(),
    }
}

/// `5/8 62.5%`, or `n/a` over nothing.
pub fn rate(passed: usize, valid: usize) -> String {
    if valid == 0 {
        return NA.into();
    }
    format!("{passed}/{valid} {}", pct(passed as f64 / valid as f64))
}

pub fn opt_pct(x: Option<f64>) -> String {
    x.map(pct).unwrap_or_else(|| NA.into())
}

/// A mean time: `-` when no trial submitted, `n/a` when none recorded
/// its time, and how many did not when some did.
pub fn mean_time(t: &MeanTime) -> String {
    match (t.mean_s, t.unknown) {
        (None, 0) => NONE.into(),
        (None, _) => NA.into(),
        (Some(m), 0) => secs(m),
        (Some(m), u) => format!("{} (+{u} n/a)", secs(m)),
    }
}

/// A cost sum: `-` when no trial ran, `n/a (3 unpriced)` when none was
/// priced, `$1.20 (+2 unpriced)` when some were not.
pub fn cost(c: &CostSum) -> String {
    match (c.total_usd, c.unpriced) {
        (None, 0) => NONE.into(),
        (None, u) => format!("{NA} ({u} unpriced)"),
        (Some(t), 0) => usd(t),
        (Some(t), u) => format!("{} (+{u} unpriced)", usd(t)),
    }
}

/// `1234`, `12.3k`, `4.56M`.
pub fn count(n: u64) -> String {
    if n < 10_000 {
        n.to_string()
    } else if n < 1_000_000 {
        format!("{:.1}k", n as f64 / 1e3)
    } else {
        format!("{:.2}M", n as f64 / 1e6)
    }
}

/// `12.3k in / 4.1k out`, with trials that reported nothing counted.
pub fn tokens(t: &TokenSum) -> String {
    if t.reported == 0 {
        return if t.unreported == 0 {
            NONE.into()
        } else {
            NA.into()
        };
    }
    let side = |x: Option<u64>| x.map(count).unwrap_or_else(|| NA.into());
    let mut s = format!("{} in / {} out", side(t.input), side(t.output));
    if t.unreported > 0 {
        s.push_str(&format!(" (+{} n/a)", t.unreported));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_numbers() {
        assert_eq!(secs(42.04), "42.0s");
        assert_eq!(secs(725.4), "12m 05s");
        assert_eq!(secs(7380.0), "2h 03m");
        assert_eq!(usd(1.234), "$1.23");
        assert_eq!(usd(0.001), "<$0.01");
        assert_eq!(usd(0.0), "$0.00");
        assert_eq!(rate(5, 8), "5/8 62.5%");
        assert_eq!(rate(0, 0), "n/a");
        assert_eq!(count(123_456), "123.5k");
    }

    #[test]
    fn unknowns_are_never_zero() {
        let none = CostSum::default();
        assert_eq!(cost(&none), "-");
        let unpriced = CostSum {
            total_usd: None,
            priced: 0,
            unpriced: 3,
        };
        assert_eq!(cost(&unpriced), "n/a (3 unpriced)");
        let some = CostSum {
            total_usd: Some(1.2),
            priced: 1,
            unpriced: 2,
        };
        assert_eq!(cost(&some), "$1.20 (+2 unpriced)");
        let t = MeanTime {
            mean_s: None,
            known: 0,
            unknown: 2,
        };
        assert_eq!(mean_time(&t), "n/a");
    }
}
