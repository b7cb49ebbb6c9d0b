//! Starting simulators: [`SimBuilder`] builds a [`SimHandle`] that runs N instances on its
//! own threads and its own tokio runtime, never the caller's, so tests on any runtime (or
//! none) can use it, and the simulator can be neither starved nor helped by the client being
//! measured. Dropping the handle shuts everything down.
//!
//! One concept, a simulator's life (built, started, served, read, stopped), in about 650
//! lines, most of them the builder's setters and the handle's readers, a few documented lines
//! each, and the errors of that life.

use crate::clock::Clock;
use crate::config::{ConfigError, ConfigFile, DeviceSpec, ModelSpec, RawConfig, SimConfig};
use crate::device::Device;
use crate::keepalive::KeepAlive;
use crate::metrics::{Lateness, LatenessSummary};
use crate::routes::{self, AppState};
use crate::scheduler::Instance;
use crate::shared::Shared;
use crate::store::Store;
use crate::trace::{Trace, TraceSnapshot};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest [`SimHandle::judged`] waits for requests still in flight before it judges.
pub const JUDGE_WAIT: Duration = Duration::from_secs(10);

/// What can go wrong with a simulator: starting it, configuring it, waiting for it. One type
/// for every fallible call of [`SimBuilder`] and [`SimHandle`], so a test's `?` needs no
/// conversions.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is invalid (a file, a preset name, a value out of range).
    Config(ConfigError),
    /// A port could not be bound.
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The runtime could not be built.
    Runtime(std::io::Error),
    /// A model asked for with [`SimBuilder::preload`] could not be loaded.
    Preload {
        /// The model.
        model: String,
        /// Why, naming the models the simulator has when it does not have this one.
        message: String,
    },
    /// [`SimHandle::wait_idle`] gave up: requests were still in flight.
    NotIdle {
        /// Requests still in flight.
        in_flight: usize,
        /// How long it waited.
        waited: Duration,
    },
    /// Fault or script rules were refused ([`SimHandle::set_faults`], [`SimHandle::set_script`]);
    /// the text says which rule and why, as the HTTP API's 400 does.
    Rules(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Config(e) => write!(f, "{e}"),
            Error::Bind { addr, source } => write!(f, "sim-ollama: cannot listen on {addr}: {source}"),
            Error::Runtime(e) => write!(f, "sim-ollama: cannot start the runtime: {e}"),
            Error::Preload { model, message } => write!(f, "sim-ollama: cannot preload {model:?}: {message}"),
            Error::NotIdle { in_flight, waited } => {
                write!(f, "sim-ollama: {in_flight} request(s) still in flight after {waited:?}")
            }
            // The rule text names its source already ("fault: ...", "script rule: ...").
            Error::Rules(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Config(e) => Some(e),
            Error::Bind { source, .. } | Error::Runtime(source) => Some(source),
            Error::Preload { .. } | Error::NotIdle { .. } | Error::Rules(_) => None,
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e)
    }
}

/// Builds a simulator. Every setting has a default (see each method); `start` checks them.
///
/// ```
/// let sim = sim_ollama::SimBuilder::new().instances(2).seed(7).time_scale(0.01).start().unwrap();
/// assert_eq!(sim.urls().len(), 2);
/// assert!(sim.url().starts_with("http://127.0.0.1:"));
/// ```
#[derive(Debug, Clone)]
pub struct SimBuilder {
    raw: RawConfig,
    host: IpAddr,
    port: u16,
    preload: Vec<String>,
    client_pid: Option<u32>,
}

impl Default for SimBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl SimBuilder {
    /// One instance on 127.0.0.1, an ephemeral port, seed 0, time scale 1.0, the default
    /// catalogue.
    pub fn new() -> Self {
        SimBuilder {
            raw: RawConfig::default(),
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            preload: Vec::new(),
            client_pid: None,
        }
    }

    /// A simulator set up for judging a program: the `ideal` deployment (64 slots that batch
    /// perfectly, so any serialization is the program's), time scale 0.1 (a 10 s call takes
    /// 1 s), and `model` loaded before it listens, so a cold load never lands in the judged
    /// window. Chain more (`.preload(other)`, `.time_scale(..)`) before `start`.
    pub fn judging(model: impl Into<String>) -> Self {
        SimBuilder::new()
            .preset("ideal")
            .unwrap_or_else(|e| unreachable!("the ideal preset is built in: {e}"))
            .time_scale(0.1)
            .preload(model)
    }

