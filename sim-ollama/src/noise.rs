//! Noise on purpose: what a real server on a busy machine adds to a model's own latencies, so
//! that the harness's live mode can be tested against servers as noisy as real ones (issue 14).
//!
//! The simulator is otherwise deterministic per request: the same request gets the same
//! schedule every time, so a solo run and a concurrent run of one agent cost exactly the same
//! work. A real server does not: two CPU servers on one laptop vary by tens of percent from one
//! call to the next, now and then a call stalls behind another process, and a stream on one
//! server slows the other server's streams (they share cores, caches and memory bandwidth).
//! Three seeded effects model that, each off by default:
//! - **jitter**: every request's work (overhead, prompt evaluation and every token gap) is
//!   multiplied by a factor drawn from a log-normal distribution of mean 1 (`jitter_cv`);
//! - **hiccups**: with probability `slow_probability` a request runs `slow_factor` times
//!   slower (another process had the CPU);
//! - **contention**: a request that starts while `k` streams decode on *other* devices runs
//!   `1 + contention * k` times slower. Instances on one device already share it through
//!   [`crate::device`]; this is the CPU-like coupling of devices that are not independent.
//!
//! The factor is drawn per request from the master seed and the request's trace id, so it
//! varies from run to run within one process (a solo run and the concurrent run that follows
//! get different factors, as on a real server) and the whole process is reproducible for a
//! given seed and request order. The noisy work is the request's work: the trace's modelled
//! solo cost includes it.

use crate::dist::{DistKind, DistSpec};
use crate::seed::SeedBuilder;
use rand::RngExt;
use serde::{Deserialize, Serialize};

/// The noise a server adds (see the module documentation). All zero: no noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NoiseSpec {
    /// Coefficient of variation of the per-request speed factor (log-normal, mean 1).
    pub jitter_cv: f64,
    /// Probability that a request hits a hiccup.
    pub slow_probability: f64,
    /// How many times slower a request that hits a hiccup runs.
    pub slow_factor: f64,
    /// Slowdown per stream decoding on another device when the request starts.
    pub contention: f64,
}

impl Default for NoiseSpec {
    fn default() -> Self {
        NoiseSpec { jitter_cv: 0.0, slow_probability: 0.0, slow_factor: 3.0, contention: 0.0 }
    }
}

impl NoiseSpec {
    /// Parses the command line's form: `jitter=0.3,slow=0.05,slow_factor=3,contention=0.2`
    /// (any subset; `slow` is the hiccup probability).
    pub fn parse(text: &str) -> Result<NoiseSpec, String> {
        let mut n = NoiseSpec::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| format!("noise: expected key=value, got {part:?}"))?;
            let x: f64 = v.trim().parse().map_err(|_| format!("noise: {k}: not a number: {v:?}"))?;
            match k.trim() {
                "jitter" | "jitter_cv" => n.jitter_cv = x,
                "slow" | "slow_probability" => n.slow_probability = x,
                "slow_factor" => n.slow_factor = x,
                "contention" => n.contention = x,
                other => {
                    return Err(format!("noise: unknown key {other:?}; keys: jitter, slow, slow_factor, contention"));
                }
            }
        }
        n.validate()?;
        Ok(n)
    }

    /// Checks the values, naming the bad one.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let check = |name: &str, x: f64, lo: f64, hi: f64| {
            if x.is_finite() && (lo..=hi).contains(&x) {
                Ok(())
            } else {
                Err(format!("noise.{name} must be a number from {lo} to {hi}, got {x}"))
            }
        };
        check("jitter_cv", self.jitter_cv, 0.0, 10.0)?;
        check("slow_probability", self.slow_probability, 0.0, 1.0)?;
        check("slow_factor", self.slow_factor, 1.0, 1000.0)?;
        check("contention", self.contention, 0.0, 100.0)
    }

    /// Whether any effect is on.
    pub(crate) fn is_active(&self) -> bool {
        self.jitter_cv > 0.0 || self.slow_probability > 0.0 || self.contention > 0.0
    }

    /// The factor a request's work is multiplied by: request `id` of a server seeded `seed`,
    /// starting while `others` streams decode on other devices.
    pub(crate) fn factor(&self, seed: u64, id: u64, others: usize) -> f64 {
        let mut rng = SeedBuilder::new(seed).str("noise").u64(id).rng();
        let mut f = 1.0;
        if self.jitter_cv > 0.0 {
            let jitter = DistSpec { dist: DistKind::Lognormal, mean: 1.0, cv: self.jitter_cv, min: None, max: None };
            f *= jitter.sampler().sample(&mut rng);
        }
        if self.slow_probability > 0.0 && rng.random_bool(self.slow_probability) {
            f *= self.slow_factor;
        }
        f * (1.0 + self.contention * others as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_noise_is_a_factor_of_one() {
        let n = NoiseSpec::default();
        assert!(!n.is_active());
        assert_eq!(n.factor(1, 2, 5), 1.0);
    }

    #[test]
    fn jitter_varies_per_request_with_mean_one_and_is_seeded() {
        let n = NoiseSpec::parse("jitter=0.3").unwrap();
        let f: Vec<f64> = (0..4000).map(|i| n.factor(7, i, 0)).collect();
        let mean = f.iter().sum::<f64>() / f.len() as f64;
        let sd = (f.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / f.len() as f64).sqrt();
        assert!((mean - 1.0).abs() < 0.03, "mean {mean}");
        assert!((sd / mean - 0.3).abs() < 0.03, "cv {}", sd / mean);
        assert_eq!(n.factor(7, 3, 0), f[3], "the same seed and request: the same factor");
        assert_ne!(n.factor(8, 3, 0), f[3], "another seed: another factor");
    }

    #[test]
    fn hiccups_hit_their_share_of_requests_and_contention_adds_per_stream() {
        let n = NoiseSpec::parse("slow=0.25, slow_factor=4").unwrap();
        let hit = (0..4000).filter(|i| n.factor(1, *i, 0) == 4.0).count();
        assert!((900..1100).contains(&hit), "{hit} of 4000");
        let c = NoiseSpec::parse("contention=0.5").unwrap();
        assert_eq!(c.factor(1, 1, 0), 1.0);
        assert_eq!(c.factor(1, 1, 2), 2.0);
    }

    #[test]
    fn bad_specs_are_named() {
        for (spec, word) in [
            ("jitter", "key=value"),
            ("jitter=x", "not a number"),
            ("loud=1", "unknown key"),
            ("slow=2", "slow_probability"),
            ("slow_factor=0.5", "slow_factor"),
            ("jitter=nan", "jitter_cv"),
        ] {
            let e = NoiseSpec::parse(spec).unwrap_err();
            assert!(e.contains(word), "{spec}: {e}");
        }
    }
}
