//! Agents the judge could not tell apart, told apart by a probe run that released one answer
//! at a time (`crate::probe`, "one answer at a time").
//!
//! A program that sends no `X-Agent` label and no conversation to chain is judged as a whole,
//! and where its requests pause one run cannot say whose work the pauses were. Its probe run
//! holds every answer but one: each request that arrives then is the next call of the agent
//! whose answer is out (`RequestTrace::probe_after`). [`relabel`] rebuilds the agents from
//! those links, finds each request's twin in the run judged by what it asked
//! (`RequestTrace::prompt_key`, in order where the same prompt went out twice), checks that
//! the run judged allows every link (a call cannot have followed an answer that ended after it
//! went out), and labels both runs' requests with the agents found, so the judge reads the
//! program as a labelled one and the probe run as a labelled probe. Where anything does not
//! fit (a prompt of one run missing from the other, a request that arrived with no answer out,
//! a link the run judged contradicts), it says why, and the program stays judged as a whole.

use super::decision::Verdict;
use super::figures::plural;
use super::input::{JudgeOptions, Req};
use super::report::{AgentSource, Report};
use crate::probe::{SerialCall, SerialPlan};
use crate::trace::{RequestTrace, TraceSnapshot};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The program judged (by `judge`, the judge itself) with its agents told apart by the probe
/// run (`first` and `probe`: the requests that ran of each run), where they can back the
/// verdict; else why not, in words the judge appends to its verdict on the program as a whole.
///
/// A chain of calls may be one agent, or two: an agent that waited for another's last answer
/// (a permit it released) looks the same as one that went on. So the chains back "parallel"
/// only where they are as many as the agents the program runs at once (`expected_agents`), or
/// where that many began with the program and the rest split off later (an agent sending two
/// calls at once: a chain each), so none was held back from the start; time lost between the
/// chains' calls is the client's whatever the chains hide (they can only lengthen the ideal).
/// Fewer chains than agents, as many with the calls that carry earlier answers taken for
/// agents handed them (a pipeline's stages): those are the agents. And where every request of
/// the probe run went out before any answer was out, each is an agent of its own, and none
/// waited for another.
pub(super) fn judged(
    trace: &TraceSnapshot,
    opts: &JudgeOptions,
    first: &[&RequestTrace],
    probe: &[&RequestTrace],
    tolerance_us: u64,
    judge: impl Fn(&TraceSnapshot, bool) -> Report,
) -> Result<Report, NotRecovered> {
    let found = relabel(trace, first, probe, tolerance_us, false)
        .and_then(|r| match opts.expected_agents {
            Some(k) if r.agents < k && r.agents + r.carrying == k => relabel(trace, first, probe, tolerance_us, true),
            _ => Ok(r),
        })
        .map_err(|n| NotRecovered {
            why: format!("a probe run could not tell the agents apart either: {}", n.why),
            ..n
        })?;
    // Every chain began with no answer out: no agent's first call waited for another's call.
    let mut report = judge(&found.trace, found.initial == found.agents);
    let chains = plural(found.agents, "chain of calls", "chains of calls");
    // Every request of the probe run went out before any answer was out: no agent waited for
    // another's answer, so no chain hides one.
    let all_at_once = found.initial == probe.len();
    let confirmed = all_at_once
        || opts.expected_agents.is_some_and(|k| found.agents == k || (found.initial == k && found.agents > k));
    if confirmed || !matches!(report.verdict, Verdict::Parallel | Verdict::Inconclusive) {
        report.agents_from = AgentSource::Probe;
        report.notes.push(format!(
            "no X-Agent labels and no conversations to chain: a probe run released one answer at a time and showed which request followed which answer: {chains} (agent-1, ...), matched to this run by their prompts"
        ));
        return Ok(report);
    }
    Err(NotRecovered::from(match opts.expected_agents {
        Some(k) => format!(
            "a probe run releasing one answer at a time found {chains}, {} of them from the start, where the program runs {k} agents at once (--agents {k}), so some agents waited for others' answers (a permit, a barrier) and the chains are not the agents",
            found.initial
        ),
        None => format!(
            "a probe run releasing one answer at a time found {chains}, each call sent after the one before it had answered, and read {} on them ({}); but an agent that waited for another's answer (a permit it released) looks the same as one that went on: if the program runs {n} agents, say so with --agents {n} to settle it",
            report.verdict,
            report.time.saving.map_or("no saving to measure".to_string(), |s| format!(
                "saved {:.0}% of what the deployment allows",
                s * 100.0
            )),
            n = found.agents,
        ),
    }))
}

