//! The judge over HTTP (issue 24): `POST /sim/mark`, `GET /sim/judge` with exec's options and
//! expectations, and models preloaded before the program starts.

use crate::util::raw_blocking;
use sim_ollama::{Error, SimBuilder};
use std::net::SocketAddr;

/// One call of 200 tokens: 0.33 s at the test's time scale of 0.1. The parallel verdict rests on
/// the saving, and a thread's start or a read stalled on a crowded machine costs tens of
/// milliseconds: 40-token calls at 0.02 (13 ms) read partly serialized once beside a loaded
/// suite; here a stall would have to cost 0.13 s (a fifth of the 0.66 s saving).
fn generate(addr: SocketAddr, agent: &str) {
    let body = r#"{"model":"gemma3","prompt":"Summarise the run.","stream":false,"options":{"num_predict":200}}"#;
    let r = raw_blocking(addr, "POST", "/api/generate", Some(body), &[("X-Agent", agent)]);
    assert_eq!(r.status, 200, "{}", r.text());
}

fn judge(addr: SocketAddr, query: &str) -> serde_json::Value {
    let r = raw_blocking(addr, "GET", &format!("/sim/judge{query}"), None, &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

#[test]
fn a_preloaded_simulator_judges_from_the_mark_over_http_with_expectations() {
    let sim = SimBuilder::new().preset("ideal").unwrap().time_scale(0.1).preload("gemma3").start().unwrap();
    let addr = sim.addrs()[0];
    // The preload left the model loaded and the trace empty: nothing to judge, said so.
    let doc = judge(addr, "");
    assert_eq!(doc["schema_version"], 2, "{doc}");
    assert_eq!(doc["report"]["verdict"], "inconclusive", "{doc}");
    assert_eq!(doc["report"]["cause"], "nothing_to_judge", "{doc}");
    assert_eq!(doc["passed"], true, "no expectation given: {doc}");

    // Three agents at once: client-parallel, and no cold load in the window.
    let mark = raw_blocking(addr, "POST", "/sim/mark", None, &[]).json();
    let first = mark["mark"].as_u64().expect("a mark");
    std::thread::scope(|s| {
        for agent in ["a", "b", "c"] {
            s.spawn(move || generate(addr, agent));
        }
    });
    let doc = judge(addr, "?expect=parallel&min_speedup=2");
    assert_eq!(doc["since"], first, "{doc}");
    assert_eq!(doc["report"]["verdict"], "parallel", "{doc}");
    assert_eq!(doc["report"]["time"]["load_s"], 0.0, "the preload kept the cold load out: {doc}");
    assert_eq!(doc["report"]["deployment"]["verdict"], "full", "{doc}");
    assert_eq!(doc["passed"], true, "{doc}");
    assert_eq!(doc["expectations"]["verdict"], "parallel", "{doc}");

    // A new mark, then the same agents one after another: serialized, the gate fails in words.
    raw_blocking(addr, "POST", "/sim/mark", None, &[]);
    for agent in ["a", "b", "c"] {
        generate(addr, agent);
    }
    let doc = judge(addr, "?expect=parallel");
    assert_eq!(doc["report"]["verdict"], "serialized", "{doc}");
    assert_eq!(doc["report"]["requests"], 3, "only the requests since the mark: {doc}");
    assert_eq!(doc["passed"], false, "{doc}");
    let failure = doc["failures"][0].as_str().unwrap_or_default();
    assert!(failure.starts_with("expected parallel, got serialized: "), "{failure}");
    // Told the number of agents, or another window, the judge says so too.
    let doc = judge(addr, &format!("?since={first}&agents=3"));
    assert_eq!(doc["report"]["requests"], 6, "{doc}");
}

#[test]
fn bad_judge_options_are_refused_in_ollamas_error_shape_naming_the_valid_ones() {
    let sim = SimBuilder::new().time_scale(0.02).start().unwrap();
    let addr = sim.addrs()[0];
    for (query, says) in [
        (
            "?agentz=3",
            "unknown option \"agentz\"; the options are agents, since, expect, min_saving, min_speedup, wait_ms",
        ),
        ("?agents=0", "agents must be a whole number of at least 1"),
        ("?expect=fast", "is not a verdict: parallel, partly_serialized, serialized, inconclusive"),
        ("?min_saving=2", "min_saving must be between 0 and 1"),
        ("?since=x", "since must be a trace id"),
        ("?wait_ms=99999999", "wait_ms must be 0-60000"),
    ] {
        let r = raw_blocking(addr, "GET", &format!("/sim/judge{query}"), None, &[]);
        assert_eq!(r.status, 400, "{query}: {}", r.text());
        let err = r.json()["error"].as_str().unwrap_or_default().to_string();
        assert!(err.contains(says), "{query}: {err}");
    }
}

#[test]
fn preloading_a_model_the_simulator_lacks_fails_with_the_models_it_has() {
    match SimBuilder::new().time_scale(0.02).preload("llama9:700b").start() {
        Err(e @ Error::Preload { .. }) => {
            let m = e.to_string();
            assert!(m.contains("cannot preload \"llama9:700b\"") && m.contains("gemma3:latest"), "{m}");
        }
        Err(e) => panic!("expected a preload error, got {e}"),
        Ok(_) => panic!("a model the catalogue lacks was preloaded"),
    }
}

fn chat(addr: SocketAddr, content: &str, num_predict: u32) -> String {
    let body = serde_json::json!({
        "model": "gemma3", "stream": false, "options": {"num_predict": num_predict},
        "messages": [{"role": "user", "content": content}],
    })
    .to_string();
    let r = raw_blocking(addr, "POST", "/api/chat", Some(&body), &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    v["message"]["content"].as_str().expect("content").to_string()
}

#[test]
fn timing_a_join_whose_prompt_carries_the_branches_answers_is_chained_after_them() {
    // A LangGraph-style map-reduce over plain HTTP, no labels: three reviewers at once, then an
    // editor whose prompt quotes their answers (reformatted, as frameworks do). The editor
    // cannot start before them; without the carried answers the judge would take it for a
    // fourth agent held back and blame the program (see the judge's unit test for the figures).
    let sim = SimBuilder::new().preset("ideal").unwrap().time_scale(0.05).preload("gemma3").start().unwrap();
    let addr = sim.addrs()[0];
    raw_blocking(addr, "POST", "/sim/mark", None, &[]);
    let answers: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = ["security", "performance", "style"]
            .iter()
            .map(|who| s.spawn(move || chat(addr, &format!("You are the {who} reviewer. Review the cache."), 40)))
            .collect();
        hs.into_iter().map(|h| h.join().expect("reviewer")).collect()
    });
    let quoted: Vec<String> =
        answers.iter().enumerate().map(|(i, a)| format!("- reviewer {i}: {}", a.to_uppercase())).collect();
    chat(addr, &format!("You are the editor. Merge these reviews:\n{}", quoted.join("\n")), 60);
    let doc = judge(addr, "?expect=parallel");
    assert_eq!(doc["report"]["verdict"], "parallel", "{doc}");
    assert_eq!(doc["passed"], true, "{doc}");
    let notes = doc["report"]["notes"].to_string();
    assert!(notes.contains("1 request's prompt carried earlier answers"), "{doc}");
    // The trace says which answers the editor carried: the three reviewers'.
    let trace = raw_blocking(addr, "GET", "/sim/trace", None, &[]).json();
    let reqs = trace["requests"].as_array().expect("requests");
    let editor = reqs.iter().max_by_key(|r| r["id"].as_u64()).expect("the editor");
    let mut reviewers: Vec<u64> =
        reqs.iter().filter_map(|r| r["id"].as_u64()).filter(|&i| Some(i) != editor["id"].as_u64()).collect();
    reviewers.sort_unstable();
    assert_eq!(editor["carries"], serde_json::json!(reviewers), "{editor}");
    assert!(reqs.iter().filter(|r| r["id"] != editor["id"]).all(|r| r.get("carries").is_none()), "{trace}");
}
