//! The judge's report: the client verdict and its cause, the deployment verdict and its
//! limit, the evidence (agents, concurrency, time figures); the report in words is `judge/text.rs`.

use super::decision::{PARALLEL_MIN_SAVING, SERIALIZED_MAX_SAVING, Verdict};
use super::input::ConfirmRun;
use serde::{Deserialize, Serialize};
use std::fmt;

mod held;
pub use held::{HeldReport, HeldStatus};

/// Version of the [`Report`]'s JSON schema (`harness exec --json`).
pub const REPORT_SCHEMA_VERSION: u32 = 3;

/// What the client verdict blames: always something in the client (what the deployment
/// allows is the [`DeploymentReport`]'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Nothing: the run was parallel.
    None,
    /// Nothing to judge (no requests, one request, one agent, nothing to save).
    NothingToJudge,
    /// Requests were held back before they reached the server (awaited in turn, a lock, a
    /// semaphore, a blocking call on the event loop).
    Client,
    /// The agents' calls were made together but reached the server one at a time (known only
    /// from client-side observations).
    ConnectionPool,
    /// The server streamed on time but the client read late: its executor was blocked (known
    /// only from client-side observations).
    ClientLag,
    /// The judge could not tell the agents apart (no labels, no conversations to chain, no
    /// number of agents given), so it cannot say whether the time lost was the client's.
    UnknownAgents,
    /// The trace does not describe its deployment (traces older than schema 4), so time lost
    /// cannot be told from what the deployment allows.
    UnknownDeployment,
    /// The agents waited for each other outside their calls: between an answer and its next
    /// call, an agent waited for other agents' local work (a blocking call or CPU work holding
    /// the executor, a lock or a permit around the tools) or for their answers with no data
    /// passed (a barrier). Found by a probe run.
    BetweenCalls,
    /// The gaps between the agents' calls could be their own work or waiting for each other,
    /// and the verdict depends on which: inconclusive until a probe run settles it.
    UnprobedGaps,
    /// The run lost no more time than the simulator itself was late sending answers
    /// ([`crate::trace::RequestTrace::late_us`]: a machine too busy to run it on time):
    /// inconclusive, the measurement the machine's; run again (the pytest fixture does, once).
    SimulatorLate,
    /// The calls never overlapped, but a probe run holding every answer showed they did not
    /// wait for each other's answers: the program's own delay before its calls outlasts calls
    /// this short (at real speed they would overlap it): inconclusive at this time scale.
    TimeScale,
}

impl Cause {
    /// The name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::None => "none",
            Cause::NothingToJudge => "nothing_to_judge",
            Cause::Client => "client",
            Cause::ConnectionPool => "connection_pool",
            Cause::ClientLag => "client_lag",
            Cause::UnknownAgents => "unknown_agents",
            Cause::UnknownDeployment => "unknown_deployment",
            Cause::BetweenCalls => "between_calls",
            Cause::UnprobedGaps => "unprobed_gaps",
            Cause::SimulatorLate => "simulator_late",
            Cause::TimeScale => "time_scale",
        }
    }
}

/// How much of the saving an ideal server would give this workload the deployment allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Allows {
    /// At least 80 % of what an infinitely parallel server would save.
    Full,
    /// Some speedup, much less than an ideal server's.
    Partial,
    /// No real speedup (at most 15 % of the ideal saving, or slower than one call at a time).
    NoSpeedup,
    /// Cannot tell: nothing to judge, nothing to save, or a trace that does not describe its
    /// deployment (live servers, traces older than schema 4).
    Unknown,
}

impl Allows {
    /// The name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Allows::Full => "full",
            Allows::Partial => "partial",
            Allows::NoSpeedup => "no_speedup",
            Allows::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Allows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What limits the speedup a deployment allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// Nothing: it allows (nearly) everything an ideal server would.
    None,
    /// Too few parallel slots (`OLLAMA_NUM_PARALLEL`, or one slot forced by the model).
    Slots,
    /// The server's queue refused requests (`OLLAMA_MAX_QUEUE`: HTTP 503).
    Queue,
    /// Server processes time-slicing one device.
    SharedDevice,
    /// Streams batched in one runner slow each other down.
    Batch,
    /// Model loads, reloads and evictions during the run.
    Loads,
    /// The machine's CPU, shared by the servers (live mode).
    Cpu,
    /// Cannot tell.
    Unknown,
}