/// Why a probe run could not tell the agents apart.
pub(super) struct NotRecovered {
    /// In words.
    pub(super) why: String,
    /// A failure a pause of the whole process in the probe run explains (a request that went
    /// out with no answer out; a link the run judged contradicts: a call arriving late, after
    /// the probe had let the next answer out): a second probe run may not repeat it.
    pub(super) timing: bool,
}

impl NotRecovered {
    fn timing(why: String) -> Self {
        NotRecovered { why, timing: true }
    }
}

impl From<String> for NotRecovered {
    fn from(why: String) -> Self {
        NotRecovered { why, timing: false }
    }
}

/// The name given to the `k`-th agent found (0-based).
fn name(k: usize) -> String {
    format!("agent-{}", k + 1)
}

/// The plan of a probe run releasing one answer at a time: the run judged's calls.
pub(super) fn plan(reqs: &[Req<'_>]) -> SerialPlan {
    SerialPlan {
        calls: reqs
            .iter()
            .filter_map(|q| Some(SerialCall { prompt_key: q.r.prompt_key.clone()?, start_us: q.start, end_us: q.end }))
            .collect(),
    }
}

/// Each request of `reqs` (in arrival order) by prompt key, in order.
fn by_prompt<'a>(reqs: &[&'a RequestTrace]) -> Result<BTreeMap<&'a str, Vec<&'a RequestTrace>>, String> {
    let mut by: BTreeMap<&str, Vec<&RequestTrace>> = BTreeMap::new();
    for r in reqs {
        let key = r.prompt_key.as_deref().ok_or_else(|| {
            format!("request {} ({}) asked no prompt to know it by in the other run", r.id, r.endpoint)
        })?;
        by.entry(key).or_default().push(r);
    }
    Ok(by)
}

/// Whether a probe run releasing one answer at a time shows a limit on the calls in flight:
/// it held every answer until no request had come for a while, so a program that sent no more
/// calls before its first answer than the run judged (`first`) had in flight at its most held
/// the rest back itself; a launcher slow to start its agents sends them all
/// ([`super::decision::Limited::shown`]).
pub(super) fn limit_shown(source: AgentSource, first: &[&RequestTrace], probe: Option<&[&RequestTrace]>) -> bool {
    let Some(probe) = probe.filter(|_| source == AgentSource::Program) else { return false };
    let first_out = probe.iter().filter_map(|r| r.end_us).min().unwrap_or(u64::MAX);
    let initial = probe.iter().filter(|r| r.probe_after.is_none() && r.received_us < first_out).count();
    initial > 0 && initial <= super::input::most_in_flight(first)
}

/// What [`relabel`] found.
pub(super) struct Relabelled {
    /// The trace, both runs' requests labelled.
    pub(super) trace: TraceSnapshot,
    /// How many agents.
    pub(super) agents: usize,
    /// How many of them began with the program (their first call arrived with no answer out).
    pub(super) initial: usize,
    /// How many requests continued a chain with a prompt that carries an earlier answer: each
    /// may be the same agent going on, or a new one handed that answer (a pipeline's next
    /// stage), which one run releasing one answer at a time cannot tell apart.
    pub(super) carrying: usize,
}

