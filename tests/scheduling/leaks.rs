use crate::util::Result;
use futures::StreamExt;
use serde_json::json;
use sim_ollama::SimBuilder;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_aborted_streams_leak_no_slot_task_or_request() -> Result {
    // Two instances with 4 slots each; 2,000 streams are dropped at chosen points: three in
    // four after reading one to three chunks (these reached the server and were cut
    // mid-stream, whatever the machine's load), one in four by a timer of 0-18 ms (before the
    // request is sent, while it waits for its headers, or in its first tokens: where exactly
    // depends on the machine, so those are not counted).
    let sim = SimBuilder::new().instances(2).num_parallel(4).time_scale(0.05).start()?;
    let client = reqwest::Client::new();
    // Baseline: both models loaded and idle (servers plus one keep-alive timer each), with no
    // connection open.
    for u in sim.urls() {
        crate::helpers::load(u, "llama3.2:1b", json!({})).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let idle_tasks = sim.metrics().tasks;
    // 4,000 tokens at this time scale take over a second: no stream ends before it is dropped.
    let body = json!({"model": "llama3.2:1b", "prompt": "go", "options": {"num_predict": 4000}});
    let mut handles = Vec::new();
    let mut cut_mid_stream = 0usize;
    for i in 0..2000usize {
        let (c, u, b) = (client.clone(), format!("{}/api/generate", sim.urls()[i % 2]), body.clone());
        handles.push(tokio::spawn(async move {
            if i % 4 == 0 {
                let fut = async {
                    let r = c.post(&u).json(&b).send().await?;
                    r.bytes_stream().next().await;
                    Ok::<_, reqwest::Error>(())
                };
                let _ = tokio::time::timeout(Duration::from_millis((i % 7) as u64 * 3), fut).await;
                return Ok(false);
            }
            let r = c.post(&u).json(&b).send().await?;
            let mut s = r.bytes_stream();
            let mut read = 0;
            for _ in 0..(i % 4) {
                if s.next().await.is_some() {
                    read += 1;
                }
            }
            Ok::<_, reqwest::Error>(read > 0)
        }));
        if i % 100 == 99 {
            for h in handles.drain(..) {
                cut_mid_stream += usize::from(h.await??);
            }
        }
    }
    for h in handles {
        cut_mid_stream += usize::from(h.await??);
    }
    drop(client);
    let t0 = Instant::now();
    loop {
        let m = sim.metrics();
        let busy: usize = m.instances.iter().map(|i| i.active + i.waiting_for_slot + i.pending).sum();
        let streams: usize = m.devices.iter().map(|d| d.streams).sum();
        if busy == 0 && streams == 0 && m.requests_in_flight == 0 && m.tasks <= idle_tasks && m.timer_entries == 0 {
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
    // Every stream cut after its first chunk is recorded as cancelled (the timed cuts may add
    // more, or never have reached the server).
    assert_eq!(cut_mid_stream, 1500, "every stream not cut by a timer read a chunk");
    let cancelled =
        sim.trace().requests.iter().filter(|r| r.outcome == sim_ollama::advanced::trace::Outcome::Cancelled).count();
    assert!(cancelled >= cut_mid_stream, "{cancelled} cancelled requests recorded, {cut_mid_stream} cut mid-stream");
    Ok(())
}

/// Issue 10: the trace held every finished record's token times and options up to a count, so
/// a long-running simulator's memory grew to gigabytes. It now keeps a byte budget.
#[test]
fn the_trace_keeps_to_its_byte_budget_and_zero_keeps_none() -> Result {
    let body =
        r#"{"model":"llama3.2:1b","prompt":"long","stream":false,"options":{"num_predict":2000,"sim_tokens":2000}}"#;
    for (mb, expect_kept) in [(1u64, true), (0, false)] {
        let sim = SimBuilder::new().time_scale(0.0).trace_budget_mb(mb).start()?;
        for _ in 0..100 {
            let r = crate::util::raw_blocking(sim.addrs()[0], "POST", "/api/generate", Some(body), &[]);
            assert_eq!(r.status, 200);
        }
        sim.wait_idle(Duration::from_secs(5))?;
        let m = sim.metrics();
        let t = sim.trace();
        // 100 records of 2,000 token times (16 KB each) do not fit in 1 MiB.
        assert!(m.trace_bytes <= (mb as usize) << 20, "{} bytes held, budget {mb} MiB", m.trace_bytes);
        assert!(t.dropped > 0, "the oldest were dropped");
        assert_eq!(t.requests.len() as u64 + t.dropped, 100, "every request is kept or counted as dropped");
        assert_eq!(!t.requests.is_empty(), expect_kept, "budget {mb} MiB kept {}", t.requests.len());
        if let (Some(first), Some(last)) = (t.requests.first(), t.requests.last()) {
            assert_eq!(last.id, 100, "the newest are the ones kept");
            assert_eq!(last.id - first.id + 1, t.requests.len() as u64);
        }
    }
    Ok(())
}

/// Issue 10: a request that finished while a snapshot was taken could be in neither list.
/// Snapshots taken while requests finish must each hold every request between the first and
/// the last they show.
#[test]
fn snapshots_taken_while_requests_finish_miss_none() -> Result {
    let sim = SimBuilder::new().time_scale(0.0).num_parallel(8).start()?;
    let addr = sim.addrs()[0];
    let senders: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..150 {
                    let body = r#"{"model":"tiny","prompt":"x","stream":false,"options":{"num_predict":2}}"#;
                    crate::util::raw_blocking(addr, "POST", "/api/generate", Some(body), &[]);
                }
            })
        })
        .collect();
    let mut snapshots = 0;
    while senders.iter().any(|s| !s.is_finished()) {
        let t = sim.trace();
        let ids: Vec<u64> = t.requests.iter().map(|r| r.id).collect();
        if let (Some(a), Some(b)) = (ids.first(), ids.last()) {
            assert_eq!(ids.len() as u64, b - a + 1, "a snapshot missed a request: {ids:?}");
        }
        snapshots += 1;
    }
    for s in senders {
        s.join().expect("sender");
    }
    assert!(snapshots > 10, "{snapshots} snapshots");
    Ok(())
}
