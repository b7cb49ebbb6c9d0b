//! What `harness calibrate` measures: the figures (a median with its range), the calibration
//! that holds them all, and the slots seen in a round. The fits of the simulator's parameters
//! to them are in `fits.rs`.

use super::fits::{PromptFit, TokenizerFit};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What to measure.
#[derive(Debug, Clone)]
pub struct CalibratePlan {
    /// Base URLs of the servers (one or more).
    pub endpoints: Vec<String>,
    /// The model, as the agents name it.
    pub model: String,
    /// Most calls sent to one server at once: slots beyond it are not found.
    pub max_streams: usize,
    /// Tokens of each decoding call.
    pub tokens: u32,
    /// Repetitions of each solo measurement (at least 2).
    pub reps: usize,
    /// A call slower than this is an error.
    pub timeout: Duration,
    /// Other models the agents use beside `model`: each one's load is measured, and whether
    /// they all stay loaded together (`OLLAMA_MAX_LOADED_MODELS`, or the memory they need).
    pub others: Vec<String>,
}

/// One measured figure: the median of its samples and their range.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// Median.
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// How many samples.
    pub samples: usize,
}

impl Figure {
    /// The figure of some samples (non-finite ones dropped); `None` when none is left.
    pub fn of(values: &[f64]) -> Option<Figure> {
        let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        let s = crate::stats::summarize(&v);
        (s.n > 0).then_some(Figure { median: s.median, min: s.min, max: s.max, samples: s.n })
    }

    pub(crate) fn words(&self, unit: &str) -> String {
        format!("median {} {unit} of {} [{} .. {}]", num(self.median), self.samples, num(self.min), num(self.max))
    }
}

/// Slots found on one server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slots {
    /// The server.
    pub endpoint: String,
    /// Most calls that decoded at once, before any finished.
    pub slots: usize,
    /// Every call sent at once decoded at once: the server may have more slots than were
    /// tried (`--max-streams`).
    pub at_least: bool,
}

/// What `/api/show`, `/api/tags` and `/api/ps` say about the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelMeta {
    /// Full name with tag, as `/api/tags` lists it.
    pub name: String,
    /// `details.family`.
    pub family: String,
    /// `details.parameter_size`.
    pub parameter_size: String,
    /// `details.quantization_level`.
    pub quantization_level: String,
    /// Size on disk.
    pub size: u64,
    /// Size loaded (`/api/ps`), when seen.
    pub size_loaded: Option<u64>,
    /// Digest, 64 hex digits.
    pub digest: Option<String>,
    /// `<arch>.context_length`.
    pub context_length: u64,
    /// `<arch>.embedding_length`.
    pub embedding_length: u64,
    /// Capabilities.
    pub capabilities: Vec<String>,
    /// Chat template.
    pub template: String,
    /// Modelfile parameters.
    pub parameters: Vec<(String, String)>,
    /// License text.
    pub license: String,
    /// `/api/ps` reported no memory in VRAM: the server runs on a CPU.
    pub cpu: bool,
}