/// The trace with both runs' requests labelled by the agents the probe run showed; `Err` says
/// why it could not. `first` and `probe` are the requests that ran of each run;
/// `tolerance_us` the judge's hand-off tolerance; with `split_carrying`, a request whose prompt
/// carries an earlier answer starts an agent of its own (see [`Relabelled::carrying`]).
pub(super) fn relabel(
    trace: &TraceSnapshot,
    first: &[&RequestTrace],
    probe: &[&RequestTrace],
    tolerance_us: u64,
    split_carrying: bool,
) -> Result<Relabelled, NotRecovered> {
    let mut probe: Vec<&RequestTrace> = probe.to_vec();
    probe.sort_by_key(|r| r.id);
    if probe.is_empty() {
        return Err(String::from("the probe run made no model request").into());
    }
    if probe.iter().any(|r| r.agent_label.is_some()) {
        return Err(String::from("the probe run's requests carried X-Agent labels the run judged did not").into());
    }
    // The probe run's agents: each request continues the agent whose answer it followed; a
    // second request after the same answer (two calls sent at once) starts an agent of its
    // own, and so does each of the program's first calls.
    let first_out = probe.iter().filter_map(|r| r.end_us).min().unwrap_or(u64::MAX);
    let mut agent_of: HashMap<u64, usize> = HashMap::new();
    let mut continued: HashSet<u64> = HashSet::new();
    let mut agents = 0usize;
    let mut initial = 0usize;
    let mut carrying = 0usize;
    let mut links: Vec<(u64, u64)> = Vec::new();
    for r in &probe {
        let agent = match r.probe_after {
            Some(a) => {
                let Some(&ag) = agent_of.get(&a) else {
                    return Err(
                        format!("request {} followed request {a}, which the probe run did not run", r.id).into()
                    );
                };
                links.push((a, r.id));
                let carries = r.carries.iter().any(|c| agent_of.contains_key(c));
                let goes_on = continued.insert(a);
                carrying += usize::from(goes_on && carries);
                if goes_on && !(split_carrying && carries) {
                    ag
                } else {
                    agents += 1;
                    agents - 1
                }
            }
            None if r.received_us < first_out => {
                initial += 1;
                agents += 1;
                agents - 1
            }
            None => {
                return Err(NotRecovered::timing(format!(
                    "request {} of the probe run went out when no answer was out (on a timer of its own, or after work longer than the run judged allowed it), so whose it was is unknown",
                    r.id
                )));
            }
        };
        agent_of.insert(r.id, agent);
    }
    // Each request's twin in the run judged: the same prompt, in the same order.
    let (mut firsts, probes) = (by_prompt(first)?, by_prompt(&probe)?);
    let mut twin: HashMap<u64, &RequestTrace> = HashMap::new();
    for (key, ps) in &probes {
        let fs = firsts.remove(key).unwrap_or_default();
        if fs.len() != ps.len() {
            return Err(format!(
                "the probe run asked request {}'s prompt {} and the run judged {}: the program did not make the same calls twice",
                ps[0].id,
                super::figures::plural(ps.len(), "time", "times"),
                super::figures::plural(fs.len(), "time", "times"),
            )
            .into());
        }
        for (p, f) in ps.iter().zip(fs) {
            twin.insert(p.id, f);
        }
    }
    if let Some(fs) = firsts.values().next() {
        return Err(format!("the run judged asked request {}'s prompt, and the probe run never did", fs[0].id).into());
    }
    // The run judged must allow each link: the call went out after the answer it followed.
    for (a, b) in links {
        let (fa, fb) = (twin[&a], twin[&b]);
        if fb.received_us + tolerance_us < fa.end_us.unwrap_or(fa.received_us) {
            return Err(NotRecovered::timing(format!(
                "in the probe run request {b} followed request {a}'s answer, but in the run judged their twins {} and {} overlapped",
                fa.id, fb.id
            )));
        }
    }
    let label: HashMap<u64, String> = probe
        .iter()
        .flat_map(|r| {
            let n = name(agent_of[&r.id]);
            [(r.id, n.clone()), (twin[&r.id].id, n)]
        })
        .collect();
    let mut out = trace.clone();
    for r in &mut out.requests {
        if let Some(n) = label.get(&r.id) {
            r.agent_label = Some(n.clone());
            r.agent = n.clone();
        }
    }
    Ok(Relabelled { trace: out, agents, initial, carrying })
}

#[cfg(test)]
mod tests;
