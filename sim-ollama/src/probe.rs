//! Probe runs: the simulator decides when each answer arrives, and uses it to tell an agent's
//! own work between its calls from waiting for other agents (issue 36).
//!
//! From one run the server cannot tell "agent B worked 0.6 s between its calls" from "agent B
//! worked 0.3 s, then waited 0.3 s for agent A's tool, which held the executor". A probe run
//! is the same program run again while the simulator **isolates the gaps**: it lets the agents
//! run their local work one agent at a time. When an answer is ready while another agent is in
//! its gap (its answer released, its next request not yet arrived), the answer's last line is
//! held back until that agent's next request arrives; then the next held answer goes out. A
//! streamed answer is held whole instead, before it starts (its slot kept, its device's batch
//! not yet joined), and its agent's gap is open from its release: a client that works on each
//! chunk as it reads it (a blocking call per token inside async code) does so with no other
//! answer arriving beside it, where holding only the end would let every stream reach the
//! client's buffers at once and the chunks' work interleave across agents as in the first run.
//! Each gap is then measured with no other agent's local work beside it:
//!
//! - an agent's own work takes as long as it did in the first run, whatever the others do;
//! - a gap that was longer in the first run because the agent waited for other agents' local
//!   work (a blocked executor, a lock around the tools) is shorter in the probe: what it lost
//!   shows itself;
//! - an agent that waits for another agent's answer (a barrier, a hand-off) waits past the
//!   time its gap took in the first run: its gap **expires** after that time (plus a
//!   tolerance), the next held answer goes out, and the judge sees it moved with that answer.
//!
//! A hand-off is tested the same way: an agent's first call that went out right after another
//! agent's answer may have been handed its task by it (a short tool argument the prompt does
//! not quote) or not. The plan names such answers, and the probe holds each of them back a
//! delay of its own ([`ProbePlan::delays`]) first: a call that depended on the answer goes out
//! after it again, one that did not goes out before it, or after another answer (answers that
//! ended together are released apart and in another order, so a permit any of them frees is
//! taken by its waiter as the first of them comes, not as the answer it followed does). Each
//! such answer is also written in marked words (`tokens::marked_text`: its prose's words
//! prefixed, the same tokens): a later prompt holding some (`RequestTrace::probe_marked`) was
//! handed data of it, in whatever form the program passed it on. Only where every agent is
//! known by its `X-Agent` label: an agent known by its first turn's fingerprint, handed marked
//! words in that turn, would not be matched to itself across the runs.
//!
//! Expiry bounds every hold: no answer waits longer than the gaps in front of it took in the
//! first run (a quarter more, plus the tolerance), so a program that waits for something the
//! probe holds is slowed, never hung. Agents are known by their `X-Agent` label or, without
//! one, by their conversation (a chat turn resends the earlier turns; an agent is keyed by its
//! first turn's fingerprint), the way the judge tells them apart; requests of neither kind
//! are never held. A held answer keeps its slot while it waits, as an answer read slowly
//! does, but leaves its device's batch (its tokens are all out).
//!
//! An agent whose first call went out late in the first run, with no answer right before it,
//! started late by its own doing (a timer, data loaded first, a library's first use) or
//! waited for other agents' answers (agents run one after another). The plan names such
//! agents ([`ProbePlan::starts`]), and the probe holds **every answer** from its first request
//! until each of them has made its first call, or until the latest of their first run's
//! times has passed (a quarter more, plus the tolerance): a first call that comes while every
//! answer is held waited for none, and no other agent's local work between calls runs beside
//! its start-up (every other agent is waiting for its first answer).
//!
//! A program whose agents the judge cannot tell apart (no labels, no conversations to chain)
//! is probed **one answer at a time** ([`SerialPlan`]): every answer is held until the one out
//! before it has been followed by its agent's next request, so each request that arrives is
//! the next call of the agent whose answer is out, and the trace records which
//! (`RequestTrace::probe_after`). Requests arriving within [`SETTLE_US`] of the first one in a
//! gap are taken to follow the same answer (an agent that sends two calls at once). The judge
//! rebuilds the agents from these links and matches them to the first run by their prompts
//! (`RequestTrace::prompt_key`). No answer goes out until no request has come for
//! [`START_US`] ([`START_MAX_US`] at the most), so the agents' first calls all arrive with none
//! out. A gap expires after the
//! longest time any call of the first run still to come went out after that answer's twin
//! ended (a quarter more, plus the tolerance): the program's next call cannot have waited
//! longer for its own work; where no call of the first run is left to come after it, the
//! agent has finished and the next answer goes out at once.
//!
//! A program whose calls never overlapped, each starting longer after the one before ended
//! than a call lasts, is probed by **holding every answer** ([`HoldPlan`]): each answer's end
//! waits [`HoldPlan::hold_us`] (longer than the longest of those gaps), or until the next
//! request arrives, whichever is first. A call that waited for the answer before it still comes
//! after that answer; one that did not (the program's own fixed delay before it: a framework's
//! start-up, a lock it polls, a timer) comes while the answer is held, and the two are in
//! flight together. The judge reads which (`judge/held.rs`). Holding stops once a call has
//! come while an answer was held, or once [`HOLD_ANSWERS`] answers were held to the end of
//! their hold with none coming: either is the finding, and every further hold would only
//! About 840 lines: the probe's state and the tickets that take turns in it are one
//!
//! About 800 lines: the probe's state and the tickets that take turns in it are one
//! mechanism (every turn reads and changes the same state under one lock), and a submodule may
//! not name its parent's items (the crate's layering test).
//!
//! The probe's plan (each agent's gaps in the first run) comes from the judge
//! (`judge::probe_plan`); `SimHandle::begin_probe` and `POST /sim/probe` start one, and the
//! judge compares the two runs (`JudgeOptions::probe_since`).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long past its first-run length a gap may stay open before the probe takes it to be
/// waiting for something the probe holds: a quarter more, plus [`ProbePlan::tolerance_us`].
pub(crate) const EXPIRY_FACTOR: f64 = 1.25;