/// Everything measured, kept whatever failed later.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Calibration {
    /// The servers.
    pub endpoints: Vec<String>,
    /// The model as asked for.
    pub model: String,
    /// When it began, RFC 3339 UTC.
    pub started: String,
    /// How long it took, s.
    pub elapsed_s: f64,
    /// Tokens of each decoding call (`--tokens`): a check measures with the same.
    pub tokens: u32,
    /// Most calls sent to one server at once (`--max-streams`).
    pub max_streams: usize,
    /// Repetitions of each measurement (`--reps`).
    pub reps: usize,
    /// The model's metadata.
    pub meta: Option<ModelMeta>,
    /// Tokens per second of one call alone (after its first token), every server's solo calls.
    pub decode_tokens_per_s: Option<Figure>,
    /// Each server's solo decode speed, in `endpoints` order.
    pub decode_per_server: Vec<Figure>,
    /// Each server's time to first token of one-token calls after a long prompt, ms (in
    /// rounds of one call per server; with one server, the prompt line's longest calls): a
    /// device's prompt speed, where it differs from its decoding's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub long_ttft_per_server: Vec<Figure>,
    /// Coefficient of variation of the gaps between tokens of solo calls.
    pub inter_token_cv: Option<f64>,
    /// The gap before a token of solo calls against the context before it (the simulator's
    /// count of the prompt, plus the tokens already generated): (ms at an empty context, ms
    /// more per token of context).
    pub decode_line: Option<(f64, f64)>,
    /// `load_duration` of warm calls, ms: the real scheduler's per-call health check.
    pub call_overhead_ms: Option<Figure>,
    /// Time to first token of a short prompt's one-token call, ms.
    pub warm_ttft_ms: Option<Figure>,
    /// Time to first token against prompt length, the prompts in the twin's token counts
    /// (`tokenizer`'s).
    pub prompt: Option<PromptFit>,
    /// The model's tokenizer, fitted to the server's counts of those prompts (`None` in a
    /// twin written before it was measured: the simulator's default, no template tokens).
    pub tokenizer: Option<TokenizerFit>,
    /// Slots found, per server.
    pub slots: Vec<Slots>,
    /// Each stream's speed with k calls decoding at once on one server, relative to one alone:
    /// (k, figure over the k streams).
    pub batch: Vec<(usize, Figure)>,
    /// The mean context of those calls in the simulator's token counts (their prompt and half
    /// their answer), for the attention term of the batching fit.
    #[serde(default)]
    pub batch_context: Option<f64>,
    /// Each stream's speed with one call on every server at once, relative to each server's
    /// solo speed: two servers (a calibration of more measures [`Pair`]s instead; a twin
    /// written before pairs were measured has only this).
    pub together: Option<Figure>,
    /// Each pair of servers with one call on each at once: the two streams' speeds relative
    /// to their servers' solo speeds (every pair of three or more servers; of two, the one
    /// pair, the same rounds as `together`).
    #[serde(default)]
    pub pairs: Vec<Pair>,
    /// Solo calls on the first server after a long prompt, as the pairs' second rounds
    /// ([`Pair::after_long`]) are compared with: tokens per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_decode_tokens_per_s: Option<Figure>,
    /// The mean context of the pairs' calls, in the simulator's token counts (their prompt and
    /// half their answer): the short prompt's rounds ([`Pair::speed`]) and the long prompt's
    /// ([`Pair::after_long`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair_contexts: Option<[f64; 2]>,
    /// Three servers or more with one call on every one at once: each stream's speed
    /// relative to its server's solo speed.
    #[serde(default)]
    pub all_busy: Option<Figure>,
    /// Added time to first token of a call after an unload, ms.
    pub load_ms: Option<Figure>,
    /// Added time to first token of a call with changed runner options (`num_ctx`), ms.
    pub reload_ms: Option<Figure>,
    /// One-token calls sent at once while the model loaded (after an unload), on the first
    /// server: how many the scheduler refused (`OLLAMA_MAX_QUEUE`).
    #[serde(default)]
    pub load_burst: Option<LoadBurst>,
    /// How the solo decoding calls' answers ended: each asked for `tokens` (`num_predict`).
    pub answers: Option<Answers>,
    /// The other models the agents use (`--with-models`), each loaded in turn after the model
    /// on the first server: its load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<OtherModel>,
    /// Of the model and the others, how many were still loaded once each had been loaded in
    /// turn (`/api/ps`): fewer than all, and the server evicts to load one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_together: Option<usize>,
    /// What the simulator's model cannot follow, and figures not measured.
    pub notes: Vec<String>,
}

