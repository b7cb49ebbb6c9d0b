//! Answers carried into later requests: the data flow between agents.
//!
//! A multi-agent program passes answers on: LangGraph's map-reduce graphs, a supervisor that
//! hands a worker's result to an editor, a pipeline of agents. A request whose prompt holds an
//! earlier request's answer could not have been sent before that answer arrived, whoever sent
//! it; the judge must not count its wait as time the client lost (issue 23: a correct
//! fan-out/join graph read "partly serialized").
//!
//! The simulator wrote every answer itself, so it can recognise one in a later prompt: each
//! answer is remembered as the hashes of its runs of [`WINDOW`] consecutive words (lower-cased
//! letters and digits; punctuation, whitespace and markup between them are ignored, so an
//! answer quoted inside a template, a JSON string or a list still matches), and each new
//! prompt's runs are looked up. One run of six generated words is evidence enough: the
//! simulator's words are drawn at random, and a user's own text is not made of them in the
//! same order.
//!
//! A tool call's id is evidence too: a tool result names the call it answers
//! (`tool_call_id`, `tool_use_id`, `call_id`), however a framework re-serialises the messages
//! around it. The random part of every generated call id (`call_` + 8 letters and digits) is
//! remembered as a one-word key, and every word of a prompt is looked up.
//!
//! A shorter run, of [`HINT_WINDOW`] words, is a **hint**, not evidence enough on its own: a
//! leader that hands a member its task as a short tool argument or a few words of its answer
//! leaves only such a run in the member's prompt. The judge takes a hint as the data flow only
//! where the timing says the same: an agent's first call that went out right after the answer
//! it hints at (a hand-off).
//!
//! The memory is bounded ([`CAPACITY`] runs, the oldest forgotten first) and forgotten with
//! the trace.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Words in one run.
pub(crate) const WINDOW: usize = 6;

/// Words in one hint.
pub(crate) const HINT_WINDOW: usize = 3;

/// Runs remembered at most (about 40 bytes each).
pub(crate) const CAPACITY: usize = 1 << 18;

/// Requests remembered per run: identical prompts get identical answers (the simulator is
/// deterministic), so one run can belong to several requests.
const PER_RUN: usize = 4;

/// The answers of earlier requests, by their runs of words.
#[derive(Debug, Default)]
pub(crate) struct Answers {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    runs: HashMap<u64, Vec<u64>>,
    /// Every (run, request) remembered, oldest first.
    order: VecDeque<(u64, u64)>,
}

impl Answers {
    /// The earlier requests whose answers `input` carries (sorted, without `id` itself), and
    /// those it only hints at (a run of [`HINT_WINDOW`] of their words, not carried); then
    /// remembers `answer` and the ids of the tool calls in it as request `id`'s.
    pub(crate) fn link(&self, id: u64, input: &str, answer: &str, call_ids: &[&str]) -> (Vec<u64>, Vec<u64>) {
        let input_words = words(input);
        let mut input_runs = runs(&input_words);
        input_runs.extend(input_words.iter().map(|&w| id_key(w)));
        let input_hints = hints(&input_words);
        let answer_words = words(answer);
        let mut answer_runs = runs(&answer_words);
        answer_runs.extend(hints(&answer_words));
        answer_runs.extend(
            call_ids.iter().filter_map(|c| c.rsplit('_').next()).flat_map(|w| words(w).into_iter().take(1)).map(id_key),
        );
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut carried: Vec<u64> =
            input_runs.iter().filter_map(|h| inner.runs.get(h)).flatten().copied().filter(|&r| r != id).collect();
        carried.sort_unstable();
        carried.dedup();
        let mut hinted: Vec<u64> = input_hints
            .iter()
            .filter_map(|h| inner.runs.get(h))
            .flatten()
            .copied()
            .filter(|&r| r != id && carried.binary_search(&r).is_err())
            .collect();
        hinted.sort_unstable();
        hinted.dedup();
        for h in answer_runs {
            let ids = inner.runs.entry(h).or_default();
            if ids.contains(&id) {
                continue;
            }
            if ids.len() == PER_RUN {
                ids.remove(0);
            }
            ids.push(id);
            inner.order.push_back((h, id));
        }
        while inner.order.len() > CAPACITY {
            let Some((h, old)) = inner.order.pop_front() else { break };
            if let Some(ids) = inner.runs.get_mut(&h) {
                ids.retain(|&r| r != old);
                if ids.is_empty() {
                    inner.runs.remove(&h);
                }
            }
        }
        (carried, hinted)
    }

