//! The decision core: the client verdict from the order of the calls and the time figures,
//! one rule for the simulator's judge (which reads a trace and replays the deployment's model
//! for what it allows) and for the harness's live mode (which sees only the client's side and
//! measures what the servers allow with a reference client). Each side gathers its
//! [`Evidence`] its own way and words the [`Decision`] for its readers; the decision itself is
//! made here, once.
//!
//! The order of the checks is the rule:
//! 1. **Order first.** Calls of two or more agents that were never in flight together are
//!    serialized whatever the times say: by the connection pool when they were made together
//!    and carried one at a time, by the client when each was made only after the one before
//!    had ended. One agent alone cannot be judged.
//! 2. **Something to save.** Where even an ideal server could save less than 5 % of the
//!    one-at-a-time time there is nothing to judge ([`against_allowed`] is `None`).
//! 3. **Noise.** Where the client's saving was measured over rounds and its interval lies on
//!    both sides of the parallel line, the noise, not the program, would decide: inconclusive.
//! 4. **Parallel** when the time figures, measured against what the deployment allows, say so,
//!    unless a limit on the calls in flight explains the time lost ([`Limited`]): a client
//!    that let at most k of n agents' calls out at once saves most of what the deployment
//!    allows when n is large (twelve agents through eight threads,
//!    `harness exec --preload gemma3 -- python fixtures/clients/python_executor.py 8 --labelled`:
//!    95-96 % saved in 3 runs), yet takes half as long again as it could (1.5x); that is partly
//!    serialized, the limit named.
//! 5. Short of parallel, a cause is named only when the evidence can carry it: a shortfall
//!    measured against a deployment whose allowance is unknown, or in a program whose agents
//!    could not be told apart, is inconclusive, never blamed on the client; so is one that
//!    lies wholly in reading the last answers after the server wrote them on time, by a client
//!    that otherwise kept up (a stall: its executor's, or a busy machine's, which the figures
//!    cannot tell apart).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A saving at or above this is parallel.
pub const PARALLEL_MIN_SAVING: f64 = 0.80;
/// A saving at or below this is serialized.
pub const SERIALIZED_MAX_SAVING: f64 = 0.15;

/// Where the deployment allows no saving, a client within this many times what the deployment
/// explains (its best, or one call at a time, whichever is longer), or within a fifth of what
/// an ideal server could save (the parallel band's width), lost no time of its own. A quarter:
/// the simulator's own CPU time and the machine's noise stay well inside it. Beyond, the time
/// lost is placed in the usual bands as a share of what an ideal server could save.
pub const NO_ROOM_SLACK: f64 = 1.25;

/// The verdict on a program's (or a run's) concurrency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The agents ran together and saved (nearly) all the time the deployment allows.
    Parallel,
    /// Running together helped, much less than the deployment allows: the client held some
    /// calls back.
    PartlySerialized,
    /// The client held its agents' calls back: no real gain from running them together.
    Serialized,
    /// The evidence cannot tell: nothing ran, one request, one agent, or nothing to save.
    Inconclusive,
    /// The run's calls failed (set by the harness for runs with failed calls; the judge itself
    /// says `inconclusive` when every request failed).
    Failed,
}

impl Verdict {
    /// The word.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Parallel => "parallel",
            Verdict::PartlySerialized => "partly_serialized",
            Verdict::Serialized => "serialized",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Failed => "failed",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Verdict {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "parallel" => Ok(Verdict::Parallel),
            // "degraded": the name before the verdict was the client's alone (schema 1).
            "partly_serialized" | "degraded" => Ok(Verdict::PartlySerialized),
            "serialized" => Ok(Verdict::Serialized),
            "inconclusive" => Ok(Verdict::Inconclusive),
            "failed" => Ok(Verdict::Failed),
            other => Err(format!(
                "{other:?} is not a verdict: parallel, partly_serialized, serialized, inconclusive, failed"
            )),
        }
    }
}

/// What the order of the calls shows, on whichever clock saw them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Calls of two or more agents were in flight together: the times decide.
    Overlapped,
    /// Only one agent made calls (or one agent's calls followed each other, as one agent's
    /// do): nothing could have run alongside them.
    OneAgent,
    /// The agents made their calls together, but the calls were carried one at a time (over
    /// one connection, or a pool that let one through at a time).
    OneConnectionAtATime,
    /// No call was made while another agent's call was in flight.
    OneAfterAnother,
}

