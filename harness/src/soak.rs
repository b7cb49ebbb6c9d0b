//! `harness soak`: the reliability benchmark of a long-running simulator. Four phases against
//! one simulator started in this process (on its own runtime and threads):
//!
//! 1. **bad requests**: generated garbage (invalid UTF-8, truncated and oversized bodies, wrong
//!    types, huge numbers, unknown fields, bodies sent slowly) at every endpoint; counts
//!    panics (500s carrying the panic layer's text), hangs (no answer within the timeout),
//!    dropped connections and answers not in Ollama's error shape;
//! 2. **disconnects**: clients that go away at random points of a stream; afterwards no request
//!    in flight, no busy slot or stream, no timer entry, and the task count back where it was;
//! 3. **the pending limit**: with the scheduler held by a slow load, requests past the limit
//!    get 503 at once (the time to the answer is reported);
//! 4. **soak**: steady streaming load for a while with the trace on; resident memory sampled,
//!    and its growth per hour extrapolated.
//!
//! Figures are printed; the command exits 1 when a phase broke its promise (a panic, a hang, a
//! leak, a 503 that was slow), so it can run in CI too.

use rand::{RngExt, SeedableRng};
use serde::Serialize;
use sim_ollama::{SimBuilder, SimHandle};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What to run.
#[derive(Debug, Clone)]
pub struct SoakPlan {
    /// Bad requests to send.
    pub bad_requests: usize,
    /// Clients that disconnect mid-stream.
    pub disconnects: usize,
    /// Seconds of steady load.
    pub soak_s: f64,
    /// Concurrent client connections.
    pub concurrency: usize,
    /// Seed of the generated requests.
    pub seed: u64,
    /// The simulator's trace budget, MiB (the trace stays on; memory must plateau at it).
    pub trace_budget_mb: u64,
}

/// The figures of a soak.
#[derive(Debug, Clone, Serialize, Default)]
pub struct SoakReport {
    /// Bad requests sent.
    pub bad_requests: usize,
    /// Of those: answers per status.
    pub statuses: std::collections::BTreeMap<u16, usize>,
    /// Handler panics (caught and answered 500).
    pub panics: usize,
    /// Requests with no answer within the timeout.
    pub hangs: usize,
    /// Connections closed without a complete answer.
    pub dropped: usize,
    /// Error answers not in Ollama's shape.
    pub misshapen: usize,
    /// Bad requests per second.
    pub bad_per_s: f64,
    /// Clients that disconnected mid-stream.
    pub disconnects: usize,
    /// After them: requests in flight, busy slots, device streams, timer entries, tasks
    /// above the idle count.
    pub left_behind: [usize; 5],
    /// 503 answers at the pending limit, and the slowest of them, ms.
    pub busy_answers: usize,
    /// Slowest 503, ms.
    pub busy_max_ms: f64,
    /// Soak: seconds, requests completed, RSS at start and end (MiB), growth per hour (MiB).
    pub soak_s: f64,
    /// Requests completed during the soak.
    pub soak_requests: usize,
    /// RSS samples during the soak, MiB.
    pub rss_mib: Vec<f64>,
    /// RSS growth over the soak's second half, extrapolated to an hour, MiB.
    pub rss_growth_mib_per_hour: f64,
    /// Trace memory at the end, MiB.
    pub trace_mib: f64,
}

impl SoakReport {
    /// The promises the soak checks, broken ones in words (empty = all kept).
    pub fn broken(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.panics > 0 {
            v.push(format!("{} handler panics", self.panics));
        }
        if self.hangs > 0 {
            v.push(format!("{} requests got no answer in time", self.hangs));
        }
        if self.dropped > 0 {
            v.push(format!("{} connections dropped without an answer", self.dropped));
        }
        if self.misshapen > 0 {
            v.push(format!("{} error answers not in Ollama's shape", self.misshapen));
        }
        if self.left_behind.iter().any(|n| *n > 0) {
            v.push(format!(
                "after the disconnects: {} in flight, {} busy slots, {} device streams, {} timer entries, {} extra tasks",
                self.left_behind[0], self.left_behind[1], self.left_behind[2], self.left_behind[3], self.left_behind[4]
            ));
        }
        if self.busy_max_ms > 100.0 {
            v.push(format!("a 503 at the pending limit took {:.0} ms", self.busy_max_ms));
        }
        v
    }
}

