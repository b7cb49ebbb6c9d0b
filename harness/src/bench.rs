//! `harness bench`: the simulator's token pacing under load, measured the way users measure
//! it: the client (this process) and each server in processes of their own, fresh for every
//! round, side by side with a bare writer under the same load.
//!
//! The servers:
//! - `sim-ollama` (the binary next to this one, or `--sim-bin`): one instance, a "metronome"
//!   model (one token every `interval`; no load, prompt or per-call overhead time), as many
//!   slots as streams, on a device that batches for free. Every stream's modelled schedule is
//!   therefore exactly: token `k` leaves `k x interval` after its request arrived.
//! - the bare writer (`harness bench-writer`, hidden): tokio and a TCP socket, no HTTP
//!   framework and no simulator. Per connection it reads the request, then writes a
//!   pre-formatted NDJSON line of the simulator's size as one HTTP chunk at each deadline of the
//!   same schedule (tokio's `sleep_until`), the response head with the first. It is what any
//!   server on this machine can do at best, with the same runtime and worker count (2).
//!
//! The load: `streams` requests of `tokens` tokens each, all connecting at once (the
//! `stream` task of each opens its connection and sends; nothing staggers them).
//!
//! The figures (median over rounds):
//! - client lateness of token `k`: its arrival at the client minus (the moment the client
//!   sent the request + `k x interval`), so a late first byte (accepting, parsing, headers)
//!   counts, as a user's stopwatch counts it; the first token's lateness separately, and the
//!   longest connect (a full accept queue drops SYNs, sent again a second later);
//! - server lateness: the server's own emission time minus deadline (`/sim/metrics` for the
//!   simulator; the writer's `/stats`);
//! - CPU per token: the server process's user + system time during the load (from
//!   `/proc/PID/stat`, in clock ticks of 10 ms) over the tokens delivered; context switches per
//!   token (all its threads, `/proc/PID/task/*/status`); peak RSS (`VmHWM`); and this client's
//!   own CPU, to show whether the client was the limit.
//!
//! One concept, the pacing benchmark, in about 660 lines: its load generator, the servers it
//! measures in their own processes and the figures it prints belong together.

use serde::Serialize;
use std::io::BufRead;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchPlan {
    /// Concurrent streams of each load, one load per entry.
    pub streams: Vec<usize>,
    /// Tokens per stream.
    pub tokens: u32,
    /// Modelled time between tokens.
    pub interval: Duration,
    /// Rounds per load and server (a fresh server process each).
    pub rounds: usize,
    /// The `sim-ollama` binary.
    pub sim_bin: PathBuf,
    /// A `harness` binary, run as `harness bench-writer`.
    pub writer_bin: PathBuf,
}

/// The server under measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Server {
    /// The simulator.
    SimOllama,
    /// The bare tokio writer.
    BareWriter,
}

impl std::fmt::Display for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Server::SimOllama => "sim-ollama",
            Server::BareWriter => "bare tokio writer",
        })
    }
}

/// One round: one fresh server, one load.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    /// Tokens the client received (every stream's, checked complete).
    pub tokens: u64,
    /// From the first connect to the last byte, seconds.
    pub wall_s: f64,
    /// Client-seen lateness over every token, ms (p50, p99, max).
    pub client_ms: [f64; 3],
    /// Client-seen lateness of each stream's first token, ms (p50, p99, max).
    pub first_ms: [f64; 3],
    /// The longest connect, ms (not in the lateness: it is measured from the request's send).
    pub connect_ms_max: f64,
    /// The server's own emission lateness, ms (p50, p99).
    pub server_ms: [f64; 2],
    /// Server CPU (user + system) per token, µs.
    pub cpu_us_per_token: f64,
    /// Server context switches (voluntary + involuntary, all threads) per token.
    pub switches_per_token: f64,
    /// Server peak resident memory, MB.
    pub rss_peak_mb: f64,
    /// This client's CPU during the load, in cores (CPU seconds / wall seconds).
    pub client_cores: f64,
}

/// The medians of one load on one server.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Concurrent streams.
    pub streams: usize,
    /// Which server.
    pub server: Server,
    /// Every round, in order.
    pub rounds: Vec<Round>,
    /// Per-figure medians over the rounds.
    pub median: Round,
}

