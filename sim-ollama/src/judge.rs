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
//! - `reading.rs`: the time figures for one reading of the agents' local work;
//! - `gaps.rs`: the gaps between calls read one agent at a time, and hand-offs (issue 36);
//!   `probed.rs`: a probe run's plan and its comparison with the run judged; `settled.rs`: the
//!   client verdict those findings settle, in words;
//! - [`decision`]: the decision core and its [`Verdict`], shared with the harness's live mode;
//! - `client.rs`: the client verdict of a trace in words, with its cause;
//! - `deployment.rs`: the deployment verdict in words, with its limit and fix;
//! - `report.rs`: the [`Report`]; `text.rs`: the report in words; `gate.rs`: [`Expectations`],
//!   [`Judgement`];
//! - `confirmed.rs`: a confirmation run beside a probe run (both pairs judged).

mod agents;
mod allowed;
mod client;
mod confirmed;
pub mod decision;
mod deployment;
mod figures;
mod gaps;
mod gate;
mod handoff_probe;
mod held;
mod input;
mod probed;
mod reading;
mod recovered;
mod report;
mod settled;
#[cfg(test)]
mod testkit;
mod text;
mod waits;

pub use crate::probe::{Delay, HoldPlan, ProbePlan, SerialCall, SerialPlan};
pub use decision::{
    AgainstAllowed, NO_ROOM_SLACK, PARALLEL_MIN_SAVING, SERIALIZED_MAX_SAVING, Verdict, against_allowed,
};
pub use deployment::{measured as measured_deployment, within_tolerance as deployment_within_tolerance};
pub use gaps::LOCAL_WORK_FLOOR_US;
pub use gate::{Expectations, JUDGEMENT_SCHEMA_VERSION, Judgement};
pub use input::{ClientCall, ConfirmRun, Confirmation, JudgeOptions};
pub use report::{
    AgentActivity, AgentSource, Allows, Cause, Concurrency, ConfirmationReport, DeploymentReport, GapWait, GapsReport,
    GapsStatus, HeldReport, HeldStatus, KeptPair, Limit, LimitCost, ProbeAgent, REPORT_SCHEMA_VERSION, Report,
    TimeFigures, WaitKind,
};

use crate::trace::{Outcome, RequestTrace, TraceSnapshot, WaitReason};
use allowed::Exclusions;
use figures::{median, plural, secs, sweep, union_len};
use input::{as_seen, that_ran, tolerance, window};
use std::collections::{BTreeMap, BTreeSet};

/// The plan of a probe run of the program whose requests are `opts`'s window (from its
/// `since` on): each agent's gaps between calls, to hold answers against (see
/// `SimHandle::begin_probe`). Agents that are neither labelled nor chat turns are left out:
/// their answers are never held.
pub fn probe_plan(trace: &TraceSnapshot, opts: &JudgeOptions) -> ProbePlan {
    let (since, until) = opts.first_window();
    let ran = that_ran(&window(trace, since, until));
    let client: BTreeMap<u64, ClientCall> = opts.client_calls.iter().map(|c| (c.request, *c)).collect();
    let mut reqs = as_seen(&ran, &client);
    let agents::Grouping { names, source, .. } = agents::group(&mut reqs);
    let tolerance_us = tolerance(&reqs, opts);
    if let Some(hold) =
        held::never_overlapped(&reqs, source, names.len(), opts).and_then(|s| held::plan(&s, tolerance_us))
    {
        // Calls that never overlapped: every answer held (the rest of a plan is for gaps).
        return ProbePlan { hold: Some(hold), tolerance_us, ..ProbePlan::default() };
    }
    let links = agents::links(&reqs, tolerance_us);
    let keys = agents::keys(&reqs, names.len());
    let mut plan = probed::plan(&probed::Run { reqs: &reqs, links: &links, keys: &keys, names: &names }, tolerance_us);
    if source == AgentSource::Program {
        // Agents the judge cannot tell apart: one answer at a time shows whose calls are whose.
        plan.serial = Some(recovered::plan(&reqs));
    }
    plan
}

