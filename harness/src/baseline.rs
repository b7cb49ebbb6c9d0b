//! Solo baselines measured in rounds, and how sure a saving computed from them is.
//!
//! A round runs every distinct agent of a scenario alone, once. On a noisy server (issue 14)
//! one round is not a baseline: a single slow solo run made a sequential control look parallel.
//! So live mode measures several rounds, interleaved with the concurrent runs (a server that
//! drifts slower during the matrix drifts in the baselines too), takes each agent's median, and
//! says how sure the saving is with a bootstrap over the rounds: resample the rounds (and, for a
//! cell, the runs), recompute the medians and the saving, and keep the middle 80 %.
//!
//! The saving of a run depends only on its wall time and its agents' solo durations:
//! `(sum of solo - wall) / (sum of solo - longest solo)` ([`crate::measure::Efficiency`]). With
//! reference rounds (live mode), the client's saving is measured against what the servers allow
//! instead: `(sum of solo - wall) / (sum of solo - reference wall)`.

use crate::stats::percentile;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;

/// Share of the bootstrap distribution an interval covers: its 10th to 90th percentile.
pub(crate) const INTERVAL_COVERAGE: f64 = 0.80;
/// Bootstrap resamples per interval.
const RESAMPLES: usize = 400;

/// The solo rounds of one cell: each round maps an agent's name to its solo duration, seconds.
/// In live mode each round also runs the scenario once with the reference client (every agent
/// at once, on the harness's plainest correct runtime): its wall time is what the servers allow
/// a client that holds nothing back, the measure a variant's own saving is taken against.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rounds {
    rounds: Vec<BTreeMap<String, f64>>,
    references: Vec<f64>,
}

/// A run as the saving sees it: its wall time and its agents.
#[derive(Debug, Clone)]
pub(crate) struct RunShape {
    /// Wall time, seconds.
    pub wall_s: f64,
    /// The agents' names.
    pub agents: Vec<String>,
}

/// The one-at-a-time time (the sum of the run's agents' solo durations) and an ideal server's
/// (the longest of them); `None` when an agent has no solo duration.
pub(crate) fn sequential_and_ideal(agents: &[String], solo: &BTreeMap<String, f64>) -> Option<(f64, f64)> {
    let mut sum = 0.0;
    let mut max: f64 = 0.0;
    for a in agents {
        let s = solo.get(a).copied().filter(|s| s.is_finite())?;
        sum += s;
        max = max.max(s);
    }
    Some((sum, max))
}

/// The saving of `run` against per-agent solo durations: NaN when an agent has none or there
/// is nothing to save.
pub(crate) fn saving(run: &RunShape, solo: &BTreeMap<String, f64>) -> f64 {
    let Some((sum, max)) = sequential_and_ideal(&run.agents, solo) else { return f64::NAN };
    if sum > max && run.wall_s > 0.0 { (sum - run.wall_s) / (sum - max) } else { f64::NAN }
}

/// The client's share of the saving the servers allow: `run` against the reference client's
/// wall time `reference` ([`sim_ollama::judge::against_allowed`]); without a reference, the
/// saving against an ideal server. NaN when there is nothing to save on these servers.
pub(crate) fn client_saving(run: &RunShape, solo: &BTreeMap<String, f64>, reference: Option<f64>) -> f64 {
    let Some(reference) = reference else { return saving(run, solo) };
    let Some((sum, max)) = sequential_and_ideal(&run.agents, solo) else { return f64::NAN };
    sim_ollama::judge::against_allowed(run.wall_s, reference, sum, max).and_then(|a| a.saving).unwrap_or(f64::NAN)
}

impl Rounds {
    /// No rounds yet.
    pub(crate) fn new() -> Self {
        Rounds::default()
    }

    /// Adds a round (agents whose solo run failed are left out of it).
    pub(crate) fn push(&mut self, round: BTreeMap<String, f64>) {
        if !round.is_empty() {
            self.rounds.push(round);
        }
    }

    /// How many solo rounds are in.
    pub(crate) fn len(&self) -> usize {
        self.rounds.len()
    }