/// Everything the decision rests on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evidence {
    /// The order of the calls.
    pub order: Order,
    /// The time figures against what the deployment allows ([`against_allowed`]; `None` when
    /// there was nothing to save).
    pub against: Option<AgainstAllowed>,
    /// Whether what the deployment allows is known (the simulator's trace describes its
    /// deployment; live mode measured it with a reference client). Where it is not, the
    /// figures are against an ideal server, and a shortfall may be the deployment's.
    pub allowance_known: bool,
    /// Whether the judge could tell the agents apart (labels, conversations, or the number of
    /// agents given). Where it could not, it assumed every call could run alongside every
    /// other, and a shortfall may be one agent's calls following each other by design.
    pub agents_known: bool,
    /// The 80 % interval of the client's saving over the solo and reference rounds (live mode;
    /// `None` with one round or on the simulator, whose figures are modelled).
    pub interval: Option<(f64, f64)>,
    /// Whether the shortfall lies wholly in reading the last answers: measured to where the
    /// server wrote its last answer the client was parallel, and its answers otherwise reached
    /// it on time (the simulator, with the client's observations; live mode sees only the
    /// client's clock and says `false`).
    pub read_stall: bool,
    /// A limit on the calls in flight the figures can test (the simulator replays the calls
    /// with it; live mode cannot and says `None`).
    pub limited: Option<Limited>,
    /// Whether a probe run releasing one answer at a time could still show such a limit: the
    /// program's agents unknown, and no probe run yet (live mode: `false`).
    pub limit_unprobed: bool,
}

/// At most `k` of `of` agents' calls were in flight at once, and what a client holding at most
/// `k` at a time takes on the deployment (`limited`), beside what the program took and what a
/// perfectly concurrent client takes (`allowed`), all in one unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limited {
    /// The most calls in flight at once.
    pub k: usize,
    /// The agents that could have run at once.
    pub of: usize,
    /// What the program took.
    pub took: f64,
    /// What a perfectly concurrent client takes on the deployment.
    pub allowed: f64,
    /// What a client holding at most `k` calls at a time takes on it.
    pub limited: f64,
    /// Whether a probe run showed the limit itself: releasing one answer at a time, after
    /// no request had come for a while, it saw no more calls out than `k` (a launcher
    /// slow to start its agents sends them all; a limit keeps the rest back until an answer).
    pub shown: bool,
}

impl Limited {
    /// Whether the limit explains the time lost: the program took more than [`NO_ROOM_SLACK`]
    /// times what the deployment allows, the limit alone costs that much too, and it accounts
    /// for at least half the time lost. A pause of the machine that kept one agent's call
    /// from overlapping the others' shows a lower most-in-flight, but a replay held to it
    /// seldom costs a quarter more, and then not the time that pause took.
    /// One a probe run showed explains it wherever it costs ([`Self::costs`]): the program's
    /// other losses (a first call gone out ahead of the rest) do not make it any less the
    /// program's.
    pub fn explains(&self) -> bool {
        let lost = self.took - self.allowed;
        self.costs() && (self.shown || self.limited - self.allowed >= 0.5 * lost)
    }

    /// Whether the program lost time and the limit alone costs time: fewer in flight than
    /// could run, the program over [`NO_ROOM_SLACK`] times what the deployment allows, and a
    /// client held to `k` too.
    pub fn costs(&self) -> bool {
        self.k < self.of && self.took > self.allowed * NO_ROOM_SLACK && self.limited >= self.allowed * NO_ROOM_SLACK
    }
}

/// The decision, before it is put in words.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    /// One agent: nothing to judge.
    OneAgent,
    /// Made together, carried one at a time: serialized by the connection pool.
    ConnectionPool,
    /// Never in flight together: serialized in the client.
    HeldBack,
    /// Even an ideal server could save little: nothing to judge.
    LittleToSave,
    /// The saving's interval crosses the parallel line: too noisy to tell.
    TooNoisy {
        /// The interval's low end.
        lo: f64,
        /// Its high end.
        hi: f64,
    },
    /// Short of parallel against an ideal server, with what the deployment allows unknown.
    UnknownAllowance(AgainstAllowed),
    /// Short of parallel in a program whose agents could not be told apart (or parallel by the
    /// times, but with fewer in flight than requests and a limit that would explain it).
    UnknownAgents(AgainstAllowed),
    /// Short of parallel only by a stall in reading the last answers.
    ReadStall(AgainstAllowed),
    /// The times read parallel, but a limit on the calls in flight explains the time lost:
    /// partly serialized.
    Limited(AgainstAllowed, Limited),
    /// The times read parallel, and a limit on the calls in flight costs time but explains
    /// under half of what was lost, in a program whose agents are unknown: a probe run shows
    /// whether the program held its calls back (inconclusive until it does).
    LimitUnprobed(AgainstAllowed, Limited),
    /// The times decided: [`AgainstAllowed::verdict`].
    Timed(AgainstAllowed),
}

