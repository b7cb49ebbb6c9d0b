//! What a model does, from its spec: its capabilities, its runner's memory, its cost per
//! token, the modelled time of a call alone.

use super::file::*;
use crate::dist::{DistKind, DistSpec};

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
            license: String::new(),
            profile: Profile {
                load_ms: DistSpec::constant(0.0),
                cold_load_ms: None,
                call_overhead_ms: DistSpec::constant(0.0),
                prompt_tokens_per_s: 1e9,
                first_token_ms: DistSpec::constant(0.0),
                decode_tokens_per_s,
                inter_token: Jitter { dist: DistKind::Constant, cv: 0.0 },
                decode_slowdown_per_1k: 0.0,
                prompt_slowdown_per_1k: 0.0,
                output_tokens: DistSpec::constant(f64::from(output_tokens)),
                thinking_tokens: None,
                template_tokens: 0,
                letters_per_token: crate::tokenizer::LETTERS_PER_TOKEN,
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
        let prompt_tokens = p.tokenizer().count(prompt) + p.template_tokens;
        let decode = if p.decode_tokens_per_s > 0.0 { 1000.0 / p.decode_tokens_per_s } else { 0.0 };
        // The mean context of the call's tokens, for a speed that falls with it.
        let context = f64::from(prompt_tokens) + f64::from(tokens.saturating_sub(1)) / 2.0;
        p.call_overhead_ms.mean
            + p.first_token_ms.mean
            + p.prompt_ms(0.0, f64::from(prompt_tokens))
            + decode * f64::from(tokens) * (1.0 + p.decode_slowdown_per_1k * context / 1000.0)
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

    pub(crate) fn validate(&self) -> Result<(), String> {
        if crate::names::Name::parse(&self.name).is_none() {
            return Err(format!("model {:?}: not a valid model name", self.name));
        }
        if self.embedding_length == 0 {
            return Err(format!("model {:?}: embedding_length must be > 0", self.name));
        }
        self.profile.validate(&self.name)
    }
}
