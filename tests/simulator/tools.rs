//! Agent loops with tools and structured outputs, as a client written against real Ollama
//! runs them: the shapes come from Ollama's source (server/routes.go ChatHandler and
//! writeChatResponse, api/types.go ToolCall, openai/openai.go ToToolCalls, toChunk,
//! FinishChunk, ToChatCompletion, middleware/openai.go ChatWriter). See: issue 11.

use crate::util::{raw_blocking, snapshot_settings};
use serde_json::{Value, json};
use sim_ollama::SimBuilder;

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7}
            }, "required": ["city", "unit"]}}},
        {"type": "function", "function": {"name": "search_docs", "description": "Search",
            "parameters": {"type": "object", "properties": {
                "query": {"type": "string", "minLength": 3},
                "filters": {"type": "array", "items": {"type": "object", "properties": {
                    "field": {"type": "string"}, "value": {"type": ["string", "number"]}}, "required": ["field", "value"]}}
            }, "required": ["query", "filters"]}}}
    ])
}

fn schema_of(name: &str) -> Value {
    tools().as_array().unwrap().iter().find(|t| t["function"]["name"] == name).unwrap()["function"]["parameters"]
        .clone()
}

fn assert_valid(schema: &Value, doc: &Value) {
    let v = jsonschema::validator_for(schema).expect("a valid schema");
    let errors: Vec<String> = v.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{doc} is not valid against {schema}: {errors:?}");
}

