//! Deterministic text: the token pieces a response is made of (cut by the model's
//! [`Tokenizer`]) and the ids of a text's tokens. Text is a pure function of the RNG it is given.

use crate::seed::SimRng;
pub(crate) use crate::tokenizer::Tokenizer;
use crate::tools::ToolCall;
use crate::words::WORDS;
use rand::RngExt;
use std::borrow::Cow;

/// Stable token ids for a text (for the deprecated `context` field): one id per token of
/// a [`Tokenizer`]'s count, derived from the text's bytes.
pub(crate) fn token_ids(text: &str, count: u32, vocab: u32) -> impl Iterator<Item = u32> + '_ {
    let base = crate::seed::fnv1a(text.as_bytes());
    (0..count).map(move |i| (crate::seed::mix(base ^ u64::from(i)) % u64::from(vocab.max(2))) as u32)
}

/// How a generated text ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DoneReason {
    /// End of sequence or a stop sequence.
    Stop,
    /// `num_predict` (or the context) was reached.
    Length,
}

impl DoneReason {
    /// The wire name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DoneReason::Stop => "stop",
            DoneReason::Length => "length",
        }
    }
}

/// The generated text of one response, as token pieces.
#[derive(Debug, Clone)]
pub(crate) struct TextPlan {
    pub(crate) pieces: Vec<Cow<'static, str>>,
    pub(crate) done_reason: DoneReason,
    /// Tool calls, each over a run of pieces that the tool parser reads instead of sending
    /// them as content (only complete calls: one cut by `num_predict` is text).
    pub(crate) calls: Vec<CallSpan>,
    /// The first `thinking` pieces are the model's reasoning (a thinking model with `think`
    /// on), sent as `thinking` / `reasoning` before the answer.
    pub(crate) thinking: usize,
    /// A stop sequence began right after the last piece: the token it began in was decoded
    /// and is counted in `eval_count`, but none of it is written (llama-server counts every
    /// token it decodes and cuts the text at the stop; an empty stop string: no text, one
    /// token, on Ollama 0.33). A stop inside a piece keeps that piece's head as the last one.
    pub(crate) stop_token: bool,
}

/// What a probe run writes before every word of an answer under a hand-off test
/// ([`marked_text`]): no vocabulary has such words, so a later prompt holding some got them
/// from that answer.
pub(crate) const PROBE_MARK: &str = "zqx";

/// `t` with every word of its text (not its reasoning, not its tool calls) marked with
/// [`PROBE_MARK`]: the same pieces, so the same tokens and the same schedule.
pub(crate) fn marked_text(mut t: TextPlan) -> TextPlan {
    let in_call = |i: usize| t.calls.iter().any(|c| (c.start..=c.end).contains(&i));
    let marked: Vec<Cow<'static, str>> = t
        .pieces
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let word = p.trim_start();
            if i < t.thinking || in_call(i) || word.is_empty() || !word.chars().all(char::is_alphabetic) {
                return p.clone();
            }
            Cow::Owned(format!("{}{PROBE_MARK}{word}", &p[..p.len() - word.len()]))
        })
        .collect();
    t.pieces = marked;
    t
}

/// Whether a prompt holds at least two words marked by [`marked_text`].
pub(crate) fn holds_marked(rendered: &str) -> bool {
    rendered
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.starts_with(PROBE_MARK) && w.len() > PROBE_MARK.len())
        .nth(1)
        .is_some()
}

/// The pieces a tool call's text occupies.
#[derive(Debug, Clone)]
pub(crate) struct CallSpan {
    /// First piece of the call's text.
    pub(crate) start: usize,
    /// Last piece: the call leaves when this token has been generated.
    pub(crate) end: usize,
    pub(crate) call: ToolCall,
}

impl TextPlan {
    /// The call whose last token is piece `i`.
    pub(crate) fn call_ending_at(&self, i: usize) -> Option<&ToolCall> {
        self.calls.iter().find(|c| c.end == i).map(|c| &c.call)
    }

    /// Whether piece `i` is the text of a tool call (never sent as content).
    pub(crate) fn hidden(&self, i: usize) -> bool {
        self.calls.iter().any(|c| (c.start..=c.end).contains(&i))
    }
}

