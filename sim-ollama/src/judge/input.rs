//! What the judge reads besides the trace: its options and the client's view of each call;
//! one request as the judge sees it, and which of a trace's requests it reads.

use super::figures::median;
use crate::trace::{Outcome, RequestTrace, TraceSnapshot};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// What the client saw of one request (optional: the harness knows it, `harness exec` does
/// not). Times in microseconds since the simulator started, like the trace's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientCall {
    /// The request's trace id.
    pub request: u64,
    /// When the client made the call.
    pub sent_us: u64,
    /// When the client had read the last byte of the answer.
    pub end_us: u64,
}

/// What to judge and what is known besides the trace.
#[derive(Debug, Clone, Default)]
pub struct JudgeOptions {
    pub(super) expected_agents: Option<usize>,
    pub(super) handoff_tolerance: Option<Duration>,
    pub(super) client_calls: Vec<ClientCall>,
    pub(super) since: Option<u64>,
    pub(super) probe_since: Option<u64>,
    pub(super) probe_void: Option<String>,
    pub(super) known_local: std::collections::BTreeMap<u64, u64>,
    pub(super) confirmation: Option<Confirmation>,
    /// The runs' windows where they are not `since`, `probe_since` and the end in order (the
    /// pairs of a confirmation).
    pub(super) windows: Option<Windows>,
    /// How long the client's threads were runnable but waiting for a CPU during the run, µs.
    pub(super) client_cpu_wait_us: Option<u64>,
    /// How long the client's threads ran on a CPU during the run, µs.
    pub(super) client_cpu_time_us: Option<u64>,
    /// Set by the judge where a probe run releasing one answer at a time had no more calls
    /// out before its first answer than the run judged had in flight at its most
    /// ([`super::decision::Limited::shown`]).
    pub(super) limit_shown: bool,
    /// Set by the judge where a probe run releasing one answer at a time had every agent's
    /// first call out before any answer: none of them waited for another's call.
    pub(super) starts_free: bool,
}

/// Which run of a program a confirmation repeats (docs/judge.md, "A confirmation run").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfirmRun {
    /// The run judged: the program runs again with no answer held, and is compared with the
    /// probe run (waits the probe found where the run judged was slower: a pause there
    /// would not recur).
    Plain,
    /// The probe run: the program runs again as a probe run, and the run judged is compared
    /// with it (waits where a gap of the probe run outlasted its first-run length: a pause
    /// there would not recur).
    Probe,
}

impl ConfirmRun {
    /// The name used in JSON and in `POST /sim/confirm`'s answer.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfirmRun::Plain => "plain",
            ConfirmRun::Probe => "probe",
        }
    }
}

/// A confirmation run of a program judged with a probe run: which run it repeats, where its
/// requests begin in the trace ([`SimHandle::begin_confirmation`](crate::SimHandle::begin_confirmation)
/// returns one), and why it cannot be compared, if it cannot (it failed, or was stopped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmation {
    /// The run it repeats.
    pub run: ConfirmRun,
    /// The trace id of its first request.
    pub since: u64,
    /// Why it is void, if it is.
    pub void: Option<String>,
}

/// Where each run of a pair lies in the trace: `[from, until)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Windows {
    pub(super) first: (Option<u64>, Option<u64>),
    pub(super) probe: Option<(u64, Option<u64>)>,
}

impl JudgeOptions {
    /// Judge everything in the trace, agents from labels or conversations.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many agents the program runs that should be able to run at once. Without labels
    /// the judge cannot count agents, so unlabelled programs whose agents make several
    /// unrelated calls need it; with labels, a smaller number than the labelled agents says the
    /// program limits itself to that many at once by design.
    pub fn expected_agents(mut self, n: usize) -> Self {
        self.expected_agents = Some(n.max(1));
        self
    }

    /// Hand-offs: a call that arrives within this much wall time after another agent's request
    /// ended, where such requests ran back to back since the agent's previous answer, waited
    /// for them. Default: 20 ms, or a quarter of the median solo cost of a request when that is
    /// shorter, and at least 1 ms.
    pub fn handoff_tolerance(mut self, d: Duration) -> Self {
        self.handoff_tolerance = Some(d);
        self
    }

    /// Client-side observations of the requests (when the call was made, when the client had
    /// read the whole answer): the judge then measures the program's time and local work on
    /// the client's clock and can name a blocked executor or a connection pool.
    pub fn client_calls(mut self, calls: Vec<ClientCall>) -> Self {
        self.client_calls = calls;
        self
    }

    /// How long the client's threads, together, were runnable but waiting for a CPU during the
    /// run (Linux's `/proc/PID/task/*/schedstat`, its second field, before and after): where
    /// answers reached the agents late and that wait is as long as the time lost, a machine too
    /// busy to run the client explains the lateness as well as an executor the program blocked,
    /// and the verdict is inconclusive, to run again
    /// ([`crate::judge::Report::needs_rerun`]). A blocked executor's threads sleep or run; a
    /// starved one's wait for a CPU.
    pub fn client_cpu_wait(mut self, waited: Duration) -> Self {
        self.client_cpu_wait_us = Some(waited.as_micros() as u64);
        self
    }

