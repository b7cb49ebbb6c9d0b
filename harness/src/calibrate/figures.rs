//! What `harness calibrate` measures and how it fits the simulator's parameters to it: the
//! figures (a median with its range), the calibration that holds them all, and the fits (the
//! prompt line, the batching slowdown, a shared device, the slots seen in a round).

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

/// The fitted line of time to first token against prompt length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptFit {
    /// Time to first token of an empty prompt, ms (the line's intercept).
    pub intercept_ms: f64,
    /// Prompt tokens (the simulator's count of the same text) per second; infinite when the
    /// longest prompt took no longer than the shortest.
    pub tokens_per_s: f64,
    /// Spread of the points around the line, ms (standard deviation of the residuals).
    pub residual_ms: f64,
    /// The points: (prompt tokens, time to first token in ms).
    pub points: Vec<(f64, f64)>,
}

impl PromptFit {
    /// The line through `points` ([`fit_prompt`]), keeping them.
    pub fn fit(points: Vec<(f64, f64)>) -> Option<PromptFit> {
        let (intercept_ms, tokens_per_s, residual_ms) = fit_prompt(&points)?;
        Some(PromptFit { intercept_ms, tokens_per_s, residual_ms, points })
    }

    /// Its prompt speed as a profile's `prompt_tokens_per_s`: a prompt too fast to measure is
    /// a million tokens a second.
    pub(crate) fn profile_tokens_per_s(&self) -> f64 {
        if self.tokens_per_s.is_finite() { self.tokens_per_s } else { 1e6 }
    }
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
    /// Time to first token against prompt length.
    pub prompt: Option<PromptFit>,
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
    /// Its time to first token against prompt length (the short and the long prompt of the
    /// model's own line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<PromptFit>,
    /// Its solo calls' decode speed on the first server (the calls of the model's
    /// `decode_per_server[0]`), tokens/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_tokens_per_s: Option<Figure>,
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
}

/// How many calls sent together decoded at once: those whose first token came before any of
/// them had finished.
pub fn decoded_at_once(starts: &[f64], ends: &[f64]) -> usize {
    let first_end = ends.iter().copied().fold(f64::INFINITY, f64::min);
    starts.iter().filter(|&&s| s < first_end).count()
}

/// The line `y = a + x / rate` through the points by least squares: (intercept, rate,
/// residual standard deviation). A slope at or below zero is an infinite rate.
pub fn fit_prompt(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let (a, slope, resid) = rising_line(points)?;
    let rate = if slope > 0.0 { 1000.0 / slope } else { f64::INFINITY };
    Some((a, rate, resid))
}

