//! The statistics of the report, each the textbook one:
//!
//! - [`wilson`]: the Wilson score interval of a binomial rate (used for a
//!   pass rate over trials; it treats trials as independent, which
//!   repeats of one case are not, so with repeats the bootstrap interval
//!   of pass@1 is the one to quote);
//! - [`pass_at_k`], [`pass_hat_k`]: the unbiased estimators over `n`
//!   repeats of a case with `c` passes, of the chance that at least one
//!   (pass@k) or all (pass^k) of `k` repeats drawn without replacement
//!   pass: `1 - C(n-c,k)/C(n,k)` and `C(c,k)/C(n,k)`;
//! - [`bootstrap_ci`]: a percentile bootstrap over cases (cases are the
//!   unit that was sampled; repeats inside a case stay together), with a
//!   fixed seed so that one run folder always gives one interval;
//! - [`sign_test`]: the exact two-sided sign test on cases that changed
//!   between two runs (for one repeat per case it is the exact McNemar
//!   test).

/// z for a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;
/// Bootstrap resamples.
pub const RESAMPLES: usize = 2000;
/// The bootstrap's seed.
pub const SEED: u64 = 0x00c0_ffee_5eed;

/// The Wilson score interval of `successes` in `n` trials.
pub fn wilson(successes: u64, n: u64, z: f64) -> Option<(f64, f64)> {
    if n == 0 || successes > n {
        return None;
    }
    let n_f = n as f64;
    let p = successes as f64 / n_f;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n_f)) / (1.0 + z2 / n_f);
    let half = z / (1.0 + z2 / n_f) * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt();
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// pass@k of a case with `c` passes in `n` repeats; `None` when `k` is 0
/// or more than `n`.
pub fn pass_at_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    // C(n-c,k)/C(n,k) = prod_{i=0}^{k-1} (n-c-i)/(n-i)
    let mut miss = 1.0;
    for i in 0..k {
        miss *= (n - c - i) as f64 / (n - i) as f64;
    }
    Some(1.0 - miss)
}

/// pass^k of a case with `c` passes in `n` repeats; `None` when `k` is 0
/// or more than `n`.
pub fn pass_hat_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if c < k {
        return Some(0.0);
    }
    let mut all = 1.0;
    for i in 0..k {
        all *= (c - i) as f64 / (n - i) as f64;
    }
    Some(all)
}

pub fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// A 95% percentile bootstrap interval of the mean of `values` (one per
/// case): `None` for fewer than two cases, where resampling says nothing.
pub fn bootstrap_ci(values: &[f64]) -> Option<(f64, f64)> {
    if values.len() < 2 {
        return None;
    }
    let mut rng = SplitMix64(SEED);
    let n = values.len();
    let mut means = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        let mut sum = 0.0;
        for _ in 0..n {
            sum += values[rng.below(n as u64) as usize];
        }
        means.push(sum / n as f64);
    }
    means.sort_by(f64::total_cmp);
    Some((quantile(&means, 0.025), quantile(&means, 0.975)))
}

/// The `q` quantile of sorted `xs`, interpolating between neighbours.
fn quantile(xs: &[f64], q: f64) -> f64 {
    let pos = q * (xs.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    xs[lo] + (xs[hi] - xs[lo]) * (pos - lo as f64)
}

/// The exact two-sided p-value of the sign test with `gained` cases
/// better and `lost` worse (ties left out); `None` with no changes.
pub fn sign_test(gained: u64, lost: u64) -> Option<f64> {
    let n = gained + lost;
    if n == 0 {
        return None;
    }
    let k = gained.min(lost);
    // P(X <= k) for X ~ Binomial(n, 1/2), summed in log space so that
    // large n does not underflow 2^-n.
    let ln2n = n as f64 * std::f64::consts::LN_2;
    let mut ln_c = 0.0; // ln C(n, 0)
    let mut tail = 0.0;
    for i in 0..=k {
        if i > 0 {
            ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        tail += (ln_c - ln2n).exp();
    }
    Some((2.0 * tail).min(1.0))
}

/// Sebastiano Vigna's splitmix64: small, fast, and the same numbers on
/// every machine, which is all a reproducible bootstrap needs.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias for n far
    /// below 2^64 is negligible here).
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn pass_at_k_by_hand() {
        // n=3, c=1: pass@1 = 1/3; pass@2 = 1 - C(2,2)/C(3,2) = 2/3; pass@3 = 1.
        assert!(close(pass_at_k(3, 1, 1).unwrap(), 1.0 / 3.0));
        assert!(close(pass_at_k(3, 1, 2).unwrap(), 2.0 / 3.0));
        assert!(close(pass_at_k(3, 1, 3).unwrap(), 1.0));
        // n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10.
        assert!(close(pass_at_k(5, 2, 2).unwrap(), 0.7));
        assert_eq!(pass_at_k(3, 0, 2), Some(0.0));
        assert_eq!(pass_at_k(2, 1, 3), None);
        assert_eq!(pass_at_k(2, 1, 0), None);
    }

    #[test]
    fn pass_hat_k_by_hand() {
        // n=3, c=2: pass^1 = 2/3, pass^2 = C(2,2)/C(3,2) = 1/3, pass^3 = 0.
        assert!(close(pass_hat_k(3, 2, 1).unwrap(), 2.0 / 3.0));
        assert!(close(pass_hat_k(3, 2, 2).unwrap(), 1.0 / 3.0));
        assert_eq!(pass_hat_k(3, 2, 3), Some(0.0));
        // n=5, c=4, k=3: C(4,3)/C(5,3) = 4/10.
        assert!(close(pass_hat_k(5, 4, 3).unwrap(), 0.4));
        assert_eq!(pass_hat_k(3, 3, 3), Some(1.0));
    }

    #[test]
    fn wilson_known_values() {
        // 5 of 10: 0.2366 .. 0.7634 (standard tables).
        let (lo, hi) = wilson(5, 10, Z95).unwrap();
        assert!((lo - 0.2366).abs() < 1e-4 && (hi - 0.7634).abs() < 1e-4);
        let (lo, hi) = wilson(0, 4, Z95).unwrap();
        assert_eq!(lo, 0.0);
        assert!((hi - 0.4899).abs() < 1e-4);
        assert_eq!(wilson(0, 0, Z95), None);
    }

    #[test]
    fn sign_test_known_values() {
        // 0 vs 5: 2 * (1/32) = 0.0625; 1 vs 5: 2 * 7/64 = 0.21875.
        assert!(close(sign_test(0, 5).unwrap(), 0.0625));
        assert!(close(sign_test(5, 1).unwrap(), 0.21875));
        assert_eq!(sign_test(3, 3), Some(1.0));
        assert_eq!(sign_test(0, 0), None);
        assert!(sign_test(0, 2000).unwrap() < 1e-300 || sign_test(0, 2000) == Some(0.0));
    }

    #[test]
    fn bootstrap_is_reproducible_and_brackets_the_mean() {
        let v = [1.0, 0.0, 1.0, 1.0, 0.0, 0.5];
        let a = bootstrap_ci(&v).unwrap();
        assert_eq!(a, bootstrap_ci(&v).unwrap());
        let m = mean(&v).unwrap();
        assert!(a.0 <= m && m <= a.1 && a.0 < a.1);
        assert_eq!(bootstrap_ci(&[1.0, 1.0, 1.0]), Some((1.0, 1.0)));
        assert_eq!(bootstrap_ci(&[0.5]), None);
    }
}
