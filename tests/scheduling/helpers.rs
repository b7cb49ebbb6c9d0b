use serde_json::{Value, json};

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
    let r = client()
        .post(format!("{url}/api/generate"))
        .json(&json!({"model": model, "options": options}))
        .send()
        .await
        .expect("load sent");
    assert_eq!(r.status(), 200, "load of {model}: {}", r.text().await.unwrap_or_default());
}

/// The trace record of agent `agent` (the last one with that label).
pub fn by_agent<'a>(trace: &'a sim_ollama::TraceSnapshot, agent: &str) -> &'a sim_ollama::RequestTrace {
    trace
        .requests
        .iter()
        .rev()
        .find(|r| r.agent == agent)
        .unwrap_or_else(|| panic!("no request from {agent} in the trace"))
}
