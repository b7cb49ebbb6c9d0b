use crate::util::Result;
use futures::StreamExt;
use serde_json::json;
use sim_ollama::SimBuilder;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_aborted_streams_leak_no_slot_task_or_request() -> Result {
    // Two instances with 4 slots each; 2,000 streams are dropped at random points (before the
    // headers, after the first chunk, after a few chunks).
    let sim = SimBuilder::new().instances(2).num_parallel(4).time_scale(0.05).start()?;
    let client = reqwest::Client::new();
    // Baseline: both models loaded and idle (servers plus one keep-alive timer each), with no
    // connection open.
    for u in sim.urls() {
        crate::helpers::load(u, "llama3.2:1b", json!({})).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let idle_tasks = sim.metrics().tasks;
    let body = json!({"model": "llama3.2:1b", "prompt": "go", "options": {"num_predict": 400}});
    let mut handles = Vec::new();
    for i in 0..2000usize {
        let (c, u, b) = (client.clone(), format!("{}/api/generate", sim.urls()[i % 2]), body.clone());
        handles.push(tokio::spawn(async move {
            let fut = async {
                let r = c.post(&u).json(&b).send().await?;
                let mut s = r.bytes_stream();
                for _ in 0..(i % 4) {
                    s.next().await;
                }
                Ok::<_, reqwest::Error>(())
            };
            // Some are cut off before the response even starts.
            let _ = tokio::time::timeout(Duration::from_millis((i % 7) as u64 * 3), fut).await;
        }));
        if i % 100 == 99 {
            for h in handles.drain(..) {
                h.await?;
            }
        }
    }
    for h in handles {
        h.await?;
    }
    drop(client);
    let t0 = Instant::now();
    loop {
        let m = sim.metrics();
        let busy: usize = m.instances.iter().map(|i| i.active + i.waiting_for_slot + i.pending).sum();
        let streams: usize = m.devices.iter().map(|d| d.streams).sum();
        if busy == 0 && streams == 0 && m.requests_in_flight == 0 && m.tasks <= idle_tasks {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "left behind after 5 s: {m:#?} (idle tasks {idle_tasks})");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // And the server still serves.
    let v: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/api/generate", sim.url()))
        .json(&json!({"model": "llama3.2:1b", "prompt": "ok", "stream": false, "options": {"num_predict": 3}}))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(v["eval_count"], 3);
    let cancelled = sim.trace().requests.iter().filter(|r| r.outcome == sim_ollama::Outcome::Cancelled).count();
    assert!(cancelled > 1000, "{cancelled} cancelled requests recorded");
    Ok(())
}
