//! The server-side trace: what every request went through, with monotonic timestamps in
//! microseconds since the simulator started. Readable in-process
//! ([`SimHandle::trace`](crate::SimHandle::trace)) and over HTTP (`GET /sim/trace`,
//! `DELETE /sim/trace`). The JSON schema is documented in `docs/trace.md`.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Version of the trace's JSON schema.
pub const TRACE_SCHEMA_VERSION: u32 = 5;

/// How many finished requests the trace keeps before dropping the oldest (besides its byte
/// budget).
const MAX_FINISHED: usize = 200_000;

/// An estimate of the memory a finished record holds, bytes: its fixed part, its token times,
/// waits, loads, strings and options.
fn record_bytes(r: &RequestTrace) -> usize {
    let strings = r.endpoint.len()
        + r.model.len()
        + r.agent.len()
        + r.agent_label.as_ref().map_or(0, String::len)
        + r.client.len()
        + r.error.as_ref().map_or(0, String::len)
        + r.fault.as_ref().map_or(0, String::len)
        + r.conversation.as_ref().map_or(0, |c| 64 + c.key.len() + c.parent.as_ref().map_or(0, String::len));
    let options = if r.options.is_null() { 0 } else { r.options.to_string().len() * 2 };
    std::mem::size_of::<RequestTrace>()
        + r.token_us.capacity() * 8
        + r.waits.iter().map(|w| std::mem::size_of::<Wait>() + w.detail.len()).sum::<usize>()
        + r.loads.iter().map(|l| std::mem::size_of::<Load>() + l.reason.len()).sum::<usize>()
        + r.shared_device_with.len() * 8
        + strings
        + options
}

/// How a request ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Still running.
    #[default]
    Active,
    /// Completed normally.
    Done,
    /// The client went away before the end.
    Cancelled,
    /// Answered with an error (before or during the stream).
    Error,
}

/// Why a request waited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitReason {
    /// Waited for the instance's scheduler, busy with another request's load.
    Scheduler,
    /// Waited for its model to load (its own load, or one already in progress).
    ModelLoading,
    /// The loaded model had other runner options: waited for its in-flight requests to
    /// finish before the reload.
    ReloadForOptions,
    /// Too many models loaded: waited for another model's requests to finish so it could be
    /// evicted.
    Eviction,
    /// All parallel slots of the model were busy.
    SlotBusy,
    /// An unload this request waited for had not yet released the device's memory (discrete
    /// GPUs: `DeviceSpec::vram_release_ms`).
    MemoryRelease,
}

/// One interval a request spent waiting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    /// Why.
    pub reason: WaitReason,
    /// From, microseconds since the simulator started.
    pub from_us: u64,
    /// To (absent while still waiting).
    pub to_us: Option<u64>,
    /// Details in words (`num_ctx 512 -> 1024`, `slots 1/1 busy`, ...).
    pub detail: String,
}

/// A model load a request paid for or waited on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// Start, microseconds since the simulator started.
    pub start_us: u64,
    /// Modelled duration of the load, microseconds (after the time scale).
    pub duration_us: u64,
    /// First load of this model in this instance's process.
    pub cold: bool,
    /// Why the model was (re)loaded, in words.
    pub reason: String,
    /// The same as data, for tools that act on it (the judge's replay and deployment verdict);
    /// absent in traces older than this field, whose `reason` is then read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<LoadCause>,
}

/// Why a model was loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoadCause {
    /// A first load, a load of a model that was not loaded, or a new start after an aborted
    /// load.
    Load,
    /// The model was loaded again for other runner options (`needsReload`).
    Reload {
        /// What changed, in words (`num_ctx 512 -> 1024`).
        changed: String,
    },
    /// Another model was evicted for it at the loaded-model limit (`OLLAMA_MAX_LOADED_MODELS`).
    EvictedAtLimit {
        /// The limit.
        max: usize,
    },
    /// Another model was evicted for it because both did not fit in the device's memory.
    EvictedForMemory {
        /// What it needed and what was free, in words.
        detail: String,
    },
}

/// Fingerprints of a chat request's messages: a later turn of the same conversation resends
/// the earlier messages, so its `parent` equals the earlier request's `key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// Hash of every message (role and content), hex.
    pub key: String,
    /// Hash of the messages before the last assistant message (what the previous turn sent),
    /// hex; absent when the request holds no assistant message (a first turn).
    pub parent: Option<String>,
}