impl std::fmt::Display for SoakReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "bad requests      {} at {:.0}/s: panics {}, hangs {}, dropped {}, not Ollama-shaped {}",
            self.bad_requests, self.bad_per_s, self.panics, self.hangs, self.dropped, self.misshapen
        )?;
        writeln!(f, "  statuses        {:?}", self.statuses)?;
        writeln!(
            f,
            "disconnects       {}: afterwards {} in flight, {} busy slots, {} streams, {} timer entries, {} tasks above idle",
            self.disconnects,
            self.left_behind[0],
            self.left_behind[1],
            self.left_behind[2],
            self.left_behind[3],
            self.left_behind[4]
        )?;
        writeln!(f, "pending limit     {} answered 503, slowest {:.1} ms", self.busy_answers, self.busy_max_ms)?;
        let first = self.rss_mib.first().copied().unwrap_or(0.0);
        let last = self.rss_mib.last().copied().unwrap_or(0.0);
        writeln!(
            f,
            "soak              {:.0} s, {} requests, RSS {:.1} -> {:.1} MiB (growth {:+.1} MiB/hour extrapolated), trace {:.1} MiB",
            self.soak_s, self.soak_requests, first, last, self.rss_growth_mib_per_hour, self.trace_mib
        )?;
        match self.broken().as_slice() {
            [] => writeln!(f, "every promise kept"),
            b => writeln!(f, "BROKEN: {}", b.join("; ")),
        }
    }
}

/// Resident memory of this process, MiB (Linux; 0 elsewhere).
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<f64>().ok()))
        .map_or(0.0, |pages| pages * 4096.0 / (1024.0 * 1024.0))
}

const PATHS: &[&str] = &[
    "/api/generate",
    "/api/chat",
    "/api/embed",
    "/api/embeddings",
    "/api/show",
    "/api/pull",
    "/api/copy",
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
];

/// One generated bad request: the bytes to send (head and body), and how to send them.
struct Bad {
    path: &'static str,
    bytes: Vec<u8>,
    slow: bool,
}

fn bad_request(rng: &mut rand_pcg::Pcg64Mcg, addr: SocketAddr) -> Bad {
    let path = PATHS[rng.random_range(0..PATHS.len())];
    let kind = rng.random_range(0..8u32);
    let body: Vec<u8> = match kind {
        // Random bytes, invalid UTF-8 likely.
        0 => (0..rng.random_range(0..300)).map(|_| rng.random::<u8>()).collect(),
        // Wrong types.
        1 => br#"{"model":7,"prompt":["x"],"messages":"no","options":[],"stream":"yes","input":{}}"#.to_vec(),
        // Huge numbers.
        2 => br#"{"model":"tiny","prompt":"x","options":{"num_predict":1e308,"num_ctx":99999999999999999999,"temperature":-1e300,"seed":-9223372036854775809},"keep_alive":1e300}"#.to_vec(),
        // Unknown fields and nesting.
        3 => format!(r#"{{"model":"tiny","prompt":"x","zzz":{{"a":[[[[[[1]]]]]]}},"stream":false,"options":{{"num_predict":{}}}}}"#, rng.random_range(1..4)).into_bytes(),
        // Deep nesting.
        4 => {
            let depth = rng.random_range(100..3000);
            let mut v = "[".repeat(depth).into_bytes();
            v.extend("]".repeat(depth).into_bytes());
            v
        }
        // Almost right JSON, cut short.
        5 => {
            let full = br#"{"model":"tiny","messages":[{"role":"user","content":"hello there"}],"stream":false}"#;
            full[..rng.random_range(1..full.len())].to_vec()
        }
        // Strings with escapes and NULs.
        6 => "{\"model\":\"tiny\\u0000\",\"prompt\":\"\\ud800\\udc00\\u0000\",\"stream\":false}".as_bytes().to_vec(),
        // Valid small requests (the server must keep serving between the bad ones).
        _ => br#"{"model":"tiny","prompt":"ok","stream":false,"options":{"num_predict":2}}"#.to_vec(),
    };
    // Some bodies declare more than they send (truncated), or far more than the limit.
    let declared = match rng.random_range(0..10u32) {
        0 => body.len() + rng.random_range(1..100),
        1 => 64 * 1024 * 1024,
        _ => body.len(),
    };
    let mut bytes = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {declared}\r\n\r\n"
    )
    .into_bytes();
    bytes.extend(body);
    Bad { path, bytes, slow: rng.random_range(0..50u32) == 0 }
}