/// The whole benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Tokens per stream.
    pub tokens: u32,
    /// Interval between tokens, ms.
    pub interval_ms: f64,
    /// Rounds per row.
    pub rounds: usize,
    /// One row per load and server.
    pub rows: Vec<Row>,
    /// Why the benchmark stopped before the end (a server that did not start, a stream that
    /// failed); the rows hold what was measured until then.
    pub error: Option<String>,
}

/// Runs the benchmark: every load, every round, the simulator and the bare writer in turn
/// (their order alternating by round, so drift in the machine's load falls on both). A plan it
/// cannot run is an error; a round that fails stops it, and the report keeps what was measured
/// with the reason in [`BenchReport::error`].
pub fn run(plan: &BenchPlan, progress: &mut dyn FnMut(&str)) -> Result<BenchReport, String> {
    if plan.streams.is_empty() || plan.streams.contains(&0) || plan.tokens == 0 || plan.rounds == 0 {
        return Err("harness bench: streams, tokens and rounds must be at least 1".into());
    }
    if plan.interval.is_zero() {
        return Err("harness bench: the interval must be above 0 (this measures pacing)".into());
    }
    for (bin, what) in [(&plan.sim_bin, "--sim-bin"), (&plan.writer_bin, "the harness binary")] {
        if !bin.is_file() {
            return Err(format!(
                "harness bench: {} does not exist ({what}; build it with `cargo build --release -p sim-ollama -p harness`)",
                bin.display()
            ));
        }
    }
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("harness bench: client runtime: {e}"))?;
    let mut rows = Vec::new();
    let mut error = None;
    'loads: for &streams in &plan.streams {
        let mut per: Vec<(Server, Vec<Round>)> =
            vec![(Server::SimOllama, Vec::new()), (Server::BareWriter, Vec::new())];
        for r in 0..plan.rounds {
            let order: [usize; 2] = if r % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                let server = per[i].0;
                progress(&format!("{streams} streams, round {}/{}: {server}", r + 1, plan.rounds));
                match one_round(plan, server, streams, &client) {
                    Ok(round) => per[i].1.push(round),
                    Err(e) => error = Some(e),
                }
                if error.is_some() {
                    // What was measured stays in the report, beside the reason it stopped.
                    rows.extend(row_of(streams, per));
                    break 'loads;
                }
            }
        }
        rows.extend(row_of(streams, per));
    }
    Ok(BenchReport {
        tokens: plan.tokens,
        interval_ms: plan.interval.as_secs_f64() * 1e3,
        rounds: plan.rounds,
        rows,
        error,
    })
}

/// The rows of one load: a server with no round measured has none.
fn row_of(streams: usize, per: Vec<(Server, Vec<Round>)>) -> impl Iterator<Item = Row> {
    per.into_iter().filter(|(_, rounds)| !rounds.is_empty()).map(move |(server, rounds)| Row {
        streams,
        server,
        median: median_round(&rounds),
        rounds,
    })
}

