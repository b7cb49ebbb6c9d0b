//! The probe run's test of hand-offs (issue 36): an agent's first call that went out right after
//! another agent's answer was handed its task by it, or held back by something that answer's end
//! freed (a permit, a lock, a pool slot). The probe holds such answers back, each until after its
//! *rival* is out ([`rivals`]); the comparison reads whether each call still went out right after
//! an answer it could have followed, or right after another ([`tested`]). And first calls that
//! went out late waiting for no answer: their agents' own start-up ([`started_free`]). The rest
//! of the probe's reading is `probed.rs`.

use super::agents::{HANDOFF_WINDOW_US, Links, WAKE_US};
use super::figures::{plural, secs};
use super::input::Req;
use std::collections::{BTreeMap, BTreeSet};

/// How long a probe run holds back an answer another agent's first call went out right after,
/// before its turn, at the least, and how long after its rival is out: twice the hand-off
/// window, so a call that did not depend on it goes out before it, and one that did goes out
/// after it again, apart from any other answer's release.
pub(super) const HANDOFF_DELAY_US: u64 = 2 * HANDOFF_WINDOW_US;

/// The answers a first call that went out right after another agent's answer
/// (`Links::follows`) could have followed: every other agent's answer that ended within the
/// hand-off window before it went out (answers that end a few milliseconds apart leave which
/// one it waited for open).
pub(super) fn candidates<'a>(reqs: &'a [Req<'_>], i: usize) -> impl Iterator<Item = usize> + 'a {
    let (g, start) = (reqs[i].group, reqs[i].start);
    (0..reqs.len())
        .filter(move |&k| reqs[k].group != g && reqs[k].end <= start && start - reqs[k].end <= HANDOFF_WINDOW_US)
}

/// How far after an answer under test its rival (below) may end in the run judged, and how much
/// longer than the plain delay the probe may hold the answer waiting for it: 2 s of wall time,
/// so a rival far off (an agent with many calls still to make) costs the probe run a bounded
/// wait; an answer whose rival is further off is held the plain delay.
pub(super) const RIVAL_MAX_US: u64 = 2_000_000;

/// An answer under test's *rival*: the first answer after it that could free what it may have
/// freed. Among the other agents' calls in flight when it ended, the first to end after it;
/// where it was its agent's last call (the agent done, its permit or thread free), the first
/// other agent that had begun by then to be done (a permit held around an agent's whole run is
/// freed by nothing else). `first` and `last`: each group's first start, and whether each call
/// is its agent's last.
fn rival(reqs: &[Req<'_>], first: &BTreeMap<usize, u64>, last: &[bool], j: usize) -> Option<usize> {
    let (g, end) = (reqs[j].group, reqs[j].end);
    let begun = |k: usize| first.get(&reqs[k].group).is_some_and(|&s| s < end);
    (0..reqs.len())
        .filter(|&k| reqs[k].group != g && reqs[k].end > end)
        .filter(|&k| if last[j] { last[k] && begun(k) } else { reqs[k].start < end })
        .min_by_key(|&k| (reqs[k].end, k))
}

/// How the probe holds back each answer a first call could have followed (`tested`, indices of
/// the run judged): [`HANDOFF_DELAY_US`], and where the answer has a rival ending within
/// [`RIVAL_MAX_US`] of it in the run judged, until that long after the rival is out in the
/// probe run (the rival held back first where it is under test too, unless that chain of waits
/// runs into a call that went out only after the answer ended; [`RIVAL_MAX_US`] and the delay
/// at the most). Returns each answer with its rival, if any. A call handed its task by
/// the answer still goes out right after it; a call held back by a permit, a lock or a pool
/// slot that any answer frees (the waiters served in turn) goes out as the rival comes back,
/// right after an answer it could not have followed in the run judged, and the probe shows it.
pub(super) fn rivals(reqs: &[Req<'_>], tested: &BTreeSet<usize>) -> Vec<(usize, Option<usize>)> {
    let (mut first, mut latest): (BTreeMap<usize, u64>, BTreeMap<usize, u64>) = Default::default();
    for q in reqs {
        let f = first.entry(q.group).or_insert(q.start);
        *f = (*f).min(q.start);
        let l = latest.entry(q.group).or_insert(q.start);
        *l = (*l).max(q.start);
    }
    let last: Vec<bool> = reqs.iter().map(|q| latest.get(&q.group) == Some(&q.start)).collect();
    let mut rivals: BTreeMap<usize, Option<usize>> = tested
        .iter()
        .map(|&j| (j, rival(reqs, &first, &last, j).filter(|&k| reqs[k].end - reqs[j].end <= RIVAL_MAX_US)))
        .collect();
    // An answer waits for its rival, which may wait for its own: every call past the rival
    // along that chain must have gone out before the first answer of it ended in the run
    // judged, or it may wait for that answer (a permit it holds, an agent's previous call)
    // while that answer waits for it. Such an answer waits the plain delay instead. (The rival
    // itself may have gone out later: an agent already running when the answer ended needs
    // nothing more of it to be done.)
    let heads: Vec<usize> = rivals.keys().copied().collect();
    for j in heads {
        let mut seen = vec![j];
        let mut next = rivals.get(&j).copied().flatten();
        while let Some(c) = next {
            if seen.contains(&c) || (seen.len() > 1 && reqs[c].start >= reqs[j].end) {
                rivals.insert(j, None);
                break;
            }
            seen.push(c);
            next = rivals.get(&c).copied().flatten();
        }
    }
    rivals.into_iter().collect()
}

/// What the probe run showed of first call `i` of the run judged (`first`), which went out right
/// after another agent's answer (`link`), from its twin in the probe run (`matched`): whether
/// it depended on an answer it could have followed, and whether it went out `instead` right
/// after another agent's answer that it could not have followed (within a waiter's wake-up,
/// [`WAKE_US`] at the least, while those it could have followed were held): held back by what
/// any answer frees.
///
/// `Some(true)`: right after an answer it could have followed, held back, it still went out
/// after it (that answer handed it its task, or released what held it); `Some(false)`: not
/// right after any of them, with one held back (it went out before, or as another answer came);
/// `None`: right after one the probe did not hold back, as in the run judged (not tested).
/// Where another agent's answer came out last before it, and one it could have followed came
/// out within the hand-off window before that, the latter counts only if it came out within the
/// time the call took to go out after its answer in the run judged (a wake-up more): a call
/// handed its task goes out as soon after it as it did before.
pub(super) fn tested(
    first: &[Req<'_>],
    probe: &[Req<'_>],
    matched: &[usize],
    (i, link): (usize, usize),
    tol: u64,
) -> (Option<bool>, bool) {
    let pi = &probe[matched[i]];
    let held = |q: &Req<'_>| q.r.held_us >= HANDOFF_DELAY_US / 2;
    let twins: Vec<usize> = candidates(first, i).map(|j| matched[j]).collect();
    let near = tol.max(WAKE_US);
    // The last other agent's answer out before it: one it could not have followed, right before.
    let last = (0..probe.len())
        .filter(|&k| probe[k].group != pi.group && probe[k].end <= pi.start)
        .max_by_key(|&k| probe[k].end)
        .filter(|&k| !twins.contains(&k) && pi.start - probe[k].end <= near);
    let lag = match last {
        Some(_) => first[i].start.saturating_sub(first[link].end) + near,
        None => HANDOFF_WINDOW_US + tol,
    };
    let after = twins.iter().map(|&k| &probe[k]).find(|q| pi.start >= q.end && pi.start - q.end <= lag);
    let depended = match after {
        Some(q) if held(q) => Some(true),
        Some(_) => None,
        None => twins.iter().any(|&k| held(&probe[k])).then_some(false),
    };
    (depended, depended == Some(false) && last.is_some())
}

/// The first calls of the run judged that went out late and waited for no answer, each with
/// its agent's own start-up before it, µs, at the most and at the least. Late with no answer
/// right before it ([`Links::late`]), its twin in the probe run went out with no answer yet
/// ended (every answer held until it came); late right after an answer, the probe showed it
/// did not depend on it ([`tested`]), did not go out right after another instead (a permit
/// any answer frees), and went out no later after the probe run's first call than the probe
/// lets a late starter come (`expiry` of its time in the run judged: a quarter more and the
/// tolerance). A start-up of the agent's own does not wait for answers, so holding them does not
/// move it; a call that moved with them waited for one, or for work that follows one (a pool's
/// thread freed after its agent's last answer and some work of its own). At the most, the shorter of how long after each run's first call it went
/// out. With every answer held no agent works between calls, but the others' start-ups may
/// have run before it: at the least, the time since the latest other agent's first call before
/// it in the probe run (start-ups done one agent at a time, a blocking load inside async code,
/// take turns; start-ups on timers of their own overlap, and no run tells the two apart).
pub(super) fn started_free(
    (first, links): (&[Req<'_>], &Links),
    probe: &[Req<'_>],
    matched: &[usize],
    depended: &[Option<bool>],
    instead: &[bool],
    expiry: impl Fn(u64) -> u64,
) -> Vec<(usize, u64, u64)> {
    let t0 = |reqs: &[Req<'_>]| reqs.iter().map(|q| q.start).min().unwrap_or(0);
    let (f0, p0) = (t0(first), t0(probe));
    // Each probe agent's first call.
    let mut firsts: BTreeMap<usize, u64> = BTreeMap::new();
    for q in probe {
        let s = firsts.entry(q.group).or_insert(q.start);
        *s = (*s).min(q.start);
    }
    (0..first.len())
        .filter_map(|i| {
            let (q, p) = (&first[i], &probe[matched[i]]);
            let free = if links.late[i] > 0 {
                !probe.iter().any(|o| o.end <= p.start)
            } else {
                links.follows[i].is_some()
                    && depended[i] == Some(false)
                    && !instead[i]
                    && p.start - p0 <= expiry(q.start - f0)
            };
            let most = (q.start - f0).min(p.start - p0);
            let before = firsts.iter().filter(|&(&g, &s)| g != p.group && s <= p.start).map(|(_, &s)| s).max();
            let least = before.map_or(most, |b| most.min(p.start - b));
            free.then_some((i, most, least))
        })
        .collect()
}

/// The first calls [`started_free`] found, in words (`who`: a call's agent), for the probe's
/// findings; `turns`: where they went out one after another, their start-ups counted at the
/// most.
pub(super) fn started_in_words<'a>(
    started: &[(usize, u64, u64)],
    who: impl Fn(usize) -> &'a str,
    turns: bool,
) -> String {
    let late: Vec<String> = started.iter().map(|&(i, most, _)| format!("{}'s {:.2} s", who(i), secs(most))).collect();
    let (its, work) = if late.len() == 1 { ("its agent's", "its") } else { ("their agents'", "their") };
    let what = if turns {
        "at the most".to_string()
    } else {
        format!("(a timer, data loaded first, a library's first use), counted as {work} work")
    };
    let calls = plural(late.len(), "first call", "first calls");
    format!(
        "; {calls} went out late waiting for no answer ({} after the run's first): {its} own start-up {what}",
        late.join(", ")
    )
}

/// Where each of `calls` (first calls that went out right after another agent's answer) went
/// out on a connection another agent's answer had just come back on, and the program never used more
/// connections than it had calls in flight at its most: a connection pool of that size fits
/// what the run shows (a hand-off through one shared client reuses a connection too, so this
/// is a hint, not a finding).
pub(super) fn pooled(reqs: &[Req<'_>], calls: &[usize], c: &super::report::Concurrency) -> String {
    let (connections, max_in_flight) = (c.connections, c.max_in_flight);
    // The connection's previous request: another agent's, ended right before this one went out.
    let reused = calls.iter().all(|&i| {
        let (q, start) = (&reqs[i], reqs[i].start);
        reqs.iter()
            .filter(|o| o.r.client == q.r.client && o.end <= start)
            .max_by_key(|o| o.end)
            .is_some_and(|o| o.group != q.group && start - o.end <= super::agents::HANDOFF_WINDOW_US)
    });
    if connections > max_in_flight || !reused {
        return String::new();
    }
    format!(
        ". Each of them went out on a connection another agent's answer had just come back on, and the program never used more than {}: a client connection pool of {max_in_flight} (httpx's `Limits(max_connections=...)`, aiohttp's `TCPConnector(limit=...)`, Go's `Transport.MaxConnsPerHost`, a Node agent's `maxSockets`) would do exactly this",
        plural(connections, "connection", "connections")
    )
}