/// What a request found in its slot's prompt cache (see `sim_ollama`'s cache model: llama-server
/// keeps each parallel slot's last prompt, and a host-memory copy of prompts evicted from it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheUse {
    /// The parallel slot it ran in (0-based).
    pub slot: usize,
    /// `similarity` (the slot held the longest matching prefix) or `least_recently_used`.
    pub chosen_by: String,
    /// Prompt tokens it did not evaluate again (in `prompt_eval_count`, not in its duration).
    pub cached_tokens: u64,
    /// Prompt tokens it evaluated (at least one).
    pub evaluated_tokens: u64,
    /// Tokens restored into the slot from the host prompt cache.
    pub restored_tokens: u64,
    /// Tokens of the slot's previous prompt saved to the host prompt cache first.
    pub saved_tokens: u64,
    /// When another agent's request had evicted this agent's earlier prefix from the device
    /// (with no copy left in host memory): that agent.
    pub lost_to: Option<String>,
    /// Prompt tokens the lost prefix would have saved.
    pub lost_tokens: u64,
}

/// Everything recorded about one request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestTrace {
    /// Unique per simulator, increasing in arrival order.
    pub id: u64,
    /// Instance index (0-based).
    pub instance: usize,
    /// Device index of the instance.
    pub device: usize,
    /// Path, e.g. `/api/generate`.
    pub endpoint: String,
    /// Model name as the client sent it.
    pub model: String,
    /// The `X-Agent` header, else the client's address.
    pub agent: String,
    /// The `X-Agent` header, when the client sent one (the judge tells labelled agents from
    /// pooled connections by it).
    #[serde(default)]
    pub agent_label: Option<String>,
    /// The client's address (`ip:port`): one per connection.
    pub client: String,
    /// Streaming response or not.
    pub stream: bool,
    /// The request's `options` (as sent).
    pub options: serde_json::Value,
    /// Arrival, microseconds since the simulator started: when the request's bytes reached
    /// the server (see `handled_us`).
    pub received_us: u64,
    /// When the simulator began handling the request (its body read and parsed). Later than
    /// `received_us` when the simulator's own CPU was behind (a burst of connections); the
    /// modelled schedule still runs from `received_us` unless something modelled (a load, a
    /// busy slot) held the request, so the gap is the simulator's delay, not the server's.
    /// (Absent, read as zero, in traces written before it was recorded.)
    #[serde(default)]
    pub handled_us: u64,
    /// When the request obtained a loaded runner.
    pub runner_us: Option<u64>,
    /// When it obtained a parallel slot and prompt evaluation began.
    pub slot_us: Option<u64>,
    /// When the first token was emitted (the response headers go out with it).
    pub first_token_us: Option<u64>,
    /// When the request ended (last byte, error or cancellation).
    pub end_us: Option<u64>,
    /// How it ended.
    pub outcome: Outcome,
    /// HTTP status of the response (200 even when a stream failed after it began).
    pub status: u16,
    /// The error text, for `outcome = error`.
    pub error: Option<String>,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Tokens of reasoning before the answer (a thinking model with `think` on): the first
    /// `thinking_tokens` of `token_us` are reasoning, `token_us[thinking_tokens]` is the first
    /// content token (when emitted), so time to first thinking token and time to first content
    /// token read apart.
    #[serde(default)]
    pub thinking_tokens: u64,
    /// Tokens emitted so far.
    pub tokens: u64,
    /// Emission time of every token, microseconds since the simulator started.
    pub token_us: Vec<u64>,
    /// Modelled solo cost, microseconds at the run's time scale: what the work this request
    /// did (overhead, prompt evaluation, the tokens emitted) takes alone on an idle device,
    /// without loads, waits or injected stalls. 0 for requests that never got a slot.
    #[serde(default)]
    pub solo_us: u64,
    /// Conversation fingerprints of a chat request, to chain an agent's turns when it sends
    /// no `X-Agent` label.
    #[serde(default)]
    pub conversation: Option<Conversation>,
    /// Earlier requests whose answers this request's prompt carries (a run of six of their
    /// generated words, see `sim_ollama`'s `carried` module): it could not have been sent
    /// before they answered. The judge chains it after them. Empty in traces older than
    /// schema 5.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carries: Vec<u64>,
    /// Loads this request paid for or waited on.
    pub loads: Vec<Load>,
    /// Intervals spent waiting, with reasons.
    pub waits: Vec<Wait>,
    /// Lowest decode speed seen, as a fraction of the solo speed (1.0 = alone on the device).
    pub min_speed: f64,
    /// Mean decode speed over the tokens, as a fraction of the solo speed.
    pub mean_speed: f64,
    /// Other instances that decoded on the same device at the same time.
    pub shared_device_with: Vec<usize>,
    /// Largest number of streams decoded together in this request's batch (its instance's
    /// parallel slots in use).
    pub max_batch: usize,
    /// Parallel slots of the runner that served it (`OLLAMA_NUM_PARALLEL`, or 1 where the
    /// server forces one slot); 0 when it never had a runner, or in traces older than schema 4.
    /// The judge models what the deployment allows from it.
    #[serde(default)]
    pub slots: usize,
    /// Why its runner has one slot whatever `OLLAMA_NUM_PARALLEL` asks (`an embedding model`,
    /// `the qwen35moe architecture`), when the server forced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_slot_because: Option<String>,
    /// A fault the simulator injected into this request, if any.
    pub fault: Option<String>,
    /// What it found in its slot's prompt cache (generation requests that got a slot).
    #[serde(default)]
    pub cache: Option<CacheUse>,
    /// Why the request took the time it took, in words (filled in by snapshots).
    pub explanation: String,
}