    /// How long the client's threads, together, ran on a CPU during the run (the first field of
    /// the same `schedstat`): agents that wait for each other's processing on one executor (an
    /// event loop, a lock such as Python's) wait at most that long times the other agents. A
    /// probe run that finds the agents' gaps shorter with their local work done one at a time,
    /// each by less than the judge's floor for a client library's processing but in most gaps
    /// and by more in all than that processing could explain, counts those waits (a permit
    /// around a short tool); unknown, such waits go uncounted.
    pub fn client_cpu_time(mut self, ran: Duration) -> Self {
        self.client_cpu_time_us = Some(ran.as_micros() as u64);
        self
    }

    /// [`JudgeOptions::client_cpu_wait`] and [`JudgeOptions::client_cpu_time`] from samples of the
    /// client's process tree ([`crate::advanced::cpu::watch`]) over the run judged: its first
    /// request's arrival to its last answer (the requests from [`JudgeOptions::since`] on and
    /// before the probe run's), on the clock of the simulator whose trace it is (`origin`).
    pub fn client_cpu_samples(
        mut self,
        samples: &crate::cpu::Samples,
        trace: &TraceSnapshot,
        origin: std::time::Instant,
    ) -> Self {
        let run = trace
            .requests
            .iter()
            .filter(|r| self.since.is_none_or(|s| r.id >= s) && self.probe_since.is_none_or(|p| r.id < p));
        let (first, last) = (run.clone().map(|r| r.received_us).min(), run.filter_map(|r| r.end_us).max());
        let (Some(first), Some(last)) = (first, last) else { return self };
        let at = |us: u64| origin + Duration::from_micros(us);
        if let Some(waited) = samples.between(at(first), at(last)) {
            self = self.client_cpu_wait(waited);
        }
        if let Some(ran) = samples.ran_between(at(first), at(last)) {
            self = self.client_cpu_time(ran);
        }
        self
    }

    /// The client's CPU figures where its time on a CPU is known: `(ran, waited for one)`, µs
    /// (an unknown wait as none).
    pub(super) fn client_cpu_us(&self) -> Option<(u64, u64)> {
        self.client_cpu_time_us.map(|ran| (ran, self.client_cpu_wait_us.unwrap_or(0)))
    }

    /// Only requests with this trace id or a later one (a mark taken before the program ran).
    pub fn since(mut self, first_id: u64) -> Self {
        self.since = Some(first_id);
        self
    }

    /// The requests from this trace id on are a probe run of the same program
    /// (`SimHandle::begin_probe` returns the id): the run judged ends before it, and the judge
    /// measures the gaps between each agent's calls from the probe (see docs/judge.md, "The
    /// gaps between calls").
    pub fn probe_since(mut self, first_id: u64) -> Self {
        self.probe_since = Some(first_id);
        self
    }

    /// The probe run from [`JudgeOptions::probe_since`] on cannot be compared with the run
    /// judged, for this reason (it failed, or was stopped): the report says the probe is void
    /// and why, and judges as if there were none.
    pub fn probe_void(mut self, why: impl Into<String>) -> Self {
        self.probe_void = Some(why.into());
        self
    }

    /// The local work the program did before each of these calls, by the call's trace id
    /// (a harness that ran the agents knows it: its scenarios say how long each agent works
    /// between its calls). The judge takes it as the agent's own work and the rest of each
    /// gap as waiting, with no probe run needed.
    pub fn known_local_work(mut self, work: impl IntoIterator<Item = (u64, Duration)>) -> Self {
        self.known_local = work.into_iter().map(|(id, d)| (id, d.as_micros() as u64)).collect();
        self
    }

    /// A confirmation run after the probe run (from [`JudgeOptions::probe_since`]): the judge
    /// compares the run judged with the probe run, and again with the confirmation repeating
    /// one of them, and keeps the verdict of the two that is closer to parallel, since waits
    /// that do not recur were not the program's (docs/judge.md, "A confirmation run").
    pub fn confirmation(mut self, c: Confirmation) -> Self {
        self.confirmation = Some(c);
        self
    }

    /// The run judged: `[since, until)`.
    pub(super) fn first_window(&self) -> (Option<u64>, Option<u64>) {
        self.windows.map_or((self.since, self.probe_since), |w| w.first)
    }

    /// The probe run, if there is one: `[since, until)`.
    pub(super) fn probe_window(&self) -> Option<(u64, Option<u64>)> {
        self.windows.map_or(self.probe_since.map(|s| (s, None)), |w| w.probe)
    }

    /// The first trace id judged, if one was given.
    pub fn since_id(&self) -> Option<u64> {
        self.since
    }

