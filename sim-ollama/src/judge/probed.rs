//! A probe run beside the run judged (issue 36): its plan (each agent's gaps, the answers
//! first calls went out right after), the comparison call by call ([`compare`]: own work,
//! waiting for other agents' work, for an answer the probe held, hand-offs), the same findings
//! from local work the program gave ([`from_known`]); the verdict they settle, in words, is
//! `settled.rs`'s. The readings of one run alone are in `gaps.rs`; the simulator's side is
//! `crate::probe`.

use super::agents::Links;
use super::figures::{plural, secs};
use super::gaps::LOCAL_WORK_FLOOR_US;
use super::handoff_probe;
use super::input::Req;
use super::report::{GapWait, HandOff, ProbeAgent, WaitKind};
use super::waits;
use crate::probe::{Delay, ProbePlan};

/// What a probe run found of the gaps of the run judged.
pub(super) struct Findings {
    /// The own work before each call of the run judged (indexed as its requests), with every
    /// gap the probe could not measure taken as the agent's own work...
    pub(super) own_most: Vec<u64>,
    /// ...and as waiting.
    pub(super) own_least: Vec<u64>,
    /// The gaps that held waiting.
    pub(super) waits: Vec<GapWait>,
    /// Where the only local work the others waited for was one agent's chunk, once (not
    /// counted, see [`compare`]): its length (0 where no agent's gap held a chunk of
    /// [`LOCAL_WORK_FLOOR_US`] or more) and how long they waited in all, s.
    pub(super) once: Option<(f64, f64)>,
    /// The probe run's time, first request to last answer, and how long it held answers
    /// back in all, s (absent where the local work was given, not probed).
    pub(super) probe: Option<(f64, f64)>,
    /// The probe run's requests, by the agent of the run judged they matched.
    pub(super) probe_agents: Vec<ProbeAgent>,
    /// For each first call that went out right after another agent's answer
    /// (`Links::follows`): whether it depended on it (`None`: not tested).
    pub(super) depended: Vec<Option<bool>>,
    /// For each such first call: whether in the probe run it went out right after another
    /// agent's answer that it could not have followed in the run judged (the answers it could
    /// have followed held back): a permit, lock or pool slot that any answer frees.
    pub(super) instead: Vec<bool>,
    /// Whether a first call shown independent of the answer it followed went out `instead`.
    pub(super) permit_shown: bool,
    /// For each first call that went out right after another agent's answer: whether its twin
    /// in the probe run held words of an answer the probe wrote in marked words
    /// (`RequestTrace::probe_marked`): data of that answer reached it, a hand-off shown.
    pub(super) handed: Vec<bool>,
    /// First calls that went out late in the run judged and that the probe run showed waited
    /// for no answer ([`handoff_probe::started_free`]): each call (index of the run judged) with
    /// its agent's own start-up before it at the most and at the least, µs, counted in
    /// `own_most` and `own_least`.
    pub(super) started: Vec<(usize, u64, u64)>,
}

impl Findings {
    /// Whether first call `i` may be read as handed its task by the answer it went out right
    /// after (taken for the design at most): not where the probe showed it independent of it,
    /// nor anywhere once it showed a first call held back by what any answer frees ([`Self::
    /// instead`]: the others that went out right after an answer are read as held back by it too).
    pub(super) fn may_be_handed_off(&self, i: usize) -> bool {
        self.handed[i] || (!self.permit_shown && self.depended[i] != Some(false))
    }
}

/// The least a gap must shrink in the probe run to count among waits shorter than the floor
/// for a client library's processing ([`LOCAL_WORK_FLOOR_US`]), where those are systematic and
/// the client's CPU time cannot explain them ([`compare`]): 50 ms, a third of that floor, above
/// the tolerance of the calls' own timing (20 ms at the least).
const SHORT_WAIT_US: u64 = 50_000;

/// One run's requests as the probe comparison needs them.
pub(super) struct Run<'a, 'r> {
    pub(super) reqs: &'a [Req<'r>],
    pub(super) links: &'a Links,
    /// Each group's agent key ([`super::agents::keys`]).
    pub(super) keys: &'a [Option<String>],
    pub(super) names: &'a [String],
}

