//! The gaps between calls (issue 36) on constructed traces: the two readings of one run, a
//! probe run beside it, and local work given by the program. Figures by hand in each comment;
//! times in ms, three labelled agents a, b, c whose calls take 100 ms (their solo cost).
//!
//! Over 600 lines: each test is a trace built by hand beside the figures it must give, one
//! reading of the gaps per test; split further, the readings would be read apart.

use crate::judge::testkit::{MS, call, held, one_executor, probe_run, together, trace};
use crate::judge::*;

use crate::trace::RequestTrace;

#[test]
fn tools_that_took_turns_on_one_executor_are_inconclusive_in_one_run_and_caught_by_a_probe() {
    // One run: gaps 300, 600, 900 (tools of 300 ms one after another). As the agents' own
    // work: local 1800, ideal 100 + 900 + 100 = 1100 = took: parallel. As local work one agent
    // at a time: b's own work began at a's call (400), c's at b's (700): at most 300 each; and
    // the three gaps span 900 ms, their 1800 ms spread in proportion: at most 150, 300, 450.
    // The least of both: 150 + 300 + 300 = 750, one at a time 600 + 750 = 1350, ideal 500,
    // saving (1350 - 1100) / (1350 - 500) = 29 %: the readings disagree.
    let first = one_executor([300, 300, 300], 1, 0);
    let r = judge(&trace(first.clone()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert_eq!(r.cause, Cause::UnprobedGaps, "{r}");
    assert!(r.needs_probe(), "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    assert_eq!(g.status, GapsStatus::Unprobed);
    assert!(close(g.one_at_a_time_local_s, 0.75), "{g:?}");
    assert_eq!(g.one_at_a_time_verdict, Verdict::PartlySerialized);
    assert!(r.reason.contains("a probe run can"), "{}", r.reason);

    // The probe run: each tool alone took 300 ms. b waited 300, c 600 for the others' tools:
    // own work 900, the figures of the second reading: partly serialized, between calls.
    let mut both = first;
    both.extend(probe_run([300, 300, 300], 7, 2000));
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(7));
    assert_eq!(r.verdict, Verdict::PartlySerialized, "{r}");
    assert_eq!(r.cause, Cause::BetweenCalls, "{r}");
    assert!(!r.needs_probe());
    assert!(close(r.time.local_s, 0.9), "{r}");
    assert!(close(r.time.ideal_s, 0.5), "{r}");
    assert!(close(r.time.saving.unwrap(), 0.4), "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    assert_eq!(g.status, GapsStatus::Probed);
    let waited: Vec<(&str, u64)> = g.waits.iter().map(|w| (w.agent.as_str(), w.request)).collect();
    assert_eq!(waited, [("b", 5), ("c", 6)], "{g:?}");
    assert!(g.waits.iter().all(|w| w.kind == WaitKind::LocalWork && w.own_s.is_some_and(|o| close(o, 0.3))));
    assert!(r.reason.contains("one agent at a time: a blocking call or CPU work holding the executor"), "{}", r.reason);
    assert!(close(g.probe_took_s.unwrap(), 1.1), "the probe run: 2000 to 3100: {g:?}");
    assert!(close(g.held_s.unwrap(), 0.9), "b held 300, c 600: {g:?}");
}

#[test]
fn tools_of_very_different_lengths_that_ran_together_are_confirmed_by_the_probe() {
    // Tools of 100, 300 and 600 ms together: next calls at 200, 400, 700, took 800. One at a
    // time: a's 100 ms is under the floor (no executor turn worth waiting for), c's own work
    // began at b's call (400): 300; one at a time 600 + 700, ideal 500, saving 62.5 %: a probe.
    let first = together([100, 300, 600], 1, 0);
    let r = judge(&trace(first.clone()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    // The probe measures 100, 300 and 600 again: every gap the agent's own work.
    let mut both = first;
    both.extend(probe_run([100, 300, 600], 7, 2000));
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(7));
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert_eq!(r.cause, Cause::None);
    let g = r.gaps.as_ref().expect("gaps read");
    assert_eq!(g.status, GapsStatus::Probed);
    assert!(g.waits.is_empty(), "{g:?}");
    assert!(g.reason.contains("every gap between calls as the agent's own work"), "{}", g.reason);
    assert!(close(r.time.local_s, 1.0), "{r}");
}

#[test]
fn equal_tools_that_ran_together_ask_for_a_probe_and_it_confirms_them() {
    // Tools of 300 ms each, together: the three gaps span 304 ms. One run cannot tell them
    // from three 100 ms tools on one executor that held every call until the last was done:
    // a probe. It measures 300 ms each: the agents' own work, parallel.
    let first = together([300, 302, 304], 1, 0);
    let r = judge(&trace(first.clone()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert!(r.needs_probe());
    let mut both = first;
    both.extend(probe_run([300, 302, 304], 7, 2000));
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(7));
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!(r.gaps.as_ref().is_some_and(|g| g.status == GapsStatus::Probed && g.waits.is_empty()), "{r}");
}

#[test]
fn a_client_librarys_own_processing_between_calls_never_asks_for_a_probe() {
    // 60 ms of processing per answer on one executor (gaps 60, 120, 180): read one agent at a
    // time the program would save (780 - 380) / (780 - 260) = 77 %, but work under the floor
    // (150 ms) is a library's turn on the executor, not something to wait for: one reading.
    let r = judge(&trace(one_executor([60, 60, 60], 1, 0)), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    assert_eq!(g.status, GapsStatus::Settled, "{g:?}");
    assert!(close(g.one_at_a_time_local_s, r.time.local_s), "{g:?}");
}

#[test]
fn tools_that_held_every_agents_next_call_until_the_last_was_done_ask_for_a_probe() {
    // Tools of 300 ms one after another on one executor, and every next call held until the
    // last tool was done (LangGraph's tool node on one event loop): the three calls go out
    // together at 1000. No call inside the gaps shows the turns; their sum does: 2700 ms of
    // gaps in 900 ms. Read one agent at a time: 300 each, saving 40 %: a probe is needed.
    let mut reqs = vec![call(1, "a", 0, 100), call(2, "b", 0, 100), call(3, "c", 0, 100)];
    for (k, agent) in ["a", "b", "c"].iter().enumerate() {
        reqs.push(call(4 + k as u64, agent, 1000 + k as u64, 1100 + k as u64));
    }
    let r = judge(&trace(reqs), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    // a's call went out first: at most 900 ms its own, at most its 300 ms share of the span;
    // b's and c's own work began at a's call: a millisecond each.
    assert!((g.one_at_a_time_local_s - 0.302).abs() < 0.001, "{g:?}");
}

#[test]
fn tools_that_took_turns_and_then_sent_their_calls_one_after_another_are_caught() {
    // LangGraph's ReAct agents with a tool that calls time.sleep inside async def, on one
    // event loop: the three 300 ms tools run one after another, and only then does each agent
    // send its next call, a few ms of Python apart: a's at 1000 (a 20 ms call), b's right
    // after a's call ended (1021), c's right after b's (1042). Going out right after another
    // agent's call looks like calls held behind a lock; but b waited 621 ms beyond its own
    // 300, and other agents' calls were in flight for 20 ms of that: a wait for the tools.
    // Counted as the agents' own work, it read parallel (a fresh sample-project run, once).
    let mut first = vec![call(1, "a", 0, 100), call(2, "b", 0, 100), call(3, "c", 0, 100)];
    first.extend([call(4, "a", 1000, 1020), call(5, "b", 1021, 1041), call(6, "c", 1042, 1062)]);
    let mut both = first;
    both.extend(probe_run([300, 300, 300], 7, 2000));
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(7));
    assert_ne!(r.verdict, Verdict::Parallel, "{r}");
    assert_eq!(r.cause, Cause::BetweenCalls, "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    let waited: Vec<(&str, u64)> = g.waits.iter().map(|w| (w.agent.as_str(), w.request)).collect();
    assert_eq!(waited, [("a", 4), ("b", 5), ("c", 6)], "{g:?}");
    assert!(close(r.time.local_s, 0.9), "300 ms each: {r}");
}

#[test]
fn calls_held_behind_a_lock_are_the_calls_serialization_not_a_wait_for_tools() {
    // One permit around the second calls (a rate limiter), tools of 200 ms together: first
    // calls 0-100, tools 100-300, then a 300-700 (a 400 ms call), b right after it 701-1101,
    // c 1102-1502. b waited 401 ms beyond its 200 ms tool while a's call was in flight for
    // 400 of them, c 802 while a's and b's were for 800: the calls' serialization, not a wait
    // for the others' tools; no wait for local work is named.
    let mut first = vec![call(1, "a", 0, 100), call(2, "b", 0, 100), call(3, "c", 0, 100)];
    first.extend([call(4, "a", 300, 700), call(5, "b", 701, 1101), call(6, "c", 1102, 1502)]);
    let mut both = first;
    both.extend(probe_run([200, 200, 200], 7, 3000));
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(7));
    let g = r.gaps.as_ref().expect("gaps read");
    assert_eq!(g.status, GapsStatus::Probed, "{g:?}");
    assert!(g.waits.iter().all(|w| w.kind != WaitKind::LocalWork), "{g:?}");
    assert_ne!(r.cause, Cause::BetweenCalls, "{r}");
}

#[test]
fn one_agents_chunk_of_work_that_held_the_others_once_is_not_counted() {
    // a worked 300 ms; b and c, 20 ms each, went out after it (gaps 320 and 340): one chunk,
    // once, the way a client library's first use holds every agent on one executor. The probe
    // finds b and c waited, but for one chunk only: not counted, the gaps stay as measured.
    let first = one_executor([300, 20, 20], 1, 0);
    let mut both = first;
    both.extend(probe_run([300, 20, 20], 7, 2000));
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(7));
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    assert!(g.waits.is_empty(), "{g:?}");
    assert!(g.reason.contains("one agent's local work of 0.30 s, once"), "{}", g.reason);
    assert!(close(r.time.local_s, 0.96), "the gaps as measured, 300 + 320 + 340: {r}");
}

#[test]
fn a_gap_that_outlasts_its_expiry_waited_for_an_answer_the_probe_held() {
    // a, b, c step in rounds: after their first answers (100) they work 100, 300, 600 ms and
    // wait for each other, all sending their next calls at 700. In the probe run a's answer
    // goes out first; its gap expires (1.25 x 600 + 20 ms), b's and c's answers follow; all
    // three next calls go out together at 2100 + 100 + 1520 = 3720.
    let mut first = vec![call(1, "a", 0, 100), call(2, "b", 0, 100), call(3, "c", 0, 100)];
    for (k, agent) in ["a", "b", "c"].iter().enumerate() {
        first.push(call(4 + k as u64, agent, 700 + k as u64, 800 + k as u64));
    }
    // One run cannot tell it from a blocked executor that held the calls: a probe.
    let r = judge(&trace(first.clone()), &JudgeOptions::new());
    assert!(r.needs_probe(), "{r}");
    let mut both = first;
    both.extend([
        held(call(7, "a", 2000, 2100), 0),
        held(call(8, "b", 2000, 2870), 770),
        held(call(9, "c", 2000, 3120), 1020),
        call(10, "a", 3720, 3820),
        call(11, "b", 3721, 3821),
        call(12, "c", 3722, 3822),
    ]);
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(7));
    let g = r.gaps.as_ref().expect("gaps read");
    assert_eq!(g.status, GapsStatus::Probed);
    let kinds: Vec<(&str, WaitKind, bool)> =
        g.waits.iter().map(|w| (w.agent.as_str(), w.kind, w.own_s.is_some())).collect();
    assert_eq!(
        kinds,
        [("a", WaitKind::Barrier, false), ("b", WaitKind::Barrier, false)],
        "a and b waited past their expiry and went out with c; c, the slowest, did not wait"
    );
    assert!(g.reason.contains("a barrier (a gather per round?)"), "{}", g.reason);
    // Read as waiting, a's and b's gaps are no work of theirs; c's 600 ms still makes the
    // run: in one round the barrier cost nothing, and the verdict says so.
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!(g.reason.contains("too little to change the verdict"), "{}", g.reason);
}

#[test]
fn a_barrier_that_costs_time_is_never_read_parallel() {
    // Two rounds, each with another agent slowest: round 1 a 100, b 300, c 600 ms; round 2
    // a 600, b 100, c 300. With the barrier each round costs its slowest: calls at 700 and
    // 1400, took 1500. On their own the agents' chains would be 100 + 100 + 100 + 600 + 100 =
    // 1000 (a), 700 (b) and 1200 (c): the barrier lost 300 ms.
    let mut first = vec![call(1, "a", 0, 100), call(2, "b", 0, 100), call(3, "c", 0, 100)];
    for (k, agent) in ["a", "b", "c"].iter().enumerate() {
        first.push(call(4 + k as u64, agent, 700, 800));
        first.push(call(7 + k as u64, agent, 1400, 1500));
    }
    // One run: the calls of each round went out together after gaps of 600 ms; read one agent
    // at a time, the three gaps hold 600 ms of work between them, not 1800: a blocked executor
    // and a barrier look the same from one run.
    let r = judge(&trace(first.clone()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert!(r.needs_probe(), "{r}");
    // The probe run: in each round the answers go out one at a time, each after the gap
    // before it expired, and the calls all go out together once the slowest is done.
    let mut both = first;
    both.extend([
        held(call(10, "a", 2000, 2100), 0),
        held(call(11, "b", 2000, 2870), 770),
        held(call(12, "c", 2000, 3641), 1541),
        call(13, "a", 4241, 4341),
        call(14, "b", 4241, 4341),
        call(15, "c", 4241, 4341),
        call(16, "a", 5500, 5600),
        call(17, "b", 5500, 5600),
        call(18, "c", 5500, 5600),
    ]);
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(10));
    let g = r.gaps.as_ref().expect("gaps read");
    assert!(g.waits.iter().any(|w| w.kind == WaitKind::Barrier), "{g:?}");
    assert_ne!(r.verdict, Verdict::Parallel, "{r}");
}

#[test]
fn a_probe_run_that_made_other_calls_is_void_and_the_verdict_stays_unprobed() {
    let mut both = one_executor([300, 300, 300], 1, 0);
    // b makes one call only in the probe run.
    let mut probe = probe_run([300, 300, 300], 7, 2000);
    probe.retain(|r| r.id != 11);
    both.extend(probe);
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(7));
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert_eq!(r.cause, Cause::UnprobedGaps);
    let g = r.gaps.as_ref().expect("gaps read");
    assert_eq!(g.status, GapsStatus::Void);
    assert!(
        r.reason.contains("the probe run is void: agent b made 2 calls in the run judged and 1 in the probe run"),
        "{}",
        r.reason
    );
    // A probe run the caller knows failed is void for its reason.
    let r = judge(
        &trace(one_executor([300, 300, 300], 1, 0)),
        &JudgeOptions::new().probe_since(7).probe_void("it crashed"),
    );
    assert!(r.reason.contains("the probe run is void: it crashed"), "{}", r.reason);
    assert!(!r.needs_probe(), "a void probe is not asked for again");
}

#[test]
fn local_work_the_program_gives_settles_the_gaps_without_a_probe() {
    // The harness knows each agent worked 300 ms before its second call.
    let known = [(4, 300), (5, 300), (6, 300)].map(|(id, ms)| (id, std::time::Duration::from_millis(ms)));
    let r = judge(&trace(one_executor([300, 300, 300], 1, 0)), &JudgeOptions::new().known_local_work(known));
    assert_eq!(r.verdict, Verdict::PartlySerialized, "{r}");
    assert_eq!(r.cause, Cause::BetweenCalls, "{r}");
    assert_eq!(r.gaps.as_ref().map(|g| g.status), Some(GapsStatus::Known));
    assert!(r.reason.contains("as the program gave it"), "{}", r.reason);
    // The same work done together: parallel, no waits.
    let known = [(4, 300), (5, 300), (6, 300)].map(|(id, ms)| (id, std::time::Duration::from_millis(ms)));
    let r = judge(&trace(together([300, 300, 300], 1, 0)), &JudgeOptions::new().known_local_work(known));
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!(r.gaps.as_ref().is_some_and(|g| g.waits.is_empty()));
}

#[test]
fn second_calls_behind_a_lock_already_held_when_the_answers_came_are_not_parallel_on_one_run() {
    // Four agents' first calls together, of 100, 140, 180 and 220 ms; each second call (100 ms)
    // under one lock, in the order the first answers came: a's at 101-201, b's at 202-302, c's
    // at 303-403, d's at 404-504 (fixtures/clients/python_gaps.py lock-call: an asyncio.Lock
    // around each agent's second call). b and c came for the lock while a's call held it (from
    // 101, before their answers at 140 and 180): one run does not show that wait as the lock
    // passed from agent to agent (d's does: b's call began at 202, right after d's answer).
    // Read as their own work (b 62, c 123, d 0): ideal 403 (c), one at a time 1040 + 186,
    // took 504, saving (1226 - 504) / (1226 - 403) = 88 %: parallel. Read as waits for the
    // calls back to back before them, the first running when their answers came (b, c 0):
    // ideal 320 (d), one at a time 1041, saving (1041 - 504) / (1041 - 320) = 74 %: partly
    // serialized. One run cannot tell: a probe.
    let firsts = [(1, "a", 100), (2, "b", 140), (3, "c", 180), (4, "d", 220)];
    let mut reqs: Vec<RequestTrace> =
        firsts.iter().map(|&(id, agent, to)| RequestTrace { solo_us: to * MS, ..call(id, agent, 0, to) }).collect();
    reqs.extend([(5, "a", 101), (6, "b", 202), (7, "c", 303), (8, "d", 404)].map(|(id, a, t)| call(id, a, t, t + 100)));
    let r = judge(&trace(reqs), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert_eq!(r.cause, Cause::UnprobedGaps, "{r}");
    assert!(r.needs_probe(), "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    assert!(close(g.one_at_a_time_local_s, 0.001), "a's 1 ms alone: {g:?}");
    assert_eq!(g.one_at_a_time_verdict, Verdict::PartlySerialized, "{g:?}");
}

#[test]
fn the_probe_plan_holds_each_agents_gaps_in_order() {
    let t = trace(one_executor([300, 300, 300], 1, 0));
    let plan = probe_plan(&t, &JudgeOptions::new());
    assert_eq!(plan.gaps.get("label:a"), Some(&vec![300 * MS]));
    assert_eq!(plan.gaps.get("label:c"), Some(&vec![900 * MS]));
    assert_eq!(plan.longest_gap_us, 900 * MS);
    assert_eq!(plan.tolerance_us, 20 * MS, "a quarter of the 100 ms calls, at most 20 ms");
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// A leader (0-100) and two members whose first calls went out right after its answer
/// (105-205, 106-206): ids 1-3. Told apart from members that were free to start at 0, the
/// program lost the leader's call.
fn leader_and_members() -> Vec<RequestTrace> {
    vec![call(1, "lead", 0, 100), call(2, "m1", 105, 205), call(3, "m2", 106, 206)]
}

#[test]
fn first_calls_right_after_another_agents_answer_are_a_hand_off_or_calls_held_back() {
    // As measured the members could have started at 0: ideal 100, took 206, one at a time
    // 300: saving (300 - 206) / (300 - 100) = 47 %. Taken as hand-offs (their tasks came from
    // the lead's answer): ideal 205, parallel. One run cannot tell.
    let r = judge(&trace(leader_and_members()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert!(r.needs_probe());
    let h = &r.gaps.as_ref().expect("gaps read").handoffs;
    assert_eq!(h.len(), 2, "{h:?}");
    assert!(h.iter().all(|h| h.after_agent == "lead" && h.depended.is_none()), "{h:?}");
    // A few of the lead's words in a member's prompt (a hint): the task handed on, the data
    // flow; with both hinted, parallel at once.
    let mut hinted = leader_and_members();
    hinted[1].hints = vec![1];
    hinted[2].hints = vec![1];
    let r = judge(&trace(hinted.clone()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    // A hint at an answer the call did not go out right after is no link.
    hinted[2] = call(3, "m2", 400, 500);
    hinted[2].hints = vec![1];
    let r = judge(&trace(hinted), &JudgeOptions::new());
    assert_ne!(r.verdict, Verdict::Parallel, "{r}");
}

#[test]
fn a_probe_run_tells_a_first_call_that_waited_for_an_answer_from_one_that_did_not() {
    // The probe holds the lead's answer back 300 ms: members that still go out right after
    // it depended on it, with nothing of it in their prompts (a task handed on, or a permit
    // the lead's answer released): never parallel on that evidence.
    let mut both = leader_and_members();
    both.extend([held(call(4, "lead", 1000, 1400), 300), call(5, "m1", 1405, 1505), call(6, "m2", 1406, 1506)]);
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(4));
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    assert!(g.handoffs.iter().all(|h| h.depended == Some(true)), "{g:?}");
    assert!(r.reason.contains("cannot be told apart"), "{}", r.reason);
    // The two members' first calls, not the lead's (which followed nothing).
    assert!(r.reason.contains("but 2 first calls went out right after"), "{}", r.reason);
    // Members that went out before the held answer did not wait for it, nor for any other:
    // their 105 ms before their first calls were their own start-up (a timer, data loaded
    // first), counted as their work: parallel.
    let mut both = leader_and_members();
    both.extend([held(call(4, "lead", 1000, 1400), 300), call(5, "m1", 1105, 1205), call(6, "m2", 1106, 1206)]);
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(4));
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    assert!(g.handoffs.iter().all(|h| h.depended == Some(false)), "{g:?}");
    assert!(g.reason.contains("2 first calls went out late waiting for no answer"), "{}", g.reason);
}

/// Four agents of one call each through a permit of two, its waiters served in turn: a 0-100
/// and b 0-110, c right after a (102-202), d right after b (112-212). Ids 1-4.
fn permit_of_two() -> Vec<RequestTrace> {
    vec![call(1, "a", 0, 100), call(2, "b", 0, 110), call(3, "c", 102, 202), call(4, "d", 112, 212)]
}

/// [`permit_of_two`] and its probe run (ids 5-8): b's answer out at 1410, a's at 1710; the agent
/// `after[0]` goes out right after b's, `after[1]` right after a's.
fn permit_of_two_probed(after: [&str; 2]) -> Vec<RequestTrace> {
    let mut both = permit_of_two();
    both.extend([
        held(call(5, "a", 1000, 1710), 610),
        held(call(6, "b", 1000, 1410), 300),
        call(7, after[0], 1412, 1512),
        call(8, after[1], 1712, 1812),
    ]);
    both
}

/// How the probe plan holds `agent`'s first answer.
fn first_delay(plan: &ProbePlan, agent: &str) -> Option<Delay> {
    plan.delays.get(&format!("label:{agent}")).and_then(|d| d.get(&0)).cloned()
}

#[test]
fn the_probe_holds_an_answer_under_test_until_after_its_rival_is_out() {
    // c went out right after a's answer, d right after b's (and a's: both ended within 150 ms
    // before it). b's rival (the first agent done after it among those begun) is c (102-202):
    // b is held 300 ms, and until 300 ms after c is out (2.3 s at the most), so d, held back by
    // a permit any answer frees, goes out as c comes back, before the answer it followed. a's
    // rival would be b, but a waiting for b waiting for c, which went out only after a ended
    // (the permit a held), may wait for a: a waits the plain 300 ms.
    let plan = probe_plan(&trace(permit_of_two()), &JudgeOptions::new());
    let delay = |agent: &str| first_delay(&plan, agent);
    let rival = |agent: &str| Some((format!("label:{agent}"), 0));
    assert_eq!(delay("b"), Some(Delay { us: 300 * MS, rival: rival("c"), max_us: 2300 * MS }));
    assert_eq!(delay("a"), Some(Delay { us: 300 * MS, rival: None, max_us: 2300 * MS }));
    assert_eq!(delay("c"), None);
    // An agent done (its last call) is rivalled by the next agent to be done, not by a call of
    // an agent that goes on: a ends at 100 (c after it); e's calls run 0-50, 60-150 (in flight
    // at 100, not its last) and 160-400 (its third answer).
    let on = vec![
        call(1, "a", 0, 100),
        call(2, "e", 0, 50),
        call(3, "e", 60, 150),
        call(4, "c", 102, 202),
        call(5, "e", 160, 400),
    ];
    let plan = probe_plan(&trace(on), &JudgeOptions::new());
    assert_eq!(first_delay(&plan, "a").and_then(|d| d.rival), Some(("label:e".to_string(), 2)));
    // A rival more than 2 s off: the plain 300 ms.
    let far = vec![call(1, "a", 0, 100), call(2, "e", 0, 2400), call(3, "c", 102, 202)];
    let plan = probe_plan(&trace(far), &JudgeOptions::new());
    assert_eq!(first_delay(&plan, "a"), Some(Delay { us: 300 * MS, rival: None, max_us: 2300 * MS }));
}

#[test]
fn a_first_call_that_goes_out_after_another_answer_than_the_one_it_followed_waited_for_a_permit() {
    // The probe releases b's answer first (at 1410) and a's 300 ms later (1710). The permit's
    // first waiter, c, goes out as b's answer comes back (1412), though it had followed a's and
    // could not have followed b's (b ended after c went out); d goes out after a's, which it
    // could have followed. c was held back by what any answer frees: the time it lost is the
    // client's, never a hand-off.
    let r = judge(&trace(permit_of_two_probed(["c", "d"])), &JudgeOptions::new().probe_since(5));
    assert_ne!(r.verdict, Verdict::Parallel, "{r}");
    assert_ne!(r.verdict, Verdict::Inconclusive, "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    let depended = |agent: &str| g.handoffs.iter().find(|h| h.agent == agent).and_then(|h| h.depended);
    assert_eq!((depended("c"), depended("d")), (Some(false), Some(true)), "{g:?}");
    assert!(
        g.reason.contains(
            "1 first call went out right after another agent's answer, with the one it had followed held back"
        ),
        "{}",
        g.reason
    );
    // Held back, both: at most two of the four in flight, the client's limit.
    assert!(r.reason.contains("at most 2 of 4 agents' requests were in flight at once"), "{}", r.reason);
    // Members each handed a task by their own lead go out after their own lead's answer,
    // whatever the order the probe releases them in: a hand-off or a permit, one run and the
    // probe cannot tell (a permit whose waiters are served in no fixed order would do the
    // same), never parallel on that evidence.
    let r = judge(&trace(permit_of_two_probed(["d", "c"])), &JudgeOptions::new().probe_since(5));
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    assert!(g.handoffs.iter().all(|h| h.depended == Some(true)), "{g:?}");
}

#[test]
fn a_first_call_that_goes_out_as_another_answer_comes_is_not_taken_for_one_that_came_long_before() {
    // A permit of two around agents' whole runs (python_gaps.py permit, measured): a 0-45 and
    // 154-190, b 0-46 and 354-398, c 192-244 right after a's last answer, 2 ms after it (a's
    // first and b's first, 146 ms before, it could have followed too). In the probe run a's
    // first answer comes out at 658, b's last at 761, and c goes out at 766: 5 ms after b's
    // last (which it could not have followed), 108 ms after a's first. Gone out 2 ms after its
    // answer in the run judged, it was not handed its task 108 ms before: held back by the
    // permit b freed, c's own work (its tool of 0.6 s) started late: partly serialized.
    let mut both = vec![
        call(1, "a", 0, 45),
        call(2, "b", 0, 46),
        call(3, "a", 154, 190),
        call(4, "c", 192, 244),
        call(5, "b", 354, 398),
        call(6, "c", 850, 895),
    ];
    both.extend([
        held(call(7, "a", 0, 658), 610),
        held(call(8, "b", 0, 348), 302),
        held(call(9, "b", 658, 761), 58),
        held(call(10, "a", 760, 1422), 612),
        call(11, "c", 766, 815),
        call(12, "c", 1422, 1468),
    ]);
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(7));
    assert_eq!(r.verdict, Verdict::PartlySerialized, "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    assert_eq!(g.handoffs.iter().find(|h| h.agent == "c").and_then(|h| h.depended), Some(false), "{g:?}");
}

#[test]
fn a_member_handed_its_task_by_an_answer_that_ended_a_moment_before_another_is_not_blamed() {
    // Leads a (0-100) and b (0-101); m, handed its task by a, goes out at 102: right after b's
    // answer, the latest to end, so the run judged links it to b. The probe holds b's answer
    // back (1101 + 300) and m goes out right after a's, as its task came (1102). It went out
    // before the answer it was linked to, but right after one it could have followed: not shown
    // independent of it (read so, the time it "lost" would be blamed on the client).
    let mut both = vec![call(1, "a", 0, 100), call(2, "b", 0, 101), call(3, "m", 102, 202)];
    both.extend([call(4, "a", 1000, 1100), held(call(5, "b", 1000, 1401), 300), call(6, "m", 1102, 1202)]);
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(4));
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    assert!(g.handoffs.iter().all(|h| h.depended != Some(false)), "{g:?}");
}

#[test]
fn first_calls_that_reuse_the_connection_of_the_answer_they_followed_are_hinted_at_a_pool() {
    // Four agents of one call each through a pool of two connections: a and b at 0-100 on
    // connections A and B, c and d right after on the same two; the probe holds a's and b's
    // answers 300 ms and c and d still go out right after them. A hand-off or the pool: one
    // run and the probe cannot tell, but the reason names the pool as what fits.
    let on = |mut r: RequestTrace, conn: &str| {
        r.client = conn.into();
        r
    };
    let (a, b) = ("127.0.0.1:6001", "127.0.0.1:6002");
    let first = vec![
        on(call(1, "a", 0, 100), a),
        on(call(2, "b", 0, 100), b),
        on(call(3, "c", 102, 202), a),
        on(call(4, "d", 102, 202), b),
    ];
    let probe = vec![
        on(held(call(5, "a", 1000, 1400), 300), a),
        on(held(call(6, "b", 1000, 1400), 300), b),
        on(call(7, "c", 1402, 1502), a),
        on(call(8, "d", 1402, 1502), b),
    ];
    let mut both = first.clone();
    both.extend(probe.clone());
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(5));
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert!(r.reason.contains("never used more than 2 connections: a client connection pool of 2"), "{}", r.reason);
    // A connection each (c and d on connections of their own): no such hint.
    let mut both: Vec<RequestTrace> =
        first.into_iter().map(|r| RequestTrace { client: format!("127.0.0.1:{}", 7000 + r.id), ..r }).collect();
    both.extend(probe);
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(5));
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert!(!r.reason.contains("connection pool"), "{}", r.reason);
}

#[test]
fn the_probe_plan_delays_the_answers_first_calls_went_out_after() {
    let plan = probe_plan(&trace(leader_and_members()), &JudgeOptions::new());
    let lead = plan.delays.get("label:lead").and_then(|d| d.get(&0));
    assert_eq!(lead.map(|d| d.us), Some(300 * MS));
}

#[test]
fn a_call_handed_what_another_freed_may_go_out_after_other_calls_ended_too() {
    use crate::judge::gaps::handed_over;
    let ms = |a: u64, b: u64| (a * MS, b * MS);
    // Six threads' calls ending within 2.5 ms (100-102.5 ms, every 0.5), the next six going out
    // 2 ms after each: handed what the first to end freed, other calls ending in between.
    let mut pool: Vec<(u64, u64)> = (0..6).map(|i| (0, 100 * MS + i * 500)).collect();
    pool.extend((0..6).map(|i| (102 * MS + i * 500, 300 * MS)));
    assert!(handed_over(&pool, 6, 150 * MS));
    // A thread pool slow to hand over (LangChain's batch on a loaded machine): ends at 100 and
    // 130 with two in flight, the next call 60 ms after the first.
    assert!(handed_over(&[ms(0, 100), ms(0, 130), ms(160, 300)], 2, 150 * MS));
    // A call that went out long after the last end with two in flight: not handed anything.
    assert!(!handed_over(&[ms(0, 100), ms(0, 130), ms(400, 500)], 2, 150 * MS));
}

#[test]
fn calls_never_in_flight_together_stay_serialized_in_the_client_whatever_the_gaps() {
    // A runtime bridge (block_on inside a task): every call alone, one after another; the
    // program gave no local work. On a starved machine the next call went out 40-60 ms after
    // the last answer. The gaps are the executor's lag, not waits for another agent's work
    // between calls that overlapped: no two calls were ever in flight.
    let reqs = vec![
        call(1, "a", 0, 100),
        call(2, "b", 100, 200),
        call(3, "c", 250, 350),
        call(4, "a", 400, 500),
        call(5, "b", 560, 660),
        call(6, "c", 700, 800),
    ];
    let known = [(4, 0), (5, 0), (6, 0)].map(|(id, ms)| (id, std::time::Duration::from_millis(ms)));
    let r = judge(&trace(reqs), &JudgeOptions::new().known_local_work(known));
    assert_eq!(r.verdict, Verdict::Serialized, "{r}");
    assert_eq!(r.cause, Cause::Client, "{r}");
    assert!(r.reason.contains("no two were ever in flight at once"), "{}", r.reason);
    assert!(!r.reason.contains("overlapped"), "{}", r.reason);
}
