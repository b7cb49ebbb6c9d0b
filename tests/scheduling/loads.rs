//! Issue 13, items 2-4: loads as the real scheduler runs them. Requests that arrive while
//! their model loads wait in the pending queue (counted toward `OLLAMA_MAX_QUEUE`, 503 beyond
//! it); a load whose client goes away is aborted and the next request starts a new one; a runner
//! expired for a reload or an eviction keeps serving compatible requests until it is idle.
//!
//! The loads here are long on purpose (a model whose load is modelled at 60 s, at time scale
//! 1): every step happens well inside the load, whatever the machine's load, and the load never
//! completes (its requests are dropped), so the tests take a fraction of a second.

use crate::helpers::{by_agent, client, until};
use crate::util::Result;
use serde_json::{Value, json};
use sim_ollama::advanced::dist::DistSpec;
use sim_ollama::advanced::trace::WaitReason;
use sim_ollama::{SimBuilder, SimHandle};

/// `tiny`, renamed `slowload`, with a load of 60 s.
fn slow_loading() -> sim_ollama::advanced::config::ModelSpec {
    let mut spec =
        sim_ollama::advanced::config::default_catalogue().into_iter().find(|m| m.name == "tiny:latest").unwrap();
    spec.name = "slowload:latest".into();
    spec.profile.cold_load_ms = None;
    spec.profile.load_ms = DistSpec::constant(60_000.0);
    spec
}

/// Sends a generate request as `agent` in a task; aborting the task drops the request (the
/// client goes away).
fn send(url: &str, agent: &str, model: &str) -> tokio::task::JoinHandle<reqwest::Result<(u16, Value)>> {
    let (u, a, m) = (format!("{url}/api/generate"), agent.to_string(), model.to_string());
    tokio::spawn(async move {
        let r = client()
            .post(u)
            .header("X-Agent", a)
            .json(&json!({"model": m, "prompt": "x", "stream": false, "options": {"num_predict": 2}}))
            .send()
            .await?;
        let status = r.status().as_u16();
        Ok((status, r.json().await?))
    })
}

/// Whether `agent`'s request has started a load and is still in flight.
fn loading(sim: &SimHandle, agent: &str) -> bool {
    sim.trace().requests.iter().any(|r| r.agent == agent && r.end_us.is_none() && !r.loads.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_during_a_load_queue_count_toward_max_queue_and_a_dropped_load_starts_over() -> Result {
    let sim = SimBuilder::new().model(slow_loading()).max_queue(1).time_scale(1.0).start()?;
    let u = sim.url().to_string();
    let a = send(&u, "a", "slowload");
    until(&sim, "a is loading", |s| loading(s, "a")).await;
    // b arrives while the model loads: it waits in the pending queue (the old scheduler joined
    // it to the loading runner, uncounted).
    let b = send(&u, "b", "slowload");
    until(&sim, "b is pending", |s| s.metrics().instances[0].pending == 1).await;
    // The queue (one place) is full: c is refused at once, with the real error and status.
    let c = send(&u, "c", "slowload").await??;
    assert_eq!(c.0, 503, "{:?}", c.1);
    assert_eq!(c.1, json!({"error": "server busy, please try again.  maximum pending requests exceeded"}));
    // a's client goes away: its load is aborted, and b, next in the queue, starts a new one.
    a.abort();
    until(&sim, "b is loading", |s| loading(s, "b")).await;
    let t = sim.trace();
    let rb = by_agent(&t, "b");
    assert!(
        rb.waits.iter().any(|w| w.reason == WaitReason::ModelLoading && w.detail.contains("queued while slowload")),
        "{:?}",
        rb.waits
    );
    assert_eq!(rb.loads.len(), 1, "{:?}", rb.loads);
    assert!(rb.loads[0].reason.contains("aborted"), "{:?}", rb.loads);
    assert_eq!(by_agent(&t, "a").outcome, sim_ollama::advanced::trace::Outcome::Cancelled);
    // b goes away too: nothing is left loaded or waiting, and the server answers at once.
    b.abort();
    until(&sim, "idle", |s| {
        let m = s.metrics();
        m.requests_in_flight == 0 && m.instances[0].pending == 0
    })
    .await;
    let ps: Value = client().get(format!("{u}/api/ps")).send().await?.json().await?;
    assert_eq!(ps["models"], json!([]), "an aborted load leaves nothing loaded");
    let (status, v) = send(&u, "d", "tiny").await??;
    assert_eq!((status, v["eval_count"].as_u64()), (200, Some(2)));
    Ok(())
}

/// Issue 13 item 4: the real fast path (`getRunner` -> `useLoadedRunner`) serves a request on
/// a runner that is waiting to be reloaded, as long as its options match: the reload then
/// waits for that request too (the starvation users see). The old scheduler refused the
/// expiring runner, queued the request behind the reload, and reloaded twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_waiting_for_its_reload_still_serves_requests_with_its_options() -> Result {
    let sim = SimBuilder::new().num_parallel(2).time_scale(0.1).start()?;
    let u = sim.url().to_string();
    let with = |ctx: u32, n: u32| json!({"model": "llama3.2:1b", "prompt": "x", "options": {"num_ctx": ctx, "num_predict": n, "sim_tokens": n}});
    crate::helpers::load(&u, "llama3.2:1b", json!({"num_ctx": 2048})).await;
    // a holds the runner for a long stream (3,000 tokens: seconds of wall time, so the steps
    // below happen inside it whatever the machine's load).
    let spawn = |agent: &'static str, body: Value| {
        let u = u.clone();
        tokio::spawn(async move { crate::helpers::generate(&u, agent, body).await })
    };
    let a = spawn("a", with(2048, 3000));
    until(&sim, "a streams", |s| s.metrics().instances[0].active == 1).await;
    // b needs num_ctx 4096: it expires the runner and waits for it to be idle.
    let b = spawn("b", with(4096, 3));
    let waiting = |s: &SimHandle| {
        s.trace().requests.iter().any(|r| {
            r.agent == "b" && r.waits.iter().any(|w| w.reason == WaitReason::ReloadForOptions && w.to_us.is_none())
        })
    };
    until(&sim, "b waits for the reload", waiting).await;
    // c asks for the loaded options: it is served at once on the expiring runner.
    let c = crate::helpers::generate(&u, "c", with(2048, 5)).await;
    assert_eq!(c["eval_count"], 5);
    assert!(waiting(&sim), "b still waits for the reload while a streams");
    let (a, b) = (a.await?, b.await?);
    assert_eq!((a["eval_count"].as_u64(), b["eval_count"].as_u64()), (Some(3000), Some(3)));
    let t = sim.trace();
    let (ra, rb, rc) = (by_agent(&t, "a"), by_agent(&t, "b"), by_agent(&t, "c"));
    assert!(rc.loads.is_empty() && rc.waits.iter().all(|w| w.reason != WaitReason::ReloadForOptions), "{rc:#?}");
    assert!(rc.end_us.unwrap() < ra.end_us.unwrap(), "c was served alongside a, before the reload");
    assert!(rb.runner_us.unwrap() >= ra.end_us.unwrap(), "the reload waited for every request on the runner");
    // One wait, from b's arrival to the reload: c's coming and going decided b's case again
    // without ending it (the trace never shows b between two waits of one cause).
    let reloads: Vec<_> = rb.waits.iter().filter(|w| w.reason == WaitReason::ReloadForOptions).collect();
    assert_eq!(reloads.len(), 1, "{:#?}", rb.waits);
    assert_eq!(rb.loads.len(), 1, "{:?}", rb.loads);
    // One reload in all: the runner now has b's options.
    let ps: Value = client().get(format!("{u}/api/ps")).send().await?.json().await?;
    assert_eq!(ps["models"][0]["context_length"], 4096);
    Ok(())
}