    /// Adds the reference client's wall time of one round, seconds.
    pub(crate) fn push_reference(&mut self, wall_s: f64) {
        if wall_s.is_finite() && wall_s > 0.0 {
            self.references.push(wall_s);
        }
    }

    /// The reference client's median wall time (the lower middle of an even number); `None`
    /// without a reference round (the simulator, or every reference run failed).
    pub(crate) fn reference(&self) -> Option<f64> {
        let m = lower_median(&self.references);
        m.is_finite().then_some(m)
    }

    /// Each agent's solo samples.
    pub(crate) fn samples(&self, agent: &str) -> Vec<f64> {
        self.rounds.iter().filter_map(|r| r.get(agent).copied()).collect()
    }

    /// Each agent's median over the rounds (the lower middle of an even number).
    pub(crate) fn medians(&self) -> BTreeMap<String, f64> {
        median_of(self.rounds.iter())
    }

    /// The 80 % bootstrap interval of a run's saving over the rounds; `None` with fewer than
    /// two rounds (one round says nothing about its own noise).
    pub(crate) fn run_interval(&self, run: &RunShape) -> Option<(f64, f64)> {
        self.cell_interval(std::slice::from_ref(run))
    }

    /// Whether the servers demonstrably allow a saving worth quoting for a run of `agents`
    /// ([`sim_ollama::judge::decision::room_to_save`]): in at least 90 % of bootstrap resamples
    /// of the solo and reference rounds (the lower tail of the 80 % interval), not only in
    /// their medians. Where the rounds' noise leaves it in doubt, a client's share of that room
    /// would be the noise's (a reference round 0.3 s faster turns a client as fast as the others
    /// into "serialized"), so none is quoted. With fewer than two rounds or no reference
    /// round, the medians decide.
    pub(crate) fn room_established(&self, agents: &[String]) -> bool {
        let room = |solo: &BTreeMap<String, f64>, reference: Option<f64>| {
            reference
                .zip(sequential_and_ideal(agents, solo))
                .is_some_and(|(reference, (sum, max))| sim_ollama::judge::decision::room_to_save(reference, sum, max))
        };
        if self.rounds.len() < 2 || self.references.len() < 2 {
            return room(&self.medians(), self.reference());
        }
        let seed = agents
            .iter()
            .flat_map(|a| a.bytes())
            .fold(self.rounds.len() as u64, |h, b| h.rotate_left(8) ^ u64::from(b));
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
        let held = (0..RESAMPLES)
            .filter(|_| {
                let (solo, reference) = self.resample(&mut rng);
                room(&solo, reference)
            })
            .count();
        held as f64 >= RESAMPLES as f64 * (1.0 - (1.0 - INTERVAL_COVERAGE) / 2.0)
    }

