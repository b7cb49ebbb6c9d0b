//! The judge: from a trace alone, how a program's requests overlapped, what each would have
//! cost alone, the time the program could have saved, and a verdict with its reason. One
//! judge for `harness exec`, the harness's matrix and users' own tests; it never fails open.
//!
//! # What it computes
//! Every request that got a parallel slot is work. Its **solo cost** is the simulator's own
//! modelled duration of that work alone on an idle device ([`RequestTrace::solo_us`]: the
//! first-token overhead, prompt evaluation and the tokens it emitted, at the run's time
//! scale; no loads, waits or stalls). Requests are grouped into **agents**: by their `X-Agent`
//! header; without labels, by conversation (a chat turn resends the earlier turns, so it
//! chains to the request that sent them); failing both, the program is judged as a whole.
//! An agent's **local work** is the time between one of its answers and its next request,
//! except where other agents' requests ran back to back from that answer to that next request,
//! each starting as the one before ended (a hand-off: the agent was waiting for them, the way a
//! lock or a one-permit semaphore makes it wait): then it was not local work. Then:
//!
//! - **one at a time** = every solo cost + every agent's local work + model loads;
//! - **ideal** = the longest agent's chain (its solo costs and local work) + model loads;
//! - **took** = the measured wall time from the first request to the last answer;
//! - **saving** = (one at a time - took) / (one at a time - ideal): 1.0 when the program was as
//!   fast as its longest agent alone, 0.0 when it was no faster than one request after another.
//!
//! Solo costs and loads are modelled time at the run's time scale (the wall time they would
//! take); local work and the time the program took are measured wall time.
//!
//! # Verdicts
//! **parallel** at a saving of 80 % or more, **serialized** at 15 % or less, **degraded** in
//! between; and, whatever the figures say: two or more requests of two or more agents that
//! were never in flight together are **serialized**; a single request, or a single agent whose
//! calls followed each other, is **inconclusive** (nothing could have run alongside it); a run
//! where nothing could be saved is **inconclusive**. The reason names the cause: the client
//! (requests held back before they reached the server), the server's parallel slots, a shared
//! device, model loads, or (with client-side observations) the client's connection pool or its
//! blocked executor.
//!
//! ```
//! use sim_ollama::judge::{JudgeOptions, Verdict};
//! let sim = sim_ollama::SimBuilder::new().time_scale(0.01).start().unwrap();
//! // ... run the program's agents against sim.url() ...
//! sim.wait_idle(std::time::Duration::from_secs(5)).unwrap();
//! let report = sim.judge(&JudgeOptions::new());
//! assert_eq!(report.verdict, Verdict::Inconclusive, "{report}"); // nothing ran
//! ```

mod allowed;
mod deployment;

pub use deployment::measured as measured_deployment;

use crate::trace::{Outcome, RequestTrace, TraceSnapshot, WaitReason};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

/// Version of the [`Report`]'s JSON schema (`harness exec --json`).
pub const REPORT_SCHEMA_VERSION: u32 = 2;

/// A saving at or above this is parallel.
pub const PARALLEL_MIN_SAVING: f64 = 0.80;
/// A saving at or below this is serialized.
pub const SERIALIZED_MAX_SAVING: f64 = 0.15;

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
}

impl AgentSource {
    fn words(self) -> &'static str {
        match self {
            AgentSource::Labels => "X-Agent labels",
            AgentSource::Conversations => "conversations, no labels",
            AgentSource::Mixed => "X-Agent labels and conversations",
            AgentSource::Program => "no labels: the program as a whole",
        }
    }
}

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
    expected_agents: Option<usize>,
    handoff_tolerance: Option<Duration>,
    client_calls: Vec<ClientCall>,
    since: Option<u64>,
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

    /// Only requests with this trace id or a later one (a mark taken before the program ran).
    pub fn since(mut self, first_id: u64) -> Self {
        self.since = Some(first_id);
        self
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

/// One request as the judge sees it.
#[derive(Debug, Clone)]
struct Req<'a> {
    r: &'a RequestTrace,
    /// Start and end on the program's clock (the client's when known).
    start: u64,
    end: u64,
    /// Server-side end.
    server_end: u64,
    group: usize,
}

fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Sweeps intervals: (max overlap, share of busy time with 2+, idle, longest gap, profile).
fn sweep(iv: &[(u64, u64)]) -> (usize, f64, u64, u64, Vec<(f64, usize)>) {
    let mut ev: Vec<(u64, i32)> = iv.iter().flat_map(|(a, b)| [(*a, 1), (*b.max(a), -1)]).collect();
    // Ends before starts at the same instant: touching intervals do not overlap.
    ev.sort();
    let t0 = ev.first().map_or(0, |e| e.0);
    let (mut cur, mut max, mut last) = (0i64, 0i64, t0);
    let (mut busy, mut multi, mut idle, mut gap) = (0u64, 0u64, 0u64, 0u64);
    let mut profile: Vec<(f64, usize)> = Vec::new();
    for (t, d) in ev {
        let dt = t - last;
        if cur >= 1 {
            busy += dt;
        } else {
            idle += dt;
            gap = gap.max(dt);
        }
        if cur >= 2 {
            multi += dt;
        }
        cur += i64::from(d);
        max = max.max(cur);
        last = t;
        let at = secs(t - t0);
        if profile.last().is_some_and(|(pt, _)| (*pt - at).abs() < 1e-9) {
            profile.pop();
        }
        profile.push((at, cur.max(0) as usize));
    }
    let overlap = if busy > 0 { multi as f64 / busy as f64 } else { 0.0 };
    (max.max(0) as usize, overlap, idle, gap, profile)
}