/// What shape the output takes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OutputFormat {
    Prose,
    /// `format: "json"`: any JSON object.
    Json,
    /// `format: {schema}`: a document valid against the schema.
    Schema(serde_json::Value),
}

/// Generates `natural_len` pieces of text (the model's "natural" answer length), cut at
/// `num_predict` (done reason `length`) or at the first stop sequence (done reason `stop`).
/// With tool calls the output is the calls' text instead, whatever its length.
pub(crate) fn generate(
    rng: &mut SimRng,
    tok: Tokenizer,
    natural_len: usize,
    num_predict: Option<usize>,
    stop: &[String],
    format: &OutputFormat,
    calls: Vec<ToolCall>,
) -> TextPlan {
    let limit = num_predict.unwrap_or(usize::MAX);
    if !calls.is_empty() {
        return call_plan(tok, calls, limit);
    }
    let mut pieces: Vec<Cow<'static, str>> = match format {
        OutputFormat::Prose => prose(rng, tok, natural_len.min(limit)),
        // A JSON answer longer than `num_predict` is cut (done reason `length`): a few pieces
        // past it are enough to cut, whatever the model's length (one that never ends its
        // answers has a natural length past any cap).
        OutputFormat::Json => json_object(rng, tok, natural_len.min(limit.saturating_add(16))),
        OutputFormat::Schema(schema) => schema_document(rng, tok, schema, natural_len),
    };
    let mut done_reason = DoneReason::Stop;
    if pieces.len() > limit {
        pieces.truncate(limit);
        done_reason = DoneReason::Length;
    } else if *format == OutputFormat::Prose && natural_len > limit {
        done_reason = DoneReason::Length;
    }
    let mut stop_token = false;
    if !stop.is_empty() {
        if let Some((cut, at_boundary)) = cut_at_stop(&pieces, stop) {
            pieces = cut;
            done_reason = DoneReason::Stop;
            stop_token = at_boundary;
        }
    }
    TextPlan { pieces, done_reason, calls: Vec::new(), thinking: 0, stop_token }
}

/// Puts `n` tokens of reasoning before an answer, within the same `num_predict` budget (the
/// real server counts both in `eval_count`): reasoning that uses the whole budget leaves no
/// answer (done reason `length`); otherwise the answer is cut to what is left.
pub(crate) fn think_first(
    rng: &mut SimRng,
    tok: Tokenizer,
    n: usize,
    num_predict: Option<usize>,
    answer: TextPlan,
) -> TextPlan {
    let limit = num_predict.unwrap_or(usize::MAX);
    let mut pieces = prose(rng, tok, n.min(limit));
    let thinking = pieces.len();
    let room = limit - thinking;
    let TextPlan { pieces: mut rest, mut done_reason, mut calls, stop_token, .. } = answer;
    if thinking >= limit && n > 0 {
        rest.clear();
        calls.clear();
        done_reason = DoneReason::Length;
    } else if rest.len() > room {
        rest.truncate(room);
        calls.retain(|c| c.end < room);
        done_reason = DoneReason::Length;
    }
    for c in &mut calls {
        c.start += thinking;
        c.end += thinking;
    }
    pieces.extend(rest);
    // A stop token counts only where the answer ended on its stop, within the budget.
    let stop_token = stop_token && done_reason == DoneReason::Stop;
    TextPlan { pieces, done_reason, calls, thinking, stop_token }
}

/// A scripted answer's text as pieces, cut at `num_predict` (done reason `length`).
pub(crate) fn scripted_text(tok: Tokenizer, text: &str, num_predict: Option<usize>) -> TextPlan {
    let mut pieces = tok.pieces_of(text);
    let mut done_reason = DoneReason::Stop;
    if let Some(n) = num_predict.filter(|n| pieces.len() > *n) {
        pieces.truncate(n);
        done_reason = DoneReason::Length;
    }
    TextPlan { pieces, done_reason, calls: Vec::new(), thinking: 0, stop_token: false }
}

