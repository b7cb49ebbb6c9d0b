//! Device sharing, measured in real time: `timing_` tests run one at a time.

use crate::helpers::{generate, load};
use crate::util::Result;
use serde_json::json;
use sim_ollama::SimBuilder;

const SCALE: f64 = 0.05;

/// Modelled tokens/s of a final object.
fn rate(v: &serde_json::Value) -> f64 {
    v["eval_count"].as_f64().unwrap() / (v["eval_duration"].as_f64().unwrap() / 1e9) * SCALE
}

async fn two_streams(preset: &str) -> (f64, f64, sim_ollama::advanced::trace::TraceSnapshot) {
    let sim = SimBuilder::new().preset(preset).unwrap().time_scale(SCALE).start().unwrap();
    let (u0, u1) = (sim.urls()[0].clone(), sim.urls()[1].clone());
    tokio::join!(load(&u0, "gemma3", json!({})), load(&u1, "gemma3", json!({})));
    let body = json!({"model": "gemma3", "prompt": "Analyse the data", "options": {"num_predict": 300}});
    let (a, b) = tokio::join!(generate(&u0, "collector", body.clone()), generate(&u1, "insight", body.clone()));
    (rate(&a), rate(&b), sim.trace())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_two_instances_on_one_device_each_get_about_half_the_solo_rate() -> Result {
    let (a, b, trace) = two_streams("dual-one-device").await;
    // 0.78 / 2 = 39 % of the solo speed while both decode: the device model's own figure
    // (the trace's mean speed), computed from who shares the device, not measured, so a busy
    // machine cannot move it; the bounds allow for the streams not joining at the same instant.
    for r in trace.requests.iter().filter(|r| r.tokens > 1) {
        assert!((0.38..0.45).contains(&r.mean_speed), "{}: mean speed {:.3}", r.agent, r.mean_speed);
    }
    // The measured rates (114.5 tok/s alone x 0.39 = 44.7; the shared data: 41-50) carry the
    // machine's scheduling noise: checked loosely, for gross errors.
    for r in [a, b] {
        assert!((33.0..60.0).contains(&r), "per-stream rate {r:.1} tok/s; both: {a:.1}, {b:.1}");
    }
    let rec = trace.requests.iter().find(|r| r.agent == "insight").unwrap();
    assert_eq!(rec.shared_device_with, vec![0]);
    assert!(rec.explanation.contains("device shared with instance 0"), "{}", rec.explanation);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_two_instances_on_two_devices_each_get_the_full_rate() -> Result {
    let (a, b, trace) = two_streams("dual-two-devices").await;
    // Alone on its device each stream runs at its full solo speed: exactly 1.0 in the model.
    for r in trace.requests.iter().filter(|r| r.tokens > 1) {
        assert_eq!(r.mean_speed, 1.0, "{}", r.agent);
    }
    for r in [a, b] {
        assert!((85.0..125.0).contains(&r), "per-stream rate {r:.1} tok/s; both: {a:.1}, {b:.1}");
    }
    assert!(trace.requests.iter().all(|r| r.shared_device_with.is_empty()));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_parallel_slots_batch_better_than_processes_time_slicing() -> Result {
    // Two streams batched in one process (batch_penalty 0.15): 114.5 / 1.15 = 99.6 tok/s
    // each, against 47 for two processes on one device.
    let sim = SimBuilder::new().preset("single-4slots")?.time_scale(SCALE).start()?;
    let u = sim.url().to_string();
    load(&u, "gemma3", json!({})).await;
    let body = json!({"model": "gemma3", "prompt": "Analyse the data", "options": {"num_predict": 300}});
    let (a, b) = tokio::join!(generate(&u, "a", body.clone()), generate(&u, "b", body.clone()));
    // 1 / 1.15 = 87 % of solo speed in the model while both decode (two processes: 39 %).
    for r in sim.trace().requests.iter().filter(|r| r.tokens > 1) {
        assert!((0.86..0.90).contains(&r.mean_speed), "{}: mean speed {:.3}", r.agent, r.mean_speed);
    }
    // Measured in wall time from the server's eval_duration (expected 99.6): a prompt phase
    // that ends a few ms late shortens a ~0.15 s decode and once read 117.1 on an idle run, so
    // this is checked loosely, for gross errors, as the other rates here; the model's figure
    // above is the exact check, and 65 still sits far above the 47 of two processes.
    for r in [rate(&a), rate(&b)] {
        assert!((65.0..135.0).contains(&r), "per-stream rate {r:.1} tok/s");
    }
    Ok(())
}