    /// Forgets every answer.
    pub(crate) fn clear(&self) {
        *self.inner.lock().unwrap_or_else(|e| e.into_inner()) = Inner::default();
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The hash of every word of `text` (a run of letters and digits), lower-cased as it is
/// hashed: no allocation per word, so remembering an answer costs the request little.
fn words(text: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let (mut h, mut in_word) = (FNV_OFFSET, false);
    for c in text.chars() {
        if c.is_alphanumeric() {
            for lc in c.to_lowercase() {
                let mut buf = [0u8; 4];
                for b in lc.encode_utf8(&mut buf).bytes() {
                    h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
                }
            }
            in_word = true;
        } else if in_word {
            out.push(h);
            (h, in_word) = (FNV_OFFSET, false);
        }
    }
    if in_word {
        out.push(h);
    }
    out
}

/// The hashes of every run of [`WINDOW`] consecutive words.
fn runs(words: &[u64]) -> Vec<u64> {
    words
        .windows(WINDOW)
        .map(|run| run.iter().fold(FNV_OFFSET, |h, &w| (h ^ w).wrapping_mul(FNV_PRIME).rotate_left(23)))
        .collect()
}

/// The hashes of every run of [`HINT_WINDOW`] consecutive words (a domain of their own).
fn hints(words: &[u64]) -> Vec<u64> {
    words
        .windows(HINT_WINDOW)
        .map(|run| run.iter().fold(FNV_OFFSET ^ 0x5bd1_e995, |h, &w| (h ^ w).wrapping_mul(FNV_PRIME).rotate_left(29)))
        .collect()
}

/// The key of a tool call id's random part, as one word (a domain of its own).
fn id_key(word: u64) -> u64 {
    (word ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(FNV_PRIME).rotate_left(41)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = "The cache keeps stale entries until a reader touches them, so memory grows.";

    #[test]
    fn an_answer_quoted_in_a_later_prompt_links_the_two_requests() {
        let a = Answers::default();
        assert!(a.link(1, "Review the cache change.", ANSWER, &[]).0.is_empty());
        assert!(a.link(2, "Review the index change.", "Nothing to add here at all today.", &[]).0.is_empty());
        // Reformatted as a framework would: a list item, other case, JSON quoting.
        let prompt = "Summarize:\n- security: \"the CACHE keeps stale entries until a reader\" ...";
        assert_eq!(a.link(3, prompt, "A summary of it all for the team.", &[]).0, vec![1]);
        // Both answers carried; a request never carries its own answer.
        let both = format!("{ANSWER}\n{}", "nothing to add here at all today");
        assert_eq!(a.link(2, &both, "x", &[]).0, vec![1]);
        assert_eq!(a.link(4, &both, "x", &[]).0, vec![1, 2]);
    }

    #[test]
    fn fewer_than_six_words_in_common_is_no_link() {
        let a = Answers::default();
        a.link(1, "q", ANSWER, &[]);
        // Five words: no link, a hint; two words: not even that.
        assert_eq!(a.link(2, "the cache keeps stale entries", "y", &[]), (vec![], vec![1]));
        assert_eq!(a.link(3, "your task: the cache", "y", &[]), (vec![], vec![]));
        a.clear();
        assert!(a.link(4, ANSWER, "z", &[]).0.is_empty(), "forgotten after clear");
    }

    #[test]
    fn a_tool_result_naming_a_call_links_to_the_request_that_made_the_call() {
        let a = Answers::default();
        assert!(a.link(1, "What is the weather in Paris?", "", &["call_k3x9q2ab"]).0.is_empty());
        // Re-serialised by a framework: the id glued to the tool's name, in any case.
        assert_eq!(a.link(2, "tool: 18 degrees get_weatherCALL_K3X9Q2AB", "It is mild.", &[]).0, vec![1]);
        assert!(a.link(3, "call_k3x9q2ac", "", &[]).0.is_empty(), "another id");
    }

    #[test]
    fn identical_answers_link_to_every_request_that_gave_them_and_memory_is_bounded() {
        let a = Answers::default();
        a.link(1, "q", ANSWER, &[]);
        a.link(2, "q", ANSWER, &[]);
        assert_eq!(a.link(3, ANSWER, "", &[]).0, vec![1, 2]);
        let inner = a.inner.lock().expect("lock");
        assert!(inner.order.len() <= CAPACITY);
        let w = words(ANSWER);
        assert_eq!(inner.order.len(), 2 * (runs(&w).len() + hints(&w).len()));
    }
}