    /// The 80 % bootstrap interval of the share of an ideal server's saving the servers allow
    /// a run of `agents` (the reference client's: `(sum of solo - reference) / (sum of solo -
    /// longest solo)`), resampling the solo and reference rounds; `None` with fewer than two of
    /// either (one round says nothing about its own noise). The deployment verdict's band is
    /// only given where this interval stays inside it.
    pub(crate) fn deployment_interval(&self, agents: &[String]) -> Option<(f64, f64)> {
        if self.rounds.len() < 2 || self.references.len() < 2 {
            return None;
        }
        let seed = agents
            .iter()
            .flat_map(|a| a.bytes())
            .fold(self.references.len() as u64, |h, b| h.rotate_left(5) ^ u64::from(b));
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
        let shares: Vec<f64> = (0..RESAMPLES)
            .filter_map(|_| {
                let (solo, reference) = self.resample(&mut rng);
                let (sum, max) = sequential_and_ideal(agents, &solo)?;
                let reference = reference?;
                (sum > max).then(|| (sum - reference) / (sum - max))
            })
            .collect();
        if shares.len() < RESAMPLES / 2 {
            return None;
        }
        let tail = (1.0 - INTERVAL_COVERAGE) / 2.0;
        let (lo, hi) = (percentile(&shares, tail), percentile(&shares, 1.0 - tail));
        (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
    }

    /// One bootstrap resample of the rounds: each agent's median over rounds drawn with
    /// replacement, and the lower median of reference rounds drawn the same way (`None`
    /// without reference rounds).
    fn resample(&self, rng: &mut rand_pcg::Pcg64Mcg) -> (BTreeMap<String, f64>, Option<f64>) {
        let (k, refs) = (self.rounds.len(), self.references.len());
        let picked: Vec<&BTreeMap<String, f64>> = (0..k).map(|_| &self.rounds[rng.random_range(0..k)]).collect();
        let solo = median_of(picked.into_iter());
        // The reference client's rounds are resampled too: its wall time is as noisy as the
        // solo runs.
        let reference = (refs > 0).then(|| {
            let r: Vec<f64> = (0..refs).map(|_| self.references[rng.random_range(0..refs)]).collect();
            lower_median(&r)
        });
        (solo, reference)
    }

    /// The 80 % bootstrap interval of a cell's saving (the median of its runs' savings),
    /// resampling both the rounds and the runs; `None` with fewer than two rounds or no run.
    pub(crate) fn cell_interval(&self, runs: &[RunShape]) -> Option<(f64, f64)> {
        let k = self.rounds.len();
        if k < 2 || runs.is_empty() {
            return None;
        }
        // Seeded by the data, so the same measurements always give the same interval.
        let seed = runs.iter().fold(k as u64, |h, r| h.rotate_left(7) ^ r.wall_s.to_bits());
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
        let mut out = Vec::with_capacity(RESAMPLES);
        for _ in 0..RESAMPLES {
            let (solo, reference) = self.resample(&mut rng);
            let savings: Vec<f64> = (0..runs.len())
                .map(|_| client_saving(&runs[rng.random_range(0..runs.len())], &solo, reference))
                .collect();
            out.push(lower_median(&savings));
        }
        let tail = (1.0 - INTERVAL_COVERAGE) / 2.0;
        let (lo, hi) = (percentile(&out, tail), percentile(&out, 1.0 - tail));
        (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
    }
}

/// The lower middle value (NaN sorts first; NaN when empty).
fn lower_median(v: &[f64]) -> f64 {
    let mut v: Vec<f64> = v.to_vec();
    v.sort_by(|a, b| {
        let key = |x: &f64| if x.is_nan() { f64::NEG_INFINITY } else { *x };
        key(a).total_cmp(&key(b))
    });
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(f64::NAN)
}

fn median_of<'a>(rounds: impl Iterator<Item = &'a BTreeMap<String, f64>>) -> BTreeMap<String, f64> {
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in rounds {
        for (a, d) in r {
            by.entry(a.clone()).or_default().push(*d);
        }
    }
    by.into_iter().map(|(a, v)| (a, lower_median(&v))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(a: f64, b: f64) -> BTreeMap<String, f64> {
        [("a".to_string(), a), ("b".to_string(), b)].into_iter().collect()
    }

    /// Rounds of two agents of 1 s each, with these reference walls.
    fn rounds(refs: &[f64]) -> Rounds {
        let mut r = Rounds::new();
        for w in refs {
            r.push(round(1.0, 1.0));
            r.push_reference(*w);
        }
        r
    }

    fn run(wall: f64) -> RunShape {
        RunShape { wall_s: wall, agents: vec!["a".into(), "b".into()] }
    }

    #[test]
    fn the_saving_is_one_when_together_take_the_longest_alone() {
        assert!((saving(&run(1.0), &round(1.0, 1.0)) - 1.0).abs() < 1e-12);
        assert!(saving(&run(2.0), &round(1.0, 1.0)).abs() < 1e-12);
        assert!(saving(&run(1.0), &round(1.0, f64::NAN)).is_nan());
    }

    #[test]
    fn a_room_the_reference_rounds_leave_in_doubt_is_not_established() {
        // One at a time 2 s, an ideal server 1 s. Reference rounds between 1.2 and 1.25 s: the
        // servers allow a saving beyond doubt. Rounds of 1.6 s and 2 s: their lower median
        // (1.62 s) allows one, but resampled rounds often show none.
        let agents = vec!["a".to_string(), "b".to_string()];
        assert!(rounds(&[1.2, 1.25, 1.22, 1.21]).room_established(&agents));
        let noisy = rounds(&[1.6, 2.05, 1.95, 1.62]);
        assert_eq!(noisy.reference(), Some(1.62));
        assert!(!noisy.room_established(&agents));
        // No room at all, whatever the noise.
        assert!(!rounds(&[2.0, 2.0, 2.0]).room_established(&agents));
        // One round: its figures decide.
        assert!(rounds(&[1.6]).room_established(&agents));
    }

    #[test]
    fn the_deployments_share_is_as_sure_as_its_rounds() {
        // One at a time 2 s, an ideal server 1 s: reference rounds of 1.5 s allow half of
        // the ideal saving; steady rounds keep the interval around it, rounds of 1.5-1.95 s
        // reach from 5 % to 50 %.
        let agents = vec!["a".to_string(), "b".to_string()];
        let (lo, hi) = rounds(&[1.5, 1.51, 1.49, 1.5]).deployment_interval(&agents).expect("four rounds");
        assert!(lo >= 0.48 && hi <= 0.52, "{lo} {hi}");
        let (lo, hi) = rounds(&[1.5, 1.95, 1.6, 1.9]).deployment_interval(&agents).expect("four rounds");
        assert!(lo <= 0.15 && hi >= 0.4, "{lo} {hi}");
        assert_eq!(rounds(&[1.5]).deployment_interval(&agents), None, "one round says nothing of its noise");
    }

    #[test]
    fn the_client_saving_is_taken_against_the_reference_client() {
        // One at a time 2 s, reference 1.5 s: a run of 1.5 s saved all the servers allow, a
        // run of 2 s none; without a reference the ideal (1 s) is the measure.
        let solo = round(1.0, 1.0);
        assert!((client_saving(&run(1.5), &solo, Some(1.5)) - 1.0).abs() < 1e-12);
        assert!(client_saving(&run(2.0), &solo, Some(1.5)).abs() < 1e-12);
        assert!((client_saving(&run(1.5), &solo, None) - 0.5).abs() < 1e-12);
        // Servers that allow nothing: no saving to measure (the overlap decides).
        assert!(client_saving(&run(2.0), &solo, Some(2.0)).is_nan());
        let mut r = Rounds::new();
        for w in [1.6, 1.4, 1.5] {
            r.push_reference(w);
        }
        assert_eq!(r.reference(), Some(1.5));
    }

    #[test]
    fn medians_resist_one_slow_round() {
        let mut r = Rounds::new();
        for x in [1.0, 1.1, 0.9, 5.0, 1.0] {
            r.push(round(x, x));
        }
        assert_eq!(r.medians()["a"], 1.0);
    }

    #[test]
    fn the_interval_widens_with_noisy_rounds_and_needs_two() {
        let mut one = Rounds::new();
        one.push(round(1.0, 1.0));
        assert_eq!(one.run_interval(&run(1.05)), None);
        let mut quiet = Rounds::new();
        let mut noisy = Rounds::new();
        for (i, x) in [1.0, 1.02, 0.98, 1.01, 0.99, 1.0].iter().enumerate() {
            quiet.push(round(*x, *x));
            let n = if i % 2 == 0 { x * 0.7 } else { x * 1.3 };
            noisy.push(round(n, n));
        }
        let (ql, qh) = quiet.run_interval(&run(1.05)).unwrap();
        let (nl, nh) = noisy.run_interval(&run(1.05)).unwrap();
        assert!(ql <= 0.95 && 0.95 <= qh && qh - ql < 0.1, "quiet {ql}..{qh}");
        assert!(nh - nl > 0.4, "noisy {nl}..{nh}");
        assert_eq!(noisy.run_interval(&run(1.05)), Some((nl, nh)), "seeded by the data: the same interval");
    }
}
