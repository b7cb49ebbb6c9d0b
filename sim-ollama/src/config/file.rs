//! The configuration file's schema: the model catalogue with each model's latency profile,
//! the devices and instances of a deployment, server-wide settings, the compiled-in catalogue
//! and presets.

use crate::dist::{DistKind, DistSpec};

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The default catalogue, compiled in so the simulator needs no files at run time.
pub const DEFAULT_CATALOGUE_TOML: &str = include_str!("../../fixtures/catalogue.toml");

/// Deployment presets, compiled in: (name, TOML). See `sim-ollama/fixtures/presets/`.
pub const PRESETS: &[(&str, &str)] = &[
    ("single-1slot", include_str!("../../fixtures/presets/single-1slot.toml")),
    ("single-1slot-nocache", include_str!("../../fixtures/presets/single-1slot-nocache.toml")),
    ("single-4slots", include_str!("../../fixtures/presets/single-4slots.toml")),
    ("dual-one-device", include_str!("../../fixtures/presets/dual-one-device.toml")),
    ("dual-two-devices", include_str!("../../fixtures/presets/dual-two-devices.toml")),
    ("mixed-three", include_str!("../../fixtures/presets/mixed-three.toml")),
    ("ideal", include_str!("../../fixtures/presets/ideal.toml")),
    ("pitfall-max-queue", include_str!("../../fixtures/presets/pitfall-max-queue.toml")),
    ("pitfall-one-slot-architecture", include_str!("../../fixtures/presets/pitfall-one-slot-architecture.toml")),
    ("pitfall-context-memory", include_str!("../../fixtures/presets/pitfall-context-memory.toml")),
    ("pitfall-max-loaded-models", include_str!("../../fixtures/presets/pitfall-max-loaded-models.toml")),
    ("pitfall-one-copy", include_str!("../../fixtures/presets/pitfall-one-copy.toml")),
];

/// A preset's configuration by name.
pub fn preset(name: &str) -> Result<ConfigFile, ConfigError> {
    let (_, text) = PRESETS.iter().find(|(n, _)| *n == name).ok_or_else(|| {
        let names: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
        ConfigError::Invalid(format!("unknown preset {name:?}; presets: {}", names.join(", ")))
    })?;
    ConfigFile::from_toml(text).map_err(|e| ConfigError::Parse(format!("preset {name}: {e}")))
}

/// Default memory budget of the trace's finished requests, MiB.
pub const DEFAULT_TRACE_BUDGET_MB: u64 = 256;

/// Default limit on a request body, in bytes: larger bodies get 413.
pub const DEFAULT_BODY_LIMIT: usize = 32 * 1024 * 1024;

/// The version string `/api/version` reports: the release the captures in
/// `reference/real-ollama` came from.
pub const DEFAULT_VERSION: &str = "0.33.0-rc2";