impl Decision {
    /// The client verdict.
    pub fn verdict(&self) -> Verdict {
        match self {
            Decision::ConnectionPool | Decision::HeldBack => Verdict::Serialized,
            Decision::Limited(..) => Verdict::PartlySerialized,
            Decision::Timed(a) => a.verdict,
            Decision::OneAgent
            | Decision::LittleToSave
            | Decision::TooNoisy { .. }
            | Decision::UnknownAllowance(_)
            | Decision::UnknownAgents(_)
            | Decision::LimitUnprobed(..)
            | Decision::ReadStall(_) => Verdict::Inconclusive,
        }
    }
}

/// The decision: the checks in the order the module's documentation gives.
pub fn decide(e: &Evidence) -> Decision {
    match e.order {
        Order::OneAgent => return Decision::OneAgent,
        Order::OneConnectionAtATime => return Decision::ConnectionPool,
        Order::OneAfterAnother => return Decision::HeldBack,
        Order::Overlapped => {}
    }
    let Some(a) = e.against else { return Decision::LittleToSave };
    if let (Some((lo, hi)), Some(_)) = (e.interval, a.saving) {
        if crosses_parallel_line(lo, hi) {
            return Decision::TooNoisy { lo, hi };
        }
    }
    if a.verdict == Verdict::Parallel {
        match e.limited.filter(|_| e.allowance_known) {
            Some(l) if l.explains() && e.agents_known => Decision::Limited(a, l),
            // Agents not told apart: the limit may be one agent's calls following each other.
            Some(l) if l.explains() => Decision::UnknownAgents(a),
            // A first call gone out ahead of the rest lengthens the time lost, and a limit then
            // explains under half of it; so does a launcher slow to start its agents, with no
            // limit: a probe run holding every answer tells which.
            Some(l) if e.limit_unprobed && l.costs() => Decision::LimitUnprobed(a, l),
            _ => Decision::Timed(a),
        }
    } else if !e.allowance_known {
        Decision::UnknownAllowance(a)
    } else if !e.agents_known {
        Decision::UnknownAgents(a)
    } else if e.read_stall {
        Decision::ReadStall(a)
    } else {
        Decision::Timed(a)
    }
}

/// Whether an interval of the saving lies on both sides of the parallel line: the noise, not
/// the program, would decide between parallel and not (live runs and cells are inconclusive).
pub fn crosses_parallel_line(lo: f64, hi: f64) -> bool {
    lo < PARALLEL_MIN_SAVING && hi >= PARALLEL_MIN_SAVING
}

/// Whether calls of two different agents were in flight together: intervals `(start, end,
/// agent)` on one clock, touching ones not overlapping.
pub fn agents_overlap<A: PartialEq>(mut calls: Vec<(u64, u64, A)>) -> bool {
    calls.sort_by_key(|c| c.0);
    let mut latest: Option<(u64, &A)> = None;
    for (start, end, who) in &calls {
        if let Some((e, w)) = latest {
            if *start < e && w != who {
                return true;
            }
        }
        if latest.is_none_or(|(e, _)| *end > e) {
            latest = Some((*end, who));
        }
    }
    false
}

/// The client verdict from time alone, against what the deployment allows: the one rule the
/// simulator's judge and live mode share (live mode measures `allowed` with a reference client,
/// the simulator replays its model). All four in the same unit.
///
/// `None` when even an ideal server could save less than 5 % of the sequential time (nothing
/// to judge). Otherwise the verdict, and the client's share of the saving the deployment
/// allows, `(sequential - took) / (sequential - allowed)`, when that is at least 5 % of the
/// sequential time and more than the 15 % of an ideal server's saving under which the
/// deployment verdict reads no_speedup (a saving quoted against a room that small is the
/// noise's: on real servers a few hundredths of a second either way turn 100 % into -50 %):
/// parallel at 80 % or more, serialized at 15 % or less. Where the deployment allows less
/// (`saving` is `None`), the client is parallel unless it took more than
/// [`NO_ROOM_SLACK`] times what the deployment explains (`allowed` or `sequential`, whichever is
/// longer) and lost more than a fifth of what an ideal server could save; then its loss, as a
/// share of that ideal saving, places it in the same bands. The caller checks the order
/// first ([`decide`]): calls that never overlapped are serialized whatever the times say.
pub fn against_allowed(took: f64, allowed: f64, sequential: f64, ideal: f64) -> Option<AgainstAllowed> {
    if room_to_save(allowed, sequential, ideal) && something_to_save(sequential, ideal).is_some() {
        let saving = (sequential - took) / (sequential - allowed);
        return Some(AgainstAllowed { verdict: band(saving), saving: Some(saving) });
    }
    against_allowed_without_room(took, allowed, sequential, ideal)
}