/// Which runners excluded each other in the run: the server reloaded a model for other runner
/// options, or evicted one for another (the loads' reasons, as `scheduler.rs` words them). Only
/// what the run shows: runners that never displaced each other are replayed side by side.
struct Exclusions {
    /// (instance, model) whose runner was reloaded for other options.
    reloaded: BTreeSet<(usize, String)>,
    /// Instances that evicted a model for another, with how many models they held at once
    /// (`OLLAMA_MAX_LOADED_MODELS` from the reason; 1 when memory was the limit).
    evicting: BTreeMap<usize, usize>,
}

impl Exclusions {
    fn new<'a>(reqs: impl Iterator<Item = &'a RequestTrace>) -> Self {
        let mut reloaded = BTreeSet::new();
        let mut evicting: BTreeMap<usize, usize> = BTreeMap::new();
        for r in reqs {
            for l in &r.loads {
                let held = match deployment::load_cause(&l.reason) {
                    deployment::LoadCause::Reload(_) => {
                        reloaded.insert((r.instance, r.model.clone()));
                        continue;
                    }
                    deployment::LoadCause::MaxLoaded(max) => max,
                    deployment::LoadCause::Memory(_) => 1,
                    deployment::LoadCause::Other => continue,
                };
                let e = evicting.entry(r.instance).or_insert(held);
                *e = (*e).min(held);
            }
        }
        Exclusions { reloaded, evicting }
    }

    /// The runner a request needs, where runners excluded each other: its model and the
    /// runner options that force a reload when they change (`needsReload`, server/sched.go
    /// v0.33.0-rc2 1381-1410; an option left out is the server's default).
    fn of(&self, r: &RequestTrace) -> Option<allowed::Exclusive> {
        const RUNNER_OPTIONS: [&str; 6] = ["num_ctx", "num_batch", "num_gpu", "main_gpu", "use_mmap", "num_thread"];
        let options = RUNNER_OPTIONS
            .iter()
            .map(|k| format!("{k}={}", r.options.get(k).map_or("auto".to_string(), |v| v.to_string())))
            .collect::<Vec<_>>()
            .join(",");
        if let Some(&capacity) = self.evicting.get(&r.instance) {
            return Some(allowed::Exclusive { domain: r.instance, config: format!("{} {options}", r.model), capacity });
        }
        let key = (r.instance, r.model.clone());
        self.reloaded.contains(&key).then(|| allowed::Exclusive {
            // Past every instance's own domain.
            domain: usize::MAX / 2 + self.reloaded.iter().position(|k| *k == key).unwrap_or(0),
            config: options,
            capacity: 1,
        })
    }
}

