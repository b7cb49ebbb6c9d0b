//! Probe runs: the simulator decides when each answer arrives, and uses it to tell an agent's
//! own work between its calls from waiting for other agents (issue 36).
//!
//! From one run the server cannot tell "agent B worked 0.6 s between its calls" from "agent B
//! worked 0.3 s, then waited 0.3 s for agent A's tool, which held the executor". A probe run
//! is the same program run again while the simulator **isolates the gaps**: it lets the agents
//! run their local work one agent at a time. When an answer is ready while another agent is in
//! its gap (its answer released, its next request not yet arrived), the answer's last line is
//! held back until that agent's next request arrives; then the next held answer goes out.
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
//! fixed delay ([`ProbePlan::delay_us`]) first: a call that depended on the answer goes out
//! after it again, one that did not goes out before it.
//!
//! Expiry bounds every hold: no answer waits longer than the gaps in front of it took in the
//! first run (a quarter more, plus the tolerance), so a program that waits for something the
//! probe holds is slowed, never hung. Agents are known by their `X-Agent` label or, without
//! one, by their conversation (a chat turn resends the earlier turns; an agent is keyed by its
//! first turn's fingerprint), the way the judge tells them apart; requests of neither kind
//! are never held. A held answer keeps its slot while it waits, as an answer read slowly
//! does, but leaves its device's batch (its tokens are all out).
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
    /// By agent key: which of its answers (0-based, in order) to hold back [`Self::delay_us`]
    /// first, to test whether another agent's first call depended on it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub delays: BTreeMap<String, Vec<usize>>,
    /// How long those answers are held back first, µs.
    #[serde(default)]
    pub delay_us: u64,
}

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
    /// Answers of each agent that were ready so far (its answers' places in its order).
    ready: HashMap<String, usize>,
    /// The agent whose gap is open, if any.
    open: Option<Open>,
    /// Answers ready and held, oldest first.
    held: VecDeque<Held>,
    /// Numbers the open gaps, so a stale expiry is ignored.
    serial: u64,
    rt: tokio::runtime::Handle,
}

#[derive(Debug)]
struct Open {
    agent: String,
    serial: u64,
}

#[derive(Debug)]
struct Held {
    agent: Option<String>,
    release: oneshot::Sender<()>,
}

/// A request of the probe run: what it needs to have its answer released.
#[derive(Debug)]
pub(crate) struct Ticket {
    probe: Probe,
    agent: Option<String>,
}

impl Probe {
    /// Starts a probe run with `plan` (ending any probe in progress, its held answers released).
    pub(crate) fn begin(&self, plan: ProbePlan, rt: tokio::runtime::Handle) {
        self.end();
        *self.lock() = Some(State {
            plan,
            conversations: HashMap::new(),
            released: HashMap::new(),
            ready: HashMap::new(),
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
    /// parent)`): it closes its agent's gap if that gap is open. Returns its ticket while a
    /// probe runs.
    pub(crate) fn arrive(&self, label: Option<&str>, conversation: Option<(&str, Option<&str>)>) -> Option<Ticket> {
        let mut guard = self.lock();
        let s = guard.as_mut()?;
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
        if agent.is_some() && s.open.as_ref().map(|o| &o.agent) == agent.as_ref() {
            s.open = None;
            self.release_next(s);
        }
        Some(Ticket { probe: self.clone(), agent })
    }

    /// An answer's turn: when no other agent's gap is open and none is held before it, it goes
    /// out now (its gap opens) and its sender is handed back; else it is held.
    fn take_turn(
        &self,
        s: &mut State,
        agent: Option<String>,
        release: oneshot::Sender<()>,
    ) -> Option<oneshot::Sender<()>> {
        let free = match &s.open {
            None => true,
            // An agent's own answers are never held back from it.
            Some(o) => agent.as_ref() == Some(&o.agent),
        };
        if free && s.held.is_empty() {
            self.released(s, agent);
            return Some(release);
        }
        s.held.push_back(Held { agent, release });
        None
    }

    /// Releases held answers, oldest first, until one opens a gap (or none is left).
    fn release_next(&self, s: &mut State) {
        while s.open.is_none() {
            let Some(h) = s.held.pop_front() else { return };
            // A client that went away took its answer with it: the next one goes.
            if h.release.send(()).is_ok() {
                self.released(s, h.agent);
            }
        }
    }

    /// An answer went out to `agent`: its gap opens if the plan gives it another call.
    fn released(&self, s: &mut State, agent: Option<String>) {
        let Some(agent) = agent else { return };
        let k = s.released.entry(agent.clone()).or_insert(0);
        let index = *k;
        *k += 1;
        let gap = match s.plan.gaps.get(&agent) {
            Some(gaps) => match gaps.get(index) {
                Some(&g) => g,
                // Its last answer: nothing follows it to wait for.
                None => return,
            },
            None => s.plan.longest_gap_us,
        };
        s.serial += 1;
        let serial = s.serial;
        s.open = Some(Open { agent, serial });
        let expiry = Duration::from_micros(s.plan.expiry_us(gap));
        let probe = self.clone();
        s.rt.spawn(async move {
            tokio::time::sleep(expiry).await;
            probe.expire(serial);
        });
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

impl Ticket {
    /// The request's answer is ready: `None` when it may go out now, else what resolves when
    /// it may.
    pub(crate) fn ready(&self) -> Option<oneshot::Receiver<()>> {
        let mut guard = self.probe.lock();
        // The probe ended: nothing is held any more.
        let s = guard.as_mut()?;
        if let Some(agent) = &self.agent {
            let n = s.ready.entry(agent.clone()).or_insert(0);
            let index = *n;
            *n += 1;
            if s.plan.delays.get(agent).is_some_and(|d| d.contains(&index)) {
                // A hand-off under test: the answer waits the delay first, then its turn.
                let (tx, rx) = oneshot::channel();
                let (probe, agent, delay) = (self.probe.clone(), self.agent.clone(), s.plan.delay_us);
                s.rt.spawn(async move {
                    tokio::time::sleep(Duration::from_micros(delay)).await;
                    probe.offer(agent, tx);
                });
                return Some(rx);
            }
        }
        let (tx, rx) = oneshot::channel();
        // Out now (the sender is not needed), or held until its turn.
        match self.probe.take_turn(s, self.agent.clone(), tx) {
            Some(_) => None,
            None => Some(rx),
        }
    }
}

impl Probe {
    /// An answer whose delay is over: out now if no other agent's gap is open, else held.
    fn offer(&self, agent: Option<String>, release: oneshot::Sender<()>) {
        let mut guard = self.lock();
        match guard.as_mut() {
            Some(s) => {
                if let Some(now) = self.take_turn(s, agent, release) {
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
