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
    // No truncation: llama-server's refusal, with both counts.
    let mut whole = body.clone();
    whole["truncate"] = json!(false);
    let (status, v) = post(&sim, "/api/generate", &whole);
    assert_eq!(status, 400);
    let inner: Value = serde_json::from_str(v["error"].as_str().unwrap()).unwrap();
    assert_eq!(
        inner["error"]["message"],
        format!(
            "request ({} tokens) exceeds the available context size (128 tokens), try increasing it",
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