/// What a probe run needs to know of the first run: each agent's gaps, in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbePlan {
    /// By agent key ([`agent_key`]): the gap after each of its answers but the last, µs of
    /// wall time, as the first run measured them (an answer's end to the agent's next request).
    pub gaps: BTreeMap<String, Vec<u64>>,
    /// The longest gap of the first run, µs: how long an agent the plan does not know may keep
    /// its gap open.
    pub longest_gap_us: u64,
    /// Added to every gap's expiry, µs (the judge's hand-off tolerance).
    pub tolerance_us: u64,
    /// By agent key: which of its answers (0-based, in order) to hold back first, and how, to
    /// test whether another agent's first call depended on it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub delays: BTreeMap<String, BTreeMap<usize, Delay>>,
    /// By agent key: agents whose first call went out late in the first run with no answer
    /// right before it, each with how long after the run's first call it went out, µs. The
    /// probe holds every answer from its first request until each of them has made its first
    /// call, or until the latest of those times has passed (a quarter more, plus the
    /// tolerance): one that comes while every answer is held waited for none of them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub starts: BTreeMap<String, u64>,
    /// A program whose agents the judge cannot tell apart: release its answers one at a time
    /// (see the module's words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<SerialPlan>,
    /// A program whose calls never overlapped: hold every answer (see the module's words). The
    /// rest of the plan is then unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<HoldPlan>,
}

/// How the probe holds back an answer under test ([`ProbePlan::delays`]) before its turn: `us`
/// at least, and where it names a rival (another agent's answer, by agent key and place in
/// that agent's order), until `us` after the rival is out, `max_us` at the most.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Delay {
    /// Held at least this long, µs (and this long after the rival is out).
    pub us: u64,
    /// The rival: another agent's key and the answer's place in that agent's order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rival: Option<(String, usize)>,
    /// Held at most this long, µs.
    #[serde(default)]
    pub max_us: u64,
}

/// How often a held answer waiting for its rival looks whether the rival is out.
const RIVAL_POLL: Duration = Duration::from_millis(2);

/// How many answers a probe run holding every answer holds to the end of their hold, no call
/// coming, before it stops holding: each call waited for the one before, three times over.
pub(crate) const HOLD_ANSWERS: usize = 3;

/// What a probe run holding every answer needs: how long.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldPlan {
    /// How long each answer's end is held back at most, µs of wall time: it goes out sooner
    /// when another request arrives.
    pub hold_us: u64,
}