    /// Loads `model` on every instance before [`start`](Self::start) returns (kept loaded:
    /// `keep_alive` -1), then forgets the trace, so a program judged afterwards never has the
    /// cold load in its window. A model the simulator does not have fails `start` with the
    /// models it has. Call it once per model.
    pub fn preload(mut self, model: impl Into<String>) -> Self {
        self.preload.push(model.into());
        self
    }

    /// Reads a TOML configuration (`[server]`, `[[devices]]`, `[[instances]]`, `[[models]]`).
    /// Builder settings made afterwards, or before, take precedence over the file.
    pub fn config_file(mut self, path: impl AsRef<Path>) -> Result<Self, Error> {
        self.raw.file = ConfigFile::from_path(path.as_ref())?;
        Ok(self)
    }

    /// Uses a deployment preset from `sim-ollama/fixtures/presets/`: `ideal` (64 slots that batch
    /// perfectly: any serialization is the program's), `single-1slot`, `single-1slot-nocache`,
    /// `single-4slots`, `dual-one-device`, `dual-two-devices`.
    pub fn preset(mut self, name: &str) -> Result<Self, Error> {
        self.raw.file = crate::config::preset(name)?;
        Ok(self)
    }

    /// Uses an already-parsed configuration.
    pub fn config(mut self, file: ConfigFile) -> Self {
        self.raw.file = file;
        self
    }

    /// Number of instances (default: the config file's, else 1).
    pub fn instances(mut self, n: usize) -> Self {
        self.raw.instances = Some(n);
        self
    }

    /// Master seed (default 0).
    pub fn seed(mut self, seed: u64) -> Self {
        self.raw.seed = Some(seed);
        self
    }

    /// Multiplies every modelled duration (default 1.0; 0.01 runs a 10 s call in 100 ms).
    pub fn time_scale(mut self, f: f64) -> Self {
        self.raw.time_scale = Some(f);
        self
    }

    /// Deterministic `created_at` and duration fields: a fixed epoch and modelled values.
    pub fn frozen_clock(mut self, on: bool) -> Self {
        self.raw.frozen_clock = Some(on);
        self
    }

    /// `OLLAMA_NUM_PARALLEL` of every instance (default 1).
    pub fn num_parallel(mut self, n: usize) -> Self {
        self.raw.num_parallel = Some(n);
        self
    }

    /// `OLLAMA_MAX_QUEUE` of every instance (default 512).
    pub fn max_queue(mut self, n: usize) -> Self {
        self.raw.max_queue = Some(n);
        self
    }

    /// `OLLAMA_MAX_LOADED_MODELS` of every instance (default 0 = automatic, 3).
    pub fn max_loaded_models(mut self, n: usize) -> Self {
        self.raw.max_loaded_models = Some(n);
        self
    }

    /// llama-server's host prompt cache per runner, MiB (default 8192, as llama-server's own
    /// default; 0 turns it off): see [`crate::config::ServerSection::cache_ram_mib`].
    pub fn cache_ram_mib(mut self, mib: u64) -> Self {
        self.raw.cache_ram_mib = Some(mib);
        self
    }

    /// `OLLAMA_KEEP_ALIVE` (default 5 minutes).
    pub fn keep_alive(mut self, k: KeepAlive) -> Self {
        self.raw.keep_alive = Some(k);
        self
    }

    /// A catalogue model that answers for every name the catalogue lacks: a program asking for
    /// `mistral:7b` gets a copy of this model under that name (installed as a pull would,
    /// its own runner, answering chat and embeddings alike) instead of `model not found`.
    /// [`SimBuilder::start`] refuses a name the catalogue does not have.
    pub fn stand_in(mut self, model: impl Into<String>) -> Self {
        self.raw.stand_in = Some(model.into());
        self
    }

    /// Memory the trace may hold for finished requests, in MiB (default 256). The oldest
    /// finished requests are dropped past it (counted in the trace's `dropped`); 0 keeps none,
    /// for a simulator left running for days whose trace nobody reads.
    pub fn trace_budget_mb(mut self, mb: u64) -> Self {
        self.raw.trace_budget_mb = Some(mb);
        self
    }

