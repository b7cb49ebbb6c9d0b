//! One reading of a run's figures for one estimate of the agents' local work: the same calls,
//! the same loads and the same wall time, with the time each agent spent on its own work
//! between its calls taken as `local`. The judge reads a run more than once when the gaps
//! between calls could hide waiting (`gaps.rs`): as measured (every gap the agent's own work),
//! as the least own work the gaps allow, and as a probe run measured it.

use super::allowed::{self, Exclusions};
use super::decision::{AgainstAllowed, against_allowed, against_allowed_loads_aside};
use super::figures::secs;
use super::input::Req;
use crate::trace::DeviceSharing;

/// What every reading shares: the calls, and the figures that do not depend on local work.
#[derive(Clone)]
pub(super) struct Basis<'a> {
    pub(super) reqs: &'a [Req<'a>],
    pub(super) devices: &'a [DeviceSharing],
    pub(super) exclusions: Exclusions,
    /// The program judged as a whole (no labels, no conversations): its idle time is its
    /// local work, and the calls carry none of their own.
    pub(super) program: bool,
    /// Agents that could run at once by design (`expected_agents`, fewer than the agents seen).
    pub(super) permits: Option<usize>,
    /// `expected_agents`, for the program's lower bound.
    pub(super) expected_agents: Option<usize>,
    /// The agents the requests were grouped into.
    pub(super) groups: usize,
    /// Whether the trace describes its deployment (slots, devices).
    pub(super) described: bool,
    pub(super) solo_us: u64,
    pub(super) load_us: u64,
    pub(super) idle_us: u64,
    /// An unlabelled program's idle time as its ideal takes it: all of it (the agents' own
    /// work, done together), or a share of it (the same work done one agent at a time, which
    /// perfectly concurrent agents would have done together).
    pub(super) idle_in_ideal: u64,
    pub(super) took_us: u64,
    /// To where the server wrote its last answer (`None` unless the client's reading of it was
    /// observed, and lagged).
    pub(super) served_us: Option<u64>,
}

/// How one reading links the calls and what local work comes before each.
#[derive(Debug, Clone)]
pub(super) struct Chained {
    /// The calls each call followed (`agents::Links::after`, with hand-offs where this reading
    /// takes them).
    pub(super) after: Vec<Vec<usize>>,
    /// The local work before each call.
    pub(super) local: Vec<u64>,
}

/// The figures of one reading.
pub(super) struct Reading {
    /// The local work before each call, as this reading takes it.
    pub(super) local: Vec<u64>,
    /// Where each call's chain ends.
    pub(super) chain_end: Vec<u64>,
    pub(super) local_us: u64,
    /// The longest chain (or the program's lower bound), loads aside.
    pub(super) ideal_core: u64,
    pub(super) sequential_us: u64,
    pub(super) ideal_us: u64,
    pub(super) allowed_core: u64,
    pub(super) allowed_us: u64,
    /// The time figures against what the deployment allows, as the program took them.
    pub(super) against: Option<AgainstAllowed>,
    /// The same to where the server wrote its last answer.
    pub(super) served: Option<AgainstAllowed>,
    calls: Vec<allowed::Call>,
}