impl RequestTrace {
    /// A request that ran to its end, for traces built by hand (tests, tools replaying a log):
    /// a `/api/generate` call for model `m` on instance 0 and device 0, from the client
    /// `127.0.0.1:5000`, received at `received_us`, given its runner, its slot and its first
    /// token at once, ended at `end_us` with 10 tokens, its solo cost the whole span; no label,
    /// loads, waits or sharing. Set what differs with struct update syntax:
    ///
    /// ```
    /// use sim_ollama::advanced::trace::RequestTrace;
    /// let r = RequestTrace { agent_label: Some("planner".into()), ..RequestTrace::ran(1, 0, 50_000) };
    /// assert_eq!(r.solo_us, 50_000);
    /// ```
    pub fn ran(id: u64, received_us: u64, end_us: u64) -> RequestTrace {
        RequestTrace {
            id,
            endpoint: "/api/generate".into(),
            model: "m".into(),
            agent: "127.0.0.1:5000".into(),
            client: "127.0.0.1:5000".into(),
            stream: true,
            runner_us: Some(received_us),
            slot_us: Some(received_us),
            first_token_us: Some(received_us),
            end_us: Some(end_us),
            outcome: Outcome::Done,
            prompt_tokens: 10,
            tokens: 10,
            solo_us: end_us.saturating_sub(received_us),
            max_batch: 1,
            ..RequestTrace::arrived(received_us)
        }
    }

    /// A request just received at `received_us`: nothing named, nothing run, nothing
    /// allocated (the trace begins every request with it, then fills in what it knows).
    fn arrived(received_us: u64) -> RequestTrace {
        RequestTrace {
            id: 0,
            instance: 0,
            device: 0,
            endpoint: String::new(),
            model: String::new(),
            agent: String::new(),
            agent_label: None,
            client: String::new(),
            stream: false,
            options: serde_json::Value::Null,
            received_us,
            handled_us: received_us,
            runner_us: None,
            slot_us: None,
            first_token_us: None,
            end_us: None,
            outcome: Outcome::Active,
            status: 200,
            error: None,
            prompt_tokens: 0,
            tokens: 0,
            token_us: Vec::new(),
            solo_us: 0,
            conversation: None,
            carries: Vec::new(),
            loads: Vec::new(),
            waits: Vec::new(),
            min_speed: 1.0,
            mean_speed: 1.0,
            shared_device_with: Vec::new(),
            max_batch: 0,
            slots: 0,
            one_slot_because: None,
            fault: None,
            cache: None,
            thinking_tokens: 0,
            explanation: String::new(),
        }
    }
}

/// The trace store of one simulator.
#[derive(Debug)]
pub(crate) struct Trace {
    origin: Instant,
    time_scale: f64,
    next_id: AtomicU64,
    active: Mutex<BTreeMap<u64, Arc<Mutex<RequestTrace>>>>,
    /// Finished records with their estimated size, and the sizes' sum.
    finished: Mutex<(VecDeque<(RequestTrace, usize)>, usize)>,
    dropped: AtomicU64,
    /// Bytes the finished records may hold.
    budget: usize,
    /// The devices' sharing model, copied into every snapshot.
    devices: Vec<DeviceSharing>,
    /// The answers given so far, to recognise them in later prompts.
    answers: crate::carried::Answers,
}