    /// Request body limit in bytes (default 32 MiB); larger bodies get 413.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.raw.body_limit = Some(bytes);
        self
    }

    /// Adds a model (replacing a catalogue entry of the same name).
    pub fn model(mut self, m: ModelSpec) -> Self {
        self.raw.extra_models.push(m);
        self
    }

    /// Adds a scripted turn (see [`advanced::script`](crate::advanced::script)).
    pub fn script(mut self, rule: crate::script::ScriptRule) -> Self {
        self.raw.script.push(rule);
        self
    }

    /// Makes the server noisy on purpose: per-request jitter, hiccups and contention between
    /// devices (see [`advanced::noise`](crate::advanced::noise)), seeded by the master seed. Replaces the file's `[noise]`.
    pub fn noise(mut self, noise: crate::noise::NoiseSpec) -> Self {
        self.raw.noise = Some(noise);
        self
    }

    /// Adds a fault rule (see [`FaultRule`](crate::faults::FaultRule)).
    pub fn fault(mut self, rule: crate::faults::FaultRule) -> Self {
        self.raw.faults.push(rule);
        self
    }

    /// Worker threads of the simulator's runtime (default 2).
    pub fn worker_threads(mut self, n: usize) -> Self {
        self.raw.worker_threads = Some(n);
        self
    }

    /// Address to bind (default 127.0.0.1).
    pub fn host(mut self, ip: IpAddr) -> Self {
        self.host = ip;
        self
    }

    /// The process whose agents this simulator judges (the Python package's test process, a
    /// program started beside it): its process tree's time on a CPU and waits for one are
    /// sampled while the simulator runs, and `GET /sim/judge` gives them to the judge for the
    /// run judged ([`crate::JudgeOptions::client_cpu_time`], [`crate::JudgeOptions::client_cpu_wait`]),
    /// as `harness exec` does for its program. Ignored where the kernel keeps no such figures.
    pub fn client_pid(mut self, pid: u32) -> Self {
        self.client_pid = Some(pid);
        self
    }

    /// First port (default 0: every instance gets an ephemeral port). Instance `i` binds
    /// `port + i` when non-zero.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Binds every instance and starts serving on the simulator's own runtime.
    pub fn start(self) -> Result<SimHandle, Error> {
        let cfg = self.raw.resolve()?;
        let mut listeners = Vec::with_capacity(cfg.instances.len());
        for i in 0..cfg.instances.len() {
            let port = if self.port == 0 { 0 } else { self.port.saturating_add(i as u16) };
            let addr = SocketAddr::new(self.host, port);
            let l = listen(addr).map_err(|source| Error::Bind { addr, source })?;
            listeners.push(l);
        }
        let addrs: Vec<SocketAddr> = listeners.iter().filter_map(|l| l.local_addr().ok()).collect();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.worker_threads)
            .thread_name("sim-ollama")
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        let timer = crate::timer::Timer::start_on(rt.handle()).map_err(Error::Runtime)?;
        let shared = build_shared(cfg, rt.handle().clone(), timer, self.client_pid.and_then(crate::cpu::watch));
        for (inst, a) in shared.instances.iter().zip(&addrs) {
            inst.port.store(a.port(), std::sync::atomic::Ordering::Relaxed);
        }
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let serve_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("sim-ollama-main".into())
            .spawn(move || {
                rt.block_on(serve(serve_shared, listeners, rx));
                rt.shutdown_timeout(Duration::from_millis(200));
            })
            .map_err(Error::Runtime)?;
        let urls = addrs.iter().map(|a| format!("http://{a}")).collect();
        let handle = SimHandle { urls, addrs, shared, shutdown: Some(tx), thread: Some(thread) };
        for i in &handle.shared.instances {
            i.set_instant_loads(!self.preload.is_empty());
        }
        for model in &self.preload {
            for addr in &handle.addrs {
                preload(*addr, model).map_err(|message| Error::Preload {
                    model: model.clone(),
                    message: match message {
                        Some(m) => m,
                        None => format!(
                            "the simulator has no such model; it has {}",
                            handle.shared.cfg.models.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ")
                        ),
                    },
                })?;
            }
        }
        if !self.preload.is_empty() {
            for i in &handle.shared.instances {
                i.set_instant_loads(false);
            }
            handle.clear_trace();
        }
        Ok(handle)
    }
}