fn post(sim: &sim_ollama::SimHandle, path: &str, body: &Value) -> String {
    let r = raw_blocking(sim.addrs()[0], "POST", path, Some(&body.to_string()), &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    r.text()
}

fn ndjson(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

fn sse(text: &str) -> Vec<Value> {
    let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
    assert_eq!(events.last(), Some(&"data: [DONE]"), "{text}");
    events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
        .collect()
}

fn is_call_id(id: &Value) -> bool {
    id.as_str().is_some_and(|s| {
        s.len() == 13 && s.starts_with("call_") && s[5..].bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    })
}

/// The native loop, streaming: the user asks, the model calls a tool (one `done:false` chunk
/// with empty content and the call, then the final chunk), the agent sends the result as a
/// `tool` message, the model answers in text.
#[test]
fn a_native_streaming_agent_loop_calls_a_tool_then_answers() {
    let sim = SimBuilder::new().seed(5).time_scale(0.01).start().unwrap();
    let mut messages = vec![json!({"role": "user", "content": "What is the weather in Paris?"})];
    let body = json!({"model": "llama3.2:1b", "messages": messages, "tools": tools()});
    let lines = ndjson(&post(&sim, "/api/chat", &body));
    assert_eq!(lines.len(), 2, "a tool call then the final object: {lines:?}");
    let call_chunk = &lines[0];
    assert_eq!(call_chunk["done"], false);
    assert_eq!(call_chunk["message"]["content"], "");
    assert_eq!(call_chunk["message"]["role"], "assistant");
    let calls = call_chunk["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    // api.ToolCall: id, then function with index, name, arguments (an object), in this order.
    let keys: Vec<&String> = call.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["id", "function"]);
    let fkeys: Vec<&String> = call["function"].as_object().unwrap().keys().collect();
    assert_eq!(fkeys, ["index", "name", "arguments"]);
    assert!(is_call_id(&call["id"]), "{call}");
    assert_eq!(call["function"]["index"], 0);
    let name = call["function"]["name"].as_str().unwrap();
    assert_valid(&schema_of(name), &call["function"]["arguments"]);
    let fin = &lines[1];
    assert_eq!(fin["done"], true);
    assert_eq!(fin["done_reason"], "stop");
    assert_eq!(fin["message"], json!({"role": "assistant", "content": ""}));
    // The call's tokens were generated (and counted) though never sent as content.
    assert!(fin["eval_count"].as_u64().unwrap() >= 5, "{fin}");

    // The agent runs the tool and sends the result back.
    messages.push(json!({"role": "assistant", "content": "", "tool_calls": calls}));
    messages.push(json!({"role": "tool", "tool_name": name, "content": "18 degrees, clear"}));
    let body = json!({"model": "llama3.2:1b", "messages": messages, "tools": tools(), "options": {"num_predict": 30}});
    let lines = ndjson(&post(&sim, "/api/chat", &body));
    assert!(lines.iter().all(|l| l["message"].get("tool_calls").is_none()), "an answer, no call: {lines:?}");
    let text: String = lines.iter().map(|l| l["message"]["content"].as_str().unwrap()).collect();
    assert!(!text.is_empty());
    assert_eq!(lines.last().unwrap()["done"], true);
}

/// Non-streaming: the calls are collected into the one message.
#[test]
fn a_native_non_streaming_answer_carries_parallel_calls_in_one_message() {
    let sim = SimBuilder::new().seed(6).time_scale(0.0).start().unwrap();
    let body = json!({"model": "llama3.2:1b", "stream": false, "tools": tools(), "options": {"sim_tool_calls": 3},
        "messages": [{"role": "user", "content": "Compare the weather in three cities"}]});
    let v: Value = serde_json::from_str(&post(&sim, "/api/chat", &body)).unwrap();
    assert_eq!(v["done_reason"], "stop");
    assert_eq!(v["message"]["content"], "");
    let calls = v["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.iter().map(|c| c["function"]["index"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1, 2]);
    for c in calls {
        assert!(is_call_id(&c["id"]));
        assert_valid(&schema_of(c["function"]["name"].as_str().unwrap()), &c["function"]["arguments"]);
    }
    // Streaming, the same three calls leave one chunk each.
    let body = json!({"model": "llama3.2:1b", "tools": tools(), "options": {"sim_tool_calls": 3},
        "messages": [{"role": "user", "content": "Compare the weather in three cities"}]});
    let lines = ndjson(&post(&sim, "/api/chat", &body));
    let streamed: Vec<Value> =
        lines.iter().filter_map(|l| l["message"]["tool_calls"].as_array()).flatten().cloned().collect();
    assert_eq!(&streamed, calls, "the same calls, streamed or not");
    assert_eq!(lines.len(), 4);
}

/// The OpenAI layer: `delta.tool_calls` with arguments as a JSON string, `index` and
/// `type`, the role on the first chunk only, then a finish chunk with `tool_calls`; not
/// streaming, `message.tool_calls` and `finish_reason: tool_calls`. The result goes back as a
/// `tool` message with `tool_call_id`, and the answer finishes with `stop`.
#[test]
fn an_openai_agent_loop_calls_a_tool_then_answers() {
    let sim = SimBuilder::new().seed(7).time_scale(0.01).start().unwrap();
    let user = json!({"role": "user", "content": "Find the deployment docs"});
    let body = json!({"model": "llama3.2:1b", "stream": true, "messages": [user], "tools": tools()});
    let chunks = sse(&post(&sim, "/v1/chat/completions", &body));
    assert_eq!(chunks.len(), 2, "{chunks:?}");
    let delta = &chunks[0]["choices"][0]["delta"];
    assert_eq!(delta["role"], "assistant");
    assert_eq!(delta["content"], "");
    let call = &delta["tool_calls"][0];
    let keys: Vec<&String> = call.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["id", "index", "type", "function"]);
    assert!(is_call_id(&call["id"]));
    assert_eq!(call["type"], "function");
    let name = call["function"]["name"].as_str().unwrap();
    let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_valid(&schema_of(name), &args);
    assert_eq!(chunks[0]["choices"][0]["finish_reason"], Value::Null);
    assert_eq!(chunks[1]["choices"][0], json!({"index": 0, "delta": {}, "finish_reason": "tool_calls"}));

    let body = json!({"model": "llama3.2:1b", "messages": [user], "tools": tools()});
    let v: Value = serde_json::from_str(&post(&sim, "/v1/chat/completions", &body)).unwrap();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], "");
    let call = &choice["message"]["tool_calls"][0];
    assert!(is_call_id(&call["id"]));
    let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_valid(&schema_of(call["function"]["name"].as_str().unwrap()), &args);

    let body = json!({"model": "llama3.2:1b", "tools": tools(), "max_tokens": 20, "messages": [
        user,
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "docs/deploy.md"}
    ]});
    let v: Value = serde_json::from_str(&post(&sim, "/v1/chat/completions", &body)).unwrap();
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert!(v["choices"][0]["message"].get("tool_calls").is_none(), "{v}");
    assert!(!v["choices"][0]["message"]["content"].as_str().unwrap().is_empty());
}

/// A call cut by `num_predict` never completes: no call is sent, its text is content, and the
/// answer stopped for `length`.
#[test]
fn a_call_cut_short_by_num_predict_is_text() {
    let sim = SimBuilder::new().seed(8).time_scale(0.0).start().unwrap();
    let body = json!({"model": "llama3.2:1b", "stream": false, "tools": tools(), "options": {"num_predict": 4},
        "messages": [{"role": "user", "content": "weather?"}]});
    let v: Value = serde_json::from_str(&post(&sim, "/api/chat", &body)).unwrap();
    assert_eq!(v["done_reason"], "length");
    assert!(v["message"].get("tool_calls").is_none(), "{v}");
    assert!(v["message"]["content"].as_str().unwrap().starts_with("{\""), "{v}");
    assert_eq!(v["eval_count"], 4);
}

