//! Thinking models (issue 12, item 3): `qwen3:0.6b` reasons before it answers, by default (the
//! real handlers turn `think` on for models with the thinking capability, server/routes.go
//! v0.33.0-rc2 454-458 and 2616-2620). Reasoning streams as `thinking` natively (api/types.go
//! Message and GenerateResponse) and `delta.reasoning` on `/v1` (openai/openai.go toChunk), before
//! the first content token, counted in `eval_count` and within `num_predict`.

use crate::util::{raw_blocking, snapshot_settings};
use serde_json::{Value, json};
use sim_ollama::{SimBuilder, SimHandle};

const MODEL: &str = "qwen3:0.6b";

fn sim() -> SimHandle {
    SimBuilder::new().seed(5).frozen_clock(true).time_scale(0.01).start().unwrap()
}

fn post(sim: &SimHandle, path: &str, body: &Value) -> (u16, String) {
    let r = raw_blocking(sim.addrs()[0], "POST", path, Some(&body.to_string()), &[]);
    (r.status, r.text())
}

fn ok(sim: &SimHandle, path: &str, body: &Value) -> String {
    let (status, text) = post(sim, path, body);
    assert_eq!(status, 200, "{text}");
    text
}

fn ndjson(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

fn sse(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter(|e| !e.is_empty() && *e != "data: [DONE]")
        .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
        .collect()
}

fn chat(extra: Value) -> Value {
    let mut b = json!({"model": MODEL, "messages": [{"role": "user", "content": "Is 1009 prime?"}],
        "options": {"num_predict": 600}});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

/// (thinking pieces, content pieces, the final object) of a native chat stream.
fn native_stream(text: &str) -> (Vec<String>, Vec<String>, Value) {
    let lines = ndjson(text);
    let (mut thinking, mut content) = (Vec::new(), Vec::new());
    let mut seen_content = false;
    for l in &lines[..lines.len() - 1] {
        let m = &l["message"];
        if let Some(t) = m["thinking"].as_str() {
            assert!(!seen_content, "reasoning after the answer began: {l}");
            assert_eq!(m["content"], "", "a thinking line carries empty content: {l}");
            thinking.push(t.to_string());
        } else {
            seen_content = true;
            content.push(m["content"].as_str().unwrap().to_string());
        }
    }
    (thinking, content, lines.last().unwrap().clone())
}

#[test]
fn a_thinking_model_reasons_by_default_before_its_answer_and_counts_both() {
    let sim = sim();
    let (thinking, content, fin) = native_stream(&ok(&sim, "/api/chat", &chat(json!({}))));
    assert!(thinking.len() >= 20, "{} reasoning tokens", thinking.len());
    assert!(!content.is_empty());
    assert_eq!(fin["eval_count"].as_u64(), Some((thinking.len() + content.len()) as u64));
    assert_eq!(fin["message"]["content"], "");
    assert!(fin["message"].get("thinking").is_none(), "the final line carries no reasoning: {fin}");
    // Not streamed: the reasoning in message.thinking, the answer in message.content.
    let v: Value = serde_json::from_str(&ok(&sim, "/api/chat", &chat(json!({"stream": false})))).unwrap();
    assert_eq!(v["message"]["thinking"].as_str(), Some(thinking.concat().as_str()));
    assert_eq!(v["message"]["content"].as_str(), Some(content.concat().as_str()));
    // The trace tells the first reasoning token from the first content token.
    let t = sim.trace();
    let r = &t.requests[0];
    assert_eq!(r.thinking_tokens, thinking.len() as u64);
    let first_content = r.token_us[thinking.len()];
    assert!(first_content > r.first_token_us.unwrap(), "{r:?}");
    assert!(r.explanation.contains(&format!("reasoned for {} tokens", thinking.len())), "{}", r.explanation);
}

#[test]
fn think_false_answers_at_once_and_levels_set_how_long_it_reasons() {
    let sim = sim();
    let (none, content, _) = native_stream(&ok(&sim, "/api/chat", &chat(json!({"think": false}))));
    assert!(none.is_empty() && !content.is_empty());
    let count = |level: &str| native_stream(&ok(&sim, "/api/chat", &chat(json!({"think": level})))).0.len();
    let (low, medium, high) = (count("low"), count("medium"), count("high"));
    let default = native_stream(&ok(&sim, "/api/chat", &chat(json!({"think": true})))).0.len();
    assert_eq!(medium, default);
    assert!(low < medium && medium < high, "low {low}, medium {medium}, high {high}");
    // "max" is sent to the model as "high".
    assert_eq!(count("max"), high);
}

#[test]
fn num_predict_bounds_reasoning_and_answer_together() {
    let sim = sim();
    let body = chat(json!({"options": {"num_predict": 10}}));
    let (thinking, content, fin) = native_stream(&ok(&sim, "/api/chat", &body));
    assert_eq!((thinking.len(), content.len()), (10, 0), "the budget went to reasoning");
    assert_eq!(fin["done_reason"], "length");
}

#[test]
fn generate_streams_thinking_beside_an_empty_response() {
    let sim = sim();
    let text = ok(&sim, "/api/generate", &json!({"model": MODEL, "prompt": "Is 1009 prime?"}));
    let lines = ndjson(&text);
    assert_eq!(lines[0]["response"], "");
    assert!(lines[0]["thinking"].as_str().is_some_and(|t| !t.is_empty()), "{}", lines[0]);
    let keys: Vec<&str> = lines[0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["model", "created_at", "response", "thinking", "done"], "GenerateResponse's field order");
    assert!(lines.iter().any(|l| l.get("thinking").is_none() && l["response"] != ""), "an answer follows");
    let v: Value = serde_json::from_str(&ok(
        &sim,
        "/api/generate",
        &json!({"model": MODEL, "prompt": "Is 1009 prime?", "stream": false}),
    ))
    .unwrap();
    assert!(v["thinking"].as_str().is_some_and(|t| !t.is_empty()) && v["response"] != "", "{v}");
}

#[test]
fn openai_chat_streams_delta_reasoning_and_reasoning_effort_maps_to_think() {
    let sim = sim();
    let body = json!({"model": MODEL, "stream": true, "messages": [{"role": "user", "content": "Is 1009 prime?"}]});
    let chunks = sse(&ok(&sim, "/v1/chat/completions", &body));
    let first = &chunks[0]["choices"][0]["delta"];
    assert_eq!(first["role"], "assistant");
    assert_eq!(first["content"], "");
    assert!(first["reasoning"].as_str().is_some_and(|r| !r.is_empty()), "{first}");
    let reasoning = chunks.iter().take_while(|c| c["choices"][0]["delta"].get("reasoning").is_some()).count();
    assert!(chunks[reasoning]["choices"][0]["delta"]["content"].as_str().is_some_and(|c| !c.is_empty()));
    assert!(chunks[1]["choices"][0]["delta"].get("role").is_none(), "the role goes on the first chunk only");
    // Not streamed: message.reasoning beside the content.
    let mut b = body.clone();
    b["stream"] = json!(false);
    let v: Value = serde_json::from_str(&ok(&sim, "/v1/chat/completions", &b)).unwrap();
    let keys: Vec<&str> = v["choices"][0]["message"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["role", "content", "reasoning"]);
    // reasoning_effort "none" turns it off; "minimal" reasons as "low", shorter than "high".
    let effort = |e: &str| {
        let mut b = body.clone();
        b["reasoning_effort"] = json!(e);
        sse(&ok(&sim, "/v1/chat/completions", &b))
            .iter()
            .filter(|c| c["choices"][0]["delta"].get("reasoning").is_some())
            .count()
    };
    assert_eq!(effort("none"), 0);
    assert!(effort("minimal") < effort("high"));
}

#[test]
fn a_model_that_cannot_think_refuses_think_but_not_think_false() {
    let sim = sim();
    let body = json!({"model": "llama3.2:1b", "messages": [{"role": "user", "content": "hi"}], "think": true});
    let (status, text) = post(&sim, "/api/chat", &body);
    assert_eq!((status, text.as_str()), (400, r#"{"error":"\"llama3.2:1b\" does not support thinking"}"#));
    let mut off = body.clone();
    off["think"] = json!(false);
    off["stream"] = json!(false);
    let v: Value = serde_json::from_str(&ok(&sim, "/api/chat", &off)).unwrap();
    assert!(v["message"].get("thinking").is_none());
}

/// Under a frozen clock a thinking stream is the same bytes every time (insta).
#[test]
fn frozen_clock_thinking_streams_match_their_snapshots() {
    let sim = sim();
    let messages = json!([{"role": "user", "content": "Is 1009 prime?"}]);
    let native = ok(&sim, "/api/chat", &json!({"model": MODEL, "messages": messages, "options": {"num_predict": 12}}));
    let v1 = ok(
        &sim,
        "/v1/chat/completions",
        &json!({"model": MODEL, "stream": true, "messages": messages, "max_tokens": 12, "reasoning_effort": "low"}),
    );
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("frozen_chat_thinking_stream", native);
        insta::assert_snapshot!("frozen_openai_thinking_stream", v1);
    });
}
