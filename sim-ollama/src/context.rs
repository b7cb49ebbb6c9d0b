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
//! - A slot holds `num_ctx` tokens rounded up to a multiple of 256: Ollama starts llama-server
//!   with `-c num_ctx*np -np np` (llm/llama_server.go 374-375), and llama.cpp pads the context
//!   and each sequence's share of it to 256 (`llama_context`, src/llama-context.cpp, llama.cpp
//!   b10488, the version Ollama 0.33 builds: `n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256)`),
//!   never past what the model was trained on. Measured on the real CPU build: `num_ctx` 100 and
//!   256 leave 230 tokens after a 26-token prompt, 300 leaves 486, 600 leaves 742 (one slot or
//!   two); a prompt refused without `truncate` reads "available context size (512 tokens)" at
//!   `num_ctx` 300. See [`slot_tokens`].
//! - A generation that fills its slot: with context shift, llama-server discards half of the
//!   tokens past the first `n_keep` before the next token (`update_slots`,
//!   tools/server/server-context.cpp: when `n_tokens + 1 >= n_ctx`, `n_discard = n_left / 2`), so
//!   a long answer attends to at most a slot's tokens (the real tiny model decodes 3,200 tokens
//!   at 3,400 tokens/s with `num_ctx` 512, at 1,135 with 4096); without it the answer stops
//!   there (`done_reason` "length": 230 tokens after 26 in a 256-token slot). See [`SlotContext`].

use crate::error::ApiError;

/// `num_keep`'s default (api/types.go `DefaultOptions`).
pub(crate) const NUM_KEEP: usize = 4;

/// Open-ended generations are bounded at this many context windows.
const OPEN_ENDED_CONTEXTS: u64 = 10;

/// llama.cpp's padding of a sequence's context.
const SLOT_PAD: u64 = 256;

/// The tokens one slot of a runner of `num_ctx` holds: `num_ctx` rounded up to a multiple of
/// 256, at most `trained` (the model's context length).
pub(crate) fn slot_tokens(num_ctx: u64, trained: u64) -> usize {
    num_ctx.max(1).div_ceil(SLOT_PAD).saturating_mul(SLOT_PAD).min(trained.max(1)) as usize
}

/// A runner's slot, and what a generation that fills it meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotContext {
    /// The tokens it holds ([`slot_tokens`]).
    pub(crate) tokens: usize,
    /// Context shift: a full slot discards half of what follows its kept head and the
    /// generation goes on; without it the generation stops.
    pub(crate) shift: bool,
}

impl SlotContext {
    /// The head a shift keeps: `n_keep = min(n_ctx - 4, n_keep + BOS)`.
    fn keep(self) -> usize {
        (NUM_KEEP + 1).min(self.tokens.saturating_sub(4))
    }

    /// The tokens a shift drops after the kept head before the next token, when the slot
    /// holds `held`.
    pub(crate) fn discard(self, held: usize) -> usize {
        if self.shift && held + 1 >= self.tokens { held.saturating_sub(self.keep()) / 2 } else { 0 }
    }

    /// The most tokens a generation after a prompt of `prompt` tokens may decode before the
    /// slot is full, where that stops it (no context shift).
    pub(crate) fn room(self, prompt: usize) -> Option<usize> {
        (!self.shift).then(|| self.tokens.saturating_sub(prompt))
    }

    /// The mean context each of `generated` tokens decoded after a `prompt` attends to (the
    /// prompt and the answer before it, less what shifts discarded).
    pub(crate) fn mean_context(self, prompt: usize, generated: usize) -> f64 {
        if !self.shift || prompt + generated + 1 < self.tokens || generated == 0 {
            return prompt as f64 + generated as f64 / 2.0;
        }
        let (mut held, mut sum) = (prompt, 0u64);
        for _ in 0..generated {
            held -= self.discard(held);
            sum += held as u64;
            held += 1;
        }
        // Each token's context before it, and half a token: the unshifted mean's convention.
        sum as f64 / generated as f64 + 0.5
    }