/// Length of the union of intervals.
fn union_len(mut iv: Vec<(u64, u64)>) -> u64 {
    iv.sort();
    let (mut total, mut cur): (u64, Option<(u64, u64)>) = (0, None);
    for (a, b) in iv {
        match cur {
            Some((s, e)) if a <= e => cur = Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                cur = Some((a, b));
            }
            None => cur = Some((a, b)),
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Chains unlabelled chat turns into conversations: a request whose `parent` fingerprint is
/// an earlier request's `key` (that ended before it arrived) continues it. Each earlier request
/// continues into at most one later one. Returns a conversation index per request.
fn conversations(reqs: &[&RequestTrace]) -> Vec<usize> {
    let mut conv: Vec<usize> = (0..reqs.len()).collect();
    let mut claimed = vec![false; reqs.len()];
    for i in 0..reqs.len() {
        let Some(parent) = reqs[i].conversation.as_ref().and_then(|c| c.parent.as_ref()) else { continue };
        let start = reqs[i].received_us;
        let best = (0..i)
            .filter(|&j| !claimed[j])
            .filter(|&j| reqs[j].conversation.as_ref().is_some_and(|c| &c.key == parent))
            .filter(|&j| reqs[j].end_us.is_some_and(|e| e <= start))
            .max_by_key(|&j| reqs[j].end_us);
        if let Some(j) = best {
            claimed[j] = true;
            conv[i] = conv[j];
        }
    }
    conv
}

/// Judges a trace.
pub fn judge(trace: &TraceSnapshot, opts: &JudgeOptions) -> Report {
    let mut notes = Vec::new();
    let in_window = |r: &&RequestTrace| opts.since.is_none_or(|s| r.id >= s);
    let model_reqs: Vec<&RequestTrace> =
        trace.requests.iter().filter(in_window).filter(|r| MODEL_ENDPOINTS.contains(&r.endpoint.as_str())).collect();
    let still_active = model_reqs.iter().filter(|r| r.outcome == Outcome::Active).count();
    if still_active > 0 {
        notes.push(format!(
            "{} still running when the trace was read were left out (wait for the program to finish: SimHandle::wait_idle)",
            plural(still_active, "request", "requests")
        ));
    }
    // Work is what got a slot; loads and unloads (no slot, no tokens) are not requests of the
    // program's agents, and requests refused before they ran are failures with no work.
    let ran: Vec<&RequestTrace> =
        model_reqs.iter().copied().filter(|r| r.outcome != Outcome::Active && r.slot_us.is_some()).collect();
    let refused: Vec<&RequestTrace> = model_reqs
        .iter()
        .copied()
        .filter(|r| r.slot_us.is_none() && matches!(r.outcome, Outcome::Error | Outcome::Cancelled))
        .collect();
    let failed_ran = ran.iter().filter(|r| r.outcome != Outcome::Done).count();
    let failed = failed_ran + refused.len();
    if failed > 0 {
        let first = refused.iter().chain(ran.iter()).find(|r| r.outcome != Outcome::Done);
        let what = first.map_or(String::new(), |r| match (&r.error, r.outcome) {
            (Some(e), _) => format!(" (first: HTTP {}: {e})", r.status),
            (None, Outcome::Cancelled) => " (first: the client went away before the end)".to_string(),
            _ => String::new(),
        });
        notes.push(format!(
            "{} of {} failed or were cancelled{what}; failed requests count with the work they did",
            plural(failed, "request", "requests"),
            ran.len() + refused.len()
        ));
    }

    // The program's clock: the client's where observed, else the server's.
    let client: BTreeMap<u64, ClientCall> = opts.client_calls.iter().map(|c| (c.request, *c)).collect();
    let mut reqs: Vec<Req<'_>> = ran
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

    // Agents.
    let labelled = reqs.iter().filter(|q| q.r.agent_label.is_some()).count();
    let traces: Vec<&RequestTrace> = reqs.iter().map(|q| q.r).collect();
    let conv = conversations(&traces);
    let mut names: Vec<String> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let mut conv_name: BTreeMap<usize, usize> = BTreeMap::new();
    let mut conv_count = 0;
    for (i, q) in reqs.iter_mut().enumerate() {
        let name_index = match &q.r.agent_label {
            Some(l) => *index.entry(l.clone()).or_insert_with(|| {
                names.push(l.clone());
                names.len() - 1
            }),
            None => *conv_name.entry(conv[i]).or_insert_with(|| {
                conv_count += 1;
                let prefix = if q.r.conversation.is_some() { "conversation" } else { "request" };
                names.push(format!("{prefix}-{conv_count}"));
                names.len() - 1
            }),
        };
        q.group = name_index;
    }
    let groups = names.len();
    let chained = (0..groups).any(|g| reqs.iter().filter(|q| q.group == g).count() >= 2);
    let every_chat = reqs.iter().all(|q| q.r.agent_label.is_some() || q.r.conversation.is_some());
    let source = if reqs.is_empty() || labelled == reqs.len() {
        AgentSource::Labels
    } else if labelled > 0 {
        AgentSource::Mixed
    } else if every_chat && chained {
        AgentSource::Conversations
    } else {
        AgentSource::Program
    };
    if source == AgentSource::Mixed {
        notes.push(format!(
            "{} of {} requests carried no X-Agent label; they were grouped by conversation",
            reqs.len() - labelled,
            reqs.len()
        ));
    }

    // Server-side concurrency (always the server's clock: what reached it together).
    let held: Vec<(u64, u64)> = reqs.iter().map(|q| (q.r.received_us, q.server_end)).collect();
    let (max_in_flight, overlap, _, _, profile) = sweep(&held);
    let decoding: Vec<(u64, u64)> = reqs.iter().filter_map(|q| Some((q.r.first_token_us?, q.server_end))).collect();
    let (max_decoding, ..) = sweep(&decoding);
    // Idle time on the program's clock.
    let program: Vec<(u64, u64)> = reqs.iter().map(|q| (q.start, q.end)).collect();
    let (_, _, idle_us, longest_gap_us, _) = sweep(&program);
    let wait_us = |pred: fn(WaitReason) -> bool| -> u64 {
        reqs.iter()
            .flat_map(|q| q.r.waits.iter())
            .filter(|w| pred(w.reason))
            .map(|w| w.to_us.unwrap_or(w.from_us).saturating_sub(w.from_us))
            .sum()
    };
    let slot_wait_us = wait_us(|w| w == WaitReason::SlotBusy);
    let load_wait_us = wait_us(|w| w != WaitReason::SlotBusy);
    let tok: u64 = reqs.iter().map(|q| q.r.tokens).sum();
    let mean_speed =
        if tok > 0 { reqs.iter().map(|q| q.r.mean_speed * q.r.tokens as f64).sum::<f64>() / tok as f64 } else { 1.0 };
    let shared_devices: Vec<usize> = reqs
        .iter()
        .filter(|q| !q.r.shared_device_with.is_empty())
        .map(|q| q.r.device)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let connections = reqs.iter().map(|q| q.r.client.as_str()).collect::<BTreeSet<_>>().len();

    // Hand-off tolerance: scaled to the requests' size, bounded.
    let tolerance_us = opts.handoff_tolerance.map_or_else(
        || {
            let med = median(reqs.iter().map(|q| q.r.solo_us as f64).collect()).unwrap_or(0.0);
            (med / 4.0).clamp(1_000.0, 20_000.0) as u64
        },
        |d| d.as_micros() as u64,
    );

    // Chains: each call follows the agent's latest call that ended before it began, and every
    // earlier call whose answer its prompt carries (`RequestTrace::carries`: it could not
    // have been sent before those answered, whichever agent sent them). Its local work is the
    // gap after the last of them to end.
    let mut by_end: Vec<usize> = (0..reqs.len()).collect();
    by_end.sort_by_key(|&k| reqs[k].end);
    let n = reqs.len();
    let index_of: BTreeMap<u64, usize> = reqs.iter().enumerate().map(|(i, q)| (q.r.id, i)).collect();
    let mut chain_end = vec![0u64; n];
    let mut local = vec![0u64; n];
    let mut handoff = vec![false; n];
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut carried = 0usize;
    for i in 0..n {
        let g = reqs[i].group;
        let start_i = reqs[i].start;
        let pred = (0..i).filter(|&j| reqs[j].group == g && reqs[j].end <= start_i).max_by_key(|&j| reqs[j].end);
        let needs: Vec<usize> = reqs[i]
            .r
            .carries
            .iter()
            .filter_map(|id| index_of.get(id).copied())
            .filter(|&j| j != i && Some(j) != pred && reqs[j].end <= start_i)
            .collect();
        carried += usize::from(!needs.is_empty());
        after[i] = pred.into_iter().chain(needs.iter().copied()).collect();
        // The last to end; the agent's own call where it ties.
        let last = after[i].iter().copied().max_by_key(|&j| (reqs[j].end, Some(j) == pred));
        let base = match last {
            None => 0,
            Some(p) => {
                let end_p = reqs[p].end;
                let gap = start_i - end_p;
                local[i] = if Some(p) != pred {
                    // Waiting for an answer it carries is the data flow, not a hand-off.
                    gap
                } else {
                    match handoff_chain(&reqs, &by_end, g, end_p, start_i, tolerance_us) {
                        Some(first_start) if gap > tolerance_us => {
                            handoff[i] = true;
                            first_start.saturating_sub(end_p).min(gap)
                        }
                        _ => gap,
                    }
                };
                after[i].iter().map(|&j| chain_end[j]).max().unwrap_or(0) + local[i]
            }
        };
        chain_end[i] = base + reqs[i].r.solo_us;
    }
    if carried > 0 {
        notes.push(if carried == 1 {
            "1 request's prompt carried earlier answers (the data flow between agents): it was taken to wait for them".to_string()
        } else {
            format!(
                "{carried} requests' prompts carried earlier answers (the data flow between agents): each was taken to wait for them"
            )
        });
    }
    let agents: Vec<AgentActivity> = (0..groups)
        .map(|g| {
            let mine: Vec<usize> = (0..n).filter(|&i| reqs[i].group == g).collect();
            let t0 = reqs.first().map_or(0, |q| q.start);
            AgentActivity {
                agent: names[g].clone(),
                requests: mine.len(),
                ids: mine.iter().map(|&i| reqs[i].r.id).collect(),
                tokens: mine.iter().map(|&i| reqs[i].r.tokens).sum(),
                solo_s: secs(mine.iter().map(|&i| reqs[i].r.solo_us).sum()),
                local_s: secs(mine.iter().map(|&i| local[i]).sum()),
                chain_s: secs(mine.iter().map(|&i| chain_end[i]).max().unwrap_or(0)),
                handoffs: mine.iter().filter(|&&i| handoff[i]).count(),
                span_s: (
                    secs(mine.iter().map(|&i| reqs[i].start).min().unwrap_or(t0) - t0),
                    secs(mine.iter().map(|&i| reqs[i].end).max().unwrap_or(t0) - t0),
                ),
            }
        })
        .collect();

    // The time figures.
    let solo_us: u64 = reqs.iter().map(|q| q.r.solo_us).sum();
    let loads: Vec<(u64, u64)> = reqs
        .iter()
        .flat_map(|q| q.r.loads.iter())
        .map(|l| (l.start_us, l.start_us.saturating_add(l.duration_us)))
        .collect();
    let load_us = union_len(loads);
    let took_us = match (reqs.iter().map(|q| q.start).min(), reqs.iter().map(|q| q.end).max()) {
        (Some(a), Some(b)) => b - a,
        _ => 0,
    };
    let longest_chain = chain_end.iter().copied().max().unwrap_or(0);
    let (local_us, ideal_core, possible) = if source == AgentSource::Program {
        // Unknown agents: every request could have run alongside every other (or
        // `expected_agents` at a time); the idle time is the program's own work between calls.
        let lower = opts.expected_agents.map_or(0, |k| solo_us / k as u64);
        let longest_conv = (0..groups)
            .map(|g| reqs.iter().filter(|q| q.group == g).map(|q| q.r.solo_us).sum::<u64>())
            .max()
            .unwrap_or(0);
        (idle_us, longest_conv.max(lower) + idle_us, opts.expected_agents)
    } else {
        let local_us: u64 = local.iter().sum();
        let lower = opts.expected_agents.filter(|k| *k < groups).map_or(0, |k| (solo_us + local_us) / k as u64);
        (local_us, longest_chain.max(lower), Some(opts.expected_agents.map_or(groups, |k| k.min(groups))))
    };
    let sequential_us = solo_us + local_us + load_us;
    let ideal_us = (ideal_core + load_us).min(sequential_us);

    let exclusions = Exclusions::new(reqs.iter().map(|q| q.r));
    // What the deployment allows: the same calls replayed by a perfectly concurrent client on
    // the deployment's slots and devices (unlabelled programs: with no local work, the idle
    // time added as in the ideal).
    let program = source == AgentSource::Program;
    let calls: Vec<allowed::Call> = reqs
        .iter()
        .enumerate()
        .map(|(i, q)| allowed::Call {
            work: q.r.solo_us as f64,
            after: after[i].clone(),
            local: if program { 0.0 } else { local[i] as f64 },
            runner: (q.r.instance, q.r.model.clone()),
            slots: q.r.slots,
            device: q.r.device,
            exclusive: exclusions.of(q.r),
        })
        .collect();
    let permits = if program { opts.expected_agents } else { opts.expected_agents.filter(|k| *k < groups) };
    let described = !trace.devices.is_empty() && reqs.iter().all(|q| q.r.slots > 0);
    let replay = |relax: allowed::Relax| -> u64 {
        let idle = if program { idle_us } else { 0 };
        (allowed::makespan(&calls, &trace.devices, permits, relax).round() as u64 + idle).max(ideal_core)
    };
    let allowed_core = if described { replay(allowed::Relax::default()) } else { ideal_core };
    let allowed_us = allowed_core + load_us;
    // The client's share of what the deployment allows to save (absent when it allows less
    // than 5 % of the sequential time), by the rule the verdict uses.
    let against = against_allowed(secs(took_us), secs(allowed_us), secs(sequential_us), secs(ideal_us)).or_else(|| {
        against_allowed_loads_aside(
            secs(took_us),
            secs(allowed_us),
            secs(sequential_us),
            secs(sequential_us - load_us),
            secs(ideal_core.min(sequential_us - load_us)),
        )
    });
    let saving = against.and_then(|a| a.saving);
    let lags: Vec<f64> = reqs
        .iter()
        .filter(|q| client.contains_key(&q.r.id))
        .map(|q| secs(q.end.saturating_sub(q.server_end)))
        .collect();
    let client_lag_s = median(lags);
    let time = TimeFigures {
        time_scale: trace.time_scale,
        took_s: secs(took_us),
        solo_s: secs(solo_us),
        local_s: secs(local_us),
        load_s: secs(load_us),
        sequential_s: secs(sequential_us),
        ideal_s: secs(ideal_us),
        allowed_s: secs(allowed_us),
        saving,
        client_lag_s,
    };
    let concurrency = Concurrency {
        max_in_flight,
        max_decoding,
        possible,
        overlap,
        idle_s: secs(idle_us),
        longest_gap_s: secs(longest_gap_us),
        slot_wait_s: secs(slot_wait_us),
        load_wait_s: secs(load_wait_us),
        mean_speed,
        shared_devices,
        connections,
        profile,
    };
    if source == AgentSource::Program && reqs.len() > 1 {
        notes.push(match opts.expected_agents {
            Some(k) => format!(
                "no X-Agent labels and no conversations to chain: judged as a program of {k} agents that could run at once"
            ),
            None => "no X-Agent labels and no conversations to chain: the judge assumed every request could have run alongside every other; if each agent makes several calls in turn, label them (X-Agent) or say how many agents run at once (--agents N), or the program reads slower than it is".to_string(),
        });
    }
    let handoffs: usize = agents.iter().map(|a| a.handoffs).sum();

    let lift = |relax: allowed::Relax| if described { allowed_core.saturating_sub(replay(relax)) } else { 0 };
    let deployment = deployment::report(&deployment::Inputs {
        described,
        requests: reqs.len(),
        sequential_us,
        ideal_us: ideal_core.min(sequential_us),
        allowed_us,
        // The loads, and the turns that runners which displace each other impose.
        load_us: load_us + lift(allowed::Relax { exclusive: true, ..Default::default() }),
        replayed: [
            (Limit::Slots, lift(allowed::Relax { slots: true, ..Default::default() })),
            (Limit::Batch, lift(allowed::Relax { batch: true, ..Default::default() })),
            (Limit::SharedDevice, lift(allowed::Relax { cross_process: true, ..Default::default() })),
        ],
        queue_refused: refused.iter().filter(|r| r.status == 503).count(),
        runners: reqs
            .iter()
            .map(|q| deployment::Runner {
                instance: q.r.instance,
                model: q.r.model.clone(),
                slots: q.r.slots,
                device: q.r.device,
                forced: q.r.one_slot_because.clone(),
            })
            .collect(),
        devices: &trace.devices,
        agents: possible,
        load_reasons: reqs.iter().flat_map(|q| q.r.loads.iter()).map(|l| l.reason.as_str()).collect(),
    });
    let mut report = Report {
        schema_version: REPORT_SCHEMA_VERSION,
        verdict: Verdict::Inconclusive,
        cause: Cause::NothingToJudge,
        reason: String::new(),
        deployment,
        notes,
        agents_from: source,
        agents,
        requests: reqs.len(),
        failed,
        concurrency,
        time,
    };
    let (verdict, cause, reason) = decide(&report, &reqs, &client, handoffs, opts, described, against);
    report.verdict = verdict;
    report.cause = cause;
    report.reason = reason;
    report
}

/// Whether agent `g` waited, between its answer at `end_p` and its next call at `start_i`,
/// for other agents' requests that ran back to back: the last one ended right before `start_i`,
/// each began right after the one before it ended, and the first began right after `end_p` (a
/// lock or a permit passed from agent to agent). Returns when the first of them began. Anything
/// less (a gap with no request ending right before the call, or an idle moment in the chain)
/// is the agent's own local work.
fn handoff_chain(reqs: &[Req<'_>], by_end: &[usize], g: usize, end_p: u64, start_i: u64, tol: u64) -> Option<u64> {
    let mut cursor = start_i;
    for _ in 0..reqs.len() {
        // Requests of other agents that ended just before the cursor, after `end_p`, and began
        // no earlier than right around `end_p`; the earliest-starting one covers the most.
        // `by_end` is sorted by end, so only the window [cursor - tol, cursor] is looked at.
        let lo = by_end.partition_point(|&k| reqs[k].end < cursor.saturating_sub(tol).max(end_p + 1));
        let hi = by_end.partition_point(|&k| reqs[k].end <= cursor);
        let k = by_end[lo..hi.max(lo)]
            .iter()
            .map(|&k| &reqs[k])
            .filter(|q| q.group != g && q.start + tol >= end_p)
            .min_by_key(|q| q.start)?;
        if k.start <= end_p + tol {
            return Some(k.start);
        }
        if k.start >= cursor {
            return None;
        }
        cursor = k.start;
    }
    None
}

/// The verdict, its cause and its reason, from the figures.
fn decide(
    rep: &Report,
    reqs: &[Req<'_>],
    client: &BTreeMap<u64, ClientCall>,
    handoffs: usize,
    opts: &JudgeOptions,
    described: bool,
    against: Option<AgainstAllowed>,
) -> (Verdict, Cause, String) {
    let c = &rep.concurrency;
    let t = &rep.time;
    let n = rep.requests;
    let agents = rep.agents.len();
    let who = match rep.agents_from {
        AgentSource::Program => "the program".to_string(),
        AgentSource::Conversations => plural(agents, "conversation", "conversations"),
        _ => plural(agents, "agent", "agents"),
    };
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
    let expected_more = opts.expected_agents.is_some_and(|k| k >= 2);
    if c.max_in_flight <= 1 {
        if agents == 1 && rep.agents_from != AgentSource::Program && !expected_more {
            return (
                Verdict::Inconclusive,
                Cause::NothingToJudge,
                format!(
                    "one agent ({}) made {n} requests, one after another as one agent's calls are: nothing could have run alongside them; if the program has more agents, label each with X-Agent (or pass the number of agents)",
                    rep.agents[0].agent
                ),
            );
        }
        // Decisive: nothing ever overlapped.
        let sent_together = calls_made_together(reqs, client);
        if sent_together {
            return (
                Verdict::Serialized,
                Cause::ConnectionPool,
                format!(
                    "the agents made their calls together, but the {n} requests reached the server one at a time over {}: serialized by the HTTP client's connection pool",
                    plural(c.connections, "connection", "connections")
                ),
            );
        }
        let unlabelled = if rep.agents_from == AgentSource::Program && !expected_more {
            " (no X-Agent labels: if these calls depend on each other by design this is expected; label the agents to judge them)"
        } else {
            ""
        };
        return (
            Verdict::Serialized,
            Cause::Client,
            format!(
                "{who} made {n} requests, but no two were ever in flight at once: each reached the server only after the previous one had finished: serialized in the client{unlabelled}"
            ),
        );
    }
    let possible = c.possible.map_or(String::new(), |p| format!(" of {p}"));
    let overlapped = format!("up to {}{possible} requests in flight at once", c.max_in_flight);
    // The time figures against what the deployment allows, decided once in `judge`.
    let Some(against) = against else {
        return (
            Verdict::Inconclusive,
            Cause::NothingToJudge,
            format!(
                "requests overlapped ({overlapped}), but one chain of calls is nearly all the work ({:.2} s of {:.2} s one at a time): there was little to save, nothing to judge",
                t.ideal_s, t.sequential_s
            ),
        );
    };
    // Where the deployment allows (almost) no saving there is no saving to quote: the time
    // cannot show whether the client held calls back, only whether it lost time of its own.
    let figures = match against.saving {
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
    let verdict = against.verdict;
    if verdict == Verdict::Parallel {
        let how = match against.saving {
            Some(_) => format!("{who} overlapped: {overlapped}; {figures}"),
            None => format!(
                "{who} overlapped ({overlapped}) as far as the deployment allows; it allows no real saving here ({figures})"
            ),
        };
        return (Verdict::Parallel, Cause::None, how);
    }
    if !described {
        return unknown_deployment(&figures);
    }
    if rep.agents_from == AgentSource::Program && !expected_more {
        return unknown_agents(&overlapped, &figures);
    }
    let (cause, why) = client_cause(rep, reqs, client, handoffs, verdict);
    let reason = match against.saving {
        Some(_) => format!("{why} ({figures})"),
        None => {
            let bound = t.allowed_s.max(t.sequential_s);
            format!(
                "{why}; it took {:.1}x the time the deployment explains, {:.2} s lost against the {:.2} s an ideal server could save ({figures})",
                t.took_s / bound.max(1e-9),
                t.took_s - bound,
                t.sequential_s - t.ideal_s
            )
        }
    };
    (verdict, cause, reason)
}

/// A shortfall of a program whose agents the judge could not tell apart: inconclusive, since
/// it assumed every request could run at once, and the time it calls lost may be one agent's
/// calls following each other by design.
fn unknown_agents(overlapped: &str, figures: &str) -> (Verdict, Cause, String) {
    (
        Verdict::Inconclusive,
        Cause::UnknownAgents,
        format!(
            "requests overlapped ({overlapped}), but the judge could not tell the agents apart (no X-Agent labels, no conversations to chain), so it cannot say whether the time lost was held back by the client or is one agent's calls following each other: label each agent's requests with X-Agent or give the number of agents (--agents N) ({figures})"
        ),
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
/// share of that ideal saving, places it in the same bands. The caller checks the overlap first:
/// calls that never overlapped are serialized whatever the times say.
pub fn against_allowed(took: f64, allowed: f64, sequential: f64, ideal: f64) -> Option<AgainstAllowed> {
    let scale = sequential - ideal;
    if !(scale >= 0.05 * sequential) || !(sequential > 0.0) {
        return None;
    }
    let room = sequential - allowed;
    if room >= 0.05 * sequential && room > SERIALIZED_MAX_SAVING * scale {
        let saving = (sequential - took) / room;
        return Some(AgainstAllowed { verdict: band(saving), saving: Some(saving) });
    }
    Some(no_room(took, allowed, sequential, scale))
}

/// The client verdict of a share of the saving.
fn band(saving: f64) -> Verdict {
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
/// overlapped (`calls_sequential_s` against `calls_ideal_s`, loads left out) and the
/// deployment allows no saving (its loads come with every switch of runner), the overlap
/// decides as wherever the deployment allows none. `None` when the calls had nothing to
/// overlap either.
fn against_allowed_loads_aside(
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

/// Where the deployment allows no saving, a client within this many times what the deployment
/// explains (its best, or one call at a time, whichever is longer), or within a fifth of what
/// an ideal server could save (the parallel band's width), lost no time of its own. A quarter:
/// the simulator's own CPU time and the machine's noise stay well inside it. Beyond, the time
/// lost is placed in the usual bands as a share of what an ideal server could save.
pub const NO_ROOM_SLACK: f64 = 1.25;

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
    let request_s = median(reqs.iter().map(|q| secs(q.server_end - q.r.received_us)).collect()).unwrap_or(0.0);
    let lag_matters = t.client_lag_s.is_some_and(|l| l > 0.25 * request_s.max(1e-9));
    if lag_matters {
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

    /// `Ok` when the verdict is `expected`, else the report in words as the error.
    pub fn expect(&self, expected: Verdict) -> Result<(), String> {
        if self.verdict == expected { Ok(()) } else { Err(format!("expected {expected}, got {self}")) }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.time;
        let c = &self.concurrency;
        writeln!(f, "{}: {}", self.verdict, self.reason)?;
        writeln!(f, "  deployment: {}: {}", self.deployment.verdict, self.deployment.reason)?;
        writeln!(
            f,
            "  requests: {} ran ({} failed); agents: {} ({})",
            self.requests,
            self.failed,
            self.agents.len(),
            self.agents_from.words()
        )?;
        for a in &self.agents {
            writeln!(
                f,
                "    {:<24} {}, {} tokens, solo {:.3} s + local {:.3} s, active {:.3}-{:.3} s{}",
                a.agent,
                plural(a.requests, "request", "requests"),
                a.tokens,
                a.solo_s,
                a.local_s,
                a.span_s.0,
                a.span_s.1,
                if a.handoffs > 0 { format!(", {} right after another agent's", a.handoffs) } else { String::new() }
            )?;
        }
        let possible = c.possible.map_or(String::new(), |p| format!(" of {p} possible"));
        writeln!(
            f,
            "  concurrency: max {} in flight{possible} (max {} decoding); {} of the busy time with 2+ in flight; {} connection(s)",
            c.max_in_flight,
            c.max_decoding,
            pct(c.overlap),
            c.connections
        )?;
        writeln!(
            f,
            "  time (seconds of wall time at time scale {}; modelled seconds = these / {}):",
            t.time_scale, t.time_scale
        )?;
        writeln!(f, "    took           {:>8.3} s  measured, first request to last answer", t.took_s)?;
        writeln!(
            f,
            "    one at a time  {:>8.3} s  modelled solo costs {:.3} s + local work {:.3} s (measured) + loads {:.3} s (modelled)",
            t.sequential_s, t.solo_s, t.local_s, t.load_s
        )?;
        let longest = self
            .agents
            .iter()
            .max_by(|a, b| a.chain_s.total_cmp(&b.chain_s))
            .map_or(String::new(), |a| format!(" (longest: {})", a.agent));
        let ideal_words = if self.agents_from == AgentSource::Program {
            "the program's lower bound: its longest request or conversation, or its work spread over the agents, + idle time + loads".to_string()
        } else {
            format!("the longest agent's chain + loads{longest}")
        };
        writeln!(f, "    ideal          {:>8.3} s  {ideal_words}", t.ideal_s)?;
        writeln!(
            f,
            "    allowed        {:>8.3} s  a perfectly concurrent client on this deployment (its slots and devices replayed) + loads",
            t.allowed_s
        )?;
        match t.saving {
            Some(s) => writeln!(
                f,
                "    saved          {:>8}    of the {:.3} s the deployment allows to save ({:.3} s lost)",
                pct(s.max(-9.99)),
                (t.sequential_s - t.allowed_s).max(0.0),
                (t.took_s - t.allowed_s).max(0.0)
            )?,
            None => writeln!(f, "    saved          n/a        the deployment allows nothing to save")?,
        }
        if let Some(l) = t.client_lag_s {
            writeln!(f, "    client lag     {:>8.3} s  median, server's last byte to the client's (measured)", l)?;
        }
        writeln!(
            f,
            "  waits: {:.3} s for parallel slots, {:.3} s for loads; idle {:.3} s (longest gap {:.3} s); decode speed {} of solo",
            c.slot_wait_s,
            c.load_wait_s,
            c.idle_s,
            c.longest_gap_s,
            pct(c.mean_speed)
        )?;
        let shown: Vec<String> = c.profile.iter().take(40).map(|(t, n)| format!("{t:.3}s:{n}")).collect();
        let more = if c.profile.len() > 40 { format!(" ... ({} changes)", c.profile.len()) } else { String::new() };
        writeln!(f, "  in flight over time: {}{more}", shown.join(" "))?;
        for n in &self.notes {
            writeln!(f, "  note: {n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

/// What a gate expects of a report: the client verdict, the client's share of the saving the
/// deployment allows, the speedup the deployment allows. Shared by `harness exec` and
/// `GET /sim/judge`, so both gates say the same thing in the same words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Expectations {
    /// The client verdict expected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Lowest client saving accepted (0-1); a client-parallel report on a deployment that
    /// allows no saving meets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_saving: Option<f64>,
    /// Lowest speedup the deployment must allow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_speedup: Option<f64>,
}

impl Expectations {
    /// Whether nothing is expected.
    pub fn is_empty(&self) -> bool {
        *self == Expectations::default()
    }

    /// Each expectation the report does not meet, in a sentence with the report's reason.
    pub fn check(&self, report: &Report) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(v) = self.verdict {
            if v != report.verdict {
                out.push(format!("expected {v}, got {}: {}", report.verdict, report.reason));
            }
        }
        if let Some(min) = self.min_saving {
            match report.time.saving {
                Some(s) if s >= min => {}
                Some(s) => out.push(format!(
                    "saved {:.0}% of what the deployment allows, below the minimum {:.0}%: {}",
                    s * 100.0,
                    min * 100.0,
                    report.reason
                )),
                // Nothing to save on this deployment: the overlap decided the verdict.
                None if report.verdict == Verdict::Parallel => {}
                None => out.push(format!(
                    "no saving could be measured ({}), so the minimum {:.0}% is not met",
                    report.reason,
                    min * 100.0
                )),
            }
        }
        if let Some(min) = self.min_speedup {
            let d = &report.deployment;
            if !d.speedup.is_some_and(|x| x >= min) {
                out.push(format!(
                    "the deployment allows a speedup of {} where at least {min:.2}x is required: {}",
                    d.speedup.map_or("n/a".to_string(), |x| format!("{x:.2}x")),
                    d.reason
                ));
            }
        }
        out
    }
}

/// Version of the judgement document (`GET /sim/judge`; `harness exec --json` writes the same
/// document with the command's fields added).
pub const JUDGEMENT_SCHEMA_VERSION: u32 = 2;

/// The judgement document: the report, what was expected of it, and whether it passed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// [`JUDGEMENT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The simulator's master seed.
    pub seed: u64,
    /// The first trace id judged (the mark), when there was one.
    pub since: Option<u64>,
    /// What was expected.
    pub expectations: Expectations,
    /// Whether every expectation was met (true when none was given).
    pub passed: bool,
    /// The expectations not met, in words.
    pub failures: Vec<String>,
    /// The judge's report.
    pub report: Report,
}
