//! An agent that starts late (issue 36's probe, on constructed traces; times in ms, labelled
//! agents whose calls take 100 ms): its own start-up, or a wait for the others' answers.

use crate::judge::testkit::{call, held, trace};
use crate::judge::*;

/// The run judged: a and b make two calls each at once (0-100, then 101-201 and 102-202);
/// `late` makes its first call at 460, 258 ms after the last answer (past the hand-off window),
/// and its second right after it.
fn late_start() -> Vec<crate::trace::RequestTrace> {
    vec![
        call(1, "a", 0, 100),
        call(2, "b", 0, 100),
        call(3, "a", 101, 201),
        call(4, "b", 102, 202),
        call(5, "late", 460, 560),
        call(6, "late", 562, 662),
    ]
}

#[test]
fn an_agent_that_started_late_by_itself_is_parallel_once_a_probe_holds_every_answer_until_it_comes() {
    // One run: took 662 ms; the longest chain from its first call is late's 202, one at a time
    // 600 + 4: saved (604 - 662) / (604 - 202) < 0, serialized. With late's 460 ms before its
    // first call as its own start-up, its chain is 662 = took: parallel. One run cannot tell.
    let first = late_start();
    let r = judge(&trace(first.clone()), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert_eq!(r.cause, Cause::UnprobedGaps, "{r}");
    assert!(r.needs_probe(), "{r}");
    assert!(r.reason.contains("late's first call went out 0.46 s after the run's first"), "{}", r.reason);
    let plan = probe_plan(&trace(first.clone()), &JudgeOptions::new());
    assert_eq!(plan.starts.get("label:late"), Some(&(460 * testkit::MS)), "{plan:?}");

    // The probe run holds every answer until late's first call comes (2460, a timer of its
    // own): it waited for none. Its 460 ms are its own: parallel.
    let mut both = first.clone();
    both.extend([
        held(call(7, "a", 2000, 2461), 361),
        held(call(8, "b", 2000, 2462), 362),
        call(9, "late", 2460, 2560),
        call(10, "a", 2462, 2562),
        call(11, "b", 2463, 2563),
        call(12, "late", 2561, 2661),
    ]);
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(7));
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!((r.time.ideal_s - 0.662).abs() < 1e-3, "late's chain from the run's start: {r}");
    let g = r.gaps.as_ref().expect("gaps read");
    assert!(
        g.reason.contains("1 first call went out late waiting for no answer (late's 0.46 s after the run's first): its agent's own start-up"),
        "{}",
        g.reason
    );

    // Agents run one after another: late's first call waits for the others' answers, and in
    // the probe run it comes 258 ms after them again, once the hold ran out (1.25 x 460 + 20
    // ms): not its own start-up; serialized, as measured.
    let mut both = first;
    both.extend([
        held(call(7, "a", 2000, 2595), 495),
        held(call(8, "b", 2000, 2596), 496),
        call(9, "a", 2597, 2697),
        call(10, "b", 2598, 2698),
        call(11, "late", 2956, 3056),
        call(12, "late", 3058, 3158),
    ]);
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(7));
    assert_eq!(r.verdict, Verdict::Serialized, "{r}");
    assert!(r.gaps.as_ref().is_some_and(|g| !g.reason.contains("start-up")), "{r}");
}

/// A call of 300 ms solo (the testkit's calls cost at most 100).
fn long(mut r: crate::trace::RequestTrace) -> crate::trace::RequestTrace {
    r.solo_us = 300 * testkit::MS;
    r
}

