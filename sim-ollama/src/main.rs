//! `sim-ollama`: run the simulator as a server, like `ollama serve`.
//!
//! With no arguments: one instance on 127.0.0.1:11434 (or `OLLAMA_HOST`). For every instance
//! it prints `sim-ollama listening on http://127.0.0.1:PORT` on stdout before serving, then
//! `sim-ollama ready: N instances` once every instance listens (a supervisor that does not
//! know N reads up to that line).
//! Ctrl-C or SIGTERM stops it. Exit codes: 0 after a clean stop, 2 for bad arguments or
//! configuration, 1 when a port cannot be bound.

use clap::Parser;
use sim_ollama::advanced::{KeepAlive, parse_ollama_host};
use sim_ollama::{Error, SimBuilder};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// A deterministic Ollama simulator.
#[derive(Debug, Parser)]
#[command(name = "sim-ollama", version, about)]
struct Args {
    /// First port; 0 = ephemeral. Default: from OLLAMA_HOST, else 11434.
    #[arg(long)]
    port: Option<u16>,
    /// Number of instances, on ports P, P+1, ... (each ephemeral with --port 0).
    #[arg(long)]
    instances: Option<usize>,
    /// TOML configuration: [server], [[devices]], [[instances]], [[models]], [[faults]].
    #[arg(long, conflicts_with = "preset")]
    config: Option<PathBuf>,
    /// A deployment preset: ideal, single-1slot, single-1slot-nocache, single-4slots,
    /// dual-one-device, dual-two-devices, mixed-three, pitfall-max-queue, pitfall-one-slot-architecture,
    /// pitfall-context-memory, pitfall-max-loaded-models, pitfall-one-copy.
    #[arg(long)]
    preset: Option<String>,
    /// Master seed: same seed, same request, same bytes.
    #[arg(long)]
    seed: Option<u64>,
    /// Multiplies every modelled duration (0.01: a 10 s call takes 100 ms).
    #[arg(long)]
    time_scale: Option<f64>,
    /// Deterministic created_at and durations (fixed epoch, modelled values).
    #[arg(long)]
    frozen_clock: bool,
    /// Parallel slots per loaded model [env: OLLAMA_NUM_PARALLEL].
    #[arg(long)]
    num_parallel: Option<usize>,
    /// Requests that may wait for the scheduler before 503 [env: OLLAMA_MAX_QUEUE].
    #[arg(long)]
    max_queue: Option<usize>,
    /// Models loaded at once per instance (0 = automatic: 3) [env: OLLAMA_MAX_LOADED_MODELS].
    #[arg(long)]
    max_loaded_models: Option<usize>,
    /// Default keep-alive: a Go duration or integer seconds [env: OLLAMA_KEEP_ALIVE].
    #[arg(long)]
    keep_alive: Option<String>,
    /// Memory the trace may hold for finished requests, MiB (default 256; 0 keeps none).
    #[arg(long)]
    trace_budget_mb: Option<u64>,
    /// The process whose agents are judged (a test process, a program beside the server): its
    /// process tree's CPU time and waits for a CPU are sampled and given to `GET /sim/judge`.
    #[arg(long)]
    client_pid: Option<u32>,
    /// Answer for every model name the catalogue lacks with a copy of this catalogue model
    /// (installed under the asked name on first use, as a pull would), instead of
    /// `model "x" not found`. Replaces the configuration's `server.stand_in`.
    #[arg(long, value_name = "MODEL")]
    stand_in: Option<String>,
    /// Noise on purpose, seeded: `jitter=0.3,slow=0.05,slow_factor=3,contention=0.2`
    /// (per-request jitter cv, hiccup probability and factor, slowdown per stream on another
    /// device). Replaces the configuration's `[noise]`.
    #[arg(long, value_parser = sim_ollama::advanced::noise::NoiseSpec::parse)]
    noise: Option<sim_ollama::advanced::noise::NoiseSpec>,
    /// Load this model on every instance before listening, kept loaded (repeat for several),
    /// so a program judged later never has the cold load in its window.
    #[arg(long, value_name = "NAME")]
    preload: Vec<String>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "sim_ollama=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut args = Args::parse();
    read_environment(&mut args);
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, msg)) => {
            eprintln!("{msg}");
            ExitCode::from(code)
        }
    }
}

