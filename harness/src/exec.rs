//! `harness exec -- CMD ARGS...`: judge any program, in any language, from the server side.
//! The simulator starts, the command runs with `OLLAMA_HOST` pointing at the first instance
//! (and every instance's URL in `SIM_OLLAMA_URLS`), and when it ends the trace says how its
//! requests overlapped: requests per agent (the `X-Agent` header, else the client connection),
//! the concurrency profile over time, the maximum concurrency against what the agents could
//! have reached, idle gaps, and a verdict with a reason.

use crate::verdict::Verdict;
use serde::Serialize;
use sim_ollama::{RequestTrace, TraceSnapshot, WaitReason};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What one agent did, seen from the server.
#[derive(Debug, Clone, Serialize)]
pub struct AgentActivity {
    /// The label (`X-Agent` header, else the client's address).
    pub agent: String,
    /// Requests it made.
    pub requests: usize,
    /// Tokens it received.
    pub tokens: u64,
    /// From its first arrival to its last end, seconds.
    pub busy_s: f64,
}

/// The server-side judgement of a program's run.
#[derive(Debug, Clone, Serialize)]
pub struct ExecReport {
    /// Per agent.
    pub agents: Vec<AgentActivity>,
    /// Generation requests in the trace.
    pub requests: usize,
    /// Most requests held by the server at once.
    pub max_concurrency: usize,
    /// Most requests decoding at once.
    pub max_decoding: usize,
    /// What the workload could have reached: agents that made requests.
    pub possible_concurrency: usize,
    /// Share of the busy time with two or more requests in flight.
    pub overlap: f64,
    /// Total time between the first arrival and the last end with no request in flight, s.
    pub idle_s: f64,
    /// Longest such gap, s.
    pub longest_gap_s: f64,
    /// Seconds requests spent waiting for a slot.
    pub slot_wait_s: f64,
    /// Concurrency over time: (seconds from the first arrival, requests in flight) at each change.
    pub profile: Vec<(f64, usize)>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why.
    pub reason: String,
}

fn generation(r: &RequestTrace) -> bool {
    matches!(r.endpoint.as_str(), "/api/generate" | "/api/chat" | "/v1/chat/completions" | "/v1/completions")
        && r.end_us.is_some()
        && !(r.tokens == 0 && r.first_token_us.is_none() && r.outcome == sim_ollama::Outcome::Done)
}