impl Limit {
    /// The name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::None => "none",
            Limit::Slots => "slots",
            Limit::Queue => "queue",
            Limit::SharedDevice => "shared_device",
            Limit::Batch => "batch",
            Limit::Loads => "loads",
            Limit::Cpu => "cpu",
            Limit::Unknown => "unknown",
        }
    }
}

/// What one limit of the deployment cost the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitCost {
    /// The limit.
    pub limit: Limit,
    /// Seconds of wall time it adds to what a perfectly concurrent client takes (loads: their
    /// time; the others: what lifting that limit alone would save).
    pub seconds: f64,
}

/// The deployment verdict: how much speedup the deployment allows this workload, and what
/// limits it. Found by replaying the same calls, issued by a perfectly concurrent client, on
/// the deployment's model (slots, devices, loads); see `judge/allowed.rs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentReport {
    /// How much of an ideal server's saving it allows.
    pub verdict: Allows,
    /// What limits it most.
    pub limit: Limit,
    /// Why, with the fix, in a sentence.
    pub reason: String,
    /// One call at a time over what a perfectly concurrent client takes on this deployment
    /// (below 1.0: overlapping is slower than taking turns).
    pub speedup: Option<f64>,
    /// The same on an infinitely parallel server with the models loaded.
    pub ideal_speedup: Option<f64>,
    /// Share of the ideal saving the deployment allows.
    pub share: Option<f64>,
    /// Live mode: the share's 80 % interval over resamples of the solo and reference rounds
    /// (absent on the simulator, whose replay has no noise). Where it crosses a band's line
    /// the verdict is `unknown`: the noise, not the servers, would choose the band.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_interval: Option<[f64; 2]>,
    /// What each limit costs, the largest first (limits that cost nothing left out).
    pub costs: Vec<LimitCost>,
}

/// How the judge told agents apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentSource {
    /// Every request carried an `X-Agent` header.
    Labels,
    /// No labels: chat turns chained into conversations by their resent history.
    Conversations,
    /// Some requests labelled, the rest chained by conversation.
    Mixed,
    /// No labels and no conversations to chain: the program is judged as a whole, every
    /// request as if it could have run alongside every other (or `expected_agents` at once).
    Program,
    /// No labels and no conversations: a probe run releasing one answer at a time showed the
    /// chains of calls (`agent-1`, ...), matched to the run judged by their prompts.
    Probe,
}

impl AgentSource {
    pub(super) fn words(self) -> &'static str {
        match self {
            AgentSource::Labels => "X-Agent labels",
            AgentSource::Conversations => "conversations, no labels",
            AgentSource::Mixed => "X-Agent labels and conversations",
            AgentSource::Program => "no labels: the program as a whole",
            AgentSource::Probe => "no labels: told apart by a probe run",
        }
    }
}

/// What one agent did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentActivity {
    /// The `X-Agent` label, or `conversation-N` / `request-N` when unlabelled.
    pub agent: String,
    /// Requests it made that ran.
    pub requests: usize,
    /// Their trace ids, in arrival order.
    pub ids: Vec<u64>,
    /// Tokens it was sent.
    pub tokens: u64,
    /// Sum of its requests' modelled solo costs, seconds (at the run's time scale).
    pub solo_s: f64,
    /// Its local work between calls, measured, seconds.
    pub local_s: f64,
    /// Its chain: solo costs and local work along its longest sequence of calls, seconds.
    pub chain_s: f64,
    /// Calls that arrived right after another agent's request ended (it waited for it).
    pub handoffs: usize,
    /// From its first request to its last answer, seconds since the first request of the run.
    pub span_s: (f64, f64),
}

/// How requests overlapped on the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Concurrency {
    /// Most requests the server held at once (arrived, not yet ended).
    pub max_in_flight: usize,
    /// Most requests decoding at once (between first token and end).
    pub max_decoding: usize,
    /// How many could have been in flight: the agents (or `expected_agents`); absent when the
    /// judge cannot count them.
    pub possible: Option<usize>,
    /// Share of the busy time with two or more requests in flight.
    pub overlap: f64,
    /// Time with no request in flight between the first arrival and the last end, seconds.
    pub idle_s: f64,
    /// Longest such gap, seconds.
    pub longest_gap_s: f64,
    /// Time requests spent waiting for a parallel slot, summed over requests, seconds.
    pub slot_wait_s: f64,
    /// Time requests spent waiting for loads, reloads, evictions or the scheduler, seconds.
    pub load_wait_s: f64,
    /// Mean decode speed as a fraction of solo speed, token-weighted.
    pub mean_speed: f64,
    /// Devices on which streams of different instances decoded together.
    pub shared_devices: Vec<usize>,
    /// Distinct client connections the requests came over.
    pub connections: usize,
    /// Requests in flight over time: (seconds since the first arrival, count) at each change.
    pub profile: Vec<(f64, usize)>,
}

