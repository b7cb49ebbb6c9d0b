//! Measurement: per-call client timings, per-run efficiencies, and the server-side evidence
//! read from the simulator's trace.

use crate::client::CallRecord;
use crate::runtime::AgentRecord;
use crate::stats::percentile;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Client-side metrics of one call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CallMetrics {
    /// Agent.
    pub agent: String,
    /// Instance.
    pub instance: usize,
    /// Call index within the agent.
    pub call: usize,
    /// Time to first token, ms.
    pub ttft_ms: Option<f64>,
    /// Inter-token latency percentiles, ms.
    pub itl_p50_ms: Option<f64>,
    /// 95th percentile.
    pub itl_p95_ms: Option<f64>,
    /// 99th percentile.
    pub itl_p99_ms: Option<f64>,
    /// Tokens received.
    pub tokens: usize,
    /// Tokens per second from the first to the last token (client-side).
    pub tok_per_s: Option<f64>,
    /// Whole call, ms.
    pub duration_ms: f64,
    /// What went wrong, if anything.
    pub error: Option<String>,
}

fn ms(a: Instant, b: Instant) -> f64 {
    b.saturating_duration_since(a).as_secs_f64() * 1e3
}

impl CallMetrics {
    /// Metrics of one call record.
    pub fn of(agent: &str, instance: usize, call: usize, r: &CallRecord) -> Self {
        let gaps: Vec<f64> = r.tokens.windows(2).map(|w| ms(w[0], w[1])).collect();
        let opt = |v: f64| (!v.is_nan()).then_some(v);
        let span = match (r.tokens.first(), r.tokens.last()) {
            (Some(a), Some(b)) if r.tokens.len() > 1 && b > a => {
                Some((r.tokens.len() - 1) as f64 / (*b - *a).as_secs_f64())
            }
            _ => None,
        };
        CallMetrics {
            agent: agent.to_string(),
            instance,
            call,
            ttft_ms: r.tokens.first().map(|t| ms(r.sent, *t)),
            itl_p50_ms: opt(percentile(&gaps, 0.5)),
            itl_p95_ms: opt(percentile(&gaps, 0.95)),
            itl_p99_ms: opt(percentile(&gaps, 0.99)),
            tokens: r.tokens.len(),
            tok_per_s: span,
            duration_ms: ms(r.sent, r.end),
            error: r.error.clone(),
        }
    }
}

/// An agent's durations in a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentTimes {
    /// Agent.
    pub name: String,
    /// Its duration alone (the solo baseline), seconds.
    pub solo_s: f64,
    /// Its duration in the concurrent run, seconds.
    pub concurrent_s: f64,
}

/// Efficiencies of a concurrent run against the solo baselines.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Efficiency {
    /// Wall time of the concurrent run (first start to last end), seconds.
    pub wall_s: f64,
    /// Sum of solo durations / (agents x wall): 1.0 = perfectly parallel, 1/agents = serial.
    pub efficiency_true: f64,
    /// The study's formula: sum of the agents' durations *in the concurrent run* / (agents x
    /// wall). Stays high when contention stretches every agent.
    pub efficiency_apparent: f64,
    /// Sum of solo durations / wall.
    pub speedup: f64,
    /// Share of the possible saving achieved: (sum of solo - wall) / (sum of solo - longest
    /// solo). 1.0 = as fast as the longest agent alone (ideal), 0.0 = no faster than one
    /// after the other, negative = slower than that. Unlike the true efficiency it is 1.0 for a
    /// perfect run of unequal agents, so verdicts use it.
    pub saving: f64,
}

/// Computes the efficiencies. `solo` holds each agent's solo duration, by name.
pub fn efficiency(agents: &[AgentRecord], solo: &BTreeMap<String, f64>) -> (Efficiency, Vec<AgentTimes>) {
    let start = agents.iter().map(|a| a.start).min();
    let end = agents.iter().map(|a| a.end).max();
    let wall = match (start, end) {
        (Some(s), Some(e)) => e.saturating_duration_since(s).as_secs_f64(),
        _ => 0.0,
    };
    let n = agents.len().max(1) as f64;
    let times: Vec<AgentTimes> = agents
        .iter()
        .map(|a| AgentTimes {
            name: a.name.clone(),
            solo_s: solo.get(&a.name).copied().unwrap_or(f64::NAN),
            concurrent_s: a.end.saturating_duration_since(a.start).as_secs_f64(),
        })
        .collect();
    let solo_sum: f64 = times.iter().map(|t| t.solo_s).sum();
    let solo_max: f64 = times.iter().map(|t| t.solo_s).fold(0.0, f64::max);
    let conc_sum: f64 = times.iter().map(|t| t.concurrent_s).sum();
    let e = if wall > 0.0 {
        Efficiency {
            wall_s: wall,
            efficiency_true: solo_sum / (n * wall),
            efficiency_apparent: conc_sum / (n * wall),
            speedup: solo_sum / wall,
            saving: if solo_sum > solo_max { (solo_sum - wall) / (solo_sum - solo_max) } else { f64::NAN },
        }
    } else {
        Efficiency {
            wall_s: wall,
            efficiency_true: f64::NAN,
            efficiency_apparent: f64::NAN,
            speedup: f64::NAN,
            saving: f64::NAN,
        }
    };
    (e, times)
}

