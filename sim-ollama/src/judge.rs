//! The judge: from a trace alone, how a program's requests overlapped, what each would have
//! cost alone, the time the program could have saved, and a verdict with its reason. One
//! judge for `harness exec`, the harness's matrix and users' own tests; it never fails open.
//!
//! # What it computes
//! Every request that got a parallel slot is work. Its **solo cost** is the simulator's own
//! modelled duration of that work alone on an idle device ([`RequestTrace::solo_us`]: the
//! first-token overhead, prompt evaluation and the tokens it emitted, at the run's time
//! scale; no loads, waits or stalls). Requests are grouped into **agents**: by their `X-Agent`
//! header; without labels, by conversation (a chat turn resends the earlier turns, so it
//! chains to the request that sent them); failing both, the program is judged as a whole.
//! An agent's **local work** is the time between one of its answers and its next request,
//! except where other agents' requests ran back to back from that answer to that next request,
//! each starting as the one before ended (a hand-off: the agent was waiting for them, the way a
//! lock or a one-permit semaphore makes it wait): then it was not local work. Then:
//!
//! - **one at a time** = every solo cost + every agent's local work + model loads;
//! - **ideal** = the longest agent's chain (its solo costs and local work) + model loads;
//! - **took** = the measured wall time from the first request to the last answer;
//! - **saving** = (one at a time - took) / (one at a time - ideal): 1.0 when the program was as
//!   fast as its longest agent alone, 0.0 when it was no faster than one request after another.
//!
//! Solo costs and loads are modelled time at the run's time scale (the wall time they would
//! take); local work and the time the program took are measured wall time.
//!
//! # Verdicts
//! **parallel** at a saving of 80 % or more, **serialized** at 15 % or less, **degraded** in
//! between; and, whatever the figures say: two or more requests of two or more agents that
//! were never in flight together are **serialized**; a single request, or a single agent whose
//! calls followed each other, is **inconclusive** (nothing could have run alongside it); a run
//! where nothing could be saved is **inconclusive**. The reason names the cause: the client
//! (requests held back before they reached the server), the server's parallel slots, a shared
//! device, model loads, or (with client-side observations) the client's connection pool or its
//! blocked executor.
//!
//! ```
//! use sim_ollama::judge::{JudgeOptions, Verdict};
//! let sim = sim_ollama::SimBuilder::new().time_scale(0.01).start().unwrap();
//! // ... run the program's agents against sim.url() ...
//! sim.wait_idle(std::time::Duration::from_secs(5)).unwrap();
//! let report = sim.judge(&JudgeOptions::new());
//! assert_eq!(report.verdict, Verdict::Inconclusive, "{report}"); // nothing ran
//! ```
//!
//! # Where things are
//! - this file: [`judge`], which gathers the figures from the trace;
//! - `input.rs`: what to judge ([`JudgeOptions`], [`ClientCall`]) and a request as the judge
//!   sees it;
//! - `agents.rs`: telling agents apart (labels, conversations) and each agent's chain of calls;
//! - `figures.rs`: interval arithmetic (in flight at once, idle time, unions) and how figures
//!   are written (seconds, percentages, plurals);
//! - `allowed.rs`: what the deployment allows, by replaying the calls on its model;
//! - [`decision`]: the decision core and its [`Verdict`], shared with the harness's live mode;
//! - `client.rs`: the client verdict of a trace in words, with its cause;
//! - `deployment.rs`: the deployment verdict in words, with its limit and fix;
//! - `report.rs`: the [`Report`] and its rendering; `gate.rs`: [`Expectations`], [`Judgement`].

mod agents;
mod allowed;
mod client;
pub mod decision;
mod deployment;
mod figures;
mod gate;
mod input;
mod report;

pub use decision::{
    AgainstAllowed, NO_ROOM_SLACK, PARALLEL_MIN_SAVING, SERIALIZED_MAX_SAVING, Verdict, against_allowed,
};
pub use deployment::measured as measured_deployment;
pub use gate::{Expectations, JUDGEMENT_SCHEMA_VERSION, Judgement};
pub use input::{ClientCall, JudgeOptions};
pub use report::{
    AgentActivity, AgentSource, Allows, Cause, Concurrency, DeploymentReport, Limit, LimitCost, REPORT_SCHEMA_VERSION,
    Report, TimeFigures,
};

use crate::trace::{Outcome, RequestTrace, TraceSnapshot, WaitReason};
use allowed::Exclusions;
use decision::against_allowed_loads_aside;
use figures::{median, plural, secs, sweep, union_len};
use input::Req;
use std::collections::{BTreeMap, BTreeSet};

/// Endpoints whose requests are model work.
const MODEL_ENDPOINTS: &[&str] = &[
    "/api/generate",
    "/api/chat",
    "/api/embed",
    "/api/embeddings",
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/responses",
    "/v1/messages",
];