fn one_round(plan: &BenchPlan, server: Server, streams: usize, rt: &tokio::runtime::Runtime) -> Result<Round, String> {
    let proc = ServerProcess::start(plan, server, streams)?;
    let addr = proc.addr;
    let body = format!(r#"{{"model":"metronome","prompt":"tick","options":{{"num_predict":{}}}}}"#, plan.tokens);
    if server == Server::SimOllama {
        // Load the model first, so the load measures pacing, not the model's start.
        let (status, text) = rt.block_on(exchange(addr, "POST", "/api/generate", r#"{"model":"metronome"}"#))?;
        if !status.contains(" 200 ") {
            return Err(format!("harness bench: loading the model answered {status}: {text}"));
        }
    }
    let request: Arc<[u8]> = format!(
        "POST /api/generate HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
    .into();
    let cpu0 = Usage::of(proc.pid())?;
    let own0 = Usage::of(std::process::id())?;
    let t0 = Instant::now();
    let results = rt.block_on(async {
        let tasks: Vec<_> =
            (0..streams).map(|_| tokio::spawn(stream(addr, Arc::clone(&request), plan.tokens as usize))).collect();
        let mut out = Vec::with_capacity(streams);
        for t in tasks {
            out.push(t.await.map_err(|e| format!("harness bench: a client task failed: {e}"))?);
        }
        Ok::<_, String>(out)
    })?;
    let wall = t0.elapsed();
    let cpu1 = Usage::of(proc.pid())?;
    let own1 = Usage::of(std::process::id())?;
    let (mut all, mut first, mut connect) = (Vec::new(), Vec::new(), Vec::new());
    for (i, r) in results.into_iter().enumerate() {
        let Sent { connect: c, sent, arrivals } =
            r.map_err(|e| format!("harness bench: stream {i} against {server}: {e}"))?;
        connect.push(c.as_secs_f64() * 1e3);
        if arrivals.len() != plan.tokens as usize + 1 {
            return Err(format!(
                "harness bench: stream {i} against {server} received {} lines, expected {} tokens and the final line",
                arrivals.len(),
                plan.tokens
            ));
        }
        for (k, at) in arrivals.iter().take(plan.tokens as usize).enumerate() {
            let due = sent + plan.interval * (k as u32 + 1);
            let late_ms = signed_ms(*at, due);
            if k == 0 {
                first.push(late_ms);
            }
            all.push(late_ms);
        }
    }
    let server_ms = rt.block_on(server_lateness(addr, server))?;
    let tokens = all.len() as u64;
    let rss_peak_mb = status_kib(proc.pid(), "VmHWM")? as f64 / 1024.0;
    Ok(Round {
        tokens,
        wall_s: wall.as_secs_f64(),
        client_ms: [percentile(&mut all, 0.5), percentile(&mut all, 0.99), percentile(&mut all, 1.0)],
        first_ms: [percentile(&mut first, 0.5), percentile(&mut first, 0.99), percentile(&mut first, 1.0)],
        connect_ms_max: percentile(&mut connect, 1.0),
        server_ms,
        cpu_us_per_token: (cpu1.cpu_s - cpu0.cpu_s) * 1e6 / tokens as f64,
        switches_per_token: (cpu1.switches.saturating_sub(cpu0.switches)) as f64 / tokens as f64,
        rss_peak_mb,
        client_cores: (own1.cpu_s - own0.cpu_s) / wall.as_secs_f64(),
    })
}

/// `at - due` in ms, negative when early.
fn signed_ms(at: Instant, due: Instant) -> f64 {
    if at >= due { (at - due).as_secs_f64() * 1e3 } else { -((due - at).as_secs_f64() * 1e3) }
}

/// One client stream: connects, sends, and stamps every NDJSON line (`}\n` ends a line and
/// never occurs inside one) with the time of the read that completed it. Returns the moment
/// the request was written and the stamps.
async fn stream(addr: SocketAddr, request: Arc<[u8]>, tokens: usize) -> Result<Sent, String> {
    let connecting = Instant::now();
    let mut s = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).map_err(|e| format!("nodelay: {e}"))?;
    let sent = Instant::now();
    s.write_all(&request).await.map_err(|e| format!("send: {e}"))?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut arrivals = Vec::with_capacity(tokens + 1);
    let mut head = Vec::new();
    let mut in_body = false;
    let mut prev = 0u8;
    loop {
        let n = s.read(&mut buf).await.map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            break;
        }
        let now = Instant::now();
        let mut data = &buf[..n];
        if !in_body {
            head.extend_from_slice(data);
            let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
            if !head.starts_with(b"HTTP/1.1 200 ") {
                let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
                return Err(format!("answered {}", String::from_utf8_lossy(line)));
            }
            in_body = true;
            let consumed = n - (head.len() - (end + 4));
            data = &buf[consumed..n];
        }
        for &b in data {
            if b == b'\n' && prev == b'}' {
                arrivals.push(now);
            }
            prev = b;
        }
    }
    Ok(Sent { connect: sent - connecting, sent, arrivals })
}

/// What one client stream saw.
struct Sent {
    /// How long connecting took (a full accept queue shows here: a dropped SYN is sent again
    /// after a second).
    connect: Duration,
    /// When the request was written.
    sent: Instant,
    /// When each line arrived.
    arrivals: Vec<Instant>,
}

/// One request on its own connection; returns the status line and the body.
async fn exchange(addr: SocketAddr, method: &str, path: &str, body: &str) -> Result<(String, String), String> {
    let io = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await?;
        Ok::<_, std::io::Error>(out)
    };
    let out = tokio::time::timeout(Duration::from_secs(60), io)
        .await
        .map_err(|_| format!("harness bench: {method} {path} got no answer in 60 s"))?
        .map_err(|e| format!("harness bench: {method} {path}: {e}"))?;
    let text = String::from_utf8_lossy(&out);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Ok((head.lines().next().unwrap_or_default().to_string(), body.to_string()))
}

/// The server's own emission lateness, ms (p50, p99).
async fn server_lateness(addr: SocketAddr, server: Server) -> Result<[f64; 2], String> {
    let path = match server {
        Server::SimOllama => "/sim/metrics",
        Server::BareWriter => "/stats",
    };
    let (status, body) = exchange(addr, "GET", path, "").await?;
    let v: serde_json::Value = serde_json::from_str(&body)
        .map_err(|e| format!("harness bench: {path} answered {status} with no JSON ({e}): {body}"))?;
    let l = if server == Server::SimOllama { &v["lateness"] } else { &v };
    match (l["p50_us"].as_f64(), l["p99_us"].as_f64()) {
        (Some(p50), Some(p99)) => Ok([p50 / 1e3, p99 / 1e3]),
        _ => Err(format!("harness bench: {path} has no p50_us/p99_us: {body}")),
    }
}

/// A server process, killed on drop.
struct ServerProcess {
    child: Child,
    addr: SocketAddr,
    _config: Option<tempfile::NamedTempFile>,
}

impl ServerProcess {
    fn start(plan: &BenchPlan, server: Server, streams: usize) -> Result<ServerProcess, String> {
        let (mut cmd, config) = match server {
            Server::SimOllama => {
                let mut f = tempfile::NamedTempFile::new().map_err(|e| format!("harness bench: temp file: {e}"))?;
                std::io::Write::write_all(&mut f, sim_config(streams, plan.interval)?.as_bytes())
                    .map_err(|e| format!("harness bench: temp file: {e}"))?;
                let mut c = Command::new(&plan.sim_bin);
                c.args(["--port", "0", "--config"]).arg(f.path());
                (c, Some(f))
            }
            Server::BareWriter => {
                let mut c = Command::new(&plan.writer_bin);
                c.args(["bench-writer", "--tokens", &plan.tokens.to_string(), "--interval-us"])
                    .arg(plan.interval.as_micros().to_string());
                (c, None)
            }
        };
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("harness bench: cannot start {server}: {e}"))?;
        let out = child.stdout.take().ok_or("harness bench: no stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut proc = ServerProcess { child, addr: SocketAddr::from(([127, 0, 0, 1], 0)), _config: config };
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        let url = line.trim().rsplit_once("listening on http://").map(|(_, a)| a.to_string()).unwrap_or_default();
        proc.addr =
            url.parse().map_err(|_| format!("harness bench: {server} did not say where it listens: {line:?}"))?;
        Ok(proc)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The simulator's configuration: the `ideal` preset (one instance on a device that batches for free: a stream
/// keeps its solo speed however many run), a model whose only time is its tokens
/// ([`sim_ollama::advanced::config::ModelSpec::paced`]), a slot per stream.
fn sim_config(streams: usize, interval: Duration) -> Result<String, String> {
    let mut cfg = sim_ollama::advanced::config::preset("ideal").map_err(|e| format!("harness bench: {e}"))?;
    cfg.server.num_parallel = Some(streams);
    cfg.server.max_queue = Some(streams);
    cfg.models.push(sim_ollama::advanced::config::ModelSpec::paced(
        "metronome:latest",
        1.0 / interval.as_secs_f64(),
        1_000_000,
    ));
    toml::to_string(&cfg).map_err(|e| format!("harness bench: the configuration does not serialize: {e}"))
}

/// CPU time and context switches of a process so far.
struct Usage {
    cpu_s: f64,
    switches: u64,
}

impl Usage {
    fn of(pid: u32) -> Result<Usage, String> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_err(|e| format!("harness bench: /proc/{pid}/stat ({e}): the benchmark needs Linux"))?;
        // Fields after the command name (which may hold spaces): state is the 3rd field,
        // utime the 14th, stime the 15th, in clock ticks (USER_HZ, 100 on Linux).
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
        let f: Vec<&str> = rest.split_whitespace().collect();
        let tick = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).ok_or("harness bench: unreadable stat");
        let cpu_s = (tick(11)? + tick(12)?) as f64 / 100.0;
        let mut switches = 0;
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|e| format!("harness bench: tasks: {e}"))?;
        for t in tasks.flatten() {
            let Ok(s) = std::fs::read_to_string(t.path().join("status")) else { continue };
            for l in s.lines() {
                if let Some(v) =
                    l.strip_prefix("voluntary_ctxt_switches:").or(l.strip_prefix("nonvoluntary_ctxt_switches:"))
                {
                    switches += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
        Ok(Usage { cpu_s, switches })
    }
}

/// A `kB` field of `/proc/PID/status`.
fn status_kib(pid: u32, key: &str) -> Result<u64, String> {
    let s =
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| format!("harness bench: status: {e}"))?;
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':')?.trim().strip_suffix("kB")?.trim().parse().ok())
        .ok_or_else(|| format!("harness bench: no {key} in /proc/{pid}/status"))
}

