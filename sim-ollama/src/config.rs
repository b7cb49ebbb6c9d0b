//! Configuration: the model catalogue with each model's latency profile, the devices and
//! instances of a deployment, and server-wide settings. Everything can be written in TOML
//! (`sim-ollama/fixtures/catalogue.toml` is the default catalogue; `sim-ollama/fixtures/presets/*.toml` are
//! deployments) and overridden by the builder or the command line.

use crate::dist::{DistKind, DistSpec};
use crate::keepalive::KeepAlive;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The default catalogue, compiled in so the simulator needs no files at run time.
pub const DEFAULT_CATALOGUE_TOML: &str = include_str!("../fixtures/catalogue.toml");

/// Deployment presets, compiled in: (name, TOML). See `sim-ollama/fixtures/presets/`.
pub const PRESETS: &[(&str, &str)] = &[
    ("single-1slot", include_str!("../fixtures/presets/single-1slot.toml")),
    ("single-1slot-nocache", include_str!("../fixtures/presets/single-1slot-nocache.toml")),
    ("single-4slots", include_str!("../fixtures/presets/single-4slots.toml")),
    ("dual-one-device", include_str!("../fixtures/presets/dual-one-device.toml")),
    ("dual-two-devices", include_str!("../fixtures/presets/dual-two-devices.toml")),
    ("ideal", include_str!("../fixtures/presets/ideal.toml")),
    ("pitfall-max-queue", include_str!("../fixtures/presets/pitfall-max-queue.toml")),
    ("pitfall-one-slot-architecture", include_str!("../fixtures/presets/pitfall-one-slot-architecture.toml")),
    ("pitfall-context-memory", include_str!("../fixtures/presets/pitfall-context-memory.toml")),
    ("pitfall-max-loaded-models", include_str!("../fixtures/presets/pitfall-max-loaded-models.toml")),
    ("pitfall-one-copy", include_str!("../fixtures/presets/pitfall-one-copy.toml")),
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
    /// Prompt evaluation rate, tokens per second: TTFT grows with prompt length.
    pub prompt_tokens_per_s: f64,
    /// Latency before prompt evaluation that the real server reports in no duration field
    /// but `total_duration` (request setup, sampler warm-up): part of time-to-first-token.
    #[serde(default = "zero_dist")]
    pub first_token_ms: DistSpec,
    /// Decode rate of one stream alone on its device, tokens per second.
    pub decode_tokens_per_s: f64,
    /// Spread of the inter-token gaps around `1 / decode_tokens_per_s`.
    pub inter_token: Jitter,
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

fn zero_dist() -> DistSpec {
    DistSpec::constant(0.0)
}

impl Profile {
    fn validate(&self, model: &str) -> Result<(), String> {
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
    /// The latency profile.
    pub profile: Profile,
}

impl ModelSpec {
    /// A completion model whose only time is its tokens: `decode_tokens_per_s` (`f64::INFINITY`:
    /// none), constant gaps, `output_tokens` per answer, no load, per-call or first-token time,
    /// prompts evaluated at a billion tokens a second, a context of a million. What benchmarks
    /// and pacing tests measure the simulator's own timing against.
    pub fn paced(name: &str, decode_tokens_per_s: f64, output_tokens: u32) -> ModelSpec {
        ModelSpec {
            name: name.to_string(),
            family: "llama".into(),
            parameter_size: "1B".into(),
            quantization_level: "Q4_0".into(),
            size: 1000,
            size_loaded: None,
            digest: None,
            context_length: 1_000_000,
            embedding_length: 64,
            kv_bytes_per_token: None,
            capabilities: vec!["completion".into()],
            template: String::new(),
            model_info: serde_json::Map::new(),
            parameters: Vec::new(),
            profile: Profile {
                load_ms: DistSpec::constant(0.0),
                cold_load_ms: None,
                call_overhead_ms: DistSpec::constant(0.0),
                prompt_tokens_per_s: 1e9,
                first_token_ms: DistSpec::constant(0.0),
                decode_tokens_per_s,
                inter_token: Jitter { dist: DistKind::Constant, cv: 0.0 },
                output_tokens: DistSpec::constant(f64::from(output_tokens)),
                thinking_tokens: None,
                template_tokens: 0,
                replay: None,
                replay_file: None,
            },
        }
    }

    /// Whether the model has a capability (`completion`, `tools`, `embedding`, ...).
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }

    /// What a call costs alone on an idle device with its runner loaded, modelled milliseconds
    /// (before any time scale): the mean per-call and first-token overheads, the prompt's
    /// evaluation (with the chat template's tokens)
    /// and `tokens` mean token gaps. Replayed profiles use their recorded means. Live mode
    /// sizes local work by it (a scenario's local work keeps its share of a call).
    pub fn solo_call_ms(&self, prompt: &str, tokens: u32) -> f64 {
        let p = &self.profile;
        let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
        if let Some(r) = &p.replay {
            return mean(&r.ttft_ms) + mean(&r.gaps_ms) * f64::from(tokens.saturating_sub(1));
        }
        let prompt_tokens = crate::tokens::count_tokens(prompt) + p.template_tokens;
        let decode = if p.decode_tokens_per_s > 0.0 { 1000.0 / p.decode_tokens_per_s } else { 0.0 };
        p.call_overhead_ms.mean
            + p.first_token_ms.mean
            + f64::from(prompt_tokens) / p.prompt_tokens_per_s * 1000.0
            + decode * f64::from(tokens)
    }

    /// The memory the real scheduler predicts for a runner of this model before it starts it
    /// (`PredictServerVRAM`, llm/llama_server.go v0.33.0-rc2 2681-2701, with the context of
    /// `effectiveLlamaServerContext`, server/sched.go 793-795): the weights (the file's size)
    /// plus the KV cache of `num_ctx` tokens for each of `num_parallel` slots.
    pub fn predicted_memory(&self, num_ctx: u64, num_parallel: usize) -> u64 {
        let kv = self.kv_bytes_per_token();
        self.size.saturating_add(kv.saturating_mul(num_ctx).saturating_mul(num_parallel.max(1) as u64))
    }

    /// KV cache bytes per token: the catalogue's figure, else 16 bytes per embedding value.
    pub fn kv_bytes_per_token(&self) -> u64 {
        self.kv_bytes_per_token.unwrap_or(self.embedding_length.saturating_mul(16)).max(1)
    }

    /// The digest: configured, or a stable one derived from the name.
    pub fn digest(&self) -> String {
        self.digest.clone().unwrap_or_else(|| {
            let mut out = String::with_capacity(64);
            let mut h = crate::seed::fnv1a(self.name.as_bytes());
            for _ in 0..4 {
                h = crate::seed::mix(h);
                out.push_str(&format!("{h:016x}"));
            }
            out
        })
    }

    fn validate(&self) -> Result<(), String> {
        if crate::names::Name::parse(&self.name).is_none() {
            return Err(format!("model {:?}: not a valid model name", self.name));
        }
        if self.embedding_length == 0 {
            return Err(format!("model {:?}: embedding_length must be > 0", self.name));
        }
        self.profile.validate(&self.name)
    }
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
    /// tok/s each while both decode, against 114.5 alone) gives about 0.78.
    #[serde(default = "default_cross_process_efficiency")]
    pub cross_process_efficiency: f64,
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
}

impl DeviceSpec {
    /// How it shares its capacity between streams (what the trace tells the judge).
    pub fn sharing(&self) -> crate::trace::DeviceSharing {
        crate::trace::DeviceSharing {
            batch_penalty: self.batch_penalty,
            cross_process_efficiency: self.cross_process_efficiency,
        }
    }

    /// A device with the default sharing figures and no memory model.
    pub fn new(name: impl Into<String>) -> Self {
        DeviceSpec {
            name: name.into(),
            cross_process_efficiency: default_cross_process_efficiency(),
            batch_penalty: default_batch_penalty(),
            memory_gib: None,
            vram_release_ms: 0.0,
            cache_copy_gib_s: default_cache_copy_gib_s(),
            cpu: false,
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
    /// Scripted turns (see [`crate::script`]).
    #[serde(default)]
    pub script: Vec<crate::script::ScriptRule>,
    /// Noise on purpose (see [`crate::noise`]): off unless given.
    #[serde(default)]
    pub noise: Option<crate::noise::NoiseSpec>,
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

/// The resolved configuration a simulator runs with. Defaults:
/// seed 0, time scale 1.0, real clock, one instance on its own device, `num_parallel` 1,
/// `max_queue` 512, `max_loaded_models` 3, keep-alive 5 min, body limit 32 MiB, trace budget
/// 256 MiB, version
/// `0.33.0-rc2` (the server the captures in `reference/real-ollama` came from), 2 worker threads, the default catalogue.
#[derive(Debug, Clone)]
pub(crate) struct SimConfig {
    pub(crate) seed: u64,
    pub(crate) time_scale: f64,
    pub(crate) frozen_clock: bool,
    pub(crate) models: Vec<ModelSpec>,
    pub(crate) devices: Vec<DeviceSpec>,
    /// One per instance, with every option resolved.
    pub(crate) instances: Vec<ResolvedInstance>,
    pub(crate) keep_alive: KeepAlive,
    pub(crate) body_limit: usize,
    pub(crate) version: String,
    pub(crate) worker_threads: usize,
    pub(crate) faults: Vec<crate::faults::FaultRule>,
    pub(crate) script: Vec<crate::script::ScriptRule>,
    pub(crate) trace_budget: usize,
    pub(crate) noise: crate::noise::NoiseSpec,
}

/// An instance with its device index and limits resolved.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedInstance {
    pub(crate) device: usize,
    pub(crate) num_parallel: usize,
    pub(crate) max_queue: usize,
    pub(crate) max_loaded_models: usize,
    /// Host prompt cache per runner, bytes (0: off).
    pub(crate) cache_ram: u64,
}

/// Builder-level inputs before resolution.
#[derive(Debug, Clone, Default)]
pub(crate) struct RawConfig {
    pub(crate) file: ConfigFile,
    pub(crate) instances: Option<usize>,
    pub(crate) seed: Option<u64>,
    pub(crate) time_scale: Option<f64>,
    pub(crate) frozen_clock: Option<bool>,
    pub(crate) num_parallel: Option<usize>,
    pub(crate) max_queue: Option<usize>,
    pub(crate) max_loaded_models: Option<usize>,
    pub(crate) cache_ram_mib: Option<u64>,
    pub(crate) keep_alive: Option<KeepAlive>,
    pub(crate) body_limit: Option<usize>,
    pub(crate) extra_models: Vec<ModelSpec>,
    pub(crate) worker_threads: Option<usize>,
    pub(crate) faults: Vec<crate::faults::FaultRule>,
    pub(crate) script: Vec<crate::script::ScriptRule>,
    pub(crate) trace_budget_mb: Option<u64>,
    pub(crate) noise: Option<crate::noise::NoiseSpec>,
}

impl RawConfig {
    /// Merges defaults, file, and explicit overrides (in that order) and checks invariants.
    pub(crate) fn resolve(self) -> Result<SimConfig, ConfigError> {
        let invalid = ConfigError::Invalid;
        let f = &self.file;
        let seed = self.seed.or(f.server.seed).unwrap_or(0);
        let time_scale = self.time_scale.or(f.server.time_scale).unwrap_or(1.0);
        // Bounded above so every scaled duration stays representable (a million times slower
        // than real is more than anyone simulates).
        if !(time_scale.is_finite() && (0.0..=1e6).contains(&time_scale)) {
            return Err(invalid(format!("time_scale must be a number from 0 to 1000000, got {time_scale}")));
        }
        let num_parallel = self.num_parallel.or(f.server.num_parallel).unwrap_or(1);
        let max_queue = self.max_queue.or(f.server.max_queue).unwrap_or(512);
        let max_loaded = match self.max_loaded_models.or(f.server.max_loaded_models).unwrap_or(0) {
            0 => 3,
            n => n,
        };
        let cache_ram_mib = self.cache_ram_mib.or(f.server.cache_ram_mib).unwrap_or(DEFAULT_CACHE_RAM_MIB);
        if num_parallel == 0 {
            return Err(invalid("num_parallel must be at least 1".into()));
        }
        if max_queue == 0 {
            return Err(invalid("max_queue must be at least 1".into()));
        }
        let keep_alive = match (self.keep_alive, &f.server.keep_alive) {
            (Some(k), _) => k,
            (None, Some(s)) => KeepAlive::from_env_value(s).map_err(|e| invalid(format!("server.keep_alive: {e}")))?,
            (None, None) => KeepAlive::DEFAULT,
        };

        // Models: default catalogue, then the file's, then the builder's, later names win.
        let mut models = if f.replace_catalogue { Vec::new() } else { default_catalogue() };
        for m in f.models.iter().chain(self.extra_models.iter()) {
            match models.iter_mut().find(|x| x.name == m.name) {
                Some(slot) => *slot = m.clone(),
                None => models.push(m.clone()),
            }
        }
        if models.is_empty() {
            return Err(invalid("the catalogue has no models".into()));
        }
        for m in models.iter_mut() {
            if let (Some(path), None) = (&m.profile.replay_file, &m.profile.replay) {
                let text =
                    std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: path.clone(), source })?;
                m.profile.replay =
                    Some(Replay::from_ndjson(&text).map_err(|e| invalid(format!("model {:?}: {path}: {e}", m.name)))?);
            }
        }
        for m in &models {
            m.validate().map_err(invalid)?;
        }

        // Devices and instances.
        let mut devices = f.devices.clone();
        for d in &devices {
            if !(d.cross_process_efficiency > 0.0 && d.cross_process_efficiency <= 1.0) {
                return Err(invalid(format!("device {:?}: cross_process_efficiency must be in (0, 1]", d.name)));
            }
            if !(d.batch_penalty >= 0.0 && d.batch_penalty.is_finite()) {
                return Err(invalid(format!("device {:?}: batch_penalty must be >= 0", d.name)));
            }
            if d.memory_gib.is_some_and(|g| !(g.is_finite() && g > 0.0 && g <= 1e6)) {
                return Err(invalid(format!("device {:?}: memory_gib must be a number of GiB above 0", d.name)));
            }
            if !(d.vram_release_ms.is_finite() && (0.0..=600_000.0).contains(&d.vram_release_ms)) {
                return Err(invalid(format!("device {:?}: vram_release_ms must be from 0 to 600000", d.name)));
            }
            if !(d.cache_copy_gib_s.is_finite() && d.cache_copy_gib_s > 0.0) {
                return Err(invalid(format!("device {:?}: cache_copy_gib_s must be a positive number", d.name)));
            }
        }
        let count = self.instances.unwrap_or(f.instances.len().max(1));
        if count == 0 {
            return Err(invalid("instances must be at least 1".into()));
        }
        let mut instances = Vec::with_capacity(count);
        for i in 0..count {
            let spec = f.instances.get(i).cloned().unwrap_or_default();
            let device = match &spec.device {
                Some(name) => devices
                    .iter()
                    .position(|d| &d.name == name)
                    .ok_or_else(|| invalid(format!("instance {i}: unknown device {name:?}")))?,
                None => {
                    devices.push(DeviceSpec::new(format!("device-{i}")));
                    devices.len() - 1
                }
            };
            let np = self.num_parallel.or(spec.num_parallel).unwrap_or(num_parallel);
            if np == 0 {
                return Err(invalid(format!("instance {i}: num_parallel must be at least 1")));
            }
            instances.push(ResolvedInstance {
                device,
                num_parallel: np,
                max_queue: self.max_queue.or(spec.max_queue).unwrap_or(max_queue).max(1),
                max_loaded_models: match self.max_loaded_models.or(spec.max_loaded_models).unwrap_or(max_loaded) {
                    0 => 3,
                    n => n,
                },
                cache_ram: self.cache_ram_mib.or(spec.cache_ram_mib).unwrap_or(cache_ram_mib).saturating_mul(1 << 20),
            });
        }
        let worker_threads = self.worker_threads.or(f.server.worker_threads).unwrap_or(2).max(1);
        let faults: Vec<_> = f.faults.iter().chain(self.faults.iter()).cloned().collect();
        if faults.len() > crate::faults::MAX_RULES {
            return Err(invalid(format!(
                "{} fault rules; at most {} may be in force",
                faults.len(),
                crate::faults::MAX_RULES
            )));
        }
        for r in &faults {
            r.validate().map_err(invalid)?;
        }
        let script: Vec<_> = f.script.iter().chain(self.script.iter()).cloned().collect();
        crate::script::check(&script).map_err(invalid)?;
        let noise = self.noise.or_else(|| f.noise.clone()).unwrap_or_default();
        noise.validate().map_err(invalid)?;
        Ok(SimConfig {
            seed,
            time_scale,
            frozen_clock: self.frozen_clock.or(f.server.frozen_clock).unwrap_or(false),
            models,
            devices,
            instances,
            keep_alive,
            body_limit: self.body_limit.or(f.server.body_limit).unwrap_or(DEFAULT_BODY_LIMIT),
            trace_budget: (self
                .trace_budget_mb
                .or(f.server.trace_budget_mb)
                .unwrap_or(DEFAULT_TRACE_BUDGET_MB)
                .min(1 << 20) as usize)
                .saturating_mul(1 << 20),
            version: DEFAULT_VERSION.to_string(),
            worker_threads,
            faults,
            script,
            noise,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_catalogue_parses_and_validates() {
        let file = ConfigFile::from_toml(DEFAULT_CATALOGUE_TOML).expect("catalogue parses");
        assert!(file.models.len() >= 3);
        let cfg = RawConfig::default().resolve().expect("defaults resolve");
        assert!(cfg.models.iter().any(|m| m.name == "gemma3:latest"));
        assert!(cfg.models.iter().any(|m| m.has("embedding")));
        assert_eq!(cfg.instances.len(), 1);
        assert_eq!(cfg.instances[0].num_parallel, 1);
        assert_eq!(cfg.instances[0].max_queue, 512);
    }

    #[test]
    fn every_preset_parses_and_resolves() {
        for (name, _) in PRESETS {
            let file = preset(name).unwrap();
            RawConfig { file, ..Default::default() }.resolve().unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(preset("nope").unwrap_err().to_string().contains("dual-one-device"));
    }

    #[test]
    fn unknown_fields_and_bad_values_are_named() {
        let e = ConfigFile::from_toml("[server]\nseeed = 3\n").unwrap_err().to_string();
        assert!(e.contains("seeed"), "{e}");
        let raw = RawConfig { time_scale: Some(-1.0), ..Default::default() };
        assert!(raw.resolve().unwrap_err().to_string().contains("time_scale"));
        let file = ConfigFile::from_toml("[[instances]]\ndevice = \"gpu9\"\n").unwrap();
        let e = RawConfig { file, ..Default::default() }.resolve().unwrap_err().to_string();
        assert!(e.contains("gpu9"), "{e}");
    }

    #[test]
    fn file_models_override_catalogue_entries_by_name() {
        let mut m = default_catalogue().remove(0);
        m.profile.decode_tokens_per_s = 10.0;
        let file = ConfigFile { models: vec![m.clone()], ..Default::default() };
        let cfg = RawConfig { file, ..Default::default() }.resolve().unwrap();
        let got = cfg.models.iter().find(|x| x.name == m.name).unwrap();
        assert_eq!(got.profile.decode_tokens_per_s, 10.0);
    }

    #[test]
    fn a_paced_model_survives_a_configuration_file() {
        // `harness bench` hands the paced model to a separate `sim-ollama` as TOML; an infinite
        // rate (no time at all) must come back as itself.
        for rate in [100.0, f64::INFINITY] {
            let mut cfg = ConfigFile::default();
            cfg.models.push(ModelSpec::paced("metronome:latest", rate, 400));
            let text = toml::to_string(&cfg).unwrap();
            assert_eq!(ConfigFile::from_toml(&text).unwrap(), cfg, "{text}");
        }
    }
}