/// Judges a trace.
pub fn judge(trace: &TraceSnapshot, opts: &JudgeOptions) -> Report {
    let mut notes = Vec::new();
    let in_window = |r: &&RequestTrace| opts.since.is_none_or(|s| r.id >= s);
    let model_reqs: Vec<&RequestTrace> =
        trace.requests.iter().filter(in_window).filter(|r| MODEL_ENDPOINTS.contains(&r.endpoint.as_str())).collect();
    let still_active = model_reqs.iter().filter(|r| r.outcome == Outcome::Active).count();
    if still_active > 0 {
        notes.push(format!(
            "{} still running when the trace was read were left out (wait for the program to finish: SimHandle::wait_idle)",
            plural(still_active, "request", "requests")
        ));
    }
    // Work is what got a slot; loads and unloads (no slot, no tokens) are not requests of the
    // program's agents, and requests refused before they ran are failures with no work.
    let ran: Vec<&RequestTrace> =
        model_reqs.iter().copied().filter(|r| r.outcome != Outcome::Active && r.slot_us.is_some()).collect();
    let refused: Vec<&RequestTrace> = model_reqs
        .iter()
        .copied()
        .filter(|r| r.slot_us.is_none() && matches!(r.outcome, Outcome::Error | Outcome::Cancelled))
        .collect();
    let failed_ran = ran.iter().filter(|r| r.outcome != Outcome::Done).count();
    let failed = failed_ran + refused.len();
    if failed > 0 {
        let first = refused.iter().chain(ran.iter()).find(|r| r.outcome != Outcome::Done);
        let what = first.map_or(String::new(), |r| match (&r.error, r.outcome) {
            (Some(e), _) => format!(" (first: HTTP {}: {e})", r.status),
            (None, Outcome::Cancelled) => " (first: the client went away before the end)".to_string(),
            _ => String::new(),
        });
        notes.push(format!(
            "{} of {} failed or were cancelled{what}; failed requests count with the work they did",
            plural(failed, "request", "requests"),
            ran.len() + refused.len()
        ));
    }

    // The program's clock: the client's where observed, else the server's.
    let client: BTreeMap<u64, ClientCall> = opts.client_calls.iter().map(|c| (c.request, *c)).collect();
    let mut reqs: Vec<Req<'_>> = ran
        .iter()
        .map(|r| {
            let server_end = r.end_us.unwrap_or(r.received_us);
            let (start, end) = match client.get(&r.id) {
                Some(c) => (c.sent_us.min(r.received_us), c.end_us.max(server_end)),
                None => (r.received_us, server_end),
            };
            Req { r, start, end, server_end, group: 0 }
        })
        .collect();
    reqs.sort_by_key(|q| (q.start, q.r.id));

    // Agents.
    let agents::Grouping { names, source, labelled } = agents::group(&mut reqs);
    let groups = names.len();
    if source == AgentSource::Mixed {
        notes.push(format!(
            "{} of {} requests carried no X-Agent label; they were grouped by conversation",
            reqs.len() - labelled,
            reqs.len()
        ));
    }

    // Server-side concurrency (always the server's clock: what reached it together).
    let held: Vec<(u64, u64)> = reqs.iter().map(|q| (q.r.received_us, q.server_end)).collect();
    let (max_in_flight, overlap, _, _, profile) = sweep(&held);
    let decoding: Vec<(u64, u64)> = reqs.iter().filter_map(|q| Some((q.r.first_token_us?, q.server_end))).collect();
    let (max_decoding, ..) = sweep(&decoding);
    // Idle time on the program's clock.
    let program: Vec<(u64, u64)> = reqs.iter().map(|q| (q.start, q.end)).collect();
    let (_, _, idle_us, longest_gap_us, _) = sweep(&program);
    let wait_us = |pred: fn(WaitReason) -> bool| -> u64 {
        reqs.iter()
            .flat_map(|q| q.r.waits.iter())
            .filter(|w| pred(w.reason))
            .map(|w| w.to_us.unwrap_or(w.from_us).saturating_sub(w.from_us))
            .sum()
    };
    let slot_wait_us = wait_us(|w| w == WaitReason::SlotBusy);
    let load_wait_us = wait_us(|w| w != WaitReason::SlotBusy);
    let tok: u64 = reqs.iter().map(|q| q.r.tokens).sum();
    let mean_speed =
        if tok > 0 { reqs.iter().map(|q| q.r.mean_speed * q.r.tokens as f64).sum::<f64>() / tok as f64 } else { 1.0 };
    let shared_devices: Vec<usize> = reqs
        .iter()
        .filter(|q| !q.r.shared_device_with.is_empty())
        .map(|q| q.r.device)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let connections = reqs.iter().map(|q| q.r.client.as_str()).collect::<BTreeSet<_>>().len();

    // Hand-off tolerance: scaled to the requests' size, bounded.
    let tolerance_us = opts.handoff_tolerance.map_or_else(
        || {
            let med = median(reqs.iter().map(|q| q.r.solo_us as f64).collect()).unwrap_or(0.0);
            (med / 4.0).clamp(1_000.0, 20_000.0) as u64
        },
        |d| d.as_micros() as u64,
    );

    let agents::Chains { chain_end, local, handoff, after, carried } = agents::chains(&reqs, tolerance_us);
    if carried > 0 {
        notes.push(if carried == 1 {
            "1 request's prompt carried earlier answers (the data flow between agents): it was taken to wait for them".to_string()
        } else {
            format!(
                "{carried} requests' prompts carried earlier answers (the data flow between agents): each was taken to wait for them"
            )
        });
    }
    let n = reqs.len();
    let agents: Vec<AgentActivity> = (0..groups)
        .map(|g| {
            let mine: Vec<usize> = (0..n).filter(|&i| reqs[i].group == g).collect();
            let t0 = reqs.first().map_or(0, |q| q.start);
            AgentActivity {
                agent: names[g].clone(),
                requests: mine.len(),
                ids: mine.iter().map(|&i| reqs[i].r.id).collect(),
                tokens: mine.iter().map(|&i| reqs[i].r.tokens).sum(),
                solo_s: secs(mine.iter().map(|&i| reqs[i].r.solo_us).sum()),
                local_s: secs(mine.iter().map(|&i| local[i]).sum()),
                chain_s: secs(mine.iter().map(|&i| chain_end[i]).max().unwrap_or(0)),
                handoffs: mine.iter().filter(|&&i| handoff[i]).count(),
                span_s: (
                    secs(mine.iter().map(|&i| reqs[i].start).min().unwrap_or(t0) - t0),
                    secs(mine.iter().map(|&i| reqs[i].end).max().unwrap_or(t0) - t0),
                ),
            }
        })
        .collect();

    // The time figures.
    let solo_us: u64 = reqs.iter().map(|q| q.r.solo_us).sum();
    let loads: Vec<(u64, u64)> = reqs
        .iter()
        .flat_map(|q| q.r.loads.iter())
        .map(|l| (l.start_us, l.start_us.saturating_add(l.duration_us)))
        .collect();
    let load_us = union_len(loads);
    let took_us = match (reqs.iter().map(|q| q.start).min(), reqs.iter().map(|q| q.end).max()) {
        (Some(a), Some(b)) => b - a,
        _ => 0,
    };
    let longest_chain = chain_end.iter().copied().max().unwrap_or(0);
    let (local_us, ideal_core, possible) = if source == AgentSource::Program {
        // Unknown agents: every request could have run alongside every other (or
        // `expected_agents` at a time); the idle time is the program's own work between calls.
        let lower = opts.expected_agents.map_or(0, |k| solo_us / k as u64);
        let longest_conv = (0..groups)
            .map(|g| reqs.iter().filter(|q| q.group == g).map(|q| q.r.solo_us).sum::<u64>())
            .max()
            .unwrap_or(0);
        (idle_us, longest_conv.max(lower) + idle_us, opts.expected_agents)
    } else {
        let local_us: u64 = local.iter().sum();
        let lower = opts.expected_agents.filter(|k| *k < groups).map_or(0, |k| (solo_us + local_us) / k as u64);
        (local_us, longest_chain.max(lower), Some(opts.expected_agents.map_or(groups, |k| k.min(groups))))
    };
    let sequential_us = solo_us + local_us + load_us;
    let ideal_us = (ideal_core + load_us).min(sequential_us);

    let exclusions = Exclusions::new(reqs.iter().map(|q| q.r));
    // What the deployment allows: the same calls replayed by a perfectly concurrent client on
    // the deployment's slots and devices (unlabelled programs: with no local work, the idle
    // time added as in the ideal).
    let program = source == AgentSource::Program;
    let calls: Vec<allowed::Call> = reqs
        .iter()
        .enumerate()
        .map(|(i, q)| allowed::Call {
            work: q.r.solo_us as f64,
            after: after[i].clone(),
            local: if program { 0.0 } else { local[i] as f64 },
            runner: (q.r.instance, q.r.model.clone()),
            slots: q.r.slots,
            device: q.r.device,
            exclusive: exclusions.of(q.r),
        })
        .collect();
    let permits = if program { opts.expected_agents } else { opts.expected_agents.filter(|k| *k < groups) };
    let described = !trace.devices.is_empty() && reqs.iter().all(|q| q.r.slots > 0);
    let replay = |relax: allowed::Relax| -> u64 {
        let idle = if program { idle_us } else { 0 };
        (allowed::makespan(&calls, &trace.devices, permits, relax).round() as u64 + idle).max(ideal_core)
    };
    let allowed_core = if described { replay(allowed::Relax::default()) } else { ideal_core };
    let allowed_us = allowed_core + load_us;
    // The client's share of what the deployment allows to save (absent when it allows less
    // than 5 % of the sequential time), by the rule the verdict uses, for a run that took
    // `took_us`.
    let against_at = |took_us: u64| {
        against_allowed(secs(took_us), secs(allowed_us), secs(sequential_us), secs(ideal_us)).or_else(|| {
            against_allowed_loads_aside(
                secs(took_us),
                secs(allowed_us),
                secs(sequential_us),
                secs(sequential_us - load_us),
                secs(ideal_core.min(sequential_us - load_us)),
            )
        })
    };
    let against = against_at(took_us);
    let saving = against.and_then(|a| a.saving);
    // The same figures with the run ended where the server wrote its last answer, not where
    // the client finished reading it (only where the client's reading was observed, and lagged).
    let served_us = match (reqs.iter().map(|q| q.start).min(), reqs.iter().map(|q| q.server_end).max()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => 0,
    };
    let read_after_us = took_us.saturating_sub(served_us);
    let served = if !client.is_empty() && read_after_us > 0 { against_at(served_us) } else { None };
    let lags: Vec<f64> = reqs
        .iter()
        .filter(|q| client.contains_key(&q.r.id))
        .map(|q| secs(q.end.saturating_sub(q.server_end)))
        .collect();
    let client_lag_s = median(lags);
    let time = TimeFigures {
        time_scale: trace.time_scale,
        took_s: secs(took_us),
        solo_s: secs(solo_us),
        local_s: secs(local_us),
        load_s: secs(load_us),
        sequential_s: secs(sequential_us),
        ideal_s: secs(ideal_us),
        allowed_s: secs(allowed_us),
        saving,
        client_lag_s,
    };
    let concurrency = Concurrency {
        max_in_flight,
        max_decoding,
        possible,
        overlap,
        idle_s: secs(idle_us),
        longest_gap_s: secs(longest_gap_us),
        slot_wait_s: secs(slot_wait_us),
        load_wait_s: secs(load_wait_us),
        mean_speed,
        shared_devices,
        connections,
        profile,
    };
    if source == AgentSource::Program && reqs.len() > 1 {
        notes.push(match opts.expected_agents {
            Some(k) => format!(
                "no X-Agent labels and no conversations to chain: judged as a program of {k} agents that could run at once"
            ),
            None => "no X-Agent labels and no conversations to chain: the judge assumed every request could have run alongside every other; if each agent makes several calls in turn, label them (X-Agent) or say how many agents run at once (--agents N), or the program reads slower than it is".to_string(),
        });
    }
    let handoffs: usize = agents.iter().map(|a| a.handoffs).sum();

    let lift = |relax: allowed::Relax| if described { allowed_core.saturating_sub(replay(relax)) } else { 0 };
    let deployment = deployment::report(&deployment::Inputs {
        described,
        requests: reqs.len(),
        sequential_us,
        ideal_us: ideal_core.min(sequential_us),
        allowed_us,
        // The loads, and the turns that runners which displace each other impose.
        load_us: load_us + lift(allowed::Relax { exclusive: true, ..Default::default() }),
        replayed: [
            (Limit::Slots, lift(allowed::Relax { slots: true, ..Default::default() })),
            (Limit::Batch, lift(allowed::Relax { batch: true, ..Default::default() })),
            (Limit::SharedDevice, lift(allowed::Relax { cross_process: true, ..Default::default() })),
        ],
        queue_refused: refused.iter().filter(|r| r.status == 503).count(),
        runners: reqs
            .iter()
            .map(|q| deployment::Runner {
                instance: q.r.instance,
                model: q.r.model.clone(),
                slots: q.r.slots,
                device: q.r.device,
                forced: q.r.one_slot_because.clone(),
            })
            .collect(),
        devices: &trace.devices,
        agents: possible,
        load_causes: reqs.iter().flat_map(|q| q.r.loads.iter()).map(deployment::load_cause).collect(),
    });
    let mut report = Report {
        schema_version: REPORT_SCHEMA_VERSION,
        verdict: Verdict::Inconclusive,
        cause: Cause::NothingToJudge,
        reason: String::new(),
        deployment,
        notes,
        agents_from: source,
        agents,
        requests: reqs.len(),
        failed,
        concurrency,
        time,
    };
    let figures = client::Figures { against, served, read_after_s: secs(read_after_us) };
    let (verdict, cause, reason) = client::verdict(&report, &reqs, &client, handoffs, opts, described, figures);
    report.verdict = verdict;
    report.cause = cause;
    report.reason = reason;
    report
}

#[cfg(test)]
mod tests;