enum Outcome {
    Answer(u16, Vec<u8>),
    Dropped,
    Hang,
}

async fn exchange(addr: SocketAddr, bad: &Bad, timeout: Duration) -> Outcome {
    let run = async {
        let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else { return Outcome::Dropped };
        if bad.slow {
            for chunk in bad.bytes.chunks(16) {
                if s.write_all(chunk).await.is_err() {
                    return Outcome::Dropped;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        } else if s.write_all(&bad.bytes).await.is_err() {
            return Outcome::Dropped;
        }
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw).await;
        let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") else { return Outcome::Dropped };
        let status = std::str::from_utf8(&raw[..split])
            .ok()
            .and_then(|h| h.split(' ').nth(1))
            .and_then(|c| c.parse::<u16>().ok())
            .unwrap_or(0);
        Outcome::Answer(status, raw[split + 4..].to_vec())
    };
    match tokio::time::timeout(timeout, run).await {
        Ok(o) => o,
        Err(_) => Outcome::Hang,
    }
}

/// Whether an error answer is in Ollama's shape: `{"error":"..."}` natively, the OpenAI
/// envelope on `/v1`. Chunked bodies are decoded loosely (the error bodies are small).
fn ollama_shaped(path: &str, body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    let json = text.find('{').map(|i| &text[i..]).unwrap_or("");
    let json = json.rfind('}').map(|j| &json[..=j]).unwrap_or("");
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else { return false };
    if path.starts_with("/v1") {
        v.pointer("/error/message").is_some_and(|m| m.is_string())
    } else {
        v.get("error").is_some_and(|m| m.is_string())
    }
}

async fn bad_phase(sim: &SimHandle, plan: &SoakPlan, rep: &mut SoakReport) {
    let addr = sim.addrs()[0];
    let started = Instant::now();
    let per_task = plan.bad_requests.div_ceil(plan.concurrency.max(1));
    let mut tasks = Vec::new();
    for t in 0..plan.concurrency.max(1) {
        let seed = plan.seed ^ (t as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let n = per_task.min(plan.bad_requests.saturating_sub(t * per_task));
        tasks.push(tokio::spawn(async move {
            let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
            let mut out = SoakReport::default();
            for _ in 0..n {
                let bad = bad_request(&mut rng, addr);
                // A body shorter than its Content-Length makes the server wait for the rest, as
                // any HTTP server does; the client gives up after 50 ms, which is not a hang.
                let truncated = declared_more(&bad.bytes);
                let timeout = if truncated { Duration::from_millis(50) } else { Duration::from_secs(10) };
                out.bad_requests += 1;
                match exchange(addr, &bad, timeout).await {
                    Outcome::Answer(status, body) => {
                        *out.statuses.entry(status).or_insert(0) += 1;
                        let text = String::from_utf8_lossy(&body);
                        if status == 500 && text.contains("sim-ollama: internal error") {
                            out.panics += 1;
                        } else if status >= 400 && status != 413 && !ollama_shaped(bad.path, &body) {
                            out.misshapen += 1;
                        }
                    }
                    Outcome::Dropped => out.dropped += 1,
                    Outcome::Hang if truncated => {}
                    Outcome::Hang => out.hangs += 1,
                }
            }
            out
        }));
    }
    for t in tasks {
        if let Ok(o) = t.await {
            rep.bad_requests += o.bad_requests;
            rep.panics += o.panics;
            rep.hangs += o.hangs;
            rep.dropped += o.dropped;
            rep.misshapen += o.misshapen;
            for (k, v) in o.statuses {
                *rep.statuses.entry(k).or_insert(0) += v;
            }
        }
    }
    rep.bad_per_s = rep.bad_requests as f64 / started.elapsed().as_secs_f64().max(1e-9);
}

/// Whether a request's Content-Length declares more body than it holds.
fn declared_more(bytes: &[u8]) -> bool {
    let Some(split) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else { return false };
    let head = String::from_utf8_lossy(&bytes[..split]);
    let declared = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(0);
    declared > bytes.len() - split - 4
}

/// `n` clients that each send a streaming request and go away after a random time (some
/// before the answer starts, most mid-stream).
async fn disconnect_round(addr: SocketAddr, n: usize, concurrency: usize, rng: &mut rand_pcg::Pcg64Mcg) {
    let mut tasks = Vec::new();
    for i in 0..n {
        let after = Duration::from_micros(rng.random_range(0..20_000));
        tasks.push(tokio::spawn(async move {
            let body = r#"{"model":"llama3.2:1b","prompt":"go","options":{"num_predict":500}}"#;
            let req = format!(
                "POST /api/generate HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if let Ok(mut s) = tokio::net::TcpStream::connect(addr).await {
                let _ = s.write_all(req.as_bytes()).await;
                let mut buf = [0u8; 512];
                let _ = tokio::time::timeout(after, async {
                    loop {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {}
                        }
                    }
                })
                .await;
                // Dropped here, mid-stream or before it began.
            }
        }));
        if i % concurrency == concurrency - 1 {
            for t in tasks.drain(..) {
                let _ = t.await;
            }
        }
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// Waits (up to 10 s) until nothing is left behind; returns what is: requests in flight, busy
/// slots, device streams, timer entries, tasks above `idle_tasks`.
async fn settled(sim: &SimHandle, idle_tasks: usize) -> [usize; 5] {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = sim.metrics();
        let busy: usize = m.instances.iter().map(|i| i.active + i.waiting_for_slot + i.pending).sum();
        let streams: usize = m.devices.iter().map(|d| d.streams).sum();
        let left = [m.requests_in_flight, busy, streams, m.timer_entries, m.tasks.saturating_sub(idle_tasks)];
        if left.iter().all(|n| *n == 0) || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn disconnect_phase(sim: &SimHandle, plan: &SoakPlan, rep: &mut SoakReport) {
    let addr = sim.addrs()[0];
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(plan.seed ^ 0xd15c);
    let c = plan.concurrency.max(1);
    // A first round of 100 warms the server up (the model loaded, its keep-alive timer and the
    // runtime's own bookkeeping in place); the task count after it is the baseline the full
    // round must come back to, so what is measured is what disconnects leave behind.
    disconnect_round(addr, 100, c, &mut rng).await;
    let _ = settled(sim, usize::MAX).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let idle_tasks = sim.metrics().tasks;
    disconnect_round(addr, plan.disconnects, c, &mut rng).await;
    rep.disconnects = plan.disconnects;
    rep.left_behind = settled(sim, idle_tasks).await;
}

async fn pending_phase(rep: &mut SoakReport) {
    // A separate simulator: max_queue 2 and a slow cold load that holds the scheduler.
    let Ok(sim) = SimBuilder::new().max_queue(2).time_scale(0.5).start() else { return };
    let addr = sim.addrs()[0];
    let req = move |model: &str| {
        let body = format!(r#"{{"model":"{model}","prompt":"hi","stream":false,"options":{{"num_predict":1}}}}"#);
        Bad {
            path: "/api/generate",
            bytes: format!(
                "POST /api/generate HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
            slow: false,
        }
    };
    let loading = tokio::spawn(async move { exchange(addr, &req("gemma3"), Duration::from_secs(30)).await });
    // Until the first request is loading (it holds the scheduler).
    while sim.trace().requests.first().is_none_or(|r| r.loads.is_empty()) && !loading.is_finished() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut waiting = Vec::new();
    for _ in 0..2 {
        waiting.push(tokio::spawn(async move { exchange(addr, &req("llama3.2:1b"), Duration::from_secs(30)).await }));
    }
    while sim.metrics().instances[0].pending < 2 && !loading.is_finished() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for _ in 0..50 {
        let t0 = Instant::now();
        if let Outcome::Answer(503, _) = exchange(addr, &req("tiny"), Duration::from_secs(5)).await {
            rep.busy_answers += 1;
            rep.busy_max_ms = rep.busy_max_ms.max(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    let _ = loading.await;
    for w in waiting {
        let _ = w.await;
    }
}

async fn soak_phase(sim: &SimHandle, plan: &SoakPlan, rep: &mut SoakReport) {
    let addr = sim.addrs()[0];
    let until = Instant::now() + Duration::try_from_secs_f64(plan.soak_s).unwrap_or(Duration::ZERO);
    let sampler = {
        let until = until;
        tokio::spawn(async move {
            let mut v = vec![rss_mib()];
            while Instant::now() < until {
                tokio::time::sleep(Duration::from_secs(1)).await;
                v.push(rss_mib());
            }
            v
        })
    };
    let mut tasks = Vec::new();
    for t in 0..plan.concurrency.max(1) {
        tasks.push(tokio::spawn(async move {
            let mut n = 0usize;
            while Instant::now() < until {
                let body = format!(r#"{{"model":"llama3.2:1b","prompt":"steady {t}","options":{{"num_predict":40,"temperature":{}}}}}"#, n % 7);
                let bytes = format!(
                    "POST /api/generate HTTP/1.1\r\nHost: {addr}\r\nX-Agent: soak-{t}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
                .into_bytes();
                if let Outcome::Answer(200, _) = exchange(addr, &Bad { path: "/api/generate", bytes, slow: false }, Duration::from_secs(30)).await {
                    n += 1;
                }
            }
            n
        }));
    }
    for t in tasks {
        rep.soak_requests += t.await.unwrap_or(0);
    }
    rep.rss_mib = sampler.await.unwrap_or_default();
    rep.soak_s = plan.soak_s;
    // Growth over the second half (the first has the allocator and the trace warming up).
    let n = rep.rss_mib.len();
    if n >= 4 && plan.soak_s > 0.0 {
        let (a, b) = (rep.rss_mib[n / 2], rep.rss_mib[n - 1]);
        let secs = (n - 1 - n / 2) as f64;
        rep.rss_growth_mib_per_hour = (b - a) / secs.max(1.0) * 3600.0;
    }
    rep.trace_mib = sim.metrics().trace_bytes as f64 / (1024.0 * 1024.0);
}

/// Runs the soak. Blocks; runs on its own runtime (called from async code, on a thread).
pub fn run(plan: &SoakPlan) -> Result<SoakReport, String> {
    let go = || -> Result<SoakReport, String> {
        let sim = SimBuilder::new()
            .num_parallel(8)
            .time_scale(0.002)
            .trace_budget_mb(plan.trace_budget_mb)
            .seed(plan.seed)
            .start()
            .map_err(|e| format!("the simulator did not start: {e}"))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the client runtime: {e}"))?;
        let mut rep = SoakReport::default();
        rt.block_on(async {
            bad_phase(&sim, plan, &mut rep).await;
            disconnect_phase(&sim, plan, &mut rep).await;
            pending_phase(&mut rep).await;
            soak_phase(&sim, plan, &mut rep).await;
        });
        Ok(rep)
    };
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| s.spawn(go).join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    } else {
        go()
    }
}