    /// The first trace id of the probe run, if one was given.
    pub fn probe_start(&self) -> Option<u64> {
        self.probe_since
    }
}

/// One request as the judge sees it.
#[derive(Debug, Clone)]
pub(super) struct Req<'a> {
    pub(super) r: &'a RequestTrace,
    /// Start and end on the program's clock (the client's when known).
    pub(super) start: u64,
    pub(super) end: u64,
    /// Server-side end.
    pub(super) server_end: u64,
    pub(super) group: usize,
}

/// Endpoints whose requests are model work.
const MODEL_ENDPOINTS: &[&str] = &[
    "/api/generate",
    "/api/chat",
    "/api/embed",
    "/api/embeddings",
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/responses",
    "/v1/messages",
];

/// The model requests of the window `[since, until)` of a trace.
pub(super) fn window(trace: &TraceSnapshot, since: Option<u64>, until: Option<u64>) -> Vec<&RequestTrace> {
    trace
        .requests
        .iter()
        .filter(|r| since.is_none_or(|s| r.id >= s) && until.is_none_or(|u| r.id < u))
        .filter(|r| MODEL_ENDPOINTS.contains(&r.endpoint.as_str()))
        .collect()
}

/// Work is what got a slot; loads and unloads (no slot, no tokens) are not requests of the
/// program's agents, and requests refused before they ran are failures with no work.
pub(super) fn that_ran<'a>(model_reqs: &[&'a RequestTrace]) -> Vec<&'a RequestTrace> {
    model_reqs.iter().copied().filter(|r| r.outcome != Outcome::Active && r.slot_us.is_some()).collect()
}

/// The most of `ran` in flight at once on the server's clock. A client held to `k` calls at a
/// time never has more in flight in any run, so a probe run of the same program that held more
/// at once shows no limit at a run's `k`: a call that went out late there (a thread the machine
/// started late) was not waiting for a slot.
pub(super) fn most_in_flight(ran: &[&RequestTrace]) -> usize {
    let iv: Vec<(u64, u64)> = ran.iter().map(|r| (r.received_us, r.end_us.unwrap_or(r.received_us))).collect();
    super::figures::sweep(&iv).0
}

/// The requests that ran as the judge sees them, in start order, on the program's clock (the
/// client's where observed, else the server's).
pub(super) fn as_seen<'a>(ran: &[&'a RequestTrace], client: &BTreeMap<u64, ClientCall>) -> Vec<Req<'a>> {
    let mut reqs: Vec<Req<'a>> = ran
        .iter()
        .map(|r| {
            let server_end = r.end_us.unwrap_or(r.received_us);
            let (start, end) = match client.get(&r.id) {
                Some(c) => (c.sent_us.min(r.received_us), c.end_us.max(server_end)),
                None => (r.received_us, server_end),
            };
            Req { r, start, end, server_end, group: 0 }
        })
        .collect();
    reqs.sort_by_key(|q| (q.start, q.r.id));
    reqs
}

/// Hand-off tolerance: scaled to the requests' size, bounded.
pub(super) fn tolerance(reqs: &[Req<'_>], opts: &JudgeOptions) -> u64 {
    opts.handoff_tolerance.map_or_else(
        || {
            let med = median(reqs.iter().map(|q| q.r.solo_us as f64).collect()).unwrap_or(0.0);
            (med / 4.0).clamp(1_000.0, 20_000.0) as u64
        },
        |d| d.as_micros() as u64,
    )
}

/// The note on requests that failed or were cancelled (`failed` of them: those that ran and
/// did not finish, and those refused before a slot), naming the first one's error.
pub(super) fn failed_note(ran: &[&RequestTrace], refused: &[&RequestTrace], failed: usize) -> Option<String> {
    if failed == 0 {
        return None;
    }
    let first = refused.iter().chain(ran.iter()).find(|r| r.outcome != Outcome::Done);
    let what = first.map_or(String::new(), |r| match (&r.error, r.outcome) {
        (Some(e), _) => format!(" (first: HTTP {}: {e})", r.status),
        (None, Outcome::Cancelled) => " (first: the client went away before the end)".to_string(),
        _ => String::new(),
    });
    Some(format!(
        "{} of {} failed or were cancelled{what}; failed requests count with the work they did",
        super::figures::plural(failed, "request", "requests"),
        ran.len() + refused.len()
    ))
}

/// `opts`, with [`JudgeOptions::starts_free`] set where `free` says a probe run had every
/// agent's first call out before any answer.
pub(super) fn starting_free(opts: &JudgeOptions, free: bool) -> std::borrow::Cow<'_, JudgeOptions> {
    if free && !opts.starts_free {
        std::borrow::Cow::Owned(JudgeOptions { starts_free: true, ..opts.clone() })
    } else {
        std::borrow::Cow::Borrowed(opts)
    }
}