/// Loads `model` on the instance at `addr` with Ollama's load request kept loaded forever: an
/// empty generate request, or for a model that does not generate (an embedding model) an embed
/// request with no input, which loads it the same way (`EmbedHandler`, server/routes.go: the
/// runner is scheduled before the empty input is answered). Over a plain blocking socket
/// (`start` may run on any thread, inside an async runtime or not, and the server runs on its
/// own). `Err(None)`: the model is not there (404); `Err(Some(why))`: anything else.
fn preload(addr: SocketAddr, model: &str) -> Result<(), Option<String>> {
    let generate = serde_json::json!({ "model": model, "keep_alive": -1 });
    match post_blocking(addr, "/api/generate", &generate.to_string())? {
        (200, _) => Ok(()),
        (404, _) => Err(None),
        (400, last) if last.contains("does not support generate") => {
            let embed = serde_json::json!({ "model": model, "input": [], "keep_alive": -1 });
            match post_blocking(addr, "/api/embed", &embed.to_string())? {
                (200, _) => Ok(()),
                (_, last) => Err(Some(format!("{addr} answered {last}"))),
            }
        }
        (_, last) => Err(Some(format!("{addr} answered {last}"))),
    }
}

/// POSTs `body` to `path` and reads the whole answer: its status and last line.
fn post_blocking(addr: SocketAddr, path: &str, body: &str) -> Result<(u16, String), Option<String>> {
    use std::io::{Read, Write};
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let io = |e: std::io::Error| Some(format!("{addr}: {e}"));
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(io)?;
    // A load takes its modelled time at the run's time scale; a minute covers any sane one.
    stream.set_read_timeout(Some(Duration::from_secs(60))).map_err(io)?;
    stream.write_all(request.as_bytes()).map_err(io)?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).map_err(io)?;
    let status = answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, answer.lines().last().unwrap_or_default().to_string()))
}

fn build_shared(
    cfg: SimConfig,
    rt: tokio::runtime::Handle,
    timer: Arc<crate::timer::Timer>,
    client: Option<crate::cpu::TreeWatch>,
) -> Arc<Shared> {
    let clock = Clock::new(cfg.frozen_clock);
    let origin = Instant::now();
    let devices: Vec<Arc<Device>> =
        cfg.devices.iter().enumerate().map(|(i, d)| Arc::new(Device::new(i, d.clone()))).collect();
    let registry: Arc<Vec<Arc<ModelSpec>>> = Arc::new(cfg.models.iter().cloned().map(Arc::new).collect());
    let base_time = crate::clock::frozen_epoch();
    let stand_in = cfg.stand_in.as_ref().and_then(|n| registry.iter().find(|m| &m.name == n).cloned());
    let instances = cfg
        .instances
        .iter()
        .enumerate()
        .map(|(i, ri)| {
            Arc::new(Instance::new(
                i,
                ri.clone(),
                Arc::clone(&devices[ri.device]),
                Store::new(Arc::clone(&registry), base_time, stand_in.clone(), clock),
                cfg.seed,
                cfg.time_scale,
                cfg.keep_alive,
                clock,
                rt.clone(),
            ))
        })
        .collect();
    let rt = rt.clone();
    let faults = crate::faults::Faults::new(cfg.seed, cfg.faults.clone());
    let script = crate::script::Script::new(cfg.script.clone());
    let (time_scale, trace_budget) = (cfg.time_scale, cfg.trace_budget);
    let sharing = cfg.devices.iter().map(DeviceSpec::sharing).collect();
    Arc::new(Shared {
        cfg,
        clock,
        origin,
        trace: Arc::new(Trace::new(origin, time_scale, trace_budget, sharing)),
        lateness: Arc::new(Lateness::default()),
        timer,
        faults,
        script,
        instances,
        rt,
        mark: std::sync::atomic::AtomicU64::new(0),
        probe: crate::probe::Probe::default(),
        probe_mark: std::sync::atomic::AtomicU64::new(0),
        confirm: std::sync::Mutex::new(None),
        contexts: Arc::default(),
        client,
    })
}