/// The `p`-quantile (nearest rank) of `v`; NaN when empty.
fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { f64::NAN } else { v[((v.len() - 1) as f64 * p).round() as usize] }
}

fn median_of(rounds: &[Round], f: impl Fn(&Round) -> f64) -> f64 {
    let mut v: Vec<f64> = rounds.iter().map(f).collect();
    percentile(&mut v, 0.5)
}

fn median_round(rounds: &[Round]) -> Round {
    let m = |f: &dyn Fn(&Round) -> f64| median_of(rounds, f);
    Round {
        tokens: m(&|r| r.tokens as f64) as u64,
        wall_s: m(&|r| r.wall_s),
        client_ms: [m(&|r| r.client_ms[0]), m(&|r| r.client_ms[1]), m(&|r| r.client_ms[2])],
        first_ms: [m(&|r| r.first_ms[0]), m(&|r| r.first_ms[1]), m(&|r| r.first_ms[2])],
        connect_ms_max: m(&|r| r.connect_ms_max),
        server_ms: [m(&|r| r.server_ms[0]), m(&|r| r.server_ms[1])],
        cpu_us_per_token: m(&|r| r.cpu_us_per_token),
        switches_per_token: m(&|r| r.switches_per_token),
        rss_peak_mb: m(&|r| r.rss_peak_mb),
        client_cores: m(&|r| r.client_cores),
    }
}