/// Whether the `wait_us` of call `i`'s gap that was not its own work is explained by other
/// agents' calls: it went out right after another agent's call ended, inside its gap (held
/// back behind it: a lock or one permit around the calls, the calls' serialization, not
/// waiting for local work), and other agents' calls were in flight for as long as it waited.
/// A wait longer than those calls was (also) for something else: where the tools run one at
/// a time and each agent's next call goes out after the one before it (LangGraph's agents
/// blocked by `time.sleep` on one event loop, each turn a few ms of Python), a call goes out
/// right after another's 20 ms call after waiting 600 ms for the tools.
fn behind_calls(reqs: &[Req<'_>], links: &Links, i: usize, wait_us: u64, tol: u64) -> bool {
    let Some(p) = links.from[i] else { return false };
    let (a, b) = (reqs[p].end, reqs[i].start);
    let others = || reqs.iter().filter(|q| q.group != reqs[i].group);
    if !others().any(|q| q.end > a && q.end <= b && b - q.end <= tol) {
        return false;
    }
    // How long other agents' calls were in flight inside the gap (their union).
    let mut spans: Vec<(u64, u64)> = others().map(|q| (q.start.max(a), q.end.min(b))).filter(|(s, e)| s < e).collect();
    spans.sort_unstable();
    let (mut in_flight, mut reach) = (0, a);
    for (s, e) in spans {
        let s = s.max(reach);
        if e > s {
            in_flight += e - s;
            reach = e;
        }
    }
    wait_us <= in_flight + tol
}

/// Each group's calls, in start order.
fn calls_by_group(reqs: &[Req<'_>], groups: usize) -> Vec<Vec<usize>> {
    let mut by: Vec<Vec<usize>> = vec![Vec::new(); groups];
    for (i, q) in reqs.iter().enumerate() {
        by[q.group].push(i);
    }
    by
}

/// The raw gap before call `k` of a group's calls: from the previous call's end (the answer's
/// release, in a probe run) to its start, as the probe's plan measures it.
fn raw_gap(reqs: &[Req<'_>], calls: &[usize], k: usize) -> Option<u64> {
    (k > 0).then(|| reqs[calls[k]].start.saturating_sub(reqs[calls[k - 1]].end))
}

/// The probe's plan from the run judged: each agent's raw gaps, in order, and the answers that
/// agents' first calls went out right after, each with its delay ([`ProbePlan`]).
pub(super) fn plan(run: &Run<'_, '_>, tolerance_us: u64) -> ProbePlan {
    let by = calls_by_group(run.reqs, run.keys.len());
    let mut plan = ProbePlan { tolerance_us, ..ProbePlan::default() };
    for (g, calls) in by.iter().enumerate() {
        let Some(key) = &run.keys[g] else { continue };
        let gaps: Vec<u64> = (1..calls.len()).filter_map(|k| raw_gap(run.reqs, calls, k)).collect();
        plan.longest_gap_us = plan.longest_gap_us.max(gaps.iter().copied().max().unwrap_or(0));
        plan.gaps.insert(key.clone(), gaps);
    }
    // Every answer such a call could have followed: one left out would let it go out as in
    // the run judged, untested.
    let tested = (0..run.reqs.len())
        .filter(|&i| run.links.follows[i].is_some())
        .flat_map(|i| handoff_probe::candidates(run.reqs, i))
        .collect();
    // Each answer by its agent's key and its place in that agent's order.
    let place = |j: usize| {
        let g = run.reqs[j].group;
        Some((run.keys[g].clone()?, by[g].iter().position(|&k| k == j)?))
    };
    // Agents that started late with no answer right before: every answer held until they come.
    for (i, &late) in run.links.late.iter().enumerate() {
        if let (true, Some(key)) = (late > 0, &run.keys[run.reqs[i].group]) {
            plan.starts.insert(key.clone(), late);
        }
    }
    for (j, rival) in handoff_probe::rivals(run.reqs, &tested) {
        let Some((key, index)) = place(j) else { continue };
        let delay = Delay {
            us: handoff_probe::HANDOFF_DELAY_US,
            rival: rival.and_then(place),
            max_us: handoff_probe::HANDOFF_DELAY_US + handoff_probe::RIVAL_MAX_US,
        };
        plan.delays.entry(key).or_default().insert(index, delay);
    }
    plan
}

/// The hand-offs of the run judged, as the report lists them.
pub(super) fn handoffs(run: &Run<'_, '_>, depended: &[Option<bool>]) -> Vec<HandOff> {
    run.links
        .follows
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let j = (*f)?;
            Some(HandOff {
                agent: run.names[run.reqs[i].group].clone(),
                request: run.reqs[i].r.id,
                after_agent: run.names[run.reqs[j].group].clone(),
                after_request: run.reqs[j].r.id,
                depended: depended.get(i).copied().flatten(),
            })
        })
        .collect()
}

/// Compares the run judged with its probe run, call by call (agents matched by their keys,
/// calls by their place in the agent's order). `Err` says why the probe is void.
pub(super) fn compare(
    first: &Run<'_, '_>,
    probe: &Run<'_, '_>,
    plan: &ProbePlan,
    cpu_us: Option<(u64, u64)>,
) -> Result<Findings, String> {
    if first.keys.iter().any(Option::is_none) {
        return Err(
            "some requests were neither labelled nor chat turns, so their agents cannot be matched across runs".into(),
        );
    }
    if probe.reqs.is_empty() {
        return Err("the probe run made no model request".into());
    }
    let first_by = calls_by_group(first.reqs, first.keys.len());
    let probe_by = calls_by_group(probe.reqs, probe.keys.len());
    let mut matched: Vec<usize> = vec![usize::MAX; first.reqs.len()];
    for (g, calls) in first_by.iter().enumerate() {
        let key = first.keys[g].as_ref();
        let Some(pg) = probe.keys.iter().position(|k| k.as_ref() == key) else {
            return Err(format!("agent {} made no call in the probe run", first.names[g]));
        };
        if probe_by[pg].len() != calls.len() {
            return Err(format!(
                "agent {} made {} in the run judged and {} in the probe run",
                first.names[g],
                plural(calls.len(), "call", "calls"),
                probe_by[pg].len()
            ));
        }
        for (k, &i) in calls.iter().enumerate() {
            matched[i] = probe_by[pg][k];
        }
    }
    if probe.keys.len() != first.keys.len() {
        let extra = probe.keys.iter().position(|k| !first.keys.contains(k)).map_or(0, |g| g);
        return Err(format!("the probe run had an agent the run judged did not ({})", probe.names[extra]));
    }
    let tol = plan.tolerance_us;
    // Each gap of the run judged, beside its probe twin.
    struct Gap {
        i: usize,
        g: usize,
        gap_o: u64,
        gap_p: u64,
        expired: bool,
        carries: bool,
        together: bool,
    }
    let mut found: Vec<Gap> = Vec::new();
    for (g, calls) in first_by.iter().enumerate() {
        let pg = probe.keys.iter().position(|k| *k == first.keys[g]).unwrap_or(g);
        for (k, &i) in calls.iter().enumerate() {
            let j = matched[i];
            let gap_o = first.links.local[i];
            if first.links.from[i].is_none() || probe.links.from[j].is_none() || gap_o == 0 {
                continue;
            }
            let gap_p = probe.links.local[j];
            // Past its expiry, and by more than a client library's own processing: it waited
            // for something the probe held (a gap of less than that could hide no more).
            let expired = match (raw_gap(first.reqs, calls, k), raw_gap(probe.reqs, &probe_by[pg], k)) {
                (Some(o), Some(p)) => {
                    p > plan.expiry_us(o) && p >= o + LOCAL_WORK_FLOOR_US && gap_o >= LOCAL_WORK_FLOOR_US
                }
                _ => false,
            };
            // Sent together with another agent's call although the probe released their
            // answers apart: the agents wait for each other (a barrier releases its waiters in
            // one turn of the executor, a few milliseconds at most). Not a call that came before
            // its answer was out: that call closed another gap and released this answer, and an
            // agent with nothing to do between its calls answers it at once.
            let s = probe.reqs[j].start;
            let released = probe.links.from[j].map_or(0, |p| probe.reqs[p].end);
            let together_us = tol.min(5_000);
            found.push(Gap {
                i,
                g,
                gap_o,
                gap_p,
                expired,
                // Data it carries from another agent: the wait for it is the program's design.
                carries: first.links.from[i].is_some_and(|p| first.reqs[p].group != first.reqs[i].group),
                together: probe.reqs.iter().any(|q| {
                    q.group != probe.reqs[j].group && q.start > released && q.start.abs_diff(s) <= together_us
                }),
            });
        }
    }
    let mut own_most = first.links.local.clone();
    let mut own_least = first.links.local.clone();
    let mut waits = Vec::new();
    // Shorter with the others' work out of the way by more than the tolerance, a tenth and
    // [`SHORT_WAIT_US`], but less than the floor: alone, a client library's processing taking
    // its turn on a shared executor. Counted where most gaps are so, and where the client's
    // threads ran too little for the rest (`cpu_us`: how long they ran on a CPU and waited for
    // one while the calls ran): waiting for each other's processing, the agents wait at most
    // its CPU time times the other agents, and for a CPU as long as they waited for one.
    let beyond = |f: &Gap, floor: u64| !f.expired && f.gap_p + tol.max(f.gap_o / 10).max(floor) <= f.gap_o;
    let short: Vec<&Gap> =
        found.iter().filter(|f| beyond(f, SHORT_WAIT_US) && !beyond(f, LOCAL_WORK_FLOOR_US)).collect();
    let waited_short: u64 = short.iter().map(|f| f.gap_o - f.gap_p).sum();
    let systematic = short.len() >= 2
        && 2 * found.iter().filter(|f| beyond(f, SHORT_WAIT_US)).count() > found.len()
        && waits::beyond_cpu(waited_short, first.keys.len().saturating_sub(1), cpu_us);
    for f in &found {
        let wait = |own: Option<u64>, kind| GapWait {
            agent: first.names[f.g].clone(),
            request: first.reqs[f.i].r.id,
            gap_s: secs(f.gap_o),
            own_s: own.map(secs),
            kind,
        };
        if f.expired && !f.carries {
            // It waited for something the probe held: an answer of another agent. Its own
            // work cannot be told from the wait.
            own_least[f.i] = 0;
            waits.push(wait(None, if f.together { WaitKind::Barrier } else { WaitKind::Answer }));
        } else if beyond(f, LOCAL_WORK_FLOOR_US) || (systematic && beyond(f, SHORT_WAIT_US)) {
            // Shorter with the others' local work out of the way: the rest was not its own
            // work, whatever it waited for. It waited for the others' work (at a barrier, when
            // its call went out with others': it was the last to reach it), unless other
            // agents' calls it went out right after explain the wait (their serialization,
            // named by the calls' own overlap).
            own_most[f.i] = f.gap_p;
            own_least[f.i] = f.gap_p;
            if !behind_calls(first.reqs, first.links, f.i, f.gap_o - f.gap_p, tol) {
                waits.push(wait(Some(f.gap_p), if f.together { WaitKind::Barrier } else { WaitKind::LocalWork }));
            }
        }
    }
    let (depended, instead): (Vec<Option<bool>>, Vec<bool>) = (0..first.reqs.len())
        .map(|i| match first.links.follows[i] {
            Some(link) => handoff_probe::tested(first.reqs, probe.reqs, &matched, (i, link), tol),
            None => (None, false),
        })
        .unzip();
    let started: Vec<(usize, u64, u64)> =
        handoff_probe::started_free((first.reqs, first.links), probe.reqs, &matched, &depended, &instead, |us| {
            plan.expiry_us(us)
        })
        .into_iter()
        .filter(|&(_, most, _)| most > tol)
        // Within the tolerance of each other, the two readings are one.
        .map(|(i, most, least)| (i, most, if least + tol >= most { most } else { least }))
        .collect();
    for &(i, most, least) in &started {
        own_most[i] = most;
        own_least[i] = least;
    }
    // Local work one agent at a time shows itself as several agents' chunks of work taking
    // turns (an agent's start-up among them). A single chunk that held the others once (a client library's first use: lazy
    // imports, schemas built on the first answer; or one blocking call, once) moves from run
    // to run with the machine's load and with whichever agent the executor resumed first, and
    // is not told from noise: such waits are not counted, and the gaps stay as measured.
    let chunks: Vec<u64> = found
        .iter()
        .map(|f| own_most[f.i])
        .chain(started.iter().map(|&(_, most, _)| most))
        .filter(|&o| o >= LOCAL_WORK_FLOOR_US)
        .collect();
    let beyond_one = chunks.iter().sum::<u64>() - chunks.iter().copied().max().unwrap_or(0);
    let mut once = None;
    if beyond_one < LOCAL_WORK_FLOOR_US && waits.iter().any(|w| w.kind == WaitKind::LocalWork) {
        let lone: Vec<GapWait> = waits.iter().filter(|w| w.kind == WaitKind::LocalWork).cloned().collect();
        waits.retain(|w| w.kind != WaitKind::LocalWork);
        for f in &found {
            if lone.iter().any(|w| w.request == first.reqs[f.i].r.id) {
                own_most[f.i] = f.gap_o;
                own_least[f.i] = f.gap_o;
            }
        }
        let waited = waits::local_waits(&lone);
        once = Some((secs(chunks.iter().copied().max().unwrap_or(0)), waited));
    }
    let took = match (probe.reqs.iter().map(|q| q.start).min(), probe.reqs.iter().map(|q| q.end).max()) {
        (Some(a), Some(b)) => b - a,
        _ => 0,
    };
    Ok(Findings {
        own_most,
        own_least,
        waits,
        once,
        probe: Some((secs(took), secs(probe.reqs.iter().map(|q| q.r.held_us).sum()))),
        permit_shown: instead.iter().any(|&x| x),
        handed: (0..first.reqs.len())
            .map(|i| first.links.follows[i].is_some() && probe.reqs[matched[i]].r.probe_marked)
            .collect(),
        depended,
        instead,
        started,
        probe_agents: first_by
            .iter()
            .enumerate()
            .map(|(g, calls)| ProbeAgent {
                agent: first.names[g].clone(),
                ids: calls.iter().map(|&i| probe.reqs[matched[i]].r.id).collect(),
            })
            .collect(),
    })
}

/// The gaps of the run judged against the local work the program is known to do before each
/// call (`JudgeOptions::known_local_work`: the harness's scenarios): the rest of a gap was
/// waiting. Calls with no known local work keep their gaps as measured.
pub(super) fn from_known(first: &Run<'_, '_>, known: &std::collections::BTreeMap<u64, u64>, tol: u64) -> Findings {
    let mut own = first.links.local.clone();
    let mut waits = Vec::new();
    for (i, q) in first.reqs.iter().enumerate() {
        let (Some(_), Some(&work)) = (first.links.from[i], known.get(&q.r.id)) else { continue };
        let gap = first.links.local[i];
        own[i] = gap.min(work);
        if gap >= own[i] + tol.max(gap / 10) && !behind_calls(first.reqs, first.links, i, gap - own[i], tol) {
            waits.push(GapWait {
                agent: first.names[q.group].clone(),
                request: q.r.id,
                gap_s: secs(gap),
                own_s: Some(secs(own[i])),
                kind: WaitKind::LocalWork,
            });
        }
    }
    Findings {
        own_most: own.clone(),
        own_least: own,
        waits,
        once: None,
        probe: None,
        probe_agents: Vec::new(),
        // The program gave each call's local work: a first call waited for its own, nothing
        // else (the harness's agents hand nothing on).
        depended: vec![Some(false); first.reqs.len()],
        instead: vec![false; first.reqs.len()],
        permit_shown: false,
        handed: vec![false; first.reqs.len()],
        started: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
