//! The probe run's test of hand-offs (issue 36): an agent's first call that went out right after
//! another agent's answer was handed its task by it, or held back by something that answer's end
//! freed (a permit, a lock, a pool slot). The probe holds such answers back, each until after its
//! *rival* is out ([`release_delays`]); the comparison reads whether each call still went out
//! right after the answer it could have followed ([`depended`]) or right after another
//! ([`instead`]). The rest of the probe's reading is `probed.rs`.

use super::agents::HANDOFF_WINDOW_US;
use super::input::Req;
use std::collections::BTreeMap;

/// How long a probe run holds back an answer another agent's first call went out right after,
/// before its turn, at the least, and how far apart it releases such answers: twice the
/// hand-off window, so a call that did not depend on it goes out before it, one that did goes
/// out after it again, and one that went out after another of them is told from it.
pub(super) const HANDOFF_DELAY_US: u64 = 2 * HANDOFF_WINDOW_US;

/// How soon after the answer that freed it a call held back by a permit, a lock or a pool slot
/// goes out, at the most: an event loop's turn or a woken thread, 20 ms (the judge's largest
/// hand-off tolerance).
const WAKE_US: u64 = 20_000;

/// The answers a first call that went out right after another agent's answer
/// (`Links::follows`) could have followed: every other agent's answer that ended within the
/// hand-off window before it went out (answers that end a few milliseconds apart leave which
/// one it waited for open).
pub(super) fn candidates<'a>(reqs: &'a [Req<'_>], i: usize) -> impl Iterator<Item = usize> + 'a {
    let (g, start) = (reqs[i].group, reqs[i].start);
    (0..reqs.len())
        .filter(move |&k| reqs[k].group != g && reqs[k].end <= start && start - reqs[k].end <= HANDOFF_WINDOW_US)
}

/// How much longer past its rival (below) the probe may hold an answer under test: 2 s of wall
/// time, so a rival far off (an agent with many calls still to make) costs the probe run a
/// bounded wait; such an answer is held the plain delay.
const RIVAL_MAX_US: u64 = 2_000_000;

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

/// How long the probe holds back each answer a first call went out right after (`tested`,
/// indices of the run judged), in µs: [`HANDOFF_DELAY_US`], and where the answer has a rival
/// ending within [`RIVAL_MAX_US`] of it, until that long after the rival is out (the rival
/// itself held back first where it is under test too). A call handed its task by the answer
/// still goes out right after it; a call held back by a permit, a lock or a pool slot that
/// any answer frees (the waiters served in turn) goes out as the rival comes back, right after
/// an answer it could not have followed in the run judged, and the probe shows it.
pub(super) fn release_delays(reqs: &[Req<'_>], tested: &std::collections::BTreeSet<usize>) -> Vec<(usize, u64)> {
    let (mut first, mut latest): (BTreeMap<usize, u64>, BTreeMap<usize, u64>) = Default::default();
    for q in reqs {
        let f = first.entry(q.group).or_insert(q.start);
        *f = (*f).min(q.start);
        let l = latest.entry(q.group).or_insert(q.start);
        *l = (*l).max(q.start);
    }
    let last: Vec<bool> = reqs.iter().map(|q| latest.get(&q.group) == Some(&q.start)).collect();
    // Latest first: a rival ends after the answer it is the rival of.
    let mut by_end: Vec<usize> = tested.iter().copied().collect();
    by_end.sort_by_key(|&k| std::cmp::Reverse((reqs[k].end, k)));
    let mut release: BTreeMap<usize, u64> = BTreeMap::new();
    for &j in &by_end {
        let end = reqs[j].end;
        let after_rival = rival(reqs, &first, &last, j)
            .filter(|&k| reqs[k].end - end <= RIVAL_MAX_US)
            .map(|k| release.get(&k).copied().unwrap_or(reqs[k].end) + HANDOFF_DELAY_US);
        release.insert(j, (end + HANDOFF_DELAY_US).max(after_rival.unwrap_or(0)));
    }
    release.into_iter().map(|(j, at)| (j, at - reqs[j].end)).collect()
}

/// Whether first call `i` of the run judged (`first`), which went out right after another agent's answer,
/// depended on it, from its twin in the probe run (`matched`): right after an answer it could
/// have followed, held back, it still went out after it (`Some(true)`: that answer handed it
/// its task, or released what held it); not right after any of them, with one held back, it
/// did not (`Some(false)`: it went out before, or as another answer came); right after one the
/// probe did not hold back, it went out as in the run judged (`None`: not tested).
pub(super) fn depended(first: &[Req<'_>], probe: &[Req<'_>], matched: &[usize], i: usize, tol: u64) -> Option<bool> {
    let pi = &probe[matched[i]];
    let held = |q: &Req<'_>| q.r.held_us >= HANDOFF_DELAY_US / 2;
    let twins: Vec<&Req<'_>> = candidates(first, i).map(|j| &probe[matched[j]]).collect();
    match twins.iter().find(|q| pi.start >= q.end && pi.start - q.end <= HANDOFF_WINDOW_US + tol) {
        Some(q) if held(q) => Some(true),
        Some(_) => None,
        None => twins.iter().any(|q| held(q)).then_some(false),
    }
}

/// Whether first call `i` of the run judged, which went out right after another agent's answer,
/// went out in the probe run right after another agent's answer that it could not have followed
/// in the run judged (within a waiter's wake-up, [`WAKE_US`] at the least): held back by what
/// any answer frees.
pub(super) fn instead(first: &[Req<'_>], probe: &[Req<'_>], matched: &[usize], i: usize, tol: u64) -> bool {
    let pi = &probe[matched[i]];
    let twins: Vec<usize> = candidates(first, i).map(|j| matched[j]).collect();
    let near = tol.max(WAKE_US);
    probe
        .iter()
        .enumerate()
        .any(|(k, q)| q.group != pi.group && !twins.contains(&k) && pi.start >= q.end && pi.start - q.end <= near)
}
