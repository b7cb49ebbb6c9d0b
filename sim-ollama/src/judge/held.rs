//! Calls that never overlapped: waiting for the answer, or the program's own delay? One run
//! cannot tell "each call waited for the answer before it" (awaited in turn, a lock, a router letting one request
//! through) from "each call came after a fixed delay of the program's own" (a framework's
//! start-up, a lock it polls, a timer) that calls this short happened to outlast: at real
//! speed the calls would be longer than the delay, and overlap. The simulator decides when
//! each answer arrives: a probe run holds every answer's end longer than the longest gap
//! ([`crate::probe::HoldPlan`]); a call that waited for the answer still comes after it, one
//! that did not comes while the answer is held. See docs/judge.md, "Calls that never
//! overlapped".

use super::client;
use super::decision::Verdict;
use super::figures::{median, secs, sweep};
use super::input::{JudgeOptions, Req};
use super::report::{AgentSource, Cause, HeldReport, HeldStatus, Report};
use crate::probe::HoldPlan;

/// A hold is longer than the longest gap by a quarter, plus the hand-off tolerance: a call on
/// the program's own timer comes well inside it.
const HOLD_FACTOR: f64 = 1.25;

/// The longest hold, µs of wall time: a program whose gaps are longer is not probed (each of
/// its answers would be held this long, the probe run growing by as much per call), and its
/// verdict keeps the hint in words.
const MAX_HOLD_US: u64 = 5_000_000;

/// The shortest hold, µs of wall time: a client's own turnaround between an answer and its
/// next call is a few milliseconds.
const MIN_HOLD_US: u64 = 50_000;

/// What the run judged shows of its calls (program clock): the median gap from one call's end
/// to the next one's start, the median call's modelled length (its solo cost), the longest
/// gap, µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Spacing {
    pub(super) gap_us: f64,
    pub(super) call_us: f64,
    pub(super) longest_gap_us: u64,
    /// Each call came a steady gap after the answer before it, however long that answer took
    /// ([`follows_answers`]): the spread of the gaps and of the starts' spacing, µs.
    pub(super) followed: Option<(f64, f64)>,
}

