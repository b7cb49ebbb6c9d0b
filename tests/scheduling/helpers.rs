use serde_json::{Value, json};
use sim_ollama::SimHandle;
use std::time::{Duration, Instant};

pub fn client() -> reqwest::Client {
    reqwest::Client::new()
}

/// Posts a generate request as agent `agent` and returns the parsed final object (streaming,
/// so the request is traced like a real client's).
pub async fn generate(url: &str, agent: &str, body: Value) -> Value {
    let text = client()
        .post(format!("{url}/api/generate"))
        .header("X-Agent", agent)
        .json(&body)
        .send()
        .await
        .expect("request sent")
        .text()
        .await
        .expect("body read");
    text.lines().last().map(|l| serde_json::from_str(l).expect("final line is JSON")).unwrap_or(Value::Null)
}

/// Loads a model (empty prompt).
pub async fn load(url: &str, model: &str, options: Value) {
    load_request(url, None, model, options).await;
}

/// Loads a model as agent `agent`, so the load is found in the trace under that label.
pub async fn load_as(url: &str, agent: &str, model: &str, options: Value) {
    load_request(url, Some(agent), model, options).await;
}

async fn load_request(url: &str, agent: Option<&str>, model: &str, options: Value) {
    let mut req = client().post(format!("{url}/api/generate")).json(&json!({"model": model, "options": options}));
    if let Some(a) = agent {
        req = req.header("X-Agent", a);
    }
    let r = req.send().await.expect("load sent");
    assert_eq!(r.status(), 200, "load of {model}: {}", r.text().await.unwrap_or_default());
}

/// Polls the server until `cond` holds (the server's own state, not a sleep), for at most 20 s.
pub async fn until(sim: &SimHandle, what: &str, cond: impl Fn(&SimHandle) -> bool) {
    let t0 = Instant::now();
    while !cond(sim) {
        assert!(t0.elapsed() < Duration::from_secs(20), "timed out waiting until {what}: {:#?}", sim.metrics());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The trace record of agent `agent` (the last one with that label).
pub fn by_agent<'a>(
    trace: &'a sim_ollama::advanced::trace::TraceSnapshot,
    agent: &str,
) -> &'a sim_ollama::advanced::trace::RequestTrace {
    trace
        .requests
        .iter()
        .rev()
        .find(|r| r.agent == agent)
        .unwrap_or_else(|| panic!("no request from {agent} in the trace"))
}
