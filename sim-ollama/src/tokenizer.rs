//! The simulated tokenizer: how many tokens a model counts in a text, where a truncated input
//! is cut, the tokens the prompt cache compares, and the pieces a text is streamed in.

use std::borrow::Cow;

/// How a model's tokenizer cuts a text, as the simulator models it: whitespace is no token of
/// its own (it goes with the token after it), every other character that is not a letter or a
/// digit is one token, and a run of letters or digits is `ceil(n / letters_per_token)` tokens.
/// The default, six letters a token, lands where a 32k-vocabulary BPE tokenizer lands on
/// English (one token a short word); a model with a small vocabulary holds fewer letters a
/// token: the real tiny model of ../shared/tools/real-ollama (301 tokens) counts 1,500
/// characters of this README as 1,147 tokens where six letters a token counts 398
/// (`scripts/twin-probe.py`; `harness calibrate` fits the figure from the server's
/// `prompt_eval_count`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tokenizer {
    letters_per_token: f64,
}

/// The default tokenizer's letters a token.
pub const LETTERS_PER_TOKEN: f64 = 6.0;

impl Default for Tokenizer {
    fn default() -> Self {
        Tokenizer { letters_per_token: LETTERS_PER_TOKEN }
    }
}

impl Tokenizer {
    /// A tokenizer of `letters_per_token` letters a token (at least 1; a profile's is
    /// validated when its configuration loads).
    pub fn new(letters_per_token: f64) -> Tokenizer {
        Tokenizer { letters_per_token: if letters_per_token >= 1.0 { letters_per_token } else { 1.0 } }
    }

    /// The token (0-based) that the `i`-th letter (0-based) of a run is in,
    /// `ceil((i + 1) / letters_per_token) - 1`: a run of `n` letters is
    /// `ceil(n / letters_per_token)` tokens, cut at the same places however it is read.
    fn token_of(self, i: usize) -> usize {
        ((i + 1) as f64 / self.letters_per_token).ceil() as usize - 1
    }

    /// Whether the `i`-th letter of a run begins a token.
    fn starts_token(self, i: usize) -> bool {
        i == 0 || self.token_of(i) != self.token_of(i - 1)
    }

    /// Whether generated words are cut into tokens: a tokenizer of fewer letters a token than
    /// the default (the default's answers are whole words, one token each, as a large
    /// vocabulary's are).
    fn splits_words(self) -> bool {
        self.letters_per_token < LETTERS_PER_TOKEN
    }