/// What a probe run that releases answers one at a time needs of the first run: its calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SerialPlan {
    /// The first run's calls, in arrival order.
    pub calls: Vec<SerialCall>,
}

/// One call of the first run, on the program's clock (µs of wall time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SerialCall {
    /// Its `RequestTrace::prompt_key`.
    pub prompt_key: String,
    /// When it went out.
    pub start_us: u64,
    /// When its answer ended.
    pub end_us: u64,
}

/// How long after the first request that follows an answer others may still be taken to
/// follow it, µs of wall time: an agent that sends two calls at once (`asyncio.gather`,
/// `Promise.all`) sends them within a few milliseconds.
pub(crate) const SETTLE_US: u64 = 20_000;

/// How long a probe run releasing one answer at a time holds its first answer after the
/// latest request, µs of wall time: the program's agents start together (`asyncio.gather`,
/// threads, `Promise.all`) but not at one instant, and a first call that arrived after another
/// agent's answer went out would be taken to follow it. Held until no request has come for
/// this long, every agent a launcher starts sends its first call with no answer out, however
/// slowly it starts them (twelve Python threads over 120 ms on a busy machine); a program
/// holding its calls back (a pool of six) sends no more until an answer comes, and the judge
/// reads that as the limit shown (`judge/recovered.rs`). 150 ms: a launcher starting a thread
/// every 40 ms, on a machine busy with the rest of the suite, once left more than 50 ms between
/// two of its calls (the window was 50 ms): the first answer went out, the later calls were
/// read as following answers (two chains for six threads) and the run as `unknown_agents`
/// where it is the launcher's own start-up (`time_scale`; the Python package's launcher tests,
/// two fresh failures in a day). Each such probe run waits 100 ms more.
pub(crate) const START_US: u64 = 150_000;

/// The longest a probe run releasing one answer at a time holds its first answer, µs of wall
/// time, however many requests keep coming (a program sending calls on a timer of its own).
pub(crate) const START_MAX_US: u64 = 2_000_000;

impl ProbePlan {
    /// How long a gap may stay open: `gap` a quarter longer, plus the tolerance.
    pub fn expiry_us(&self, gap_us: u64) -> u64 {
        (gap_us as f64 * EXPIRY_FACTOR) as u64 + self.tolerance_us
    }
}

/// The key an agent is known by across runs: `label:NAME` for an `X-Agent` label,
/// `conversation:KEY` for an unlabelled conversation (the fingerprint of its first turn).
pub(crate) fn agent_key(label: Option<&str>, first_turn: Option<&str>) -> Option<String> {
    match (label, first_turn) {
        (Some(l), _) => Some(format!("label:{l}")),
        (None, Some(k)) => Some(format!("conversation:{k}")),
        (None, None) => None,
    }
}

/// The probe of one simulator: inactive until [`Probe::begin`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Probe {
    inner: Arc<Mutex<Option<State>>>,
}

#[derive(Debug)]
struct State {
    plan: ProbePlan,
    /// Conversation fingerprints (a request's `key`) to the agent that sent them.
    conversations: HashMap<String, String>,
    /// Answers released to each agent so far.
    released: HashMap<String, usize>,
    /// When each answer was released, by agent and place in its order (answers under test
    /// wait for their rivals').
    released_at: HashMap<(String, usize), Instant>,
    /// Answers of each agent that were ready so far (its answers' places in its order).
    ready: HashMap<String, usize>,
    /// Requests of each agent that arrived so far.
    arrived: HashMap<String, usize>,
    /// Whether answers under a hand-off test are written in marked words: only where every
    /// agent of the plan is known by its label (an agent known by its first turn, handed marked
    /// words in it, would be another agent to the judge).
    marks: bool,
    /// The agent whose gap is open, if any.
    open: Option<Open>,
    /// Answers ready and held, oldest first.
    held: VecDeque<Held>,
    /// Numbers the open gaps, so a stale expiry is ignored (and, holding every answer, the
    /// held answers, so a hold's end releases its own).
    serial: u64,
    /// One answer at a time: each prompt key's calls of the first run (indices into
    /// `plan.serial.calls`), and which of them the probe run has sent so far.
    twins: HashMap<String, VecDeque<usize>>,
    sent: Vec<bool>,
    /// One answer at a time: whether the program's start is over ([`START_US`] after its
    /// latest request); with late starters ([`ProbePlan::starts`]), whether they have all come
    /// (or their time is up). Until then every answer is held.
    started: Started,
    /// Late starters that have not made their first call yet.
    starting: std::collections::BTreeSet<String>,
    /// Holding every answer: whether a call came while one was held, and how many were held
    /// to the end of their hold (see [`HOLD_ANSWERS`]).
    overtaken: bool,
    held_through: usize,
    rt: tokio::runtime::Handle,
}

