//! Telling agents apart, and each agent's chain of calls.

use super::input::Req;
use super::report::AgentSource;
use crate::trace::RequestTrace;
use std::collections::BTreeMap;

/// How the requests were told apart into agents.
pub(super) struct Grouping {
    /// Each agent's name, by group index (`Req::group`).
    pub(super) names: Vec<String>,
    /// How they were told apart.
    pub(super) source: AgentSource,
    /// Requests that carried an `X-Agent` label.
    pub(super) labelled: usize,
}

/// Groups the requests into agents, setting each one's `group`: by its `X-Agent` label; without
/// one, by the conversation its resent history chains it to; failing both, each request alone
/// (and the program is judged as a whole).
pub(super) fn group(reqs: &mut [Req<'_>]) -> Grouping {
    let labelled = reqs.iter().filter(|q| q.r.agent_label.is_some()).count();
    let traces: Vec<&RequestTrace> = reqs.iter().map(|q| q.r).collect();
    let conv = conversations(&traces);
    let mut names: Vec<String> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let mut conv_name: BTreeMap<usize, usize> = BTreeMap::new();
    let mut conv_count = 0;
    for (i, q) in reqs.iter_mut().enumerate() {
        let name_index = match &q.r.agent_label {
            Some(l) => *index.entry(l.clone()).or_insert_with(|| {
                names.push(l.clone());
                names.len() - 1
            }),
            None => *conv_name.entry(conv[i]).or_insert_with(|| {
                conv_count += 1;
                let prefix = if q.r.conversation.is_some() { "conversation" } else { "request" };
                names.push(format!("{prefix}-{conv_count}"));
                names.len() - 1
            }),
        };
        q.group = name_index;
    }
    let groups = names.len();
    let chained = (0..groups).any(|g| reqs.iter().filter(|q| q.group == g).count() >= 2);
    let every_chat = reqs.iter().all(|q| q.r.agent_label.is_some() || q.r.conversation.is_some());
    let source = if reqs.is_empty() || labelled == reqs.len() {
        AgentSource::Labels
    } else if labelled > 0 {
        AgentSource::Mixed
    } else if every_chat && chained {
        AgentSource::Conversations
    } else {
        AgentSource::Program
    };
    Grouping { names, source, labelled }
}

/// Whether every one of a run's `groups` agents ([`group`]) made its first call before any
/// answer of the run ended (false for a run of no requests).
pub(super) fn started_before_answers(reqs: &[Req<'_>], groups: usize) -> bool {
    let first_end = reqs.iter().map(|q| q.end).min().unwrap_or(0);
    groups > 0 && (0..groups).all(|g| reqs.iter().any(|q| q.group == g && q.start < first_end))
}

/// The key each agent is known by across runs ([`crate::probe::agent_key`]): its `X-Agent`
/// label, or its first turn's conversation fingerprint; `None` for a request that is neither
/// (a program judged as a whole). Indexed by group.
pub(super) fn keys(reqs: &[Req<'_>], groups: usize) -> Vec<Option<String>> {
    (0..groups)
        .map(|g| {
            let first = reqs.iter().find(|q| q.group == g)?;
            crate::probe::agent_key(
                first.r.agent_label.as_deref(),
                first.r.conversation.as_ref().map(|c| c.key.as_str()),
            )
        })
        .collect()
}

/// Each call's place in its chain: what it followed, the local work before it, and whether it
/// waited for a hand-off.
pub(super) struct Links {
    /// The local work before each call, measured: the gap after the last call it followed,
    /// hand-offs aside.
    pub(super) local: Vec<u64>,
    /// Whether each call arrived right after other agents' requests ran back to back.
    pub(super) handoff: Vec<bool>,
    /// The calls each call followed: its agent's previous one, and those whose answers it carries.
    pub(super) after: Vec<Vec<usize>>,
    /// The call among `after` whose end began the gap (the last to end), if any.
    pub(super) from: Vec<Option<usize>>,
    /// An agent's first call that went out right after another agent's answer (within
    /// [`HANDOFF_WINDOW_US`], not with the run's first calls): that answer, which may have
    /// handed it its task (a hand-off the prompt does not show) or not. A probe run tells.
    pub(super) follows: Vec<Option<usize>>,
    /// An agent's first call made later than the run's first calls with no answer right
    /// before it (beyond [`HANDOFF_WINDOW_US`]) and none carried: how long after the run's
    /// first call it went out, µs (0 for every other call). Its agent's own start-up (a timer,
    /// data loaded first, a library's first use) or a wait for other agents' answers (agents
    /// run one after another); a probe run holding every answer until it comes tells which.
    pub(super) late: Vec<u64>,
    /// Calls whose prompts carried other calls' answers.
    pub(super) carried: usize,
}

impl Links {
    /// Whether some agent's first call went out late: right after another agent's answer
    /// (`follows`), or with none right before it (`late`). A probe run tells what held it.
    pub(super) fn first_calls_in_question(&self) -> bool {
        self.follows.iter().zip(&self.late).any(|(f, &late)| f.is_some() || late > 0)
    }
}

/// How soon after another agent's answer an agent's first call must go out to be taken for a
/// possible hand-off (the answer parsed, a task built from it, a call made): 150 ms, the
/// judge's floor for a client library's own processing between calls.
pub(super) const HANDOFF_WINDOW_US: u64 = 150_000;

/// How soon after the answer that freed it a call held back by a permit, a lock or a pool slot
/// goes out, at the most: an event loop's turn or a woken thread, 20 ms (the judge's largest
/// hand-off tolerance).
pub(super) const WAKE_US: u64 = 20_000;

/// Links: each call follows the agent's latest call that ended before it began, and every
/// earlier call whose answer its prompt carries (`RequestTrace::carries`: it could not have
/// been sent before those answered, whichever agent sent them). Its local work is the gap
/// after the last of them to end, unless it was a hand-off (`tolerance_us`).
pub(super) fn links(reqs: &[Req<'_>], tolerance_us: u64) -> Links {
    let mut by_end: Vec<usize> = (0..reqs.len()).collect();
    by_end.sort_by_key(|&k| reqs[k].end);
    let n = reqs.len();
    let index_of: BTreeMap<u64, usize> = reqs.iter().enumerate().map(|(i, q)| (q.r.id, i)).collect();
    let mut local = vec![0u64; n];
    let mut handoff = vec![false; n];
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut from: Vec<Option<usize>> = vec![None; n];
    let mut follows: Vec<Option<usize>> = vec![None; n];
    let mut late = vec![0u64; n];
    let t0 = reqs.first().map_or(0, |q| q.start);
    let mut carried = 0usize;
    for i in 0..n {
        let g = reqs[i].group;
        let start_i = reqs[i].start;
        let pred = (0..i).filter(|&j| reqs[j].group == g && reqs[j].end <= start_i).max_by_key(|&j| reqs[j].end);
        let needs: Vec<usize> = reqs[i]
            .r
            .carries
            .iter()
            .filter_map(|id| index_of.get(id).copied())
            .filter(|&j| j != i && Some(j) != pred && reqs[j].end <= start_i)
            .collect();
        carried += usize::from(!needs.is_empty());
        after[i] = pred.into_iter().chain(needs.iter().copied()).collect();
        // The last to end; the agent's own call where it ties.
        let last = after[i].iter().copied().max_by_key(|&j| (reqs[j].end, Some(j) == pred));
        from[i] = last;
        if after[i].is_empty() && start_i > t0 + tolerance_us {
            // A first call made later than the run's first calls: right after another agent's
            // answer, it may have been handed its task by it.
            let ended = by_end.partition_point(|&k| reqs[k].end <= start_i);
            let right_after = by_end[..ended]
                .iter()
                .rev()
                .find(|&&k| reqs[k].group != g)
                .copied()
                .filter(|&k| start_i - reqs[k].end <= HANDOFF_WINDOW_US);
            match right_after {
                // Its prompt hints at that answer (a few of its words: a task handed on): the
                // data flow, as a carried answer is.
                Some(j) if reqs[i].r.hints.contains(&reqs[j].r.id) => {
                    after[i] = vec![j];
                    from[i] = Some(j);
                    local[i] = start_i - reqs[j].end;
                    carried += 1;
                }
                Some(j) => follows[i] = Some(j),
                None => late[i] = start_i - t0,
            }
        }
        if let Some(p) = last {
            let end_p = reqs[p].end;
            let gap = start_i - end_p;
            local[i] = if Some(p) != pred {
                // Waiting for an answer it carries is the data flow, not a hand-off.
                gap
            } else {
                match handoff_chain(reqs, &by_end, g, end_p, start_i, tolerance_us, Begun::After) {
                    Some(first_start) if gap > tolerance_us => {
                        handoff[i] = true;
                        first_start.saturating_sub(end_p).min(gap)
                    }
                    _ => gap,
                }
            };
        }
    }
    Links { local, handoff, after, from, follows, late, carried }
}

/// For each call, when it was first sent, where it was sent again after the server refused it
/// (HTTP 503 "server busy" from a full queue, or another error before it ran) or the client gave
/// up on it while it waited: the same model, prompt (`RequestTrace::prompt_key`) and agent
/// label, refused before it arrived. Every such refusal is claimed by the first call that
/// repeats it; the earliest is its first attempt.
fn first_attempts(reqs: &[Req<'_>], refused: &[&RequestTrace]) -> Vec<Option<u64>> {
    let mut claimed = vec![false; refused.len()];
    reqs.iter()
        .map(|q| {
            let key = q.r.prompt_key.as_ref()?;
            let repeated: Vec<usize> = (0..refused.len())
                .filter(|&k| {
                    let r = refused[k];
                    !claimed[k]
                        && r.prompt_key.as_ref() == Some(key)
                        && r.agent_label == q.r.agent_label
                        && r.model == q.r.model
                        && r.end_us.unwrap_or(r.received_us) <= q.r.received_us
                })
                .collect();
            for &k in &repeated {
                claimed[k] = true;
            }
            repeated.iter().map(|&k| refused[k].received_us).min()
        })
        .collect()
}

/// Agents' first calls sent again after the server refused them (its queue full): such a call
/// could not have gone out before, so the time from its first attempt is its agent's wait
/// (its local work before it), not time its client lost; and its first attempt went out
/// before any answer it followed: no hand-off either. Returns those calls.
pub(super) fn retried(reqs: &[Req<'_>], refused: &[&RequestTrace], links: &mut Links) -> Vec<usize> {
    let mut retried = Vec::new();
    for (i, first) in first_attempts(reqs, refused).into_iter().enumerate() {
        if let Some(first) = first.filter(|_| links.after[i].is_empty()) {
            links.local[i] = reqs[i].start.saturating_sub(first);
            links.follows[i] = None;
            retried.push(i);
        }
    }
    retried
}

/// Where each call's chain ends (solo costs and local work along its longest sequence of
/// calls), microseconds, for a reading of the local work before each call (`local`, indexed as
/// `reqs`; calls are in start order, so every call a call follows comes before it).
pub(super) fn chain_ends(reqs: &[Req<'_>], after: &[Vec<usize>], local: &[u64]) -> Vec<u64> {
    let mut chain_end = vec![0u64; reqs.len()];
    for i in 0..reqs.len() {
        // A first call is ready `local` after the start: nothing, unless it was sent again
        // after a refusal (`first_attempts`).
        let base = if after[i].is_empty() {
            local[i]
        } else {
            after[i].iter().map(|&j| chain_end[j]).max().unwrap_or(0) + local[i]
        };
        chain_end[i] = base + reqs[i].r.solo_us;
    }
    chain_end
}

/// Chains unlabelled chat turns into conversations: a request whose `parent` fingerprint is
/// an earlier request's `key` (that ended before it arrived) continues it. Each earlier request
/// continues into at most one later one. Returns a conversation index per request.
fn conversations(reqs: &[&RequestTrace]) -> Vec<usize> {
    let mut conv: Vec<usize> = (0..reqs.len()).collect();
    let mut claimed = vec![false; reqs.len()];
    for i in 0..reqs.len() {
        let Some(parent) = reqs[i].conversation.as_ref().and_then(|c| c.parent.as_ref()) else { continue };
        let start = reqs[i].received_us;
        let best = (0..i)
            .filter(|&j| !claimed[j])
            .filter(|&j| reqs[j].conversation.as_ref().is_some_and(|c| &c.key == parent))
            .filter(|&j| reqs[j].end_us.is_some_and(|e| e <= start))
            .max_by_key(|&j| reqs[j].end_us);
        if let Some(j) = best {
            claimed[j] = true;
            conv[i] = conv[j];
        }
    }
    conv
}

/// Where the first of the requests [`handoff_chain`] finds may have begun.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Begun {
    /// Right after the agent's answer (within the tolerance, either side): the lock or permit
    /// was free when the agent came for it, so one run shows the wait.
    After,
    /// Any time before, as long as it was still running when the agent's answer came: the lock
    /// was already held then. One run cannot tell that from the agent's own work that happened
    /// to end as another agent's call did; it is a reading, for a probe run to settle
    /// ([`super::gaps::one_at_a_time`]).
    Running,
}

/// Whether agent `g` waited, between its answer at `end_p` and its next call at `start_i`,
/// for other agents' requests that ran back to back: the last one ended right before `start_i`,
/// each began right after the one before it ended, and the first began right after `end_p`
/// (`Begun::After`: a lock or a permit passed from agent to agent) or was running at `end_p`
/// (`Begun::Running`). Returns when the first of them began. Anything less (a gap with no
/// request ending right before the call, or an idle moment in the chain) is the agent's own
/// local work.
pub(super) fn handoff_chain(
    reqs: &[Req<'_>],
    by_end: &[usize],
    g: usize,
    end_p: u64,
    start_i: u64,
    tol: u64,
    begun: Begun,
) -> Option<u64> {
    let mut cursor = start_i;
    for _ in 0..reqs.len() {
        // Requests of other agents that ended just before the cursor, after `end_p`, and (but
        // where `Begun::Running`) began no earlier than right around `end_p`; the
        // earliest-starting one covers the most.
        // `by_end` is sorted by end, so only the window [cursor - tol, cursor] is looked at.
        let lo = by_end.partition_point(|&k| reqs[k].end < cursor.saturating_sub(tol).max(end_p + 1));
        let hi = by_end.partition_point(|&k| reqs[k].end <= cursor);
        let k = by_end[lo..hi.max(lo)]
            .iter()
            .map(|&k| &reqs[k])
            .filter(|q| q.group != g && (begun == Begun::Running || q.start + tol >= end_p))
            .min_by_key(|q| q.start)?;
        if k.start <= end_p + tol {
            return Some(k.start);
        }
        if k.start >= cursor {
            return None;
        }
        cursor = k.start;
    }
    None
}
