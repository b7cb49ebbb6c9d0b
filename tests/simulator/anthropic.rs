//! `/v1/messages` (issue 12, item 4): the Anthropic Messages API as the real server serves it
//! (middleware/anthropic.go, anthropic/anthropic.go of v0.33.0-rc2): the same pipeline as
//! `/api/chat`, answered as Anthropic events (`message_start`, blocks, `message_delta`,
//! `message_stop`) or one message object, errors in Anthropic's shape.

use crate::util::{raw_blocking, snapshot_settings, sse_events as events};
use serde_json::{Value, json};
use sim_ollama::{SimBuilder, SimHandle};

fn sim() -> SimHandle {
    SimBuilder::new().seed(7).frozen_clock(true).time_scale(0.01).start().unwrap()
}

fn post(sim: &SimHandle, body: &Value) -> (u16, String, String) {
    let r = raw_blocking(sim.addrs()[0], "POST", "/v1/messages", Some(&body.to_string()), &[]);
    let ct = r.header("content-type").unwrap_or_default().to_string();
    (r.status, ct, r.text())
}

fn ask(model: &str, extra: Value) -> Value {
    let mut b = json!({"model": model, "max_tokens": 400, "messages": [{"role": "user", "content": "Is 1009 prime?"}]});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

/// Issue 27: ids as the real server makes them: `msg_` and 24 hex digits with no repeated
/// half, `req_` and 24 hex digits, `chatcmpl-` and up to 3 digits, `resp_` and up to 6; two
/// identical requests get different message ids (clients and frameworks key conversations on
/// them), and the same simulator run gives the same ids again.
#[test]
fn identical_requests_get_their_own_ids_shaped_like_the_real_ones() {
    let ids = || {
        let sim = sim();
        let body = ask("llama3.2:1b", json!({"max_tokens": 5}));
        let msg = |_| serde_json::from_str::<Value>(&post(&sim, &body).2).unwrap()["id"].as_str().unwrap().to_string();
        let (a, b) = (msg(0), msg(1));
        let chat = json!({"model": "llama3.2:1b", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
        let openai = |path: &str| {
            let r = raw_blocking(sim.addrs()[0], "POST", path, Some(&chat.to_string()), &[]);
            serde_json::from_str::<Value>(&r.text()).unwrap()["id"].as_str().unwrap().to_string()
        };
        let (c, d) = (openai("/v1/chat/completions"), openai("/v1/chat/completions"));
        let responses = json!({"model": "llama3.2:1b", "input": "hi", "max_output_tokens": 16});
        let r = raw_blocking(sim.addrs()[0], "POST", "/v1/responses", Some(&responses.to_string()), &[]);
        let e = serde_json::from_str::<Value>(&r.text()).unwrap()["id"].as_str().unwrap().to_string();
        let bad = post(&sim, &json!({"model": "llama3.2:1b", "messages": []}));
        let req = serde_json::from_str::<Value>(&bad.2).unwrap()["request_id"].as_str().unwrap().to_string();
        vec![a, b, c, d, e, req]
    };
    let first = ids();
    let hex24 = |id: &str, prefix: &str| {
        let h = id.strip_prefix(prefix).unwrap_or_default();
        h.len() == 24 && h.chars().all(|c| c.is_ascii_hexdigit()) && h[..8] != h[16..] && !h.ends_with("00000000")
    };
    assert!(hex24(&first[0], "msg_") && hex24(&first[1], "msg_"), "{first:?}");
    assert_ne!(first[0], first[1], "two identical messages, two ids");
    let digits = |id: &str, prefix: &str, max: usize| {
        id.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.len() <= max && n.chars().all(|c| c.is_ascii_digit()))
    };
    assert!(digits(&first[2], "chatcmpl-", 3) && digits(&first[3], "chatcmpl-", 3), "{first:?}");
    assert!(digits(&first[4], "resp_", 6), "{first:?}");
    assert!(hex24(&first[5], "req_"), "{first:?}");
    assert_eq!(ids(), first, "the same requests in the same order: the same ids");
}

#[test]
fn a_message_answers_with_content_blocks_stop_reason_and_usage() {
    let sim = sim();
    let (status, ct, text) = post(&sim, &ask("llama3.2:1b", json!({"system": "Be brief.", "max_tokens": 30})));
    assert_eq!((status, ct.as_str()), (200, "application/json"), "{text}");
    assert!(text.ends_with("}\n"), "json.Encoder ends the object with a newline");
    let v: Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["id", "type", "role", "model", "content", "stop_reason", "usage"]);
    assert!(v["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(
        (v["type"].as_str(), v["role"].as_str(), v["model"].as_str()),
        (Some("message"), Some("assistant"), Some("llama3.2:1b"))
    );
    assert_eq!(v["content"][0]["type"], "text");
    assert!(!v["content"][0]["text"].as_str().unwrap().is_empty());
    assert_eq!(v["stop_reason"], "max_tokens", "30 tokens asked of a longer answer");
    assert_eq!(v["usage"]["output_tokens"], 30);
    // The system prompt is part of the prompt.
    let t = sim.trace();
    let r = t.requests.last().unwrap();
    assert_eq!((r.endpoint.as_str(), v["usage"]["input_tokens"].as_u64()), ("/v1/messages", Some(r.prompt_tokens)));
}

#[test]
fn a_stream_opens_with_message_start_and_closes_every_block_it_opens() {
    let sim = sim();
    let (status, ct, text) = post(&sim, &ask("qwen3:0.6b", json!({"stream": true})));
    assert_eq!((status, ct.as_str()), (200, "text/event-stream"), "{text}");
    let ev = events(&text);
    assert_eq!(ev[0].0, "message_start");
    let m = &ev[0].1["message"];
    assert_eq!((m["content"].clone(), m["usage"]["output_tokens"].clone()), (json!([]), json!(0)));
    assert!(m.get("stop_reason").is_none());
    // A thinking block (index 0), then a text block (index 1), each started, fed and stopped.
    let names: Vec<&str> = ev.iter().map(|e| e.0.as_str()).collect();
    let order: Vec<(&str, Value)> = ev
        .iter()
        .filter(|e| e.0 != "content_block_delta")
        .map(|e| (e.0.as_str(), e.1.get("index").cloned().unwrap_or(Value::Null)))
        .collect();
    assert_eq!(
        order,
        [
            ("message_start", Value::Null),
            ("content_block_start", json!(0)),
            ("content_block_stop", json!(0)),
            ("content_block_start", json!(1)),
            ("content_block_stop", json!(1)),
            ("message_delta", Value::Null),
            ("message_stop", Value::Null),
        ]
    );
    assert_eq!(ev[1].1["content_block"], json!({"type": "thinking", "thinking": ""}));
    assert_eq!(ev[2].1["delta"]["type"], "thinking_delta");
    let text_start = names.iter().position(|n| *n == "content_block_stop").unwrap() + 1;
    assert_eq!(ev[text_start].1["content_block"], json!({"type": "text", "text": ""}));
    assert_eq!(ev[text_start + 1].1["delta"]["type"], "text_delta");
    let delta = &ev[ev.len() - 2].1;
    assert_eq!(delta["delta"], json!({"stop_reason": "end_turn"}));
    let deltas = names.iter().filter(|n| **n == "content_block_delta").count() as u64;
    assert_eq!(delta["usage"]["output_tokens"].as_u64(), Some(deltas), "one delta per token");
}

#[test]
fn a_tool_loop_runs_through_tool_use_and_tool_result_blocks() {
    let sim = sim();
    let tools = json!([{"name": "get_weather", "description": "Weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]);
    let first =
        ask("llama3.2:1b", json!({"tools": tools, "messages": [{"role": "user", "content": "Weather in Paris?"}]}));
    let (status, _, text) = post(&sim, &first);
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["stop_reason"], "tool_use");
    let call =
        v["content"].as_array().unwrap().iter().find(|b| b["type"] == "tool_use").expect("a tool_use block").clone();
    assert!(call["input"]["city"].is_string(), "{call}");
    // The result goes back as a tool_result block; the answer is text.
    let second = ask(
        "llama3.2:1b",
        json!({"tools": tools, "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [call.clone()]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "18 C, sunny"}]}
        ]}),
    );
    let (status, _, text) = post(&sim, &second);
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((v["stop_reason"].as_str(), v["content"][0]["type"].as_str()), (Some("end_turn"), Some("text")));
    // Streamed, the call is a tool_use block with its arguments in one input_json_delta.
    let mut streamed = first.clone();
    streamed["stream"] = json!(true);
    let ev = events(&post(&sim, &streamed).2);
    let start = ev.iter().find(|e| e.0 == "content_block_start").unwrap();
    assert_eq!(start.1["content_block"]["type"], "tool_use");
    assert_eq!(start.1["content_block"]["input"], json!({}));
    let args = ev.iter().find(|e| e.1["delta"]["type"] == "input_json_delta").unwrap();
    let parsed: Value = serde_json::from_str(args.1["delta"]["partial_json"].as_str().unwrap()).unwrap();
    assert!(parsed["city"].is_string());
    assert_eq!(ev[ev.len() - 2].1["delta"]["stop_reason"], "tool_use");
}

#[test]
fn thinking_is_on_by_default_off_when_disabled_and_relaxed_for_models_that_cannot_think() {
    let sim = sim();
    let blocks = |body: Value| -> Vec<String> {
        let (status, _, text) = post(&sim, &body);
        assert_eq!(status, 200, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        v["content"].as_array().unwrap().iter().map(|b| b["type"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(blocks(ask("qwen3:0.6b", json!({}))), ["thinking", "text"]);
    assert_eq!(blocks(ask("qwen3:0.6b", json!({"thinking": {"type": "disabled"}}))), ["text"]);
    // /api/chat refuses think on a model that cannot think; the Anthropic route relaxes it.
    assert_eq!(blocks(ask("llama3.2:1b", json!({"thinking": {"type": "enabled", "budget_tokens": 1024}}))), ["text"]);
}

#[test]
fn errors_come_in_anthropics_shape_with_the_real_texts() {
    let sim = sim();
    let cases = [
        (
            json!({"max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
            400,
            "invalid_request_error",
            "model is required",
            true,
        ),
        (
            json!({"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}),
            400,
            "invalid_request_error",
            "max_tokens is required and must be positive",
            true,
        ),
        (
            json!({"model": "tiny", "max_tokens": 10, "messages": []}),
            400,
            "invalid_request_error",
            "messages is required",
            true,
        ),
        // A blank name passes the middleware (it refuses an empty one) and the chat handler,
        // which trims it, refuses it (the real server, found by the generated conformance run).
        (
            json!({"model": " ", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
            400,
            "invalid_request_error",
            "model is required",
            false,
        ),
        (
            json!({"model": "nope", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
            404,
            "not_found_error",
            "model 'nope' not found",
            false,
        ),
        (
            json!({"model": "tiny", "max_tokens": 10, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "name": "f"}]}]}),
            400,
            "invalid_request_error",
            "tool_use block missing required 'id' field",
            true,
        ),
    ];
    // The middleware's own checks answer through gin (`AbortWithStatusJSON`: a charset, no
    // newline); the chat handler's errors through the middleware's writer (`application/json`,
    // `json.Encoder`'s newline): middleware/anthropic.go v0.33.0-rc2 41-42 and 736-760, and the
    // real server's answers to `harness conformance`'s battery.
    for (body, status, kind, message, middleware) in cases {
        let (got, ct, text) = post(&sim, &body);
        let want = if middleware { "application/json; charset=utf-8" } else { "application/json" };
        assert_eq!((got, ct.as_str()), (status, want), "{body}: {text}");
        assert_eq!(text.ends_with('\n'), !middleware, "{body}: {text:?}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["type"], "error");
        assert_eq!(
            (v["error"]["type"].as_str(), v["error"]["message"].as_str()),
            (Some(kind), Some(message)),
            "{body}"
        );
        assert!(v["request_id"].as_str().is_some_and(|id| id.starts_with("req_") && id.len() == 28), "{v}");
    }
}

/// Under a frozen clock an Anthropic stream is the same bytes every time (insta).
#[test]
fn frozen_clock_anthropic_stream_matches_its_snapshot() {
    let sim = sim();
    let (_, _, text) = post(&sim, &ask("qwen3:0.6b", json!({"stream": true, "max_tokens": 8})));
    snapshot_settings().bind(|| insta::assert_snapshot!("frozen_anthropic_stream", text));
}