/// Calls of more than one agent (or of a program whose agents are unknown) that never reached
/// the server together: their spacing, for a probe run that holds every answer. Not for the
/// harness's own agents, whose work between calls is known.
pub(super) fn never_overlapped(
    reqs: &[Req<'_>],
    source: AgentSource,
    groups: usize,
    opts: &JudgeOptions,
) -> Option<Spacing> {
    if !opts.known_local.is_empty() {
        return None;
    }
    let one_agent = groups == 1 && source != AgentSource::Program && !opts.expected_agents.is_some_and(|k| k >= 2);
    let server: Vec<(u64, u64)> = reqs.iter().map(|q| (q.r.received_us, q.server_end)).collect();
    (!one_agent && sweep(&server).0 <= 1).then(|| spacing(reqs, source == AgentSource::Program)).flatten()
}

/// The spacing of calls that never overlapped on the program's clock: the median gap from one
/// agent's call to the next agent's (every call's to the next, in a program whose agents are
/// unknown), `None` where calls overlapped or that gap is a client's reply to an answer
/// ([`REPLY_US`]). A gap shorter than a call, or than the floor of a client's own work
/// between calls, is no proof that the call waited for the answer before it: a launcher
/// starting its agents 40 ms apart (threads, or a framework building each agent before it
/// starts it) with calls of 31 ms at time scale 0.05 left gaps of 9 ms and read `serialized`
/// from one run; at real speed those calls overlap. The probe run tells.
/// An agent's gap before its own next call is its own work, whatever it is: not counted.
fn spacing(reqs: &[Req<'_>], program: bool) -> Option<Spacing> {
    let mut spans: Vec<(u64, u64, usize)> = reqs.iter().map(|q| (q.start, q.end, q.group)).collect();
    spans.sort_unstable();
    if spans.len() < 2 || spans.windows(2).any(|w| w[1].0 < w[0].1) {
        return None;
    }
    let pairs: Vec<&[(u64, u64, usize)]> = spans.windows(2).filter(|w| program || w[0].2 != w[1].2).collect();
    let gaps: Vec<u64> = pairs.iter().map(|w| w[1].0 - w[0].1).collect();
    let starts: Vec<u64> = pairs.iter().map(|w| w[1].0 - w[0].0).collect();
    let gap_us = median(gaps.iter().map(|&g| g as f64).collect())?;
    // The calls' modelled length (solo cost at the run's time scale), not their measured
    // one: a machine too busy to run the simulator on time stretches the calls.
    let call_us = median(reqs.iter().map(|q| q.r.solo_us as f64).collect())?;
    (gap_us > REPLY_US as f64).then(|| Spacing {
        gap_us,
        call_us,
        longest_gap_us: gaps.iter().copied().max().unwrap_or(0),
        followed: follows_answers(&gaps, &starts),
    })
}

/// The fewest gaps [`follows_answers`] reads: with five, calls whose starts were independent of
/// the answers before them (a launcher's stagger, a timer) would need a correlation of 0.97
/// between their spacing and the calls' lengths to pass (p < 0.01 for independent ones).
const FOLLOW_MIN_GAPS: usize = 5;

/// The gaps' spread at most this share of the starts' spacing's: the next call tracked the
/// answer's end, not the previous call's start.
const FOLLOW_SPREAD: f64 = 0.25;

/// The starts' spacing must spread at least this much (µs) for the calls' lengths to have
/// varied beyond a clock's jitter: calls all of one length cannot tell.
const FOLLOW_MIN_SPREAD_US: f64 = 1_000.0;

/// Whether each call came a steady gap after the answer before it however long that answer
/// took (`gaps`: from one call's end to the next one's start; `starts`: from one call's start
/// to the next one's, the same pairs): the gaps' standard deviation at most a quarter of the
/// starts' spacing's, over five gaps or more, calls varying by a millisecond or more. That is
/// a call waiting for the answer before it (awaited in turn, an SDK's own 14 ms between an
/// answer and the next call), what a probe run holding the answers would show, at no second
/// run. A program's own delay does not track the answers: a launcher's fixed stagger keeps the
/// starts steady and the gaps as uneven as the calls; a stagger independent of the calls
/// spreads the gaps more than the starts (their variances add). `Some((gaps' spread, starts'
/// spread))`, µs, where the calls followed their answers.
fn follows_answers(gaps: &[u64], starts: &[u64]) -> Option<(f64, f64)> {
    let sd = |v: &[u64]| {
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        (v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    };
    if gaps.len() < FOLLOW_MIN_GAPS {
        return None;
    }
    let (gap_sd, start_sd) = (sd(gaps), sd(starts));
    (start_sd >= FOLLOW_MIN_SPREAD_US && gap_sd <= FOLLOW_SPREAD * start_sd).then_some((gap_sd, start_sd))
}

/// A median gap this short (µs, the program's clock) is a client sending its next call as it
/// reads the answer before: no probe. A program's own delay (a launcher's stagger, a timer)
/// ending within 5 ms of most answers would be a coincidence. Raw Python calls awaited in turn
/// leave 2 ms and are not probed; an SDK's in turn (ollama-python's AsyncClient, 14 ms) are,
/// at a program run more per such verdict (the suite 122.5 s before this rule, 137-150 s after,
/// idle; docs/judge.md).
const REPLY_US: u64 = 5_000;

/// The probe run's hold for such calls (`tolerance_us`: the judge's hand-off tolerance), or
/// `None` where the longest gap needs more than [`MAX_HOLD_US`].
pub(super) fn plan(spacing: &Spacing, tolerance_us: u64) -> Option<HoldPlan> {
    if spacing.followed.is_some() {
        return None;
    }
    let hold_us = ((spacing.longest_gap_us as f64 * HOLD_FACTOR) as u64 + tolerance_us).max(MIN_HOLD_US);
    (hold_us <= MAX_HOLD_US).then_some(HoldPlan { hold_us })
}

/// Where the calls were judged serialized in the client for never overlapping: the report's
/// `held`, and its verdict and reason with what the probe run (`probe`, its requests) showed,
/// or the hint of what one would show. `void`: why the probe run is void.
pub(super) fn settle(
    report: &mut Report,
    spacing: &Spacing,
    hold: Option<HoldPlan>,
    probe: Option<&[Req<'_>]>,
    void: Option<String>,
    time_scale: f64,
) {
    if (report.verdict, report.cause) != (Verdict::Serialized, Cause::Client) {
        return;
    }
    let h = match (hold, probe) {
        (Some(plan), Some(probe)) => read(plan, spacing, probe),
        _ => unprobed(hold, spacing, void),
    };
    report.reason = words(&h, time_scale, &client::who(report), &report.reason);
    if h.status == HeldStatus::DidNotWait {
        report.verdict = Verdict::Inconclusive;
        report.cause = Cause::TimeScale;
        report.longer_time_scale = Some(longer_scale(&h, time_scale));
    }
    report.held = Some(h);
}

/// What the probe run (its requests in arrival order on the server's clock) shows: how many
/// calls came while an earlier answer was still held or in flight.
fn read(plan: HoldPlan, spacing: &Spacing, probe: &[Req<'_>]) -> HeldReport {
    let mut by_arrival: Vec<(u64, u64)> = probe.iter().map(|q| (q.r.received_us, q.server_end)).collect();
    by_arrival.sort_unstable();
    let mut open_until = 0;
    let mut overtook = 0;
    for (i, &(received, end)) in by_arrival.iter().enumerate() {
        if i > 0 && received < open_until {
            overtook += 1;
        }
        open_until = open_until.max(end);
    }
    let held = probe.iter().filter(|q| q.r.held_us > 0).count();
    let status = if overtook > 0 { HeldStatus::DidNotWait } else { HeldStatus::Waited };
    HeldReport { overtook, held, ..report(status, Some(plan), spacing) }
}

/// The report before (or without) a probe run.
fn unprobed(plan: Option<HoldPlan>, spacing: &Spacing, void: Option<String>) -> HeldReport {
    let status = match (&void, plan) {
        _ if spacing.followed.is_some() => HeldStatus::Followed,
        (Some(_), _) => HeldStatus::Void,
        (None, Some(_)) => HeldStatus::Unprobed,
        (None, None) => HeldStatus::TooLong,
    };
    HeldReport { void, ..report(status, plan, spacing) }
}

/// A report of `status` with the run judged's spacing and the hold (none counted yet).
fn report(status: HeldStatus, plan: Option<HoldPlan>, spacing: &Spacing) -> HeldReport {
    HeldReport {
        status,
        hold_s: plan.map_or(0.0, |p| secs(p.hold_us)),
        gap_s: secs(spacing.gap_us as u64),
        call_s: secs(spacing.call_us as u64),
        overtook: 0,
        held: 0,
        gap_spread_s: spacing.followed.map(|(gap, _)| gap / 1e6),
        start_spread_s: spacing.followed.map(|(_, start)| start / 1e6),
        void: None,
    }
}

/// The time scale at which the calls would be four times the median gap, in words (at most 1,
/// real speed): where such a program can be judged on one run.
fn longer_time_scale(h: &HeldReport, time_scale: f64) -> String {
    let t = longer_scale(h, time_scale);
    if t >= 1.0 { "1, real speed".to_string() } else { format!("{t:.2}") }
}

/// The time scale at which calls would outlast the gaps between them four times, and the
/// spacing of their starts (gap and call) twice (1 at most): a launcher's agents 40 ms apart
/// with calls of 31 ms leave gaps of 9 ms, which calls of 36 ms outlast four times and still
/// never reach the next start.
fn longer_scale(h: &HeldReport, time_scale: f64) -> f64 {
    let outlast = (4.0 * h.gap_s).max(2.0 * (h.gap_s + h.call_s));
    (time_scale * outlast / h.call_s.max(1e-6)).min(1.0)
}

/// The client verdict's reason with what the hold shows: `base`, the reason for calls that
/// never overlapped, followed by the hint or the probe's finding; for calls that did not wait,
/// a reason of its own (`who`: the program, or its agents).
fn words(h: &HeldReport, time_scale: f64, who: &str, base: &str) -> String {
    let spacing = format!(
        "each call started {:.0} ms after the previous one ended (median; calls of {:.0} ms)",
        h.gap_s * 1e3,
        h.call_s * 1e3
    );
    let own = "if that was the program's own delay and not waiting for an answer, calls of real length would have overlapped it";
    match h.status {
        HeldStatus::Unprobed => {
            format!("{base}; {spacing}: {own}: a probe run holding each answer {:.0} ms tells", h.hold_s * 1e3)
        }
        HeldStatus::TooLong => {
            format!("{base}; {spacing}: {own}: a longer time scale tells (about {})", longer_time_scale(h, time_scale))
        }
        HeldStatus::Void => format!(
            "{base}; {spacing}: {own}; the probe run that would tell was void ({})",
            h.void.as_deref().unwrap_or("no reason given")
        ),
        HeldStatus::Followed => {
            format!(
                "{base}; {spacing}, however long the answer before it took: its start moved with that answer's end (the gaps spread {:.1} ms, the starts {:.1} ms): each call waited for the one before",
                h.gap_spread_s.unwrap_or_default() * 1e3,
                h.start_spread_s.unwrap_or_default() * 1e3
            )
        }
        HeldStatus::Waited => format!(
            "{base}; in a probe run {} held back {:.0} ms longer and no call came while one was held: each call waited for the one before",
            if h.held == 1 { "an answer was".to_string() } else { format!("{} answers were each", h.held) },
            h.hold_s * 1e3
        ),
        HeldStatus::DidNotWait => format!(
            "the calls of {who} were never in flight together at this time scale, but they did not wait for each other's answers: in a probe run holding each answer back up to {:.0} ms, {} while an earlier answer was still held; {spacing}: the program's own delay before its calls (a framework's start-up, a lock it polls, a timer) outlasts calls this short, and calls of real length would overlap it: judge it at a longer time scale (about {}), where its calls outlast that delay",
            h.hold_s * 1e3,
            if h.overtook == 1 { "a call came".to_string() } else { format!("{} calls came", h.overtook) },
            longer_time_scale(h, time_scale)
        ),
    }
}