/// Errors reading or checking a configuration.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The TOML did not parse or did not match the schema.
    Parse(String),
    /// A value is out of range or inconsistent; the text names the field.
    Invalid(String),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Io { path, source } => {
                write!(f, "sim-ollama config: cannot read {path}: {source}")
            }
            ConfigError::Parse(e) => write!(f, "sim-ollama config: {e}"),
            ConfigError::Invalid(e) => write!(f, "sim-ollama config: {e}"),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Inter-token gap shape: its mean is fixed by the decode rate, its spread by `cv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Jitter {
    /// Shape of the gap distribution.
    pub dist: DistKind,
    /// Coefficient of variation of a gap.
    #[serde(default)]
    pub cv: f64,
}

/// How long each phase of a request takes for one model, alone on its device.
/// All times are modelled milliseconds, before the global time scale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Starting a runner: every load, the first or a reload (for new runner options, after an
    /// eviction or an expiry), starts a new runner process in the real server
    /// (`server/sched.go` v0.33.0-rc2: `load` -> `llm.NewLlamaServer`), and pays this.
    pub load_ms: DistSpec,
    /// A first load in the process that costs more than `load_ms` (weights not yet in the page
    /// cache); `load_ms` when absent.
    #[serde(default)]
    pub cold_load_ms: Option<DistSpec>,
    /// Per-call overhead on a loaded runner: the real scheduler pings the runner's health on
    /// every request that finds its model loaded (`server/sched.go` v0.33.0-rc2: `GetRunner`
    /// -> `needsReload` -> `runner.llama.Ping`). It is in the request's `load_duration` and
    /// its time to first token, before it waits for a slot. Zero when absent, and not applied
    /// to a replayed profile (its recorded times to first token hold it).
    #[serde(default = "zero_dist")]
    pub call_overhead_ms: DistSpec,
    /// Prompt evaluation rate, tokens per second, at an empty context: TTFT grows with prompt
    /// length.
    pub prompt_tokens_per_s: f64,
    /// How much slower each prompt token evaluates per 1,000 tokens of context before it, as
    /// [`Profile::decode_slowdown_per_1k`] for the answer's: a prompt token at position `c` takes
    /// `(1 + prompt_slowdown_per_1k * c / 1000) / prompt_tokens_per_s` ([`Profile::prompt_ms`]).
    /// Each prompt token attends to the ones before it, so a prompt's time grows faster than
    /// its length: on the CPU build of ../shared/tools/real-ollama the tiny model evaluated
    /// 2,564 tokens at 35 µs each and 522 at 24 µs; a 34 M-parameter model took 15 times as long
    /// for 9 times the tokens. 0 (the default): a prompt's time in proportion to its length.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prompt_slowdown_per_1k: f64,
    /// Latency before prompt evaluation that the real server reports in no duration field
    /// but `total_duration` (request setup, sampler warm-up): part of time-to-first-token.
    #[serde(default = "zero_dist")]
    pub first_token_ms: DistSpec,
    /// Decode rate of one stream alone on its device, tokens per second.
    pub decode_tokens_per_s: f64,
    /// Spread of the inter-token gaps around `1 / decode_tokens_per_s`.
    pub inter_token: Jitter,
    /// How much slower each token decodes per 1,000 tokens of context before it (the prompt
    /// and the tokens already generated): a token at context `c` takes
    /// `(1 + decode_slowdown_per_1k * c / 1000) / decode_tokens_per_s`, so
    /// `decode_tokens_per_s` is the speed at an empty context. Attention reads the whole
    /// context for every token: on the CPU build of ../shared/tools/real-ollama a token at
    /// position 1,400 took three times one at position 100. 0 (the default): a constant speed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub decode_slowdown_per_1k: f64,
    /// Number of generated tokens when the request sets no `num_predict`.
    pub output_tokens: DistSpec,
    /// Tokens of reasoning a thinking model generates before its answer when `think` is on
    /// (the default for models with the `thinking` capability): sent as `thinking` natively and
    /// `reasoning` on `/v1`, decoded at the same rate, counted in `eval_count` and within
    /// `num_predict`. Halved at `think: "low"`, doubled at `"high"` (the simulator's choice).
    /// Absent: the model never reasons.
    #[serde(default)]
    pub thinking_tokens: Option<DistSpec>,
    /// Tokens the chat template adds around every prompt.
    #[serde(default)]
    pub template_tokens: u32,
    /// Letters or digits one token of the model's tokenizer holds
    /// ([`crate::tokenizer::Tokenizer`]): prompt counts (`prompt_eval_count`, the context they
    /// fill, truncation, the prompt cache) and the pieces an answer is generated in. 6 (the
    /// default) lands where a 32k-vocabulary BPE tokenizer lands on English, one token a
    /// short word; a model of a small vocabulary holds fewer (the real tiny model of
    /// ../shared/tools/real-ollama, 301 tokens, about 1.2: `harness calibrate` fits it from
    /// the server's `prompt_eval_count`). At least 1.
    #[serde(default = "default_letters_per_token", skip_serializing_if = "is_default_letters_per_token")]
    pub letters_per_token: f64,
    /// An empirical profile recorded from a real server (`harness record`): when present,
    /// time to first token, inter-token gaps and answer lengths are drawn from it (seeded),
    /// instead of from the distributions above. Loads still use `load_ms`.
    #[serde(default)]
    pub replay: Option<Replay>,
    /// NDJSON file written by `harness record` to read `replay` from (relative to the working
    /// directory).
    #[serde(default)]
    pub replay_file: Option<String>,
}

/// Recorded timings of a real server: per call, the time to first token, the gaps between
/// tokens, and the number of tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Replay {
    /// Time to first token of each recorded call, ms (warm calls: no load).
    pub ttft_ms: Vec<f64>,
    /// Every inter-token gap of every call, ms.
    pub gaps_ms: Vec<f64>,
    /// Tokens of each call.
    pub tokens: Vec<f64>,
}

impl Replay {
    /// Reads the NDJSON `harness record` writes: one call per line with `ttft_ms`, `gaps_ms`
    /// and `tokens` (other fields are ignored).
    pub fn from_ndjson(text: &str) -> Result<Replay, String> {
        let mut r = Replay::default();
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
            let num = |k: &str| {
                v.get(k).and_then(serde_json::Value::as_f64).ok_or_else(|| format!("line {}: no number {k:?}", i + 1))
            };
            r.ttft_ms.push(num("ttft_ms")?);
            r.tokens.push(num("tokens")?);
            let gaps = v
                .get("gaps_ms")
                .and_then(serde_json::Value::as_array)
                .ok_or_else(|| format!("line {}: no gaps_ms array", i + 1))?;
            r.gaps_ms.extend(gaps.iter().filter_map(serde_json::Value::as_f64));
        }
        if r.ttft_ms.is_empty() || r.gaps_ms.is_empty() {
            return Err("no recorded calls with tokens".into());
        }
        Ok(r)
    }
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn default_letters_per_token() -> f64 {
    crate::tokenizer::LETTERS_PER_TOKEN
}

fn is_default_letters_per_token(x: &f64) -> bool {
    *x == crate::tokenizer::LETTERS_PER_TOKEN
}

fn zero_dist() -> DistSpec {
    DistSpec::constant(0.0)
}

/// [`Profile::prompt_ms`] of a prompt speed and slowdown given apart (what `harness calibrate`
/// fits them with): `tokens` at `tokens_per_s` at an empty context, each slower by
/// `slowdown_per_1k` per 1,000 tokens before it, after `before` already in the context.
pub fn prompt_ms(tokens_per_s: f64, slowdown_per_1k: f64, before: f64, tokens: f64) -> f64 {
    let mean_position = before + (tokens - 1.0).max(0.0) / 2.0;
    tokens / tokens_per_s * 1000.0 * (1.0 + slowdown_per_1k * mean_position / 1000.0)
}

impl Profile {
    /// Modelled milliseconds (before any time scale) to evaluate `tokens` prompt tokens that
    /// follow `before` tokens already in the context (a slot's cached prefix): each at its
    /// position's speed ([`Profile::prompt_slowdown_per_1k`]).
    pub fn prompt_ms(&self, before: f64, tokens: f64) -> f64 {
        prompt_ms(self.prompt_tokens_per_s, self.prompt_slowdown_per_1k, before, tokens)
    }

    /// The model's tokenizer ([`Profile::letters_per_token`]).
    pub fn tokenizer(&self) -> crate::tokenizer::Tokenizer {
        crate::tokenizer::Tokenizer::new(self.letters_per_token)
    }

    pub(super) fn validate(&self, model: &str) -> Result<(), String> {
        let f = |field: &str| format!("model {model:?}: profile.{field}");
        self.load_ms.validate(&f("load_ms"))?;
        self.call_overhead_ms.validate(&f("call_overhead_ms"))?;
        if let Some(c) = &self.cold_load_ms {
            c.validate(&f("cold_load_ms"))?;
        }
        self.first_token_ms.validate(&f("first_token_ms"))?;
        self.output_tokens.validate(&f("output_tokens"))?;
        // Rates of +inf are allowed: zero-latency models for throughput tests.
        if self.prompt_tokens_per_s.is_nan() || self.prompt_tokens_per_s <= 0.0 {
            return Err(format!("{} must be > 0", f("prompt_tokens_per_s")));
        }
        if self.decode_tokens_per_s.is_nan() || self.decode_tokens_per_s <= 0.0 {
            return Err(format!("{} must be > 0", f("decode_tokens_per_s")));
        }
        for (name, v) in [
            ("decode_slowdown_per_1k", self.decode_slowdown_per_1k),
            ("prompt_slowdown_per_1k", self.prompt_slowdown_per_1k),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{} must be a number >= 0", f(name)));
            }
        }
        if !(self.letters_per_token.is_finite() && self.letters_per_token >= 1.0) {
            return Err(format!("{} must be a number >= 1", f("letters_per_token")));
        }
        if !self.inter_token.cv.is_finite() || self.inter_token.cv < 0.0 {
            return Err(format!("{} must be >= 0", f("inter_token.cv")));
        }
        Ok(())
    }
}

/// One model of the catalogue, with what `/api/tags` and `/api/show` report about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Full name with tag, `gemma3:latest`.
    pub name: String,
    /// Architecture family, `gemma3`.
    pub family: String,
    /// `4.3B`.
    pub parameter_size: String,
    /// `Q4_K_M`.
    pub quantization_level: String,
    /// Size on disk, bytes.
    pub size: u64,
    /// Size in memory when loaded, bytes (what `/api/ps` reports); defaults to `size`.
    #[serde(default)]
    pub size_loaded: Option<u64>,
    /// 64 hex digits; derived from the name when absent.
    #[serde(default)]
    pub digest: Option<String>,
    /// Training context length.
    pub context_length: u64,
    /// Width of the model's embeddings (and of `/api/embed` vectors for embedding models).
    pub embedding_length: u64,
    /// Bytes of KV cache per token of context, as the real estimate computes it
    /// (`PredictServerVRAM`, llm/llama_server.go: 2 (K and V) x layers x KV heads x head size x
    /// 2 bytes); estimated as `embedding_length x 16` when absent.
    #[serde(default)]
    pub kv_bytes_per_token: Option<u64>,
    /// Subset of `completion, tools, insert, vision, embedding, thinking`.
    pub capabilities: Vec<String>,
    /// The chat template `/api/show` reports.
    #[serde(default)]
    pub template: String,
    /// The model file's GGUF metadata as `/api/show` reports it in `model_info` (keys as the
    /// file names them, `llama.block_count`): what is given here replaces what the simulator
    /// derives from the entry (see `sim-ollama/src/gguf.rs`), key by key.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub model_info: serde_json::Map<String, serde_json::Value>,
    /// The Modelfile's `PARAMETER`s, `[name, value]` in order (`["stop", "<|eot_id|>"]`), as
    /// `/api/show` lists them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<(String, String)>,
    /// The model's license text (its license layer), as `/api/show` reports it; none when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub license: String,
    /// The latency profile.
    pub profile: Profile,
}

/// A GPU (or CPU) that instances sit on. Streams decoding at the same time on one device share
/// its capacity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    /// Name used by instances to refer to it.
    pub name: String,
    /// Fraction of the device's capacity left when several server processes time-slice it
    /// (1.0 = no switching cost). The shared data (two Ollama processes on one GPU, 41-50
    /// tok/s each while both decode, against 114.5 alone) gives about 0.78. Up to 2: above 1
    /// when one process alone leaves part of the device idle, as a CPU runner on a few cores
    /// can (`harness calibrate` measured 1.37 for two real servers sharing this machine's 2
    /// cores: each kept 69 % of its solo speed).
    #[serde(default = "default_cross_process_efficiency")]
    pub cross_process_efficiency: f64,
    /// The same share for the streams' attention (each token's work over its own context, the
    /// profile's `decode_slowdown_per_1k`), where it differs from the rest's: with `m` processes
    /// decoding, a token's weights take `m / cross_process_efficiency` of their solo time and
    /// its attention `m / cross_process_attention_efficiency`. Unset: the same as
    /// `cross_process_efficiency` (a GPU time-slices all of a process's work). Two real servers
    /// sharing this machine's 2 cores: the weights slowed 2.2 times (0.93), the attention not
    /// at all (2.1), so their short-context calls kept 59-64 % of their solo speeds beside each
    /// other and their 3,000-token answers 91 % (`harness calibrate` fits it from the pairs'
    /// tokens against their context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_process_attention_efficiency: Option<f64>,
    /// Cost of each extra stream batched inside one process: with `n` streams in one batch each
    /// runs at `1 / (1 + batch_penalty * (n - 1))` of its solo speed. 0 = perfect batching,
    /// 1 = no better than time-slicing.
    #[serde(default = "default_batch_penalty")]
    pub batch_penalty: f64,
    /// Memory (VRAM) in GiB, shared by every runner of every instance on the device. When set,
    /// the scheduler evicts by memory as the real one does (a new model must fit in 80 % of
    /// the free memory when others are loaded) and the default `num_ctx` follows the real
    /// server's tiers (4096 below 23 GiB, 32768 below 47 GiB, 262144 above). Absent: memory is
    /// not modelled (every model fits) and `num_ctx` defaults to 4096.
    #[serde(default)]
    pub memory_gib: Option<f64>,
    /// How long an unload waits for the GPU to report its memory free again before a request
    /// that waited for the unload can load (the real `waitForVRAMRecovery`, server/sched.go
    /// 1441-1499, on discrete GPUs only: polled every 250 ms, "typical convergence is 0.5-1.5s",
    /// 5 s at most). Modelled milliseconds; 0 (the default) for integrated GPUs, Metal and CPUs.
    #[serde(default)]
    pub vram_release_ms: f64,
    /// Speed of copying a slot's KV cache between device and host memory, GiB/s, when the
    /// host prompt cache saves or restores a prompt (`llama_state_seq_get_data` /
    /// `set_data`). An assumption, not a measurement: 10 GiB/s is a PCIe 4.0 x16 link's
    /// practical rate. Copies take modelled time on the request that caused them.
    #[serde(default = "default_cache_copy_gib_s")]
    pub cache_copy_gib_s: f64,
    /// The device is the machine's CPU, the server has no GPU: nothing is in VRAM, and
    /// `/api/ps` reports `size_vram` 0, as a CPU-only Ollama does (seen on the CPU build of
    /// ../shared/tools/real-ollama).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cpu: bool,
    /// The device's speed relative to the model profiles': every stream on it (its first
    /// token, its prompt, each token's gap) takes `1 / speed` of the profile's time. 1 (the
    /// default): as the profile says; 0.5: a device half as fast (a smaller GPU beside a
    /// larger one). `harness calibrate` sets it where the servers decoded at different speeds
    /// alone.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub speed: f64,
    /// The device's speed at a stream's start (its call overhead and its prompt: time to first
    /// token) where that differs from `speed`, which then scales only the tokens' gaps: a
    /// device whose prompt processing (compute) and decoding (memory bandwidth) are not
    /// slower by one factor. Absent: `speed`. `harness calibrate` sets it where the servers'
    /// times to first token of one long prompt differed otherwise than their decoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_speed: Option<f64>,
}

fn one() -> f64 {
    1.0
}

fn is_one(x: &f64) -> bool {
    *x == 1.0
}

impl DeviceSpec {
    /// How it shares its capacity between streams (what the trace tells the judge).
    pub fn sharing(&self) -> crate::trace::DeviceSharing {
        crate::trace::DeviceSharing {
            batch_penalty: self.batch_penalty,
            cross_process_efficiency: self.cross_process_efficiency,
            cross_process_attention_efficiency: self.cross_process_attention_efficiency,
            // A simulated device's attention batches as attention that never batches: the
            // form every measurement here fits (a twin's tolerance moves it: harness).
            attention_batch_penalty: 0.0,
        }
    }

    /// A device with the default sharing figures and no memory model.
    pub fn new(name: impl Into<String>) -> Self {
        DeviceSpec {
            name: name.into(),
            cross_process_efficiency: default_cross_process_efficiency(),
            cross_process_attention_efficiency: None,
            batch_penalty: default_batch_penalty(),
            memory_gib: None,
            vram_release_ms: 0.0,
            cache_copy_gib_s: default_cache_copy_gib_s(),
            cpu: false,
            speed: 1.0,
            prompt_speed: None,
        }
    }

    /// The device's memory in bytes, when modelled.
    pub fn memory_bytes(&self) -> Option<u64> {
        self.memory_gib.map(|g| (g * GIB as f64) as u64)
    }

    /// The default `num_ctx` of a server on this device: the real server's tiers by total VRAM
    /// (server/routes.go v0.33.0-rc2 2045-2057; thresholds 47 and 23 GiB "to account for small
    /// differences in the exact value").
    pub fn default_num_ctx(&self) -> u64 {
        match self.memory_bytes() {
            Some(m) if m >= 47 * GIB => 262_144,
            Some(m) if m >= 23 * GIB => 32_768,
            _ => 4096,
        }
    }
}

/// One gibibyte.
pub(crate) const GIB: u64 = 1 << 30;

fn default_cross_process_efficiency() -> f64 {
    0.78
}
fn default_batch_penalty() -> f64 {
    0.15
}
fn default_cache_copy_gib_s() -> f64 {
    10.0
}
/// llama-server's default `--cache-ram`.
pub(crate) const DEFAULT_CACHE_RAM_MIB: u64 = 8192;

/// One simulated Ollama server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct InstanceSpec {
    /// Device name; instances without one get a device of their own.
    #[serde(default)]
    pub device: Option<String>,
    /// `OLLAMA_NUM_PARALLEL` for this instance (default: the server-wide value).
    #[serde(default)]
    pub num_parallel: Option<usize>,
    /// `OLLAMA_MAX_QUEUE` for this instance (default: the server-wide value).
    #[serde(default)]
    pub max_queue: Option<usize>,
    /// `OLLAMA_MAX_LOADED_MODELS` for this instance (default: the server-wide value).
    #[serde(default)]
    pub max_loaded_models: Option<usize>,
    /// llama-server's host prompt cache for this instance's runners, MiB (default: the
    /// server-wide value). See [`ServerSection::cache_ram_mib`].
    #[serde(default)]
    pub cache_ram_mib: Option<u64>,
}

/// Server-wide settings of a configuration file's `[server]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// Master seed.
    pub seed: Option<u64>,
    /// Multiplies every modelled duration (0.01 makes a 10 s call take 100 ms).
    pub time_scale: Option<f64>,
    /// Deterministic timestamps and durations.
    pub frozen_clock: Option<bool>,
    /// Default `OLLAMA_NUM_PARALLEL`.
    pub num_parallel: Option<usize>,
    /// Default `OLLAMA_MAX_QUEUE`.
    pub max_queue: Option<usize>,
    /// Default `OLLAMA_MAX_LOADED_MODELS` (0 = automatic: 3).
    pub max_loaded_models: Option<usize>,
    /// llama-server's host prompt cache, MiB: where a slot's prompt is saved when another
    /// request takes the slot, to be restored when its conversation comes back (`--cache-ram`;
    /// Ollama 0.33 passes none, so llama-server's default 8192 applies). 0 turns it off: a
    /// prompt evicted from its slot is then evaluated again in full.
    pub cache_ram_mib: Option<u64>,
    /// Default `OLLAMA_KEEP_ALIVE`, as a Go duration or integer seconds.
    pub keep_alive: Option<String>,
    /// Request body limit in bytes.
    pub body_limit: Option<usize>,
    /// Worker threads of the simulator's own runtime.
    pub worker_threads: Option<usize>,
    /// Memory the trace may hold for finished requests, MiB (default 256; 0 keeps none:
    /// the trace then shows only requests in flight).
    pub trace_budget_mb: Option<u64>,
    /// A catalogue model that answers for every name the catalogue lacks: the first request
    /// naming such a model (chat, generate, embed, show, pull, copy, on either API) installs a
    /// copy of this one under that name, as a pull would, instead of `model "x" not found`.
    /// For programs whose model the catalogue does not know; off by default.
    pub stand_in: Option<String>,
}

