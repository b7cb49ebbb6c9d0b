//! Log probabilities of the generated tokens (issue 38): `logprobs` and `top_logprobs` on
//! `/api/generate`, `/api/chat` and `/v1/chat/completions`, seeded and consistent with the text.
//!
//! The real server asks the runner for them only when `logprobs` is true (`llm/llama_server.go`
//! v0.33.0-rc2 1579-1581) and returns one entry per generated token that produced output
//! (content, reasoning or tool-call text; end-of-generation tokens get none), each
//! `{"token","logprob","bytes","top_logprobs"}` (`api/types.go` 497-516: `bytes` the token's
//! UTF-8 bytes, omitted for an empty token, `server/logprob.go` 33-44; `top_logprobs` only when
//! more than zero were asked for, `llama_server.go` 1816-1818).
//!
//! Here each entry is drawn from the request's seed and the token's place: the chosen token
//! has a probability between 0.5 and 1 (a logprob between -0.69 and -0.001), and the top
//! alternatives are the chosen token first, then words of the simulator's vocabulary with what
//! probability is left, each less likely than the one before (sorted, as the real runner sorts
//! them). Magnitudes stay where Go's float formatting and serde's agree (no exponent form).

use crate::seed::SeedBuilder;
use crate::words::WORDS;
use rand::RngExt;
use serde::Serialize;

/// One alternative of a token.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TopLogprob {
    pub(crate) token: String,
    pub(crate) logprob: f64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) bytes: Vec<u8>,
}

/// One generated token's entry (`api.Logprob`: `api.TokenLogprob` flattened, then the
/// alternatives).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Logprob {
    pub(crate) token: String,
    pub(crate) logprob: f64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) bytes: Vec<u8>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) top_logprobs: Vec<TopLogprob>,
}

/// The entry of token `index` (its text `token`) of a generation seeded `seed`, with `top`
/// alternatives (0: none).
pub(crate) fn entry(seed: u64, index: usize, token: &str, top: usize) -> Logprob {
    let mut rng = SeedBuilder::new(seed).str("logprob").u64(index as u64).rng();
    let p: f64 = rng.random_range(0.5..0.999);
    let logprob = round(p.ln());
    // The alternatives share what is left, each half or less of the one before.
    let lead = if token.starts_with(' ') { " " } else { "" };
    let mut left = 1.0 - p;
    let mut top_logprobs = Vec::with_capacity(top);
    if top > 0 {
        top_logprobs.push(TopLogprob { token: token.to_string(), logprob, bytes: token.as_bytes().to_vec() });
    }
    let mut last = logprob;
    while top_logprobs.len() < top {
        let share: f64 = rng.random_range(0.2..0.5);
        left *= share;
        let word = WORDS[rng.random_range(0..WORDS.len())];
        let t = format!("{lead}{word}");
        // Strictly below the one before, and far from the exponent form.
        let lp = round(left.max(1e-9).ln()).min(last - 0.001).max(-30.0);
        last = lp;
        top_logprobs.push(TopLogprob { bytes: t.as_bytes().to_vec(), token: t, logprob: lp });
    }
    Logprob { token: token.to_string(), logprob, bytes: token.as_bytes().to_vec(), top_logprobs }
}

/// Six decimals: what the entry means, not the noise of its draw.
fn round(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_seeded_below_zero_with_sorted_alternatives_led_by_the_token() {
        let e = entry(7, 3, " cache", 5);
        assert_eq!(e, entry(7, 3, " cache", 5), "the same seed and place, the same entry");
        assert_ne!(e.logprob, entry(7, 4, " cache", 5).logprob, "another place, another draw");
        assert!(e.logprob < 0.0 && e.logprob > -0.7, "{e:?}");
        assert_eq!(e.bytes, b" cache".to_vec());
        assert_eq!(e.top_logprobs.len(), 5);
        assert_eq!(e.top_logprobs[0].token, " cache");
        assert!(e.top_logprobs.windows(2).all(|w| w[0].logprob > w[1].logprob), "{e:?}");
        assert!(e.top_logprobs[1..].iter().all(|t| t.token.starts_with(' ')), "{e:?}");
        let total: f64 = e.top_logprobs.iter().map(|t| t.logprob.exp()).sum();
        assert!(total <= 1.0 + 1e-6, "probabilities sum to at most 1: {total}");
        // None asked for: no alternatives, and an empty token has no bytes.
        assert!(entry(7, 3, "x", 0).top_logprobs.is_empty());
        let empty = serde_json::to_string(&entry(1, 0, "", 0)).unwrap();
        assert!(empty.starts_with("{\"token\":\"\",\"logprob\":-") && !empty.contains("bytes"), "{empty}");
    }
}