/// Issue 13 item 6: the real scheduler keys runners by the weights' file (`schedulerModelKey`),
/// so a copy made with `/api/copy` shares the original's runner and its slots: with one slot,
/// a request through the copy waits for the original's (the old scheduler started a second
/// runner, and the two ran side by side).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_shares_the_runner_and_the_slots_of_its_original() -> Result {
    let sim = SimBuilder::new().time_scale(0.1).start()?;
    let u = sim.url().to_string();
    let r = client()
        .post(format!("{u}/api/copy"))
        .json(&json!({"source": "llama3.2:1b", "destination": "alias"}))
        .send()
        .await?;
    assert_eq!(r.status(), 200);
    crate::helpers::load(&u, "llama3.2:1b", json!({})).await;
    let body = |m: &str| json!({"model": m, "prompt": "x", "options": {"num_predict": 200, "sim_tokens": 200}});
    let (a, b) = tokio::join!(
        crate::helpers::generate(&u, "original", body("llama3.2:1b")),
        crate::helpers::generate(&u, "copy", body("alias"))
    );
    assert_eq!((a["eval_count"].as_u64(), b["eval_count"].as_u64()), (Some(200), Some(200)));
    let t = sim.trace();
    let (ro, rc) = (by_agent(&t, "original"), by_agent(&t, "copy"));
    assert!(ro.loads.is_empty() && rc.loads.is_empty(), "the copy loads nothing: {:?}", rc.loads);
    let waited = [ro, rc].iter().filter(|r| r.waits.iter().any(|w| w.reason == WaitReason::SlotBusy)).count();
    assert_eq!(waited, 1, "one of the two waited for the one slot");
    let ps: Value = client().get(format!("{u}/api/ps")).send().await?.json().await?;
    assert_eq!(ps["models"].as_array().map(Vec::len), Some(1), "{ps}");
    Ok(())
}

/// Issue 13 item 8: the real scheduler loads some architectures with one slot whatever
/// `OLLAMA_NUM_PARALLEL` says (server/sched.go 505-511: mllama, qwen3vl, lfm2, nemotron_h...).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn architectures_that_cannot_batch_get_one_slot() -> Result {
    let mut vl =
        sim_ollama::advanced::config::default_catalogue().into_iter().find(|m| m.name == "llama3.2:1b").unwrap();
    vl.name = "qwen3-vl:2b".into();
    vl.family = "qwen3vl".into();
    let sim = SimBuilder::new().model(vl).num_parallel(4).time_scale(0.01).start()?;
    for model in ["qwen3-vl:2b", "llama3.2:1b"] {
        crate::helpers::load(sim.url(), model, json!({})).await;
    }
    let slots: Vec<(String, usize)> =
        sim.metrics().instances[0].loaded.iter().map(|l| (l.model.clone(), l.num_parallel)).collect();
    assert!(slots.contains(&("qwen3-vl:2b".to_string(), 1)), "{slots:?}");
    assert!(slots.contains(&("llama3.2:1b".to_string(), 4)), "{slots:?}");
    Ok(())
}
