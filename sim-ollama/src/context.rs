//! Context limits as Ollama 0.33 applies them, per slot of `num_ctx` tokens.
//!
//! - Chat history: with `truncate` (the default), messages are dropped from the front, system
//!   messages kept, until the rendered prompt fits `num_ctx`; the last message is always kept
//!   (`chatPrompt`, server/prompt.go v0.33.0-rc2 22-78; `truncateNativeChatMessages`,
//!   server/routes.go 3040-3097). See [`history_start`].
//! - A prompt that still does not fit (`num_ctx - 1` tokens at most): with `truncate` and no
//!   images, the first `num_keep` (4) tokens and the BOS are kept and the oldest tokens after
//!   them dropped until the prompt is `num_ctx - max((num_ctx - keep) / 2, 1)` tokens, "the old
//!   runners' first context shift" (`completionPromptForRequest`, llm/llama_server.go 279-322);
//!   with context shift off (`shift: false`, or a deepseek2 model: `supportsContextShift`,
//!   server/sched.go 129-147), a 400; without `truncate` (or with images) the prompt reaches
//!   llama-server whole, which refuses it, and Ollama passes its JSON error body on as the
//!   message (`statusErrorMessage`, llm/llama_server.go 1773-1785). See [`fit_prompt`].
//! - Open-ended generation is bounded at ten context windows (`boundedNumPredict`,
//!   llm/llama_server.go 106-118). See [`generation_cap`].

use crate::error::ApiError;

/// `num_keep`'s default (api/types.go `DefaultOptions`).
pub(crate) const NUM_KEEP: usize = 4;

/// Open-ended generations are bounded at this many context windows.
const OPEN_ENDED_CONTEXTS: u64 = 10;

/// The most tokens a request may generate on a runner of `num_ctx` tokens.
pub(crate) fn generation_cap(num_ctx: u64) -> usize {
    num_ctx.max(1).saturating_mul(OPEN_ENDED_CONTEXTS) as usize
}

/// The first message to keep so that the rendered prompt fits `num_ctx`: `count(i)` gives the
/// prompt's tokens when messages before `i` are dropped (their system messages kept). At most
/// `last`: the last message always stays.
pub(crate) fn history_start(last: usize, num_ctx: u64, count: impl Fn(usize) -> u64) -> usize {
    (0..=last).find(|&i| i == last || count(i) <= num_ctx).unwrap_or(last)
}

/// How a prompt longer than its slot is handled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) num_ctx: usize,
    /// `truncate` (default true) and no images.
    pub(crate) truncate: bool,
    /// The runner was started with context shift.
    pub(crate) shift: bool,
}

/// Fits a prompt into its slot, or the error the real server answers.
pub(crate) fn fit_prompt<T>(prompt: &mut Vec<T>, l: Limits) -> Result<(), ApiError> {
    let n = l.num_ctx;
    if n <= 1 || prompt.len() < n {
        return Ok(());
    }
    if !l.truncate {
        let message = format!(
            "request ({} tokens) exceeds the available context size ({n} tokens), try increasing it",
            prompt.len()
        );
        let body = serde_json::json!({"error": {"code": 400, "message": message,
            "type": "exceed_context_size_error", "n_prompt_tokens": prompt.len(), "n_ctx": n}});
        return Err(ApiError::bad_request(body.to_string()));
    }
    if !l.shift {
        return Err(ApiError::bad_request(
            "the prompt is longer than the context length currently available to the model; shorten the prompt, adjust the context length in settings, or use a model with a longer context length",
        ));
    }
    // The tokenizer adds a BOS, which is kept too.
    let keep = (NUM_KEEP + 1).min(n - 1);
    let limit = n - ((n - keep) / 2).max(1);
    let discard = prompt.len() - limit;
    prompt.drain(keep..keep + discard);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(truncate: bool, shift: bool) -> Limits {
        Limits { num_ctx: 100, truncate, shift }
    }

    #[test]
    fn a_prompt_that_fits_is_untouched_and_one_that_does_not_keeps_its_head_and_tail() {
        let mut p: Vec<u32> = (0..99).collect();
        fit_prompt(&mut p, limits(true, true)).unwrap();
        assert_eq!(p.len(), 99);
        let mut p: Vec<u32> = (0..300).collect();
        fit_prompt(&mut p, limits(true, true)).unwrap();
        // 100 - (100 - 5) / 2 = 53 tokens: the first 5, then the last 48.
        assert_eq!(p.len(), 53);
        assert_eq!(&p[..5], &[0, 1, 2, 3, 4]);
        assert_eq!(p[5], 252);
        assert_eq!(*p.last().unwrap(), 299);
    }

    #[test]
    fn without_context_shift_or_truncation_a_long_prompt_is_refused_with_the_real_texts() {
        let mut p: Vec<u32> = (0..150).collect();
        let e = fit_prompt(&mut p, limits(true, false)).unwrap_err();
        assert_eq!(e.status.as_u16(), 400);
        assert!(e.message.starts_with("the prompt is longer than the context length"), "{}", e.message);
        let e = fit_prompt(&mut p, limits(false, true)).unwrap_err();
        assert_eq!(
            e.message,
            r#"{"error":{"code":400,"message":"request (150 tokens) exceeds the available context size (100 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":150,"n_ctx":100}}"#
        );
    }

    #[test]
    fn history_keeps_the_latest_messages_that_fit_and_always_the_last() {
        // Message i costs 10 tokens; the prompt from message i on costs 10 * (5 - i).
        let count = |i: usize| 10 * (5 - i as u64);
        assert_eq!(history_start(4, 100, count), 0);
        assert_eq!(history_start(4, 25, count), 3);
        assert_eq!(history_start(4, 5, count), 4);
        assert_eq!(generation_cap(4096), 40_960);
    }
}