    /// The byte ranges of a text's tokens, in order: each run of letters or digits cut where
    /// [`Tokenizer::starts_token`] says, each other character that is not whitespace one token,
    /// whitespace none. Every reading of a text ([`Tokenizer::count`], [`Tokenizer::first`],
    /// [`Tokenizer::hashes`], [`Tokenizer::pieces_of`]) is of these.
    fn spans(self, text: &str) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let mut chars = text.char_indices().peekable();
        // Letters of the current run already taken.
        let mut letters = 0usize;
        std::iter::from_fn(move || {
            while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
            let (start, c) = chars.next()?;
            let mut end = start + c.len_utf8();
            if !c.is_alphanumeric() {
                return Some(start..end);
            }
            letters += 1;
            while let Some((i, d)) = chars.next_if(|&(_, d)| d.is_alphanumeric() && !self.starts_token(letters)) {
                end = i + d.len_utf8();
                letters += 1;
            }
            // The run goes on in the next token, or it ended here.
            if !chars.peek().is_some_and(|(_, d)| d.is_alphanumeric()) {
                letters = 0;
            }
            Some(start..end)
        })
    }

    /// The token count of a text.
    pub fn count(self, text: &str) -> u32 {
        self.spans(text).count() as u32
    }

    /// The start of `text` that holds its first `n` tokens (as [`Tokenizer::count`] cuts
    /// them): what a runner keeps of an input it truncates, keeping the beginning and cutting
    /// the end.
    pub(crate) fn first(self, text: &str, n: u32) -> &str {
        match (n as usize).checked_sub(1) {
            None => "",
            Some(last) => self.spans(text).nth(last).map_or(text, |r| &text[..r.end]),
        }
    }

    /// The tokens of [`Tokenizer::count`] as hashes of their text, in order. Two texts share a
    /// prefix of these exactly where they share their words, which is what the prompt cache
    /// compares.
    pub(crate) fn hashes(self, text: &str, out: &mut Vec<u64>) {
        out.extend(self.spans(text).map(|r| crate::seed::fnv1a(&text.as_bytes()[r])));
    }

    /// Splits a text into token pieces whose concatenation is the text: the tokens of
    /// [`Tokenizer::count`], each with the whitespace before it (whitespace after the last, a
    /// piece of its own).
    pub(crate) fn pieces_of(self, text: &str) -> Vec<Cow<'static, str>> {
        let mut out: Vec<Cow<'static, str>> = Vec::new();
        let mut from = 0;
        for r in self.spans(text) {
            out.push(Cow::Owned(text[from..r.end].to_string()));
            from = r.end;
        }
        if from < text.len() {
            out.push(Cow::Owned(text[from..].to_string()));
        }
        out
    }

    /// Appends a generated piece: whole with the default tokenizer, else cut into its tokens.
    pub(crate) fn push(self, out: &mut Vec<Cow<'static, str>>, piece: Cow<'static, str>) {
        if self.splits_words() {
            out.extend(self.pieces_of(&piece));
        } else {
            out.push(piece);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_tokens_of_a_text_are_a_prefix_that_counts_them() {
        let t = "why is the sky blue? Why is the sky blue? hi there my";
        assert_eq!(Tokenizer::default().count(t), 15);
        assert_eq!(Tokenizer::default().first(t, 1), "why");
        assert_eq!(Tokenizer::default().first(t, 6), "why is the sky blue?");
        assert_eq!(Tokenizer::default().first(t, 14), "why is the sky blue? Why is the sky blue? hi there");
        assert_eq!(Tokenizer::default().first(t, 99), t);
        // A long word is a token every six letters.
        assert_eq!(Tokenizer::default().first("abcdefghijkl mn", 1), "abcdef");
        for n in 0..=15 {
            assert_eq!(Tokenizer::default().count(Tokenizer::default().first(t, n)), n);
        }
    }

    #[test]
    fn token_hashes_are_the_counted_tokens_and_a_shared_prefix_of_words_shares_them() {
        for text in ["", "Hello, world!", "internationalization 1234567890 x", "a\nb  c", "héllo wörld ünïcødé"] {
            let mut h = Vec::new();
            Tokenizer::default().hashes(text, &mut h);
            assert_eq!(h.len() as u32, Tokenizer::default().count(text), "{text:?}");
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        Tokenizer::default().hashes("user: what is the weather\n", &mut a);
        Tokenizer::default().hashes("user: what is the weather\nassistant: sunny\n", &mut b);
        assert_eq!(&b[..a.len()], &a[..]);
        assert_ne!(a[0], a[1]);
    }

    #[test]
    fn a_run_of_letters_is_its_letters_over_the_letters_a_token_however_it_is_read() {
        let texts = [
            "",
            "Hello, world!",
            "internationalization 1234567890 x",
            "a\nb  c",
            "héllo wörld ünïcødé",
            "  why is the sky blue? ",
        ];
        for l in [1.0, 1.3, 2.5, 6.0, 9.0] {
            let tok = Tokenizer::new(l);
            assert_eq!(tok.count("abcdefghijklm"), (13.0f64 / l).ceil() as u32, "{l}");
            for text in texts {
                let n = tok.count(text);
                let mut h = Vec::new();
                tok.hashes(text, &mut h);
                assert_eq!(h.len() as u32, n, "hashes at {l}: {text:?}");
                let pieces = tok.pieces_of(text);
                assert_eq!(pieces.concat(), text);
                let tokens = pieces.iter().filter(|p| !p.trim().is_empty()).count() as u32;
                assert_eq!(tokens, n, "pieces at {l}: {pieces:?}");
                for k in 0..=n {
                    assert_eq!(tok.count(tok.first(text, k)), k, "the first {k} tokens at {l} of {text:?}");
                }
            }
        }
        assert_eq!(Tokenizer::new(1.3).pieces_of("abcd ef"), ["a", "b", "c", "d", " e", "f"]);
    }
}
