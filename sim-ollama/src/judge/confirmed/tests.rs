//! A confirmation run on constructed traces: three labelled agents a, b, c whose calls take
//! 100 ms and whose tools take 300 ms between their two calls. Times in ms; the run judged
//! has ids 1-6 from 0, the probe run 7-12 from 2000, the confirmation 13-18 from 5000.

use crate::judge::testkit::{call, one_executor, probe_run, together, trace};
use crate::judge::*;
use crate::trace::RequestTrace;

/// A confirmation run from id 13, repeating `run`.
fn confirmation(run: ConfirmRun) -> Confirmation {
    Confirmation { run, since: 13, void: None }
}

fn probed() -> JudgeOptions {
    JudgeOptions::new().probe_since(7)
}

/// The run judged (`run`, ids 1-6) with its probe run (`probe` ms of work each, ids 7-12),
/// judged as a pair; then with a confirmation (`again`, ids 13-18 from 5000 ms) repeating `rerun`.
fn pair_then(
    mut runs: Vec<RequestTrace>,
    probe: [u64; 3],
    rerun: ConfirmRun,
    again: Vec<RequestTrace>,
) -> (Report, Report) {
    runs.extend(probe_run(probe, 7, 2000));
    let first = judge(&trace(runs.clone()), &probed());
    runs.extend(again);
    (first, judge(&trace(runs), &probed().confirmation(confirmation(rerun))))
}

#[test]
fn waits_that_a_pause_of_the_run_judged_made_do_not_recur_and_are_not_counted() {
    // The run judged: tools of 300 ms together, and the whole process paused 250 ms while they
    // ran, so every next call went out at 650 (gaps of 550). The probe measures 300 each: each
    // agent "waited" 250 ms for the others' work: short of parallel, and a confirmation of the
    // run judged is asked for.
    let (first, r) = pair_then(
        together([550, 550, 550], 1, 0),
        [300, 300, 300],
        ConfirmRun::Plain,
        together([300, 302, 304], 13, 5000),
    );
    assert_ne!(first.verdict, Verdict::Parallel, "{first}");
    assert_eq!(first.confirm, Some(ConfirmRun::Plain), "{first}");
    assert!(first.needs_confirmation());
    // Run again, unpaused: the gaps are 300, as the probe measured: parallel, and kept.
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert!(!r.needs_confirmation(), "a confirmed verdict asks for no more: {r}");
    let c = r.confirmation.as_ref().expect("confirmation reported");
    assert_eq!(
        (c.first, c.again, c.waits_recurred, c.kept),
        (first.verdict, Some(Verdict::Parallel), false, KeptPair::Again)
    );
    assert!(r.notes.iter().any(|n| n.contains("did not recur") && n.contains("pause of the whole process")), "{r}");
    // The figures are the confirmation's: 100 + 304 + 100.
    assert!((r.time.took_s - 0.504).abs() < 1e-6, "{r}");
}

#[test]
fn agents_taking_turns_wait_again_in_the_confirmation_and_the_verdict_stands() {
    // Tools that took turns on one executor, in the run judged and again in the confirmation:
    // the waits recur, the first pair's verdict stands.
    let (first, r) = pair_then(
        one_executor([300, 300, 300], 1, 0),
        [300, 300, 300],
        ConfirmRun::Plain,
        one_executor([300, 300, 300], 13, 5000),
    );
    assert_eq!(first.verdict, Verdict::PartlySerialized, "{first}");
    assert_eq!(first.confirm, Some(ConfirmRun::Plain));
    assert_eq!(r.verdict, Verdict::PartlySerialized, "{r}");
    assert_eq!(r.cause, Cause::BetweenCalls, "{r}");
    assert_eq!(r.reason, first.reason, "the first pair's report, unchanged but for its notes");
    let c = r.confirmation.as_ref().expect("confirmation reported");
    assert_eq!((c.again, c.waits_recurred, c.kept), (Some(Verdict::PartlySerialized), true, KeptPair::First));
    assert!(r.notes.iter().any(|n| n.contains("waiting") && n.contains("again: the verdict stands")), "{r}");
}

#[test]
fn a_pause_in_the_probe_run_is_confirmed_away_by_a_second_probe_run() {
    // The run judged: tools of 300, 600 and 304 ms together, no pause. The probe run: b's
    // tool stretched to 1400 ms by a pause, past its expiry (600 x 1.25 + the tolerance), so b
    // "waited for an answer the probe held" and its own work cannot be told from the wait:
    // read as waiting, b's chain is 200 and the ideal c's 504 against the 800 taken, 77 % of
    // the saving: the verdict waits on it.
    let (first, r) = pair_then(
        together([300, 600, 304], 1, 0),
        [300, 1400, 304],
        ConfirmRun::Probe,
        probe_run([300, 600, 304], 13, 5000),
    );
    let g = first.gaps.as_ref().expect("gaps read");
    assert!(g.waits.iter().any(|w| w.agent == "b" && w.own_s.is_none()), "{g:?}");
    assert_eq!(first.verdict, Verdict::Inconclusive, "{first}");
    assert_eq!(first.confirm, Some(ConfirmRun::Probe), "{first}");
    // The probe run again, unpaused: every gap the agent's own work.
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    let c = r.confirmation.as_ref().expect("confirmation reported");
    assert_eq!((c.run, c.kept), (ConfirmRun::Probe, KeptPair::Again));
    // The run judged is the same in both pairs: its figures are unchanged.
    assert!((r.time.took_s - first.time.took_s).abs() < 1e-9, "{r}");
}