/// A non-blocking listening socket on `addr` with the accept backlog Go gives the real server.
/// Ollama listens with `net.Listen` (cmd/cmd.go v0.33.0-rc2, 2020), and Go's listen backlog on
/// Linux is `/proc/sys/net/core/somaxconn` (net/sock_linux.go `maxListenerBacklog`; 4096 on
/// current kernels). Rust's std and tokio bind with 128: 1,000 agents connecting at once then
/// overflow the accept queue, and the kernel drops their SYNs, which are sent again only after
/// a second. The kernel caps a larger value at somaxconn, so asking for 65535 gets Go's.
pub fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    // As std does before binding on Unix: a restarted server rebinds its port at once.
    #[cfg(unix)]
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(65535)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// Serves every instance until `stop` fires, then gives open streams a moment to finish.
async fn serve(shared: Arc<Shared>, listeners: Vec<TcpListener>, stop: tokio::sync::oneshot::Receiver<()>) {
    let (tx, _) = tokio::sync::watch::channel(false);
    let mut servers = Vec::new();
    for (inst, l) in shared.instances.iter().zip(listeners) {
        let listener = match tokio::net::TcpListener::from_std(l) {
            Ok(l) => crate::arrival::Stamping::new(l),
            Err(e) => {
                tracing::error!(target: "sim_ollama", "instance {}: {e}", inst.index);
                continue;
            }
        };
        let app = routes::app(AppState { shared: Arc::clone(&shared), instance: Arc::clone(inst) });
        servers.push(tokio::spawn(crate::http1::serve(listener, app, tx.subscribe())));
    }
    let _ = stop.await;
    let _ = tx.send(true);
    // Streams in flight get a short grace period, then the runtime is dropped.
    let _ = tokio::time::timeout(Duration::from_millis(500), futures::future::join_all(servers)).await;
}

/// A running simulator. Dropping it stops every instance.
#[derive(Debug)]
pub struct SimHandle {
    urls: Vec<String>,
    addrs: Vec<SocketAddr>,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Blocks until no request is in flight in `trace`, or `timeout` passes.
fn wait_idle(trace: &Trace, timeout: Duration) -> Result<(), Error> {
    let deadline = Instant::now() + timeout;
    loop {
        let n = trace.in_flight();
        if n == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::NotIdle { in_flight: n, waited: timeout });
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl SimHandle {
    /// Base URL of the first instance, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.urls[0]
    }

    /// Base URLs of every instance, in order.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// Socket addresses of every instance.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The instant the trace's microsecond timestamps count from.
    pub fn origin(&self) -> Instant {
        self.shared.origin
    }

    /// The master seed.
    pub fn seed(&self) -> u64 {
        self.shared.cfg.seed
    }

    /// The time scale.
    pub fn time_scale(&self) -> f64 {
        self.shared.cfg.time_scale
    }

    /// Everything the simulator recorded so far.
    pub fn trace(&self) -> TraceSnapshot {
        self.shared.trace.snapshot()
    }

    /// Waits until no request is in flight (every answer written, every record finished), so a
    /// trace read afterwards is complete. Call it after the program under test has finished.
    pub fn wait_idle(&self, timeout: Duration) -> Result<(), Error> {
        wait_idle(&self.shared.trace, timeout)
    }

    /// Waits, without blocking the caller's executor (any runtime), until no request is in
    /// flight (at most [`JUDGE_WAIT`]: a program that left a request running is judged on what
    /// finished), then judges (see [`crate::judge`]). The async test's one call:
    ///
    /// ```
    /// # async fn run_my_agents(_: &str) {}
    /// # async fn test() -> Result<(), sim_ollama::Error> {
    /// let sim = sim_ollama::SimBuilder::judging("gemma3").start()?; // ideal, model loaded
    /// run_my_agents(sim.url()).await;
    /// sim.judged(&sim_ollama::JudgeOptions::new()).await.assert_parallel();
    /// # Ok(()) }
    /// ```
    pub fn judged(
        &self,
        opts: &crate::judge::JudgeOptions,
    ) -> impl Future<Output = crate::judge::Report> + Send + 'static {
        let shared = Arc::clone(&self.shared);
        let opts = opts.clone();
        let (tx, rx) = futures::channel::oneshot::channel();
        // A thread of its own: the caller may be on any executor (tokio, smol, async-std), or a
        // current-thread one that must stay free to run its agents.
        std::thread::spawn(move || {
            // Still busy after JUDGE_WAIT: judged on what finished (documented above).
            let _ = wait_idle(&shared.trace, JUDGE_WAIT);
            let _ = tx.send(crate::judge::judge(&shared.trace.snapshot(), &opts));
        });
        async move { rx.await.unwrap_or_else(|_| unreachable!("the judging thread always answers")) }
    }

