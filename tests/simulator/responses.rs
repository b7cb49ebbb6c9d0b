//! `/v1/responses` (issue 12, item 4): the OpenAI Responses API as the real server serves it
//! (middleware/openai.go ResponsesMiddleware, openai/responses.go of v0.33.0-rc2): the same
//! pipeline as `/api/chat`, answered as one response object or Responses events with sequence
//! numbers, ending in `response.completed`.

use crate::util::{raw_blocking, snapshot_settings, sse_events as events};
use serde_json::{Value, json};
use sim_ollama::{SimBuilder, SimHandle};

fn sim() -> SimHandle {
    SimBuilder::new().seed(9).frozen_clock(true).time_scale(0.01).start().unwrap()
}

fn post(sim: &SimHandle, body: &Value) -> (u16, String, String) {
    let r = raw_blocking(sim.addrs()[0], "POST", "/v1/responses", Some(&body.to_string()), &[]);
    let ct = r.header("content-type").unwrap_or_default().to_string();
    (r.status, ct, r.text())
}

#[test]
fn a_response_object_answers_a_string_input_with_a_message_and_usage() {
    let sim = sim();
    let (status, ct, text) = post(
        &sim,
        &json!({"model": "llama3.2:1b", "input": "Say hello.", "instructions": "Be brief.", "max_output_tokens": 20}),
    );
    assert_eq!((status, ct.as_str()), (200, "application/json"), "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(&keys[..6], ["id", "object", "created_at", "completed_at", "status", "incomplete_details"]);
    assert_eq!(keys.len(), 31, "every field of ResponsesResponse: {keys:?}");
    assert!(v["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!((v["object"].as_str(), v["status"].as_str()), (Some("response"), Some("completed")));
    assert_eq!(v["instructions"], "Be brief.");
    let out = v["output"].as_array().unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0]["type"].as_str(), out[0]["role"].as_str()), (Some("message"), Some("assistant")));
    assert_eq!(out[0]["content"][0]["type"], "output_text");
    assert_eq!(v["usage"]["output_tokens"], 20);
    assert_eq!(v["max_output_tokens"], 20);
    assert_eq!((v["temperature"].as_f64(), v["top_p"].as_f64()), (Some(1.0), Some(1.0)));
}

