//! The prompt cache of a runner's parallel slots, as llama-server keeps it.
//!
//! Ollama 0.33 serves generation through llama.cpp's `llama-server`, started with `-np`
//! slots of `num_ctx` tokens each (llm/llama_server.go v0.33.0-rc2 375-376) and asked for
//! `cache_prompt: true` on every completion (1562). Each slot keeps the tokens it last
//! evaluated (the prompt and what it generated); a request pays prompt evaluation only for
//! the tokens past the longest common prefix with its slot, and at least one token. Ollama
//! reports `prompt_eval_count` as cached + evaluated tokens (`promptEvalCount`, 1517-1519)
//! and `prompt_eval_duration` as the evaluation time alone (`PromptMS`, 1724).
//!
//! Slot choice is llama-server's `get_available_slot` (tools/server/server-context.cpp):
//! among idle slots, the one whose cached tokens share the largest fraction of the new
//! prompt, when that fraction exceeds `slot_prompt_similarity` (0.1); else the least recently
//! used idle slot (of equals, the last). Ollama passes no `--cache-ram`, so llama-server's host
//! prompt cache is on with its default 8192 MiB: when a slot is taken by LRU, or by similarity
//! keeping under half of its tokens, its tokens are saved to host memory first
//! (`server_prompt_cache::alloc`: skipped when already held, entries it contains dropped), and
//! the saved prompt that keeps at least a quarter of itself and beats the slot on both counts
//! is restored into the slot (`server_prompt_cache::load`). Oldest entries go first when the
//! cache is over its size (`update`). Saving and restoring copy the KV state between device
//! and host memory: [`Claim::copied`] counts the tokens copied so the request can be charged.
//!
//! Tokens are hashes of the simulator's tokenizer's pieces ([`crate::tokens::token_hashes`]),
//! so two prompts share a prefix exactly where their texts do.

use std::collections::{HashMap, VecDeque};

/// A token, as a hash of its text.
pub(crate) type Tok = u64;

/// `slot_prompt_similarity`'s default.
const SLOT_PROMPT_SIMILARITY: f64 = 0.1;

/// The prompt cache of one runner.
#[derive(Debug)]
pub(crate) struct PromptCache {
    slots: Vec<Slot>,
    /// Saved prompts, oldest first.
    host: VecDeque<Vec<Tok>>,
    /// Host cache limit in tokens (0: the host cache is off).
    host_limit: usize,
    /// Increases on every release, for least-recently-used order.
    tick: i64,
    /// Per agent, the prefix another agent's request last evicted from the slot it held
    /// (without a copy in host memory), and who evicted it.
    lost: HashMap<String, (String, Vec<Tok>)>,
}

#[derive(Debug, Default)]
struct Slot {
    tokens: Vec<Tok>,
    /// -1 until first used, as llama-server's `t_last_used`.
    last_used: i64,
    busy: bool,
    /// The agent of the request that last used it.
    owner: Option<String>,
}

/// How a slot was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    /// Its cached tokens share enough of the prompt.
    Similarity,
    /// No slot shares enough: the least recently used idle one.
    LeastRecentlyUsed,
}

/// What a request got from the cache when it took a slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    pub(crate) slot: usize,
    pub(crate) choice: Choice,
    /// Prompt tokens not evaluated again.
    pub(crate) cached: usize,
    /// Prompt tokens to evaluate (at least one).
    pub(crate) evaluated: usize,
    /// Tokens restored from host memory into the slot (part of `cached`'s source).
    pub(crate) restored: usize,
    /// Tokens of the slot's previous contents saved to host memory first.
    pub(crate) saved: usize,
    /// This agent's earlier prefix another agent evicted, when it would have saved more than
    /// what the request got: (the evicting agent, tokens the lost prefix would have saved).
    pub(crate) lost_to: Option<(String, usize)>,
}

impl Claim {
    /// Tokens copied between device and host memory (saving and restoring).
    pub(crate) fn copied(&self) -> usize {
        self.saved + self.restored
    }
}