/// Judges a trace.
pub fn judge(trace: &TraceSnapshot, opts: &JudgeOptions) -> Report {
    let mut report = match &opts.confirmation {
        Some(c) => confirmed::judge(trace, opts, c, judged),
        None => judged(trace, opts),
    };
    report.needs_probe = report.probe_would_settle();
    report.rerun = report.rerun_would_settle();
    report.confirm = match report.confirmation {
        Some(_) => None,
        None => report.confirm.or_else(|| confirmed::wanted(&report)),
    };
    report
}

fn judged(trace: &TraceSnapshot, opts: &JudgeOptions) -> Report {
    let mut notes = Vec::new();
    let (since, until) = opts.first_window();
    let model_reqs = window(trace, since, until);
    let still_active = model_reqs.iter().filter(|r| r.outcome == Outcome::Active).count();
    if still_active > 0 {
        notes.push(format!(
            "{} still running when the trace was read were left out (wait for the program to finish: SimHandle::wait_idle)",
            plural(still_active, "request", "requests")
        ));
    }
    let ran = that_ran(&model_reqs);
    let refused: Vec<&RequestTrace> = model_reqs
        .iter()
        .copied()
        .filter(|r| r.slot_us.is_none() && matches!(r.outcome, Outcome::Error | Outcome::Cancelled))
        .collect();
    let failed = ran.iter().filter(|r| r.outcome != Outcome::Done).count() + refused.len();
    notes.extend(input::failed_note(&ran, &refused, failed));

    let client: BTreeMap<u64, ClientCall> = opts.client_calls.iter().map(|c| (c.request, *c)).collect();
    let mut reqs = as_seen(&ran, &client);

    let agents::Grouping { names, source, labelled } = agents::group(&mut reqs);
    let groups = names.len();
    // Calls that never overlapped, each after a gap longer than a call: a probe run, if there is
    // one, held every answer (`held.rs`), and is read for that alone.
    let tolerance_us = tolerance(&reqs, opts);
    let spacing = held::never_overlapped(&reqs, source, groups, opts);
    let hold = spacing.and_then(|s| held::plan(&s, tolerance_us));
    let gaps_probe = opts.probe_window().filter(|_| hold.is_none());
    // The probe run's requests that ran, read once by whichever reading it was made for.
    let probe_ran = opts.probe_window().filter(|_| opts.probe_void.is_none());
    let probe_ran = probe_ran.map(|(since, until)| that_ran(&window(trace, Some(since), until)));
    // Agents the judge cannot tell apart, told apart by a probe run (one answer at a time).
    let limit_shown = opts.limit_shown || recovered::limit_shown(source, &ran, probe_ran.as_deref());
    let mut not_recovered = None;
    if let (AgentSource::Program, Some(_), Some(probe_ran)) = (source, gaps_probe, &probe_ran) {
        let as_shown =
            |t: &TraceSnapshot, free| judged(t, &JudgeOptions { limit_shown, starts_free: free, ..opts.clone() });
        match recovered::judged(trace, opts, &ran, probe_ran, tolerance_us, as_shown) {
            Ok(report) => return report,
            Err(n) => not_recovered = Some(n),
        }
    }
    // The gaps' probe run as the judge sees it, its agents told apart once. One that had every
    // agent's first call out before any answer: their starts waited for none (a launcher's, or
    // the agents' own), as `recovered.rs` reads its agents'.
    let mut probe_reqs = as_seen(probe_ran.as_deref().filter(|_| gaps_probe.is_some()).unwrap_or(&[]), &client);
    let probe_names = agents::group(&mut probe_reqs).names;
    let opts = &*input::starting_free(opts, agents::started_before_answers(&probe_reqs, probe_names.len()));
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

    let mut links = agents::links(&reqs, tolerance_us);
    let retried = agents::retried(&reqs, &refused, &mut links);
    if !retried.is_empty() {
        notes.push(format!(
            "{} sent again after the server refused {} (or the client gave up waiting): each agent's wait from its first attempt is taken as its own, not time the client lost",
            plural(retried.len(), "agent's first call was", "agents' first calls were"),
            if retried.len() == 1 { "it" } else { "them" }
        ));
    }
    let carried = links.carried;
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

    // The time figures, read first with every gap between an agent's calls as its own work.
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
    // The same figures with the run ended where the server wrote its last answer, not where
    // the client finished reading it (only where the client's reading was observed, and lagged).
    let served_us = match (reqs.iter().map(|q| q.start).min(), reqs.iter().map(|q| q.server_end).max()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => 0,
    };
    let read_after_us = took_us.saturating_sub(served_us);
    let program = source == AgentSource::Program;
    let basis = reading::Basis {
        reqs: &reqs,
        devices: &trace.devices,
        exclusions: Exclusions::new(reqs.iter().map(|q| q.r)),
        program,
        permits: if program { opts.expected_agents } else { opts.expected_agents.filter(|k| *k < groups) },
        expected_agents: opts.expected_agents,
        groups,
        described: !trace.devices.is_empty() && reqs.iter().all(|q| q.r.slots > 0),
        solo_us,
        load_us,
        idle_us,
        idle_in_ideal: idle_us,
        took_us,
        served_us: (!client.is_empty() && read_after_us > 0).then_some(served_us),
    };
    let described = basis.described;
    // The other reading the run allows: the agents' local work done one at a time, each gap's
    // own work beginning only after the last request another agent sent inside it.
    let as_linked = |local: Vec<u64>| reading::Chained { after: links.after.clone(), local };
    let one_at_a_time = (!program).then(|| basis.read(as_linked(gaps::one_at_a_time(&reqs, &links, tolerance_us))));
    // And, where agents' first calls went out late, the most generous reading: each right after
    // another agent's answer a hand-off, each with none right before it the agent's start-up.
    let handed_off = (!program && links.first_calls_in_question()).then(|| basis.read(gaps::generous(&reqs, &links)));
    // A probe run of the same program, when there is one: the gaps measured with the agents'
    // local work done one at a time by the simulator's holding answers back.
    let keys = agents::keys(&reqs, groups);
    let first_run = probed::Run { reqs: &reqs, links: &links, keys: &keys, names: &names };
    let known = (!opts.known_local.is_empty() && !program)
        .then(|| probed::from_known(&first_run, &opts.known_local, tolerance_us));
    let findings = if let Some(k) = known {
        Some(Ok(k))
    } else {
        gaps_probe.map(|_| {
            if let Some(why) = &opts.probe_void {
                return Err(why.clone());
            }
            if let Some(n) = &not_recovered {
                return Err(n.why.clone());
            }
            // Not void: the probe run was read above.
            let probe_links = agents::links(&probe_reqs, tolerance_us);
            let probe_keys = agents::keys(&probe_reqs, probe_names.len());
            let probe_run =
                probed::Run { reqs: &probe_reqs, links: &probe_links, keys: &probe_keys, names: &probe_names };
            probed::compare(&first_run, &probe_run, &probed::plan(&first_run, tolerance_us), opts.client_cpu_us())
        })
    };
    // The figures shown: the gaps as the probe measured them (with the hand-offs it showed, and
    // those it could not test read both ways), or as measured.
    let (measured_links, least) = match &findings {
        Some(Ok(f)) => {
            let most = gaps::with_handoffs(&reqs, &links, f.own_most.clone(), |i| f.may_be_handed_off(i));
            // A first call that depended on another agent's answer with no data behind it
            // may have been handed its task, or held back by a permit that answer released:
            // taken for the design at most, never at least.
            let least = gaps::with_handoffs(&reqs, &links, f.own_least.clone(), |_| false);
            (most, Some(basis.read(least)))
        }
        _ => (as_linked(links.local.clone()), None),
    };
    // What the deployment allows is read without the gaps' waits at the client's own limit of
    // calls in flight, where they show (`gaps::AtLimit`): the workload's own work, not its
    // client's queue. Waits of less than 2 % of the time one call at a time would take change
    // no figure worth a word.
    // Nor with the waits of first calls sent again after a refusal: the deployment's cost (its
    // queue, named apart), not work of the workload's.
    let at_limit = (!program)
        .then(|| gaps::at_limit(&reqs, &links, groups, tolerance_us))
        .flatten()
        .and_then(|at| at.take_out(&measured_links).map(|(chained, taken)| (chained, at.k, taken)));
    let retry_base = (!retried.is_empty()).then(|| measured_links.clone());
    let measured = basis.read(measured_links);
    let at_limit = at_limit.filter(|&(_, _, taken)| taken * 50 >= measured.sequential_us);
    let client_waits = at_limit.as_ref().map(|&(_, k, taken)| (k, taken));
    let deployed = at_limit.map(|a| a.0).or(retry_base).map(|mut chained| {
        for &i in &retried {
            chained.local[i] = 0;
        }
        basis.read(chained)
    });

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
                local_s: secs(mine.iter().map(|&i| measured.local[i]).sum()),
                chain_s: secs(mine.iter().map(|&i| measured.chain_end[i]).max().unwrap_or(0)),
                handoffs: mine.iter().filter(|&&i| links.handoff[i]).count(),
                span_s: (
                    secs(mine.iter().map(|&i| reqs[i].start).min().unwrap_or(t0) - t0),
                    secs(mine.iter().map(|&i| reqs[i].end).max().unwrap_or(t0) - t0),
                ),
            }
        })
        .collect();

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
        local_s: secs(measured.local_us),
        load_s: secs(load_us),
        sequential_s: secs(measured.sequential_us),
        ideal_s: secs(measured.ideal_us),
        allowed_s: secs(measured.allowed_us),
        saving: measured.against.and_then(|a| a.saving),
        client_lag_s,
    };
    let concurrency = Concurrency {
        max_in_flight,
        max_decoding,
        possible: if program {
            opts.expected_agents
        } else {
            Some(opts.expected_agents.map_or(groups, |k| k.min(groups)))
        },
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

    let for_deployment = deployed.as_ref().unwrap_or(&measured);
    let lift = |relax: allowed::Relax| basis.lift(for_deployment, relax);
    let deployment = deployment::report(&deployment::Inputs {
        described,
        requests: reqs.len(),
        sequential_us: for_deployment.sequential_us,
        ideal_us: for_deployment.ideal_core.min(for_deployment.sequential_us),
        allowed_us: for_deployment.allowed_us,
        client_waits,
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
        agents: concurrency.possible,
        load_causes: reqs.iter().flat_map(|q| q.r.loads.iter()).map(deployment::load_cause).collect(),
        attention: reqs.iter().map(|q| q.r.attention).sum::<f64>() / reqs.len().max(1) as f64,
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
        gaps: None,
        held: None,
        needs_probe: false,
        rerun: false,
        longer_time_scale: None,
        confirm: None,
        confirmation: None,
    };
    let read_after_s = secs(read_after_us);
    // Fewer in flight than agents could run (a described deployment), a call handed what another
    // freed at that many, no probe run holding more ([`input::most_in_flight`]): what a client
    // held to that many takes is tested against the time lost.
    let unlimited = probe_ran.as_deref().is_some_and(|ran| input::most_in_flight(ran) > max_in_flight);
    let handed = described && !unlimited && gaps::handed_over(&held, max_in_flight, agents::HANDOFF_WINDOW_US);
    let limit = client::could_run_at_once(&report).filter(|&p| handed && max_in_flight < p).map(|_| max_in_flight);
    // The client verdict's figures of one reading; a limit weighed once without the waits the
    // gaps show at it, where they show (the client's queue, as the deployment is read), else per reading.
    let weighed = |r: &reading::Reading| (secs(r.allowed_us), limit.map(|k| secs(basis.limited(r, k))));
    let queue_out = deployed.as_ref().filter(|_| client_waits.is_some()).map(weighed);
    let figures_of = |r: &reading::Reading| {
        let (allowed_s, limited_s) = queue_out.unwrap_or_else(|| weighed(r));
        client::Figures { against: r.against, served: r.served, read_after_s, allowed_s, limited_s, limit_shown }
    };
    let figures = figures_of(&measured);
    let (verdict, cause, reason) = client::verdict(&report, &reqs, &client, handoffs, opts, described, figures);
    report.longer_time_scale = client::started_late(&reqs, opts, &report.time).filter(|_| cause == Cause::TimeScale);
    (report.verdict, report.cause, report.reason) = (verdict, cause, reason);
    if let Some(spacing) = spacing {
        // Calls that never overlapped: whether they waited for each other's answers.
        let probe = probe_ran.as_ref().filter(|_| hold.is_some()).map(|ran| as_seen(ran, &client));
        let void = opts.probe_window().and(opts.probe_void.clone());
        held::settle(&mut report, &spacing, hold, probe.as_deref(), void, trace.time_scale);
    }
    if program && report.verdict == Verdict::Parallel && idle_us >= gaps::LOCAL_WORK_FLOOR_US {
        // An unlabelled program whose requests paused: the pauses read as its agents' own work
        // done together. Done one agent at a time (a blocking tool holding the executor), the
        // same pauses would have taken a share of that, as many agents as ran at once
        // splitting them. Where that reading is not parallel, one run cannot back "parallel".
        let ran_together = max_in_flight.max(1) as u64;
        let low = reading::Basis { idle_in_ideal: idle_us / ran_together, ..basis.clone() }
            .read(as_linked(links.local.clone()));
        let f = figures_of(&low);
        let low_verdict = decision::decide(&client::evidence(&report, &reqs, &client, opts, described, &f)).verdict();
        if low_verdict != Verdict::Parallel {
            report.verdict = Verdict::Inconclusive;
            report.cause = Cause::UnknownAgents;
            report.reason = format!(
                "requests overlapped (up to {max_in_flight} in flight at once), but for {:.2} s none was in flight: the agents' own work between their calls, done together, or done one agent at a time (a blocking call or CPU work holding the executor between two awaited calls), which would not be parallel; not knowing which requests are whose, the judge cannot tell: label each agent's requests with X-Agent, or carry each agent's conversation, and a probe run settles it (read with the pauses as work done together: {})",
                secs(idle_us),
                report.reason
            );
        }
    }
    if let (Some(n), Verdict::Inconclusive) = (&not_recovered, report.verdict) {
        report.reason.push_str(&format!("; {}", n.why));
        // A pause in the probe run would explain it: a second probe run may tell them apart.
        if n.timing {
            report.confirm = Some(ConfirmRun::Probe);
        }
    }
    if let Some(low) = &one_at_a_time {
        let decide = |r: &reading::Reading| {
            decision::decide(&client::evidence(&report, &reqs, &client, opts, described, &figures_of(r))).verdict()
        };
        let low_verdict = decide(low);
        let mut gaps = GapsReport {
            status: GapsStatus::Settled,
            one_at_a_time_local_s: secs(low.local_us),
            one_at_a_time_verdict: low_verdict,
            one_at_a_time_saving: low.against.and_then(|a| a.saving),
            reason: String::new(),
            probe_took_s: None,
            held_s: None,
            waits: Vec::new(),
            probe_agents: Vec::new(),
            handoffs: Vec::new(),
        };
        match findings {
            Some(Ok(found)) => {
                gaps.handoffs = probed::handoffs(&first_run, &found.depended);
                gaps.status = if found.probe.is_some() { GapsStatus::Probed } else { GapsStatus::Known };
                gaps.probe_took_s = found.probe.map(|p| p.0);
                gaps.held_s = found.probe.map(|p| p.1);
                let least_verdict = least.as_ref().map_or(report.verdict, decide);
                let cpu = (opts.client_cpu_wait_us.map(secs), opts.client_cpu_us());
                let verdict = settled::probed(&mut report, &found, (&reqs, &links), least_verdict, cpu);
                gaps.reason = verdict;
                gaps.waits = found.waits;
                gaps.probe_agents = found.probe_agents;
            }
            unprobed => {
                if let Some(Err(why)) = unprobed {
                    gaps.status = GapsStatus::Void;
                    gaps.reason = format!("the probe run is void: {why}; ");
                }
                gaps.handoffs = probed::handoffs(&first_run, &[]);
                // The most generous reading: hand-offs taken as the program's design.
                let generous = handed_off.as_ref().map_or(report.verdict, decide);
                if generous == Verdict::Parallel && low_verdict != Verdict::Parallel {
                    // Read as local work done one agent at a time the gaps are not parallel, or
                    // read with the first calls as hand-offs they are: one run cannot tell
                    // which reading is true.
                    if gaps.status != GapsStatus::Void {
                        gaps.status = GapsStatus::Unprobed;
                    }
                    let handoffs = (report.verdict != Verdict::Parallel).then_some(gaps.handoffs.as_slice());
                    let (cause, reason) = gaps::unprobed(&report, low, low_verdict, handoffs, (&reqs, &links));
                    report.verdict = Verdict::Inconclusive;
                    report.cause = cause;
                    report.reason = format!("{}{reason}", gaps.reason);
                    gaps.reason = report.reason.clone();
                } else {
                    let settled = gaps::settled(&report, low, low_verdict);
                    gaps.reason.push_str(&settled);
                }
            }
        }
        report.gaps = Some(gaps);
    }
    report
}

#[cfg(test)]
mod tests;