/// A snapshot of the trace, as `GET /sim/trace` returns it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TraceSnapshot {
    /// [`TRACE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The simulator's time scale: modelled time = microseconds here / `time_scale`.
    #[serde(default = "one")]
    pub time_scale: f64,
    /// Finished requests dropped because the trace was full.
    pub dropped: u64,
    /// Every request, in arrival order; active ones have `outcome = active`.
    pub requests: Vec<RequestTrace>,
    /// How each device (by index, as in [`RequestTrace::device`]) shares its capacity between
    /// streams: what the judge needs to model what the deployment allows. Empty in traces
    /// older than schema 4 (the judge then cannot say what the deployment allows).
    #[serde(default)]
    pub devices: Vec<DeviceSharing>,
}

/// How a device shares its capacity (see [`crate::config::DeviceSpec`]): a batch of `n` streams
/// in one server process runs each at `1 / (1 + batch_penalty * (n - 1))` of its solo speed, and
/// `m` processes decoding on the device at once get `cross_process_efficiency / m` of it each.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DeviceSharing {
    /// Cost of each extra stream batched in one process.
    pub batch_penalty: f64,
    /// Share of the device left when several processes time-slice it.
    pub cross_process_efficiency: f64,
}

impl DeviceSharing {
    /// Speed of each stream of a batch of `n` streams when `m` processes decode on the device,
    /// as a fraction of its solo speed. The simulator's devices run streams at this speed.
    pub fn speed(&self, n: usize, m: usize) -> f64 {
        let batch = 1.0 / (1.0 + self.batch_penalty * n.saturating_sub(1) as f64);
        let share = if m <= 1 { 1.0 } else { self.cross_process_efficiency / m as f64 };
        batch * share
    }
}

impl Trace {
    pub(crate) fn new(origin: Instant, time_scale: f64, budget: usize, devices: Vec<DeviceSharing>) -> Self {
        Trace {
            devices,
            origin,
            time_scale,
            next_id: AtomicU64::new(1),
            active: Mutex::new(BTreeMap::new()),
            finished: Mutex::new((VecDeque::new(), 0)),
            dropped: AtomicU64::new(0),
            budget,
            answers: crate::carried::Answers::default(),
        }
    }

    /// Estimated bytes held by finished records.
    pub(crate) fn finished_bytes(&self) -> usize {
        lock(&self.finished).1
    }

    /// Microseconds since the simulator started.
    pub(crate) fn us(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.origin).as_micros() as u64
    }

    /// Starts recording a request; the record is finished when the guard is dropped.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn begin(
        self: &Arc<Self>,
        received: Instant,
        instance: usize,
        device: usize,
        endpoint: &str,
        model: &str,
        agent: Option<String>,
        client: String,
        stream: bool,
        options: serde_json::Value,
    ) -> TraceGuard {
        let received_us = self.us(received);
        let rec = Arc::new(Mutex::new(RequestTrace {
            instance,
            device,
            endpoint: endpoint.to_string(),
            model: model.to_string(),
            agent: agent.clone().unwrap_or_else(|| client.clone()),
            agent_label: agent,
            client,
            stream,
            options,
            handled_us: self.us(Instant::now().max(received)),
            ..RequestTrace::arrived(received_us)
        }));
        // The id is taken under the `active` lock, with the insertion: a snapshot never shows a
        // request without the ones that arrived before it.
        let id = {
            let mut active = lock(&self.active);
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            lock(&rec).id = id;
            active.insert(id, Arc::clone(&rec));
            id
        };
        TraceGuard {
            trace: Arc::clone(self),
            rec,
            id,
            pending: Vec::new(),
            speed_sum: 0.0,
            speed_min: 1.0,
            tokens: 0,
            solo_us: 0,
        }
    }

    /// Every request so far.
    ///
    /// Atomic: the `active` lock is held while the finished list is copied, and a request
    /// moves from one to the other under that same lock, so a request that finishes during a
    /// snapshot is in exactly one of them.
    pub(crate) fn snapshot(&self) -> TraceSnapshot {
        let mut requests: Vec<RequestTrace>;
        {
            let active = lock(&self.active);
            requests = lock(&self.finished).0.iter().map(|(r, _)| r.clone()).collect();
            requests.extend(active.values().map(|r| lock(r).clone()));
        }
        requests.sort_by_key(|r| r.id);
        for r in &mut requests {
            r.explanation = explain(r);
        }
        TraceSnapshot {
            schema_version: TRACE_SCHEMA_VERSION,
            time_scale: self.time_scale,
            dropped: self.dropped.load(Ordering::Relaxed),
            requests,
            devices: self.devices.clone(),
        }
    }

    /// The id the next request will get.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed)
    }

    /// Requests not finished yet.
    pub(crate) fn in_flight(&self) -> usize {
        lock(&self.active).len()
    }

    /// Forgets finished requests (active ones stay) and the answers they gave.
    pub(crate) fn clear(&self) {
        *lock(&self.finished) = (VecDeque::new(), 0);
        self.answers.clear();
        self.dropped.store(0, Ordering::Relaxed);
    }
}

