//! `/api/embed`'s context (issue 38): inputs fitted as Ollama's EmbedHandler fits them.

use crate::util::raw_blocking;
use serde_json::{Value, json};
use sim_ollama::{SimBuilder, SimHandle};

fn sim() -> SimHandle {
    SimBuilder::new().seed(3).time_scale(0.01).start().unwrap()
}

fn post(sim: &SimHandle, path: &str, body: &Value) -> (u16, String) {
    let r = raw_blocking(sim.addrs()[0], "POST", path, Some(&body.to_string()), &[]);
    (r.status, r.text())
}

/// `/api/embed`'s context (issue 38), as EmbedHandler fits inputs (server/routes.go v0.33.0-rc2
/// 875-973) and what Ollama's integration suite checks of it (integration/embed_test.go
/// 211-678): the limit is the context, or num_ctx where smaller, less two tokens for the
/// special ones, which prompt_eval_count counts.
#[test]
fn embed_fits_inputs_into_the_context_as_ollama_does() {
    let sim = sim();
    let embed = |extra: Value| {
        let mut b = json!({"model": "all-minilm", "input": "why is the sky blue?"});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        post(&sim, "/api/embed", &b)
    };
    let vector = |text: &str| -> Value { serde_json::from_str(text).unwrap() };
    let (status, text) = embed(json!({}));
    assert_eq!(status, 200, "{text}");
    assert_eq!(vector(&text)["prompt_eval_count"], 8, "6 tokens and [CLS] [SEP]: {text}");
    assert_eq!(vector(&text)["embeddings"][0].as_array().map(Vec::len), Some(384));
    // num_ctx 3: one token left, the input cut to "why", truncate or not said.
    let (_, why) = post(&sim, "/api/embed", &json!({"model": "all-minilm", "input": "why"}));
    for extra in [json!({"options": {"num_ctx": 3}}), json!({"options": {"num_ctx": 3}, "truncate": true})] {
        let (status, text) = embed(extra);
        assert_eq!(status, 200, "{text}");
        assert_eq!(vector(&text)["embeddings"], vector(&why)["embeddings"], "cut to its first token");
        assert_eq!(vector(&text)["prompt_eval_count"], 3);
    }
    for (extra, says) in [
        (json!({"options": {"num_ctx": 3}, "truncate": false}), "the input length exceeds the context length"),
        (json!({"options": {"num_ctx": 1}}), "input after truncation exceeds maximum context length"),
        // num_ctx 0: the handler keeps the model's context, the runner has 4 tokens.
        (json!({"options": {"num_ctx": 0}}), "input exceeds maximum context length and cannot be truncated further"),
    ] {
        let (status, text) = embed(extra.clone());
        assert_eq!((status, text.as_str()), (400, format!("{{\"error\":\"{says}\"}}").as_str()), "{extra}");
    }
    // The boundary: 15 tokens into 16, cut to 14 and two special ones.
    let (status, text) = post(
        &sim,
        "/api/embed",
        &json!({"model": "all-minilm", "input":
        "why is the sky blue? Why is the sky blue? hi there my", "options": {"num_ctx": 16}}),
    );
    assert_eq!(status, 200, "{text}");
    assert_eq!(vector(&text)["prompt_eval_count"], 16);
}

/// A model without embeddings is loaded, then refused by its runner: the real CPU build lists
/// it in /api/ps after the 501 (EmbedHandler schedules the runner before asking it).
#[test]
fn a_model_without_embeddings_is_loaded_then_refused() {
    let sim = SimBuilder::new().seed(3).time_scale(0.01).start().unwrap();
    for (path, body, status) in [
        ("/api/embed", json!({"model": "tiny", "input": "hi"}), 501),
        ("/api/embeddings", json!({"model": "tiny", "prompt": "hi"}), 500),
    ] {
        let (got, text) = post(&sim, path, &body);
        assert_eq!(got, status, "{path}: {text}");
        assert!(text.contains("does not support embeddings"), "{text}");
    }
    let ps = raw_blocking(sim.addrs()[0], "GET", "/api/ps", None, &[]);
    let ps: Value = serde_json::from_str(&ps.text()).unwrap();
    let names: Vec<&str> = ps["models"].as_array().unwrap().iter().filter_map(|m| m["name"].as_str()).collect();
    assert_eq!(names, ["tiny:latest"], "loaded by the refused request");
}
