//! Log probabilities (issue 38): `logprobs` and `top_logprobs` on `/api/generate`, `/api/chat`
//! and `/v1/chat/completions`, as Ollama v0.33.0-rc2 returns them (api/types.go 497-516,
//! server/logprob.go, llm/llama_server.go 1579-1838, openai/openai.go 50-66 and 269-363), and
//! what its own integration suite checks of them (integration/api_test.go 427-604,
//! basic_test.go 145-188). The wire shapes are also checked against a real server by the
//! conformance battery (harness/conformance/battery.toml).

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

/// Every entry: a token, a logprob of at most 0, the token's UTF-8 bytes, and at most `top`
/// alternatives sorted from the likeliest (none when `top` is 0).
fn check_entries(entries: &[Value], top: usize) {
    for e in entries {
        let token = e["token"].as_str().expect("a token");
        assert!(e["logprob"].as_f64().is_some_and(|l| l <= 0.0), "{e}");
        let bytes: Vec<u8> =
            e["bytes"].as_array().map_or(Vec::new(), |b| b.iter().map(|x| x.as_u64().unwrap() as u8).collect());
        assert_eq!(bytes, token.as_bytes(), "{e}");
        match e.get("top_logprobs") {
            None => assert_eq!(top, 0, "{e}"),
            Some(t) => {
                let t = t.as_array().expect("an array");
                assert!(!t.is_empty() && t.len() <= top, "{e}");
                let lps: Vec<f64> = t.iter().map(|x| x["logprob"].as_f64().unwrap()).collect();
                assert!(lps.windows(2).all(|w| w[0] >= w[1]), "sorted: {e}");
            }
        }
    }
}

#[test]
fn generate_returns_one_entry_per_token_only_when_asked() {
    let sim = sim();
    // The integration suite's num-predict test: 10 tokens, 10 entries, not streamed.
    let body = json!({"model": "gemma3", "prompt": "Why is the sky blue?", "stream": false, "logprobs": true,
                      "options": {"num_predict": 10}});
    let v: Value = serde_json::from_str(&ok(&sim, "/api/generate", &body)).unwrap();
    let entries = v["logprobs"].as_array().expect("logprobs");
    assert_eq!(entries.len(), 10, "{v}");
    assert_eq!(v["eval_count"], 10);
    check_entries(entries, 0);
    let text: String = entries.iter().map(|e| e["token"].as_str().unwrap()).collect();
    assert_eq!(text, v["response"].as_str().unwrap(), "the entries spell the answer");
    // logprobs is the last key of a generate response (api/types.go 891-930).
    let raw = ok(&sim, "/api/generate", &body);
    assert!(raw.trim_end().ends_with("]}") && raw.rfind("\"logprobs\":") > raw.rfind("\"eval_duration\":"), "{raw}");
    // The same answer streamed: each token's entry on its own chunk, none on the final one.
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    streamed["top_logprobs"] = json!(5);
    let lines = ndjson(&ok(&sim, "/api/generate", &streamed));
    let (last, tokens) = lines.split_last().unwrap();
    assert!(last.get("logprobs").is_none(), "{last}");
    for l in tokens {
        let e = l["logprobs"].as_array().expect("an entry per chunk");
        assert_eq!(e.len(), 1);
        assert_eq!(e[0]["token"], l["response"]);
        check_entries(e, 5);
    }
    // Not asked: no key at all, whatever top_logprobs says.
    let mut plain = body.clone();
    plain["logprobs"] = json!(false);
    plain["top_logprobs"] = json!(3);
    let v: Value = serde_json::from_str(&ok(&sim, "/api/generate", &plain)).unwrap();
    assert!(v.get("logprobs").is_none(), "{v}");
}

