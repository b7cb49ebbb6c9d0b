//! Verdicts of the harness's runs. On the embedded simulator the run is judged by the
//! simulator's judge ([`sim_ollama::judge`]) from the trace, with the client's own view of every
//! call (when it was made, when its last byte was read) so a blocked executor or a connection
//! pool can be named; in live mode, with no trace, from the client's timings and the measured
//! solo baselines.
//!
//! Both are decided by one rule, the decision core [`sim_ollama::judge::decision`]: the order
//! of the calls first (calls of two agents never in flight together are serialized whatever the
//! times say), then the client's share of the saving the deployment allows,
//! `(one at a time - took) / (one at a time - allowed)`: **parallel** at 0.80 or more,
//! **serialized** at 0.15 or less, **partly serialized** in between; **inconclusive** where
//! there was nothing to save, the noise could decide, or what the servers allow is unknown.
//! In live mode "allowed" is the reference client's time on the same servers, "one at a time"
//! and the ideal the agents' median solo durations summed and the longest.

use crate::measure::Efficiency;
use crate::runtime::AgentRecord;
use sim_ollama::judge::decision::{self, Decision, Evidence, Order};
use sim_ollama::judge::{ClientCall, JudgeOptions, Report};
pub use sim_ollama::judge::{PARALLEL_MIN_SAVING, SERIALIZED_MAX_SAVING, Verdict};
use std::time::{Duration, Instant};

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn effs(e: &Efficiency) -> String {
    format!(
        "true efficiency {} (apparent {}), speedup {:.2}x",
        pct(e.efficiency_true),
        pct(e.efficiency_apparent),
        e.speedup
    )
}

/// Why a run whose server ended a call early is not judged, or `None`: a call that stopped
/// (`done_reason` `stop`) before the tokens the scenario asked for did less work than the
/// scenario and than its solo baselines, so the run's figures compare unequal work (issue 23:
/// a real model's end of text; the simulator answers every call at its asked length unless a
/// script cuts it). The run is inconclusive, never judged as usual.
pub(crate) fn ended_early(agents: &[AgentRecord]) -> Option<String> {
    agents.iter().find_map(|a| {
        a.calls.iter().enumerate().find_map(|(i, c)| {
            let asked = c.expected_tokens?;
            let got = c.eval_count.unwrap_or(c.tokens.len() as u64);
            (c.error.is_none() && c.done_reason.as_deref() == Some("stop") && got < asked).then(|| {
                format!(
                    "agent {}'s call {} ended early: the server stopped it after {got} of the {asked} tokens asked for (done_reason \"stop\"), so this run did less work than the scenario and its solo baselines and is not comparable with them: not judged",
                    a.name,
                    i + 1
                )
            })
        })
    })
}

/// Why a run with a failed call is not judged (issue 14: a failed call's duration is no
/// evidence of concurrency, and figures computed with it mislead), or `None` when every call
/// succeeded.
fn failed_reason(agents: &[AgentRecord]) -> Option<String> {
    let (n, who, err) = failures(agents)?;
    Some(if n == agents.len() {
        format!("every agent failed ({n}); {who}: {err}")
    } else {
        format!("{n} of {} agents failed ({who}: {err}): a run with a failed call is not judged", agents.len())
    })
}

/// The first failed call of a run, if any: (agents that failed, the first one's name and error).
fn failures(agents: &[AgentRecord]) -> Option<(usize, String, String)> {
    let failed: Vec<&AgentRecord> = agents.iter().filter(|a| a.calls.iter().any(|c| c.error.is_some())).collect();
    let first = failed.first()?;
    let err = first.calls.iter().find_map(|c| c.error.clone()).unwrap_or_default();
    Some((failed.len(), first.name.clone(), err))
}

