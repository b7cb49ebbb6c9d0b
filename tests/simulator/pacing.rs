//! Tokens are paced against absolute deadlines. These tests measure real time, so they run
//! one at a time (`timing_` prefix, serial group in `.config/nextest.toml`).

use crate::util::Result;
use futures::StreamExt;
use sim_ollama::{ModelSpec, SimBuilder};
use std::time::{Duration, Instant};

/// A model with constant 10 ms gaps, no first-token overhead and instant loads.
fn metronome() -> ModelSpec {
    let toml = r#"
        name = "metronome:latest"
        family = "llama"
        parameter_size = "1B"
        quantization_level = "Q4_0"
        size = 1000
        context_length = 4096
        embedding_length = 64
        capabilities = ["completion"]
        [profile]
        load_ms = { dist = "constant", mean = 0.0 }
        prompt_tokens_per_s = 1000000.0
        decode_tokens_per_s = 100.0
        inter_token = { dist = "constant" }
        output_tokens = { dist = "constant", mean = 100.0 }
    "#;
    toml::from_str(toml).expect("metronome profile parses")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_tokens_arrive_on_schedule_without_accumulating_delay() -> Result {
    let sim = SimBuilder::new().model(metronome()).start()?;
    let body = serde_json::json!({"model": "metronome", "prompt": "tick", "options": {"num_predict": 100}});
    let r = reqwest::Client::new().post(format!("{}/api/generate", sim.url())).json(&body).send().await?;
    let mut stream = r.bytes_stream();
    let mut arrivals = Vec::new();
    let mut buf = Vec::new();
    while let Some(chunk) = stream.next().await {
        let now = Instant::now();
        buf.extend_from_slice(&chunk?);
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            if line.windows(13).any(|w| w == b"\"done\":false}") {
                arrivals.push(now);
            }
        }
    }
    assert_eq!(arrivals.len(), 100);
    // Token i is due 10 ms * i after token 0. Deadline pacing keeps the error bounded per
    // token; cumulative sleeps would drift (about 24 % slow here, 1.24 s instead of 0.99 s).
    let errors: Vec<f64> =
        arrivals.iter().enumerate().map(|(i, t)| (*t - arrivals[0]).as_secs_f64() * 1e3 - 10.0 * i as f64).collect();
    let total = (arrivals[99] - arrivals[0]).as_secs_f64();
    assert!((0.985..1.03).contains(&total), "99 gaps of 10 ms took {total:.3} s");
    let mut abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
    abs.sort_by(f64::total_cmp);
    // The timer has 1 ms resolution: a token may leave up to ~1 ms late, plus scheduling
    // noise on a loaded 2-core machine; 95 % within 3 ms, none off by more than 15 ms.
    assert!(abs[94] < 3.0, "95th percentile schedule error {:.2} ms; errors {errors:?}", abs[94]);
    assert!(abs[99] < 15.0, "worst schedule error {:.2} ms", abs[99]);
    let late = sim.lateness();
    assert_eq!(late.count, 100);
    assert!(late.p50_us < 2_000, "server-side lateness {late:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_durations_reported_match_what_the_client_saw() -> Result {
    let sim = SimBuilder::new().model(metronome()).start()?;
    let body =
        serde_json::json!({"model": "metronome", "prompt": "tick", "stream": false, "options": {"num_predict": 30}});
    let t0 = Instant::now();
    let v: serde_json::Value =
        reqwest::Client::new().post(format!("{}/api/generate", sim.url())).json(&body).send().await?.json().await?;
    let client = t0.elapsed();
    let total = Duration::from_nanos(v["total_duration"].as_u64().unwrap());
    let eval = Duration::from_nanos(v["eval_duration"].as_u64().unwrap());
    // The server's total is inside the client's round trip, which adds only loopback and
    // parsing overhead.
    assert!(total <= client && client - total < Duration::from_millis(20), "total {total:?} client {client:?}");
    // 30 tokens, 10 ms apart, the first one 10 ms after the prompt: 300 ms of decoding.
    assert!(eval >= Duration::from_millis(299) && eval < Duration::from_millis(320), "eval {eval:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_time_scale_shrinks_every_modelled_duration() -> Result {
    let sim = SimBuilder::new().model(metronome()).time_scale(0.1).start()?;
    let body =
        serde_json::json!({"model": "metronome", "prompt": "tick", "stream": false, "options": {"num_predict": 100}});
    let t0 = Instant::now();
    let v: serde_json::Value =
        reqwest::Client::new().post(format!("{}/api/generate", sim.url())).json(&body).send().await?.json().await?;
    let wall = t0.elapsed();
    assert_eq!(v["eval_count"], 100);
    // 1 s of modelled decoding at scale 0.1: 100 ms, with 1 ms timer granularity.
    assert!(wall >= Duration::from_millis(99) && wall < Duration::from_millis(160), "{wall:?}");
    Ok(())
}