    /// A slot's tokens after `generated` were decoded past them, with the shifts on the way.
    pub(crate) fn extend<T: Clone>(self, held: &mut Vec<T>, generated: &[T]) {
        for t in generated {
            let d = self.discard(held.len());
            if d > 0 {
                let keep = self.keep();
                held.drain(keep..keep + d);
            }
            held.push(t.clone());
        }
    }
}

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
    /// Ollama's `num_ctx`: its own truncation's limit.
    pub(crate) num_ctx: usize,
    /// The slot: llama-server's limit, and whether the runner was started with context shift.
    pub(crate) slot: SlotContext,
    /// `truncate` (default true) and no images.
    pub(crate) truncate: bool,
}

/// Fits a prompt into its slot, or the error the real server answers.
pub(crate) fn fit_prompt<T>(prompt: &mut Vec<T>, l: Limits) -> Result<(), ApiError> {
    let n = l.num_ctx;
    // Untruncated, the prompt reaches llama-server whole, which refuses it where it fills the
    // slot (`n_tokens >= n_ctx`).
    if !l.truncate && prompt.len() >= l.slot.tokens {
        let (len, slot) = (prompt.len(), l.slot.tokens);
        let message =
            format!("request ({len} tokens) exceeds the available context size ({slot} tokens), try increasing it");
        let body = serde_json::json!({"error": {"code": 400, "message": message,
            "type": "exceed_context_size_error", "n_prompt_tokens": len, "n_ctx": slot}});
        return Err(ApiError::bad_request(body.to_string()));
    }
    if !l.truncate || n <= 1 || prompt.len() < n {
        return Ok(());
    }
    if !l.slot.shift {
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
        Limits { num_ctx: 100, slot: SlotContext { tokens: 100, shift }, truncate }
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
    fn a_slot_holds_num_ctx_rounded_up_to_256_within_the_trained_context() {
        // As measured on the real CPU build (module docs): 100 and 256 -> 256, 300 -> 512,
        // 600 -> 768, 1000 -> 1024.
        for (num_ctx, slot) in [(100, 256), (256, 256), (300, 512), (600, 768), (1000, 1024), (4096, 4096)] {
            assert_eq!(slot_tokens(num_ctx, 8192), slot, "num_ctx {num_ctx}");
        }
        assert_eq!(slot_tokens(3000, 2048), 2048);
        // A prompt refused without truncation meets the slot, not num_ctx.
        let mut p: Vec<u32> = (0..400).collect();
        let l = Limits { num_ctx: 300, slot: SlotContext { tokens: 512, shift: true }, truncate: false };
        fit_prompt(&mut p, l).unwrap();
        let mut p: Vec<u32> = (0..921).collect();
        let e = fit_prompt(&mut p, l).unwrap_err();
        assert!(e.message.contains("available context size (512 tokens)"), "{}", e.message);
    }

    #[test]
    fn a_full_slot_shifts_or_stops_the_answer() {
        let shifting = SlotContext { tokens: 256, shift: true };
        let stopping = SlotContext { shift: false, ..shifting };
        // Without shift the answer has what the prompt left (230 after 26, as measured).
        assert_eq!(stopping.room(26), Some(230));
        assert_eq!(shifting.room(26), None);
        // Short of the slot, the mean context is the prompt and half the answer either way.
        assert_eq!(shifting.mean_context(26, 200), 126.0);
        assert_eq!(stopping.mean_context(26, 200), 126.0);
        // A long answer in a shifting slot attends to between half a slot and a slot: its mean
        // stays near three quarters of the slot however long it runs.
        for n in [2_000, 20_000] {
            let m = shifting.mean_context(26, n);
            assert!((160.0..215.0).contains(&m), "{n} tokens: {m}");
        }
        // The slot's tokens: the first 5 kept, then the latest, never a full slot.
        let mut held: Vec<u32> = (0..26).collect();
        let generated: Vec<u32> = (1000..1600).collect();
        shifting.extend(&mut held, &generated);
        assert!(held.len() < 256 && held.len() > 128, "{}", held.len());
        assert_eq!(&held[..5], &[0, 1, 2, 3, 4]);
        assert_eq!(*held.last().unwrap(), 1599);
        assert!(held[5..].windows(2).all(|w| w[1] == w[0] + 1), "the tail is the latest tokens in order");
        let mut held: Vec<u32> = (0..26).collect();
        stopping.extend(&mut held, &generated[..230]);
        assert_eq!(held.len(), 256);
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