impl Basis<'_> {
    /// The run's figures with `links`: what each call followed and the local work before it.
    pub(super) fn read(&self, links: Chained) -> Reading {
        let Chained { after, local } = links;
        let reqs = self.reqs;
        let chain_end = super::agents::chain_ends(reqs, &after, &local);
        let longest_chain = chain_end.iter().copied().max().unwrap_or(0);
        let (local_us, ideal_core) = if self.program {
            // Unknown agents: every request could have run alongside every other (or
            // `expected_agents` at a time); the idle time is the program's own work between calls.
            let lower = self.expected_agents.map_or(0, |k| self.solo_us / k as u64);
            let longest_conv = (0..self.groups)
                .map(|g| reqs.iter().filter(|q| q.group == g).map(|q| q.r.solo_us).sum::<u64>())
                .max()
                .unwrap_or(0);
            (self.idle_us, longest_conv.max(lower) + self.idle_in_ideal)
        } else {
            let local_us: u64 = local.iter().sum();
            let lower =
                self.expected_agents.filter(|k| *k < self.groups).map_or(0, |k| (self.solo_us + local_us) / k as u64);
            (local_us, longest_chain.max(lower))
        };
        let sequential_us = self.solo_us + local_us + self.load_us;
        let ideal_us = (ideal_core + self.load_us).min(sequential_us);
        // What the deployment allows: the same calls replayed by a perfectly concurrent client
        // on the deployment's slots and devices (unlabelled programs: with no local work, the
        // idle time added as in the ideal).
        let calls: Vec<allowed::Call> = reqs
            .iter()
            .enumerate()
            .map(|(i, q)| allowed::Call {
                work: q.r.solo_us.saturating_sub(q.r.ping_us) as f64,
                ping: q.r.ping_us.min(q.r.solo_us) as f64,
                after: after[i].clone(),
                local: if self.program { 0.0 } else { local[i] as f64 },
                runner: (q.r.instance, q.r.model.clone()),
                slots: q.r.slots,
                device: q.r.device,
                exclusive: self.exclusions.of(q.r),
                attention: q.r.attention,
            })
            .collect();
        let mut reading = Reading {
            local,
            chain_end,
            local_us,
            ideal_core,
            sequential_us,
            ideal_us,
            allowed_core: ideal_core,
            allowed_us: 0,
            against: None,
            served: None,
            calls,
        };
        if self.described {
            reading.allowed_core = self.replay(&reading, allowed::Relax::default());
        }
        reading.allowed_us = reading.allowed_core + self.load_us;
        reading.against = self.against_at(&reading, self.took_us);
        reading.served = self.served_us.and_then(|s| self.against_at(&reading, s));
        reading
    }

    /// The makespan of a perfectly concurrent client on the deployment, with `relax`'s limits
    /// lifted, loads aside.
    pub(super) fn replay(&self, r: &Reading, relax: allowed::Relax) -> u64 {
        self.replay_held(r, relax, self.permits)
    }

    /// What a client that never has more than `k` calls in flight at once (and otherwise
    /// holds none back) takes on the deployment, loads included.
    pub(super) fn limited(&self, r: &Reading, k: usize) -> u64 {
        let permits = Some(self.permits.map_or(k, |p| p.min(k)));
        self.replay_held(r, allowed::Relax::default(), permits) + self.load_us
    }

    /// [`Basis::replay`] with at most `permits` calls at once.
    fn replay_held(&self, r: &Reading, relax: allowed::Relax, permits: Option<usize>) -> u64 {
        let idle = if self.program { self.idle_in_ideal } else { 0 };
        (allowed::makespan(&r.calls, self.devices, permits, relax).round() as u64 + idle).max(r.ideal_core)
    }

    /// What lifting `relax`'s limits alone would save against what the deployment allows.
    pub(super) fn lift(&self, r: &Reading, relax: allowed::Relax) -> u64 {
        if self.described { r.allowed_core.saturating_sub(self.replay(r, relax)) } else { 0 }
    }

    /// The client's share of what the deployment allows to save (absent when it allows less
    /// than 5 % of the sequential time), by the rule the verdict uses, for a run that took
    /// `took_us`.
    fn against_at(&self, r: &Reading, took_us: u64) -> Option<AgainstAllowed> {
        let calls_sequential = r.sequential_us - self.load_us;
        against_allowed(secs(took_us), secs(r.allowed_us), secs(r.sequential_us), secs(r.ideal_us)).or_else(|| {
            against_allowed_loads_aside(
                secs(took_us),
                secs(r.allowed_us),
                secs(r.sequential_us),
                secs(calls_sequential),
                secs(r.ideal_core.min(calls_sequential)),
            )
        })
    }
}