/// The output of a tool-calling turn: each call's text, cut at `limit` tokens; a call cut
/// short is left as text (the parser never completes it).
fn call_plan(tok: Tokenizer, calls: Vec<ToolCall>, limit: usize) -> TextPlan {
    let mut pieces = Vec::new();
    let mut spans = Vec::new();
    for call in calls {
        let text = tok.pieces_of(&call.raw_text());
        let start = pieces.len();
        pieces.extend(text);
        spans.push(CallSpan { start, end: pieces.len() - 1, call });
    }
    let mut done_reason = DoneReason::Stop;
    if pieces.len() > limit {
        pieces.truncate(limit);
        spans.retain(|s| s.end < limit);
        done_reason = DoneReason::Length;
    }
    TextPlan { pieces, done_reason, calls: spans, thinking: 0, stop_token: false }
}

/// A document for a schema, its strings as long as makes the answer about `natural_len`
/// tokens: the structure is drawn once (one seed) and the string length chosen among a few.
fn schema_document(
    rng: &mut SimRng,
    tok: Tokenizer,
    schema: &serde_json::Value,
    natural_len: usize,
) -> Vec<Cow<'static, str>> {
    use rand::SeedableRng;
    let seed: u64 = rng.random();
    let mut best: Option<(usize, Vec<Cow<'static, str>>)> = None;
    for words in [1, 2, 4, 8, 16, 32] {
        let doc = crate::schema::synthesize(schema, &mut SimRng::seed_from_u64(seed), words);
        let pieces = tok.pieces_of(&serde_json::to_string(&doc).unwrap_or_default());
        let off = pieces.len().abs_diff(natural_len);
        if best.as_ref().is_none_or(|(b, _)| off < *b) {
            best = Some((off, pieces));
        }
    }
    best.map(|b| b.1).unwrap_or_default()
}

fn prose(rng: &mut SimRng, tok: Tokenizer, n: usize) -> Vec<Cow<'static, str>> {
    let mut out: Vec<Cow<'static, str>> = Vec::with_capacity(n);
    let mut sentence_left = 0usize;
    let mut start_of_text = true;
    while out.len() < n {
        if sentence_left == 0 {
            sentence_left = rng.random_range(6..18);
        }
        let word = WORDS[rng.random_range(0..WORDS.len())];
        let capital = out.last().is_none_or(|p| p.ends_with('.') || p.ends_with('\n'));
        let piece = match (start_of_text, capital) {
            (true, _) => Cow::Owned(capitalise(word)),
            (false, true) if out.last().is_some_and(|p| p.ends_with('\n')) => Cow::Owned(capitalise(word)),
            (false, true) => Cow::Owned(format!(" {}", capitalise(word))),
            (false, false) => Cow::Owned(format!(" {word}")),
        };
        start_of_text = false;
        tok.push(&mut out, piece);
        sentence_left -= 1;
        if out.len() >= n {
            break;
        }
        if sentence_left == 0 {
            out.push(Cow::Borrowed("."));
            if out.len() < n && rng.random_bool(0.15) {
                out.push(Cow::Borrowed("\n\n"));
            }
        } else if rng.random_bool(0.08) {
            out.push(Cow::Borrowed(","));
        }
    }
    out.truncate(n);
    out
}

fn json_object(rng: &mut SimRng, tok: Tokenizer, natural_len: usize) -> Vec<Cow<'static, str>> {
    // {"key": "words ...", "key2": "..."} with roughly natural_len pieces.
    let mut out: Vec<Cow<'static, str>> = vec![Cow::Borrowed("{\"")];
    let target = natural_len.max(6);
    let mut first = true;
    while out.len() + 4 < target {
        if !first {
            out.push(Cow::Borrowed(", \""));
        }
        first = false;
        tok.push(&mut out, Cow::Borrowed(WORDS[rng.random_range(0..WORDS.len())]));
        out.push(Cow::Borrowed("\": \""));
        let words = rng.random_range(1..8).min(target.saturating_sub(out.len() + 2)).max(1);
        for i in 0..words {
            let w = WORDS[rng.random_range(0..WORDS.len())];
            tok.push(&mut out, if i == 0 { Cow::Borrowed(w) } else { Cow::Owned(format!(" {w}")) });
        }
        out.push(Cow::Borrowed("\""));
    }
    out.push(Cow::Borrowed("}"));
    out
}

