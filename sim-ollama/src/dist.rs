//! Seeded distributions for every modelled quantity (load time, inter-token gap, output
//! length), described in TOML as `{ dist = "...", mean = ..., cv = ..., min = ..., max = ... }`.
//!
//! One parameterisation for every kind keeps profiles readable: `mean` and the coefficient of
//! variation `cv` (standard deviation / mean). The shapes come from `rand_distr`.

use rand::Rng;
use rand_distr::{Distribution, Gamma, LogNormal, Normal};
use serde::{Deserialize, Serialize};

/// The shape of a distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DistKind {
    /// Always `mean`.
    Constant,
    /// Normal (Gaussian), clamped to `[min, max]`.
    Normal,
    /// Log-normal with the given mean and cv (right-skewed, positive).
    Lognormal,
    /// Gamma with the given mean and cv (positive).
    Gamma,
}

/// A distribution as written in a profile: `{ dist = "lognormal", mean = 8.7, cv = 0.05 }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistSpec {
    /// Shape of the distribution.
    pub dist: DistKind,
    /// Mean value (in the unit of the field that holds the spec).
    pub mean: f64,
    /// Coefficient of variation: standard deviation divided by the mean. Ignored by `constant`.
    #[serde(default)]
    pub cv: f64,
    /// Smallest value a sample may take (samples are clamped).
    #[serde(default)]
    pub min: Option<f64>,
    /// Largest value a sample may take (samples are clamped).
    #[serde(default)]
    pub max: Option<f64>,
}

impl DistSpec {
    /// A constant.
    pub fn constant(value: f64) -> Self {
        DistSpec { dist: DistKind::Constant, mean: value, cv: 0.0, min: None, max: None }
    }

    /// Checks the parameters, naming the field in the error.
    pub(crate) fn validate(&self, field: &str) -> Result<(), String> {
        if !self.mean.is_finite() || self.mean < 0.0 {
            return Err(format!("{field}: mean must be a finite number >= 0, got {}", self.mean));
        }
        if !self.cv.is_finite() || self.cv < 0.0 {
            return Err(format!("{field}: cv must be a finite number >= 0, got {}", self.cv));
        }
        if let (Some(lo), Some(hi)) = (self.min, self.max) {
            if lo > hi {
                return Err(format!("{field}: min ({lo}) is greater than max ({hi})"));
            }
        }
        Ok(())
    }

    /// Builds a sampler. Invalid parameters were rejected by [`DistSpec::validate`].
    pub(crate) fn sampler(&self) -> Sampler {
        let (mean, cv) = (self.mean, self.cv);
        let inner = if mean == 0.0 || cv == 0.0 || self.dist == DistKind::Constant {
            Inner::Constant(mean)
        } else {
            match self.dist {
                DistKind::Constant => Inner::Constant(mean),
                DistKind::Normal => Normal::new(mean, cv * mean).map(Inner::Normal).unwrap_or(Inner::Constant(mean)),
                DistKind::Lognormal => {
                    let sigma2 = (1.0 + cv * cv).ln();
                    LogNormal::new(mean.ln() - sigma2 / 2.0, sigma2.sqrt())
                        .map(Inner::LogNormal)
                        .unwrap_or(Inner::Constant(mean))
                }
                DistKind::Gamma => {
                    let shape = 1.0 / (cv * cv);
                    Gamma::new(shape, mean / shape).map(Inner::Gamma).unwrap_or(Inner::Constant(mean))
                }
            }
        };
        Sampler { inner, min: self.min.unwrap_or(0.0), max: self.max.unwrap_or(f64::INFINITY) }
    }
}

/// A ready-to-sample distribution.
#[derive(Debug, Clone)]
pub(crate) struct Sampler {
    inner: Inner,
    min: f64,
    max: f64,
}

#[derive(Debug, Clone)]
enum Inner {
    /// Values recorded from a real server, drawn uniformly (a bootstrap).
    Empirical(std::sync::Arc<Vec<f64>>),
    Constant(f64),
    Normal(Normal<f64>),
    LogNormal(LogNormal<f64>),
    Gamma(Gamma<f64>),
}

impl Sampler {
    /// A sampler drawing uniformly from recorded values, each multiplied by `scale`.
    pub(crate) fn empirical(values: &[f64], scale: f64) -> Sampler {
        let v: Vec<f64> = values.iter().map(|x| x * scale).filter(|x| x.is_finite() && *x >= 0.0).collect();
        if v.is_empty() {
            return Sampler { inner: Inner::Constant(0.0), min: 0.0, max: f64::INFINITY };
        }
        Sampler { inner: Inner::Empirical(std::sync::Arc::new(v)), min: 0.0, max: f64::INFINITY }
    }

    /// Draws one value, clamped to `[min, max]` (and never negative).
    pub(crate) fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let x = match &self.inner {
            Inner::Empirical(v) => v[rand::RngExt::random_range(rng, 0..v.len())],
            Inner::Constant(v) => *v,
            Inner::Normal(d) => d.sample(rng),
            Inner::LogNormal(d) => d.sample(rng),
            Inner::Gamma(d) => d.sample(rng),
        };
        x.clamp(self.min, self.max).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn mean_and_cv(spec: &DistSpec) -> (f64, f64) {
        let s = spec.sampler();
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let xs: Vec<f64> = (0..20_000).map(|_| s.sample(&mut rng)).collect();
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
        (m, var.sqrt() / m)
    }

    #[test]
    fn every_kind_has_the_requested_mean_and_cv() {
        for dist in [DistKind::Normal, DistKind::Lognormal, DistKind::Gamma] {
            let spec = DistSpec { dist, mean: 8.7, cv: 0.2, min: None, max: None };
            let (m, cv) = mean_and_cv(&spec);
            // 20k samples: the standard error of the mean is 0.2*8.7/141 = 0.012.
            assert!((m - 8.7).abs() < 0.08, "{dist:?}: mean {m}");
            assert!((cv - 0.2).abs() < 0.02, "{dist:?}: cv {cv}");
        }
    }

    #[test]
    fn samples_are_clamped_to_min_and_max() {
        let spec = DistSpec { dist: DistKind::Normal, mean: 100.0, cv: 1.0, min: Some(50.0), max: Some(120.0) };
        let s = spec.sampler();
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        for _ in 0..1000 {
            let x = s.sample(&mut rng);
            assert!((50.0..=120.0).contains(&x), "{x}");
        }
    }

    #[test]
    fn validate_rejects_negative_and_inverted_bounds() {
        assert!(DistSpec { dist: DistKind::Gamma, mean: -1.0, cv: 0.1, min: None, max: None }.validate("x").is_err());
        assert!(
            DistSpec { dist: DistKind::Gamma, mean: 1.0, cv: 0.1, min: Some(3.0), max: Some(2.0) }
                .validate("x")
                .is_err()
        );
        assert!(DistSpec::constant(3.0).validate("x").is_ok());
    }
}