/// Judges a run on the embedded simulator: the judge's verdict on the trace, told what the
/// client saw. `origin` is the simulator's trace origin. Returns the verdict, the reason (with
/// the measured efficiencies) and the judge's report.
pub(crate) fn judge_simulated(
    trace: &sim_ollama::advanced::trace::TraceSnapshot,
    origin: Instant,
    agents: &[AgentRecord],
    e: &Efficiency,
    cpu_wait: Option<Duration>,
) -> (Verdict, String, Report) {
    let report = judge_trace(trace, origin, agents, cpu_wait);
    if let Some(failed) = failed_reason(agents) {
        return (Verdict::Failed, failed, report);
    }
    if let Some(early) = ended_early(agents) {
        return (Verdict::Inconclusive, early, report);
    }
    (report.verdict, format!("{} ({})", report.reason, effs(e)), report)
}

/// A twin's deployment verdict with its tolerance: the same run replayed with the twin's
/// batching and sharing at the slow and the fast end of what `harness calibrate --check` calls
/// the same servers ([`crate::calibrate::tolerance`]); where the two shares of an ideal
/// server's saving lie in two bands, the verdict is `unknown`
/// ([`sim_ollama::judge::deployment_within_tolerance`]).
pub(crate) fn twin_deployment(
    rep: sim_ollama::judge::DeploymentReport,
    trace: &sim_ollama::advanced::trace::TraceSnapshot,
    origin: Instant,
    agents: &[AgentRecord],
    tolerance: &crate::calibrate::Tolerance,
) -> sim_ollama::judge::DeploymentReport {
    let share_at = |ends: &[sim_ollama::advanced::trace::DeviceSharing]| {
        let mut moved = trace.clone();
        for (d, end) in moved.devices.iter_mut().zip(ends) {
            *d = *end;
        }
        judge_trace(&moved, origin, agents, None).deployment.share.unwrap_or(f64::NAN)
    };
    sim_ollama::judge::deployment_within_tolerance(rep, (tolerance.slow_share(share_at), share_at(&tolerance.fast)))
}

/// The judge's report on a simulated run: each agent's calls matched to its requests, and how
/// long this process's threads (the client's) waited for a CPU during the run, where measured.
fn judge_trace(
    trace: &sim_ollama::advanced::trace::TraceSnapshot,
    origin: Instant,
    agents: &[AgentRecord],
    cpu_wait: Option<Duration>,
) -> Report {
    let us = |t: Instant| t.saturating_duration_since(origin).as_micros() as u64;
    // The i-th call of agent A is A's i-th request in the trace (the harness labels every call
    // with its agent's name in X-Agent).
    let mut calls = Vec::new();
    let mut known = Vec::new();
    for a in agents {
        let mut mine: Vec<&sim_ollama::advanced::trace::RequestTrace> =
            trace.requests.iter().filter(|r| r.agent_label.as_deref() == Some(a.name.as_str())).collect();
        mine.sort_by_key(|r| r.id);
        for (c, r) in a.calls.iter().zip(mine) {
            calls.push(ClientCall { request: r.id, sent_us: us(c.sent), end_us: us(c.end) });
            known.push((r.id, c.local_before));
        }
    }
    // The scenario says how long each agent works between its calls: the judge needs no probe
    // run to tell that work from waiting.
    let mut opts = JudgeOptions::new().client_calls(calls).known_local_work(known);
    if let Some(waited) = cpu_wait {
        opts = opts.client_cpu_wait(waited);
    }
    sim_ollama::judge::judge(trace, &opts)
}

/// What the servers allow in live mode, measured: the reference client's median wall time
/// over the cell's rounds, against the run's one-at-a-time and ideal times (its agents' median
/// solo durations: their sum and the longest). Seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// The reference client (every agent at once, on the plainest correct runtime); `None`
    /// when every reference round failed.
    pub reference_s: Option<f64>,
    /// The run's agents one after another.
    pub sequential_s: f64,
    /// The run's longest agent alone.
    pub ideal_s: f64,
    /// Whether the rounds show, beyond their noise, that the servers allow a saving worth
    /// quoting a share of (`baseline::Rounds::room_established`).
    pub room_established: bool,
}

