//! The judge over HTTP (issue 24): `POST /sim/mark`, `GET /sim/judge` with exec's options and
//! expectations, and models preloaded before the program starts.

use crate::util::raw_blocking;
use sim_ollama::{SimBuilder, StartError};
use std::net::SocketAddr;

fn generate(addr: SocketAddr, agent: &str) {
    let body = r#"{"model":"gemma3","prompt":"Summarise the run.","stream":false,"options":{"num_predict":40}}"#;
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
    let sim = SimBuilder::new().preset("ideal").unwrap().time_scale(0.02).preload("gemma3").start().unwrap();
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
        Err(e @ StartError::Preload { .. }) => {
            let m = e.to_string();
            assert!(m.contains("cannot preload \"llama9:700b\"") && m.contains("gemma3:latest"), "{m}");
        }
        Err(e) => panic!("expected a preload error, got {e}"),
        Ok(_) => panic!("a model the catalogue lacks was preloaded"),
    }
}
