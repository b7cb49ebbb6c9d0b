//! The trace's records, as `GET /sim/trace` returns them: each request with its waits, loads,
//! conversation and cache use, the snapshot of them all, the devices' sharing, and a record's
//! explanation in words. The schema `docs/trace.md` documents.

use serde::{Deserialize, Serialize};

/// Version of the trace's JSON schema.
pub const TRACE_SCHEMA_VERSION: u32 = 5;

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
    /// The part of `solo_us` spent before the request queued for a slot: the per-call
    /// overhead a request pays on a runner already loaded (the scheduler's check of it,
    /// `needsReload`'s `Ping` in `getRunner`, server/sched.go v0.33.0-rc2 199-201 and
    /// 1420-1427), in the request's own goroutine, so it overlaps other requests' slots
    /// whatever `OLLAMA_NUM_PARALLEL` is. 0 for a request that loaded its runner, and in
    /// traces older than it (then its whole solo cost is taken to need a slot).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ping_us: u64,
    /// How much longer a token takes at this request's mean context than at none, as a share
    /// of the empty-context time (`decode_slowdown_per_1k` x mean context / 1000): attention
    /// over each stream's own context, the part of a step that does not batch
    /// ([`DeviceSharing::stream_speed`]). 0 where the profile has no slowdown.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub attention: f64,
    /// Conversation fingerprints of a chat request, to chain an agent's turns when it sends
    /// no `X-Agent` label.
    #[serde(default)]
    pub conversation: Option<Conversation>,
    /// Earlier requests whose answers this request's prompt only hints at (a run of three of
    /// their generated words, not carried: see `sim_ollama`'s `carried` module). The judge
    /// takes a hint for the data flow only where an agent's first call went out right after the
    /// answer it hints at (a hand-off).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<u64>,
    /// How long a probe run held this answer's end back, µs of wall time: its tokens were all
    /// out, and its last line waited for another agent's gap between calls to close (see
    /// `sim_ollama`'s `probe` module). 0 outside probe runs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub held_us: u64,
    /// How late the simulator emitted this request's latest token against its schedule, µs of
    /// wall time: the simulator itself behind (a machine too busy to run it on time), or a
    /// client that stopped reading a long stream (TCP pushing back on its writes). The schedule
    /// is the one the request had when it got its slot: a stream the simulator got to only
    /// after its first token was due starts later, and that delay counts. 0 when on time, and
    /// in traces older than it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub late_us: u64,
    /// A fingerprint of what the model was asked (its model and rendered prompt), hex: the same
    /// request sent again, in a probe run, has the same one. Absent for requests that render no
    /// prompt (embeddings) and in traces older than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_key: Option<String>,
    /// In a probe run that releases one answer at a time (a program whose agents the judge
    /// cannot tell apart, see `sim_ollama`'s `probe` module): the request whose answer had just
    /// gone out, with every other answer held, when this request arrived. Absent when no answer
    /// was out then (the program's first calls) and outside such runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_after: Option<u64>,
    /// In a probe run: whether this request's prompt holds words of an answer the probe wrote
    /// in marked words (an answer a first call of the run judged went out right after: see
    /// `sim_ollama`'s `probe` module), however they were taken from it (sorted, filtered,
    /// reworded around): data of that answer reached it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub probe_marked: bool,
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
    pub(super) fn arrived(received_us: u64) -> RequestTrace {
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
            ping_us: 0,
            attention: 0.0,
            conversation: None,
            carries: Vec::new(),
            hints: Vec::new(),
            held_us: 0,
            late_us: 0,
            prompt_key: None,
            probe_after: None,
            probe_marked: false,
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
/// in one server process steps them together, a step costing `1 + batch_penalty * (n - 1) + X`
/// where `X` is the sum of the streams' [`RequestTrace::attention`], so a stream whose own
/// attention is `x` runs at `(1 + x) / (1 + batch_penalty * (n - 1) + X)` of its solo speed
/// (no attention: `1 / (1 + batch_penalty * (n - 1))`); `m` processes decoding on the device at
/// once get `cross_process_efficiency / m` of it each for the step's part that batches, and
/// `cross_process_attention_efficiency / m` for the attention (the same where that is unset).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DeviceSharing {
    /// Cost of each extra stream batched in one process.
    pub batch_penalty: f64,
    /// Share of the device left when several processes time-slice it.
    pub cross_process_efficiency: f64,
    /// The same for the streams' attention, where it differs (`harness calibrate` measures it:
    /// on this machine's CPU servers two processes slow each other's weights twice over and
    /// their attention hardly at all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_process_attention_efficiency: Option<f64>,
    /// How much dearer each stream's attention is per other stream of its batch: the attention
    /// part of a step is `X (1 + attention_batch_penalty (n - 1))`. 0 on the simulator's devices;
    /// a twin's tolerance moves it (harness `calibrate::Tolerance`: the four-slot CPU server's
    /// four streams after 2,441 tokens of context kept 0.24-0.26 of their solo speed where
    /// attention as dear as alone gives 0.27).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub attention_batch_penalty: f64,
}

impl DeviceSharing {
    /// Speed of each stream of a batch of `n` streams of equal attention `attention` when `m`
    /// processes decode on the device, as a fraction of its solo speed: [`Self::stream_speed`]
    /// with every stream's attention the same.
    ///
    /// A step of a batch costs the weights' part once, slowed by `batch_penalty` per extra
    /// stream, plus each stream's attention over its own context, which does not batch: one
    /// stream alone takes `1 + x`, `n` take `1 + p (n - 1) + n x`. Measured on the CPU build,
    /// where attention at 1,000 tokens of context is 3.4 times the rest: k streams of
    /// 1,000-token answers ran at 0.63, 0.42 and 0.32 of solo speed (k = 2, 3, 4), which a
    /// constant p fits only as 0.59-0.71, and this form with p = 0.19 fits all three (issue 37).
    pub fn speed(&self, n: usize, m: usize, attention: f64) -> f64 {
        let x = if attention.is_finite() { attention.max(0.0) } else { 0.0 };
        self.stream_speed(n, m, x, n.max(1) as f64 * x)
    }

    /// Speed of one stream whose own attention is `own`, in a batch of `n` streams whose
    /// attention sums to `total` (its own included), when `m` processes decode on the device:
    /// the batch steps all its streams together, each step costing `1 + p (n - 1) + total`,
    /// where this stream alone takes `1 + own`. A stream of a short context batched with long
    /// ones is held to their step, not to the mean.
    ///
    /// With `m` processes each part of the step is slowed by its own share: the part that
    /// batches by `m / cross_process_efficiency`, the attention by
    /// `m / cross_process_attention_efficiency`.
    pub fn stream_speed(&self, n: usize, m: usize, own: f64, total: f64) -> f64 {
        let clean = |x: f64| if x.is_finite() { x.max(0.0) } else { 0.0 };
        let (own, total) = (clean(own), clean(total));
        let extra = n.saturating_sub(1) as f64;
        let (weights, attention) =
            (1.0 + self.batch_penalty * extra, total.max(own) * (1.0 + self.attention_batch_penalty * extra));
        let e = self.cross_process_efficiency;
        match self.cross_process_attention_efficiency {
            Some(e_attention) if m > 1 => (1.0 + own) / (m as f64 * (weights / e + attention / e_attention)),
            _ => (1.0 + own) / (weights + attention) * if m <= 1 { 1.0 } else { e / m as f64 },
        }
    }
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

fn one() -> f64 {
    1.0
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

fn is_zero(v: &u64) -> bool {
    *v == 0
}
