//! The client verdict settled with what a probe run found ([`probed`]): the hand-offs it
//! showed or could not test, start-ups taking turns, and the agents' waits for each other
//! between their calls, set against the time lost and the client's CPU (a machine too busy, or
//! a client's own processing, explains a wait as well as a permit). The comparison itself, call
//! by call, is `probed.rs`'s.

use super::agents::Links;
use super::decision::Verdict;
use super::figures::{pct, plural, secs};
use super::gaps::LOCAL_WORK_FLOOR_US;
use super::handoff_probe;
use super::input::Req;
use super::probed::Findings;
use super::report::{Cause, Report};
use super::waits;

/// Settles the client verdict with what a probe run found (the report's figures already read
/// the gaps as the probe measured them; `least`: the verdict with every gap the probe could not
/// measure taken as waiting). Returns the gaps' reason.
/// `cpu_wait_s`: how long the client's threads waited for a CPU while the calls ran, where
/// known ([`super::input::JudgeOptions::client_cpu_wait`]); `cpu_us`: how long they ran on one
/// and waited, µs, where the first is known ([`super::input::JudgeOptions::client_cpu_time`]).
pub(super) fn probed(
    rep: &mut Report,
    f: &Findings,
    (reqs, links): (&[Req<'_>], &Links),
    least: Verdict,
    (cpu_wait_s, cpu_us): (Option<f64>, Option<(u64, u64)>),
) -> String {
    let handed = f.depended.iter().filter(|d| **d == Some(true)).count();
    // `instead` holds only calls shown independent of the answer they followed.
    let instead = f.instead.iter().filter(|&&x| x).count();
    let not_handed = f.depended.iter().filter(|d| **d == Some(false)).count() - instead;
    let mut probe = match f.probe {
        Some((took, held)) => format!("the probe run took {took:.2} s, its answers held back {held:.2} s in all"),
        None => "the local work before each call as the program gave it".to_string(),
    };
    if handed > 0 {
        probe.push_str(&format!(
            "; {} depended on the answer it went out right after (held back, it still went out after it: a hand-off, the program's design, not time lost)",
            plural(handed, "first call", "first calls")
        ));
    }
    if not_handed > 0 && f.probe.is_some() {
        probe.push_str(&format!(
            "; {} did not depend on the answer it went out right after (it went out before that answer, held back, arrived)",
            plural(not_handed, "first call", "first calls")
        ));
    }
    // First calls that went out one after another with every answer held: start-ups on
    // timers of their own, or blocking start-ups taking turns.
    let turns = f.started.iter().any(|&(_, most, least)| least < most);
    if !f.started.is_empty() {
        let who = |i: usize| rep.agents.get(reqs[i].group).map_or("an agent", |a| a.agent.as_str());
        probe.push_str(&handoff_probe::started_in_words(&f.started, who, turns));
    }
    if instead > 0 {
        probe.push_str(&format!(
            "; {} went out right after another agent's answer, with the one it had followed held back and released later: held back by a permit, a lock or a pool slot whichever answer came first freed, not handed a task",
            plural(instead, "first call", "first calls")
        ));
    }
    // The first calls that went out right after another agent's answer, and were not shown
    // independent of it (a call that followed nothing has nothing to be ambiguous about).
    let ambiguous: Vec<usize> = (0..f.depended.len())
        .filter(|&i| links.follows[i].is_some() && f.depended[i] != Some(false) && !f.handed[i])
        .collect();
    let handed = f.handed.iter().filter(|&&h| h).count();
    if handed > 0 {
        probe.push_str(&format!(
            "; {} held words of the answer it went out after, which the probe run wrote in marked words: data of it reached them, however taken (a hand-off, the program's design)",
            plural(handed, "first call", "first calls")
        ));
    }
    if f.waits.is_empty() && !ambiguous.is_empty() && rep.verdict == Verdict::Parallel && least != Verdict::Parallel {
        // The first calls that went out right after another agent's answer depended on it (or
        // were not tested), and nothing in their prompts shows a task handed on.
        rep.verdict = Verdict::Inconclusive;
        rep.cause = Cause::UnprobedGaps;
        rep.reason = format!(
            "the agents' calls overlapped, but {} went out right after another agent's answer and waited for it ({probe}), with nothing of that answer in their prompts: a task handed on (the program's design: the program is parallel) or a permit or lock that answer released (the calls held back: the program is {}) cannot be told apart (a few words of the answer passed on in the prompt show the judge a task handed on){}",
            plural(ambiguous.len(), "first call", "first calls"),
            least.as_str().replace('_', " "),
            handoff_probe::pooled(reqs, &ambiguous, &rep.concurrency)
        );
        return rep.reason.clone();
    }
    if f.waits.is_empty() && turns && rep.verdict == Verdict::Parallel && least != Verdict::Parallel {
        // Calls as short as a scaled run's magnify start-ups that run in real time: where the
        // run was scaled, judged again where the calls outlast them, they may settle it.
        rep.longer_time_scale = super::client::outlasting(reqs, &rep.time);
        rep.verdict = Verdict::Inconclusive;
        rep.cause = if rep.longer_time_scale.is_some() { Cause::TimeScale } else { Cause::UnprobedGaps };
        rep.reason = format!(
            "the agents' calls overlapped, but their first calls went out one after another, each after the one before and waiting for no answer ({probe}): start-ups of the agents' own that overlapped (timers: the program is parallel) or start-up work done one agent at a time (a blocking load or setup inside async code: the program is {}), which no run can tell apart{}",
            least.as_str().replace('_', " "),
            rep.longer_time_scale.map_or(String::new(), |s| format!(
                "; calls this short magnify start-ups: judge it at a longer time scale (about {s:.2}), where the calls outlast them"
            ))
        );
        return rep.reason.clone();
    }
    if f.waits.is_empty() {
        return match f.once {
            Some((chunk, waited)) if chunk == 0.0 => format!(
                "the agents waited {waited:.2} s in all for local work that no agent's gap held as its own in the probe run (none of {:.2} s or more: a client library's first use as an answer was read, a pause of the process), which one run cannot tell apart; not counted, the gaps read as measured ({probe})",
                secs(LOCAL_WORK_FLOOR_US)
            ),
            Some((chunk, _)) => format!(
                "the agents waited for one agent's local work of {chunk:.2} s, once: a client library's first use (lazy imports, schemas built on the first answer) or one blocking call, which one run cannot tell apart; not counted, the gaps read as measured ({probe})"
            ),
            None => format!("the probe run measured every gap between calls as the agent's own work ({probe})"),
        };
    }
    let (words, waited) = waits::waits_in_words(&f.waits, waits::at_once(reqs, links, &f.own_most));
    if rep.concurrency.max_in_flight <= 1 {
        // No two calls ever in flight: every agent waited for the others' calls, one at a
        // time, and a gap the calls in flight do not cover is the executor's lag between them
        // (a starved machine sends the next call late). The serialization is the cause.
        return format!(
            "no two calls were ever in flight, so the agents' waits between their calls are part of that serialization, not a cause of their own: {words} ({probe})"
        );
    }
    let t = &rep.time;
    let lost = (t.took_s - t.allowed_s).max(0.0);
    let figures = format!(
        "took {:.2} s against {:.2} s allowed by the deployment ({:.2} s ideal, the agents' own work between calls as {}) and {:.2} s one at a time{}",
        t.took_s,
        t.allowed_s,
        t.ideal_s,
        if f.probe.is_some() { "the probe measured it" } else { "the program gave it" },
        t.sequential_s,
        t.saving.map_or(String::new(), |s| format!(": saved {} of what the deployment allows", pct(s.max(-9.99))))
    );
    match rep.verdict {
        Verdict::Parallel if least != Verdict::Parallel => {
            rep.verdict = Verdict::Inconclusive;
            rep.cause = Cause::UnprobedGaps;
            rep.reason = format!(
                "the agents' calls overlapped, but {words}; where an agent waited for something the probe held, its own work cannot be told from the wait, and read as waiting the program is {} ({figures})",
                least.as_str().replace('_', " ")
            );
            format!("{words} ({probe})")
        }
        // The times read parallel, but the agents waited for each other's local work as long
        // as half the time lost and more than their own processing could explain (waiting for
        // it taking turns, each agent waits at most the client's CPU time times the others,
        // and for a CPU as long as its threads waited for one), in a run over a quarter longer
        // than the deployment allows: a permit around their tools, measured, not the machine's
        // noise the parallel band allows for. Partly serialized, as a limit on the calls in
        // flight that explains the time lost is (`decision::Limited`).
        Verdict::Parallel
            if waited >= 0.5 * lost
                && t.took_s > t.allowed_s * super::decision::NO_ROOM_SLACK
                && waits::beyond_cpu(
                    (waits::others_work(&f.waits) * 1e6) as u64,
                    rep.agents.len().saturating_sub(1),
                    cpu_us,
                ) =>
        {
            rep.verdict = Verdict::PartlySerialized;
            rep.cause = Cause::BetweenCalls;
            rep.reason = format!(
                "the agents' calls overlapped, but the agents waited for each other between their calls: {words}, longer than the client's own processing could explain (its threads ran {:.2} s on a CPU); partly serialized in the client, it cost {lost:.2} s ({figures})",
                secs(cpu_us.map_or(0, |(ran, _)| ran))
            );
            format!("{words} ({probe})")
        }
        Verdict::Parallel => format!("{words}: too little to change the verdict ({probe})"),
        // The agents' local work ran fewer at a time than they were, and the client's threads
        // waited for a CPU half as long or more: cores busy with something else (or fewer than
        // the agents working at once) read the same as a permit or a blocked executor. (Three
        // CPU-bound tools in threads beside a busy loop on two cores waited for a CPU about as
        // long as their gaps grew: 0.90 s against 0.88 s, measured. By the cores' arithmetic,
        // the same work one at a time on the event loop beside two busy loops waits a third as
        // long as its gaps grow, and behind a semaphore of two beside one, two fifths.)
        Verdict::PartlySerialized | Verdict::Serialized
            if waited >= 0.5 * lost && cpu_wait_s.is_some_and(|c| c >= 0.5 * waits::local_waits(&f.waits)) =>
        {
            rep.verdict = Verdict::Inconclusive;
            rep.cause = Cause::ClientLag;
            rep.reason = format!(
                "the agents' calls overlapped, but {words}; the program's threads waited {:.2} s for a CPU while the calls ran, half as long as those waits or more: a machine whose cores were busy (or fewer than the agents working at once) reads the same as agents taking turns, which this run cannot tell apart (run again on a quieter machine) ({figures})",
                cpu_wait_s.unwrap_or_default()
            );
            format!("{words} ({probe})")
        }
        Verdict::PartlySerialized | Verdict::Serialized if waited >= 0.5 * lost => {
            rep.cause = Cause::BetweenCalls;
            let words_v = if rep.verdict == Verdict::Serialized { "serialized" } else { "partly serialized" };
            rep.reason = format!(
                "the agents' calls overlapped, but the agents waited for each other between their calls: {words}; {words_v} in the client, it cost {lost:.2} s ({figures})"
            );
            format!("{words} ({probe})")
        }
        _ => format!("{words} ({probe})"),
    }
}