#[test]
fn a_stream_numbers_its_events_and_ends_with_the_whole_response() {
    let sim = sim();
    let body = json!({"model": "qwen3:0.6b", "input": [{"role": "user", "content": "Is 1009 prime?"}],
        "stream": true, "max_output_tokens": 400, "reasoning": {"effort": "low"}});
    let (status, ct, text) = post(&sim, &body);
    assert_eq!((status, ct.as_str()), (200, "text/event-stream"), "{text}");
    let ev = events(&text);
    for (i, (_, d)) in ev.iter().enumerate() {
        assert_eq!(d["sequence_number"], i as u64, "sequence numbers count from 0");
        let keys: Vec<&String> = d.as_object().unwrap().keys().collect();
        let mut want = keys.clone();
        want.sort();
        assert_eq!(keys, want, "a Go map: sorted keys");
    }
    let names: Vec<&str> = ev.iter().map(|e| e.0.as_str()).filter(|n| !n.ends_with(".delta")).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.reasoning_summary_text.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let last = &ev.last().unwrap().1["response"];
    assert_eq!(last["status"], "completed");
    let out = last["output"].as_array().unwrap();
    assert_eq!((out[0]["type"].as_str(), out[1]["type"].as_str()), (Some("reasoning"), Some("message")));
    let reasoning: String = ev
        .iter()
        .filter(|e| e.0 == "response.reasoning_summary_text.delta")
        .map(|e| e.1["delta"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(out[0]["summary"][0]["text"], reasoning.as_str());
    assert_eq!(last["reasoning"], json!({"effort": "low", "summary": null}));
    assert!(last["usage"]["total_tokens"].as_u64().unwrap() > 0);
}

#[test]
fn a_function_call_loop_goes_through_function_call_and_function_call_output_items() {
    let sim = sim();
    let tools = json!([{"type": "function", "name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]);
    let first = json!({"model": "llama3.2:1b", "input": "Weather in Paris?", "tools": tools});
    let (status, _, text) = post(&sim, &first);
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let call = v["output"].as_array().unwrap().iter().find(|o| o["type"] == "function_call").expect("a call").clone();
    let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert!(args["city"].is_string(), "{call}");
    assert_eq!(v["tools"][0]["name"], "get_weather", "the tools are echoed");
    let second = json!({"model": "llama3.2:1b", "tools": tools, "input": [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": call["call_id"], "name": "get_weather", "arguments": call["arguments"]},
        {"type": "function_call_output", "call_id": call["call_id"], "output": "18 C, sunny"}
    ]});
    let (status, _, text) = post(&sim, &second);
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["output"][0]["type"], "message");
    // Streamed, the call is an item with its arguments in one delta.
    let mut streamed = first.clone();
    streamed["stream"] = json!(true);
    let ev = events(&post(&sim, &streamed).2);
    let names: Vec<&str> = ev.iter().map(|e| e.0.as_str()).collect();
    assert!(names.contains(&"response.function_call_arguments.delta"), "{names:?}");
    let done = ev.iter().find(|e| e.0 == "response.function_call_arguments.done").unwrap();
    assert!(serde_json::from_str::<Value>(done.1["arguments"].as_str().unwrap()).is_ok());
}

#[test]
fn bad_requests_get_openai_shaped_errors_with_the_real_texts() {
    let sim = sim();
    let cases = [
        (
            json!({"model": "llama3.2:1b", "input": [{"type": "bogus"}]}),
            400,
            r#"input[0]: unknown input item type: "bogus""#,
        ),
        (
            json!({"model": "llama3.2:1b", "input": [{"content": "x"}]}),
            400,
            "input[0]: input item missing required 'type' field",
        ),
        (
            json!({"model": "llama3.2:1b", "input": "x", "reasoning": {"effort": "huge"}}),
            400,
            r#"invalid reasoning value: "huge" (must be "minimal", "low", "medium", "high", "xhigh", "ultra", "max", or "none")"#,
        ),
        (json!({"model": "nope", "input": "x"}), 404, "model 'nope' not found"),
        (
            json!({"model": "llama3.2:1b", "input": "x", "reasoning": {"effort": "high"}}),
            400,
            "\"llama3.2:1b\" does not support thinking",
        ),
    ];
    for (body, status, message) in cases {
        let (got, _, text) = post(&sim, &body);
        assert_eq!(got, status, "{body}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["message"], message, "{body}");
    }
}

/// Under a frozen clock a Responses stream is the same bytes every time (insta).
#[test]
fn frozen_clock_responses_stream_matches_its_snapshot() {
    let sim = sim();
    let (_, _, text) =
        post(&sim, &json!({"model": "llama3.2:1b", "input": "Hi", "stream": true, "max_output_tokens": 5}));
    snapshot_settings().bind(|| insta::assert_snapshot!("frozen_responses_stream", text));
}

#[test]
fn an_input_with_nothing_to_generate_loads_the_model_and_answers_with_an_empty_response() {
    // As the real server answers (captured 2026-11-26): the chat handler's load, written by the
    // Responses writer as an empty message with no usage; streamed, no item at all and a
    // `response.completed` whose output is null.
    let sim = sim();
    for input in [json!(""), Value::Null] {
        let (status, ct, text) = post(&sim, &json!({"model": "llama3.2:1b", "input": input}));
        assert_eq!((status, ct.as_str()), (200, "application/json"), "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["output"][0]["content"][0]["text"], "", "{text}");
        assert_eq!(v["usage"]["total_tokens"], 0, "{text}");
    }
    let (status, ct, text) = post(&sim, &json!({"model": "llama3.2:1b", "input": "", "stream": true}));
    assert_eq!((status, ct.as_str()), (200, "text/event-stream"), "{text}");
    let ev = events(&text);
    let names: Vec<&str> = ev.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(names, ["response.created", "response.in_progress", "response.completed"]);
    assert_eq!(ev[2].1["response"]["output"], Value::Null, "{text}");
    assert_eq!(ev[2].1["response"]["usage"]["total_tokens"], 0);
    let t = sim.trace();
    assert!(t.requests.iter().all(|r| r.status == 200 && r.prompt_tokens == 0), "loads, not errors: {:?}", t.requests);
}
