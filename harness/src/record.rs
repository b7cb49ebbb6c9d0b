//! `harness record`: per-token timings of a live server (a real Ollama, or a simulator),
//! one call at a time, written as NDJSON (`fixtures/traces/*.ndjson`). The simulator replays
//! such a file as an empirical profile (`replay_file` in a model's profile).

use crate::client::{CallOpts, Stack};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recorded {
    /// Model.
    pub model: String,
    /// Endpoint.
    pub endpoint: String,
    /// Time to first token, ms (the client's).
    pub ttft_ms: f64,
    /// Gaps between consecutive tokens, ms (the client's).
    pub gaps_ms: Vec<f64>,
    /// Tokens, as the server counted them (`eval_count`; the chunks received when it sent
    /// none): a real server merges pieces, so chunks undercount.
    pub tokens: usize,
    /// Chunks with content received (where `gaps_ms` come from).
    #[serde(default)]
    pub chunks: usize,
    /// The server's `prompt_eval_count`.
    #[serde(default)]
    pub prompt_eval_count: Option<u64>,
    /// Why the answer ended (`stop`, `length`): a call cut by `num_predict` is not a short
    /// natural answer, and replay should know.
    #[serde(default)]
    pub done_reason: Option<String>,
    /// The server's `load_duration`, ms.
    pub load_ms: Option<f64>,
}

/// What to record.
#[derive(Debug, Clone)]
pub struct RecordPlan {
    /// Base URL.
    pub endpoint: String,
    /// Model.
    pub model: String,
    /// Calls to record (after one warm-up call that is not recorded).
    pub calls: usize,
    /// `num_predict` of each call (the model may stop earlier).
    pub max_tokens: u32,
    /// Prompt of each call.
    pub prompt: String,
    /// A call slower than this is an error.
    pub timeout: Duration,
}

/// Records the calls one after the other.
pub fn record(p: &RecordPlan) -> Result<Vec<Recorded>, String> {
    crate::client::check_live(std::slice::from_ref(&p.endpoint), &p.model)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let client = reqwest::Client::builder().build().map_err(|e| e.to_string())?;
    let stack = Stack::Reqwest(client);
    let url = format!("{}/api/generate", p.endpoint.trim_end_matches('/'));
    let opts = CallOpts { per_token_block: None, agent: "harness-record".into(), timeout: p.timeout };
    rt.block_on(async {
        let mut out = Vec::with_capacity(p.calls);
        for i in 0..=p.calls {
            let body = serde_json::json!({"model": p.model, "prompt": format!("{} ({})", p.prompt, i), "stream": true, "options": {"num_predict": p.max_tokens}});
            let rec = stack.call(&url, serde_json::to_vec(&body).unwrap_or_default(), &opts).await;
            if let Some(e) = rec.error {
                return Err(format!("call {}: {e}", i + 1));
            }
            if i == 0 {
                continue; // the warm-up (it may include a load)
            }
            let Some(first) = rec.tokens.first() else { return Err(format!("call {}: no tokens", i + 1)) };
            out.push(Recorded {
                model: p.model.clone(),
                endpoint: "/api/generate".into(),
                ttft_ms: first.saturating_duration_since(rec.sent).as_secs_f64() * 1e3,
                gaps_ms: rec.tokens.windows(2).map(|w| (w[1] - w[0]).as_secs_f64() * 1e3).collect(),
                tokens: rec.eval_count.map_or(rec.tokens.len(), |n| n as usize),
                chunks: rec.tokens.len(),
                prompt_eval_count: rec.prompt_eval_count,
                done_reason: rec.done_reason.clone(),
                load_ms: rec.load_duration_ns.map(|n| n as f64 / 1e6),
            });
        }
        Ok(out)
    })
}

/// One JSON object per line.
pub fn to_ndjson(calls: &[Recorded]) -> String {
    calls.iter().filter_map(|c| serde_json::to_string(c).ok()).map(|l| l + "\n").collect()
}