/// Another model the agents use, loaded after the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OtherModel {
    /// As the agents name it.
    pub name: String,
    /// As the server names it (`/api/ps`, with its tag).
    pub loaded_as: String,
    /// Added time to first token of its first call (its load) over its warm calls', ms.
    pub load_ms: f64,
    /// Its metadata (`/api/show`, `/api/tags`, `/api/ps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ModelMeta>,
    /// Time to first token of its one-token calls once loaded (the prompt of the model's own
    /// `warm_ttft_ms`), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_ttft_ms: Option<Figure>,
    /// Its time to first token against prompt length (the prompt lengths of the model's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<PromptFit>,
    /// Its tokenizer, fitted as the model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<TokenizerFit>,
    /// Its solo calls' decode speed on the first server (the calls of the model's
    /// `decode_per_server[0]`), tokens/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_tokens_per_s: Option<Figure>,
    /// The line through its solo calls' mean gaps against the context before them (after the
    /// short and the long prompt), as the model's `decode_line`: (ms at an empty context, ms
    /// more per token of context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_line: Option<(f64, f64)>,
    /// Its solo calls' decode speed after the long prompt, tokens/s ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_decode_tokens_per_s: Option<Figure>,
    /// ... and their mean context (the prompt and half the answer), tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_context: Option<f64>,
}

/// How answers that asked for `num_predict` tokens ended: on their own (`done_reason` `stop`,
/// their lengths the model's own) or at `num_predict` (`length`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Answers {
    /// Calls.
    pub calls: usize,
    /// Of them, those that ended on their own before `num_predict`.
    pub stopped: usize,
    /// Their lengths, tokens (`eval_count`).
    pub lengths: Option<Figure>,
}

impl Answers {
    /// How calls that asked for the same `num_predict` ended: each one's `done_reason` and
    /// `eval_count`.
    pub(crate) fn of(ends: &[(Option<String>, Option<u64>)]) -> Option<Answers> {
        let (mut calls, mut lengths) = (0, Vec::new());
        for (reason, count) in ends {
            calls += 1;
            if reason.as_deref() == Some("stop") {
                lengths.extend(count.map(|n| n as f64));
            }
        }
        (calls > 0).then(|| Answers { calls, stopped: lengths.len(), lengths: Figure::of(&lengths) })
    }
}

/// A burst of calls at a load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadBurst {
    /// Calls sent at once.
    pub sent: usize,
    /// Refused with HTTP 503 "server busy".
    pub refused: usize,
}

impl LoadBurst {
    /// The server's `OLLAMA_MAX_QUEUE` where some calls were refused: those taken, less the
    /// one the scheduler was loading for (it had left the queue; measured on Ollama 0.33 with
    /// `OLLAMA_MAX_QUEUE=2`: 3 of 8 taken, 5 refused). `None` where none was refused.
    pub fn max_queue(&self) -> Option<usize> {
        (self.refused > 0).then(|| self.sent.saturating_sub(self.refused).saturating_sub(1).max(1))
    }
}

impl Calibration {
    /// Server `i`'s URL, as the twin's comments name it ("?" past the end).
    pub(crate) fn endpoint(&self, i: usize) -> &str {
        self.endpoints.get(i).map_or("?", String::as_str)
    }
}

/// Two servers with one call on each at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    /// One server, an index into `endpoints`.
    pub a: usize,
    /// The other.
    pub b: usize,
    /// Each stream's speed relative to its server's solo speed.
    pub speed: Figure,
    /// The same after a long prompt (relative to solo calls after it): at a longer context,
    /// where attention is more of each token's work, which servers may share otherwise than
    /// the rest (`cross_process_attention_efficiency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_long: Option<Figure>,
}

/// How many calls sent together decoded at once: those whose first token came before any of
/// them had finished.
pub fn decoded_at_once(starts: &[f64], ends: &[f64]) -> usize {
    let first_end = ends.iter().copied().fold(f64::INFINITY, f64::min);
    starts.iter().filter(|&&s| s < first_end).count()
}

/// A number as the twin file writes it: three significant digits or so.
pub(crate) fn num(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 0.1 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

pub(crate) fn round3(x: f64) -> f64 {
    num(x).parse().unwrap_or(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_the_calls_that_started_before_any_finished() {
        // Four slots, six calls: two start when the first two finish.
        assert_eq!(decoded_at_once(&[0.1, 0.1, 0.11, 0.12, 1.01, 1.02], &[1.0, 1.0, 1.05, 1.1, 2.0, 2.0]), 4);
        assert_eq!(decoded_at_once(&[0.1, 0.2], &[1.0, 1.1]), 2);
    }
}