#[test]
fn chat_puts_them_after_done_reason_and_reasoning_and_tool_calls_have_entries_too() {
    let sim = sim();
    let body = json!({"model": "gemma3", "messages": [{"role": "user", "content": "hi"}], "stream": false,
                      "logprobs": true, "top_logprobs": 3, "options": {"num_predict": 6}});
    let raw = ok(&sim, "/api/chat", &body);
    let v: Value = serde_json::from_str(&raw).unwrap();
    check_entries(v["logprobs"].as_array().expect("logprobs"), 3);
    let (reason, lp, metrics) = (
        raw.find("\"done_reason\"").unwrap(),
        raw.find("\"logprobs\"").unwrap(),
        raw.find("\"total_duration\"").unwrap(),
    );
    assert!(reason < lp && lp < metrics, "done_reason, logprobs, then the metrics (api.ChatResponse): {raw}");
    // A thinking model: the reasoning tokens are counted among the entries.
    let think = json!({"model": "qwen3:0.6b", "messages": [{"role": "user", "content": "Is 9 prime?"}], "stream": false,
                       "logprobs": true, "options": {"num_predict": 40}});
    let v: Value = serde_json::from_str(&ok(&sim, "/api/chat", &think)).unwrap();
    assert_eq!(v["logprobs"].as_array().map(Vec::len), v["eval_count"].as_u64().map(|n| n as usize), "{v}");
    // A tool call: its tokens write nothing while the parser holds them back, but their
    // entries still go out on chunks of empty content, and the call's chunk carries its own.
    let tool = json!({"model": "llama3.2:1b", "messages": [{"role": "user", "content": "Weather in Paris?"}], "logprobs": true,
                      "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
                      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]});
    let lines = ndjson(&ok(&sim, "/api/chat", &tool));
    let calls = lines.iter().filter(|l| l["message"].get("tool_calls").is_some()).count();
    assert_eq!(calls, 1, "{lines:?}");
    let entries: usize = lines.iter().filter_map(|l| l["logprobs"].as_array()).map(Vec::len).sum();
    assert_eq!(Some(entries as u64), lines.last().unwrap()["eval_count"].as_u64(), "one entry per token: {lines:?}");
}

#[test]
fn openai_chat_carries_them_under_choices_and_completions_never() {
    let sim = sim();
    let body = json!({"model": "gemma3", "messages": [{"role": "user", "content": "hi"}], "logprobs": true,
                      "top_logprobs": 2, "max_tokens": 5});
    let v: Value = serde_json::from_str(&ok(&sim, "/v1/chat/completions", &body)).unwrap();
    let entries = v["choices"][0]["logprobs"]["content"].as_array().expect("choices[0].logprobs.content");
    assert_eq!(entries.len(), 5);
    check_entries(entries, 2);
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let events = sse(&ok(&sim, "/v1/chat/completions", &streamed));
    let (finish, tokens) = events.split_last().unwrap();
    assert!(finish["choices"][0].get("logprobs").is_none(), "the finish chunk carries none: {finish}");
    assert!(
        tokens.iter().all(|e| e["choices"][0]["logprobs"]["content"].as_array().is_some_and(|c| c.len() == 1)),
        "{tokens:?}"
    );
    // Not asked: no key.
    let v: Value = serde_json::from_str(&ok(
        &sim,
        "/v1/chat/completions",
        &json!({"model": "gemma3",
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}),
    ))
    .unwrap();
    assert!(v["choices"][0].get("logprobs").is_none(), "{v}");
    // /v1/completions turns them on with `logprobs: N` but never returns them.
    let v: Value = serde_json::from_str(&ok(
        &sim,
        "/v1/completions",
        &json!({"model": "gemma3", "prompt": "hi",
        "logprobs": 3, "max_tokens": 3}),
    ))
    .unwrap();
    assert!(v["choices"][0].get("logprobs").is_none(), "{v}");
}

#[test]
fn top_logprobs_out_of_range_is_refused_first_in_each_apis_shape() {
    let sim = sim();
    // Before the model is looked up: a model that does not exist is not what is reported.
    for (path, body) in [
        ("/api/generate", json!({"model": "nosuchmodel", "prompt": "hi", "top_logprobs": 21})),
        ("/api/chat", json!({"model": "nosuchmodel", "messages": [], "top_logprobs": -1})),
    ] {
        let (status, text) = post(&sim, path, &body);
        assert_eq!((status, text.as_str()), (400, "{\"error\":\"top_logprobs must be between 0 and 20\"}"), "{path}");
    }
    for (path, body) in [
        (
            "/v1/chat/completions",
            json!({"model": "gemma3", "messages": [{"role": "user", "content": "hi"}], "top_logprobs": 21}),
        ),
        ("/v1/completions", json!({"model": "gemma3", "prompt": "hi", "logprobs": 21})),
    ] {
        let (status, text) = post(&sim, path, &body);
        assert_eq!(status, 400, "{path}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["message"], "top_logprobs must be between 0 and 20", "{path}");
        assert_eq!(v["error"]["type"], "invalid_request_error", "{path}");
    }
    // A logprobs of the wrong type is Go's decoding error.
    let (status, text) = post(&sim, "/api/generate", &json!({"model": "gemma3", "prompt": "hi", "logprobs": "yes"}));
    assert_eq!(status, 400);
    assert!(
        text.contains("cannot unmarshal string into Go struct field GenerateRequest.logprobs of type bool"),
        "{text}"
    );
}
