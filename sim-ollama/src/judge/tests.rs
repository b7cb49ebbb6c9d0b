//! The judge on constructed traces, with the figures computed by hand in each test's comment.
//!
//! About 900 lines: the judge's unit tests, each trace built by hand beside the figures it
//! must give, kept out of the judge's own files so they read as the judge.

use super::*;
use crate::trace::{Conversation, DeviceSharing, Load, Wait};
use proptest::prelude::*;

const MS: u64 = 1_000;

/// A request that ran: arrived at `from` ms, first token at once, ended at `to` ms, with a solo
/// cost of `solo` ms.
fn req(id: u64, agent: Option<&str>, from: u64, to: u64, solo: u64) -> RequestTrace {
    RequestTrace {
        agent: agent.unwrap_or("127.0.0.1:5000").into(),
        agent_label: agent.map(str::to_string),
        client: format!("127.0.0.1:{}", 5000 + id),
        solo_us: solo * MS,
        ..RequestTrace::ran(id, from * MS, to * MS)
    }
}

/// What the client saw of each request: `(request, sent, read to the end)`, in ms.
fn read_by_client(calls: &[(u64, u64, u64)]) -> Vec<ClientCall> {
    calls.iter().map(|&(request, sent, end)| ClientCall { request, sent_us: sent * MS, end_us: end * MS }).collect()
}

/// A trace on an ideal deployment: one device that never slows a stream, and more slots than
/// any test has requests (what an infinitely parallel server allows).
fn snap(requests: Vec<RequestTrace>) -> TraceSnapshot {
    on(&[IDEAL_DEVICE], 64, requests)
}

/// A trace that does not describe its deployment (schema 3 and before).
fn legacy(requests: Vec<RequestTrace>) -> TraceSnapshot {
    TraceSnapshot { schema_version: 3, time_scale: 1.0, dropped: 0, requests, devices: Vec::new() }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn agents_awaited_one_after_another_are_serialized_with_hand_computed_figures() {
    // A1 0-100, A2 110-210, B1 220-320, B2 330-430, C1 440-540, C2 550-650 (ms), each 100 ms
    // solo. Local work: each agent's 10 ms between its own calls = 30 ms. One at a time =
    // 600 + 30 = 630 ms; ideal = the longest chain, 100 + 10 + 100 = 210 ms; took 650 ms;
    // saving = (630 - 650) / (630 - 210) = -0.047619.
    let mut t = 0;
    let mut reqs = Vec::new();
    for (i, a) in ["a", "a", "b", "b", "c", "c"].iter().enumerate() {
        reqs.push(req(i as u64 + 1, Some(a), t, t + 100, 100));
        t += 110;
    }
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Serialized, "{r}");
    assert_eq!(r.cause, Cause::Client);
    assert!(r.reason.contains("no two were ever in flight at once"), "{}", r.reason);
    // Gaps of 10 ms between 100 ms calls: no hint about the time scale.
    assert!(!r.reason.contains("a longer time scale tells"), "{}", r.reason);
    assert!(close(r.time.took_s, 0.650), "{r}");
    assert!(close(r.time.local_s, 0.030), "{r}");
    assert!(close(r.time.sequential_s, 0.630), "{r}");
    assert!(close(r.time.ideal_s, 0.210), "{r}");
    assert!(close(r.time.saving.unwrap(), (0.630 - 0.650) / (0.630 - 0.210)), "{r}");
    assert_eq!(r.concurrency.max_in_flight, 1);
    assert_eq!(r.concurrency.possible, Some(3));
    // The verdict did not rest on the saving, so the summary (what snapshots keep) leaves its
    // load-dependent band out.
    assert!(
        r.summary().ends_with("max in flight: 1 of 3\nsaving: n/a (no two requests overlapped)\n"),
        "{}",
        r.summary()
    );
}

#[test]
fn agents_that_ran_together_are_parallel_and_saved_everything() {
    // A1 B1 C1 0-100, local 10 ms each, A2 B2 C2 110-210: took 210 = ideal; one at a time
    // 600 + 30 = 630; saving (630 - 210) / (630 - 210) = 1.
    let mut reqs = Vec::new();
    for (i, a) in ["a", "b", "c"].iter().enumerate() {
        reqs.push(req(i as u64 + 1, Some(a), 0, 100, 100));
        reqs.push(req(i as u64 + 4, Some(a), 110, 210, 100));
    }
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert_eq!(r.cause, Cause::None);
    assert!(r.reason.contains("overlapped"), "{}", r.reason);
    assert!(close(r.time.saving.unwrap(), 1.0), "{r}");
    assert!(close(r.time.ideal_s, 0.210), "{r}");
    assert_eq!(
        r.summary(),
        "verdict: parallel\ncause: none\ndeployment: full (limit: none)\nagents: 3 (X-Agent labels)\nrequests: 6 (0 failed)\nmax in flight: 3 of 3\nsaving: >= 80%\n"
    );
}