#[test]
fn first_calls_that_went_out_one_after_another_waiting_for_no_answer_are_not_parallel_on_that_evidence() {
    // Calls of 300 ms: a at 0, b at 200 (no answer before it), c at 400 (100 ms after a's
    // answer): blocking start-ups taking turns on one event loop (a sync load inside async
    // code), or timers of their own. The probe holds every answer until b comes, and a's back
    // 300 ms for c: both go out before any answer. Taken as their own start-ups (200 and 400
    // ms), c's chain is 700 = took: parallel. But c's started at most when b's call went out:
    // done one at a time, 200 ms each, the chains end at 500, one at a time 900 + 400: saved
    // (1300 - 700) / (1300 - 500) = 75 %. No run tells them apart: inconclusive.
    let mut both = vec![long(call(1, "a", 0, 300)), long(call(2, "b", 200, 500)), long(call(3, "c", 400, 700))];
    both.extend([
        long(held(call(4, "a", 2000, 2600), 300)),
        long(call(5, "b", 2200, 2500)),
        long(call(6, "c", 2400, 2700)),
    ]);
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(4));
    assert_eq!(r.verdict, Verdict::Inconclusive, "{r}");
    assert!(r.reason.contains("their first calls went out one after another"), "{}", r.reason);
    assert!(
        r.reason.contains("2 first calls went out late waiting for no answer (b's 0.20 s, c's 0.40 s"),
        "{}",
        r.reason
    );
    assert!(r.reason.contains("the program is partly serialized"), "{}", r.reason);

    // c with a at 0: b's start-up overlapped no other's, all of it its own: parallel.
    let mut both = vec![long(call(1, "a", 0, 300)), long(call(2, "b", 200, 500)), long(call(3, "c", 0, 300))];
    both.extend([long(call(4, "a", 2000, 2300)), long(call(5, "b", 2200, 2500)), long(call(6, "c", 2000, 2300))]);
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(4));
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
}

#[test]
fn first_calls_late_in_the_run_judged_and_all_out_at_once_in_the_probe_ask_for_a_longer_time_scale() {
    // Calls of 300 ms: a at 0, b at 200, c at 400 (a first answer's processing or a library's
    // first use held them, real time against calls scaled to a tenth); in the probe run all
    // three went out at once, before any answer, the one c followed held back. Took 700
    // against 300 allowed, the first calls spread over 400: the start-up is the program's own,
    // and calls this short magnify it: judged again where the calls outlast it four times
    // (0.1 x 4 x 400 / 300).
    let first = vec![long(call(1, "a", 0, 300)), long(call(2, "b", 200, 500)), long(call(3, "c", 400, 700))];
    let mut both = first;
    both.extend([
        long(held(call(4, "a", 2000, 2600), 300)),
        long(call(5, "b", 2001, 2301)),
        long(call(6, "c", 2002, 2302)),
    ]);
    let scaled = |time_scale| crate::trace::TraceSnapshot { time_scale, ..trace(both.clone()) };
    let r = judge(&scaled(0.1), &JudgeOptions::new().probe_since(4));
    assert_eq!((r.verdict, r.cause), (Verdict::Inconclusive, Cause::TimeScale), "{r}");
    assert!(r.longer_time_scale.is_some_and(|s| (s - 0.533).abs() < 0.01), "{r}");
    // At full speed that start-up is as long as the calls: the time is the client's.
    let r = judge(&scaled(1.0), &JudgeOptions::new().probe_since(4));
    assert_ne!(r.verdict, Verdict::Parallel, "{r}");
    assert_ne!(r.cause, Cause::TimeScale, "{r}");
}

#[test]
fn waits_for_local_work_as_long_as_the_clients_waits_for_a_cpu_are_not_blamed_on_the_program() {
    // Tools of 300 ms one after another (b waited 300 ms for a's, c 600 for a's and b's), the
    // probe measuring 300 each: partly serialized between calls. Where the program's threads
    // waited half as long for a CPU while the calls ran, or more (0.5 s: tools on cores busy
    // with something else), the waits read the same: inconclusive, run again; with 0.4 s,
    // the waits are the program's.
    let mut both = testkit::one_executor([300, 300, 300], 1, 0);
    both.extend(testkit::probe_run([300, 300, 300], 7, 2000));
    let opts = JudgeOptions::new().probe_since(7);
    let busy = judge(&trace(both.clone()), &opts.clone().client_cpu_wait(std::time::Duration::from_millis(500)));
    assert_eq!((busy.verdict, busy.cause), (Verdict::Inconclusive, Cause::ClientLag), "{busy}");
    assert!(busy.reason.contains("waited 0.50 s for a CPU while the calls ran"), "{}", busy.reason);
    assert!(busy.rerun, "{busy}");
    let quiet = judge(&trace(both), &opts.client_cpu_wait(std::time::Duration::from_millis(400)));
    assert_eq!((quiet.verdict, quiet.cause), (Verdict::PartlySerialized, Cause::BetweenCalls), "{quiet}");
}

