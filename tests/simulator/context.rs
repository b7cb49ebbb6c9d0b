//! Context limits (issue 12, item 2), per slot of `num_ctx` tokens, as Ollama 0.33 applies
//! them (see `sim-ollama/src/context.rs` for the source lines): chat history dropped from the
//! front (system messages kept), a prompt still too long cut after its first tokens, refused
//! without context shift or without `truncate`, and open-ended generation bounded at ten
//! context windows.

use crate::util::raw_blocking;
use serde_json::{Value, json};
use sim_ollama::{SimBuilder, SimHandle};

fn sim() -> SimHandle {
    SimBuilder::new().frozen_clock(true).time_scale(0.001).start().unwrap()
}

fn post(sim: &SimHandle, path: &str, body: &Value) -> (u16, Value) {
    let r = raw_blocking(sim.addrs()[0], "POST", path, Some(&body.to_string()), &[]);
    let v = serde_json::from_str(&r.text()).unwrap_or_else(|e| panic!("{e}: {}", r.text()));
    (r.status, v)
}

fn words(seed: &str, n: usize) -> String {
    (0..n).map(|i| format!("{seed}{i}")).collect::<Vec<_>>().join(" ")
}

/// A system prompt and ten long turns: far more than 256 tokens.
fn long_history() -> Vec<Value> {
    let mut m = vec![json!({"role": "system", "content": "You are terse."})];
    for i in 0..10 {
        m.push(json!({"role": "user", "content": words(&format!("u{i}w"), 40)}));
        m.push(json!({"role": "assistant", "content": words(&format!("a{i}w"), 40)}));
    }
    m.push(json!({"role": "user", "content": "And now?"}));
    m
}