/// `sim_tool_call_probability: 0` answers in text even with tools; a model without the tools
/// capability refuses them with the real error.
#[test]
fn the_policy_can_answer_in_text_and_models_without_tools_refuse_them() {
    let sim = SimBuilder::new().seed(9).time_scale(0.0).start().unwrap();
    let body = json!({"model": "llama3.2:1b", "stream": false, "tools": tools(),
        "options": {"sim_tool_call_probability": 0.0, "num_predict": 10},
        "messages": [{"role": "user", "content": "hello"}]});
    let v: Value = serde_json::from_str(&post(&sim, "/api/chat", &body)).unwrap();
    assert!(v["message"].get("tool_calls").is_none(), "{v}");
    let body = json!({"model": "gemma3", "tools": tools(), "messages": [{"role": "user", "content": "hello"}]});
    let r = raw_blocking(sim.addrs()[0], "POST", "/api/chat", Some(&body.to_string()), &[]);
    assert_eq!(r.status, 400);
    assert_eq!(r.text(), r#"{"error":"registry.ollama.ai/library/gemma3:latest does not support tools"}"#);
}

/// `format` with a schema (native) and `response_format` with `json_schema` (/v1): the answer
/// is a document valid against the schema; `format: "json"` any JSON object.
#[test]
fn structured_outputs_are_valid_against_their_schema() {
    let sim = SimBuilder::new().seed(10).time_scale(0.0).start().unwrap();
    let schema = json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 4, "uniqueItems": true},
        "address": {"$ref": "#/$defs/address"}
    }, "required": ["name", "age", "tags", "address"], "additionalProperties": false,
    "$defs": {"address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string", "minLength": 5, "maxLength": 5}}, "required": ["city", "zip"]}}});
    for seed in 0..10 {
        let body = json!({"model": "gemma3", "stream": false, "format": schema, "options": {"seed": seed},
            "messages": [{"role": "user", "content": "Describe a person"}]});
        let v: Value = serde_json::from_str(&post(&sim, "/api/chat", &body)).unwrap();
        let doc: Value = serde_json::from_str(v["message"]["content"].as_str().unwrap()).unwrap();
        assert_valid(&schema, &doc);
    }
    let body = json!({"model": "gemma3", "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}});
    let v: Value = serde_json::from_str(&post(&sim, "/v1/chat/completions", &body)).unwrap();
    assert_valid(&schema, &serde_json::from_str(v["choices"][0]["message"]["content"].as_str().unwrap()).unwrap());
    let body = json!({"model": "gemma3", "prompt": "x", "stream": false, "format": "json"});
    let v: Value = serde_json::from_str(&post(&sim, "/api/generate", &body)).unwrap();
    assert!(serde_json::from_str::<Value>(v["response"].as_str().unwrap()).unwrap().is_object());
}

/// The answer's length follows the profile: a schema with free strings grows with the
/// model's natural length (`sim_tokens`).
#[test]
fn a_structured_answer_grows_with_the_natural_length() {
    let sim = SimBuilder::new().seed(11).time_scale(0.0).start().unwrap();
    let schema = json!({"type": "object", "properties": {"summary": {"type": "string"}, "points": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2}}, "required": ["summary", "points"]});
    let count = |n: u64| {
        let body = json!({"model": "gemma3", "stream": false, "format": schema, "options": {"sim_tokens": n},
            "messages": [{"role": "user", "content": "summarise"}]});
        let v: Value = serde_json::from_str(&post(&sim, "/api/chat", &body)).unwrap();
        v["eval_count"].as_u64().unwrap()
    };
    let (short, long) = (count(20), count(200));
    assert!(short < 60 && long > 120, "{short} tokens asked 20, {long} asked 200");
}

/// Under a frozen clock a tool-call exchange is the same bytes every time (insta).
#[test]
fn frozen_clock_tool_call_streams_match_their_snapshots() {
    let sim = SimBuilder::new().seed(3).frozen_clock(true).time_scale(0.01).start().unwrap();
    let messages = json!([{"role": "user", "content": "What is the weather in Paris?"}]);
    let native = post(&sim, "/api/chat", &json!({"model": "llama3.2:1b", "messages": messages, "tools": tools()}));
    let v1 = post(
        &sim,
        "/v1/chat/completions",
        &json!({"model": "llama3.2:1b", "stream": true, "messages": messages, "tools": tools()}),
    );
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("frozen_chat_tool_call_stream", native);
        insta::assert_snapshot!("frozen_openai_tool_call_stream", v1);
    });
}