#[test]
fn waits_for_work_no_gap_held_as_its_own_are_named_so_and_not_counted() {
    // a, b and c sent their second calls together 300 ms after their answers (a pause of the
    // process, a library's first use as the answers were read); with the others' work out of
    // the way the probe measured 20 ms each: they waited 280 ms each for work that no agent's
    // gap held as its own (no chunk of 150 ms). Not counted: parallel, and the words say so.
    let mut both = vec![call(1, "a", 0, 100), call(2, "b", 0, 100), call(3, "c", 0, 100)];
    both.extend([call(4, "a", 400, 500), call(5, "b", 401, 501), call(6, "c", 402, 502)]);
    both.extend([
        held(call(7, "a", 2000, 2100), 0),
        held(call(8, "b", 2000, 2120), 20),
        held(call(9, "c", 2000, 2140), 40),
        call(10, "a", 2120, 2220),
        call(11, "b", 2140, 2240),
        call(12, "c", 2160, 2260),
    ]);
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(7));
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    let g = r.gaps.as_ref().expect("gaps read");
    assert!(
        g.reason.contains("waited 0.84 s in all for local work that no agent's gap held as its own"),
        "{}",
        g.reason
    );
}

#[test]
fn a_first_call_that_moved_with_the_held_answers_is_not_its_agents_own_start_up() {
    // A pool of two threads for four agents, each agent with work of its own after its last
    // answer (155 ms): c takes a's thread at 360, 140 ms after b's last answer (the hand-off
    // window) but 155 after a's, its real wait; d takes b's at 375, with no answer within the
    // window before it (late). Took 580, one at a time 820.
    let first = vec![
        call(1, "a", 0, 100),
        call(2, "b", 0, 115),
        call(3, "a", 105, 205),
        call(4, "b", 120, 220),
        call(5, "c", 360, 460),
        call(6, "d", 375, 475),
        call(7, "c", 465, 565),
        call(8, "d", 480, 580),
    ];
    // The probe holds every answer until d comes (it cannot: the threads are busy) or its time
    // is up (1.25 x 375 + 20), and b's last answer 300 ms for the hand-off test. c goes out
    // before that answer, 155 ms after a's again: it depended on no answer the test held, but
    // it went out 750 ms after the run's first call where it went out at 360 in the run judged.
    // A start-up of c's own would not move with the answers; taken as one (360 ms), c's chain
    // ends at 565 against 580 taken: saved 94 %, parallel, for a program that runs two agents
    // at a time. Not its own: its chain is 205, and the pool's wait is the client's.
    let mut both = first;
    both.extend([
        held(call(11, "a", 2000, 2490), 390),
        held(call(12, "b", 2000, 2491), 376),
        call(13, "a", 2495, 2595),
        held(call(14, "b", 2496, 2896), 300),
        call(15, "c", 2750, 2850),
        call(16, "c", 2855, 2955),
        call(17, "d", 3051, 3151),
        call(18, "d", 3156, 3256),
    ]);
    let r = judge(&trace(both), &JudgeOptions::new().probe_since(11));
    assert_eq!(r.verdict, Verdict::PartlySerialized, "{r}");
    assert!(r.gaps.as_ref().is_some_and(|g| !g.reason.contains("start-up")), "{r}");
}

