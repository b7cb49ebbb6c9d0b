//! Statistics over runs: mean, standard deviation, 95 % confidence interval (Student's t),
//! min, max, median; Cohen's d between two samples.

use serde::{Deserialize, Serialize};

/// Reads a number written by `serde_json`, which writes NaN (nothing to measure) as `null`:
/// `null` reads back as NaN, so a results file with an empty cell can be read again (by
/// `harness compare`).
pub(crate) fn nan_or<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Summary of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Sample size.
    pub n: usize,
    /// Mean.
    #[serde(deserialize_with = "nan_or")]
    pub mean: f64,
    /// Sample standard deviation (n - 1).
    #[serde(deserialize_with = "nan_or")]
    pub sd: f64,
    /// Lower bound of the 95 % confidence interval of the mean.
    #[serde(deserialize_with = "nan_or")]
    pub ci95_low: f64,
    /// Upper bound.
    #[serde(deserialize_with = "nan_or")]
    pub ci95_high: f64,
    /// Smallest value.
    #[serde(deserialize_with = "nan_or")]
    pub min: f64,
    /// Median.
    #[serde(deserialize_with = "nan_or")]
    pub median: f64,
    /// Largest value.
    #[serde(deserialize_with = "nan_or")]
    pub max: f64,
}

/// The 97.5 % quantile of Student's t with `df` degrees of freedom (the half width of a
/// two-sided 95 % interval, in standard errors), from statrs; NaN below 1 degree of freedom.
/// Fractional degrees of freedom (Welch's) are fine.
pub(crate) fn t975(df: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    if !(df >= 1.0) {
        return f64::NAN;
    }
    StudentsT::new(0.0, 1.0, df).map_or(f64::NAN, |t| t.inverse_cdf(0.975))
}

/// A difference in true efficiency smaller than this (percentage points) matters to nobody,
/// whatever its effect size: reports say "no practical difference" below it.
pub(crate) const PRACTICAL_DIFFERENCE_PP: f64 = 2.0;

/// A share as a table cell: percent with one decimal, no sign (`97.3`), `-` for NaN (nothing
/// measured).
pub(crate) fn pct(x: f64) -> String {
    if x.is_nan() { "-".into() } else { format!("{:.1}", x * 100.0) }
}

/// Summarises a sample (NaNs are ignored). An empty sample gives NaNs and n = 0.
pub fn summarize(values: &[f64]) -> Summary {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return Summary {
            n,
            mean: f64::NAN,
            sd: f64::NAN,
            ci95_low: f64::NAN,
            ci95_high: f64::NAN,
            min: f64::NAN,
            median: f64::NAN,
            max: f64::NAN,
        };
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    let sd = if n > 1 { (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt() } else { 0.0 };
    let half = if n > 1 { t975((n - 1) as f64) * sd / (n as f64).sqrt() } else { 0.0 };
    let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    Summary { n, mean, sd, ci95_low: mean - half, ci95_high: mean + half, min: v[0], median, max: v[n - 1] }
}

/// Cohen's d of `b` against `a` (pooled standard deviation); NaN when undefined.
pub fn cohens_d(a: &[f64], b: &[f64]) -> f64 {
    let (sa, sb) = (summarize(a), summarize(b));
    if sa.n < 2 || sb.n < 2 {
        return f64::NAN;
    }
    let pooled =
        (((sa.n - 1) as f64 * sa.sd.powi(2) + (sb.n - 1) as f64 * sb.sd.powi(2)) / (sa.n + sb.n - 2) as f64).sqrt();
    if pooled == 0.0 {
        return if sb.mean == sa.mean { 0.0 } else { f64::INFINITY.copysign(sb.mean - sa.mean) };
    }
    (sb.mean - sa.mean) / pooled
}

/// Percentile (0..=1) of a sample by nearest rank; NaN when empty.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_a_known_sample() {
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.n, 8);
        assert!((s.mean - 5.0).abs() < 1e-12);
        assert!((s.sd - 2.138).abs() < 1e-3);
        // t(7) = 2.365: half width 2.365 * 2.138 / sqrt(8) = 1.788.
        assert!((s.ci95_high - 6.788).abs() < 1e-3, "{s:?}");
        assert_eq!((s.min, s.median, s.max), (2.0, 4.5, 9.0));
    }

    #[test]
    fn the_t_quantile_matches_the_tables() {
        // The tables this replaced: t(1) = 12.706, t(2) = 4.303, t(30) = 2.042; large df -> 1.96.
        for (df, t) in [(1.0, 12.706), (2.0, 4.303), (7.0, 2.365), (30.0, 2.042), (1000.0, 1.962)] {
            assert!((t975(df) - t).abs() < 2e-3, "t({df}) = {}", t975(df));
        }
        assert!(t975(0.5).is_nan());
        // Welch's fractional degrees of freedom lie between their neighbours.
        assert!(t975(2.5) < t975(2.0) && t975(2.5) > t975(3.0));
    }

    #[test]
    fn cohens_d_matches_the_textbook() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [3.0, 4.0, 5.0, 6.0, 7.0];
        assert!((cohens_d(&a, &b) - 1.2649).abs() < 1e-3);
        assert!(cohens_d(&a, &[1.0]).is_nan());
    }
}
