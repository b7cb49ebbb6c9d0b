//! Scripted turns (issue 11): per agent, the Nth call answers a given text, tool calls or an
//! error; the timing still comes from the profile. From TOML, the builder and `/sim/script`.

use crate::util::{raw_blocking, snapshot_settings};
use serde_json::{Value, json};
use sim_ollama::SimBuilder;
use sim_ollama::advanced::config::ConfigFile;
use sim_ollama::advanced::script::{ScriptRule, ScriptedCall};

const SCRIPT: &str = r#"
[[script]]
agent = "planner"
call = 1
tool_calls = [{ name = "search_docs", arguments = { query = "deploy runbook", limit = 3 } }]

[[script]]
agent = "planner"
call = 2
text = "The deploy runbook is docs/deploy.md: roll back first, then page the owner."

[[script]]
agent = "planner"
call = 3
error = { status = 500, message = "model runner has unexpectedly stopped" }
"#;

fn chat(sim: &sim_ollama::SimHandle, path: &str, agent: &str, body: &Value) -> (u16, String) {
    let r = raw_blocking(sim.addrs()[0], "POST", path, Some(&body.to_string()), &[("X-Agent", agent)]);
    (r.status, r.text())
}

fn lines(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn a_scripted_agent_gets_its_call_then_its_text_then_its_error_and_others_are_unscripted() {
    let cfg = ConfigFile::from_toml(SCRIPT).unwrap();
    let sim = SimBuilder::new().config(cfg).seed(1).time_scale(0.01).start().unwrap();
    let body = json!({"model": "llama3.2:1b", "messages": [{"role": "user", "content": "Find the runbook"}]});

    // 1st call: the scripted tool call (no tools offered: a script answers regardless).
    let (status, text) = chat(&sim, "/api/chat", "planner", &body);
    assert_eq!(status, 200, "{text}");
    let ls = lines(&text);
    assert_eq!(ls.len(), 2);
    let call = &ls[0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "search_docs");
    assert_eq!(call["arguments"], json!({"query": "deploy runbook", "limit": 3}));
    assert_eq!(ls[1]["done_reason"], "stop");

    // Another agent is not scripted: an ordinary generated answer.
    let (_, other) = chat(&sim, "/api/chat", "writer", &body);
    assert!(lines(&other).iter().all(|l| l["message"].get("tool_calls").is_none()));

    // 2nd call: the scripted text, streamed token by token, counted as tokens.
    let (status, text) = chat(&sim, "/api/chat", "planner", &body);
    assert_eq!(status, 200);
    let ls = lines(&text);
    let content: String = ls.iter().map(|l| l["message"]["content"].as_str().unwrap()).collect();
    assert_eq!(content, "The deploy runbook is docs/deploy.md: roll back first, then page the owner.");
    assert!(ls.len() > 10, "streamed in pieces: {}", ls.len());
    assert_eq!(ls.last().unwrap()["eval_count"].as_u64().unwrap() as usize, ls.len() - 1);

    // 3rd call: the scripted error, in Ollama's shape, recorded in the trace.
    let (status, text) = chat(&sim, "/api/chat", "planner", &body);
    assert_eq!((status, text.as_str()), (500, r#"{"error":"model runner has unexpectedly stopped"}"#));
    // 4th: the script is spent.
    let (status, _) = chat(&sim, "/api/chat", "planner", &body);
    assert_eq!(status, 200);
    let trace = sim.trace();
    let errors: Vec<_> = trace.requests.iter().filter(|r| r.status == 500).collect();
    assert_eq!(errors.len(), 1);
}

#[test]
fn the_script_applies_on_v1_and_num_predict_cuts_a_scripted_text() {
    let rule = |call, text: &str| ScriptRule {
        agent: Some("a".into()),
        call: Some(call),
        text: Some(text.into()),
        ..ScriptRule::default()
    };
    let sim = SimBuilder::new()
        .script(rule(1, "one two three four five six seven eight"))
        .script(ScriptRule {
            agent: Some("a".into()),
            call: Some(2),
            tool_calls: Some(vec![ScriptedCall { name: "f".into(), arguments: json!({"x": 1}) }]),
            ..ScriptRule::default()
        })
        .time_scale(0.0)
        .start()
        .unwrap();
    let body = json!({"model": "llama3.2:1b", "max_tokens": 3, "messages": [{"role": "user", "content": "x"}]});
    let (_, text) = chat(&sim, "/v1/chat/completions", "a", &body);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "one two three");
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    let (_, text) = chat(
        &sim,
        "/v1/chat/completions",
        "a",
        &json!({"model": "llama3.2:1b", "messages": [{"role": "user", "content": "x"}]}),
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], r#"{"x":1}"#);
}

#[test]
fn the_script_is_replaced_at_run_time_and_bad_rules_are_refused() {
    let sim = SimBuilder::new().time_scale(0.0).start().unwrap();
    let addr = sim.addrs()[0];
    let put = |body: &str| raw_blocking(addr, "PUT", "/sim/script", Some(body), &[]);
    let r = put(r#"[{"agent": "a", "error": {"status": 503, "message": "busy"}}]"#);
    assert_eq!(r.status, 200, "{}", r.text());
    let got: Value = serde_json::from_str(&raw_blocking(addr, "GET", "/sim/script", None, &[]).text()).unwrap();
    assert_eq!(got["script"][0]["agent"], "a");
    let body = json!({"model": "tiny", "prompt": "x", "stream": false});
    let (status, text) = chat(&sim, "/api/generate", "a", &body);
    assert_eq!((status, text.as_str()), (503, r#"{"error":"busy"}"#));
    // Every call: no `call` number.
    assert_eq!(chat(&sim, "/api/generate", "a", &body).0, 503);
    // The OpenAI layer wraps it in its own error shape.
    let (status, text) = chat(&sim, "/v1/completions", "a", &json!({"model": "tiny", "prompt": "x"}));
    assert_eq!(status, 503);
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["error"]["message"], "busy");
    for bad in [
        r#"[{"agent": "a"}]"#,
        r#"[{"text": "x", "error": {"status": 500, "message": "m"}}]"#,
        r#"[{"text": "x", "call": 0}]"#,
        "{",
        r#"[{"text": "x", "colour": 1}]"#,
    ] {
        let r = put(bad);
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
        assert!(r.text().starts_with(r#"{"error":""#), "{}", r.text());
    }
    assert_eq!(raw_blocking(addr, "DELETE", "/sim/script", None, &[]).status, 200);
    assert_eq!(chat(&sim, "/api/generate", "a", &body).0, 200);
}

/// A scripted exchange under a frozen clock is the same bytes every time.
#[test]
fn frozen_clock_scripted_turns_match_their_snapshot() {
    let cfg = ConfigFile::from_toml(SCRIPT).unwrap();
    let sim = SimBuilder::new().config(cfg).seed(4).frozen_clock(true).time_scale(0.01).start().unwrap();
    let body = json!({"model": "llama3.2:1b", "messages": [{"role": "user", "content": "Find the runbook"}]});
    let first = chat(&sim, "/api/chat", "planner", &body).1;
    let second = chat(&sim, "/api/chat", "planner", &body).1;
    snapshot_settings().bind(|| insta::assert_snapshot!("frozen_scripted_turns", format!("{first}---\n{second}")));
}