/// The least-squares line `y = a + b x` through at least three points with some spread in x,
/// never falling (a falling fit is the flat line through the mean): (a, b, residual standard
/// deviation).
pub fn rising_line(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 3 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx;
    let (slope, a) = if slope > 0.0 { (slope, my - slope * mx) } else { (0.0, my) };
    let resid = (points.iter().map(|p| (p.1 - a - slope * p.0).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    Some((a, slope, resid))
}

/// The line `y = a + b x` by Theil-Sen: the median of the slopes between every two points
/// (with x apart), the intercept the median of `y - b x`; never falling; (a, b, residual
/// standard deviation). A few points far off the line (an eighth of a call in which the client
/// was descheduled: its mean gap tens of times the others) move it little, where they tilt a
/// least-squares line: the decode line of a known simulator's 100-token calls read a slowdown
/// of 13 per 1,000 tokens for 2 once, in a suite run.
pub fn robust_rising_line(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    if points.len() < 3 {
        return None;
    }
    let median = |mut v: Vec<f64>| -> Option<f64> {
        v.retain(|x| x.is_finite());
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let m = v.len() / 2;
        Some(if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 })
    };
    let spread = points.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max)
        - points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    if !(spread > 0.0) {
        return None;
    }
    let mut slopes = Vec::new();
    for (i, p) in points.iter().enumerate() {
        for q in &points[i + 1..] {
            let dx = q.0 - p.0;
            if dx.abs() > spread * 1e-9 {
                slopes.push((q.1 - p.1) / dx);
            }
        }
    }
    let slope = median(slopes)?.max(0.0);
    let a = median(points.iter().map(|p| p.1 - slope * p.0).collect())?;
    let n = points.len() as f64;
    let resid = (points.iter().map(|p| (p.1 - a - slope * p.0).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    Some((a, slope, resid))
}

/// The simulator's batching slowdown that best explains the measured relative speeds: a stream
/// beside k-1 others runs at `(1 + x) / (1 + p (k - 1) + k x)` of its solo speed, `x` the
/// calls' attention (`sim_ollama`'s `DeviceSharing::speed`; 0: `1 / (1 + p (k - 1))`); least
/// squares on `(1 + x) / speed - 1 - k x = p (k - 1)`, never below zero.
pub fn fit_batch_penalty(rel: &[(usize, f64)], attention: f64) -> Option<f64> {
    let x = attention.max(0.0);
    let pts: Vec<(f64, f64)> = rel
        .iter()
        .filter(|(k, s)| *k >= 2 && *s > 0.0)
        .map(|&(k, s)| ((k - 1) as f64, (1.0 + x) / s - 1.0 - k as f64 * x))
        .collect();
    let sxx: f64 = pts.iter().map(|p| p.0 * p.0).sum();
    (sxx > 0.0).then(|| (pts.iter().map(|p| p.0 * p.1).sum::<f64>() / sxx).max(0.0))
}

/// Whether servers that slowed each other to `together` of their solo speed share a device,
/// and with what efficiency (`m` servers time-slicing one device each get `efficiency / m`).
/// Above 0.9 of solo speed, each server is on a device of its own.
pub fn fit_sharing(together: f64, servers: usize) -> Option<f64> {
    (together < 0.9).then(|| sharing_efficiency(together, servers))
}

/// The efficiency of a device `servers` time-slice, each getting `together` of its solo speed.
pub(crate) fn sharing_efficiency(together: f64, servers: usize) -> f64 {
    (together * servers as f64).clamp(0.05, 2.0)
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
    fn the_prompt_line_recovers_its_slope_and_intercept() {
        let pts: Vec<(f64, f64)> =
            [10.0, 100.0, 400.0].iter().flat_map(|&x| [(x, 20.0 + x / 2.0), (x, 20.0 + x / 2.0)]).collect();
        let (a, rate, resid) = fit_prompt(&pts).unwrap();
        assert!((a - 20.0).abs() < 1e-9 && (rate - 2000.0).abs() < 1e-6 && resid < 1e-9, "{a} {rate} {resid}");
        // No slope: an infinite prompt speed, the mean as the intercept.
        let (a, rate, _) = fit_prompt(&[(10.0, 5.0), (100.0, 5.0), (400.0, 5.0)]).unwrap();
        assert_eq!((a, rate), (5.0, f64::INFINITY));
        assert!(fit_prompt(&[(10.0, 5.0), (10.0, 6.0), (10.0, 7.0)]).is_none());
    }

    #[test]
    fn a_few_stalled_eighths_do_not_tilt_the_robust_line() {
        // Gaps of 0.5 ms + 1 ms per 1,000 tokens of context, 32 eighths of calls; two of the
        // last ones stalled to 10 ms. Least squares tilts (a slope several times the true one);
        // Theil-Sen keeps it.
        let mut pts: Vec<(f64, f64)> =
            (0..32).map(|i| (20.0 + (i % 8) as f64 * 12.0, 0.5 + (20.0 + (i % 8) as f64 * 12.0) / 1000.0)).collect();
        pts[7].1 = 10.0;
        pts[15].1 = 10.0;
        let (a, b, _) = robust_rising_line(&pts).unwrap();
        assert!((a - 0.5).abs() < 0.01 && (b - 0.001).abs() < 2e-4, "{a} {b}");
        let (_, ls, _) = rising_line(&pts).unwrap();
        assert!(ls > 0.01, "least squares tilts: {ls}");
        assert_eq!(robust_rising_line(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]), None, "no spread in x");
    }

    #[test]
    fn the_batch_penalty_explains_the_relative_speeds() {
        let p = 0.3;
        let rel: Vec<(usize, f64)> = (2..=4).map(|k| (k, 1.0 / (1.0 + p * (k - 1) as f64))).collect();
        assert!((fit_batch_penalty(&rel, 0.0).unwrap() - p).abs() < 1e-9);
        assert_eq!(fit_batch_penalty(&[(2, 1.1)], 0.0), Some(0.0), "faster together is no penalty, not a negative one");
        assert_eq!(fit_batch_penalty(&[], 0.0), None);
        // With attention: the CPU build's 1,000-token calls (x = 1.7 at a mean context of 500)
        // ran at 0.63, 0.42 and 0.32 of solo speed beside 1, 2 and 3 others: p near 0.2, where
        // without the attention term it reads 0.65.
        let cpu = [(2, 0.63), (3, 0.42), (4, 0.32)];
        let with = fit_batch_penalty(&cpu, 1.7).unwrap();
        assert!((0.1..0.3).contains(&with), "{with}");
        assert!(fit_batch_penalty(&cpu, 0.0).unwrap() > 0.6);
        // Recovered from speeds the model itself gives.
        let dev = sim_ollama::advanced::trace::DeviceSharing { batch_penalty: 0.4, cross_process_efficiency: 1.0 };
        let made: Vec<(usize, f64)> = (2..=5).map(|k| (k, dev.speed(k, 1, 2.5))).collect();
        assert!((fit_batch_penalty(&made, 2.5).unwrap() - 0.4).abs() < 1e-9);
    }

    #[test]
    fn servers_that_slow_each_other_share_a_device() {
        assert_eq!(fit_sharing(0.98, 2), None);
        assert!((fit_sharing(0.62, 2).unwrap() - 1.24).abs() < 1e-9);
        assert!((fit_sharing(0.39, 2).unwrap() - 0.78).abs() < 1e-9);
    }

    #[test]
    fn slots_are_the_calls_that_started_before_any_finished() {
        // Four slots, six calls: two start when the first two finish.
        assert_eq!(decoded_at_once(&[0.1, 0.1, 0.11, 0.12, 1.01, 1.02], &[1.0, 1.0, 1.05, 1.1, 2.0, 2.0]), 4);
        assert_eq!(decoded_at_once(&[0.1, 0.2], &[1.0, 1.1]), 2);
    }
}