fn capitalise(w: &str) -> String {
    let mut c = w.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Cuts the text before the first occurrence of any stop sequence, and says whether the cut
/// fell between two pieces (the stop began a token of its own, decoded but not written);
/// `None` if none occurs.
fn cut_at_stop(pieces: &[Cow<'static, str>], stop: &[String]) -> Option<(Vec<Cow<'static, str>>, bool)> {
    let text: String = pieces.iter().map(|p| p.as_ref()).collect();
    // An empty stop string matches at once: the real runner writes nothing (the CPU build:
    // `stop: [""]` answers with no content and `eval_count` 1).
    let at = stop.iter().filter_map(|s| text.find(s.as_str())).min()?;
    let mut out = Vec::new();
    let mut pos = 0usize;
    let mut at_boundary = true;
    for p in pieces {
        if pos + p.len() <= at {
            out.push(p.clone());
            pos += p.len();
        } else {
            if at > pos {
                out.push(Cow::Owned(p[..at - pos].to_string()));
                at_boundary = false;
            }
            break;
        }
    }
    Some((out, at_boundary))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rng(s: u64) -> SimRng {
        SimRng::seed_from_u64(s)
    }

    #[test]
    fn a_marked_answer_keeps_its_pieces_and_a_prompt_holding_two_of_its_words_is_known() {
        let t = generate(&mut rng(3), Tokenizer::default(), 40, None, &[], &OutputFormat::Prose, Vec::new());
        let m = marked_text(t.clone());
        assert_eq!(m.pieces.len(), t.pieces.len(), "the same tokens, so the same schedule");
        let text: String = m.pieces.concat();
        let words: Vec<&str> = text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
        assert!(words.iter().all(|w| w.starts_with(PROBE_MARK)), "{text}");
        // Two of its words, in any order, anywhere in a prompt; one is not enough.
        let mut some: Vec<&str> = words.iter().take(2).copied().collect();
        some.reverse();
        assert!(holds_marked(&format!("Write about: {}.", some.join(", "))));
        assert!(!holds_marked(&format!("Write about {}.", some[0])));
        assert!(!holds_marked(&t.pieces.concat()), "an unmarked answer");
    }

    #[test]
    fn generation_is_deterministic_and_seed_dependent() {
        let a = generate(&mut rng(1), Tokenizer::default(), 50, None, &[], &OutputFormat::Prose, Vec::new());
        let b = generate(&mut rng(1), Tokenizer::default(), 50, None, &[], &OutputFormat::Prose, Vec::new());
        let c = generate(&mut rng(2), Tokenizer::default(), 50, None, &[], &OutputFormat::Prose, Vec::new());
        assert_eq!(a.pieces, b.pieces);
        assert_ne!(a.pieces, c.pieces);
        assert_eq!(a.pieces.len(), 50);
        assert_eq!(a.done_reason, DoneReason::Stop);
    }

    #[test]
    fn num_predict_cuts_with_length_reason_and_keeps_the_prefix() {
        let full = generate(&mut rng(3), Tokenizer::default(), 40, None, &[], &OutputFormat::Prose, Vec::new());
        let cut = generate(&mut rng(3), Tokenizer::default(), 40, Some(8), &[], &OutputFormat::Prose, Vec::new());
        assert_eq!(cut.pieces.len(), 8);
        assert_eq!(cut.done_reason, DoneReason::Length);
        assert_eq!(&full.pieces[..8], &cut.pieces[..]);
    }

    #[test]
    fn a_stop_sequence_cuts_the_text_before_it() {
        let full = generate(&mut rng(4), Tokenizer::default(), 60, None, &[], &OutputFormat::Prose, Vec::new());
        let text: String = full.pieces.iter().map(|p| p.as_ref()).collect();
        let cut =
            generate(&mut rng(4), Tokenizer::default(), 60, None, &["e".to_string()], &OutputFormat::Prose, Vec::new());
        let got: String = cut.pieces.iter().map(|p| p.as_ref()).collect();
        assert_eq!(got, text[..text.find('e').unwrap()]);
        assert_eq!(cut.done_reason, DoneReason::Stop);
    }

    #[test]
    fn the_token_a_stop_sequence_begins_in_is_counted_and_never_written() {
        // llama-server counts every token it decodes and cuts the text at the stop: where the
        // stop begins a piece, that piece is decoded and counted, not written (an empty stop
        // string: no text, one token); where it begins inside one, the piece's head is written.
        let full = generate(&mut rng(4), Tokenizer::default(), 60, None, &[], &OutputFormat::Prose, Vec::new());
        let at_start =
            generate(&mut rng(4), Tokenizer::default(), 60, None, &[String::new()], &OutputFormat::Prose, Vec::new());
        assert!(at_start.pieces.is_empty() && at_start.stop_token, "{:?}", at_start.pieces);
        let second = full.pieces[1].to_string();
        let before_second =
            generate(&mut rng(4), Tokenizer::default(), 60, None, &[second], &OutputFormat::Prose, Vec::new());
        assert_eq!((before_second.pieces.len(), before_second.stop_token), (1, true), "{:?}", before_second.pieces);
        let inside = full.pieces[1][1..].to_string();
        let cut = generate(&mut rng(4), Tokenizer::default(), 60, None, &[inside], &OutputFormat::Prose, Vec::new());
        assert_eq!((cut.pieces.len(), cut.stop_token), (2, false), "{:?}", cut.pieces);
    }

    #[test]
    fn json_format_produces_a_json_object() {
        let plan = generate(&mut rng(5), Tokenizer::default(), 30, None, &[], &OutputFormat::Json, Vec::new());
        let text: String = plan.pieces.iter().map(|p| p.as_ref()).collect();
        let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert!(v.is_object());
        // A model that never ends its answers (a natural length past any cap) is cut at
        // num_predict, with no larger document built first; the cut is the same prefix as an
        // answer of a length just past it.
        let endless =
            generate(&mut rng(5), Tokenizer::default(), 1_000_000_000, Some(40), &[], &OutputFormat::Json, Vec::new());
        let longer = generate(&mut rng(5), Tokenizer::default(), 200, Some(40), &[], &OutputFormat::Json, Vec::new());
        assert_eq!((endless.pieces.len(), endless.done_reason), (40, DoneReason::Length));
        assert_eq!(endless.pieces, longer.pieces);
    }

    #[test]
    fn token_counts_grow_with_text() {
        assert_eq!(Tokenizer::default().count(""), 0);
        assert_eq!(Tokenizer::default().count("Hello world"), 2);
        assert_eq!(Tokenizer::default().count("Hello, world!"), 4);
        assert!(Tokenizer::default().count(&"word ".repeat(100)) == 100);
    }

    #[test]
    fn pieces_put_a_text_back_together_at_about_its_token_count() {
        for text in
            ["{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", "  two  spaces, and punctuation!", ""]
        {
            let p = Tokenizer::default().pieces_of(text);
            assert_eq!(p.concat(), text);
            assert!(
                p.len().abs_diff(Tokenizer::default().count(text) as usize) <= 2,
                "{p:?} against {}",
                Tokenizer::default().count(text)
            );
        }
    }
}

#[cfg(test)]
mod tokenizer_tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn an_answer_of_a_tokenizer_of_few_letters_counts_back_to_the_tokens_it_was_generated_in() {
        // A model of a small vocabulary generates pieces of a letter or two: its answer, sent
        // back in the next turn's prompt, is as many tokens as it generated (the real tiny
        // model: 750 generated, 770 read back), where whole words would count several each.
        let tok = Tokenizer::new(1.3);
        let plan = generate(&mut SimRng::seed_from_u64(7), tok, 400, Some(300), &[], &OutputFormat::Prose, Vec::new());
        assert_eq!(plan.pieces.len(), 300);
        let text: String = plan.pieces.iter().map(|p| p.as_ref()).collect();
        let tokens = plan.pieces.iter().filter(|p| !p.trim().is_empty()).count();
        assert_eq!(tok.count(&text) as usize, tokens);
        let letters = text.chars().filter(|c| c.is_alphanumeric()).count() as f64;
        assert!((1.0..=1.6).contains(&(letters / tokens as f64)), "{letters} letters in {tokens} tokens");
        // The default keeps each generated word whole.
        let words = generate(
            &mut SimRng::seed_from_u64(7),
            Tokenizer::default(),
            400,
            Some(300),
            &[],
            &OutputFormat::Prose,
            Vec::new(),
        );
        let text: String = words.pieces.iter().map(|p| p.as_ref()).collect();
        assert!(text.split_whitespace().count() > 200, "{text}");
    }
}
