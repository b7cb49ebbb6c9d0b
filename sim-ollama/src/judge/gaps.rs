//! The gaps between an agent's calls: how much of each could be the agent's own work, and how
//! much waiting for other agents (issue 36).
//!
//! From one run the server cannot tell "agent B worked 0.6 s between its calls" from "agent B
//! worked 0.3 s, then waited 0.3 s for agent A's tool": a blocking call or CPU work holding the
//! executor (`time.sleep` inside `async def`, `execSync` in Node, `std::thread::sleep` on a
//! current-thread runtime), or a lock around the tools, makes the agents' local work take
//! turns, and each turn after the first looks like a longer gap. Counting every gap as the
//! agent's own work writes that serialization into the ideal.
//!
//! [`one_at_a_time`] is the other reading the same run allows: the local work done one agent
//! at a time. Another agent's request sent inside a gap shows the executor free at that moment,
//! so the gap's own work could have begun no earlier than the last such send. The judge reads
//! the run both ways; where the two readings disagree on the verdict, only a probe run (the
//! simulator changing when answers arrive, `crate::probe`) can settle it (`probed.rs`).

use super::agents::{Begun, Links, handoff_chain};
use super::decision::Verdict;
use super::figures::{clusters, pct, plural, secs};
use super::input::Req;
use super::reading::{Chained, Reading};
use super::report::{Cause, HandOff, Report};

/// Waiting between two calls for less than this (wall time), or for other agents' local work
/// shorter than this, is a client library's own processing of answers and requests, not a
/// tool: on a single-threaded executor every agent's per-call processing (and a library's
/// first use: lazy imports, schema building) takes its turn, which no program can avoid, so
/// the judge never blames it. 100 ms: above what the SDKs the suite runs spend per gap on a
/// loaded 2-core machine (ollama-python and the OpenAI SDK 15-60 ms, the OpenAI Agents SDK up to
/// about 130 ms), below the blocking tools worth finding (a sync HTTP call, a rate-limit sleep,
/// a CPU-heavy parse). A library's first use (up to 250 ms on such a machine) is one chunk,
/// once: see `compare`.
pub const LOCAL_WORK_FLOOR_US: u64 = 150_000;

