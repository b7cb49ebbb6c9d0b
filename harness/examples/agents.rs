//! Three agents asking Ollama for text with tokio and reqwest. Run with:
//!
//!     OLLAMA_HOST=http://127.0.0.1:11434 cargo run -p harness --example agents [-- --sequential]
//!
//! `--sequential` awaits the agents one after the other: the bug `harness exec` should catch.
//! Each agent sends its name in the X-Agent header. (`examples/agent-check` is the fuller
//! example: a user's crate that checks its agents with the judge in its own tests.)

use std::time::Duration;

async fn agent(client: reqwest::Client, base: String, name: String) -> Result<u64, reqwest::Error> {
    let mut total = 0;
    for _ in 0..2 {
        let body = serde_json::json!({"model": "gemma3", "prompt": "Summarise the incident.", "stream": false, "options": {"num_predict": 60}});
        let v: serde_json::Value = client
            .post(format!("{base}/api/generate"))
            .header("X-Agent", &name)
            .json(&body)
            .send()
            .await?
            .json()
            .await?;
        total += v["eval_count"].as_u64().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(total)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base = std::env::var("OLLAMA_HOST").unwrap_or_else(|_| "http://127.0.0.1:11434".into());
    let sequential = std::env::args().any(|a| a == "--sequential");
    let client = reqwest::Client::new();
    let names: Vec<String> = (0..3).map(|i| format!("rs-{i}")).collect();
    let mut counts = Vec::new();
    if sequential {
        for n in names {
            counts.push(agent(client.clone(), base.clone(), n).await?);
        }
    } else {
        let tasks: Vec<_> = names.into_iter().map(|n| tokio::spawn(agent(client.clone(), base.clone(), n))).collect();
        for t in tasks {
            counts.push(t.await??);
        }
    }
    println!("agents done: {counts:?}");
    Ok(())
}