/// The words for the reference client in reasons.
pub(crate) const REFERENCE_WORDS: &str = "the reference client (tokio, every agent at once)";

/// Judges a live run (no server trace) by the decision core the simulator's judge uses
/// ([`sim_ollama::judge::decision`]), from the client's side: the order of the calls as the
/// client saw them, the run's wall time against what the servers allow (`measured`: the
/// reference client's time, and the agents' median solo durations), and `interval`, the 80 %
/// bootstrap interval of the client's saving over the rounds (`None` with one round).
///
/// A run with a failed call, or one the server ended early, is not judged; one with no solo
/// baseline cannot be.
pub(crate) fn judge_live(
    e: &Efficiency,
    agents: &[AgentRecord],
    interval: Option<(f64, f64)>,
    measured: Option<Measured>,
) -> Judged {
    if let Some(failed) = failed_reason(agents) {
        return Judged::without_saving(Verdict::Failed, failed);
    }
    if let Some(early) = ended_early(agents) {
        return Judged::without_saving(Verdict::Inconclusive, early);
    }
    let Some(m) = measured.filter(|_| !e.efficiency_true.is_nan()) else {
        return Judged::without_saving(
            Verdict::Failed,
            "no solo baseline to judge by: an agent's solo run failed or returned nothing".to_string(),
        );
    };
    let n = agents.len();
    let talking = agents.iter().filter(|a| !a.calls.is_empty()).count();
    let order = if talking < 2 {
        Order::OneAgent
    } else if calls_overlap(agents) {
        Order::Overlapped
    } else if calls_made_together(agents) {
        Order::OneConnectionAtATime
    } else {
        Order::OneAfterAnother
    };
    // Against what the servers allow, as the reference client measured it; where every
    // reference round failed, against an ideal server (what the servers allow is unknown).
    // Where the rounds' noise leaves in doubt whether the servers allow any saving worth
    // quoting, none is quoted: the client is judged as wherever they allow none.
    let allowed = m.reference_s.unwrap_or(m.ideal_s);
    let room_in_doubt = m.reference_s.is_some() && !m.room_established;
    let against = if room_in_doubt {
        decision::against_allowed_without_room(e.wall_s, allowed, m.sequential_s, m.ideal_s)
    } else {
        decision::against_allowed(e.wall_s, allowed, m.sequential_s, m.ideal_s)
    };
    // Live mode sees the client's clock only: a stall in reading cannot be told from the rest.
    let evidence = Evidence {
        order,
        against,
        allowance_known: m.reference_s.is_some(),
        agents_known: true,
        interval,
        read_stall: false,
        // A limit on the calls in flight needs the calls replayed under it, which a live
        // server's measurements cannot.
        limited: None,
        limit_unprobed: false,
    };
    let mut effs = match (interval, against.and_then(|a| a.saving)) {
        (Some((lo, hi)), Some(saving)) => {
            format!("{}; saving {} ({}-{} over the solo rounds)", effs(e), pct(saving), pct(lo), pct(hi))
        }
        // No share of the servers' room quoted (none, or one within their noise): the interval
        // of the resamples that showed one, for the record.
        (Some((lo, hi)), None) => {
            format!("{}; no saving quoted ({}-{} in the solo rounds' resamples)", effs(e), pct(lo), pct(hi))
        }
        (None, _) => effs(e),
    };
    if let Some(reference) = m.reference_s {
        effs.push_str(&format!("; {REFERENCE_WORDS} took {reference:.2} s, one at a time {:.2} s", m.sequential_s));
    }
    let decided = decision::decide(&evidence);
    let reason = match decided {
        Decision::OneAgent => {
            format!("only one agent made calls: nothing could have run alongside them, nothing to judge ({effs})")
        }
        Decision::ConnectionPool => {
            let over = connections(agents).map_or("the connections".to_string(), |n| {
                if n == 1 { "one connection".to_string() } else { format!("{n} connections") }
            });
            format!(
                "the agents made their calls together, but the calls went over {over} one at a time (an HTTP/1.1 connection carries one exchange at a time): serialized by the HTTP client's connection pool, whatever the timings say ({effs}; no server trace in live mode)"
            )
        }
        Decision::HeldBack => format!(
            "no two agents' calls were ever in flight together (each call was made only after the one before it had finished): serialized in the client, whatever the timings say ({effs}; no server trace in live mode)"
        ),
        Decision::LittleToSave => format!(
            "the longest agent alone is nearly all the work: even an ideal server could save little, nothing to judge ({effs})"
        ),
        Decision::TooNoisy { .. } => format!(
            "too noisy to tell: the saving lies on both sides of the {} parallel line depending on which solo runs are the baseline; measure more solo rounds or quieten the servers ({effs})",
            pct(PARALLEL_MIN_SAVING)
        ),
        // Live mode sees no server clock, so it never gives this evidence; worded all the same.
        Decision::ReadStall(_) => format!(
            "calls overlapped, and the time lost lies in reading the last answers after the servers wrote them: a stall of the client's executor or of a busy machine, which calls this short cannot tell apart ({effs})"
        ),
        // Live mode gives no limit to test (`limited: None`); worded all the same.
        Decision::Limited(_, l) => format!(
            "calls overlapped, but at most {} of {} agents' calls were in flight at once, and a client held to that many explains the time lost: partly serialized in the client ({effs})",
            l.k, l.of
        ),
        // Live mode gives no limit to test; worded all the same.
        Decision::LimitUnprobed(_, l) => format!(
            "calls overlapped, but at most {} of {} agents' calls were in flight at once, and a client held to that many would cost part of the time lost: whether the client held them back, no run has shown ({effs})",
            l.k, l.of
        ),
        Decision::UnknownAllowance(_) | Decision::UnknownAgents(_) => format!(
            "calls overlapped, but the agents took longer together than an ideal server would, and what the servers allow is unknown (every round of {REFERENCE_WORDS} failed): the time lost may be the servers' (their slots, a shared device or CPU) as well as the client's ({effs})"
        ),
        Decision::Timed(a) => match (a.verdict, a.saving) {
            (Verdict::Parallel, None) if room_in_doubt => format!(
                "{n} agents overlapped as far as the servers allow: whether they allow any real saving here is within the noise of {REFERENCE_WORDS}'s rounds, so no share of it is quoted, and the agents took no longer than the servers explain ({effs})"
            ),
            (Verdict::Parallel, None) => format!(
                "{n} agents overlapped as far as the servers allow: they allow no real saving here, as {REFERENCE_WORDS} shows ({effs})"
            ),
            (Verdict::Parallel, Some(_)) if m.reference_s.is_some() => {
                format!("{n} agents overlapped, as far as the servers allow ({effs})")
            }
            (Verdict::Parallel, Some(_)) => format!("{n} agents overlapped: {effs}"),
            (v, _) => format!(
                "calls overlapped, but the agents took longer together than {REFERENCE_WORDS} on the same servers: {} (a client that slows its own calls, or servers that were slower during these runs than during the reference's: no server trace in live mode to tell) ({effs})",
                if v == Verdict::Serialized { "serialized" } else { "partly serialized" }
            ),
        },
    };
    Judged { verdict: decided.verdict(), reason, saving: against.and_then(|a| a.saving).unwrap_or(f64::NAN) }
}