fn one() -> f64 {
    1.0
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records into one request's trace; finishes it on drop (as cancelled unless told otherwise).
#[derive(Debug)]
pub(crate) struct TraceGuard {
    trace: Arc<Trace>,
    rec: Arc<Mutex<RequestTrace>>,
    id: u64,
    /// Token times not yet copied into the shared record (one lock per batch of tokens).
    pending: Vec<u64>,
    speed_sum: f64,
    speed_min: f64,
    tokens: u64,
    /// Modelled solo cost so far (written with the token batches and at the end).
    solo_us: u64,
}

/// Token times are copied into the shared record this many at a time (and at the end), so a
/// snapshot of a request in flight may lack its latest few tokens.
const TOKEN_BATCH: usize = 32;

impl TraceGuard {
    pub(crate) fn us(&self, at: Instant) -> u64 {
        self.trace.us(at)
    }

    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut RequestTrace) -> R) -> R {
        f(&mut lock(&self.rec))
    }

    /// Starts a wait; returns its index for [`TraceGuard::end_wait`].
    pub(crate) fn begin_wait(&self, reason: WaitReason, at: Instant, detail: String) -> usize {
        let from_us = self.us(at);
        self.with(|r| {
            r.waits.push(Wait { reason, from_us, to_us: None, detail });
            r.waits.len() - 1
        })
    }

    pub(crate) fn end_wait(&self, index: usize, at: Instant) {
        let to = self.us(at);
        self.with(|r| {
            if let Some(w) = r.waits.get_mut(index) {
                w.to_us = Some(to);
            }
        });
    }

    /// The request's id in the trace.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Records which earlier answers the request's `prompt` carries, and remembers its own
    /// `answer` and tool `call_ids` for the requests to come (see `crate::carried`).
    pub(crate) fn carry(&self, prompt: &str, answer: &str, call_ids: &[&str]) {
        let carries = self.trace.answers.link(self.id, prompt, answer, call_ids);
        if !carries.is_empty() {
            self.with(|r| r.carries = carries);
        }
    }

    /// The request's modelled solo work so far (see [`RequestTrace::solo_us`]).
    pub(crate) fn solo(&mut self, work: std::time::Duration) {
        self.solo_us = work.as_micros() as u64;
    }

    pub(crate) fn token(&mut self, at: Instant, speed: f64) {
        self.pending.push(self.us(at));
        self.tokens += 1;
        self.speed_sum += speed;
        self.speed_min = self.speed_min.min(speed);
        // The first token is published at once (it marks when the response started).
        if self.tokens == 1 || self.pending.len() >= TOKEN_BATCH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let (tokens, sum, min, solo) = (self.tokens, self.speed_sum, self.speed_min, self.solo_us);
        let pending = std::mem::take(&mut self.pending);
        self.with(|r| {
            r.solo_us = solo;
            if r.first_token_us.is_none() {
                r.first_token_us = pending.first().copied();
            }
            r.token_us.extend_from_slice(&pending);
            r.tokens = tokens;
            r.min_speed = min;
            r.mean_speed = sum / tokens as f64;
        });
        self.pending = pending;
        self.pending.clear();
    }

    /// Ends the record with an outcome.
    pub(crate) fn finish(&mut self, outcome: Outcome, status: u16, error: Option<String>) {
        self.flush();
        let now = self.us(Instant::now());
        let solo = self.solo_us;
        self.with(|r| {
            if r.outcome == Outcome::Active {
                r.solo_us = solo;
                r.outcome = outcome;
                r.status = status;
                r.error = error;
                r.end_us = Some(now);
            }
        });
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        // A request dropped before it finished was cancelled by its client.
        self.finish(Outcome::Cancelled, 499, None);
        // Moved under the `active` lock, so a snapshot sees it in exactly one list.
        let mut active = lock(&self.trace.active);
        if let Some(rec) = active.remove(&self.id) {
            // Moved out, not copied: no one reads this request's shared record after this.
            let mut r = std::mem::take(&mut *lock(&rec));
            r.token_us.shrink_to_fit();
            let size = record_bytes(&r);
            let mut fin = lock(&self.trace.finished);
            fin.0.push_back((r, size));
            fin.1 += size;
            // The oldest go first, past the count or the byte budget (a budget of 0 keeps none).
            while fin.0.len() > MAX_FINISHED || (fin.1 > self.trace.budget && !fin.0.is_empty()) {
                if let Some((_, s)) = fin.0.pop_front() {
                    fin.1 -= s;
                    self.trace.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

fn ms(us: u64) -> String {
    if us >= 10_000 { format!("{:.2} s", us as f64 / 1e6) } else { format!("{:.1} ms", us as f64 / 1e3) }
}

/// Why a request took the time it took: waits with their reasons, loads, device sharing.
pub(crate) fn explain(r: &RequestTrace) -> String {
    let mut parts = Vec::new();
    for l in &r.loads {
        parts.push(format!("model load {} ({})", ms(l.duration_us), l.reason));
    }
    for w in &r.waits {
        let Some(to) = w.to_us else {
            parts.push(format!("still waiting: {}", w.detail));
            continue;
        };
        let what = match w.reason {
            WaitReason::Scheduler => "for the scheduler",
            WaitReason::ModelLoading => "for the model to load",
            WaitReason::ReloadForOptions => "for in-flight requests before a reload",
            WaitReason::Eviction => "for another model to be evicted",
            WaitReason::SlotBusy => "for a parallel slot",
            WaitReason::MemoryRelease => "for the device to release memory",
        };
        parts.push(format!("waited {} {what} ({})", ms(to.saturating_sub(w.from_us)), w.detail));
    }
    if r.tokens > 0 && r.mean_speed < 0.95 {
        let mut why = Vec::new();
        if !r.shared_device_with.is_empty() {
            let list: Vec<String> = r.shared_device_with.iter().map(|i| i.to_string()).collect();
            why.push(format!("device shared with instance {}", list.join(", ")));
        }
        if r.max_batch > 1 {
            why.push(format!("batched with up to {} streams", r.max_batch - 1));
        }
        parts.push(format!(
            "decoded at {:.0}% of solo speed on average (lowest {:.0}%){}",
            r.mean_speed * 100.0,
            r.min_speed * 100.0,
            if why.is_empty() { String::new() } else { format!(": {}", why.join("; ")) }
        ));
    }
    if let Some(c) = &r.cache {
        if let Some(by) = &c.lost_to {
            parts.push(format!(
                "lost its cached prompt in slot {} to {by}: evaluated {} prompt tokens, {} of them again",
                c.slot, c.evaluated_tokens, c.lost_tokens
            ));
        } else if c.cached_tokens > 0 {
            parts.push(format!(
                "{} of {} prompt tokens cached in slot {}{}",
                c.cached_tokens,
                c.cached_tokens + c.evaluated_tokens,
                c.slot,
                if c.restored_tokens > 0 { " (restored from the host prompt cache)" } else { "" }
            ));
        }
    }
    if r.thinking_tokens > 0 {
        let n = r.thinking_tokens as usize;
        match (r.token_us.first(), r.token_us.get(n)) {
            (Some(a), Some(b)) => parts
                .push(format!("reasoned for {n} tokens ({}) before the first content token", ms(b.saturating_sub(*a)))),
            _ => parts.push(format!("reasoning planned for {n} tokens; no content token yet")),
        }
    }
    if let Some(f) = &r.fault {
        parts.push(format!("fault injected: {f}"));
    }
    match r.outcome {
        Outcome::Cancelled => parts.push("the client went away before the end".into()),
        Outcome::Error => parts.push(format!("failed: {}", r.error.as_deref().unwrap_or("error"))),
        _ => {}
    }
    if parts.is_empty() { "ran alone, without waiting".into() } else { parts.join("; ") }
}