/// A configuration file: any subset of these tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Server-wide settings.
    #[serde(default)]
    pub server: ServerSection,
    /// Devices.
    #[serde(default)]
    pub devices: Vec<DeviceSpec>,
    /// Instances; when present, their count is the default number of instances.
    #[serde(default)]
    pub instances: Vec<InstanceSpec>,
    /// Models: replace same-named catalogue entries and add new ones.
    #[serde(default)]
    pub models: Vec<ModelSpec>,
    /// Drop the default catalogue and use only `models`.
    #[serde(default)]
    pub replace_catalogue: bool,
    /// Injected faults.
    #[serde(default)]
    pub faults: Vec<crate::faults::FaultRule>,
    /// Scripted turns (see [`advanced::script`](crate::advanced::script)).
    #[serde(default)]
    pub script: Vec<crate::script::ScriptRule>,
    /// Noise on purpose (see [`advanced::noise`](crate::advanced::noise)): off unless given.
    #[serde(default)]
    pub noise: Option<crate::noise::NoiseSpec>,
    /// What measured this configuration, when `harness calibrate` wrote it (the servers, the
    /// date, every figure with its spread): read by `harness calibrate --check`, ignored by
    /// the simulator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<toml::Table>,
}

impl ConfigFile {
    /// Parses TOML.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))
    }

    /// Reads a TOML file.
    pub fn from_path(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Io { path: path.display().to_string(), source })?;
        Self::from_toml(&text).map_err(|e| match e {
            ConfigError::Parse(m) => ConfigError::Parse(format!("{}: {m}", path.display())),
            other => other,
        })
    }
}

/// The default catalogue.
pub fn default_catalogue() -> Vec<ModelSpec> {
    // The compiled-in file is checked by a unit test, so this cannot fail at run time.
    ConfigFile::from_toml(DEFAULT_CATALOGUE_TOML).map(|f| f.models).unwrap_or_default()
}