/// The time figures. Solo costs and loads are modelled (at the run's time scale: the wall time
/// they would take); `took_s`, local work and client lag are measured wall time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeFigures {
    /// The run's time scale: modelled seconds = these seconds / `time_scale`.
    pub time_scale: f64,
    /// Measured: from the first request to the last answer (on the client's clock when client
    /// observations were given).
    pub took_s: f64,
    /// Modelled: every request's solo cost, summed.
    pub solo_s: f64,
    /// Measured: the agents' local work between calls, summed.
    pub local_s: f64,
    /// Modelled: model loads during the run (their union in time).
    pub load_s: f64,
    /// One request after another: `solo_s + local_s + load_s`.
    pub sequential_s: f64,
    /// The longest agent's chain (or the program's lower bound) plus loads: an infinitely
    /// parallel server.
    pub ideal_s: f64,
    /// What a perfectly concurrent client takes on this deployment (its slots and devices
    /// replayed, plus loads); can exceed `sequential_s` where overlapping is slower than
    /// taking turns. Equal to `ideal_s` when the trace does not describe its deployment.
    pub allowed_s: f64,
    /// The client's share of the saving the deployment allows:
    /// (sequential - took) / (sequential - allowed); absent when the deployment allows less
    /// than 5 % of the sequential time to be saved (the overlap evidence then decides).
    pub saving: Option<f64>,
    /// Median delay between the server's last byte and the client's, seconds (only with
    /// client observations).
    pub client_lag_s: Option<f64>,
}

/// Whether the gaps between an agent's calls were its own work or waiting (issue 36).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GapsStatus {
    /// Read as the agents' own work or as local work done one agent at a time, the gaps give
    /// the same verdict: nothing to settle.
    Settled,
    /// The two readings give different verdicts and no probe run was made: the verdict is
    /// inconclusive (`Cause::UnprobedGaps`).
    Unprobed,
    /// A probe run measured the gaps: the figures use what it found.
    Probed,
    /// The program's local work before each call was given (`JudgeOptions::known_local_work`:
    /// the harness's scenarios): the figures use it, the rest of each gap was waiting.
    Known,
    /// A probe run was made but cannot be compared with the first (other calls, other agents,
    /// a failure): the verdict is as if unprobed, and `reason` says why.
    Void,
}

/// What the waiting in one gap was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// Other agents' local work: the gap was shorter with the agents' local work done one at a
    /// time (a blocking call or CPU work holding the executor, a lock or a permit around the
    /// tools).
    LocalWork,
    /// Other agents, all together: the gap outlasted its first-run length while the probe held
    /// other agents' answers, and the call went out with another agent's (a barrier: a gather
    /// per round).
    Barrier,
    /// Another agent's answer: the gap outlasted its first-run length while the probe held
    /// other agents' answers, and the call carries no answer of theirs (a hand-off of data the
    /// judge does not recognise, or a wait with no data behind it).
    Answer,
}

/// One gap in which an agent waited for other agents, found by a probe run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GapWait {
    /// The agent.
    pub agent: String,
    /// The trace id of the call the gap came before (in the run judged).
    pub request: u64,
    /// The gap as the run judged measured it, s.
    pub gap_s: f64,
    /// The agent's own work in it, as the probe measured it, s (absent where the probe could
    /// not measure it: the agent waited for something the probe held).
    pub own_s: Option<f64>,
    /// What it waited for.
    pub kind: WaitKind,
}