/// The targets of issue 15, checked against a report: (what, measured, met).
pub fn targets(r: &BenchReport) -> Vec<(String, bool)> {
    let row = |streams: usize, server: Server| r.rows.iter().find(|x| x.streams == streams && x.server == server);
    let mut out = Vec::new();
    if let Some(s) = row(100, Server::SimOllama) {
        let v = s.median.cpu_us_per_token;
        out.push((format!("CPU per paced token at 100 streams: {v:.1} µs (target at most 20)"), v <= 20.0));
    }
    if let (Some(s), Some(b)) = (row(1000, Server::SimOllama), row(1000, Server::BareWriter)) {
        let v = s.median.server_ms[1];
        out.push((
            format!("server-side emission lateness p99 at 1,000 streams: {v:.2} ms (target at most 5)"),
            v <= 5.0,
        ));
        let (c, w) = (s.median.client_ms[1], b.median.client_ms[1]);
        let ratio = c / w.max(1e-3);
        out.push((
            format!(
                "client-seen lateness p99 at 1,000 streams: {c:.2} ms, {ratio:.2}x the bare writer's {w:.2} ms (target at most 2x)"
            ),
            ratio <= 2.0,
        ));
    }
    out
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "harness bench: {} tokens per stream at {} ms, all streams connecting at once; client in this process, each server in its own, fresh per round; medians of {} rounds",
            self.tokens, self.interval_ms, self.rounds
        )?;
        writeln!(f)?;
        writeln!(
            f,
            "| streams | server | client lateness p50 / p99 / max | first token p50 / p99 | longest connect | server lateness p50 / p99 | CPU per token | switches per token | peak RSS | client CPU |"
        )?;
        writeln!(f, "|---|---|---|---|---|---|---|---|---|---|")?;
        for r in &self.rows {
            let m = &r.median;
            writeln!(
                f,
                "| {} | {} | {:.2} / {:.2} / {:.1} ms | {:.2} / {:.2} ms | {:.1} ms | {:.2} / {:.2} ms | {:.1} µs | {:.2} | {:.0} MB | {:.2} cores |",
                r.streams,
                r.server,
                m.client_ms[0],
                m.client_ms[1],
                m.client_ms[2],
                m.first_ms[0],
                m.first_ms[1],
                m.connect_ms_max,
                m.server_ms[0],
                m.server_ms[1],
                m.cpu_us_per_token,
                m.switches_per_token,
                m.rss_peak_mb,
                m.client_cores
            )?;
        }
        if let Some(e) = &self.error {
            writeln!(f, "\nSTOPPED before the end: {e}")?;
        }
        let t = targets(self);
        if !t.is_empty() {
            writeln!(f)?;
            for (what, met) in t {
                writeln!(f, "{}: {what}", if met { "met" } else { "MISSED" })?;
            }
        }
        Ok(())
    }
}

