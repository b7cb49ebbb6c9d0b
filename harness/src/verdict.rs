//! Verdicts: parallel, degraded or serialized, with the reason in a sentence built from the
//! client's timings and, on the embedded simulator, the server's trace.
//!
//! Verdicts use the share of the possible saving a run achieved,
//! `(sum of solo - wall) / (sum of solo - longest solo)`: 1.0 when the agents together take
//! no longer than the longest one alone, 0.0 when they take as long as one after the other.
//! **parallel** at 0.80 or more (two equal agents: a true efficiency of 83 %);
//! **serialized** at 0.15 or less (two equal agents: 54 %, a speedup of 1.08x), including
//! runs slower than sequential, and, on the simulator, whenever the server never decoded two
//! streams at once; **degraded** in between. Unlike the true efficiency, the
//! saving is 1.0 for a perfect run of agents of unequal length.

use crate::measure::{Efficiency, ServerEvidence};
use crate::runtime::AgentRecord;
use serde::{Deserialize, Serialize};

/// The verdict of a run or a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Agents ran concurrently at (nearly) full speed.
    Parallel,
    /// Concurrency helped, but much less than it should.
    Degraded,
    /// No real gain from running together.
    Serialized,
    /// Every agent failed: nothing to judge.
    Failed,
}

impl Verdict {
    /// The word.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Parallel => "parallel",
            Verdict::Degraded => "degraded",
            Verdict::Serialized => "serialized",
            Verdict::Failed => "failed",
        }
    }
}

