//! The simulator's client verdict in words: the decision core's [`Decision`] for a trace,
//! with the cause in the client named from what the trace and the client's observations show.

use super::decision::Verdict;
use super::decision::{self, AgainstAllowed, Decision, Evidence, Limited, Order};
use super::figures::{median, pct, plural, secs};
use super::input::{ClientCall, JudgeOptions, Req};
use super::report::{AgentSource, Cause, Report};
use std::collections::BTreeMap;

/// The time figures against what the deployment allows ([`decision::against_allowed`]).
pub(super) struct Figures {
    /// As the program took them: to the end of its reading of the last answer.
    pub(super) against: Option<AgainstAllowed>,
    /// To where the server wrote its last answer, where the client was seen reading later.
    pub(super) served: Option<AgainstAllowed>,
    /// How long after the server wrote the run's last answer the client finished reading, s.
    pub(super) read_after_s: f64,
    /// What a perfectly concurrent client takes on the deployment, s.
    pub(super) allowed_s: f64,
    /// What one holding at most as many calls at a time as were in flight takes, s (where
    /// fewer were than agents could run, on a deployment the trace describes).
    pub(super) limited_s: Option<f64>,
    /// Whether a probe run showed a limit at the most in flight ([`Limited::shown`]).
    pub(super) limit_shown: bool,
}