/// A live run's verdict, its reason, and the client's share of the saving the servers allow
/// as the verdict read it (NaN where none was quoted: nothing to save, a room in doubt, or a
/// run not judged).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Judged {
    pub(crate) verdict: Verdict,
    pub(crate) reason: String,
    pub(crate) saving: f64,
}

impl Judged {
    fn without_saving(verdict: Verdict, reason: String) -> Self {
        Judged { verdict, reason, saving: f64::NAN }
    }
}

/// Whether calls of different agents were on the wire together: in flight from the moment
/// the call was made (or, on a connection another call was using, from that call's end: an
/// HTTP/1.1 connection carries one exchange at a time) to its last byte.
pub(crate) fn calls_overlap(agents: &[AgentRecord]) -> bool {
    decision::agents_overlap(on_one_clock(wire_intervals(agents)))
}

/// Whether calls of different agents were made while another agent's call was in flight, as
/// the client saw them (connections aside).
pub(crate) fn calls_made_together(agents: &[AgentRecord]) -> bool {
    decision::agents_overlap(on_one_clock(
        agents.iter().flat_map(|a| a.calls.iter().map(move |c| (c.sent, c.end, a.name.as_str()))).collect(),
    ))
}

/// The distinct connections the calls went over, when the HTTP stack told them all.
pub(crate) fn connections(agents: &[AgentRecord]) -> Option<usize> {
    let conns: Option<std::collections::BTreeSet<std::net::SocketAddr>> =
        agents.iter().flat_map(|a| a.calls.iter().map(|c| c.conn)).collect();
    conns.map(|c| c.len())
}