/// What an ideal server could save, `sequential - ideal`, when it is at least 5 % of the
/// one-at-a-time time (else there is nothing to judge).
fn something_to_save(sequential: f64, ideal: f64) -> Option<f64> {
    let scale = sequential - ideal;
    (scale >= 0.05 * sequential && sequential > 0.0).then_some(scale)
}

/// Whether the deployment allows a saving worth quoting a client's share of: at least 5 % of
/// the one-at-a-time time, and more than the 15 % of an ideal server's saving under which the
/// deployment verdict reads no_speedup ([`against_allowed`]).
pub fn room_to_save(allowed: f64, sequential: f64, ideal: f64) -> bool {
    let room = sequential - allowed;
    room >= 0.05 * sequential && room > SERIALIZED_MAX_SAVING * (sequential - ideal)
}

/// [`against_allowed`] where the room the deployment allows could not be told from none (live
/// mode: the reference client's and the solo rounds' noise leave it in doubt): no saving is
/// quoted, and the client is judged as wherever the deployment allows none, by the overlap
/// (the caller's [`Order`]) and the time it lost beyond what the deployment explains.
pub fn against_allowed_without_room(took: f64, allowed: f64, sequential: f64, ideal: f64) -> Option<AgainstAllowed> {
    something_to_save(sequential, ideal).map(|scale| no_room(took, allowed, sequential, scale))
}

/// The client verdict of a share of the saving.
pub(super) fn band(saving: f64) -> Verdict {
    if saving >= PARALLEL_MIN_SAVING {
        Verdict::Parallel
    } else if saving <= SERIALIZED_MAX_SAVING {
        Verdict::Serialized
    } else {
        Verdict::PartlySerialized
    }
}

/// Where the deployment allows (almost) no saving: the client lost no time of its own when it
/// took no longer than the deployment explains (or lost less than a fifth of `scale`, what an
/// ideal server could save); beyond, the time it lost is held against that scale.
fn no_room(took: f64, allowed: f64, sequential: f64, scale: f64) -> AgainstAllowed {
    let bound = allowed.max(sequential);
    let lost = took - bound;
    if took <= bound * NO_ROOM_SLACK || lost <= (1.0 - PARALLEL_MIN_SAVING) * scale {
        return AgainstAllowed { verdict: Verdict::Parallel, saving: None };
    }
    AgainstAllowed { verdict: band(1.0 - lost / scale), saving: None }
}

/// [`against_allowed`] for a run whose model loads are nearly all of its time, so that even an
/// ideal server, loads included, could save little: when the calls themselves could have
/// overlapped (`calls_sequential` against `calls_ideal`, loads left out) and the deployment
/// allows no saving (its loads come with every switch of runner), the order decides as
/// wherever the deployment allows none. `None` when the calls had nothing to overlap either.
pub(super) fn against_allowed_loads_aside(
    took: f64,
    allowed: f64,
    sequential: f64,
    calls_sequential: f64,
    calls_ideal: f64,
) -> Option<AgainstAllowed> {
    let scale = calls_sequential - calls_ideal;
    let no_saving_allowed = sequential - allowed < 0.05 * sequential;
    (scale >= 0.05 * calls_sequential && calls_sequential > 0.0 && no_saving_allowed)
        .then(|| no_room(took, allowed, sequential, scale))
}