/// Four agents of three 100 ms calls each, `gap` ms between their calls in the run judged and
/// 200 in the probe run (each answer held 10-40 ms, a few agents' apart): in the first, a
/// permit of two around a 200 ms tool, each agent waiting for it at every step.
fn short_waits(gap: u64) -> Vec<crate::trace::RequestTrace> {
    let mut reqs = Vec::new();
    for (k, a) in ["a", "b", "c", "d"].into_iter().enumerate() {
        for c in 0..3u64 {
            let from = c * (100 + gap);
            reqs.push(call(1 + 3 * k as u64 + c, a, from, from + 100));
        }
    }
    for (k, a) in ["a", "b", "c", "d"].into_iter().enumerate() {
        let (h, mut from) = (40 - 10 * k as u64, 5000);
        for c in 0..3u64 {
            reqs.push(held(call(101 + 3 * k as u64 + c, a, from, from + 100 + h), h));
            from += 100 + h + 200;
        }
    }
    reqs
}

#[test]
fn waits_for_each_others_work_the_clients_cpu_time_cannot_explain_count_and_settle_the_verdict() {
    // Every gap 330 ms in the run judged, 200 in the probe run: 130 ms shorter, under the
    // floor for a client library's processing taking turns (150). Eight of them: 1.04 s.
    let opts = || JudgeOptions::new().probe_since(101);
    // The client ran 0.1 s on a CPU: waiting for each other's processing, the agents could
    // have waited three times that at the most. The rest waited for something else: each
    // agent's chain is 100 + 200 + 100 + 200 + 100 = 700 ms, not the 960 it took.
    let r = judge(&trace(short_waits(330)), &opts().client_cpu_time(std::time::Duration::from_millis(100)));
    assert!((r.time.ideal_s - 0.70).abs() < 0.01, "{r}");
    let g = r.gaps.as_ref().expect("probed");
    assert_eq!(g.waits.len(), 8, "{r}");
    assert!(g.reason.contains("a, b, c, d waited 1.04 s in all for other agents' work"), "{}", g.reason);
    // Saved (2,800 - 960) / (2,800 - 700) = 88 %: parallel by the times, but the waits, measured,
    // explain the time lost, in a run over a quarter longer than allowed: partly serialized.
    assert_eq!((r.verdict, r.cause), (Verdict::PartlySerialized, Cause::BetweenCalls), "{r}");
    assert!(r.reason.contains("its threads ran 0.10 s on a CPU"), "{}", r.reason);
    // Ran 0.4 s: the agents' processing taking turns explains 1.2 s: not counted, the gaps as
    // measured. And where the CPU time is not known, the same.
    for o in [opts().client_cpu_time(std::time::Duration::from_millis(400)), opts()] {
        let r = judge(&trace(short_waits(330)), &o);
        assert!((r.time.ideal_s - 0.96).abs() < 0.01, "{r}");
        assert!(r.gaps.as_ref().is_some_and(|g| g.waits.is_empty()), "{r}");
        assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    }
    // Gaps of 400 against 200: waits over the floor, counted whatever the CPU time (1.6 s);
    // saved (2,800 - 1,100) / (2,800 - 700) = 81 %. The client ran 1 s on a CPU: its
    // processing taking turns could explain 3 s of waits (CPU-bound tools on fewer cores
    // than agents): parallel, the waits named. Ran 0.1 s: a permit, partly serialized.
    let r = judge(&trace(short_waits(400)), &opts().client_cpu_time(std::time::Duration::from_secs(1)));
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!(r.gaps.as_ref().is_some_and(|g| g.reason.contains("too little to change the verdict")), "{r}");
    let r = judge(&trace(short_waits(400)), &opts().client_cpu_time(std::time::Duration::from_millis(100)));
    assert_eq!(r.verdict, Verdict::PartlySerialized, "{r}");
    // Shorter by 40 ms in each gap (240 against 200): within what the judge takes for noise.
    let r = judge(&trace(short_waits(240)), &opts().client_cpu_time(std::time::Duration::from_millis(10)));
    assert!(r.gaps.as_ref().is_some_and(|g| g.waits.is_empty()), "{r}");
}