/// The own work each gap holds if the program's local work was done one agent at a time.
/// Two things show where: another agent's request sent inside a gap after local work of its
/// own (at least [`LOCAL_WORK_FLOOR_US`]) shows the executor busy with that agent until then,
/// so the gap's own work began no earlier; and the agents' gaps that overlap in time can hold,
/// all together, no more work than the time they span (a blocked executor can also hold every
/// agent's next call until the last tool is done, so that they all go out together, as
/// LangGraph's tool node on one event loop does). Never more than the gap as measured,
/// hand-offs aside; gaps under the floor are left as they are. And a gap that closed right
/// after a run of other agents' calls, back to back, the first of them already running when
/// the agent's answer came, holds no work at all: the agent may have waited for those calls
/// (a lock or a permit around them, or a loop awaiting agents in turn: the lock held before the
/// agent came for it, which `agents::links` does not take for a wait on one run's word).
pub(super) fn one_at_a_time(reqs: &[Req<'_>], links: &Links, tolerance_us: u64) -> Vec<u64> {
    let mut by_end: Vec<usize> = (0..reqs.len()).collect();
    by_end.sort_by_key(|&k| reqs[k].end);
    let starts: Vec<u64> = reqs.iter().map(|q| q.start).collect();
    let mut own: Vec<u64> = (0..reqs.len())
        .map(|i| {
            let Some(p) = links.from[i] else { return links.local[i] };
            let (a, b) = (reqs[p].end, reqs[i].start);
            // Requests sent in [a, b), in start order: the latest of another agent's.
            let lo = starts.partition_point(|&s| s < a);
            let hi = starts.partition_point(|&s| s < b);
            let last_other = (lo..hi)
                .rev()
                .find(|&k| reqs[k].group != reqs[i].group && k != i && links.local[k] >= LOCAL_WORK_FLOOR_US)
                .map_or(a, |k| reqs[k].start);
            let own = links.local[i].min(b - last_other.max(a));
            let waited = (reqs[p].group == reqs[i].group && b - a > tolerance_us)
                .then(|| handoff_chain(reqs, &by_end, reqs[i].group, a, b, tolerance_us, Begun::Running))
                .flatten();
            waited.map_or(own, |first| own.min(first.saturating_sub(a)))
        })
        .collect();
    // Clusters of overlapping gaps (of the floor or more): their own work fits in their span.
    let gaps: Vec<(u64, u64, usize)> = (0..reqs.len())
        .filter(|&i| links.local[i] >= LOCAL_WORK_FLOOR_US)
        .filter_map(|i| links.from[i].map(|p| (reqs[p].end, reqs[i].start, i)))
        .collect();
    for (start, end, members) in clusters(gaps) {
        // Spread over the gaps in proportion to their lengths: any agent could have been the
        // one that worked while the others waited, and the reading that gives no agent more
        // than its share is the one that could hide the most.
        let total: u64 = members.iter().map(|&i| links.local[i]).sum();
        let span = end - start;
        if total > span {
            for &i in &members {
                own[i] = own[i].min((links.local[i] as u128 * span as u128 / total as u128) as u64);
            }
        }
    }
    own
}

/// The calls' links with the hand-offs `take` picks: such a first call follows the answer it
/// went out after, its local work the time between; `local` is each call's local work as the
/// reading takes it.
pub(super) fn with_handoffs(reqs: &[Req<'_>], links: &Links, local: Vec<u64>, take: impl Fn(usize) -> bool) -> Chained {
    let mut after = links.after.clone();
    let mut local = local;
    for (i, f) in links.follows.iter().enumerate() {
        if let Some(j) = *f {
            if take(i) {
                after[i] = vec![j];
                local[i] = reqs[i].start.saturating_sub(reqs[j].end);
            }
        }
    }
    Chained { after, local }
}

/// The most generous reading of the gaps: every first call that went out right after another
/// agent's answer taken for a hand-off, and every one that went out late with none right before
/// it for its agent's own start-up (`Links::late` as the local work before it).
pub(super) fn generous(reqs: &[Req<'_>], links: &Links) -> Chained {
    let own: Vec<u64> = links.local.iter().zip(&links.late).map(|(&gap, &late)| gap.max(late)).collect();
    with_handoffs(reqs, links, own, |_| true)
}

/// Waiting for a limit of the client's own inside the gaps between an agent's calls: a thread
/// pool, a semaphore or a connection pool smaller than the agents. Where the program never had
/// more than `k` calls in flight, fewer than its agents, an agent's next call that went out
/// right after another agent's call ended (within `tolerance_us`; once some gap shows that,
/// within a client library's turnaround for the others), while `k` were in flight until then,
/// was handed the thread, permit or connection that call freed; the time its gap
/// spent with `k` in flight it may have spent queued for one. Counted as the agent's own work,
/// those waits make the workload look as if it had local work to overlap with the server's
/// calls, which inflates what the deployment allows (12 agents through 8 threads on a server of
/// one slot read 76 % of an ideal server's saving, where a thread each read 27 %).
#[derive(Debug)]
pub(super) struct AtLimit {
    /// The most calls the program had in flight at once.
    pub(super) k: usize,
    /// Per call, the most of its gap that was not spent at the limit (`u64::MAX` where the gap
    /// shows no wait for it).
    free: Vec<u64>,
}

impl AtLimit {
    /// `links` with each such gap's own work at most the time the limit left free, and the
    /// time taken out, all told (`None` where nothing was).
    pub(super) fn take_out(&self, links: &Chained) -> Option<(Chained, u64)> {
        let local: Vec<u64> = links.local.iter().zip(&self.free).map(|(&l, &f)| l.min(f)).collect();
        let taken: u64 = links.local.iter().zip(&local).map(|(a, b)| a - b).sum();
        (taken > 0).then(|| (Chained { after: links.after.clone(), local }, taken))
    }
}

/// The gaps that show waits at the program's limit of calls in flight (see [`AtLimit`]), when it
/// had fewer in flight at its most than `agents` and some gap shows one.
pub(super) fn at_limit(reqs: &[Req<'_>], links: &Links, agents: usize, tolerance_us: u64) -> Option<AtLimit> {
    let in_flight: Vec<(u64, u64)> = reqs.iter().map(|q| (q.start, q.end.max(q.start))).collect();
    let (k, ..) = super::figures::sweep(&in_flight);
    if k == 0 || k >= agents {
        return None;
    }
    let count = InFlight::new(&in_flight);
    let mut by_end: Vec<usize> = (0..reqs.len()).collect();
    by_end.sort_by_key(|&o| reqs[o].end);
    // The gaps that closed within `window` of another agent's call ending with `k` in flight.
    let handed = |window: u64| -> Vec<u64> {
        let mut free = vec![u64::MAX; reqs.len()];
        for (i, q) in reqs.iter().enumerate() {
            // Only a gap after the agent's own previous call: waiting for an answer it carries
            // is the data flow.
            let Some(p) = links.from[i].filter(|&p| reqs[p].group == q.group) else { continue };
            let (a, b) = (reqs[p].end, q.start);
            // Other agents' calls that ended inside the gap, right before it closed.
            let lo = by_end.partition_point(|&o| reqs[o].end <= a.max(b.saturating_sub(window)));
            let hi = by_end.partition_point(|&o| reqs[o].end <= b);
            if by_end[lo..hi.max(lo)].iter().any(|&o| reqs[o].group != q.group && count.before(reqs[o].end) >= k) {
                free[i] = (b - a) - time_at(&in_flight, a, b, k);
            }
        }
        free
    };
    if handed(tolerance_us).iter().all(|&f| f == u64::MAX) {
        return None;
    }
    // Where the limit shows in some gaps, a thread or permit handed on later than a hand-over
    // takes is no less a wait for it: a busy machine wakes a pool's thread tens of
    // milliseconds late (twelve Python agents through eight threads beside two busy loops: one
    // call 40 ms late, its wait counted as its own work, lengthened the ideal until the limit's
    // cost hid under the quarter the judge allows for noise: read parallel). Such gaps are
    // read within a client library's own turnaround (`agents::HANDOFF_WINDOW_US`); only their
    // time with `k` in flight is taken out, never the part after the thread was free.
    // (Every gap the strict reading finds, the wider one finds too, with the same time free.)
    Some(AtLimit { k, free: handed(super::agents::HANDOFF_WINDOW_US.max(tolerance_us)) })
}

/// How many calls were in flight just before an instant, from their sorted starts and ends.
struct InFlight {
    starts: Vec<u64>,
    ends: Vec<u64>,
}

impl InFlight {
    fn new(iv: &[(u64, u64)]) -> InFlight {
        let (mut starts, mut ends): (Vec<u64>, Vec<u64>) = iv.iter().copied().unzip();
        starts.sort_unstable();
        ends.sort_unstable();
        InFlight { starts, ends }
    }

    /// Calls started before `t` and not ended before it (every call that ended before `t`
    /// started before it).
    fn before(&self, t: u64) -> usize {
        self.starts.partition_point(|&s| s < t) - self.ends.partition_point(|&e| e < t)
    }
}

/// Whether any call went out soon after another ended (within `window_us`: a client library's
/// own processing of an answer and of its next call, `agents::HANDOFF_WINDOW_US`) while `k`
/// were in flight until then: handed the thread, permit or connection that call freed. A
/// client held to `k` calls at a time shows it wherever it held one back; a call that went out
/// late with fewer in flight (the program's own delay, or a start that came late) was not held
/// by that limit. `iv`: each call's (start, end).
pub(super) fn handed_over(iv: &[(u64, u64)], k: usize, window_us: u64) -> bool {
    let count = InFlight::new(iv);
    // A call that started in `[end, end + window]` of a call that ended with `k` in flight (its
    // own start lies before its end, unless it took no time at all).
    iv.iter().any(|&(s, end)| {
        count.before(end) >= k && {
            let from = count.starts.partition_point(|&x| x < end);
            count.starts.get(from).is_some_and(|&next| next <= end + window_us && (next != s || s != end))
        }
    })
}

/// How long, within `[a, b)`, at least `k` of the intervals were in flight.
fn time_at(iv: &[(u64, u64)], a: u64, b: u64, k: usize) -> u64 {
    let mut ev: Vec<(u64, i32)> =
        iv.iter().filter(|&&(s, e)| s < b && e > a).flat_map(|&(s, e)| [(s.max(a), 1), (e.min(b), -1)]).collect();
    // Ends before starts at the same instant, as the sweep counts them.
    ev.sort();
    let (mut cur, mut last, mut total) = (0i64, a, 0u64);
    for (t, d) in ev {
        if cur >= k as i64 {
            total += t - last;
        }
        cur += i64::from(d);
        last = t;
    }
    total
}

/// The verdict where the two readings disagree and no probe ran: inconclusive, with both
/// readings in words and what settles it.
pub(super) fn unprobed(
    rep: &Report,
    low: &Reading,
    low_verdict: Verdict,
    handoffs: Option<&[HandOff]>,
    (reqs, links): (&[Req<'_>], &Links),
) -> (Cause, String) {
    let t = &rep.time;
    let handoffs = handoffs.filter(|h| !h.is_empty());
    let late: Vec<(&str, f64)> = (0..reqs.len())
        .filter(|&i| links.late[i] > 0)
        .map(|i| (rep.agents.get(reqs[i].group).map_or("an agent", |a| a.agent.as_str()), secs(links.late[i])))
        .collect();
    if let (None, Some(&(agent, lead_s)), Verdict::PartlySerialized | Verdict::Serialized) =
        (handoffs, late.first(), rep.verdict)
    {
        // The measured reading is short of parallel; with the late first calls as their agents'
        // own start-up it is parallel.
        let who = match late.len() {
            1 => format!(
                "{agent}'s first call went out {lead_s:.2} s after the run's first, with no answer right before it"
            ),
            k => format!(
                "{k} agents' first calls went out late ({agent}'s {lead_s:.2} s after the run's first), with no answer right before them"
            ),
        };
        return (
            Cause::UnprobedGaps,
            format!(
                "the agents' calls overlapped, but {who}: if that was the agent's own start-up (a timer, data loaded first, a library's first use) the program is parallel; if it waited for other agents' answers (agents run one after another), it is {}. One run cannot tell these apart; a probe run can (harness exec probes by default; over HTTP, POST /sim/probe and run the program again)",
                rep.verdict.as_str().replace('_', " "),
            ),
        );
    }
    if let Some(h) = handoffs {
        // The measured reading is short of parallel; taken as hand-offs, the first calls that
        // went out right after other agents' answers make it parallel.
        let mut who: Vec<String> = h.iter().map(|h| format!("{} after {}", h.agent, h.after_agent)).collect();
        who.dedup();
        return (
            Cause::UnprobedGaps,
            format!(
                "the agents' calls overlapped, but {} went out right after another agent's answer: if their tasks came from it (a hand-off, the program's design) the program is parallel; if not, it held them back and is {} ({}). One run cannot tell these apart; a probe run can (harness exec probes by default; over HTTP, POST /sim/probe and run the program again)",
                plural(h.len(), "first call", "first calls"),
                rep.verdict.as_str().replace('_', " "),
                who.join(", "),
            ),
        );
    }
    let low_saving = match low.against.and_then(|a| a.saving) {
        Some(s) => format!("saved {} of what the deployment allows", pct(s.max(-9.99))),
        None => format!("took {:.1}x the time the deployment explains", t.took_s / secs(low.allowed_us).max(1e-9)),
    };
    let measured_saving =
        t.saving.map_or_else(|| "was parallel".to_string(), |s| format!("saved {}", pct(s.max(-9.99))));
    (
        Cause::UnprobedGaps,
        format!(
            "the agents' calls overlapped (up to {} requests in flight at once), but the {:.2} s between their answers and their next calls could be their own work or waiting for each other's: read as their own work the program {measured_saving}; read as local work done one agent at a time ({:.2} s of it: a blocking call or CPU work holding the executor, or a lock around the tools, makes agents take turns) it {low_saving}, {}. One run cannot tell these apart; a probe run can (harness exec probes by default; over HTTP, POST /sim/probe and run the program again)",
            rep.concurrency.max_in_flight,
            t.local_s,
            secs(low.local_us),
            low_verdict.as_str().replace('_', " "),
        ),
    )
}

/// What the gaps showed where the readings agree.
pub(super) fn settled(rep: &Report, low: &Reading, low_verdict: Verdict) -> String {
    if rep.time.local_s <= 0.0 {
        return "no local work between calls".to_string();
    }
    format!(
        "read as the agents' own work ({:.2} s) or as local work done one agent at a time ({:.2} s), the gaps between calls give the same verdict ({})",
        rep.time.local_s,
        secs(low.local_us),
        if low_verdict == rep.verdict {
            rep.verdict.as_str().to_string()
        } else {
            format!("{}, or {} one at a time", rep.verdict, low_verdict)
        }
    )
}

#[cfg(test)]
mod tests;