/// What [`against_allowed`] decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgainstAllowed {
    /// The client verdict from the time figures.
    pub verdict: Verdict,
    /// The client's share of the saving the deployment allows (absent where it allows less
    /// than 5 % of the sequential time).
    pub saving: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(verdict: Verdict, saving: Option<f64>) -> Option<AgainstAllowed> {
        Some(AgainstAllowed { verdict, saving })
    }

    fn evidence(order: Order, against: Option<AgainstAllowed>) -> Evidence {
        Evidence {
            order,
            against,
            allowance_known: true,
            agents_known: true,
            interval: None,
            read_stall: false,
            limited: None,
            limit_unprobed: false,
        }
    }

    #[test]
    fn the_order_decides_before_the_times() {
        // A perfect saving cannot lift calls that never overlapped.
        let fast = timed(Verdict::Parallel, Some(1.0));
        assert_eq!(decide(&evidence(Order::OneAfterAnother, fast)), Decision::HeldBack);
        assert_eq!(decide(&evidence(Order::OneConnectionAtATime, fast)), Decision::ConnectionPool);
        assert_eq!(decide(&evidence(Order::OneAgent, fast)).verdict(), Verdict::Inconclusive);
        assert_eq!(decide(&evidence(Order::Overlapped, fast)).verdict(), Verdict::Parallel);
        assert_eq!(decide(&evidence(Order::Overlapped, None)), Decision::LittleToSave);
    }

    #[test]
    fn noise_across_the_line_is_inconclusive_whichever_side_the_median_fell() {
        for against in [timed(Verdict::Parallel, Some(0.9)), timed(Verdict::PartlySerialized, Some(0.6))] {
            let e = Evidence { interval: Some((0.7, 0.95)), ..evidence(Order::Overlapped, against) };
            assert_eq!(decide(&e), Decision::TooNoisy { lo: 0.7, hi: 0.95 });
        }
        // An interval wholly on one side leaves the times to decide.
        let e = Evidence {
            interval: Some((0.2, 0.7)),
            ..evidence(Order::Overlapped, timed(Verdict::PartlySerialized, Some(0.5)))
        };
        assert_eq!(decide(&e).verdict(), Verdict::PartlySerialized);
        // No saving to quote (the deployment allows none): no interval of it to cross.
        let e = Evidence { interval: Some((0.7, 0.95)), ..evidence(Order::Overlapped, timed(Verdict::Parallel, None)) };
        assert_eq!(decide(&e).verdict(), Verdict::Parallel);
    }

    #[test]
    fn a_shortfall_is_blamed_only_where_the_allowance_and_the_agents_are_known() {
        let short = timed(Verdict::Serialized, Some(0.1));
        let unknown_allowance = Evidence { allowance_known: false, ..evidence(Order::Overlapped, short) };
        assert!(matches!(decide(&unknown_allowance), Decision::UnknownAllowance(_)));
        let unknown_agents = Evidence { agents_known: false, ..evidence(Order::Overlapped, short) };
        assert!(matches!(decide(&unknown_agents), Decision::UnknownAgents(_)));
        assert_eq!(decide(&unknown_agents).verdict(), Verdict::Inconclusive);
        assert_eq!(decide(&evidence(Order::Overlapped, short)).verdict(), Verdict::Serialized);
        // A shortfall that is a stall in reading the last answers: inconclusive, not blamed.
        let stalled = Evidence { read_stall: true, ..evidence(Order::Overlapped, short) };
        assert!(matches!(decide(&stalled), Decision::ReadStall(_)));
        assert_eq!(decide(&stalled).verdict(), Verdict::Inconclusive);
        // Parallel stands on its own: an unknown allowance can only be more than the ideal's.
        let fast = Evidence {
            allowance_known: false,
            agents_known: false,
            ..evidence(Order::Overlapped, timed(Verdict::Parallel, Some(0.9)))
        };
        assert_eq!(decide(&fast).verdict(), Verdict::Parallel);
    }

    #[test]
    fn a_limit_on_the_calls_in_flight_that_explains_the_time_lost_is_not_parallel() {
        // Eight agents, one call of 1 s each, through six workers: 2 s where 1 s is allowed,
        // one at a time 8 s: a saving of 6 / 7, parallel by the times alone.
        let against = against_allowed(2.0, 1.0, 8.0, 1.0);
        assert_eq!(against.map(|a| a.verdict), Some(Verdict::Parallel));
        let six = Limited { k: 6, of: 8, took: 2.0, allowed: 1.0, limited: 2.0, shown: false };
        let e = Evidence { limited: Some(six), ..evidence(Order::Overlapped, against) };
        assert_eq!(decide(&e), Decision::Limited(against.unwrap(), six));
        assert_eq!(decide(&e).verdict(), Verdict::PartlySerialized);
        // Not where the limit costs little, nor explains under half of what was lost, nor
        // where the run lost little, nor with as many in flight as agents.
        for l in [
            Limited { limited: 1.2, ..six },
            Limited { took: 3.0, limited: 1.4, ..six },
            Limited { took: 1.2, ..six },
            Limited { k: 8, ..six },
        ] {
            let e = Evidence { limited: Some(l), ..evidence(Order::Overlapped, against) };
            assert_eq!(decide(&e), Decision::Timed(against.unwrap()), "{l:?}");
        }
        // Where the agents are unknown, the limit may be one agent's calls following each
        // other: inconclusive, never parallel; where what the deployment allows is unknown,
        // there is no replay to test.
        let e = Evidence { limited: Some(six), agents_known: false, ..evidence(Order::Overlapped, against) };
        assert_eq!(decide(&e), Decision::UnknownAgents(against.unwrap()));
        let e = Evidence { limited: Some(six), allowance_known: false, ..evidence(Order::Overlapped, against) };
        assert_eq!(decide(&e).verdict(), Verdict::Parallel);
        // A limit explaining under half the time lost (a first call gone out ahead of the
        // rest took the other half): parallel by the times; inconclusive where a probe run
        // could still show the limit; partly serialized where one did.
        let under_half = Limited { took: 3.0, limited: 1.8, ..six };
        let e = Evidence { limited: Some(under_half), ..evidence(Order::Overlapped, against) };
        assert_eq!(decide(&e), Decision::Timed(against.unwrap()));
        let unprobed = Evidence { limit_unprobed: true, ..e };
        assert_eq!(decide(&unprobed), Decision::LimitUnprobed(against.unwrap(), under_half));
        assert_eq!(decide(&unprobed).verdict(), Verdict::Inconclusive);
        let shown = Limited { shown: true, ..under_half };
        let e = Evidence { limited: Some(shown), ..evidence(Order::Overlapped, against) };
        assert_eq!(decide(&e), Decision::Limited(against.unwrap(), shown));
        // Shown or not, a limit that costs nothing is no finding.
        let e = Evidence { limited: Some(Limited { limited: 1.2, ..shown }), limit_unprobed: true, ..e };
        assert_eq!(decide(&e), Decision::Timed(against.unwrap()));
    }

    #[test]
    fn overlap_counts_only_different_agents_in_flight_together() {
        assert!(!agents_overlap(vec![(0, 10, "a"), (10, 20, "b")]), "touching is not overlapping");
        assert!(!agents_overlap(vec![(0, 10, "a"), (5, 20, "a")]), "one agent's own calls");
        assert!(agents_overlap(vec![(0, 10, "a"), (9, 20, "b")]));
        // A long call of one agent covers a later short one of another.
        assert!(agents_overlap(vec![(0, 100, "a"), (10, 20, "a"), (50, 60, "b")]));
        assert!(!agents_overlap::<&str>(vec![]));
    }

    #[test]
    fn bands_of_the_saving_against_what_the_deployment_allows() {
        // Sequential 10, ideal 5, allowed 5: the saving is (10 - took) / 5.
        assert_eq!(against_allowed(5.5, 5.0, 10.0, 5.0), timed(Verdict::Parallel, Some(0.9)));
        assert_eq!(against_allowed(7.5, 5.0, 10.0, 5.0), timed(Verdict::PartlySerialized, Some(0.5)));
        assert_eq!(against_allowed(9.5, 5.0, 10.0, 5.0), timed(Verdict::Serialized, Some(0.1)));
        // Nothing to save: the longest agent is nearly all the work.
        assert_eq!(against_allowed(10.0, 9.8, 10.0, 9.8), None);
        // The deployment allows nothing: within the slack, parallel, with no saving quoted;
        // far beyond it, the time lost against what an ideal server could save.
        assert_eq!(against_allowed(11.0, 10.0, 10.0, 5.0), timed(Verdict::Parallel, None));
        assert_eq!(against_allowed(15.0, 10.0, 10.0, 5.0), timed(Verdict::Serialized, None));
        // A room in doubt is judged as none: the same 9.5 s that saved 10 % of a 5 s room.
        assert_eq!(against_allowed_without_room(9.5, 5.0, 10.0, 5.0), timed(Verdict::Parallel, None));
        assert_eq!(against_allowed_without_room(15.0, 5.0, 10.0, 5.0), timed(Verdict::Serialized, None));
        assert!(room_to_save(5.0, 10.0, 5.0) && !room_to_save(9.5, 10.0, 5.0));
    }
}