/// The start of a probe run releasing one answer at a time.
#[derive(Debug, PartialEq)]
enum Started {
    NoRequestYet,
    /// Since the first request; when the latest came.
    Starting(Instant),
    Over,
}

#[derive(Debug)]
struct Open {
    /// Its agent's key; `None` for an answer released one at a time (its agent is unknown).
    agent: Option<String>,
    serial: u64,
    /// For an answer released one at a time: its request, and whether a request has followed it.
    answer: Option<(u64, bool)>,
    /// A streamed answer released before it started: the gap (µs) whose expiry starts only
    /// when its last token is out ([`Ticket::ended`]).
    pending: Option<u64>,
}

#[derive(Debug)]
struct Held {
    agent: Option<String>,
    one: Option<One>,
    /// Held before it started (a streamed answer): its gap's expiry waits for its end.
    first: bool,
    release: oneshot::Sender<()>,
    /// Holding every answer: its number (`State::serial`); 0 otherwise.
    serial: u64,
}

/// A request of a probe run releasing answers one at a time: its id and its twin in the first
/// run (`SerialPlan::calls`), if its prompt was there.
#[derive(Debug, Clone, Copy)]
struct One {
    id: u64,
    twin: Option<usize>,
}

/// A request of the probe run: what it needs to have its answer released.
#[derive(Debug)]
pub(crate) struct Ticket {
    probe: Probe,
    agent: Option<String>,
    one: Option<One>,
    /// The request whose answer was out when it arrived (one answer at a time).
    pub(crate) after: Option<u64>,
    /// Whether its answer took its turn before it started ([`Ticket::at_start`]).
    first: bool,
    /// Whether its answer is under a hand-off test ([`ProbePlan::delays`]): written in marked
    /// words (`tokens::marked_text`), so that a later prompt holding some shows the data it
    /// passed on, in whatever form.
    pub(crate) marked: bool,
}

impl Probe {
    /// Starts a probe run with `plan` (ending any probe in progress, its held answers released).
    pub(crate) fn begin(&self, plan: ProbePlan, rt: tokio::runtime::Handle) {
        self.end();
        let mut twins: HashMap<String, VecDeque<usize>> = HashMap::new();
        let calls = plan.serial.as_ref().map_or(&[][..], |p| p.calls.as_slice());
        for (i, c) in calls.iter().enumerate() {
            twins.entry(c.prompt_key.clone()).or_default().push_back(i);
        }
        let sent = vec![false; calls.len()];
        let marks = plan.gaps.keys().all(|k| k.starts_with("label:"));
        *self.lock() = Some(State {
            twins,
            sent,
            started: if plan.serial.is_some() || !plan.starts.is_empty() {
                Started::NoRequestYet
            } else {
                Started::Over
            },
            starting: plan.starts.keys().cloned().collect(),
            plan,
            overtaken: false,
            held_through: 0,
            conversations: HashMap::new(),
            released: HashMap::new(),
            released_at: HashMap::new(),
            ready: HashMap::new(),
            arrived: HashMap::new(),
            marks,
            open: None,
            held: VecDeque::new(),
            serial: 0,
            rt,
        });
    }

    /// Ends the probe run: every held answer goes out at once.
    pub(crate) fn end(&self) {
        let state = self.lock().take();
        if let Some(mut s) = state {
            for h in s.held.drain(..) {
                let _ = h.release.send(());
            }
        }
    }

