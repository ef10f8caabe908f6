//! Intervals for rates. A fail rate is `checked-fail / checked`; its 95% interval is the Wilson
//! score interval, which stays inside [0, 1] and behaves at 0 and at small counts. A change of
//! rate between two corpora gets Newcombe's hybrid score interval (method 10 of Newcombe 1998),
//! built from the two Wilson intervals: a change whose interval excludes zero is unlikely to be
//! sampling noise at the 95% level.

/// The normal quantile for a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// How the interval of a rate is computed, in words.
pub const WILSON: &str = "Wilson score interval, 95%";

/// `k / n`, or `None` when `n` is 0.
pub fn rate(k: u64, n: u64) -> Option<f64> {
    (n > 0).then(|| k as f64 / n as f64)
}

/// The 95% Wilson score interval of `k` successes in `n` trials.
pub fn wilson(k: u64, n: u64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let n = n as f64;
    let p = k as f64 / n;
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// The 95% Newcombe interval of `p2 - p1`, where `p1 = k1 / n1` (baseline) and
/// `p2 = k2 / n2` (candidate).
pub fn newcombe(k1: u64, n1: u64, k2: u64, n2: u64) -> Option<(f64, f64)> {
    let (l1, u1) = wilson(k1, n1)?;
    let (l2, u2) = wilson(k2, n2)?;
    let p1 = k1 as f64 / n1 as f64;
    let p2 = k2 as f64 / n2 as f64;
    let d = p2 - p1;
    let lo = d - ((p2 - l2).powi(2) + (u1 - p1).powi(2)).sqrt();
    let hi = d + ((u2 - p2).powi(2) + (p1 - l1).powi(2)).sqrt();
    Some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 5e-4
    }

    #[test]
    fn wilson_matches_published_values() {
        // Newcombe (1998), table I: 81/263 -> 0.2553 to 0.3662; 0/10 -> 0 to 0.2775.
        let (lo, hi) = wilson(81, 263).unwrap();
        assert!(close(lo, 0.2553) && close(hi, 0.3662), "{lo} {hi}");
        let (lo, hi) = wilson(0, 10).unwrap();
        assert!(close(lo, 0.0) && close(hi, 0.2775), "{lo} {hi}");
        assert_eq!(wilson(0, 0), None);
    }

    #[test]
    fn newcombe_matches_published_values() {
        // Newcombe (1998), table II, example (a): 56/70 vs 48/80, difference 0.2 with method
        // 10 interval 0.0524 to 0.3339 (here as candidate minus baseline).
        let (lo, hi) = newcombe(48, 80, 56, 70).unwrap();
        assert!(close(lo, 0.0524) && close(hi, 0.3339), "{lo} {hi}");
    }
}
