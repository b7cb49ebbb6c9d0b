use crate::helpers::{by_agent, client, generate, load};
use crate::util::Result;
use serde_json::{Value, json};
use sim_ollama::SimBuilder;
use sim_ollama::advanced::trace::WaitReason;

fn body(n: u32) -> Value {
    json!({"model": "llama3.2:1b", "prompt": "Summarise the data", "options": {"num_predict": n}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_slot_serializes_two_requests() -> Result {
    let sim = SimBuilder::new().preset("single-1slot")?.time_scale(0.1).start()?;
    let u = sim.url();
    load(u, "llama3.2:1b", json!({})).await;
    let (a, b) = tokio::join!(generate(u, "a", body(40)), generate(u, "b", body(40)));
    assert_eq!((a["eval_count"].as_u64(), b["eval_count"].as_u64()), (Some(40), Some(40)));
    let t = sim.trace();
    let (ra, rb) = (by_agent(&t, "a"), by_agent(&t, "b"));
    let (first, second) = if ra.first_token_us < rb.first_token_us { (ra, rb) } else { (rb, ra) };
    // The second request's first token comes after the first's last token: the slot is held
    // for the whole stream.
    assert!(second.token_us[0] >= *first.token_us.last().unwrap(), "{first:#?}\n{second:#?}");
    assert!(second.waits.iter().any(|w| w.reason == WaitReason::SlotBusy), "{:?}", second.waits);
    assert!(
        second.explanation.contains("waited") && second.explanation.contains("parallel slot"),
        "{}",
        second.explanation
    );
    // Slot waiting is in total_duration, not in load_duration: the second request's
    // load_duration is its time to a runner (received to runner_us in the trace, to the
    // microsecond), and its slot wait (runner_us to slot_us) is in total_duration only. Read
    // from the server's own timestamps, not against a wall-clock bound: on a loaded machine the
    // time to a runner alone once took 7.5 ms.
    let (fa, fb) = if ra.id == first.id { (&a, &b) } else { (&b, &a) };
    assert!(fb["total_duration"].as_u64() > fa["total_duration"].as_u64());
    let to_runner_us = second.runner_us.unwrap() - second.received_us;
    let slot_wait_us = second.slot_us.unwrap() - second.runner_us.unwrap();
    let load_us = fb["load_duration"].as_u64().unwrap() / 1000;
    assert!(load_us.abs_diff(to_runner_us) <= 1, "load_duration {load_us} us, to a runner {to_runner_us} us");
    assert!(slot_wait_us > 0 && fb["total_duration"].as_u64().unwrap() / 1000 >= to_runner_us + slot_wait_us, "{fb}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_slots_overlap_two_requests() -> Result {
    let sim = SimBuilder::new().num_parallel(2).time_scale(0.1).start()?;
    let u = sim.url();
    load(u, "llama3.2:1b", json!({})).await;
    tokio::join!(generate(u, "a", body(40)), generate(u, "b", body(40)));
    let t = sim.trace();
    let (ra, rb) = (by_agent(&t, "a"), by_agent(&t, "b"));
    assert!(
        rb.token_us[0] < *ra.token_us.last().unwrap() && ra.token_us[0] < *rb.token_us.last().unwrap(),
        "the streams overlap"
    );
    assert!(!rb.waits.iter().any(|w| w.reason == WaitReason::SlotBusy));
    assert_eq!(ra.max_batch.max(rb.max_batch), 2, "decoded in one batch");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_different_num_ctx_reloads_after_in_flight_requests_and_sampling_options_do_not() -> Result {
    let sim = SimBuilder::new().time_scale(0.1).start()?;
    let u = sim.url();
    let with = |ctx: u32, temp: f64, n: u32| json!({"model": "llama3.2:1b", "prompt": "x", "options": {"num_ctx": ctx, "temperature": temp, "num_predict": n, "sim_tokens": n}});
    load(u, "llama3.2:1b", json!({"num_ctx": 2048})).await;
    // A long request holds the runner while another asks for num_ctx 4096. The second is sent
    // once the server reports the first active (not after a fixed sleep: on a loaded machine
    // the first had once finished before a 20 ms sleep ended, and the second simply loaded).
    let (a, b) = tokio::join!(generate(u, "a", with(2048, 0.8, 600)), async {
        let t0 = std::time::Instant::now();
        while sim.metrics().instances[0].active == 0 {
            assert!(t0.elapsed() < std::time::Duration::from_secs(10), "the first request never started");
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        generate(u, "b", with(4096, 0.8, 5)).await
    });
    assert_eq!(a["eval_count"], 600);
    let t = sim.trace();
    let (ra, rb) = (by_agent(&t, "a"), by_agent(&t, "b"));
    assert!(
        rb.waits.iter().any(|w| w.reason == WaitReason::ReloadForOptions && w.detail.contains("num_ctx 2048 -> 4096")),
        "{:?}",
        rb.waits
    );
    assert!(rb.runner_us.unwrap() >= ra.end_us.unwrap(), "the reload waited for the in-flight request");
    assert_eq!(rb.loads.len(), 1);
    // The reload starts a new runner (llama3.2: ~1.5 s x 0.1), and it shows in load_duration.
    assert!(b["load_duration"].as_u64().unwrap() >= rb.loads[0].duration_us * 1000);
    let ps: Value = client().get(format!("{u}/api/ps")).send().await?.json().await?;
    assert_eq!(ps["models"][0]["context_length"], 4096);
    // Sampling options never reload.
    generate(u, "c", with(4096, 0.2, 3)).await;
    assert!(by_agent(&sim.trace(), "c").loads.is_empty());
    Ok(())
}

/// Issue 13: a call to a loaded runner pays the real scheduler's per-call health ping (~290 ms
/// modelled for gemma3, the shared data's ~270 ms on every call), and a reload for new runner
/// options starts a new runner: a full load (the data's 3.2-8.3 s), not the fast figure it
/// cost before (~0.3 s). Read from the frozen clock's modelled durations, not a wall clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_for_options_costs_a_runner_start_and_a_loaded_call_the_ping() -> Result {
    let sim = SimBuilder::new().frozen_clock(true).time_scale(0.005).seed(3).start()?;
    let u = sim.url();
    let call = |agent: &'static str, ctx: u32| {
        generate(u, agent, json!({"model": "gemma3", "prompt": "x", "options": {"num_ctx": ctx, "num_predict": 3}}))
    };
    let ms = |v: &Value| v["load_duration"].as_u64().unwrap() as f64 / 1e6 / 0.005;
    let first = ms(&call("first", 2048).await);
    let mut loaded = Vec::new();
    for agent in ["warm-1", "warm-2", "warm-3"] {
        loaded.push(ms(&call(agent, 2048).await));
    }
    let reload = ms(&call("reload", 4096).await);
    assert!(first >= 3000.0, "the first load starts a runner: {first:.0} ms");
    for l in &loaded {
        // The profile's ping: log-normal around 290 ms, at least 150.
        assert!((150.0..1000.0).contains(l), "a call to a loaded runner: {l:.0} ms");
    }
    assert!(reload >= 3000.0, "a reload for num_ctx starts a new runner: {reload:.0} ms");
    let t = sim.trace();
    assert_eq!(by_agent(&t, "reload").loads.len(), 1);
    assert!(by_agent(&t, "warm-2").loads.is_empty(), "a call to a loaded runner loads nothing");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_expiry_unloads_and_its_formats_are_honoured() -> Result {
    let sim = SimBuilder::new().time_scale(0.01).start()?;
    let u = sim.url();
    let ps = || async { client().get(format!("{u}/api/ps")).send().await.unwrap().json::<Value>().await.unwrap() };
    // Taken before the request: the keep-alive runs from the answer, so the unload comes at
    // least 300 ms after this, however late this test's thread reads the answer.
    let sent = std::time::Instant::now();
    generate(u, "a", json!({"model": "tiny", "prompt": "x", "keep_alive": "300ms", "options": {"num_predict": 2}}))
        .await;
    assert_eq!(ps().await["models"].as_array().map(Vec::len), Some(1));
    // Polled, not a fixed sleep: the model goes when its 300 ms are up, never before, and
    // within 5 s.
    while ps().await["models"] != json!([]) {
        assert!(sent.elapsed().as_secs() < 5, "still loaded 5 s after a 300 ms keep-alive");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let gone = sent.elapsed();
    assert!(gone.as_millis() >= 300, "unloaded {gone:?} after the request: before its 300 ms keep-alive");
    // Negative = forever: expires_at is centuries ahead.
    generate(u, "b", json!({"model": "tiny", "prompt": "x", "keep_alive": -1, "options": {"num_predict": 2}})).await;
    let exp = ps().await["models"][0]["expires_at"].as_str().unwrap().to_string();
    assert!(exp.as_str() > "2300", "{exp}");
    // Without keep_alive, a loaded model keeps its previous value.
    generate(u, "c", json!({"model": "tiny", "prompt": "x", "options": {"num_predict": 2}})).await;
    assert!(ps().await["models"][0]["expires_at"].as_str().unwrap() > "2300");
    // keep_alive 0 with a prompt: served, then unloaded when idle.
    generate(u, "d", json!({"model": "tiny", "prompt": "x", "keep_alive": 0, "options": {"num_predict": 2}})).await;
    assert_eq!(ps().await["models"], json!([]));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_loaded_models_evicts_an_idle_model() -> Result {
    let sim = SimBuilder::new().max_loaded_models(1).time_scale(0.01).start()?;
    let u = sim.url();
    load(u, "tiny", json!({})).await;
    load(u, "llama3.2:1b", json!({})).await;
    let ps: Value = client().get(format!("{u}/api/ps")).send().await?.json().await?;
    let names: Vec<&str> = ps["models"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["llama3.2:1b"]);
    Ok(())
}

#[tokio::test]
async fn absurd_values_are_answered_not_panicked_on() -> Result {
    // Found by the properties: a keep_alive of 1e300 seconds panicked the handler.
    let sim = SimBuilder::new().start()?;
    let u = sim.url();
    for body in [
        json!({"model": "tiny", "prompt": "x", "keep_alive": 1e300, "options": {"num_predict": 2}}),
        json!({"model": "tiny", "prompt": "x", "keep_alive": "2562047h", "options": {"num_predict": 2}}),
        json!({"model": "tiny", "prompt": "x", "options": {"num_predict": 3, "sim_tokens": 9_000_000_000_000_000_000u64}}),
        json!({"model": "tiny", "prompt": "x", "options": {"num_predict": i64::MAX, "num_ctx": i64::MAX}}),
    ] {
        let r = client().post(format!("{u}/api/generate")).json(&body).send().await?;
        assert_eq!(r.status(), 200, "{body}");
        let last: Value = serde_json::from_str(r.text().await?.lines().last().unwrap())?;
        assert_eq!(last["done"], true, "{body}");
    }
    Ok(())
}

/// Issue 13 item 8: while a model's first request runs, the real scheduler has not set its
/// expiry yet, and `/api/ps` reports now plus the keep-alive (server/sched.go 1775-1780); the
/// simulator used to report the end of the load. Frozen clock: "now" is the fixed epoch,
/// 2026-01-01T00:00:00Z.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ps_during_a_models_first_request_expires_a_keep_alive_from_now() -> Result {
    let sim = SimBuilder::new().frozen_clock(true).time_scale(0.1).start()?;
    let u = sim.url().to_string();
    let body = json!({"model": "llama3.2:1b", "prompt": "x", "keep_alive": "10m", "options": {"num_predict": 3000, "sim_tokens": 3000}});
    let first = tokio::spawn({
        let u = u.clone();
        async move { generate(&u, "first", body).await }
    });
    crate::helpers::until(&sim, "the first request streams", |s| s.metrics().instances[0].active == 1).await;
    let ps: Value = client().get(format!("{u}/api/ps")).send().await?.json().await?;
    assert_eq!(ps["models"][0]["expires_at"], "2026-01-01T00:10:00Z", "{ps}");
    first.abort();
    Ok(())
}