/// The client verdict, its cause and its reason: the trace's evidence gathered for the
/// decision core ([`decision::decide`]), its decision put in words.
pub(super) fn verdict(
    rep: &Report,
    reqs: &[Req<'_>],
    client: &BTreeMap<u64, ClientCall>,
    handoffs: usize,
    opts: &JudgeOptions,
    described: bool,
    figures_in: Figures,
) -> (Verdict, Cause, String) {
    let read_after_s = figures_in.read_after_s;
    let c = &rep.concurrency;
    let t = &rep.time;
    let n = rep.requests;
    let who = who(rep);
    if n == 0 {
        let reason = if rep.failed > 0 {
            format!("every model request failed before it ran ({}): nothing to judge", rep.failed)
        } else {
            "no model request reached the simulator: nothing to judge (was the program pointed at OLLAMA_HOST?)"
                .to_string()
        };
        return (Verdict::Inconclusive, Cause::NothingToJudge, reason);
    }
    if n == 1 {
        return (
            Verdict::Inconclusive,
            Cause::NothingToJudge,
            "one request: nothing could have run alongside it, nothing to judge".to_string(),
        );
    }
    let evidence = evidence(rep, reqs, client, opts, described, &figures_in);
    let agents_known = evidence.agents_known;
    // "Of" as many as could: where more went out at once than agents run at once (an agent
    // sending two calls together), the count alone.
    let possible = c.possible.filter(|p| *p >= c.max_in_flight).map_or(String::new(), |p| format!(" of {p}"));
    let overlapped = format!("up to {}{possible} requests in flight at once", c.max_in_flight);
    // Where the deployment allows (almost) no saving there is no saving to quote: the time
    // cannot show whether the client held calls back, only whether it lost time of its own.
    let figures = |a: &AgainstAllowed| match a.saving {
        Some(saving) => format!(
            "took {:.2} s against {:.2} s allowed by the deployment ({:.2} s ideal) and {:.2} s one at a time: saved {} of what the deployment allows",
            t.took_s,
            t.allowed_s,
            t.ideal_s,
            t.sequential_s,
            pct(saving.max(-9.99))
        ),
        None => format!(
            "took {:.2} s; the deployment allows {:.2} s for a perfectly concurrent client, {:.2} s one call at a time",
            t.took_s, t.allowed_s, t.sequential_s
        ),
    };
    // The simulator's own lateness, where it explains the run's shortfall.
    let late = simulator_late(reqs, t.took_s - t.allowed_s);
    match decision::decide(&evidence) {
        Decision::OneAgent => (
            Verdict::Inconclusive,
            Cause::NothingToJudge,
            format!(
                "one agent ({}) made {n} requests, one after another as one agent's calls are: nothing could have run alongside them; if the program has more agents, label each with X-Agent (or pass the number of agents)",
                rep.agents[0].agent
            ),
        ),
        Decision::ConnectionPool => (
            Verdict::Serialized,
            Cause::ConnectionPool,
            format!(
                "the agents made their calls together, but the {n} requests reached the server one at a time over {}: serialized by the HTTP client's connection pool",
                plural(c.connections, "connection", "connections")
            ),
        ),
        Decision::HeldBack => {
            let unlabelled = if agents_known {
                ""
            } else {
                " (no X-Agent labels: if these calls depend on each other by design this is expected; label the agents to judge them)"
            };
            (
                Verdict::Serialized,
                Cause::Client,
                // What a probe run holding the answers tells is added by `held.rs`.
                format!(
                    "{who} made {n} requests, but no two were ever in flight at once: each reached the server only after the previous one had finished: serialized in the client{unlabelled}"
                ),
            )
        }
        Decision::LittleToSave => (
            Verdict::Inconclusive,
            Cause::NothingToJudge,
            format!(
                "requests overlapped ({overlapped}), but one chain of calls is nearly all the work ({:.2} s of {:.2} s one at a time): there was little to save, nothing to judge",
                t.ideal_s, t.sequential_s
            ),
        ),
        // The simulator's figures are modelled, not sampled: it gives no interval to cross.
        Decision::TooNoisy { lo, hi } => (
            Verdict::Inconclusive,
            Cause::NothingToJudge,
            format!(
                "too noisy to tell: the saving lies between {} and {}, on both sides of the parallel line",
                pct(lo),
                pct(hi)
            ),
        ),
        Decision::UnknownAllowance(a) => unknown_deployment(&figures(&a)),
        Decision::UnknownAgents(a) => unknown_agents(&overlapped, &figures(&a), opts.expected_agents),
        Decision::ReadStall(a) => (
            Verdict::Inconclusive,
            Cause::ClientLag,
            format!(
                "{who} overlapped ({overlapped}) and the server wrote the last answer in the time the deployment allows, but the client read it {:.0} ms later: a stall of its executor or of a busy machine, which calls this short cannot tell apart (a longer time scale can) ({})",
                read_after_s * 1e3,
                figures(&a)
            ),
        ),
        Decision::Timed(a) if a.verdict == Verdict::Parallel => {
            let how = match a.saving {
                Some(_) => format!("{who} overlapped: {overlapped}; {}", figures(&a)),
                None => format!(
                    "{who} overlapped ({overlapped}) as far as the deployment allows; it allows no real saving here ({})",
                    figures(&a)
                ),
            };
            (Verdict::Parallel, Cause::None, how)
        }
        // Short of parallel by less time than the simulator itself was late: the machine's,
        // not the client's (never read parallel for it: the rerun on a quieter machine can).
        Decision::Timed(a) | Decision::Limited(a, _) if late.is_some() => {
            let (late_s, lost_s) = late.unwrap_or_default();
            (
                Verdict::Inconclusive,
                Cause::SimulatorLate,
                format!(
                    "{who} overlapped ({overlapped}), and the {:.0} ms lost against the deployment are within how late the simulator itself sent an answer ({:.0} ms): a machine too busy to run it on time, which cannot be told from the client's doing; run again on a quieter machine or at a longer time scale ({})",
                    lost_s * 1e3,
                    late_s * 1e3,
                    figures(&a)
                ),
            )
        }
        Decision::Limited(a, l) => {
            let (cause, why) = client_cause(rep, reqs, client, handoffs, Verdict::PartlySerialized);
            (Verdict::PartlySerialized, cause, limited(&why, &l, t.allowed_s, &figures(&a)))
        }
        Decision::LimitUnprobed(a, l) => (
            Verdict::Inconclusive,
            Cause::UnknownAgents,
            format!(
                "{who} overlapped ({overlapped}), but at most {} of {} requests were in flight at once, each next one going out as another's answer came back: a client holding {} calls at a time takes {:.2} s on this deployment against the {:.2} s it allows, part of the {:.2} s lost (the rest the program's own, such as a first call gone out ahead of the others); a launcher slow to start its agents looks the same in one run, and a probe run holding every answer tells them apart ({})",
                l.k,
                l.of,
                l.k,
                l.limited,
                l.allowed,
                l.took - l.allowed,
                figures(&a)
            ),
        ),
        Decision::Timed(a) => {
            if let Some(scale) = started_late(reqs, opts, t) {
                let stagger_s = first_calls_spread_s(reqs);
                return (
                    Verdict::Inconclusive,
                    Cause::TimeScale,
                    format!(
                        "{who} overlapped ({overlapped}), but the agents' first calls went out over {:.0} ms as the program started them, and a probe run holding every answer had each agent's first call out before any answer came: none waited for another's call; that start-up is the program's own (threads or tasks started one by one, a busy machine), at least half of the {:.2} s lost, and calls this short magnify it: judge it at a longer time scale (about {scale:.2}), where the calls outlast it ({})",
                        stagger_s * 1e3,
                        t.took_s - t.allowed_s,
                        figures(&a)
                    ),
                );
            }
            let (cause, why) = client_cause(rep, reqs, client, handoffs, a.verdict);
            if let Some(waited_s) = starved(opts, t).filter(|_| cause == Cause::ClientLag) {
                return (
                    Verdict::Inconclusive,
                    Cause::ClientLag,
                    format!(
                        "{why}; but the client's threads waited {waited_s:.2} s in all for a CPU during the run, as long as the {:.2} s lost: a machine too busy to run the client reads the same as an executor the program blocked, which this run cannot tell apart (run again, on a quieter machine or at a longer time scale) ({})",
                        t.took_s - t.allowed_s,
                        figures(&a)
                    ),
                );
            }
            let reason = match a.saving {
                Some(_) => format!("{why} ({})", figures(&a)),
                None => {
                    let bound = t.allowed_s.max(t.sequential_s);
                    format!(
                        "{why}; it took {:.1}x the time the deployment explains, {:.2} s lost against the {:.2} s an ideal server could save ({})",
                        t.took_s / bound.max(1e-9),
                        t.took_s - bound,
                        t.sequential_s - t.ideal_s,
                        figures(&a)
                    )
                }
            };
            (a.verdict, cause, reason)
        }
    }
}

/// Who made the calls, in words: the program, or its conversations or agents.
pub(super) fn who(rep: &Report) -> String {
    let agents = rep.agents.len();
    match rep.agents_from {
        AgentSource::Program => "the program".to_string(),
        AgentSource::Conversations => plural(agents, "conversation", "conversations"),
        _ => plural(agents, "agent", "agents"),
    }
}

/// How many requests could have run at once: the agents, or for a program whose agents the
/// judge cannot tell apart (and was not told how many), every request, as it is judged.
pub(super) fn could_run_at_once(rep: &Report) -> Option<usize> {
    rep.concurrency.possible.or((rep.agents_from == AgentSource::Program).then_some(rep.requests))
}

/// The evidence the decision core rests on, for one reading of the time figures.
pub(super) fn evidence(
    rep: &Report,
    reqs: &[Req<'_>],
    client: &BTreeMap<u64, ClientCall>,
    opts: &JudgeOptions,
    described: bool,
    f: &Figures,
) -> Evidence {
    let c = &rep.concurrency;
    let agents = rep.agents.len();
    let expected_more = opts.expected_agents.is_some_and(|k| k >= 2);
    // An unlabelled program told how many agents run at once: fewer in flight than that is
    // the client's doing; with that many in flight, time lost later may be one agent's calls
    // following each other by design (agents of different numbers of turns), unless each
    // request can be an agent of its own.
    let permit_shown = opts.expected_agents.is_some_and(|k| c.max_in_flight < k || reqs.len() <= k);
    let agents_known = rep.agents_from != AgentSource::Program || (expected_more && permit_shown);
    // The order, on the server's clock: what reached it together. With labels or
    // conversations, one agent whose calls followed each other is one agent; with neither, the
    // program's requests are taken to be able to run at once, so none overlapping is serialized.
    let order = if c.max_in_flight > 1 {
        Order::Overlapped
    } else if agents == 1 && rep.agents_from != AgentSource::Program && !expected_more {
        Order::OneAgent
    } else if calls_made_together(reqs, client) {
        Order::OneConnectionAtATime
    } else {
        Order::OneAfterAnother
    };
    // A stall, not an executor blocked throughout: parallel to where the server wrote its last
    // answer, and the answers otherwise reached the agents on time.
    let read_late = answers_read_late(rep, reqs);
    let read_stall = f.served.is_some_and(|s| s.verdict == Verdict::Parallel) && !read_late;
    // Fewer in flight at once than agents could run (a program whose agents are unknown: than
    // requests, as it is judged): what a client held to that many takes.
    let limited = match (f.limited_s, could_run_at_once(rep)) {
        (Some(limited), Some(of)) if c.max_in_flight < of && !read_late => Some(Limited {
            k: c.max_in_flight,
            of,
            took: rep.time.took_s,
            allowed: f.allowed_s,
            limited,
            shown: f.limit_shown,
        }),
        _ => None,
    };
    // A program whose agents are unknown, not yet probed: a probe run releasing one answer at
    // a time can show a limit (`recovered.rs`).
    let limit_unprobed = rep.agents_from == AgentSource::Program && opts.probe_window().is_none();
    Evidence {
        order,
        against: f.against,
        allowance_known: described,
        agents_known,
        interval: None,
        read_stall,
        limited,
        limit_unprobed,
    }
}

/// A shortfall of a program whose agents the judge could not tell apart: inconclusive, since
/// it assumed every request could run at once, and the time it calls lost may be one agent's
/// calls following each other by design.
fn unknown_agents(overlapped: &str, figures: &str, told: Option<usize>) -> (Verdict, Cause, String) {
    let fix = match told {
        // Told how many, and that many were in flight at once: the number says no more.
        Some(k) => format!(
            "label each agent's requests with X-Agent (knowing there are {k} agents, and seeing {k} in flight at once, does not say which requests are whose)"
        ),
        None => "label each agent's requests with X-Agent or give the number of agents (--agents N)".to_string(),
    };
    (
        Verdict::Inconclusive,
        Cause::UnknownAgents,
        format!(
            "requests overlapped ({overlapped}), but the judge could not tell the agents apart (no X-Agent labels, no conversations to chain), so it cannot say whether the time lost was held back by the client or is one agent's calls following each other: {fix} ({figures})"
        ),
    )
}

/// A limit on the calls in flight that explains the time lost, in words: `why` says where the
/// calls were held ([`client_cause`]).
/// `allowed_s`: what the deployment allows the reading the figures quote, with the agents'
/// waits at the limit between calls as their own work (where the gaps showed such waits, the
/// limit is weighed without them, as the deployment is).
fn limited(why: &str, l: &Limited, allowed_s: f64, figures: &str) -> String {
    let k = l.k;
    let queue = if l.allowed < allowed_s - 0.005 {
        " (the agents' waits for a free one between their calls not counted as their own work)"
    } else {
        ""
    };
    format!(
        "{why}: a client holding {k} calls at a time takes {:.2} s on this deployment, against the {:.2} s it allows{queue}; the program took {:.2} s ({:.1}x): that limit, not the deployment, cost the time, though it saved most of what running together can (a semaphore or connection pool of {k}, or an executor of {k} workers: Python's default one, behind asyncio.to_thread and LangChain's batch, has min(32, CPUs + 4)) ({figures})",
        l.limited,
        l.allowed,
        l.took,
        l.took / l.allowed.max(1e-9)
    )
}

/// A shortfall in a trace that does not say what its deployment allows: inconclusive, since
/// the time lost may be the deployment's (its slots, its devices) as well as the client's.
fn unknown_deployment(figures: &str) -> (Verdict, Cause, String) {
    (
        Verdict::Inconclusive,
        Cause::UnknownDeployment,
        format!(
            "requests overlapped but took longer than an ideal server would; the trace does not describe its deployment (a trace older than schema 4), so what its slots and devices allow, and so whether the client lost the time, cannot be told ({figures})"
        ),
    )
}

/// The time scale at which the calls would outlast the agents' start-up four times (1 at
/// most), where that start-up is the program's own and at least half the time lost at a time
/// scale that shortens the calls: a probe run had every agent's first call out before any
/// answer ([`JudgeOptions::starts_free`]), so the later ones were held back by no other's
/// call, and a launcher's delays run in real time while the calls are scaled.
pub(super) fn started_late(reqs: &[Req<'_>], opts: &JudgeOptions, t: &super::report::TimeFigures) -> Option<f64> {
    let lost_s = t.took_s - t.allowed_s;
    (opts.starts_free && lost_s > 0.0 && first_calls_spread_s(reqs) >= 0.5 * lost_s).then(|| outlasting(reqs, t))?
}

/// The time scale at which the calls would outlast the spread of the agents' first calls four
/// times (1 at most), where the run's is shorter: start-ups that run in real time while the
/// calls are scaled.
pub(super) fn outlasting(reqs: &[Req<'_>], t: &super::report::TimeFigures) -> Option<f64> {
    let call_s = secs(reqs.iter().map(|q| q.r.solo_us).sum::<u64>()) / reqs.len().max(1) as f64;
    (t.time_scale < 1.0).then(|| (t.time_scale * 4.0 * first_calls_spread_s(reqs) / call_s.max(1e-6)).min(1.0))
}

/// From the first agent's first call to the last agent's first call, s.
fn first_calls_spread_s(reqs: &[Req<'_>]) -> f64 {
    let mut firsts: BTreeMap<usize, u64> = BTreeMap::new();
    for q in reqs {
        firsts.entry(q.group).and_modify(|s| *s = (*s).min(q.start)).or_insert(q.start);
    }
    match (firsts.values().min(), firsts.values().max()) {
        (Some(a), Some(b)) => secs(b - a),
        _ => 0.0,
    }
}

/// How long the client's threads waited for a CPU during the run, s, where that is as long as
/// the time lost against the deployment ([`JudgeOptions::client_cpu_wait`]).
fn starved(opts: &JudgeOptions, t: &super::report::TimeFigures) -> Option<f64> {
    let waited_s = secs(opts.client_cpu_wait_us?);
    let lost_s = t.took_s - t.allowed_s;
    (lost_s > 0.0 && waited_s >= lost_s).then_some(waited_s)
}

/// What in the client lost the time: answers read late (a blocked executor), a connection pool
/// that let fewer calls through than were made, or calls held back before they were made.
fn client_cause(
    rep: &Report,
    reqs: &[Req<'_>],
    client: &BTreeMap<u64, ClientCall>,
    handoffs: usize,
    verdict: Verdict,
) -> (Cause, String) {
    let c = &rep.concurrency;
    let t = &rep.time;
    if answers_read_late(rep, reqs) {
        return (
            Cause::ClientLag,
            format!(
                "the server streamed on schedule but answers reached the agents {:.0} ms late (median): the client did not keep up, its executor was blocked (a blocking call in async code?)",
                t.client_lag_s.unwrap_or(0.0) * 1e3
            ),
        );
    }
    if calls_made_together(reqs, client) && c.max_in_flight < c.possible.unwrap_or(usize::MAX) {
        return (
            Cause::ConnectionPool,
            format!(
                "the agents made their calls together, but at most {} reached the server at once over {}: held back by the HTTP client's connection pool",
                c.max_in_flight,
                plural(c.connections, "connection", "connections")
            ),
        );
    }
    let limit = match c.possible {
        Some(p) if c.max_in_flight < p => {
            format!("at most {} of {p} agents' requests were in flight at once", c.max_in_flight)
        }
        // Overlapping most of the time, yet slower than the deployment allows: the time was
        // lost around the calls (before the first, between them), not by keeping them apart.
        _ if c.overlap >= 0.5 => format!(
            "up to {} requests were in flight at once ({} of the busy time with two or more), yet the agents took longer than the deployment allows",
            c.max_in_flight,
            pct(c.overlap)
        ),
        _ => format!(
            "up to {} requests were in flight at once, but not for long ({} of the busy time)",
            c.max_in_flight,
            pct(c.overlap)
        ),
    };
    let waits = if handoffs > 0 {
        format!(
            "; {} arrived right after another agent's request ended, as if waiting for it (a lock or a semaphore?)",
            plural(handoffs, "call", "calls")
        )
    } else {
        String::new()
    };
    let words =
        if verdict == Verdict::Serialized { "serialized in the client" } else { "partly serialized in the client" };
    (Cause::Client, format!("{limit}{waits}: {words}"))
}

/// The simulator's own lateness (the latest token of a request sent late against its schedule,
/// [`crate::trace::RequestTrace::late_us`]) where it is at least half the time the run lost
/// against what the deployment allows (`lost_s`): `(latest lateness, lost)`, seconds. The
/// lateness of the latest answer of any chain is a lower bound of what that chain lost to it.
fn simulator_late(reqs: &[Req<'_>], lost_s: f64) -> Option<(f64, f64)> {
    let late_s = secs(reqs.iter().map(|q| q.r.late_us).max().unwrap_or(0));
    (lost_s > 0.0 && late_s >= 0.5 * lost_s).then_some((late_s, lost_s))
}

/// Whether the answers reached the agents late throughout: the median lag between the server
/// writing an answer's end and the client reading it is over a quarter of the median request.
fn answers_read_late(rep: &Report, reqs: &[Req<'_>]) -> bool {
    let request_s = median(reqs.iter().map(|q| secs(q.server_end - q.r.received_us)).collect()).unwrap_or(0.0);
    rep.time.client_lag_s.is_some_and(|l| l > 0.25 * request_s.max(1e-9))
}

/// Whether the client made calls that were held back before reaching the server: a call made
/// while another agent's request was in flight that reached the server only once that request
/// had ended, for at least half the calls after the first. Client-side observations only.
fn calls_made_together(reqs: &[Req<'_>], client: &BTreeMap<u64, ClientCall>) -> bool {
    let obs: Vec<(u64, u64, u64, usize)> = reqs
        .iter()
        .filter_map(|q| client.get(&q.r.id).map(|c| (c.sent_us, q.r.received_us, q.server_end, q.group)))
        .collect();
    if obs.len() < 2 {
        return false;
    }
    let held = obs
        .iter()
        .filter(|a| {
            a.1.saturating_sub(a.0) > 1_000 && obs.iter().any(|b| b.3 != a.3 && a.0 < b.2 && a.1 >= b.2 && b.1 <= a.1)
        })
        .count();
    held * 2 >= obs.len() - 1
}