/// The gaps between the agents' calls: the reading of them as local work done one agent at a
/// time beside the reading as each agent's own work (the time figures), and what a probe run
/// found. See docs/judge.md, "The gaps between calls".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GapsReport {
    /// Settled, unprobed, probed or void.
    pub status: GapsStatus,
    /// Local work were it done one agent at a time: the least own work the gaps allow, s.
    pub one_at_a_time_local_s: f64,
    /// The client verdict under that reading.
    pub one_at_a_time_verdict: Verdict,
    /// The client's share of the saving under that reading (absent where none is quoted).
    pub one_at_a_time_saving: Option<f64>,
    /// What was found or what is missing, in words.
    pub reason: String,
    /// The probe run's time, first request to last answer, s (probed runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_took_s: Option<f64>,
    /// How long the probe held answers back, summed over answers, s (probed runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_s: Option<f64>,
    /// The gaps in which an agent waited for other agents, as the probe found them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<GapWait>,
    /// The probe run's requests, matched to the agents of the run judged (probed runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probe_agents: Vec<ProbeAgent>,
    /// Agents' first calls that went out right after another agent's answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handoffs: Vec<HandOff>,
}

/// An agent's first call that went out right after another agent's answer: a hand-off (its
/// task came from that answer, the program's design) or not; a probe run tells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandOff {
    /// The agent whose first call it was.
    pub agent: String,
    /// That call's trace id.
    pub request: u64,
    /// The agent whose answer it went out after.
    pub after_agent: String,
    /// That answer's request.
    pub after_request: u64,
    /// Whether the probe run showed it depended on that answer (held back, the call still
    /// went out right after it); absent where no probe tested it.
    pub depended: Option<bool>,
}

/// One agent's requests in the probe run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeAgent {
    /// The agent, as the run judged names it.
    pub agent: String,
    /// Its requests' trace ids in the probe run, in order.
    pub ids: Vec<u64>,
}

/// A confirmation run beside the pair it repeats one run of (docs/judge.md, "A confirmation
/// run").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfirmationReport {
    /// The run it repeated.
    pub run: ConfirmRun,
    /// The verdict of the run judged with the first probe run.
    pub first: Verdict,
    /// The verdict with the confirmation run in the place of the run it repeated (absent where
    /// the confirmation is void).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub again: Option<Verdict>,
    /// Whether the agents were found waiting for each other again.
    pub waits_recurred: bool,
    /// Which pair this report's figures and verdict are (the one closer to parallel; on a tie,
    /// the first).
    pub kept: KeptPair,
    /// Why it is void, if it is (the report is then the first pair's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub void: Option<String>,
}

/// Which pair of runs a confirmed report is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeptPair {
    /// The run judged with the first probe run.
    First,
    /// The pair with the confirmation run in the place of the run it repeated.
    Again,
}

/// The judge's report: a verdict, its reason, and the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`REPORT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The client verdict: did the program overlap its agents as far as the deployment
    /// allows?
    pub verdict: Verdict,
    /// What it blames in the client.
    pub cause: Cause,
    /// Why, in a sentence.
    pub reason: String,
    /// The deployment verdict: how much speedup the deployment allows, and what limits it.
    pub deployment: DeploymentReport,
    /// What the judge assumed or could not know.
    pub notes: Vec<String>,
    /// How agents were told apart.
    pub agents_from: AgentSource,
    /// Per agent.
    pub agents: Vec<AgentActivity>,
    /// Model requests judged (those that ran).
    pub requests: usize,
    /// Of those, or refused before running: requests that failed or were cancelled.
    pub failed: usize,
    /// How they overlapped.
    pub concurrency: Concurrency,
    /// The time figures.
    pub time: TimeFigures,
    /// The gaps between the agents' calls: own work or waiting (absent for programs judged as
    /// a whole, whose agents the judge cannot tell apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gaps: Option<GapsReport>,
    /// Calls that never overlapped, each after a gap longer than a call: whether they waited
    /// for each other's answers (a probe run holding every answer tells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<HeldReport>,
    /// [`Report::needs_probe`].
    #[serde(default)]
    pub needs_probe: bool,
    /// [`Report::needs_rerun`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rerun: bool,
    /// Where the verdict is inconclusive for the time scale ([`Cause::TimeScale`]): the time
    /// scale (1 at most) at which the calls would outlast the program's own delays four times,
    /// to judge it again at (`harness exec` does, once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longer_time_scale: Option<f64>,
    /// Which run a confirmation run should repeat, where the verdict rests on waits a probe
    /// found and no confirmation ran yet ([`Report::needs_confirmation`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<ConfirmRun>,
    /// What a confirmation run found, where one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<ConfirmationReport>,
}