    /// Judges the concurrency of everything in the trace (see [`crate::judge`]). Call
    /// [`SimHandle::wait_idle`] first, so the requests still finishing are included (or use
    /// [`SimHandle::judged`], which waits).
    ///
    /// ```
    /// use sim_ollama::{JudgeOptions, SimBuilder, Verdict};
    /// let sim = SimBuilder::new().time_scale(0.01).start().unwrap();
    /// // ... run agents against sim.url() ...
    /// sim.wait_idle(std::time::Duration::from_secs(5)).unwrap();
    /// let report = sim.judge(&JudgeOptions::new().expected_agents(3));
    /// println!("{report}");
    /// assert_eq!(report.verdict, Verdict::Inconclusive); // no agent ran here
    /// ```
    pub fn judge(&self, opts: &crate::judge::JudgeOptions) -> crate::judge::Report {
        crate::judge::judge(&self.trace(), opts)
    }

    /// Starts a probe run of the program judged by `opts` (its window, from `opts`'s `since`;
    /// the program must have finished): from the next request on, the simulator holds answers
    /// back so that the agents do their local work one at a time (see docs/judge.md, "The gaps
    /// between calls"). Run the same program again, then judge with
    /// [`JudgeOptions::probe_since`](crate::judge::JudgeOptions::probe_since) set to the id
    /// returned, and end the probe ([`SimHandle::end_probe`]). [`SimHandle::judge_program`]
    /// does all of it.
    pub fn begin_probe(&self, opts: &crate::judge::JudgeOptions) -> u64 {
        let plan = crate::judge::probe_plan(&self.trace(), opts);
        let mark = self.shared.trace.next_id();
        self.shared.probe.begin(plan, self.shared.rt.clone());
        mark
    }

    /// Ends a probe run: answers still held go out at once.
    pub fn end_probe(&self) {
        self.shared.probe.end();
    }

    /// Starts a confirmation run of the program judged by `opts` with its probe run (`opts`
    /// has both marks; the program must have finished), repeating `run`
    /// ([`Report::confirm`](crate::judge::Report::confirm) says which): a probe run in progress
    /// ends, and a repeated probe run holds answers as the first did. Run the same program
    /// again, then judge with [`JudgeOptions::confirmation`](crate::judge::JudgeOptions::confirmation)
    /// set to what this returns, and end the probe ([`SimHandle::end_probe`]).
    /// [`SimHandle::judge_program`] does all of it.
    pub fn begin_confirmation(
        &self,
        opts: &crate::judge::JudgeOptions,
        run: crate::judge::ConfirmRun,
    ) -> crate::judge::Confirmation {
        self.shared.begin_confirmation(opts, run)
    }

    /// Runs a program, judges it, and where the gaps between its agents' calls decide the
    /// verdict (an agent's local work, or waiting for another agent's: one run cannot tell),
    /// runs it once more as a probe run and judges both: the one call a test needs when its
    /// agents do work between their calls. Where the probe found the agents waiting for each
    /// other and the verdict is short of parallel, it runs the program a third time to confirm
    /// it (a pause of the whole process in one run does not recur: docs/judge.md, "A
    /// confirmation run"). `program` is called one to three times; it must make the same calls
    /// each time (a seeded simulator answers them the same way).
    ///
    /// ```
    /// # async fn run_my_agents(_: &str) {}
    /// # async fn test() -> Result<(), sim_ollama::Error> {
    /// let sim = sim_ollama::SimBuilder::judging("gemma3").start()?;
    /// let url = sim.url().to_string();
    /// let report = sim.judge_program(&sim_ollama::JudgeOptions::new(), || run_my_agents(&url)).await;
    /// report.assert_parallel();
    /// # Ok(()) }
    /// ```
    pub async fn judge_program<F, Fut>(&self, opts: &crate::judge::JudgeOptions, mut program: F) -> crate::judge::Report
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = ()>,
    {
        let opts = match opts.since_id() {
            Some(_) => opts.clone(),
            None => opts.clone().since(self.trace_mark()),
        };
        program().await;
        let report = self.judged(&opts).await;
        if !report.needs_probe() {
            return report;
        }
        let probe = self.begin_probe(&opts);
        program().await;
        let probed = opts.probe_since(probe);
        let report = self.judged(&probed).await;
        self.end_probe();
        let Some(run) = report.confirm else { return report };
        let confirmation = self.begin_confirmation(&probed, run);
        program().await;
        let report = self.judged(&probed.confirmation(confirmation)).await;
        self.end_probe();
        report
    }

