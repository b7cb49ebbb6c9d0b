//! The deprecated `context` of `/api/generate`: a conversation carried as token ids. The real
//! server decodes the ids a client sends back into text and puts it before the templated prompt
//! (server/routes.go v0.33.0-rc2 541-548), counts it in `prompt_eval_count`, and answers the
//! ids of everything (that context, the prompt and the answer) as the next `context`, the ids
//! sent first (a real Ollama 0.33: a 60-id context and a 25-token prompt evaluated 85 tokens,
//! and the 104 ids it answered began with the 60).
//!
//! The simulator's ids are hashes, not a vocabulary: it cannot decode them. It remembers what
//! each `context` it answered stands for instead ([`Contexts`]): the text, so the next prompt
//! holds it (its tokens counted, the slot's prompt cache matched, the earlier answer carried
//! as a chat history carries it), and the request that answered it, so the trace chains the
//! two as turns of one conversation. Ids it never answered (another server's, a restart's)
//! stand for as many tokens of filler.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// How many contexts are remembered; the oldest is forgotten first. A program continues its
/// latest few; 4,096 answers of a few kilobytes each stay within tens of megabytes.
const KEPT: usize = 4096;

/// What a `context` the simulator answered stands for.
#[derive(Debug)]
pub(crate) struct Remembered {
    /// The text the ids stand for: the prompt's (with the context before it) and the answer's.
    pub(crate) text: String,
    /// The conversation fingerprint of the request that answered it (its `key`).
    pub(crate) key: String,
}

/// The contexts one simulator answered, shared by its instances (a context answered by one
/// instance may be sent to another, as to another real server with the same model).
#[derive(Debug, Default)]
pub(crate) struct Contexts {
    inner: Mutex<(HashMap<u64, Arc<Remembered>>, VecDeque<u64>)>,
}

/// A fingerprint of a context's ids.
fn fingerprint(ids: &[u32]) -> u64 {
    let mut b = crate::seed::SeedBuilder::new(0).str("context");
    for &id in ids {
        b = b.u64(u64::from(id));
    }
    b.finish()
}

/// The conversation fingerprint of a generate request whose prompt (the remembered context's
/// text before it) is `text`: the same prompt sent again, in a probe run, has the same one.
pub(crate) fn key(text: &str) -> String {
    format!("{:016x}", crate::seed::SeedBuilder::new(0).str("generate").str(text).finish())
}

/// The text standing for ids the simulator never answered: one token each (a character that
/// is neither a letter, a digit nor whitespace is a token of its own in every profile's
/// tokenizer).
pub(crate) fn filler(ids: usize) -> String {
    let mut s = "~".repeat(ids);
    if ids > 0 {
        s.push('\n');
    }
    s
}

impl Contexts {
    /// What `ids` stand for, if this simulator answered them (and still remembers).
    pub(crate) fn recall(&self, ids: &[u32]) -> Option<Arc<Remembered>> {
        let inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.0.get(&fingerprint(ids)).cloned()
    }

    /// Remembers that `ids` stand for `text`, answered by the request whose fingerprint is
    /// `key`.
    fn remember(&self, ids: &[u32], text: String, key: String) {
        let f = fingerprint(ids);
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (map, order) = &mut *inner;
        if map.insert(f, Arc::new(Remembered { text, key })).is_none() {
            order.push_back(f);
        }
        while order.len() > KEPT {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }
}

/// A generate request's part in the contexts: its prompt's text and fingerprint, to remember
/// once its final `context` is written ([`Note::remember`]).
#[derive(Debug, Clone)]
pub(crate) struct Note {
    pub(crate) contexts: Arc<Contexts>,
    /// The prompt's text, the context's before it.
    pub(crate) prompt: String,
    pub(crate) key: String,
}

impl Note {
    /// The final `context` (`ids`) went out after `answer`: the next request sending it back
    /// continues this one.
    pub(crate) fn remember(&self, ids: &[u32], answer: &str) {
        self.contexts.remember(ids, format!("{}{answer}", self.prompt), self.key.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_is_recalled_by_its_ids_and_the_oldest_forgotten_past_the_limit() {
        let c = Arc::new(Contexts::default());
        let note = Note { contexts: c.clone(), prompt: "user: hi\n".into(), key: key("user: hi\n") };
        note.remember(&[1, 2, 3], "hello there");
        let r = c.recall(&[1, 2, 3]).expect("remembered");
        assert_eq!(r.text, "user: hi\nhello there");
        assert_eq!(r.key, key("user: hi\n"));
        assert!(c.recall(&[1, 2]).is_none(), "a prefix is another context");
        for i in 0..KEPT as u32 {
            c.remember(&[1000 + i], String::new(), String::new());
        }
        assert!(c.recall(&[1, 2, 3]).is_none(), "the oldest is forgotten first");
        assert!(c.recall(&[1000 + KEPT as u32 - 1]).is_some());
    }

    #[test]
    fn filler_is_one_token_an_id_in_any_tokenizer() {
        for letters in [1.0, 1.45, 6.0] {
            let t = crate::tokenizer::Tokenizer::new(letters);
            assert_eq!(t.count(&filler(60)), 60);
        }
        assert_eq!(filler(0), "");
    }
}