/// The bare writer (`harness bench-writer`): serves until killed. Prints
/// `harness bench-writer listening on http://ADDR` when ready.
pub fn serve_bare_writer(tokens: u32, interval: Duration) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        // The simulator's listener (Go's backlog), so connection bursts meet the same queue.
        let l =
            tokio::net::TcpListener::from_std(sim_ollama::advanced::listen(SocketAddr::from(([127, 0, 0, 1], 0)))?)?;
        println!("harness bench-writer listening on http://{}", l.local_addr()?);
        let late: Arc<Mutex<Vec<u32>>> = Arc::default();
        loop {
            let (s, _) = l.accept().await?;
            tokio::spawn(bare_connection(s, tokens, interval, Arc::clone(&late)));
        }
    })
}

/// A line of the simulator's size: `/api/generate`'s token line for the metronome model.
const BARE_LINE: &[u8] =
    b"{\"model\":\"metronome\",\"created_at\":\"2026-11-22T12:00:00.123456789Z\",\"response\":\" tick\",\"done\":false}\n";
const BARE_DONE: &[u8] = b"{\"model\":\"metronome\",\"created_at\":\"2026-11-22T12:00:00.123456789Z\",\"response\":\"\",\"done\":true,\"done_reason\":\"length\"}\n";

async fn bare_connection(mut s: tokio::net::TcpStream, tokens: u32, interval: Duration, late: Arc<Mutex<Vec<u32>>>) {
    s.set_nodelay(true).ok();
    // Read the whole request (head and body), so closing never resets unread bytes.
    let mut req = Vec::new();
    let mut buf = [0u8; 4096];
    let body_start = loop {
        let Ok(n) = s.read(&mut buf).await else { return };
        if n == 0 {
            return;
        }
        req.extend_from_slice(&buf[..n]);
        if let Some(p) = req.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&req[..body_start]).to_ascii_lowercase();
    let length: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:").and_then(|v| v.trim().parse().ok())).unwrap_or(0);
    while req.len() < body_start + length {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    if head.starts_with("get /stats") {
        let mut v = late.lock().unwrap_or_else(|e| e.into_inner()).clone();
        v.sort_unstable();
        let q = |p: f64| if v.is_empty() { 0 } else { v[((v.len() - 1) as f64 * p).round() as usize] };
        let body = format!("{{\"count\":{},\"p50_us\":{},\"p99_us\":{}}}", v.len(), q(0.5), q(0.99));
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = s.write_all(resp.as_bytes()).await;
        return;
    }
    let start = Instant::now();
    let chunk = |line: &[u8]| {
        let mut c = format!("{:x}\r\n", line.len()).into_bytes();
        c.extend_from_slice(line);
        c.extend_from_slice(b"\r\n");
        c
    };
    let (token, mut first) = (chunk(BARE_LINE), true);
    let mut mine = Vec::with_capacity(tokens as usize);
    for k in 1..=tokens {
        let due = start + interval * k;
        tokio::time::sleep_until(due.into()).await;
        mine.push(due.elapsed().as_micros().min(u32::MAX as u128) as u32);
        let sent = if first {
            first = false;
            let mut b =
                b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            b.extend_from_slice(&token);
            s.write_all(&b).await
        } else {
            s.write_all(&token).await
        };
        if sent.is_err() {
            return;
        }
    }
    let mut end = chunk(BARE_DONE);
    end.extend_from_slice(b"0\r\n\r\n");
    let _ = s.write_all(&end).await;
    let _ = s.shutdown().await;
    late.lock().unwrap_or_else(|e| e.into_inner()).extend(mine);
}
