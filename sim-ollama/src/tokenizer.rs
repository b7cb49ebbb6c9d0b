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
/// (`harness calibrate` fits the figure from the server's `prompt_eval_count`).
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

    /// Tokens of a run of `n` letters.
    fn run_tokens(self, n: usize) -> u32 {
        if n == 0 { 0 } else { self.token_of(n - 1) as u32 + 1 }
    }

    /// Whether generated words are cut into tokens: a tokenizer of fewer letters a token than
    /// the default (the default's answers are whole words, one token each, as a large
    /// vocabulary's are).
    fn splits_words(self) -> bool {
        self.letters_per_token < LETTERS_PER_TOKEN
    }

    /// The token count of a text.
    pub fn count(self, text: &str) -> u32 {
        let mut n = 0u32;
        for word in text.split_whitespace() {
            let mut letters = 0usize;
            for c in word.chars() {
                if c.is_alphanumeric() {
                    letters += 1;
                } else {
                    n += self.run_tokens(letters) + 1;
                    letters = 0;
                }
            }
            n += self.run_tokens(letters);
        }
        n
    }

    /// The start of `text` that holds its first `n` tokens (as [`Tokenizer::count`] cuts
    /// them): what a runner keeps of an input it truncates, keeping the beginning and cutting
    /// the end.
    pub(crate) fn first(self, text: &str, n: u32) -> &str {
        if n == 0 {
            return "";
        }
        let mut count = 0u32;
        let mut letters = 0usize;
        for (at, c) in text.char_indices() {
            let after = at + c.len_utf8();
            if c.is_whitespace() {
                letters = 0;
                continue;
            }
            if c.is_alphanumeric() {
                // A token ends where the run ends or the next letter begins another.
                let run_ends = text[after..].chars().next().is_none_or(|d| !d.is_alphanumeric());
                if run_ends || self.starts_token(letters + 1) {
                    count += 1;
                }
                letters = if run_ends { 0 } else { letters + 1 };
            } else {
                letters = 0;
                count += 1;
            }
            if count == n {
                return &text[..after];
            }
        }
        text
    }

    /// The tokens of [`Tokenizer::count`] as hashes of their text, in order (whitespace
    /// separates and is no token). Two texts share a prefix of these exactly where they share
    /// their words, which is what the prompt cache compares.
    pub(crate) fn hashes(self, text: &str, out: &mut Vec<u64>) {
        for word in text.split_whitespace() {
            let mut start: Option<usize> = None;
            let mut letters = 0usize;
            for (i, c) in word.char_indices() {
                if c.is_alphanumeric() {
                    if letters > 0 && self.starts_token(letters) {
                        if let Some(s) = start.take() {
                            out.push(crate::seed::fnv1a(&word.as_bytes()[s..i]));
                        }
                    }
                    start.get_or_insert(i);
                    letters += 1;
                } else {
                    if let Some(s) = start.take() {
                        out.push(crate::seed::fnv1a(&word.as_bytes()[s..i]));
                    }
                    letters = 0;
                    out.push(crate::seed::fnv1a(c.encode_utf8(&mut [0; 4]).as_bytes()));
                }
            }
            if let Some(s) = start {
                out.push(crate::seed::fnv1a(&word.as_bytes()[s..]));
            }
        }
    }

    /// Splits a text into token pieces whose concatenation is the text: the tokens of
    /// [`Tokenizer::count`], each with the whitespace before it.
    pub(crate) fn pieces_of(self, text: &str) -> Vec<Cow<'static, str>> {
        let mut out: Vec<Cow<'static, str>> = Vec::new();
        let mut cur = String::new();
        let (mut letters, mut has_content) = (0usize, false);
        for c in text.chars() {
            if c.is_whitespace() {
                if has_content {
                    out.push(Cow::Owned(std::mem::take(&mut cur)));
                    (letters, has_content) = (0, false);
                }
                cur.push(c);
            } else if c.is_alphanumeric() {
                if has_content && (letters == 0 || self.starts_token(letters)) {
                    out.push(Cow::Owned(std::mem::take(&mut cur)));
                }
                cur.push(c);
                letters += 1;
                has_content = true;
            } else {
                if has_content {
                    out.push(Cow::Owned(std::mem::take(&mut cur)));
                }
                cur.push(c);
                out.push(Cow::Owned(std::mem::take(&mut cur)));
                (letters, has_content) = (0, false);
            }
        }
        if !cur.is_empty() {
            out.push(Cow::Owned(cur));
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