#[test]
fn a_two_permit_semaphore_over_four_agents_is_degraded_not_parallel() {
    // A1 B1 0-100; C1 D1 101-201 (they got the permits as A1 and B1 ended); A2 B2 202-302;
    // C2 D2 303-403. A's gap 100-202 ends 1 ms after C1 ended: a hand-off, so its local work
    // is only the time before C1 began, 1 ms (not 102). Each agent: 100 + 1 + 100 = 201 ms.
    // One at a time 800 + 4 = 804; ideal 201; took 403; saving 401 / 603 = 0.665.
    // Counting the whole gaps as local work would read (1208 - 403) / (1208 - 302) = 0.89:
    // parallel, failing open.
    let reqs = r_reqs();
    let r = judge(&snap(reqs.clone()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::PartlySerialized, "{r}");
    assert_eq!(r.cause, Cause::Client, "{r}");
    assert!(close(r.time.local_s, 0.004), "{r}");
    assert!(close(r.time.ideal_s, 0.201), "{r}");
    assert!(close(r.time.saving.unwrap(), 0.401 / 0.603), "{r}");
    assert!(r.reason.contains("at most 2 of 4 agents"), "{}", r.reason);
    assert!(r.reason.contains("4 calls arrived right after another agent's request ended"), "{}", r.reason);
    // Saying the program runs two agents at a time by design makes it parallel.
    let r2 = judge(&snap(reqs), &JudgeOptions::new().expected_agents(2));
    assert_eq!(r2.verdict, Verdict::Parallel, "{r2}");
}

#[test]
fn eight_agents_through_six_workers_are_partly_serialized_though_they_saved_most_of_the_time() {
    // Two calls each of 100 ms, at most six in flight (an executor of six workers, FIFO):
    // a1-f1 0-100; g1 h1 a2 b2 c2 d2 100-200 (g and h queued first); e2 f2 g2 h2 200-300.
    // One at a time 1600, ideal 200 (two calls each, no local work), took 300: a saving of
    // 1300 / 1400 = 0.93, parallel by the times alone; but a client holding six calls at a
    // time takes 300 here, half as long again as the 200 allowed: the limit cost the time.
    let names = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let mut reqs = Vec::new();
    let mut id = 0;
    let mut call = |agent: &str, from: u64| {
        id += 1;
        reqs.push(req(id, Some(agent), from, from + 100, 100));
    };
    for a in &names[..6] {
        call(a, 0);
    }
    for a in ["g", "h", "a", "b", "c", "d"] {
        call(a, 100);
    }
    for a in ["e", "f", "g", "h"] {
        call(a, 200);
    }
    // g's and h's first calls went out as f's answer ended: from one run, a hand-off (their
    // tasks came from it) or a wait; the agents' own work, known here as a probe run measures
    // it (none before any call), says they waited.
    let known = (1..=16).map(|id| (id, std::time::Duration::ZERO));
    let opts = JudgeOptions::new().known_local_work(known);
    let r = judge(&snap(reqs.clone()), &opts);
    assert!(close(r.time.saving.unwrap(), 1.3 / 1.4), "{r}");
    assert_eq!(r.verdict, Verdict::PartlySerialized, "{r}");
    assert_eq!(r.cause, Cause::Client, "{r}");
    assert!(r.reason.contains("at most 6 of 8 agents"), "{}", r.reason);
    assert!(r.reason.contains("a client holding 6 calls at a time takes 0.30 s"), "{}", r.reason);
    assert!(r.reason.contains("(1.5x)"), "{}", r.reason);
    // Six at a time by design (the program says it runs six agents at once): parallel.
    let r6 = judge(&snap(reqs), &opts.expected_agents(6));
    assert_eq!(r6.verdict, Verdict::Parallel, "{r6}");
}

#[test]
fn a_pause_that_kept_one_agent_from_the_others_is_not_taken_for_a_limit() {
    // Eight agents, one call each; a's takes 20 ms, the others 100 ms; h's went out at 50 (a
    // pause of the program), after a's had ended: at most 7 in flight at once. Took 150
    // against 100 allowed, one at a time 720: a saving of 570 / 620 = 0.92. A client held to
    // seven at a time takes 120 (h after a): the limit costs a fifth, not the quarter that
    // would explain the time lost.
    let mut reqs = vec![req(1, Some("a"), 0, 20, 20)];
    for (i, a) in ["b", "c", "d", "e", "f", "g"].iter().enumerate() {
        reqs.push(req(i as u64 + 2, Some(a), 0, 100, 100));
    }
    reqs.push(req(8, Some("h"), 50, 150, 100));
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!(r.concurrency.max_in_flight, 7, "{r}");
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
}

#[test]
fn waits_for_a_pool_smaller_than_the_agents_are_not_the_workloads_own_work_on_one_slot() {
    // Six agents, two 100 ms calls each, through a client of four permits (FIFO) on a server
    // of one slot: a1-d1 sent at 0 end at 100, 200, 300, 400 (queued for the slot); e1 and f1
    // get the permits a1 and b1 freed; each second call gets the permit the call before it in
    // the queue freed (a2 at 300 as c1 ended, ...): four in flight throughout. The client is
    // parallel: the slot, not the permits, set the pace (a client holding four at a time takes
    // the same 1200). No chain of calls hands each permit on from the agent's own answer (the
    // call that freed it began before that answer), so each 200 ms gap reads as the agent's
    // own work: one at a time 2400, the ideal 400, the allowed 1200, 60 % of an ideal server's
    // saving ("partial"). Without those waits: 1200, 200 and 1200, one slot allows no speedup.
    let times = [
        (0, 100),
        (0, 200),
        (0, 300),
        (0, 400),
        (100, 500),
        (200, 600),
        (300, 700),
        (400, 800),
        (500, 900),
        (600, 1000),
        (700, 1100),
        (800, 1200),
    ];
    let calls = |times: &[(u64, u64)]| -> Vec<RequestTrace> {
        let agents = ["a", "b", "c", "d", "e", "f"];
        times.iter().enumerate().map(|(i, &(from, to))| req(i as u64 + 1, Some(agents[i % 6]), from, to, 100)).collect()
    };
    let r = judge(&on(&[IDEAL_DEVICE], 1, calls(&times)), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert_eq!(r.concurrency.max_in_flight, 4, "{r}");
    assert_eq!((r.deployment.verdict, r.deployment.limit), (Allows::NoSpeedup, Limit::Slots), "{r}");
    assert!(r.deployment.reason.contains("against 1.20 s one call at a time"), "{}", r.deployment.reason);
    assert!(
        r.deployment
            .reason
            .contains("the 1.20 s the agents waited between their calls while the client had 4 in flight"),
        "{}",
        r.deployment.reason
    );
    // The client's own figures keep the gaps as measured.
    assert!(close(r.time.sequential_s, 2.4), "{r}");
    // A gap that ended later than a hand-over takes here (a2 sent 50 ms after c1's answer,
    // against 25 ms), where the other gaps show the limit, waited for it too, until c1's answer
    // freed a permit (200 ms); the 50 ms after it, with three in flight, are a's own: all six
    // agents' waits are taken out, less those 50 ms of a's and of b's and c's gaps, which spent
    // them with three in flight while a was late (6 x 200 - 2 x 50 = 1100 ms).
    let mut later = times;
    later[6] = (350, 700);
    let r = judge(&on(&[IDEAL_DEVICE], 1, calls(&later)), &JudgeOptions::new());
    assert!(r.deployment.reason.contains("the 1.10 s the agents waited"), "{}", r.deployment.reason);
}

#[test]
fn first_calls_sent_again_after_the_queue_refused_them_are_not_the_clients_lost_time() {
    // Four agents at once on one slot whose queue is full: a 0-100 and b 0-200 ran, c's and
    // d's first attempts at 0 were refused (HTTP 503) and their SDK sent them again at 500:
    // c 500-600, d 500-700. Read as first calls free to start at 0, the program took 700
    // against the 400 one slot allows, two of four in flight: the client would be blamed for
    // the deployment's refusals. Read from their first attempts, c and d were ready at 500:
    // the client is parallel, and the deployment's figures leave the waits out (one at a time
    // 400, one slot allows 400: no speedup), its queue named.
    let prompt = |mut r: RequestTrace, key: &str| {
        r.prompt_key = Some(key.into());
        r
    };
    let refused = |id: u64, agent: &str| RequestTrace {
        slot_us: None,
        runner_us: None,
        first_token_us: None,
        outcome: Outcome::Error,
        status: 503,
        error: Some("server busy, please try again.  maximum pending requests exceeded".into()),
        prompt_key: Some(format!("{agent}'s task")),
        solo_us: 0,
        ..req(id, Some(agent), 0, 1, 0)
    };
    let reqs = vec![
        prompt(req(1, Some("a"), 0, 100, 100), "a's task"),
        prompt(req(2, Some("b"), 0, 200, 100), "b's task"),
        refused(3, "c"),
        refused(4, "d"),
        prompt(req(5, Some("c"), 500, 600, 100), "c's task"),
        prompt(req(6, Some("d"), 500, 700, 100), "d's task"),
    ];
    let r = judge(&on(&[IDEAL_DEVICE], 1, reqs.clone()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!(r.notes.iter().any(|n| n.contains("2 agents' first calls were sent again")), "{r}");
    assert_eq!(r.deployment.limit, Limit::Queue, "{r}");
    assert_eq!(r.deployment.verdict, Allows::NoSpeedup, "{r}");
    assert!(r.deployment.reason.contains("against 0.40 s one call at a time"), "{}", r.deployment.reason);
    // A call whose prompt is not the refused one's is no retry: c's and d's calls then could
    // have gone at 0, and the time lost is the client's.
    let mut other = reqs;
    other[4].prompt_key = Some("c's other task".into());
    other[5].prompt_key = Some("d's other task".into());
    let r = judge(&on(&[IDEAL_DEVICE], 1, other), &JudgeOptions::new());
    assert_ne!(r.verdict, Verdict::Parallel, "{r}");
}

#[test]
fn a_call_that_went_out_late_with_nothing_in_flight_is_not_taken_for_a_limit() {
    // proptest's case: a 51-65 and b 51-52 (solo 285 and 297 ms: answered faster than their
    // modelled cost), then c at 331-423 (solo 90), two of three in flight at most. A client
    // held to two calls at a time would take 0.38 s here against 0.30 s allowed, and the
    // program took 0.37 s, but such a client would have sent c as a's or b's call ended (at
    // 52), not 266 ms later with nothing in flight: no call was handed what another freed,
    // and the limit is not what the time went to.
    let reqs = vec![req(1, Some("a0"), 51, 65, 285), req(2, Some("a1"), 51, 52, 297), req(3, Some("a2"), 331, 423, 90)];
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert!(!r.reason.contains("a client holding"), "{r}");
    assert!(r.verdict != Verdict::PartlySerialized || r.time.saving.is_some_and(|s| s < PARALLEL_MIN_SAVING), "{r}");
}

fn r_reqs() -> Vec<RequestTrace> {
    vec![
        req(1, Some("a"), 0, 100, 100),
        req(2, Some("b"), 0, 100, 100),
        req(3, Some("c"), 101, 201, 100),
        req(4, Some("d"), 101, 201, 100),
        req(5, Some("a"), 202, 302, 100),
        req(6, Some("b"), 202, 302, 100),
        req(7, Some("c"), 303, 403, 100),
        req(8, Some("d"), 303, 403, 100),
    ]
}

#[test]
fn unlabelled_requests_are_judged_as_a_program_and_need_the_agent_count_for_chains() {
    // Three agents, two generate calls each, concurrent, 10 ms of local work between: no labels,
    // no conversations. As a program: one at a time = 600 + idle 10 = 610; ideal = the longest
    // request 100 + idle 10 = 110; took 210: saving (610 - 210) / 500 = 0.8, the edge. Told
    // there are 3 agents: ideal = 600 / 3 + 10 = 210, saving 1.
    let mut reqs = Vec::new();
    for i in 0..3 {
        reqs.push(req(i + 1, None, 0, 100, 100));
        reqs.push(req(i + 4, None, 110, 210, 100));
    }
    let r = judge(&snap(reqs.clone()), &JudgeOptions::new());
    assert_eq!(r.agents_from, AgentSource::Program);
    assert!(close(r.time.saving.unwrap(), 0.8), "{r}");
    assert!(r.notes.iter().any(|n| n.contains("label them")), "{:?}", r.notes);
    let r3 = judge(&snap(reqs), &JudgeOptions::new().expected_agents(3));
    assert!(close(r3.time.saving.unwrap(), 1.0), "{r3}");
    assert_eq!(r3.verdict, Verdict::Parallel, "{r3}");
}

#[test]
fn unlabelled_requests_that_never_overlap_are_serialized_never_per_connection() {
    // One shared pooled connection, three agents awaited in turn: each request on the same
    // client address. A judge per connection would see one agent and call it fine.
    let mut reqs = Vec::new();
    for i in 0..6u64 {
        let mut r = req(i + 1, None, i * 110, i * 110 + 100, 100);
        r.client = "127.0.0.1:40000".into();
        reqs.push(r);
    }
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Serialized, "{r}");
    assert!(r.reason.contains("no X-Agent labels"), "{}", r.reason);
    assert_eq!(r.concurrency.connections, 1);
}

#[test]
fn chat_turns_chain_into_conversations_without_labels() {
    // Three conversations of two turns, concurrent: each second turn's parent is its first
    // turn's key. Chains of 100 + 10 + 100 ms: ideal 210 = took: parallel.
    let mut reqs = Vec::new();
    for i in 0..3u64 {
        let mut a = req(i + 1, None, 0, 100, 100);
        a.endpoint = "/api/chat".into();
        a.conversation = Some(Conversation { key: format!("k{i}"), parent: None });
        let mut b = req(i + 4, None, 110, 210, 100);
        b.endpoint = "/api/chat".into();
        b.conversation = Some(Conversation { key: format!("k{i}-2"), parent: Some(format!("k{i}")) });
        reqs.push(a);
        reqs.push(b);
    }
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!(r.agents_from, AgentSource::Conversations, "{r}");
    assert_eq!(r.agents.len(), 3, "{r}");
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!(close(r.time.ideal_s, 0.210), "{r}");
}

#[test]
fn identical_conversations_chain_one_to_one() {
    // Two agents with the same first turn: each earlier turn continues into one later turn.
    let mut reqs = Vec::new();
    for i in 0..2u64 {
        let mut a = req(i + 1, None, 0, 100, 100);
        a.conversation = Some(Conversation { key: "same".into(), parent: None });
        let mut b = req(i + 3, None, 110, 210, 100);
        b.conversation = Some(Conversation { key: format!("next{i}"), parent: Some("same".into()) });
        reqs.push(a);
        reqs.push(b);
    }
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!(r.agents.len(), 2, "{r}");
    assert!(r.agents.iter().all(|a| a.requests == 2), "{r}");
}

#[test]
fn nothing_one_request_or_one_agent_is_inconclusive() {
    let r = judge(&snap(Vec::new()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive);
    assert!(r.reason.contains("no model request reached the simulator"), "{}", r.reason);
    let r = judge(&snap(vec![req(1, Some("a"), 0, 100, 100)]), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive);
    let one_agent = vec![req(1, Some("a"), 0, 100, 100), req(2, Some("a"), 110, 210, 100)];
    let r = judge(&snap(one_agent.clone()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert!(r.reason.contains("one agent (a)"), "{}", r.reason);
    // ...unless the program says it has more agents: then it is serialized.
    let r = judge(&snap(one_agent), &JudgeOptions::new().expected_agents(2));
    assert_eq!(r.verdict, Verdict::Serialized, "{r}");
}

#[test]
fn refused_requests_are_failures_and_loads_are_not_requests() {
    let mut refused = req(1, Some("a"), 0, 1, 0);
    refused.slot_us = None;
    refused.outcome = Outcome::Error;
    refused.status = 404;
    refused.error = Some("model 'x' not found".into());
    let mut load = req(2, Some("a"), 0, 50, 0);
    load.slot_us = None;
    load.tokens = 0;
    let r = judge(&snap(vec![refused, load]), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert_eq!(r.requests, 0);
    assert_eq!(r.failed, 1);
    assert!(r.reason.contains("failed before it ran"), "{}", r.reason);
}

/// A (100 ms of work) and B (100 ms) arrive together; B waits `wait_ms` for the one slot.
fn waited_for_the_slot(wait_ms: u64) -> Vec<RequestTrace> {
    let a = req(1, Some("a"), 0, 100, 100);
    let mut b = req(2, Some("b"), 0, 100 + wait_ms, 100);
    b.slot_us = Some(wait_ms * MS);
    b.first_token_us = Some(wait_ms * MS);
    b.waits.push(Wait { reason: WaitReason::SlotBusy, from_us: 0, to_us: Some(wait_ms * MS), detail: "1/1".into() });
    vec![a, b]
}

/// The trace on a described deployment: every request's runner has `slots` slots, and the
/// devices share as given.
fn on(devices: &[DeviceSharing], slots: usize, mut requests: Vec<RequestTrace>) -> TraceSnapshot {
    for r in &mut requests {
        r.slots = slots;
    }
    TraceSnapshot { schema_version: 4, time_scale: 1.0, dropped: 0, requests, devices: devices.to_vec() }
}

const IDEAL_DEVICE: DeviceSharing = DeviceSharing {
    batch_penalty: 0.0,
    cross_process_efficiency: 1.0,
    cross_process_attention_efficiency: None,
    attention_batch_penalty: 0.0,
};

#[test]
fn one_slot_is_the_deployments_limit_and_not_the_clients() {
    // B arrived with A but waited 100 ms for the one slot: took 200 = one at a time. The
    // replay of a perfectly concurrent client on one slot takes 200 too: the deployment allows
    // no saving, the agents' calls were in flight together: client-parallel.
    let r = judge(&on(&[IDEAL_DEVICE], 1, waited_for_the_slot(100)), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert_eq!(r.cause, Cause::None);
    assert!(r.reason.contains("as far as the deployment allows"), "{}", r.reason);
    assert!(close(r.time.allowed_s, 0.200), "{r}");
    assert_eq!(r.time.saving, None, "nothing to save on this deployment: {r}");
    assert_eq!(r.deployment.verdict, Allows::NoSpeedup, "{r}");
    assert_eq!(r.deployment.limit, Limit::Slots, "{r}");
    assert!(
        r.deployment.reason.contains("1 parallel slot") && r.deployment.reason.contains("OLLAMA_NUM_PARALLEL=2"),
        "{}",
        r.deployment.reason
    );
    assert!(close(r.deployment.share.unwrap(), 0.0), "{r}");
    assert_eq!(r.concurrency.max_in_flight, 2);
    assert_eq!(r.concurrency.max_decoding, 1);
}

#[test]
fn a_shortfall_in_a_trace_that_does_not_describe_its_deployment_is_inconclusive() {
    // The same slot wait in a trace without its deployment (schema 3): the judge cannot tell
    // the slot's time from the client's, and says so instead of blaming either.
    let r = judge(&legacy(waited_for_the_slot(60)), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert_eq!(r.cause, Cause::UnknownDeployment);
    assert_eq!(r.deployment.verdict, Allows::Unknown, "{r}");
    assert!(r.reason.contains("does not describe its deployment"), "{}", r.reason);
}

#[test]
fn a_shared_device_gives_no_speedup_and_the_client_that_overlapped_is_parallel() {
    // Instances 0 and 1 on one device at 78 %: both decoded together at 39 % of solo speed:
    // 100 ms of work each took 256 ms; one at a time would have taken 200. The replay gives
    // 100 / 0.39 = 256.4 ms: overlapping is slower than taking turns; the client lost nothing.
    let mut a = req(1, Some("a"), 0, 256, 100);
    let mut b = req(2, Some("b"), 0, 256, 100);
    for r in [&mut a, &mut b] {
        r.mean_speed = 0.39;
        r.shared_device_with = vec![1];
    }
    b.instance = 1;
    let gpu = DeviceSharing {
        batch_penalty: 0.0,
        cross_process_efficiency: 0.78,
        cross_process_attention_efficiency: None,
        attention_batch_penalty: 0.0,
    };
    let r = judge(&on(&[gpu], 1, vec![a, b]), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!(close(r.time.allowed_s, 0.1 / 0.39), "{r}");
    assert_eq!(r.deployment.verdict, Allows::NoSpeedup, "{r}");
    assert_eq!(r.deployment.limit, Limit::SharedDevice, "{r}");
    assert!(r.deployment.reason.contains("instances 0 and 1 share device 0"), "{}", r.deployment.reason);
    assert!(r.deployment.reason.contains("slower than taking turns"), "{}", r.deployment.reason);
    assert!(r.deployment.speedup.unwrap() < 1.0, "{r}");
}

#[test]
fn a_client_slower_than_anything_the_deployment_explains_lost_the_time_itself() {
    // One slot, two agents in flight together, but the run took 500 ms where the deployment
    // explains 200 (one at a time, and its best): 2.5x, serialized in the client.
    let mut reqs = waited_for_the_slot(100);
    reqs[1].end_us = Some(500 * MS);
    let r = judge(&on(&[IDEAL_DEVICE], 1, reqs), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Serialized, "{r}");
    assert_eq!(r.cause, Cause::Client, "{r}");
    assert!(r.reason.contains("2.5x the time the deployment explains"), "{}", r.reason);
    assert_eq!(r.deployment.limit, Limit::Slots, "{r}");
}

#[test]
fn runners_reloaded_for_other_options_take_turns_and_the_client_that_overlapped_is_parallel() {
    // Issue 27 (`pitfall_options_reload`): four slots, agents a and b of one 100 ms call each,
    // sent together, asking num_ctx 2048 and 4096. a ran 0-100 on the loaded runner; b waited
    // for it to finish, for a 50 ms reload (100-150), and ran 150-250. One at a time: 200 + 50
    // of loads = 250; an ideal server 100 + 50 = 150; took 250. Replaying the calls side by side
    // (no exclusion) allows 100 + 50 = 150: the client would have saved nothing of 100 allowed,
    // serialized. The reload shows the runners exclude each other: a perfectly concurrent
    // client takes 200 + 50 = 250 too, so the deployment allows no saving and the overlap
    // decides: client-parallel, the reload named with its fix.
    let mut a = req(1, Some("a"), 0, 100, 100);
    a.options = serde_json::json!({"num_ctx": 2048});
    let mut b = req(2, Some("b"), 0, 250, 100);
    b.options = serde_json::json!({"num_ctx": 4096});
    b.runner_us = Some(150 * MS);
    b.slot_us = Some(150 * MS);
    b.first_token_us = Some(150 * MS);
    b.loads.push(Load {
        start_us: 100 * MS,
        duration_us: 50 * MS,
        cold: false,
        reason: "reload for runner options: num_ctx 2048 -> 4096".into(),
        // A trace from before the structured cause: the reason is read.
        cause: None,
    });
    let r = judge(&on(&[IDEAL_DEVICE], 4, vec![a.clone(), b.clone()]), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!(close(r.time.allowed_s, 0.25) && close(r.time.sequential_s, 0.25), "{r}");
    assert_eq!(r.deployment.verdict, Allows::NoSpeedup, "{r}");
    assert_eq!(r.deployment.limit, Limit::Loads, "{r}");
    assert!(
        r.deployment.reason.contains("1 reload because requests asked for other runner options (num_ctx 2048 -> 4096)"),
        "{}",
        r.deployment.reason
    );
    // The structured cause, when the trace has it, is what is read: the words are for people.
    let mut c = b.clone();
    c.loads[0].reason = "reloaded".into();
    c.loads[0].cause = Some(crate::trace::LoadCause::Reload { changed: "num_ctx 2048 -> 4096".into() });
    let r = judge(&on(&[IDEAL_DEVICE], 4, vec![a.clone(), c]), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!(r.deployment.reason.contains("(num_ctx 2048 -> 4096)"), "{}", r.deployment.reason);
    // Without the reload in the trace nothing says the runners excluded each other: the same
    // times are a client that held b back.
    b.loads.clear();
    let r = judge(&on(&[IDEAL_DEVICE], 4, vec![a, b]), &JudgeOptions::new());
    assert_ne!(r.verdict, Verdict::Parallel, "{r}");
}

#[test]
fn two_slots_for_four_agents_let_half_the_saving_and_the_client_is_judged_against_that() {
    // Four agents of one 100 ms call each, two slots: a perfectly concurrent client takes 200
    // (two waves); one at a time 400; an ideal server 100. A client that sent them together
    // took 200: client-parallel (saving (400 - 200) / (400 - 200) = 1), and the deployment
    // allows (400 - 200) / (400 - 100) = 67 % of the ideal saving: partial, by its slots.
    let mut reqs = Vec::new();
    for (i, a) in ["a", "b", "c", "d"].iter().enumerate() {
        let (from, to) = if i < 2 { (0, 100) } else { (0, 200) };
        let mut r = req(i as u64 + 1, Some(a), from, to, 100);
        if i >= 2 {
            r.slot_us = Some(100 * MS);
        }
        reqs.push(r);
    }
    let r = judge(&on(&[IDEAL_DEVICE], 2, reqs.clone()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!(close(r.time.saving.unwrap(), 1.0), "{r}");
    assert_eq!(r.deployment.verdict, Allows::Partial, "{r}");
    assert!(close(r.deployment.share.unwrap(), 2.0 / 3.0), "{r}");
    assert_eq!(r.deployment.limit, Limit::Slots, "{r}");
    assert!(r.deployment.reason.contains("OLLAMA_NUM_PARALLEL=4"), "{}", r.deployment.reason);
    // The same program on a four-slot deployment lost half of what it could save: a client
    // that sent two calls at a time (took 200 against 100 allowed, 400 one at a time: 67 %).
    let r = judge(&on(&[IDEAL_DEVICE], 4, reqs), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::PartlySerialized, "{r}");
    assert_eq!(r.cause, Cause::Client, "{r}");
    assert_eq!(r.deployment.verdict, Allows::Full, "{r}");
    assert_eq!(r.deployment.limit, Limit::None, "{r}");
}

#[test]
fn unlabelled_agents_that_lost_time_are_inconclusive_and_the_server_is_not_blamed() {
    // Three unlabelled agents (no X-Agent, no conversations) make three 100 ms calls each, in
    // turn, all three agents at once, after waiting together for one 500 ms cold load. The
    // judge, not knowing the agents, assumes all nine could run at once: one at a time 900 +
    // 500 = 1400, allowed (and ideal) 100 + 500 = 600, took 300 + 500 = 800: saving 75 %. It
    // must say it could not tell the agents apart, not blame the load or the server.
    let mut reqs = Vec::new();
    let mut id = 0;
    for round in 0..3u64 {
        for _agent in 0..3 {
            id += 1;
            let from = 500 + round * 100;
            let mut r = req(id, None, if round == 0 { 0 } else { from }, from + 100, 100);
            if round == 0 {
                r.slot_us = Some(500 * MS);
                r.loads.push(Load {
                    start_us: 0,
                    duration_us: 500 * MS,
                    cold: true,
                    reason: "not loaded".into(),
                    cause: None,
                });
                r.waits.push(Wait {
                    reason: WaitReason::ModelLoading,
                    from_us: 0,
                    to_us: Some(500 * MS),
                    detail: String::new(),
                });
            }
            reqs.push(r);
        }
    }
    let r = judge(&snap(reqs.clone()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert_eq!(r.cause, Cause::UnknownAgents, "{r}");
    assert!(r.reason.contains("could not tell the agents apart") && r.reason.contains("--agents N"), "{}", r.reason);
    assert!(!r.reason.contains("server"), "{}", r.reason);
    // Told there are three agents: 900 / 3 + 500 = 800 ideal: took 800, parallel.
    let r = judge(&snap(reqs), &JudgeOptions::new().expected_agents(3));
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
}

#[test]
fn loads_count_on_both_sides() {
    // A 50 ms load before two parallel requests: one at a time 200 + 50; ideal 100 + 50; took
    // 150: saving 1.
    let mut a = req(1, Some("a"), 0, 150, 100);
    let mut b = req(2, Some("b"), 0, 150, 100);
    for r in [&mut a, &mut b] {
        r.slot_us = Some(50 * MS);
        r.loads.push(Load { start_us: 0, duration_us: 50 * MS, cold: false, reason: "not loaded".into(), cause: None });
    }
    let r = judge(&snap(vec![a, b]), &JudgeOptions::new());
    assert!(close(r.time.load_s, 0.050), "{r}");
    assert!(close(r.time.saving.unwrap(), 1.0), "{r}");
}

#[test]
fn calls_made_together_but_received_one_at_a_time_blame_the_connection_pool() {
    // Client view: both calls made at 0; the server got B only when A ended.
    let a = req(1, Some("a"), 0, 100, 100);
    let b = req(2, Some("b"), 100, 200, 100);
    let calls = read_by_client(&[(1, 0, 100), (2, 0, 200)]);
    let r = judge(&snap(vec![a.clone(), b.clone()]), &JudgeOptions::new().client_calls(calls));
    assert_eq!(r.verdict, Verdict::Serialized, "{r}");
    assert_eq!(r.cause, Cause::ConnectionPool, "{r}");
    assert!(r.reason.contains("connection pool"), "{}", r.reason);
    // Without the client's view, the same trace blames the client in general.
    let r = judge(&snap(vec![a, b]), &JudgeOptions::new());
    assert_eq!(r.cause, Cause::Client, "{r}");
}

#[test]
fn calls_that_never_overlapped_after_gaps_longer_than_themselves_ask_for_a_probe_holding_answers() {
    // Three crews' calls of 50 ms, each started 200 ms after the previous one ended (a
    // framework polling a lock between starts, at time scale 0.1): serialized, as they never
    // overlapped, and a probe run holding each answer (the longest gap, a quarter more, and the
    // tolerance: 200 * 1.25 + 12.5 ms) asked for to tell whether that gap was waiting.
    let reqs = vec![req(1, Some("a"), 0, 50, 50), req(2, Some("b"), 250, 300, 50), req(3, Some("c"), 500, 550, 50)];
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!((r.verdict, r.cause), (Verdict::Serialized, Cause::Client), "{r}");
    assert!(
        r.reason.contains("each call started 200 ms after the previous one ended (median; calls of 50 ms)")
            && r.reason.contains("a probe run holding each answer 262 ms tells"),
        "{}",
        r.reason
    );
    assert_eq!(r.held.as_ref().map(|h| h.status), Some(HeldStatus::Unprobed), "{r}");
    assert!(r.needs_probe, "{r}");
    // Gaps of 6 s: a hold that long is not made; a longer time scale tells (4 x 6000 / 50 x
    // the trace's time scale 1: real speed at most).
    let reqs = vec![req(1, Some("a"), 0, 50, 50), req(2, Some("b"), 6050, 6100, 50)];
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!((r.verdict, r.cause), (Verdict::Serialized, Cause::Client), "{r}");
    assert_eq!(r.held.as_ref().map(|h| h.status), Some(HeldStatus::TooLong), "{r}");
    assert!(r.reason.contains("a longer time scale tells (about 1, real speed)"), "{}", r.reason);
    assert!(!r.needs_probe, "{r}");
    // The same crews on a machine too busy to run the simulator on time: each call measured
    // 300 ms where its modelled length is 50 ms. The gaps are held against the calls' modelled
    // length, so the probe is still asked for (it was not, and the run read serialized).
    let reqs = vec![req(1, Some("a"), 0, 300, 50), req(2, Some("b"), 500, 800, 50), req(3, Some("c"), 1000, 1300, 50)];
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!(r.held.as_ref().map(|h| h.status), Some(HeldStatus::Unprobed), "{r}");
    assert!(r.needs_probe, "{r}");
    // A gap of 2 ms: the next call went out as the answer was read, no probe.
    let reqs = vec![req(1, Some("a"), 0, 50, 50), req(2, Some("b"), 52, 102, 50)];
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!((r.verdict, r.held.is_none(), r.needs_probe), (Verdict::Serialized, true, false), "{r}");
    // Gaps shorter than the calls, or than the floor of a client's own work between calls: a
    // probe too (a gap this short is no proof of waiting), held at least 50 ms.
    for second in [60, 150] {
        let reqs = vec![req(1, Some("a"), 0, 50, 50), req(2, Some("b"), second, second + 50, 50)];
        let r = judge(&snap(reqs), &JudgeOptions::new());
        assert_eq!((r.verdict, r.cause, r.needs_probe), (Verdict::Serialized, Cause::Client, true), "{r}");
        assert_eq!(r.held.as_ref().map(|h| h.status), Some(HeldStatus::Unprobed), "{r}");
    }
}

#[test]
fn a_launchers_agents_started_further_apart_than_their_short_calls_are_not_blamed() {
    // Six unlabelled threads started 40 ms apart, each one call of 31 ms (time scale 0.05):
    // the calls never overlap and the gaps (9 ms) are shorter than the calls and than any
    // client's turnaround. One run cannot tell this from calls awaited in turn; the probe run
    // holds each answer (at least 50 ms) and the launcher's next thread calls while it is
    // held: not serialized, inconclusive at this time scale, judged again where calls outlast
    // the starts' spacing (2 x 40 / 31 x 0.05 = 0.13). A program awaiting each answer in
    // turn, the same times in its first run, waits for the held answer: serialized stands.
    let first: Vec<_> = (0..6u64).map(|i| req(i + 1, None, i * 40, i * 40 + 31, 31)).collect();
    let scaled = |mut s: crate::trace::TraceSnapshot| {
        s.time_scale = 0.05;
        s
    };
    let r = judge(&scaled(snap(first.clone())), &JudgeOptions::new());
    assert_eq!((r.verdict, r.cause), (Verdict::Serialized, Cause::Client), "{r}");
    assert!(r.needs_probe, "the first run alone asks for the probe: {r}");
    let plan = probe_plan(&scaled(snap(first.clone())), &JudgeOptions::new());
    let hold = plan.hold.expect("every answer held");
    assert!(hold.hold_us >= 50_000, "{hold:?}");
    // The probe run: each answer held 50 ms. The launcher's threads still start 40 ms apart.
    let launcher: Vec<_> = (0..6u64)
        .map(|i| {
            let mut q = req(100 + i, None, 1000 + i * 40, 1000 + i * 40 + 81, 31);
            q.held_us = 50_000;
            q
        })
        .collect();
    let mut both = first.clone();
    both.extend(launcher);
    let r = judge(&scaled(snap(both)), &JudgeOptions::new().probe_since(100));
    assert_eq!((r.verdict, r.cause), (Verdict::Inconclusive, Cause::TimeScale), "{r}");
    assert_eq!(r.held.as_ref().map(|h| h.status), Some(HeldStatus::DidNotWait), "{r}");
    let longer = r.longer_time_scale.expect("the longer time scale named");
    assert!((0.12..0.14).contains(&longer), "{longer}");
    // In turn: each call 9 ms after the held answer's end.
    let in_turn: Vec<_> = (0..6u64)
        .map(|i| {
            let mut q = req(100 + i, None, 1000 + i * 90, 1000 + i * 90 + 81, 31);
            q.held_us = 50_000;
            q
        })
        .collect();
    let mut both = first;
    both.extend(in_turn);
    let r = judge(&scaled(snap(both)), &JudgeOptions::new().probe_since(100));
    assert_eq!((r.verdict, r.cause), (Verdict::Serialized, Cause::Client), "{r}");
    assert_eq!(r.held.as_ref().map(|h| h.status), Some(HeldStatus::Waited), "{r}");
}

#[test]
fn calls_whose_starts_follow_the_answers_before_them_are_serialized_without_a_probe() {
    // An SDK awaiting each answer in turn (ollama-python's AsyncClient leaves 14 ms): answers of
    // 47-70 ms, each next call 13-15 ms after the one before ended. The starts moved with the
    // answers' ends: each call waited for its answer, from the run judged, no probe run.
    let run = |calls: &[u64], gaps: &[u64]| {
        let mut t = 0;
        let mut reqs = Vec::new();
        for (i, &c) in calls.iter().enumerate() {
            reqs.push(req(i as u64 + 1, None, t, t + c, c));
            t += c + gaps.get(i).copied().unwrap_or(0);
        }
        judge(&snap(reqs), &JudgeOptions::new())
    };
    let calls = [70, 56, 53, 47, 61, 58];
    let r = run(&calls, &[14, 15, 13, 14, 14]);
    assert_eq!((r.verdict, r.cause, r.needs_probe), (Verdict::Serialized, Cause::Client, false), "{r}");
    assert_eq!(r.held.as_ref().map(|h| h.status), Some(HeldStatus::Followed), "{r}");
    assert!(r.reason.contains("its start moved with that answer's end"), "{}", r.reason);
    // A launcher starting the same calls 80 ms apart: the starts steady, the gaps as uneven as
    // the calls (10-33 ms). Its own delay, perhaps: the probe run tells.
    let stagger: Vec<u64> = calls.iter().map(|c| 80 - c).collect();
    let r = run(&calls, &stagger);
    assert_eq!((r.verdict, r.needs_probe), (Verdict::Serialized, true), "{r}");
    assert_eq!(r.held.as_ref().map(|h| h.status), Some(HeldStatus::Unprobed), "{r}");
    // A stagger of its own as uneven as the in-turn starts (84, 70, 67, 61, 75 ms apart), not
    // moving with the answers: the gaps spread more than the starts. Probed.
    let shuffled = [47, 70, 61, 53, 56, 58];
    let starts = [84, 70, 67, 61, 75];
    let gaps: Vec<u64> = shuffled.iter().zip(starts).map(|(c, s)| s - c).collect();
    let r = run(&shuffled, &gaps);
    assert_eq!(r.held.as_ref().map(|h| h.status), Some(HeldStatus::Unprobed), "{r}");
    // Calls all of one length cannot show it (a launcher's 31 ms calls, above); nor can four
    // gaps: probed.
    let r = run(&[70, 56, 53, 47, 61], &[14, 15, 13, 14]);
    assert_eq!(r.held.as_ref().map(|h| h.status), Some(HeldStatus::Unprobed), "{r}");
}

#[test]
fn answers_read_late_blame_a_blocked_executor() {
    // The server ended both at 100 ms; the client finished reading A at 100 and B at 200.
    // Took (client) 200 = one at a time: saving 0; median lag 50 ms > a quarter of 100 ms.
    let calls = read_by_client(&[(1, 0, 100), (2, 0, 200)]);
    let reqs = vec![req(1, Some("a"), 0, 100, 100), req(2, Some("b"), 0, 100, 100)];
    let r = judge(&snap(reqs), &JudgeOptions::new().client_calls(calls));
    assert_eq!(r.verdict, Verdict::Serialized, "{r}");
    assert_eq!(r.cause, Cause::ClientLag, "{r}");
    assert!(r.reason.contains("executor was blocked"), "{}", r.reason);
    assert!(close(r.time.client_lag_s.unwrap(), 0.050), "{r}");
}

#[test]
fn answers_read_late_by_a_client_starved_of_cpu_are_inconclusive_and_run_again() {
    // The blocked executor above (took 200 against 100 allowed: 100 ms lost), with the client's
    // threads known to have waited for a CPU during the run: 150 ms, more than the time lost,
    // is a machine too busy to run them (a blocked executor's threads sleep or run, they do
    // not wait for a CPU): inconclusive, run again. 20 ms of waiting explains none of it.
    let calls = read_by_client(&[(1, 0, 100), (2, 0, 200)]);
    let reqs = vec![req(1, Some("a"), 0, 100, 100), req(2, Some("b"), 0, 100, 100)];
    let starved =
        JudgeOptions::new().client_calls(calls.clone()).client_cpu_wait(std::time::Duration::from_millis(150));
    let r = judge(&snap(reqs.clone()), &starved);
    assert_eq!((r.verdict, r.cause), (Verdict::Inconclusive, Cause::ClientLag), "{r}");
    assert!(r.reason.contains("waited 0.15 s in all for a CPU"), "{}", r.reason);
    assert!(r.needs_rerun(), "{r}");
    let busy = JudgeOptions::new().client_calls(calls).client_cpu_wait(std::time::Duration::from_millis(20));
    let r = judge(&snap(reqs), &busy);
    assert_eq!((r.verdict, r.cause), (Verdict::Serialized, Cause::ClientLag), "{r}");
    assert!(!r.needs_rerun(), "{r}");
}

#[test]
fn a_stall_reading_the_last_answer_is_inconclusive_not_blamed() {
    // The server ended both at 100 ms; the client read A at 100 and B at 140: a 40 ms stall of
    // one read (median lag 20 ms, under a quarter of the 100 ms requests). Took 140 against 100
    // allowed and 200 one at a time: 60 % saved, but all of the shortfall is in that read.
    let calls = read_by_client(&[(1, 0, 100), (2, 0, 140)]);
    let reqs = vec![req(1, Some("a"), 0, 100, 100), req(2, Some("b"), 0, 100, 100)];
    let r = judge(&snap(reqs.clone()), &JudgeOptions::new().client_calls(calls));
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert_eq!(r.cause, Cause::ClientLag, "{r}");
    assert!(r.reason.contains("read it 40 ms later") && r.reason.contains("busy machine"), "{}", r.reason);
    assert!(r.needs_rerun(), "a stall that may be the machine's asks for another run: {r}");
    // A call held back as well (B sent at 30 ms, so B's server side ends at 130): the shortfall
    // is not all in reading, and the client is blamed.
    let calls = read_by_client(&[(1, 0, 100), (2, 30, 170)]);
    let reqs = vec![req(1, Some("a"), 0, 100, 100), req(2, Some("b"), 30, 130, 100)];
    let r = judge(&snap(reqs), &JudgeOptions::new().client_calls(calls));
    assert_eq!(r.verdict, Verdict::PartlySerialized, "{r}");
    assert_eq!(r.cause, Cause::Client, "{r}");
    assert!(!r.needs_rerun(), "the client's own shortfall is not run again: {r}");
}

#[test]
fn one_chain_that_is_all_the_work_is_inconclusive() {
    // A: 1000 ms; B: 10 ms alongside. One at a time 1010, ideal 1000: less than 5 % to save.
    let reqs = vec![req(1, Some("a"), 0, 1000, 1000), req(2, Some("b"), 0, 10, 10)];
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert_eq!(r.time.saving, None);
}

#[test]
fn since_judges_only_what_came_after_the_mark() {
    let reqs = vec![
        req(1, Some("a"), 0, 100, 100),
        req(2, Some("b"), 110, 210, 100),
        req(3, Some("a"), 300, 400, 100),
        req(4, Some("b"), 300, 400, 100),
    ];
    let all = judge(&snap(reqs.clone()), &JudgeOptions::new());
    let later = judge(&snap(reqs), &JudgeOptions::new().since(3));
    assert_eq!(all.requests, 4);
    assert_eq!(later.requests, 2);
    assert_eq!(later.verdict, Verdict::Parallel, "{later}");
}

#[test]
fn the_report_round_trips_through_json_with_its_schema_version() {
    let reqs = vec![req(1, Some("a"), 0, 100, 100), req(2, Some("b"), 0, 100, 100)];
    let r = judge(&snap(reqs), &JudgeOptions::new());
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["schema_version"], 3);
    assert_eq!(j["deployment"]["verdict"], "full");
    assert_eq!(j["verdict"], "parallel");
    assert_eq!(j["cause"], "none");
    let back: Report = serde_json::from_value(j).unwrap();
    assert_eq!(back, r);
}

/// Random traces whose requests never overlap: arrival order, gaps, labels, solo costs and
/// connections all random.
fn sequential_trace() -> impl Strategy<Value = (Vec<RequestTrace>, Option<usize>)> {
    let one = (0u64..50, 1u64..200, 0u64..300, prop::option::of(0usize..4), 0u64..3);
    (prop::collection::vec(one, 2..12), prop::option::of(1usize..6)).prop_map(|(parts, expected)| {
        let mut t = 0;
        let mut reqs = Vec::new();
        for (i, (gap, dur, solo, agent, conn)) in parts.into_iter().enumerate() {
            t += gap;
            let label = agent.map(|a| format!("agent-{a}"));
            let mut r = req(i as u64 + 1, label.as_deref(), t, t + dur, solo);
            r.client = format!("127.0.0.1:{}", 4000 + conn);
            reqs.push(r);
            t += dur;
        }
        (reqs, expected)
    })
}

proptest! {
    /// The rule the judge must never break: requests that never overlapped are never parallel.
    #[test]
    fn requests_that_never_overlap_are_never_parallel((reqs, expected) in sequential_trace()) {
        let mut opts = JudgeOptions::new();
        if let Some(k) = expected {
            opts = opts.expected_agents(k);
        }
        let r = judge(&snap(reqs), &opts);
        prop_assert_ne!(r.verdict, Verdict::Parallel, "{}", r);
        prop_assert_ne!(r.verdict, Verdict::PartlySerialized, "{}", r);
    }

    /// Verdict and figures agree: parallel only at a saving of 80 % or more, serialized or
    /// degraded only with a saving below it (or no overlap at all), unless the reason names the
    /// client's limit on calls in flight: held to *k* at a time, a client saves most of what
    /// running together can and is partly serialized where the replay held to *k* takes the
    /// time it took (docs/judge.md, "A limit on the calls in flight"; proptest found such
    /// traces: three in flight until 124 ms, the next call 95-116 ms later).
    #[test]
    fn verdict_and_saving_never_disagree(
        parts in prop::collection::vec((0u64..400, 1u64..300, 1u64..300, 0usize..4), 2..10)
    ) {
        let reqs: Vec<RequestTrace> = parts
            .iter()
            .enumerate()
            .map(|(i, (from, dur, solo, a))| req(i as u64 + 1, Some(&format!("a{a}")), *from, from + dur, *solo))
            .collect();
        let r = judge(&snap(reqs), &JudgeOptions::new());
        match r.verdict {
            Verdict::Parallel => prop_assert!(r.time.saving.is_some_and(|s| s >= PARALLEL_MIN_SAVING), "{}", r),
            Verdict::PartlySerialized if r.reason.contains("a client holding") => {
                prop_assert!(r.time.saving.is_some_and(|s| s > SERIALIZED_MAX_SAVING), "{}", r);
                prop_assert!(r.reason.contains("that limit, not the deployment, cost the time"), "{}", r);
            }
            Verdict::PartlySerialized => prop_assert!(r.time.saving.is_some_and(|s| s < PARALLEL_MIN_SAVING && s > SERIALIZED_MAX_SAVING), "{}", r),
            Verdict::Serialized => prop_assert!(r.concurrency.max_in_flight <= 1 || r.time.saving.is_some_and(|s| s <= SERIALIZED_MAX_SAVING), "{}", r),
            Verdict::Inconclusive | Verdict::Failed => {}
        }
    }
}

#[test]
fn a_lock_passed_through_every_agent_is_a_chain_of_hand_offs() {
    // A mutex per call, three agents: A1 0-100, B1 101-201, C1 202-302, A2 303-403, B2 404-504,
    // C2 505-605. A's gap 100-303 is covered back to back by B1 and C1: it waited, no local
    // work. One at a time = 600 + ~6 ms of hand-off delays; took 605: saving about 0.
    let mut reqs = Vec::new();
    for (i, a) in ["a", "b", "c", "a", "b", "c"].iter().enumerate() {
        let t = i as u64 * 101;
        reqs.push(req(i as u64 + 1, Some(a), t, t + 100, 100));
    }
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Serialized, "{r}");
    assert!(r.time.local_s < 0.01, "{r}");
    assert!(r.time.saving.is_some_and(|s| s.abs() <= SERIALIZED_MAX_SAVING), "{r}");
    assert_eq!(r.agents.iter().map(|a| a.handoffs).sum::<usize>(), 3, "{r}");
}

#[test]
fn an_other_agent_ending_by_chance_before_a_call_is_not_a_hand_off() {
    // A: 0-100, local 50, 150-250. B: 0-140, local 60, 200-300. B1 ended 10 ms before A2, but
    // began before A1 ended: A did local work, it did not wait for B.
    let reqs = vec![
        req(1, Some("a"), 0, 100, 100),
        req(2, Some("b"), 0, 140, 140),
        req(3, Some("a"), 150, 250, 100),
        req(4, Some("b"), 200, 300, 100),
    ];
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert!(close(r.time.local_s, 0.110), "{r}");
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
}

#[test]
fn unlabelled_requests_on_a_deployment_with_nothing_to_save_are_not_blamed_on_the_client() {
    // Three unlabelled 100 ms requests at once on one slot (the deployment allows nothing:
    // 300 one at a time, 300 for a perfectly concurrent client), the last answer at 650: more
    // than 1.25x what the deployment explains. Not knowing the agents, the judge cannot say
    // the client lost it (one agent's calls may follow each other by design): inconclusive.
    let mut reqs: Vec<RequestTrace> = (0..3u64).map(|i| req(i + 1, None, 0, 100 * (i + 1), 100)).collect();
    reqs[2].end_us = Some(650 * MS);
    let r = judge(&on(&[IDEAL_DEVICE], 1, reqs.clone()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert_eq!(r.cause, Cause::UnknownAgents, "{r}");
    // Told there are three agents, the loss is the client's.
    let r = judge(&on(&[IDEAL_DEVICE], 1, reqs), &JudgeOptions::new().expected_agents(3));
    assert!(matches!(r.verdict, Verdict::Serialized | Verdict::PartlySerialized), "{r}");
    assert_eq!(r.cause, Cause::Client, "{r}");
}

#[test]
fn a_join_that_carries_the_agents_answers_waits_for_them_and_is_not_blamed() {
    // A fan-out/join graph: reviewers a, b, c 0-100, 0-150, 0-200 ms (solo 100, 150, 200),
    // then an editor 205-355 (solo 150) whose prompt carries all three answers. It could not
    // start before 200: ideal = 200 + 5 + 150 = 355 = took; one at a time 600 + 5 = 605;
    // saving 1. Without the carried answers the editor would seem free to start at once:
    // ideal 200, one at a time 600, saving (600 - 355) / (600 - 200) = 61 %, the correct
    // program blamed; but its first call went out right after c's answer, so it may have been
    // handed its task: inconclusive, until a probe run or its prompt tells.
    let mut reqs = vec![
        req(1, Some("a"), 0, 100, 100),
        req(2, Some("b"), 0, 150, 150),
        req(3, Some("c"), 0, 200, 200),
        req(4, Some("editor"), 205, 355, 150),
    ];
    let blind = judge(&snap(reqs.clone()), &JudgeOptions::new());
    assert_eq!(blind.verdict, Verdict::Inconclusive, "{blind}");
    assert!(blind.needs_probe(), "{blind}");
    assert!(blind.reason.contains("1 first call went out right after another agent's answer"), "{}", blind.reason);
    reqs[3].carries = vec![1, 2, 3];
    let r = judge(&snap(reqs.clone()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!(close(r.time.ideal_s, 0.355), "{r}");
    assert!(close(r.time.allowed_s, 0.355), "{r}");
    assert!(close(r.time.local_s, 0.005), "{r}");
    assert!(close(r.time.saving.unwrap(), 1.0), "{r}");
    assert_eq!(r.agents[3].handoffs, 0, "waiting for a carried answer is no hand-off");
    assert!(r.notes.iter().any(|n| n.contains("1 request's prompt carried earlier answers")), "{:?}", r.notes);
    // A carried answer that ended after the call began is not waited for (it cannot have been
    // carried then): an editor at 0-150 carrying reviewer c's answer is judged as if blind.
    let mut early = reqs.clone();
    early[3] = req(4, Some("editor"), 0, 150, 150);
    early[3].carries = vec![3];
    let e = judge(&snap(early), &JudgeOptions::new());
    assert!(close(e.time.ideal_s, 0.200), "{e}");
    assert!(e.notes.iter().all(|n| !n.contains("carried")), "{:?}", e.notes);
}

#[test]
fn carried_answers_chain_unlabelled_conversations_too() {
    // The same graph without labels: three two-turn conversations (0-50, 55-100 each), then a
    // one-request conversation carrying their last answers at 105-155. Ideal: 50 + 5 + 45 +
    // 5 + 50 = 155 = took.
    let mut reqs = Vec::new();
    for i in 0..3u64 {
        let mut a = req(1 + 2 * i, None, 0, 50, 50);
        a.conversation = Some(Conversation { key: format!("k{i}"), parent: None });
        let mut b = req(2 + 2 * i, None, 55, 100, 45);
        b.conversation = Some(Conversation { key: format!("k{i}-2"), parent: Some(format!("k{i}")) });
        reqs.extend([a, b]);
    }
    let mut editor = req(7, None, 105, 155, 50);
    editor.conversation = Some(Conversation { key: "e".into(), parent: None });
    editor.carries = vec![2, 4, 6];
    reqs.push(editor);
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!(r.agents_from, AgentSource::Conversations, "{r}");
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!(close(r.time.ideal_s, 0.155), "{r}");
}

/// An unlabelled program of four agents: a round of four 100 ms requests at once, `pause` ms
/// with nothing in flight, a second round of four.
fn two_rounds_with_a_pause(pause: u64) -> Vec<RequestTrace> {
    let mut reqs: Vec<RequestTrace> = (0..4).map(|i| req(i + 1, None, 0, 100, 100)).collect();
    reqs.extend((0..4).map(|i| req(i + 5, None, 100 + pause, 200 + pause, 100)));
    reqs
}

#[test]
fn an_unlabelled_programs_pauses_never_back_parallel_alone() {
    // 1,200 ms with nothing in flight between two rounds: four agents' 300 ms tools done
    // together (a correct program took 1,400 with tools of 1,200 ms each) or one after another
    // (time.sleep in async code: tools of 300 ms). Read as work done together it is parallel
    // (ideal 100 + 1,200 + 100 = took); read as work one at a time, the four would have split
    // it (ideal 500): not parallel. Not knowing the agents, the judge says neither.
    for opts in [JudgeOptions::new(), JudgeOptions::new().expected_agents(4)] {
        let r = judge(&snap(two_rounds_with_a_pause(1200)), &opts);
        assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
        assert_eq!(r.cause, Cause::UnknownAgents, "{r}");
        assert!(r.reason.contains("for 1.20 s none was in flight"), "{}", r.reason);
        assert!(r.reason.contains("label each agent's requests with X-Agent"), "{}", r.reason);
    }
    // A pause below the floor of local work worth examining (100 ms): parallel, as before,
    // told there are four agents. Not told, the eight requests in two rounds of four (took
    // 300 against 200 allowed) could as well be eight agents held to four at a time, each
    // handed the permit a call freed after 100 ms of a client library's own processing (under
    // `HANDOFF_WINDOW_US`), which a replay held to four explains: inconclusive, and a probe
    // run tells the agents apart (a call that went out later than that with nothing in flight
    // was not held back by a limit: `a_call_that_went_out_late_with_nothing_in_flight_...`).
    let r = judge(&snap(two_rounds_with_a_pause(100)), &JudgeOptions::new().expected_agents(4));
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    let r = judge(&snap(two_rounds_with_a_pause(100)), &JudgeOptions::new());
    assert_eq!((r.verdict, r.cause, r.needs_probe), (Verdict::Inconclusive, Cause::UnknownAgents, true), "{r}");
    // Labelled, the judge knows whose pauses they are: the gaps' own rules decide (here the
    // scenario says how long each agent worked, 1,200 ms each: parallel).
    let mut labelled = two_rounds_with_a_pause(1200);
    for (i, r) in labelled.iter_mut().enumerate() {
        r.agent_label = Some(format!("agent{}", i % 4));
    }
    let known: Vec<(u64, std::time::Duration)> =
        (5..=8).map(|id| (id, std::time::Duration::from_millis(1200))).collect();
    let r = judge(&snap(labelled), &JudgeOptions::new().known_local_work(known));
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
}

#[test]
fn an_unlabelled_program_told_its_agents_is_blamed_only_for_what_a_permit_shows() {
    // Four agents (--agents 4) of 1, 1, 1 and 8 turns of 100 ms back to back: four in flight,
    // then one. Time lost against four at a time (an ideal of 1,100 / 4 = 275, took 800: 36 %
    // saved, "partly serialized" before) is the last agent's turns following each other, not
    // the client's: the judge, not knowing which request is whose, cannot blame it.
    let mut reqs = Vec::new();
    let mut id = 0;
    for turns in [1u64, 1, 1, 8] {
        for t in 0..turns {
            id += 1;
            reqs.push(req(id, None, t * 100, t * 100 + 100, 100));
        }
    }
    let r = judge(&snap(reqs), &JudgeOptions::new().expected_agents(4));
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert_eq!(r.cause, Cause::UnknownAgents, "{r}");
    // Never more than two in flight when four agents should run at once: a permit of two,
    // the client's.
    let two_at_a_time: Vec<RequestTrace> =
        (0..8).map(|i| req(i + 1, None, (i / 2) * 100, (i / 2) * 100 + 100, 100)).collect();
    let r = judge(&snap(two_at_a_time), &JudgeOptions::new().expected_agents(4));
    assert!(matches!(r.verdict, Verdict::PartlySerialized | Verdict::Serialized), "{r}");
    assert_eq!(r.cause, Cause::Client, "{r}");
    assert!(r.reason.contains("at most 2 of 4 agents' requests were in flight at once"), "{}", r.reason);
}

#[test]
fn calls_that_overlapped_most_of_the_time_yet_took_too_long_are_not_said_to_overlap_briefly() {
    // a 0-150, b 5-155, c 10-160 ms, each 100 ms solo: two or more in flight from 5 to 155 ms,
    // 150 of the 160 busy ms (94 %). One at a time 300 ms, ideal 100 ms, took 160 ms: saving
    // (300 - 160) / (300 - 100) = 0.70, partly serialized; the calls were not apart, so the
    // reason says they overlapped and still took longer, not that they overlapped briefly.
    let reqs = vec![req(1, Some("a"), 0, 150, 100), req(2, Some("b"), 5, 155, 100), req(3, Some("c"), 10, 160, 100)];
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::PartlySerialized, "{r}");
    assert!(close(r.concurrency.overlap, 150.0 / 160.0), "{r}");
    assert!(r.reason.contains("(94% of the busy time with two or more), yet the agents took longer"), "{}", r.reason);
    assert!(!r.reason.contains("not for long"), "{}", r.reason);
}

#[test]
fn time_lost_within_how_late_the_simulator_itself_was_is_not_blamed_on_the_client() {
    // The run above (took 160 ms, allowed 100 ms: 60 ms lost), its last answer sent 40 ms late
    // by a simulator the machine starved: 40 >= 60 / 2, so the lost time cannot be told from
    // the machine's, and the verdict is inconclusive (not parallel: the machine may hide a
    // client's doing). 20 ms late explains too little: partly serialized, the client's.
    let run = |late_ms: u64| {
        let mut reqs =
            vec![req(1, Some("a"), 0, 150, 100), req(2, Some("b"), 5, 155, 100), req(3, Some("c"), 10, 160, 100)];
        reqs[2].late_us = late_ms * MS;
        judge(&snap(reqs), &JudgeOptions::new())
    };
    let r = run(40);
    assert_eq!((r.verdict, r.cause), (Verdict::Inconclusive, Cause::SimulatorLate), "{r}");
    assert!(r.needs_rerun(), "{r}");
    assert!(
        r.reason.contains(
            "the 60 ms lost against the deployment are within how late the simulator itself sent an answer (40 ms)"
        ),
        "{}",
        r.reason
    );
    let r = run(20);
    assert_eq!((r.verdict, r.cause), (Verdict::PartlySerialized, Cause::Client), "{r}");
}

#[test]
fn waits_at_a_pool_the_gaps_show_are_not_own_work_where_the_limit_is_weighed() {
    // Recorded (server clock, 0.1 ms; solo cost beside): `python_executor.py 8 --labelled`,
    // twelve agents of two calls through a pool of eight threads, on a machine with three busy
    // loops on its two cores (hand-overs 13-17 ms late). The agents' second calls waited for a
    // thread; where a wait ended beyond the hand-off tolerance it read as an agent's own work,
    // and the ideal with it (0.46 s): the saving 97 % and a client held to eight explaining too
    // little of the time lost: parallel, on the first reading. The waits at the limit (eight in
    // flight until another agent's call ended right before the next call) are the client's
    // queue, as the deployment is read (0.43 s): weighed against them, the limit cost the time.
    const RUN: [(u64, u64, u64, u64); 24] = [
        (0, 0, 1237, 1235),
        (2, 28, 1399, 1366),
        (1, 95, 1571, 1396),
        (5, 180, 1797, 1583),
        (3, 252, 1691, 1426),
        (4, 273, 1811, 1533),
        (6, 298, 2129, 1826),
        (7, 333, 2062, 1725),
        (8, 1371, 2970, 1570),
        (9, 1448, 3378, 1929),
        (10, 1597, 3699, 2096),
        (11, 1718, 3810, 2078),
        (2, 1846, 3125, 1273),
        (0, 1850, 2973, 1119),
        (1, 2112, 3260, 1144),
        (3, 2175, 3554, 1374),
        (5, 2992, 4749, 1751),
        (4, 3012, 4546, 1533),
        (7, 3200, 4917, 1714),
        (6, 3330, 4967, 1636),
        (8, 3410, 5263, 1847),
        (9, 3644, 5515, 1868),
        (10, 3770, 5844, 2067),
        (11, 3890, 5976, 2084),
    ];
    let reqs: Vec<RequestTrace> = RUN
        .iter()
        .enumerate()
        .map(|(i, &(agent, from, to, solo))| RequestTrace {
            agent: format!("worker-{agent}"),
            agent_label: Some(format!("worker-{agent}")),
            client: format!("127.0.0.1:{}", 5000 + i),
            solo_us: solo * 100,
            ..RequestTrace::ran(i as u64 + 1, from * 100, to * 100)
        })
        .collect();
    let r = judge(&snap(reqs), &JudgeOptions::new());
    assert_eq!((r.verdict, r.cause), (Verdict::PartlySerialized, Cause::Client), "{r}");
    assert!(r.reason.contains("at most 8 of 12 agents"), "{}", r.reason);
    assert!(r.reason.contains("waits for a free one between their calls not counted"), "{}", r.reason);
    assert!(r.deployment.reason.contains("not counted as their own work"), "{}", r.deployment.reason);
}

/// Twelve agents of two calls each (agent i's calls `90 + 9i` ms), each call run on a FIFO
/// pool of `threads` threads (`loop.run_in_executor`): a call is queued when the agent's
/// previous answer (plus 3 ms of its own work) is in, and starts 2 ms after a thread frees,
/// `late` ms more for the agent and turn given. Returns the calls as the trace holds them.
fn through_a_pool(threads: usize, late: &[(usize, usize, u64)]) -> Vec<RequestTrace> {
    let len = |i: usize| 90 + 9 * i as u64;
    // (ready at, agent, turn), served in order of readiness (FIFO).
    let mut queue: Vec<(u64, usize, usize)> = (0..12).map(|i| (0, i, 0)).collect();
    let mut free: Vec<u64> = vec![0; threads];
    let mut calls = Vec::new();
    while !queue.is_empty() {
        queue.sort();
        let (ready, agent, turn) = queue.remove(0);
        free.sort();
        let extra = late.iter().find(|&&(a, t, _)| a == agent && t == turn).map_or(0, |l| l.2);
        let start = ready.max(free[0] + if free[0] > 0 { 2 } else { 0 }) + extra;
        let end = start + len(agent);
        free[0] = end;
        calls.push((start, end, agent));
        if turn == 0 {
            queue.push((end + 3, agent, 1));
        }
    }
    calls.sort();
    calls
        .iter()
        .enumerate()
        .map(|(k, &(s, e, a))| req(k as u64 + 1, Some(&format!("worker-{a}")), s, e, e - s))
        .collect()
}

#[test]
fn a_pool_thread_handed_on_late_by_a_busy_machine_still_shows_the_pool() {
    // Seen once in the suite on a slow machine (fixtures/clients/python_executor.py 8
    // --labelled): one agent's second call went out well after the thread that carried it was
    // freed; its whole gap, the wait for the thread included, was read as its own work,
    // lengthening the ideal until the pool's cost (1.15x) hid under the quarter allowed for
    // noise: parallel. On time, and late: the pool of eight is named either way.
    for late in [vec![], vec![(7, 1, 40)]] {
        let r = judge(&snap(through_a_pool(8, &late)), &JudgeOptions::new());
        assert_eq!((r.verdict, r.cause), (Verdict::PartlySerialized, Cause::Client), "late {late:?}: {r}");
        assert!(r.reason.contains("a client holding 8 calls at a time takes 0.50 s"), "late {late:?}: {r}");
    }
    // A thread for each agent, the same call late: nothing held it but the machine.
    let r = judge(&snap(through_a_pool(12, &[(7, 1, 40)])), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
}