impl std::str::FromStr for Verdict {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "parallel" => Ok(Verdict::Parallel),
            "degraded" => Ok(Verdict::Degraded),
            "serialized" => Ok(Verdict::Serialized),
            "failed" => Ok(Verdict::Failed),
            other => Err(format!("{other:?} is not a verdict: parallel, degraded, serialized")),
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A saving at or above this is parallel.
pub const PARALLEL_MIN_SAVING: f64 = 0.80;
/// A saving at or below this is serialized.
pub const SERIALIZED_MAX_SAVING: f64 = 0.15;

/// The verdict of efficiencies alone.
pub fn classify(e: &Efficiency) -> Verdict {
    if e.saving.is_nan() {
        // One agent (or none): there is no saving to achieve; judge the efficiency alone.
        if e.efficiency_true.is_nan() {
            Verdict::Failed
        } else if e.efficiency_true >= PARALLEL_MIN_SAVING {
            Verdict::Parallel
        } else {
            Verdict::Degraded
        }
    } else if e.saving >= PARALLEL_MIN_SAVING {
        Verdict::Parallel
    } else if e.saving <= SERIALIZED_MAX_SAVING {
        Verdict::Serialized
    } else {
        Verdict::Degraded
    }
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// Judges a run: the verdict and the reason in words.
pub fn judge(e: &Efficiency, agents: &[AgentRecord], server: Option<&ServerEvidence>) -> (Verdict, String) {
    let failed: Vec<&AgentRecord> = agents.iter().filter(|a| a.calls.iter().any(|c| c.error.is_some())).collect();
    if !agents.is_empty() && failed.len() == agents.len() {
        let err = failed[0].calls.iter().find_map(|c| c.error.clone()).unwrap_or_default();
        return (Verdict::Failed, format!("every agent failed; {}: {err}", failed[0].name));
    }
    let mut v = classify(e);
    // A server-side criterion, immune to timing noise: when the server never decoded two of
    // the run's streams at the same time, the run was serialized, whatever short runs' solo
    // baselines make the efficiency read.
    if server.is_some_and(|s| s.requests > 1 && s.max_decoding <= 1) {
        v = Verdict::Serialized;
    }
    let n = agents.len();
    let effs = format!(
        "true efficiency {} (apparent {}), speedup {:.2}x",
        pct(e.efficiency_true),
        pct(e.efficiency_apparent),
        e.speedup
    );
    let mut reason = if v == Verdict::Parallel {
        format!("{n} agents overlapped: {effs}")
    } else {
        match server {
            Some(s) => server_reason(s, agents, &effs),
            None => client_reason(agents, &effs),
        }
    };
    if !failed.is_empty() {
        let err = failed[0].calls.iter().find_map(|c| c.error.clone()).unwrap_or_default();
        reason.push_str(&format!("; {} of {n} agents failed ({}: {err})", failed.len(), failed[0].name));
    }
    (v, reason)
}

fn order(agents: &[AgentRecord]) -> (String, String) {
    let mut by_start: Vec<&AgentRecord> = agents.iter().collect();
    by_start.sort_by_key(|a| a.start);
    let first = by_start.first().map_or("A".to_string(), |a| a.name.clone());
    let second = by_start.get(1).map_or("B".to_string(), |a| a.name.clone());
    (first, second)
}

fn server_reason(s: &ServerEvidence, agents: &[AgentRecord], effs: &str) -> String {
    let (a, b) = order(agents);
    // 1. The requests never met on the server: the client held them back, either before
    //    calling (locks, permits, awaiting in turn, a blocked executor) or inside the HTTP
    //    client (the calls were made together but queued for a connection).
    if s.requests > 1 && s.max_concurrency <= 1 && s.arrived_after_previous_ended > 0 {
        if calls_overlap(agents) {
            return format!(
                "the agents called together but their requests reached the server one at a time over {} connection{}: serialized by the HTTP client's connection pool ({effs})",
                s.connections,
                if s.connections == 1 { "" } else { "s" }
            );
        }
        return format!(
            "agent {b}'s request reached the server only after agent {a}'s finished: serialized in the client ({effs})"
        );
    }
    // 2. They met, but waited for a slot.
    let busiest = agents.iter().map(|x| x.end.saturating_duration_since(x.start).as_secs_f64()).fold(0.0, f64::max);
    if s.slot_wait_s > 0.2 * busiest.max(1e-9) {
        let slots: Vec<String> = s
            .slots
            .iter()
            .map(|(i, n)| format!("instance {i} has {n} slot{}", if *n == 1 { "" } else { "s" }))
            .collect();
        return format!(
            "{}: requests waited {:.2} s in total for a parallel slot: serialized by the server ({effs})",
            slots.join(", "),
            s.slot_wait_s
        );
    }
    // 3. They decoded together, but slowly: a shared device.
    if s.max_decoding > 1 && s.mean_speed < 0.75 {
        let dev = if s.shared_devices.is_empty() {
            "batched on one instance".to_string()
        } else {
            format!(
                "on one device (device {})",
                s.shared_devices.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
            )
        };
        return format!("streams overlapped {dev} at {} of solo speed: no real speedup ({effs})", pct(s.mean_speed));
    }
    // 4. The server sent on time; the agents read late.
    if s.client_lag_p50_ms > 0.25 * s.request_p50_ms.max(1e-9) {
        return format!(
            "the server streamed on schedule but tokens reached the agents {:.0} ms late (median; p90 {:.0} ms): the client did not keep up, its executor was blocked ({effs})",
            s.client_lag_p50_ms, s.client_lag_p90_ms
        );
    }
    if s.max_concurrency <= 1 {
        return format!("the server never held two requests at once: serialized in the client ({effs})");
    }
    format!(
        "requests overlapped on the server at {} of solo speed; the rest of the loss is in the client ({effs})",
        pct(s.mean_speed)
    )
}

/// Whether calls of different agents were in flight together, as the client saw them (from
/// the moment the call was made to its last byte).
fn calls_overlap(agents: &[AgentRecord]) -> bool {
    let mut iv: Vec<(std::time::Instant, std::time::Instant, &str)> =
        agents.iter().flat_map(|a| a.calls.iter().map(move |c| (c.sent, c.end, a.name.as_str()))).collect();
    iv.sort_by_key(|x| x.0);
    let mut latest: Option<(std::time::Instant, &str)> = None;
    for (start, end, who) in iv {
        if let Some((e, w)) = latest {
            if start < e && w != who {
                return true;
            }
        }
        if latest.is_none_or(|(e, _)| end > e) {
            latest = Some((end, who));
        }
    }
    false
}

fn client_reason(agents: &[AgentRecord], effs: &str) -> String {
    // Live mode: no server trace; judge from the calls' intervals.
    let (a, b) = order(agents);
    if !calls_overlap(agents) {
        format!(
            "agent {b}'s call started only after agent {a}'s finished: serialized in the client ({effs}; no server trace in live mode)"
        )
    } else {
        format!(
            "calls overlapped but each took longer than alone: shared server slots or devices (no server trace in live mode to tell which) ({effs})"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saving(x: f64) -> Efficiency {
        Efficiency { wall_s: 1.0, efficiency_true: 0.5, efficiency_apparent: 0.9, speedup: 1.0, saving: x }
    }

    #[test]
    fn thresholds_split_the_three_verdicts() {
        assert_eq!(classify(&saving(0.99)), Verdict::Parallel);
        assert_eq!(classify(&saving(0.80)), Verdict::Parallel);
        assert_eq!(classify(&saving(0.50)), Verdict::Degraded);
        assert_eq!(classify(&saving(0.15)), Verdict::Serialized);
        assert_eq!(classify(&saving(-0.3)), Verdict::Serialized);
        assert_eq!(classify(&saving(f64::NAN)), Verdict::Degraded, "one agent at 50 % of its solo speed");
        let none = Efficiency { efficiency_true: f64::NAN, ..saving(f64::NAN) };
        assert_eq!(classify(&none), Verdict::Failed);
    }

    #[test]
    fn a_perfect_run_of_unequal_agents_saves_everything_it_could() {
        use crate::measure::efficiency;
        let t0 = std::time::Instant::now();
        let rec = |name: &str, secs: f64| crate::runtime::AgentRecord {
            name: name.into(),
            instance: 0,
            start: t0,
            end: t0 + std::time::Duration::from_secs_f64(secs),
            calls: Vec::new(),
        };
        let solo = [("a".to_string(), 0.39), ("b".to_string(), 0.64)].into_iter().collect();
        let (e, _) = efficiency(&[rec("a", 0.39), rec("b", 0.64)], &solo);
        assert!((e.saving - 1.0).abs() < 1e-9, "{e:?}");
        assert!((e.efficiency_true - 1.03 / 1.28).abs() < 1e-9, "the true efficiency of this perfect run is 80 %");
        assert_eq!(classify(&e), Verdict::Parallel);
    }
}