    /// Whether a probe run is in progress.
    pub(crate) fn active(&self) -> bool {
        self.lock().is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<State>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request arrived (`label`: its `X-Agent`; `conversation`: its fingerprints, `(key,
    /// parent)`; `id` and `prompt_key`: its trace's): it closes its agent's gap if that gap is
    /// open. Returns its ticket while a probe runs.
    pub(crate) fn arrive(
        &self,
        label: Option<&str>,
        conversation: Option<(&str, Option<&str>)>,
        (id, prompt_key): (u64, &str),
    ) -> Option<Ticket> {
        let mut guard = self.lock();
        let s = guard.as_mut()?;
        if s.plan.hold.is_some() {
            // A request arrived: every answer held so far has been overtaken, and goes out.
            s.overtaken |= !s.held.is_empty();
            for h in s.held.drain(..) {
                let _ = h.release.send(());
            }
            return Some(Ticket {
                probe: self.clone(),
                agent: None,
                one: None,
                after: None,
                first: false,
                marked: false,
            });
        }
        if s.plan.serial.is_some() && label.is_none() {
            return Some(self.arrive_one(s, id, prompt_key));
        }
        let agent = match (label, conversation) {
            (Some(l), _) => agent_key(Some(l), None),
            (None, Some((key, parent))) => {
                let agent = parent.and_then(|p| s.conversations.get(p).cloned()).or_else(|| agent_key(None, Some(key)));
                if let Some(a) = &agent {
                    s.conversations.insert(key.to_string(), a.clone());
                }
                agent
            }
            (None, None) => None,
        };
        if !s.starting.is_empty() {
            self.arrive_late(s, agent.as_deref());
        }
        let marked = agent.as_ref().is_some_and(|a| {
            let n = s.arrived.entry(a.clone()).or_insert(0);
            *n += 1;
            s.marks && s.plan.delays.get(a).is_some_and(|d| d.contains_key(&(*n - 1)))
        });
        if agent.is_some() && s.open.as_ref().map(|o| &o.agent) == Some(&agent) {
            s.open = None;
            self.release_next(s);
        }
        Some(Ticket { probe: self.clone(), agent, one: None, after: None, first: false, marked })
    }

    /// A request of a program with late starters ([`ProbePlan::starts`]): the first starts the
    /// hold of every answer (until the latest starter's time is up), and the last starter's
    /// first call ends it.
    fn arrive_late(&self, s: &mut State, agent: Option<&str>) {
        if s.started == Started::NoRequestYet {
            let began = Instant::now();
            s.started = Started::Starting(began);
            let latest = s.plan.starts.values().copied().max().unwrap_or(0);
            let until = Duration::from_micros(s.plan.expiry_us(latest));
            let probe = self.clone();
            s.rt.spawn(async move {
                tokio::time::sleep(until).await;
                let mut guard = probe.lock();
                // This probe run's start still on (not a later run's): time is up.
                if let Some(s) = guard.as_mut().filter(|s| s.started == Started::Starting(began)) {
                    s.starting.clear();
                    s.started = Started::Over;
                    probe.release_next(s);
                }
            });
        }
        if let Some(a) = agent {
            s.starting.remove(a);
        }
        if s.starting.is_empty() && s.started != Started::Over {
            s.started = Started::Over;
            self.release_next(s);
        }
    }

    /// A request of a program probed one answer at a time: it follows the answer that is out,
    /// if one is; the first to follow it closes that gap [`SETTLE_US`] later.
    fn arrive_one(&self, s: &mut State, id: u64, prompt_key: &str) -> Ticket {
        let now = Instant::now();
        match s.started {
            Started::NoRequestYet => {
                s.started = Started::Starting(now);
                let probe = self.clone();
                s.rt.spawn(async move {
                    // Until no request has come for START_US, START_MAX_US at the most: the
                    // check and the start's end under one lock, so no request slips between.
                    let cap = now + Duration::from_micros(START_MAX_US);
                    loop {
                        let until = {
                            let mut guard = probe.lock();
                            let Some(s) = guard.as_mut() else { return };
                            let Started::Starting(last) = s.started else { return };
                            let until = (last + Duration::from_micros(START_US)).min(cap);
                            if Instant::now() >= until {
                                s.started = Started::Over;
                                probe.release_next(s);
                                return;
                            }
                            until
                        };
                        tokio::time::sleep_until(until.into()).await;
                    }
                });
            }
            Started::Starting(_) => s.started = Started::Starting(now),
            Started::Over => {}
        }
        let twin = s.twins.get_mut(prompt_key).and_then(VecDeque::pop_front);
        if let Some(t) = twin {
            s.sent[t] = true;
        }
        let mut after = None;
        if let Some(o) = s.open.as_mut() {
            if let Some((answer, followed)) = o.answer.as_mut() {
                after = Some(*answer);
                if !*followed {
                    *followed = true;
                    let (probe, serial) = (self.clone(), o.serial);
                    s.rt.spawn(async move {
                        tokio::time::sleep(Duration::from_micros(SETTLE_US)).await;
                        probe.expire(serial);
                    });
                }
            }
        }
        Ticket { probe: self.clone(), agent: None, one: Some(One { id, twin }), after, first: false, marked: false }
    }

    /// An answer's turn: when no other agent's gap is open and none is held before it, it goes
    /// out now (its gap opens) and its sender is handed back; else it is held.
    fn take_turn(
        &self,
        s: &mut State,
        (agent, one, first): (Option<String>, Option<One>, bool),
        release: oneshot::Sender<()>,
    ) -> Option<oneshot::Sender<()>> {
        let free = match &s.open {
            None => true,
            // An agent's own answers are never held back from it.
            Some(o) => agent.is_some() && agent == o.agent,
        };
        if free && s.held.is_empty() && s.started == Started::Over {
            self.released(s, agent, one, first);
            return Some(release);
        }
        s.held.push_back(Held { agent, one, first, release, serial: 0 });
        None
    }

    /// Releases held answers, oldest first, until one opens a gap (or none is left).
    fn release_next(&self, s: &mut State) {
        while s.open.is_none() && s.started == Started::Over {
            let Some(h) = s.held.pop_front() else { return };
            // A client that went away took its answer with it: the next one goes.
            if h.release.send(()).is_ok() {
                self.released(s, h.agent, h.one, h.first);
            }
        }
    }

    /// An answer went out to `agent` (or, one at a time, to an agent unknown): its gap opens
    /// if the plan gives it another call.
    /// `first`: released before it started (a streamed answer), its gap's expiry waits for its
    /// end, and its last answer too keeps the others' back until then (they would stream
    /// beside it).
    fn released(&self, s: &mut State, agent: Option<String>, one: Option<One>, first: bool) {
        if let Some(one) = one {
            return self.released_one(s, one, first);
        }
        let Some(agent) = agent else { return };
        let k = s.released.entry(agent.clone()).or_insert(0);
        let index = *k;
        *k += 1;
        s.released_at.insert((agent.clone(), index), Instant::now());
        let gap = match s.plan.gaps.get(&agent) {
            Some(gaps) => match gaps.get(index) {
                Some(&g) => g,
                // Its last answer: nothing follows it to wait for.
                None if first => 0,
                None => return,
            },
            None => s.plan.longest_gap_us,
        };
        self.open(s, Some(agent), None, gap, first);
    }

    /// Opens a gap that expires `gap_us` (a quarter more, plus the tolerance) from now, or,
    /// `pending`, from its answer's end.
    fn open(&self, s: &mut State, agent: Option<String>, answer: Option<u64>, gap_us: u64, pending: bool) {
        s.serial += 1;
        let serial = s.serial;
        s.open = Some(Open { agent, serial, answer: answer.map(|a| (a, false)), pending: pending.then_some(gap_us) });
        if !pending {
            self.arm(s, serial, gap_us);
        }
    }

    /// Expires gap `serial` `gap_us` (a quarter more, plus the tolerance) from now.
    fn arm(&self, s: &State, serial: u64, gap_us: u64) {
        let expiry = Duration::from_micros(s.plan.expiry_us(gap_us));
        let probe = self.clone();
        s.rt.spawn(async move {
            tokio::time::sleep(expiry).await;
            probe.expire(serial);
        });
    }

    /// An answer released one at a time went out: a gap opens for whatever follows it, as long
    /// as the first run leaves room for (see the module's words).
    fn released_one(&self, s: &mut State, one: One, first: bool) {
        let calls = s.plan.serial.as_ref().map_or(&[][..], |p| p.calls.as_slice());
        let tol = s.plan.tolerance_us;
        let gap = match one.twin {
            Some(t) => {
                let end = calls[t].end_us;
                let to_come = calls
                    .iter()
                    .zip(&s.sent)
                    .filter(|(c, sent)| !**sent && c.start_us + tol >= end)
                    .map(|(c, _)| c.start_us);
                match to_come.max() {
                    Some(last) => last.saturating_sub(end),
                    // Nothing of the first run is left to follow it: its agent is done.
                    None if first => 0,
                    None => return,
                }
            }
            // A prompt the first run did not send: as long as the first run took.
            None => {
                let first = calls.iter().map(|c| c.start_us).min().unwrap_or(0);
                calls.iter().map(|c| c.end_us).max().unwrap_or(0).saturating_sub(first)
            }
        };
        self.open(s, None, Some(one.id), gap, first);
    }

    /// The gap numbered `serial` stayed open past its expiry: its agent is waiting for
    /// something the probe holds, and the next answer goes out.
    fn expire(&self, serial: u64) {
        let mut guard = self.lock();
        let Some(s) = guard.as_mut() else { return };
        if s.open.as_ref().is_some_and(|o| o.serial == serial) {
            s.open = None;
            self.release_next(s);
        }
    }
}

/// A streamed answer about to start in a probe run ([`Ticket::at_start`]).
#[derive(Debug)]
pub(crate) enum AtStart {
    /// Not held here: its end is asked ([`Ticket::ready`]).
    NotHere,
    /// It streams now.
    Out,
    /// It streams when this resolves.
    Held(oneshot::Receiver<()>),
}

impl Ticket {
    /// A streamed answer is about to start (gap probes and one answer at a time): it takes its
    /// turn now, held whole until no other agent's gap is open, so that the client reads it
    /// with no other answer arriving beside it. A client that works on each chunk as it reads
    /// (a blocking call per token inside async code) does that work in the answer's own gap,
    /// not in another agent's. Holding every answer holds ends only. The caller asks only for
    /// streamed answers; an answer sent whole is held at its end ([`Self::ready`]).
    pub(crate) fn at_start(&mut self) -> AtStart {
        let mut guard = self.probe.lock();
        let Some(s) = guard.as_mut() else { return AtStart::NotHere };
        if s.plan.hold.is_some() {
            return AtStart::NotHere;
        }
        self.first = true;
        match self.turn(s) {
            None => AtStart::Out,
            Some(rx) => AtStart::Held(rx),
        }
    }

    /// The answer's last token is out: a gap opened before it started starts to expire.
    pub(crate) fn ended(&self) {
        if !self.first {
            return;
        }
        let mut guard = self.probe.lock();
        let Some(s) = guard.as_mut() else { return };
        let mine = |o: &Open| match (&self.agent, self.one) {
            (Some(a), _) => o.agent.as_ref() == Some(a),
            (None, Some(one)) => o.answer.is_some_and(|(id, _)| id == one.id),
            (None, None) => false,
        };
        if let Some(o) = s.open.as_mut().filter(|o| mine(o)) {
            if let Some(gap) = o.pending.take() {
                let serial = o.serial;
                self.probe.arm(s, serial, gap);
            }
        }
    }

    /// The request's answer is ready: `None` when it may go out now, else what resolves when
    /// it may.
    pub(crate) fn ready(&self) -> Option<oneshot::Receiver<()>> {
        if self.first {
            // Its turn was taken before it started.
            return None;
        }
        let mut guard = self.probe.lock();
        // The probe ended: nothing is held any more.
        let s = guard.as_mut()?;
        if let Some(hold) = s.plan.hold {
            if s.overtaken || s.held_through >= HOLD_ANSWERS {
                return None;
            }
            return Some(self.probe.hold(s, hold.hold_us));
        }
        self.turn(s)
    }

    /// The answer's turn: a hand-off under test waits its delay first.
    fn turn(&self, s: &mut State) -> Option<oneshot::Receiver<()>> {
        if let Some(agent) = &self.agent {
            let n = s.ready.entry(agent.clone()).or_insert(0);
            let index = *n;
            *n += 1;
            if let Some(delay) = s.plan.delays.get(agent).and_then(|d| d.get(&index)).cloned() {
                // A hand-off under test: the answer waits its delay first, then its turn.
                let (tx, rx) = oneshot::channel();
                let (probe, agent, first) = (self.probe.clone(), self.agent.clone(), self.first);
                s.rt.spawn(async move {
                    probe.wait_out(&delay).await;
                    probe.offer(agent, first, tx);
                });
                return Some(rx);
            }
        }
        let (tx, rx) = oneshot::channel();
        // Out now (the sender is not needed), or held until its turn.
        match self.probe.take_turn(s, (self.agent.clone(), self.one, self.first), tx) {
            Some(_) => None,
            None => Some(rx),
        }
    }
}

impl Drop for Ticket {
    /// A client that went away mid-stream: its gap expires all the same.
    fn drop(&mut self) {
        self.ended();
    }
}

impl Probe {
    /// Holding every answer: this one waits `hold_us`, or until a request arrives.
    fn hold(&self, s: &mut State, hold_us: u64) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        s.serial += 1;
        let serial = s.serial;
        s.held.push_back(Held { agent: None, one: None, first: false, release: tx, serial });
        let probe = self.clone();
        s.rt.spawn(async move {
            tokio::time::sleep(Duration::from_micros(hold_us)).await;
            let mut guard = probe.lock();
            if let Some(s) = guard.as_mut() {
                if let Some(i) = s.held.iter().position(|h| h.serial == serial) {
                    if let Some(h) = s.held.remove(i) {
                        // Held to the end: no call came while it was.
                        s.held_through += 1;
                        let _ = h.release.send(());
                    }
                }
            }
        });
        rx
    }

    /// Holds an answer under test its delay: `us`, and until `us` after its rival is out
    /// (`max_us` at the most).
    async fn wait_out(&self, delay: &Delay) {
        let ready = Instant::now();
        let (us, max) = (Duration::from_micros(delay.us), Duration::from_micros(delay.max_us.max(delay.us)));
        tokio::time::sleep(us).await;
        let Some(rival) = &delay.rival else { return };
        loop {
            let out = match self.lock().as_ref() {
                Some(s) => s.released_at.get(rival).copied(),
                // The probe ended: nothing is held any more.
                None => return,
            };
            let until = match out {
                Some(at) => (at + us).min(ready + max),
                None if ready.elapsed() >= max => return,
                None => {
                    tokio::time::sleep(RIVAL_POLL).await;
                    continue;
                }
            };
            tokio::time::sleep(until.saturating_duration_since(Instant::now())).await;
            return;
        }
    }

    /// An answer whose delay is over: out now if no other agent's gap is open, else held.
    fn offer(&self, agent: Option<String>, first: bool, release: oneshot::Sender<()>) {
        let mut guard = self.lock();
        match guard.as_mut() {
            Some(s) => {
                if let Some(now) = self.take_turn(s, (agent, None, first), release) {
                    let _ = now.send(());
                }
            }
            None => {
                let _ = release.send(());
            }
        }
    }
}

/// When the probe held an answer, and for how long.
#[derive(Debug)]
pub(crate) struct Hold {
    pub(crate) since: Instant,
    pub(crate) release: oneshot::Receiver<()>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan whose agent `key`'s first answer is under a hand-off test.
    fn tested(key: &str) -> ProbePlan {
        let mut plan = ProbePlan::default();
        plan.gaps.insert(key.to_string(), vec![0]);
        plan.delays.entry(key.to_string()).or_default().insert(0, Delay { us: 1, rival: None, max_us: 1 });
        plan
    }

    #[test]
    fn an_answer_under_a_hand_off_test_is_marked_only_where_every_agent_is_labelled() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let probe = Probe::default();
        // Labelled: its first answer marked, its second not.
        probe.begin(tested("label:lead"), rt.handle().clone());
        let first = probe.arrive(Some("lead"), None, (1, "k1")).expect("a ticket");
        let second = probe.arrive(Some("lead"), None, (2, "k2")).expect("a ticket");
        assert!(first.marked && !second.marked);
        // Known by its conversation: a follower handed marked words in its first turn would be
        // another agent across the runs, so nothing is marked.
        probe.begin(tested("conversation:abc"), rt.handle().clone());
        let t = probe.arrive(None, Some(("abc", None)), (3, "k3")).expect("a ticket");
        assert!(!t.marked);
        probe.end();
    }
}