/// The `OLLAMA_*` variables a flag does not override, read as the real server reads them
/// (envconfig/config.go v0.33.0-rc2): a value that does not parse is logged and the default
/// kept, never a reason to exit; `OLLAMA_NUM_PARALLEL=0` means 1 (sched.go: `max(.., 1)`) and
/// `OLLAMA_MAX_QUEUE=0`, a queue of none, the smallest the simulator has: 1. A bad flag is still
/// an error: flags are typed by the user running the simulator.
fn read_environment(args: &mut Args) {
    fn uint(key: &str) -> Option<usize> {
        let v = std::env::var(key).ok().filter(|v| !v.is_empty())?;
        match v.trim().parse::<u64>() {
            Ok(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            Err(_) => {
                tracing::warn!(target: "sim_ollama", key, value = %v, "invalid environment variable, using default");
                None
            }
        }
    }
    if args.num_parallel.is_none() {
        args.num_parallel = uint("OLLAMA_NUM_PARALLEL").map(|n| n.max(1));
    }
    if args.max_queue.is_none() {
        args.max_queue = uint("OLLAMA_MAX_QUEUE").map(|n| n.max(1));
    }
    if args.max_loaded_models.is_none() {
        args.max_loaded_models = uint("OLLAMA_MAX_LOADED_MODELS");
    }
    if args.keep_alive.is_none() {
        // envconfig.KeepAlive: a Go duration or integer seconds, else the default 5 minutes.
        args.keep_alive = std::env::var("OLLAMA_KEEP_ALIVE").ok().filter(|v| !v.is_empty()).and_then(|v| {
            match KeepAlive::from_env_value(&v) {
                Ok(_) => Some(v),
                Err(e) => {
                    tracing::warn!(target: "sim_ollama", key = "OLLAMA_KEEP_ALIVE", value = %v, "invalid environment variable, using default: {e}");
                    None
                }
            }
        });
    }
}

fn run(args: Args) -> Result<(), (u8, String)> {
    let (host, env_port) = match std::env::var("OLLAMA_HOST") {
        Ok(v) if !v.trim().is_empty() => parse_ollama_host(&v).map_err(|e| (2, e))?,
        _ => (std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 11434),
    };
    let mut b = SimBuilder::new().host(host).port(args.port.unwrap_or(env_port));
    if let Some(path) = &args.config {
        b = b.config_file(path).map_err(|e| (2, e.to_string()))?;
    }
    if let Some(name) = &args.preset {
        b = b.preset(name).map_err(|e| (2, e.to_string()))?;
    }
    if let Some(mb) = args.trace_budget_mb {
        b = b.trace_budget_mb(mb);
    }
    if let Some(m) = &args.stand_in {
        b = b.stand_in(m);
    }
    if let Some(pid) = args.client_pid {
        b = b.client_pid(pid);
    }
    if let Some(n) = args.instances {
        b = b.instances(n);
    }
    if let Some(s) = args.seed {
        b = b.seed(s);
    }
    if let Some(t) = args.time_scale {
        b = b.time_scale(t);
    }
    if let Some(n) = args.noise {
        b = b.noise(n);
    }
    if args.frozen_clock {
        b = b.frozen_clock(true);
    }
    for m in &args.preload {
        b = b.preload(m.clone());
    }
    if let Some(n) = args.num_parallel {
        b = b.num_parallel(n);
    }
    if let Some(n) = args.max_queue {
        b = b.max_queue(n);
    }
    if let Some(n) = args.max_loaded_models {
        b = b.max_loaded_models(n);
    }
    if let Some(k) = &args.keep_alive {
        b = b.keep_alive(KeepAlive::from_env_value(k).map_err(|e| (2, format!("--keep-alive: {e}")))?);
    }
    let sim = b.start().map_err(|e| match e {
        Error::Config(_) | Error::Preload { .. } => (2, e.to_string()),
        _ => (1, e.to_string()),
    })?;
    // Listen for signals before saying "listening": a supervisor that stops the server as soon
    // as it is up must get a clean stop, not the default action of an unhandled SIGTERM.
    let signals = Signals::listen().map_err(|e| (1, format!("sim-ollama: cannot wait for signals: {e}")))?;
    {
        let mut out = std::io::stdout().lock();
        for url in sim.urls() {
            let _ = writeln!(out, "sim-ollama listening on {url}");
        }
        let n = sim.urls().len();
        let _ = writeln!(out, "sim-ollama ready: {n} {}", if n == 1 { "instance" } else { "instances" });
        let _ = out.flush();
    }
    signals.wait().map_err(|e| (1, format!("sim-ollama: cannot wait for signals: {e}")))?;
    eprintln!("sim-ollama: shutting down");
    sim.shutdown();
    Ok(())
}

/// Ctrl-C and SIGTERM, listened for from [`Signals::listen`] on.
struct Signals {
    rt: tokio::runtime::Runtime,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers now (a signal that arrives before [`Signals::wait`] is kept).
    fn listen() -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let _guard = rt.enter();
            let (term, int) = (signal(SignalKind::terminate())?, signal(SignalKind::interrupt())?);
            drop(_guard);
            Ok(Signals { rt, term, int })
        }
        #[cfg(not(unix))]
        Ok(Signals { rt })
    }

    /// Blocks until one of them arrives.
    fn wait(self) -> std::io::Result<()> {
        #[cfg(unix)]
        {
            let Signals { rt, mut term, mut int } = self;
            rt.block_on(async {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            });
            Ok(())
        }
        #[cfg(not(unix))]
        self.rt.block_on(tokio::signal::ctrl_c())
    }
}