#[test]
fn a_chat_history_longer_than_the_context_keeps_its_latest_turns_and_its_system_prompt() {
    let sim = sim();
    let body = json!({"model": "llama3.2:1b", "messages": long_history(), "stream": false,
        "options": {"num_ctx": 256, "num_predict": 4}});
    let (status, v) = post(&sim, "/api/chat", &body);
    assert_eq!(status, 200, "{v}");
    // Whole messages go from the front: the template's 26 tokens, the system prompt's 6
    // (`system: You are terse.`), the question's 5 (`user: And now?`), and as many of the
    // latest turns as fit: 5 (a 40-word message is 42 tokens as `user`, 43 as `assistant`,
    // whose 9 letters are two tokens): 26 + 6 + 5 + 3 x 43 + 2 x 42 = 250. (Cutting tokens
    // instead, as for a single over-long prompt, would give 256 - (256 - 5) / 2 = 131.)
    assert_eq!(v["prompt_eval_count"], 250);
    // Without the truncation the whole history (well over 500 tokens) reaches the runner,
    // which refuses it with llama-server's error, passed on as Ollama passes it.
    let mut whole = body.clone();
    whole["truncate"] = json!(false);
    let (status, v) = post(&sim, "/api/chat", &whole);
    assert_eq!(status, 400);
    let inner: Value = serde_json::from_str(v["error"].as_str().unwrap()).expect("the runner's JSON error");
    assert_eq!(inner["error"]["type"], "exceed_context_size_error");
    assert_eq!(inner["error"]["n_ctx"], 256);
    assert!(inner["error"]["n_prompt_tokens"].as_u64().unwrap() > 500, "{inner}");
    // The OpenAI endpoint truncates the same way (its requests carry neither `truncate` nor
    // `options`: the context is the default 4096 here, so the history is made longer).
    let mut history = vec![json!({"role": "system", "content": "You are terse."})];
    for i in 0..12 {
        history.push(json!({"role": "user", "content": words(&format!("u{i}w"), 200)}));
        history.push(json!({"role": "assistant", "content": words(&format!("a{i}w"), 200)}));
    }
    history.push(json!({"role": "user", "content": "And now?"}));
    let v1 = json!({"model": "llama3.2:1b", "messages": history, "max_tokens": 4});
    let (status, v) = post(&sim, "/v1/chat/completions", &v1);
    assert_eq!(status, 200, "{v}");
    let n1 = v["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!((2000..=4096).contains(&n1), "{n1} prompt tokens in a 4096-token context");
}

#[test]
fn a_prompt_longer_than_the_context_is_cut_after_its_first_tokens_or_refused() {
    let sim = sim();
    let body = json!({"model": "tiny", "prompt": words("w", 500), "stream": false,
        "options": {"num_ctx": 128, "num_predict": 4}});
    let (status, v) = post(&sim, "/api/generate", &body);
    assert_eq!(status, 200, "{v}");
    // num_keep 4 and the BOS kept, then the latest tokens: 128 - (128 - 5) / 2 = 67.
    assert_eq!(v["prompt_eval_count"], 67);
    let t = sim.trace();
    assert_eq!(t.requests.last().unwrap().prompt_tokens, 67);
    // Context shift off: the real 400.
    let mut no_shift = body.clone();
    no_shift["shift"] = json!(false);
    let (status, v) = post(&sim, "/api/generate", &no_shift);
    assert_eq!(status, 400);
    assert_eq!(
        v["error"],
        "the prompt is longer than the context length currently available to the model; shorten the prompt, adjust the context length in settings, or use a model with a longer context length"
    );
    // No truncation: llama-server's refusal, with both counts; its slot is num_ctx rounded up
    // to 256.
    let mut whole = body.clone();
    whole["truncate"] = json!(false);
    let (status, v) = post(&sim, "/api/generate", &whole);
    assert_eq!(status, 400);
    let inner: Value = serde_json::from_str(v["error"].as_str().unwrap()).unwrap();
    assert_eq!(
        inner["error"]["message"],
        format!(
            "request ({} tokens) exceeds the available context size (256 tokens), try increasing it",
            inner["error"]["n_prompt_tokens"]
        )
    );
    // Streaming gets the same error before the stream (status and JSON body, as the real
    // streamResponse writes an error that comes before any content).
    let mut streamed = whole.clone();
    streamed["stream"] = json!(true);
    let (status, _) = post(&sim, "/api/generate", &streamed);
    assert_eq!(status, 400);
}

#[test]
fn open_ended_generation_stops_at_ten_context_windows() {
    let sim = sim();
    let body = json!({"model": "tiny", "prompt": "Go on.", "stream": false,
        "options": {"num_ctx": 16, "num_predict": -1, "sim_tokens": 100000}});
    let (status, v) = post(&sim, "/api/generate", &body);
    assert_eq!(status, 200, "{v}");
    assert_eq!((v["eval_count"].as_u64(), v["done_reason"].as_str()), (Some(160), Some("length")));
}

/// A model whose tokens slow with the context they attend to (4 per 1,000 tokens of it).
const SLOWING: &str = r#"
[[models]]
name = "slowing:latest"
family = "llama"
parameter_size = "1B"
quantization_level = "Q8_0"
size = 1000000
context_length = 8192
embedding_length = 256
capabilities = ["completion"]
[models.profile]
load_ms = { dist = "constant", mean = 10.0 }
call_overhead_ms = { dist = "constant", mean = 1.0 }
prompt_tokens_per_s = 20000.0
first_token_ms = { dist = "constant", mean = 4.0 }
decode_tokens_per_s = 2000.0
decode_slowdown_per_1k = 4.0
inter_token = { dist = "constant" }
output_tokens = { dist = "constant", mean = 100.0 }
"#;

#[test]
fn a_full_slot_stops_the_answer_without_context_shift_and_shifts_its_context_with_it() {
    let config = sim_ollama::advanced::config::ConfigFile::from_toml(SLOWING).unwrap();
    let sim = SimBuilder::new().config(config).frozen_clock(true).time_scale(0.001).start().unwrap();
    let ask = |num_ctx: u64, shift: bool| {
        let body = json!({"model": "slowing", "prompt": "hello there", "stream": false, "shift": shift,
            "options": {"num_ctx": num_ctx, "num_predict": 3000, "sim_tokens": 5000}});
        let (status, v) = post(&sim, "/api/generate", &body);
        assert_eq!(status, 200, "{v}");
        let attention = sim.trace().requests.last().unwrap().attention;
        let eval_ms = v["eval_duration"].as_f64().unwrap() / 1e6;
        (
            v["prompt_eval_count"].as_u64().unwrap(),
            v["eval_count"].as_u64().unwrap(),
            v["done_reason"].clone(),
            (attention, eval_ms),
        )
    };
    // Without context shift the answer stops where its slot is full, and a slot is num_ctx
    // rounded up to 256 (the real CPU build: 230 tokens after a 26-token prompt at num_ctx
    // 100 and 256, 486 at 300).
    for (num_ctx, slot) in [(100, 256), (256, 256), (300, 512)] {
        let (prompt, answer, reason, _) = ask(num_ctx, false);
        assert_eq!((prompt + answer, reason.as_str()), (slot, Some("length")), "num_ctx {num_ctx}");
    }
    // With it the answer goes on, and each token attends to at most a slot's tokens: 3,000
    // tokens in a 512-token slot attend to about 3/4 of it (0.004 x 384 = 1.5), where a
    // 4096-token slot holds them all (0.004 x 1,500 = 6).
    let (_, answer, reason, (short, short_ms)) = ask(512, true);
    assert_eq!((answer, reason.as_str()), (3000, Some("length")));
    let (_, _, _, (long, long_ms)) = ask(4096, true);
    assert!((1.2..1.8).contains(&short), "attention in a 512-token slot: {short}");
    assert!((5.8..6.3).contains(&long), "attention in a 4096-token slot: {long}");
    // And its tokens are as much faster: 1 + 0.004 x 384 against 1 + 0.004 x 1,513 per token
    // (2.5 against 7.1; the real tiny model: 3,400 tokens/s against 1,135).
    let ratio = long_ms / short_ms;
    assert!((2.4..3.2).contains(&ratio), "decode {long_ms} ms in 4096, {short_ms} ms in 512: {ratio}");
}

#[test]
fn a_model_of_few_letters_a_token_counts_its_prompts_and_its_answers_read_back_as_the_server_does() {
    // The real tiny model (a 301-token vocabulary) counts a templated "hi" as 22 tokens and
    // its own 750-token answer, sent back, as 770: a model of 1.5 letters a token and a
    // 20-token template counts "abcd ef" as 3 + 2 + 20, and generates pieces of a letter or
    // two, so that its answer reads back at about the tokens it was generated in.
    let small = SLOWING
        .replace("slowing:latest", "small-vocab:latest")
        .replace("[models.profile]\n", "[models.profile]\nletters_per_token = 1.5\ntemplate_tokens = 20\n");
    let config = sim_ollama::advanced::config::ConfigFile::from_toml(&format!("{SLOWING}{small}")).unwrap();
    let sim = SimBuilder::new().config(config).frozen_clock(true).time_scale(0.001).start().unwrap();
    let count = |model: &str, prompt: &str, raw: bool| {
        let body =
            json!({"model": model, "prompt": prompt, "raw": raw, "stream": false, "options": {"num_predict": 1}});
        let (status, v) = post(&sim, "/api/generate", &body);
        assert_eq!(status, 200, "{v}");
        v["prompt_eval_count"].as_u64().unwrap()
    };
    assert_eq!(count("small-vocab", "abcd ef", false), 25);
    assert_eq!(count("small-vocab", "abcd ef", true), 5);
    assert_eq!(count("slowing", "abcd ef", false), 2);
    for model in ["small-vocab", "slowing"] {
        let body = json!({"model": model, "prompt": "go on", "stream": false, "options": {"num_predict": 750, "sim_tokens": 750}});
        let (_, v) = post(&sim, "/api/generate", &body);
        let answer = v["response"].as_str().unwrap().to_string();
        let back = count(model, &answer, true) as f64;
        // Whole words with the default tokenizer: a word of seven letters or more is one
        // piece generated and two read back.
        let (lo, hi) = if model == "small-vocab" { (700.0, 800.0) } else { (700.0, 1000.0) };
        assert!((lo..hi).contains(&back), "{model}: 750 tokens generated read back as {back}");
        if model == "small-vocab" {
            assert!(answer.len() < 1500, "{} characters in 750 tokens of 1.5 letters", answer.len());
        }
    }
}