/// Judges the trace of a program's run.
pub fn judge(trace: &TraceSnapshot) -> ExecReport {
    let reqs: Vec<&RequestTrace> = trace.requests.iter().filter(|r| generation(r)).collect();
    let mut by_agent: BTreeMap<&str, Vec<&RequestTrace>> = BTreeMap::new();
    for r in &reqs {
        by_agent.entry(r.agent.as_str()).or_default().push(r);
    }
    let agents: Vec<AgentActivity> = by_agent
        .iter()
        .map(|(a, rs)| {
            let start = rs.iter().map(|r| r.received_us).min().unwrap_or(0);
            let end = rs.iter().filter_map(|r| r.end_us).max().unwrap_or(start);
            AgentActivity {
                agent: a.to_string(),
                requests: rs.len(),
                tokens: rs.iter().map(|r| r.tokens).sum(),
                busy_s: (end - start) as f64 / 1e6,
            }
        })
        .collect();
    // Sweep arrivals and ends.
    let mut ev: Vec<(u64, i32)> =
        reqs.iter().flat_map(|r| [(r.received_us, 1), (r.end_us.unwrap_or(r.received_us), -1)]).collect();
    ev.sort();
    let t0 = ev.first().map_or(0, |e| e.0);
    let (mut cur, mut max, mut last, mut busy, mut multi, mut idle, mut gap) = (0i32, 0i32, t0, 0u64, 0u64, 0u64, 0u64);
    let mut profile = Vec::new();
    for (t, d) in &ev {
        let dt = t - last;
        if cur >= 1 {
            busy += dt;
        } else {
            idle += dt;
            gap = gap.max(dt);
        }
        if cur >= 2 {
            multi += dt;
        }
        cur += d;
        max = max.max(cur);
        last = *t;
        if profile.last().is_some_and(|(pt, _): &(f64, usize)| (*pt - (t - t0) as f64 / 1e6).abs() < 1e-9) {
            profile.pop();
        }
        profile.push(((t - t0) as f64 / 1e6, cur.max(0) as usize));
    }
    let mut dec: Vec<(u64, i32)> =
        reqs.iter().filter_map(|r| Some([(r.first_token_us?, 1), (r.end_us?, -1)])).flatten().collect();
    dec.sort();
    let (mut c2, mut max_decoding) = (0i32, 0i32);
    for (_, d) in dec {
        c2 += d;
        max_decoding = max_decoding.max(c2);
    }
    let slot_wait_us: u64 = reqs
        .iter()
        .flat_map(|r| r.waits.iter())
        .filter(|w| w.reason == WaitReason::SlotBusy)
        .map(|w| w.to_us.unwrap_or(w.from_us) - w.from_us)
        .sum();
    let overlap = if busy > 0 { multi as f64 / busy as f64 } else { 0.0 };
    let possible = agents.len();
    let speed: f64 = {
        let tok: u64 = reqs.iter().map(|r| r.tokens).sum();
        if tok > 0 { reqs.iter().map(|r| r.mean_speed * r.tokens as f64).sum::<f64>() / tok as f64 } else { 1.0 }
    };
    let (verdict, reason) = if possible < 2 {
        (Verdict::Parallel, format!("{} agent(s) made requests: nothing ran concurrently, nothing to judge", possible))
    } else if max <= 1 {
        (
            Verdict::Serialized,
            format!(
                "{possible} agents made {} requests, but no two were ever in flight at once: every request reached the server after the previous one finished (serialized in the client)",
                reqs.len()
            ),
        )
    } else if max_decoding <= 1 && slot_wait_us > 0 {
        (
            Verdict::Serialized,
            format!(
                "requests overlapped but waited {:.2} s for a parallel slot: the server has too few slots (serialized by the server)",
                slot_wait_us as f64 / 1e6
            ),
        )
    } else if overlap >= 0.5 && speed >= 0.75 {
        (
            Verdict::Parallel,
            format!(
                "up to {max} of {possible} agents' requests were in flight together, {:.0}% of the busy time with two or more",
                overlap * 100.0
            ),
        )
    } else if speed < 0.75 {
        (
            Verdict::Degraded,
            format!(
                "requests overlapped (up to {max}) but decoded at {:.0}% of solo speed: the device is shared",
                speed * 100.0
            ),
        )
    } else {
        (
            Verdict::Degraded,
            format!(
                "up to {max} of {possible} agents' requests overlapped, but only {:.0}% of the busy time had two or more in flight",
                overlap * 100.0
            ),
        )
    };
    ExecReport {
        agents,
        requests: reqs.len(),
        max_concurrency: max.max(0) as usize,
        max_decoding: max_decoding.max(0) as usize,
        possible_concurrency: possible,
        overlap,
        idle_s: idle as f64 / 1e6,
        longest_gap_s: gap as f64 / 1e6,
        slot_wait_s: slot_wait_us as f64 / 1e6,
        profile,
        verdict,
        reason,
    }
}

/// The report in words.
pub fn render(r: &ExecReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "harness exec: {} ({})", r.verdict, r.reason);
    let _ = writeln!(s, "  requests: {} from {} agent(s)", r.requests, r.agents.len());
    for a in &r.agents {
        let _ =
            writeln!(s, "    {:<24} {} request(s), {} tokens, busy {:.3} s", a.agent, a.requests, a.tokens, a.busy_s);
    }
    let _ = writeln!(
        s,
        "  concurrency: max {} in flight (max {} decoding) of {} possible; {:.0}% of the busy time with 2+ in flight",
        r.max_concurrency,
        r.max_decoding,
        r.possible_concurrency,
        r.overlap * 100.0
    );
    let _ = writeln!(
        s,
        "  idle gaps: {:.3} s in total, longest {:.3} s; slot waiting {:.3} s",
        r.idle_s, r.longest_gap_s, r.slot_wait_s
    );
    let profile: Vec<String> = r.profile.iter().map(|(t, n)| format!("{t:.3}s:{n}")).collect();
    let _ = writeln!(s, "  profile (time since first request: requests in flight): {}", profile.join(" "));
    s
}