fn common_prefix(a: &[Tok], b: &[Tok]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl PromptCache {
    /// The cache of a runner with `slots` slots and a host cache holding `host_limit` tokens
    /// (0: off).
    pub(crate) fn new(slots: usize, host_limit: usize) -> Self {
        PromptCache {
            slots: (0..slots.max(1)).map(|_| Slot { last_used: -1, ..Slot::default() }).collect(),
            host: VecDeque::new(),
            host_limit,
            tick: 0,
            lost: HashMap::new(),
        }
    }

    /// Takes an idle slot for a prompt. The caller holds one of the runner's slot permits, so
    /// an idle slot exists.
    pub(crate) fn claim(&mut self, prompt: &[Tok], agent: &str) -> Claim {
        let n = prompt.len().max(1) as f64;
        let mut best: Option<(usize, f64)> = None;
        for (i, s) in self.slots.iter().enumerate() {
            if s.busy || s.tokens.is_empty() {
                continue;
            }
            let sim = common_prefix(&s.tokens, prompt) as f64 / n;
            if sim > best.map_or(0.0, |b| b.1) && sim > SLOT_PROMPT_SIMILARITY {
                best = Some((i, sim));
            }
        }
        let (slot, choice, mut update) = match best {
            Some((i, sim)) => {
                let f_keep = sim * n / self.slots[i].tokens.len() as f64;
                (i, Choice::Similarity, f_keep < 0.5)
            }
            None => {
                let mut pick: Option<usize> = None;
                for (i, s) in self.slots.iter().enumerate() {
                    if !s.busy && pick.is_none_or(|p| s.last_used <= self.slots[p].last_used) {
                        pick = Some(i);
                    }
                }
                (pick.unwrap_or(0), Choice::LeastRecentlyUsed, true)
            }
        };
        update &= self.host_limit > 0;
        let (mut saved, mut restored) = (0, 0);
        let previous = std::mem::take(&mut self.slots[slot].tokens);
        let previous_owner = self.slots[slot].owner.clone();
        let mut entry = None;
        if update {
            if !previous.is_empty() && self.save(&previous) {
                saved = previous.len();
            }
            entry = self.restore(&previous, prompt);
            restored = entry.as_ref().map_or(0, Vec::len);
            self.trim();
        }
        // What the slot holds now: a restored prompt, else what it held.
        let mut cached = common_prefix(entry.as_deref().unwrap_or(&previous), prompt);
        if cached == prompt.len() && cached > 0 {
            // The last prompt token is evaluated again for its logits.
            cached -= 1;
        }
        // The previous owner's prefix is gone from the device unless it was saved.
        if let Some(owner) = previous_owner.filter(|o| o != agent)
            && saved == 0
            && common_prefix(&previous, prompt) < previous.len()
            && !previous.is_empty()
        {
            self.lost.insert(owner, (agent.to_string(), previous));
        }
        let lost_to = self.lost.remove(agent).and_then(|(by, tokens)| {
            let would = common_prefix(&tokens, prompt).min(prompt.len().saturating_sub(1));
            (would > cached).then_some((by, would))
        });
        let s = &mut self.slots[slot];
        s.busy = true;
        s.owner = Some(agent.to_string());
        // Its first `cached` tokens are the prompt's already; the rest is evaluated now.
        s.tokens = prompt.to_vec();
        Claim { slot, choice, cached, evaluated: prompt.len() - cached, restored, saved, lost_to }
    }

    /// Frees a slot; `generated` are the tokens it decoded after the prompt, with the context
    /// shifts a full slot made on the way (`full`).
    pub(crate) fn release(&mut self, slot: usize, generated: &[Tok], full: crate::context::SlotContext) {
        self.tick += 1;
        if let Some(s) = self.slots.get_mut(slot) {
            full.extend(&mut s.tokens, generated);
            s.busy = false;
            s.last_used = self.tick;
        }
    }

    /// `server_prompt_cache::alloc`: false when the prompt is already held.
    fn save(&mut self, tokens: &[Tok]) -> bool {
        if self.host.iter().any(|e| common_prefix(e, tokens) == tokens.len()) {
            return false;
        }
        self.host.retain(|e| common_prefix(e, tokens) != e.len());
        self.host.push_back(tokens.to_vec());
        true
    }

    /// `server_prompt_cache::load`: the saved prompt that keeps at least a quarter of itself
    /// and beats the slot's contents on both the share of itself kept and of the prompt.
    fn restore(&mut self, slot: &[Tok], prompt: &[Tok]) -> Option<Vec<Tok>> {
        let n = prompt.len().max(1) as f64;
        let lcp = common_prefix(slot, prompt);
        let mut f_keep_best = if slot.is_empty() { -1.0 } else { lcp as f64 / slot.len() as f64 };
        let mut sim_best = lcp as f64 / n;
        let mut best = None;
        for (i, e) in self.host.iter().enumerate() {
            let l = common_prefix(e, prompt);
            let (f_keep, sim) = (l as f64 / e.len().max(1) as f64, l as f64 / n);
            if f_keep < 0.25 {
                continue;
            }
            if f_keep_best < f_keep && sim_best < sim {
                (f_keep_best, sim_best, best) = (f_keep, sim, Some(i));
            }
        }
        best.and_then(|i| self.host.remove(i))
    }

    /// `server_prompt_cache::update`: oldest entries out while over the limit, keeping one.
    fn trim(&mut self) {
        while self.host.len() > 1 && self.host.iter().map(Vec::len).sum::<usize>() > self.host_limit {
            self.host.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slots that never fill in these tests.
    const NO_SHIFT: crate::context::SlotContext = crate::context::SlotContext { tokens: usize::MAX, shift: false };

    fn toks(r: std::ops::Range<u64>) -> Vec<Tok> {
        r.collect()
    }

    #[test]
    fn a_repeated_prefix_is_not_evaluated_again_and_a_whole_prompt_still_evaluates_one_token() {
        let mut c = PromptCache::new(1, 0);
        let first = c.claim(&toks(0..100), "a");
        assert_eq!((first.cached, first.evaluated), (0, 100));
        c.release(first.slot, &toks(1000..1010), NO_SHIFT);
        // The next turn resends the prompt and the answer, and adds 20 tokens.
        let mut next = toks(0..100);
        next.extend(1000..1010);
        next.extend(2000..2020);
        let second = c.claim(&next, "a");
        assert_eq!((second.cached, second.evaluated, second.choice), (110, 20, Choice::Similarity));
        c.release(second.slot, &[], NO_SHIFT);
        let same = c.claim(&next, "a");
        assert_eq!((same.cached, same.evaluated), (129, 1));
    }

    #[test]
    fn slots_are_chosen_by_the_longest_prefix_then_least_recently_used() {
        let mut c = PromptCache::new(2, 0);
        // Both idle and never used: the last one (llama-server's `<=`).
        let a = c.claim(&toks(0..50), "a");
        assert_eq!((a.slot, a.choice), (1, Choice::LeastRecentlyUsed));
        let b = c.claim(&toks(100..150), "b");
        assert_eq!(b.slot, 0);
        c.release(a.slot, &[], NO_SHIFT);
        c.release(b.slot, &[], NO_SHIFT);
        // Each comes back to its own slot, whatever the order.
        let mut b2 = toks(100..150);
        b2.extend(500..510);
        assert_eq!(c.claim(&b2, "b").slot, 0);
        let mut a2 = toks(0..50);
        a2.extend(600..610);
        let a2 = c.claim(&a2, "a");
        assert_eq!((a2.slot, a2.cached), (1, 50));
        // A prompt sharing nothing takes the least recently used idle slot.
        c.release(0, &[], NO_SHIFT);
        c.release(1, &[], NO_SHIFT);
        assert_eq!(c.claim(&toks(900..950), "c").slot, 0);
    }

    #[test]
    fn without_a_host_cache_an_agent_that_lost_its_slot_evaluates_everything_and_knows_who_took_it() {
        let mut c = PromptCache::new(1, 0);
        let a = c.claim(&toks(0..200), "a");
        c.release(a.slot, &[], NO_SHIFT);
        let b = c.claim(&toks(300..400), "b");
        assert_eq!(b.lost_to, None);
        c.release(b.slot, &[], NO_SHIFT);
        let a2 = c.claim(&toks(0..220), "a");
        assert_eq!((a2.cached, a2.evaluated), (0, 220));
        assert_eq!(a2.lost_to, Some(("b".to_string(), 200)));
    }

    #[test]
    fn the_host_cache_saves_an_evicted_prompt_and_restores_it() {
        let mut c = PromptCache::new(1, 100_000);
        let a = c.claim(&toks(0..200), "a");
        c.release(a.slot, &[], NO_SHIFT);
        let b = c.claim(&toks(300..400), "b");
        assert_eq!((b.saved, b.restored), (200, 0), "a's prompt saved before b takes the slot");
        c.release(b.slot, &[], NO_SHIFT);
        let a2 = c.claim(&toks(0..220), "a");
        assert_eq!((a2.saved, a2.restored, a2.cached, a2.evaluated), (100, 200, 200, 20));
        assert_eq!(a2.lost_to, None);
        assert_eq!(a2.copied(), 300);
    }

    #[test]
    fn the_host_cache_drops_its_oldest_entries_beyond_its_limit() {
        let mut c = PromptCache::new(1, 250);
        for (i, agent) in ["a", "b", "c"].iter().enumerate() {
            let start = i as u64 * 1000;
            let x = c.claim(&toks(start..start + 200), agent);
            c.release(x.slot, &[], NO_SHIFT);
        }
        // a's and b's prompts were saved in turn; 400 tokens exceed 250, so a's went.
        let a = c.claim(&toks(0..210), "a");
        assert_eq!((a.restored, a.cached), (0, 0));
        assert_eq!(a.lost_to, None, "a's prefix was saved, then dropped by the host cache's limit");
    }
}
