//! What the judge's unit tests on constructed traces share (`gaps/tests.rs`,
//! `recovered/tests.rs`, `confirmed/tests.rs`): times in ms, a trace on a deployment that never
//! slows a stream, and runs of three labelled agents a, b, c whose calls take 100 ms.

use crate::trace::{RequestTrace, TraceSnapshot};

pub(super) const MS: u64 = 1_000;

/// A trace of `requests` on one device that never slows a stream, each request's runner with
/// more slots than any test has requests (what an infinitely parallel server allows).
pub(super) fn trace(requests: Vec<RequestTrace>) -> TraceSnapshot {
    TraceSnapshot {
        schema_version: crate::trace::TRACE_SCHEMA_VERSION,
        time_scale: 1.0,
        dropped: 0,
        requests: requests.into_iter().map(|r| RequestTrace { slots: 64, ..r }).collect(),
        devices: vec![crate::trace::DeviceSharing {
            batch_penalty: 0.0,
            cross_process_efficiency: 1.0,
            cross_process_attention_efficiency: None,
            attention_batch_penalty: 0.0,
        }],
    }
}

/// A labelled call of agent `agent`, from `from` to `to` ms (its solo cost: at most 100 ms).
pub(super) fn call(id: u64, agent: &str, from: u64, to: u64) -> RequestTrace {
    RequestTrace {
        agent: agent.into(),
        agent_label: Some(agent.into()),
        client: format!("127.0.0.1:{}", 5000 + id),
        solo_us: (to - from).min(100) * MS,
        ..RequestTrace::ran(id, from * MS, to * MS)
    }
}

/// A held answer: the probe released it at `to`, after holding it `held` ms.
pub(super) fn held(mut r: RequestTrace, held: u64) -> RequestTrace {
    r.held_us = held * MS;
    r.solo_us = 100 * MS;
    r
}

/// Three agents whose first calls end together at `at` + 100 and whose tools (`work`, ms each)
/// ran one after another on one executor: each next call went out when the tools before it
/// and its own were done. Ids from `first_id`, six of them.
pub(super) fn one_executor(work: [u64; 3], first_id: u64, at: u64) -> Vec<RequestTrace> {
    let mut reqs: Vec<RequestTrace> =
        ["a", "b", "c"].iter().enumerate().map(|(k, a)| call(first_id + k as u64, a, at, at + 100)).collect();
    let mut t = at + 100;
    for (k, (agent, w)) in ["a", "b", "c"].iter().zip(work).enumerate() {
        t += w;
        reqs.push(call(first_id + 3 + k as u64, agent, t, t + 100));
    }
    reqs
}

/// The same agents with their tools running together: each next call `work` after 100.
pub(super) fn together(work: [u64; 3], first_id: u64, at: u64) -> Vec<RequestTrace> {
    let mut reqs: Vec<RequestTrace> =
        ["a", "b", "c"].iter().enumerate().map(|(k, a)| call(first_id + k as u64, a, at, at + 100)).collect();
    for (k, (agent, w)) in ["a", "b", "c"].iter().zip(work).enumerate() {
        let t = at + 100 + w;
        reqs.push(call(first_id + 3 + k as u64, agent, t, t + 100));
    }
    reqs
}

/// A probe run of three agents, ids from `first_id`, starting at `at`: their first answers
/// released one at a time, each when the agent before had sent its next call, each agent
/// working `work` ms.
pub(super) fn probe_run(work: [u64; 3], first_id: u64, at: u64) -> Vec<RequestTrace> {
    let mut reqs = Vec::new();
    let mut release = at + 100;
    let mut seconds = Vec::new();
    for (k, (agent, w)) in ["a", "b", "c"].iter().zip(work).enumerate() {
        reqs.push(held(call(first_id + k as u64, agent, at, release), release - (at + 100)));
        let next = release + w;
        seconds.push(call(first_id + 3 + k as u64, agent, next, next + 100));
        release = next;
    }
    reqs.extend(seconds);
    reqs
}
