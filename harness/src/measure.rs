//! Measurement: per-call client timings and per-run efficiencies against the measured solo
//! baselines. What the server saw is the judge's (`sim_ollama::judge`), not measured here.

use crate::client::CallRecord;
use crate::runtime::AgentRecord;
use crate::stats::percentile;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
    /// Tokens, as the server counted them (`eval_count` of the final object), else the
    /// chunks received: a real server merges pieces into one chunk, so chunks undercount.
    pub tokens: usize,
    /// Chunks with content received (what the inter-token figures are measured between).
    #[serde(default)]
    pub chunks: usize,
    /// Why the answer ended (`done_reason`), when the server said.
    #[serde(default)]
    pub done_reason: Option<String>,
    /// Tokens per second from the first to the last token (client-side).
    pub tok_per_s: Option<f64>,
    /// Time to the first token of reasoning, ms, when the model reasoned before answering
    /// (`ttft_ms` is then the time to the first token of the answer).
    #[serde(default)]
    pub ttft_thinking_ms: Option<f64>,
    /// The server's `prompt_eval_duration`, ms of wall time (what a prompt cache saves).
    #[serde(default)]
    pub prompt_eval_ms: Option<f64>,
    /// Whole call, ms.
    #[serde(deserialize_with = "crate::stats::nan_or")]
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
            tokens: r.eval_count.map_or(r.tokens.len(), |n| n as usize),
            chunks: r.tokens.len(),
            done_reason: r.done_reason.clone(),
            tok_per_s: span,
            prompt_eval_ms: r.prompt_eval_duration_ns.map(|ns| ns as f64 / 1e6),
            ttft_thinking_ms: r.first_thinking.map(|t| ms(r.sent, t)),
            duration_ms: ms(r.sent, r.end),
            error: r.error.clone(),
        }
    }
}

fn nan() -> f64 {
    f64::NAN
}

/// An agent's durations in a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentTimes {
    /// Agent.
    pub name: String,
    /// Its duration alone (the solo baseline: the median of its solo rounds), seconds.
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub solo_s: f64,
    /// Solo rounds the baseline is the median of.
    #[serde(default)]
    pub solo_rounds: usize,
    /// The fastest and slowest of those rounds, seconds (their spread).
    #[serde(default = "nan", deserialize_with = "crate::stats::nan_or")]
    pub solo_min_s: f64,
    /// The slowest.
    #[serde(default = "nan", deserialize_with = "crate::stats::nan_or")]
    pub solo_max_s: f64,
    /// Its duration in the concurrent run, seconds.
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub concurrent_s: f64,
}

/// Efficiencies of a concurrent run against the solo baselines.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Efficiency {
    /// Wall time of the concurrent run (first start to last end), seconds.
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub wall_s: f64,
    /// Sum of solo durations / (agents x wall): 1.0 = perfectly parallel, 1/agents = serial.
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub efficiency_true: f64,
    /// The study's formula: sum of the agents' durations *in the concurrent run* / (agents x
    /// wall). Stays high when contention stretches every agent.
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub efficiency_apparent: f64,
    /// Sum of solo durations / wall.
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub speedup: f64,
}

/// Computes the efficiencies. `solo` holds each agent's solo duration, by name.
pub(crate) fn efficiency(agents: &[AgentRecord], solo: &BTreeMap<String, f64>) -> (Efficiency, Vec<AgentTimes>) {
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
            solo_rounds: 0,
            solo_min_s: f64::NAN,
            solo_max_s: f64::NAN,
            concurrent_s: a.end.saturating_duration_since(a.start).as_secs_f64(),
        })
        .collect();
    let solo_sum: f64 = times.iter().map(|t| t.solo_s).sum();
    let conc_sum: f64 = times.iter().map(|t| t.concurrent_s).sum();
    let e = if wall > 0.0 {
        Efficiency {
            wall_s: wall,
            efficiency_true: solo_sum / (n * wall),
            efficiency_apparent: conc_sum / (n * wall),
            speedup: solo_sum / wall,
        }
    } else {
        Efficiency { wall_s: wall, efficiency_true: f64::NAN, efficiency_apparent: f64::NAN, speedup: f64::NAN }
    };
    (e, times)
}