#[test]
fn a_void_confirmation_leaves_the_first_pair_and_says_why() {
    let mut runs = together([550, 550, 550], 1, 0);
    runs.extend(probe_run([300, 300, 300], 7, 2000));
    let first = judge(&trace(runs.clone()), &probed());
    let void = Confirmation { void: Some("it exited 1".into()), ..confirmation(ConfirmRun::Plain) };
    let r = judge(&trace(runs), &probed().confirmation(void));
    assert_eq!(r.verdict, first.verdict, "{r}");
    assert!(!r.needs_confirmation(), "a void confirmation is not asked for again: {r}");
    let c = r.confirmation.as_ref().expect("confirmation reported");
    assert_eq!((c.void.as_deref(), c.again, c.kept), (Some("it exited 1"), None, KeptPair::First));
    assert!(r.notes.iter().any(|n| n.contains("is void: it exited 1")), "{r}");
}

#[test]
fn a_confirmation_needs_a_probe_run_and_a_parallel_or_unprobed_verdict_asks_for_none() {
    // Without a probe run there is nothing to confirm: judged alone, and said so.
    let runs = together([300, 302, 304], 1, 0);
    let r = judge(&trace(runs.clone()), &JudgeOptions::new().confirmation(confirmation(ConfirmRun::Plain)));
    assert!(r.notes.iter().any(|n| n.contains("without a probe run")), "{r}");
    assert!(r.confirmation.is_none());
    // Unprobed (inconclusive, asking for a probe) and probed parallel: no confirmation.
    assert_eq!(r.confirm, None, "{r}");
    let mut both = runs;
    both.extend(probe_run([300, 302, 304], 7, 2000));
    let r = judge(&trace(both), &probed());
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert_eq!(r.confirm, None, "{r}");
    // A program serialized in the client with no gaps to probe asks for none either.
    let serial = vec![call(1, "a", 0, 100), call(2, "b", 100, 200), call(3, "c", 200, 300)];
    let r = judge(&trace(serial), &JudgeOptions::new());
    assert_eq!(r.verdict, Verdict::Serialized, "{r}");
    assert_eq!(r.confirm, None);
}

#[test]
fn waits_that_recur_are_not_set_aside_by_a_confirmation_that_cannot_decide() {
    // Seen in a suite run on a crowded machine (six agents behind a semaphore of two): the
    // first pair read partly serialized, the second probe run found the same waits (1.83 s
    // both times) but read inconclusive, and being "closer to parallel" it was kept, with a
    // note saying the waits did not recur. Here: tools in turn on one executor; the first
    // probe run with b's gap stretched past its twin (its own work unknown) and c's measured,
    // 1.2 s of waiting: partly serialized, a second probe run asked for.
    // The second probe run: b stretched again, and c's tool too (1.5 s against the 0.9 s gap
    // it had in the run judged), so neither's own work is measured: that pair alone cannot
    // decide, with 1.5 s of waiting found.
    let second_probe = probe_run([300, 1400, 1500], 13, 5000);
    let (first, r) = pair_then(one_executor([300, 300, 300], 1, 0), [300, 1400, 300], ConfirmRun::Probe, second_probe);
    assert_eq!((first.verdict, first.confirm), (Verdict::PartlySerialized, Some(ConfirmRun::Probe)), "{first}");
    let c = r.confirmation.as_ref().expect("confirmation reported");
    assert_eq!(c.again, Some(Verdict::Inconclusive), "{r}");
    // The waits recurred: the first pair's verdict stands, and no note says they did not.
    assert_eq!((r.verdict, c.waits_recurred, c.kept), (Verdict::PartlySerialized, true, KeptPair::First), "{r}");
    assert!(!r.notes.iter().any(|n| n.contains("did not recur")), "{r}");
    assert!(r.notes.iter().any(|n| n.contains("read inconclusive") && n.contains("again: the verdict stands")), "{r}");
}

#[test]
fn waits_found_again_and_measured_decide_a_first_pair_that_could_not() {
    // Seen in a suite run (six agents behind a semaphore of two): the first pair inconclusive,
    // own work not all measured; the confirmation found the same 1.55 s of waiting, measured,
    // and read partly serialized; the inconclusive first pair, "closer to parallel", was kept.
    // Here: b's tool took 600 ms in the run judged; the first probe run stretched its gap past
    // its twin (inconclusive, a second probe run asked for); the second measured 300 ms of own
    // work: b waited 300 ms, found again.
    let (first, r) = pair_then(
        together([300, 600, 304], 1, 0),
        [300, 1400, 304],
        ConfirmRun::Probe,
        probe_run([300, 300, 304], 13, 5000),
    );
    assert_eq!((first.verdict, first.confirm), (Verdict::Inconclusive, Some(ConfirmRun::Probe)), "{first}");
    assert_eq!(r.verdict, Verdict::PartlySerialized, "{r}");
    let c = r.confirmation.as_ref().expect("confirmation reported");
    assert_eq!((c.first, c.waits_recurred, c.kept), (Verdict::Inconclusive, true, KeptPair::Again), "{r}");
    assert!(r.notes.iter().any(|n| n.contains("waits that recur are the program's")), "{r}");
    assert!(!r.notes.iter().any(|n| n.contains("did not recur")), "{r}");
}