    /// The id the next request will get in the trace: a mark to judge only what comes after
    /// it ([`JudgeOptions::since`](crate::judge::JudgeOptions::since)).
    pub fn trace_mark(&self) -> u64 {
        self.shared.trace.next_id()
    }

    /// Forgets finished requests in the trace.
    pub fn clear_trace(&self) {
        self.shared.trace.clear();
    }

    /// Live state and token lateness, as `GET /sim/metrics`.
    pub fn metrics(&self) -> crate::metrics::SimMetrics {
        self.shared.metrics()
    }

    /// Token emission lateness so far.
    pub fn lateness(&self) -> LatenessSummary {
        self.shared.lateness.summary()
    }

    /// Replaces the fault rules in force (an empty list removes them all). Each rule is
    /// checked as `PUT /sim/faults` checks it (`every: 0`, a bad status, a probability outside
    /// 0-1 are refused), and at most [`MAX_RULES`](crate::faults::MAX_RULES) may be in force.
    pub fn set_faults(&self, rules: Vec<crate::faults::FaultRule>) -> Result<(), Error> {
        self.shared.faults.rules.set(rules).map_err(Error::Rules)
    }

    /// Replaces the scripted turns in force (counters restart; an empty list removes them),
    /// checked as `PUT /sim/script` checks them.
    pub fn set_script(&self, rules: Vec<crate::script::ScriptRule>) -> Result<(), Error> {
        self.shared.script.rules.set(rules).map_err(Error::Rules)
    }

    /// Resets the lateness histogram.
    pub fn reset_lateness(&self) {
        self.shared.lateness.reset();
    }

    /// Stops every instance and waits for the simulator's threads to finish.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shared.timer.shutdown();
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads `OLLAMA_HOST` as the real server does: `host`, `host:port`, `:port`, with or
/// without `http://` / `https://` (whose default ports are 80 and 443); surrounding quotes and
/// spaces are stripped; a bad port falls back to 11434. Returns (ip, port).
pub fn parse_ollama_host(value: &str) -> Result<(IpAddr, u16), String> {
    let mut s = value.trim().trim_matches(|c| c == '"' || c == '\'').trim();
    let mut default_port = 11434u16;
    if let Some(rest) = s.strip_prefix("http://") {
        s = rest;
        default_port = 80;
    } else if let Some(rest) = s.strip_prefix("https://") {
        s = rest;
        default_port = 443;
    }
    let s = s.trim_end_matches('/');
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        // [::1]:port
        let (h, tail) = rest.split_once(']').ok_or_else(|| format!("OLLAMA_HOST: bad address {value:?}"))?;
        (h, tail.strip_prefix(':'))
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            _ => (s, None),
        }
    };
    let port = port.and_then(|p| p.parse::<u16>().ok()).unwrap_or(default_port);
    let ip = match host {
        "" => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        h => h.parse::<IpAddr>().map_err(|_| format!("OLLAMA_HOST: {h:?} is not an IP address"))?,
    };
    Ok((ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ollama_host_forms() {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        assert_eq!(parse_ollama_host("127.0.0.1"), Ok((lo, 11434)));
        assert_eq!(parse_ollama_host("127.0.0.1:8080"), Ok((lo, 8080)));
        assert_eq!(parse_ollama_host(":8080"), Ok((IpAddr::V4(Ipv4Addr::UNSPECIFIED), 8080)));
        assert_eq!(parse_ollama_host("http://127.0.0.1"), Ok((lo, 80)));
        assert_eq!(parse_ollama_host(" \"localhost:9\" "), Ok((lo, 9)));
        assert_eq!(parse_ollama_host("127.0.0.1:bad"), Ok((lo, 11434)));
        assert_eq!(parse_ollama_host("[::1]:7"), Ok(("::1".parse().unwrap(), 7)));
        assert!(parse_ollama_host("example.com").is_err());
    }
}