/// What the server saw during a run (embedded simulator only).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerEvidence {
    /// Requests in the run.
    pub requests: usize,
    /// Most requests the server held at once (received, not yet ended).
    pub max_concurrency: usize,
    /// Most requests decoding at once (between first token and end).
    pub max_decoding: usize,
    /// Fraction of the server-busy time with two or more requests decoding.
    pub decode_overlap: f64,
    /// Requests that arrived only after every earlier request had ended.
    pub arrived_after_previous_ended: usize,
    /// Seconds spent waiting for a parallel slot, summed over requests.
    pub slot_wait_s: f64,
    /// Slots of the instances used (`num_parallel`), by instance.
    pub slots: BTreeMap<usize, usize>,
    /// Mean decode speed as a fraction of solo, over requests (token-weighted).
    pub mean_speed: f64,
    /// Devices on which requests from different instances decoded together.
    pub shared_devices: Vec<usize>,
    /// Distinct client connections the requests came over.
    pub connections: usize,
    /// Median delay between the server emitting a token and the agent receiving it, ms.
    pub client_lag_p50_ms: f64,
    /// 90th percentile of that delay, ms.
    pub client_lag_p90_ms: f64,
    /// Median duration of a request on the server, ms (for scale).
    pub request_p50_ms: f64,
}

/// Reads the evidence from a trace taken after a run (the trace was cleared before it).
/// `origin` maps the trace's microseconds to instants; `agents` are the client's records, to
/// match client token arrivals with server emissions.
pub fn server_evidence(
    trace: &sim_ollama::TraceSnapshot,
    origin: Instant,
    slots: BTreeMap<usize, usize>,
    agents: &[AgentRecord],
) -> ServerEvidence {
    let reqs: Vec<&sim_ollama::RequestTrace> =
        trace.requests.iter().filter(|r| r.endpoint == "/api/generate" || r.endpoint == "/api/chat").collect();
    // Sweep lines over [received, end) and [first token, end).
    let sweep = |iv: Vec<(u64, u64)>| -> (usize, f64) {
        let mut ev: Vec<(u64, i32)> = iv.iter().flat_map(|(a, b)| [(*a, 1), (*b, -1)]).collect();
        ev.sort();
        let (mut cur, mut max, mut last, mut busy, mut multi) = (0i32, 0i32, 0u64, 0u64, 0u64);
        for (t, d) in ev {
            if cur >= 1 {
                busy += t - last;
            }
            if cur >= 2 {
                multi += t - last;
            }
            cur += d;
            max = max.max(cur);
            last = t;
        }
        (max.max(0) as usize, if busy > 0 { multi as f64 / busy as f64 } else { 0.0 })
    };
    let held: Vec<(u64, u64)> = reqs.iter().filter_map(|r| Some((r.received_us, r.end_us?))).collect();
    let decoding: Vec<(u64, u64)> = reqs.iter().filter_map(|r| Some((r.first_token_us?, r.end_us?))).collect();
    let (max_concurrency, _) = sweep(held.clone());
    let (max_decoding, decode_overlap) = sweep(decoding);
    let mut arrived_after = 0;
    for r in &reqs {
        let earlier: Vec<_> = reqs.iter().filter(|o| o.id < r.id).collect();
        if !earlier.is_empty() && earlier.iter().all(|o| o.end_us.is_some_and(|e| e <= r.received_us)) {
            arrived_after += 1;
        }
    }
    let slot_wait_us: u64 = reqs
        .iter()
        .flat_map(|r| r.waits.iter())
        .filter(|w| w.reason == sim_ollama::WaitReason::SlotBusy)
        .map(|w| w.to_us.unwrap_or(w.from_us).saturating_sub(w.from_us))
        .sum();
    let tok: u64 = reqs.iter().map(|r| r.tokens).sum();
    let mean_speed =
        if tok > 0 { reqs.iter().map(|r| r.mean_speed * r.tokens as f64).sum::<f64>() / tok as f64 } else { 1.0 };
    let shared: BTreeSet<usize> = reqs.iter().filter(|r| !r.shared_device_with.is_empty()).map(|r| r.device).collect();
    let connections = reqs.iter().map(|r| r.client.as_str()).collect::<BTreeSet<_>>().len();
    // Client lag: the i-th call of agent A matched with A's i-th request on the server.
    let mut lags = Vec::new();
    for a in agents {
        let mine: Vec<_> = reqs.iter().filter(|r| r.agent == a.name).collect();
        for (call, r) in a.calls.iter().zip(mine) {
            for (client_t, server_us) in call.tokens.iter().zip(&r.token_us) {
                let server_t = origin + std::time::Duration::from_micros(*server_us);
                lags.push(client_t.saturating_duration_since(server_t).as_secs_f64() * 1e3);
            }
        }
    }
    let durations: Vec<f64> = held.iter().map(|(a, b)| (b - a) as f64 / 1e3).collect();
    ServerEvidence {
        requests: reqs.len(),
        max_concurrency,
        max_decoding,
        decode_overlap,
        arrived_after_previous_ended: arrived_after,
        slot_wait_s: slot_wait_us as f64 / 1e6,
        slots,
        mean_speed,
        shared_devices: shared.into_iter().collect(),
        connections,
        client_lag_p50_ms: percentile(&lags, 0.5),
        client_lag_p90_ms: percentile(&lags, 0.9),
        request_p50_ms: percentile(&durations, 0.5),
    }
}