impl Report {
    /// Panics with the report in words unless the client verdict is `parallel` (an
    /// inconclusive run never is). Returns the report, for more checks.
    #[track_caller]
    pub fn assert_parallel(&self) -> &Self {
        self.assert_verdict(Verdict::Parallel)
    }

    /// Panics with the report in words unless the client verdict is `verdict`.
    #[track_caller]
    pub fn assert_verdict(&self, verdict: Verdict) -> &Self {
        assert!(self.verdict == verdict, "the agents were not judged {}:\n{self}", verdict.as_str().replace('_', " "));
        self
    }

    /// A summary that stays the same from run to run of the same program: verdict, cause,
    /// agents, requests and bands, never raw timings. Made for snapshot tests (insta).
    ///
    /// The saving's band is shown only where the verdict rests on it: where no two requests
    /// ever overlapped the verdict is decided without it, and the saving (the agents' local
    /// work, measured by the client's clock, overlapping other agents' calls) moves with the
    /// machine's load; a snapshot of it would fail on a busy machine with the verdict unchanged.
    pub fn summary(&self) -> String {
        let saving = match self.time.saving {
            _ if self.concurrency.max_in_flight <= 1 => "n/a (no two requests overlapped)",
            None => "n/a",
            Some(s) if s >= PARALLEL_MIN_SAVING => ">= 80%",
            Some(s) if s >= 0.5 => "50-80%",
            Some(s) if s > SERIALIZED_MAX_SAVING => "15-50%",
            Some(_) => "<= 15%",
        };
        let possible = self.concurrency.possible.map_or("?".to_string(), |p| p.to_string());
        format!(
            "verdict: {}\ncause: {}\ndeployment: {} (limit: {})\nagents: {} ({})\nrequests: {} ({} failed)\nmax in flight: {} of {}\nsaving: {}\n",
            self.verdict,
            self.cause.as_str(),
            self.deployment.verdict,
            self.deployment.limit.as_str(),
            self.agents.len(),
            self.agents_from.words(),
            self.requests,
            self.failed,
            self.concurrency.max_in_flight,
            possible,
            saving
        )
    }

    /// Whether the verdict waits on a probe run: the gaps between calls decide it
    /// ([`Cause::UnprobedGaps`]), or a program judged as a whole overlapped and read short of
    /// parallel (a probe releasing one answer at a time can tell its agents apart).
    pub fn needs_probe(&self) -> bool {
        self.needs_probe
    }

    /// Whether the verdict is inconclusive for what the machine may have done, not the program:
    /// the run lost no more than the simulator itself was late ([`Cause::SimulatorLate`]), or
    /// its whole shortfall is one stall reading the last answer ([`Cause::ClientLag`],
    /// inconclusive). The program is to run again in a new window, whose verdict stands: what
    /// recurs is the program's (it stays inconclusive), what does not was the machine's.
    pub fn needs_rerun(&self) -> bool {
        self.rerun
    }

    /// What [`Report::needs_rerun`] says, from the rest of the report.
    pub(super) fn rerun_would_settle(&self) -> bool {
        self.verdict == Verdict::Inconclusive && matches!(self.cause, Cause::SimulatorLate | Cause::ClientLag)
    }

    /// Whether the verdict rests on waits a probe run found and should be confirmed by one more
    /// run (which: [`Report::confirm`]): a pause of the whole process in one run (a garbage
    /// collection over a large heap, a machine starving the program) reads as agents waiting
    /// for each other, and does not recur; agents taking turns do.
    pub fn needs_confirmation(&self) -> bool {
        self.confirm.is_some()
    }

    /// What [`Report::needs_probe`] says, from the rest of the report.
    pub(super) fn probe_would_settle(&self) -> bool {
        self.gaps.as_ref().is_some_and(|g| g.status == GapsStatus::Unprobed)
            || self.held.as_ref().is_some_and(|h| h.status == HeldStatus::Unprobed)
            || (self.agents_from == AgentSource::Program
                && self.requests > 1
                && self.concurrency.max_in_flight > 1
                && self.verdict != Verdict::Parallel)
    }

    /// `Ok` when the verdict is `expected`, else the report in words as the error.
    pub fn expect(&self, expected: Verdict) -> Result<(), String> {
        if self.verdict == expected { Ok(()) } else { Err(format!("expected {expected}, got {self}")) }
    }
}