/// Intervals in microseconds since the earliest of them, as the decision core takes them.
fn on_one_clock(iv: Vec<Interval<'_>>) -> Vec<(u64, u64, &str)> {
    let Some(origin) = iv.iter().map(|x| x.0).min() else { return Vec::new() };
    let us = |t: Instant| t.saturating_duration_since(origin).as_nanos() as u64;
    iv.into_iter().map(|(a, b, who)| (us(a), us(b), who)).collect()
}

type Interval<'a> = (std::time::Instant, std::time::Instant, &'a str);

fn wire_intervals(agents: &[AgentRecord]) -> Vec<Interval<'_>> {
    let mut by_conn: std::collections::BTreeMap<Option<std::net::SocketAddr>, Vec<Interval<'_>>> = Default::default();
    for a in agents {
        for c in &a.calls {
            by_conn.entry(c.conn).or_default().push((c.sent, c.end, a.name.as_str()));
        }
    }
    let mut out = Vec::new();
    for (conn, mut calls) in by_conn {
        if conn.is_some() {
            // One exchange at a time: in the order they ended, each from the previous one's end.
            calls.sort_by_key(|x| x.1);
            let mut free = None;
            for c in &mut calls {
                if let Some(f) = free {
                    c.0 = c.0.max(f);
                }
                free = Some(c.1);
            }
        }
        out.extend(calls);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of two agents of 1 s alone (2 s one at a time, 1 s on an ideal server) that saved
    /// `x` of what it could.
    fn saving(x: f64) -> Efficiency {
        let wall = 2.0 - x;
        Efficiency { wall_s: wall, efficiency_true: 1.0 / wall, efficiency_apparent: 0.9, speedup: 2.0 / wall }
    }

    /// Servers on which the reference client took as long as an ideal server's.
    const IDEAL: Option<Measured> =
        Some(Measured { reference_s: Some(1.0), sequential_s: 2.0, ideal_s: 1.0, room_established: true });

    #[test]
    fn thresholds_split_the_three_verdicts() {
        let par = agents(&[("a", 0.0, 1.0), ("b", 0.1, 1.1)]);
        let v = |x: f64| judge_live(&saving(x), &par, None, IDEAL).verdict;
        assert_eq!(v(0.99), Verdict::Parallel);
        assert_eq!(v(0.80), Verdict::Parallel);
        assert_eq!(v(0.50), Verdict::PartlySerialized);
        assert_eq!(v(0.15), Verdict::Serialized);
        assert_eq!(v(-0.3), Verdict::Serialized);
        // No solo baseline: nothing to judge by.
        let none = Efficiency { efficiency_true: f64::NAN, ..saving(0.5) };
        assert_eq!(judge_live(&none, &par, None, IDEAL).verdict, Verdict::Failed);
        assert_eq!(judge_live(&saving(0.9), &par, None, None).verdict, Verdict::Failed);
        // One agent alone: nothing could have run alongside it, as the simulator's judge says.
        let Judged { verdict: v, reason, .. } = judge_live(&saving(0.9), &par[..1], None, IDEAL);
        assert_eq!(v, Verdict::Inconclusive, "{reason}");
        assert!(reason.contains("only one agent"), "{reason}");
    }

    /// Agents with one call each over `[from, to]` seconds after a common origin.
    fn agents(spans: &[(&str, f64, f64)]) -> Vec<AgentRecord> {
        let t0 = Instant::now();
        let at = |s: f64| t0 + std::time::Duration::from_secs_f64(s);
        spans
            .iter()
            .map(|(name, from, to)| {
                let mut c = crate::client::CallRecord::new(at(*from));
                c.tokens = vec![at(*from + 0.01), at(*to)];
                c.end = at(*to);
                AgentRecord { name: name.to_string(), instance: 0, start: at(*from), end: at(*to), calls: vec![c] }
            })
            .collect()
    }

    #[test]
    fn a_call_the_server_ended_early_makes_the_run_inconclusive_not_judged() {
        let mut par = agents(&[("a", 0.0, 1.0), ("b", 0.1, 1.1)]);
        for a in &mut par {
            a.calls[0].expected_tokens = Some(390);
            a.calls[0].eval_count = Some(390);
            a.calls[0].done_reason = Some("length".into());
        }
        assert_eq!(judge_live(&saving(0.95), &par, Some((0.9, 0.99)), IDEAL).verdict, Verdict::Parallel);
        // A model that reached its end of text after 212 tokens: unequal work.
        par[1].calls[0].eval_count = Some(212);
        par[1].calls[0].done_reason = Some("stop".into());
        let Judged { verdict: v, reason, .. } = judge_live(&saving(0.95), &par, Some((0.9, 0.99)), IDEAL);
        assert_eq!(v, Verdict::Inconclusive, "{reason}");
        assert!(reason.contains("agent b's call 1 ended early") && reason.contains("212 of the 390"), "{reason}");
        // Stopped at exactly the length asked for, or a call whose length the scenario does not
        // set (a round trip's tool-calling turn): judged as usual.
        par[1].calls[0].eval_count = Some(390);
        assert_eq!(judge_live(&saving(0.95), &par, Some((0.9, 0.99)), IDEAL).verdict, Verdict::Parallel);
        par[1].calls[0].eval_count = Some(20);
        par[1].calls[0].expected_tokens = None;
        assert_eq!(judge_live(&saving(0.95), &par, Some((0.9, 0.99)), IDEAL).verdict, Verdict::Parallel);
    }

    #[test]
    fn calls_that_never_overlapped_are_serialized_whatever_the_saving_says() {
        // Issue 14: one slow solo baseline made a sequential control read "parallel".
        let seq = agents(&[("a", 0.0, 1.0), ("b", 1.0, 2.0)]);
        let Judged { verdict: v, reason, .. } = judge_live(&saving(0.95), &seq, Some((0.9, 0.99)), IDEAL);
        assert_eq!(v, Verdict::Serialized, "{reason}");
        assert!(reason.contains("no two agents' calls were ever in flight together"), "{reason}");
        // The same timings with overlapping calls are judged by the saving.
        let par = agents(&[("a", 0.0, 1.0), ("b", 0.1, 1.1)]);
        assert_eq!(judge_live(&saving(0.95), &par, Some((0.9, 0.99)), IDEAL).verdict, Verdict::Parallel);
    }

    #[test]
    fn calls_made_together_that_shared_one_connection_are_serialized_by_the_pool() {
        // Issue 23 item 8: a client with one connection per server makes its agents' calls
        // together, and they wait inside it for the connection: in the client's timings they
        // overlap, on the wire they went one at a time. Call b was made at 0.1 s, while a was in
        // flight, and its exchange began when a's ended.
        let conn = |n: u16| Some(std::net::SocketAddr::from(([127, 0, 0, 1], n)));
        let mut one = agents(&[("a", 0.0, 1.0), ("b", 0.1, 2.0)]);
        for a in &mut one {
            a.calls[0].conn = conn(40000);
        }
        assert!(calls_made_together(&one) && !calls_overlap(&one));
        let Judged { verdict: v, reason, .. } = judge_live(&saving(0.95), &one, Some((0.9, 0.99)), IDEAL);
        assert_eq!(v, Verdict::Serialized, "{reason}");
        assert!(
            reason.contains("went over one connection one at a time") && reason.contains("connection pool"),
            "{reason}"
        );
        // On two connections the same timings overlap on the wire: judged by the saving.
        let mut two = one.clone();
        two[1].calls[0].conn = conn(40001);
        assert!(calls_overlap(&two));
        assert_eq!(judge_live(&saving(0.95), &two, Some((0.9, 0.99)), IDEAL).verdict, Verdict::Parallel);
        // A stack that does not tell its connections: the client's timings, as before.
        let mut unknown = one.clone();
        unknown[0].calls[0].conn = None;
        assert!(calls_overlap(&unknown));
    }

    #[test]
    fn a_saving_on_both_sides_of_the_parallel_line_is_inconclusive_and_says_why() {
        let par = agents(&[("a", 0.0, 1.0), ("b", 0.1, 1.1)]);
        for point in [0.85, 0.75] {
            let Judged { verdict: v, reason, .. } = judge_live(&saving(point), &par, Some((0.7, 0.9)), IDEAL);
            assert_eq!(v, Verdict::Inconclusive, "{point}: {reason}");
            assert!(reason.contains("too noisy") && reason.contains("70%-90%"), "{reason}");
        }
        // Across the serialized line only: short of parallel either way; the median decides.
        assert_eq!(judge_live(&saving(0.1), &par, Some((0.05, 0.3)), IDEAL).verdict, Verdict::Serialized);
        assert_eq!(judge_live(&saving(0.2), &par, Some((0.05, 0.3)), IDEAL).verdict, Verdict::PartlySerialized);
        // One round: no interval, the saving decides.
        assert_eq!(judge_live(&saving(0.85), &par, None, IDEAL).verdict, Verdict::Parallel);
    }

    #[test]
    fn live_runs_are_measured_against_what_the_reference_client_shows_the_servers_allow() {
        // Two agents of 1 s alone: one at a time 2 s, an ideal server 1 s. Servers that
        // allow no saving (the reference client took 2 s, as two servers sharing two cores
        // can): a run that overlapped and took 2.1 s is client-parallel, not serialized.
        let par = agents(&[("a", 0.0, 2.1), ("b", 0.1, 2.1)]);
        let flat = Efficiency { wall_s: 2.1, efficiency_true: 0.48, efficiency_apparent: 0.95, speedup: 0.95 };
        let none = Measured { reference_s: Some(2.0), sequential_s: 2.0, ideal_s: 1.0, room_established: false };
        let Judged { verdict: v, reason, .. } = judge_live(&flat, &par, None, Some(none));
        assert_eq!(v, Verdict::Parallel, "{reason}");
        assert!(reason.contains("as far as the servers allow") && reason.contains("reference client"), "{reason}");
        // Against servers that allow an ideal server's saving the same run is serialized: the
        // servers' limit would be blamed on the client. Where every reference round failed,
        // what they allow is unknown, and so is whose the time lost was: inconclusive.
        assert_eq!(judge_live(&flat, &par, None, IDEAL).verdict, Verdict::Serialized);
        let unknown = Measured { reference_s: None, ..none };
        let Judged { verdict: v, reason, .. } = judge_live(&flat, &par, None, Some(unknown));
        assert_eq!(v, Verdict::Inconclusive, "{reason}");
        assert!(reason.contains("what the servers allow is unknown"), "{reason}");
        // Parallel against an ideal server needs no reference.
        assert_eq!(judge_live(&saving(0.9), &par, None, Some(unknown)).verdict, Verdict::Parallel);
        // Servers that allow 1.2 s: a run of 1.25 s saved (2 - 1.25) / (2 - 1.2) = 94 %:
        // parallel; a run of 1.8 s saved 25 %: partly serialized, and the reason says it
        // cannot tell the client from slower servers.
        let some = Measured { reference_s: Some(1.2), sequential_s: 2.0, ideal_s: 1.0, room_established: true };
        let e = |w: f64| Efficiency {
            wall_s: w,
            efficiency_true: 2.0 / (2.0 * w),
            efficiency_apparent: 0.9,
            speedup: 2.0 / w,
        };
        assert_eq!(judge_live(&e(1.25), &par, None, Some(some)).verdict, Verdict::Parallel);
        let Judged { verdict: v, reason, .. } = judge_live(&e(1.8), &par, None, Some(some));
        assert_eq!(v, Verdict::PartlySerialized, "{reason}");
        assert!(reason.contains("partly serialized") && reason.contains("no server trace"), "{reason}");
        // A room the rounds' noise leaves in doubt is not quoted: a run of 1.95 s against a
        // reference of 1.6 s saved 12 % of it (serialized) if the room is real, and is
        // client-parallel where the rounds cannot show the servers allow any saving.
        let doubt = Measured { reference_s: Some(1.6), sequential_s: 2.0, ideal_s: 1.0, room_established: true };
        let slow = e(1.95);
        assert_eq!(judge_live(&slow, &par, None, Some(doubt)).verdict, Verdict::Serialized);
        let doubt = Measured { room_established: false, ..doubt };
        let j = judge_live(&slow, &par, None, Some(doubt));
        assert_eq!(j.verdict, Verdict::Parallel, "{}", j.reason);
        assert!(j.reason.contains("within the noise") && j.saving.is_nan(), "{j:?}");
        // It is still judged by the time it lost: twice the servers' time is not parallel.
        assert_ne!(judge_live(&e(4.0), &par, None, Some(doubt)).verdict, Verdict::Parallel);
        // Calls that never overlapped stay serialized whatever the servers allow.
        let seq = agents(&[("a", 0.0, 1.0), ("b", 1.0, 2.0)]);
        assert_eq!(judge_live(&e(2.0), &seq, None, Some(none)).verdict, Verdict::Serialized);
    }

    #[test]
    fn a_perfect_run_of_unequal_agents_saves_everything_it_could() {
        use crate::measure::efficiency;
        let solo = [("a".to_string(), 0.39), ("b".to_string(), 0.64)].into_iter().collect();
        let recs = agents(&[("a", 0.0, 0.39), ("b", 0.0, 0.64)]);
        let (e, _) = efficiency(&recs, &solo);
        // One at a time 1.03 s; servers that allow the ideal 0.64 s (the longest agent).
        let ideal = Measured { reference_s: Some(0.64), sequential_s: 1.03, ideal_s: 0.64, room_established: true };
        let j = judge_live(&e, &recs, None, Some(ideal));
        assert!((j.saving - 1.0).abs() < 1e-9, "{e:?} {j:?}");
        assert_eq!(j.verdict, Verdict::Parallel, "{}", j.reason);
        assert!((e.efficiency_true - 1.03 / 1.28).abs() < 1e-9, "the true efficiency of this perfect run is 80 %");
    }
}
