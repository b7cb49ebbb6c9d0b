//! `harness exec -- CMD ARGS...`: judge any program, in any language, from the server side.
//! The simulator starts, the command runs with `OLLAMA_HOST` pointing at the first instance
//! (and every instance's URL in `SIM_OLLAMA_URLS`), and when it ends the simulator's judge
//! ([`sim_ollama::judge`]) reads the trace: requests per agent, how they overlapped, the time
//! the program took against the time it could have taken, and a verdict with its reason. This
//! module runs the command and shapes the output; it does no judging of its own.

use serde::Serialize;
use sim_ollama::advanced::trace::TraceSnapshot;
use sim_ollama::{JudgeOptions, Report, SimBuilder};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// Version of the `--json` document's schema (the judge's report inside it has its own,
/// `report.schema_version`). Documented in `docs/judge.md`.
pub const EXEC_SCHEMA_VERSION: u32 = 2;

/// What to run, and against which deployment.
#[derive(Debug, Clone)]
pub struct ExecPlan {
    /// A deployment preset (default `ideal`, so any serialization is the program's).
    pub preset: Option<String>,
    /// A simulator configuration file instead of a preset.
    pub config: Option<PathBuf>,
    /// Number of instances (default: the preset's).
    pub instances: Option<usize>,
    /// The simulator's time scale.
    pub time_scale: f64,
    /// Master seed.
    pub seed: u64,
    /// Agents the program runs that should be able to run at once (`--agents`).
    pub agents: Option<usize>,
    /// Models loaded before the command starts (`--preload`), so their loads stay out of the
    /// judged window ([`SimBuilder::preload`]).
    pub preload: Vec<String>,
    /// The command and its arguments.
    pub command: Vec<String>,
}

/// Errors that stop `exec` before there is anything to judge.
#[derive(Debug)]
#[non_exhaustive]
pub enum ExecError {
    /// The preset or configuration is invalid.
    Config(String),
    /// The simulator did not start.
    Start(String),
    /// The command could not be started.
    Spawn(String, std::io::Error),
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecError::Config(e) => write!(f, "harness exec: {e}"),
            ExecError::Start(e) => write!(f, "harness exec: the simulator did not start: {e}"),
            ExecError::Spawn(cmd, e) => write!(f, "harness exec: cannot run {cmd:?}: {e}"),
        }
    }
}

impl std::error::Error for ExecError {}

/// What happened: the command's exit status, the trace and the judge's report.
#[derive(Debug)]
pub struct ExecOutcome {
    /// The command's exit status.
    pub status: ExitStatus,
    /// Wall time of the whole process, seconds (startup included).
    pub process_wall_s: f64,
    /// Everything the simulator saw.
    pub trace: TraceSnapshot,
    /// The judge's report.
    pub report: Report,
}

/// The `--json` document.
#[derive(Debug, Serialize)]
pub struct ExecJson<'a> {
    /// [`EXEC_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The command that ran.
    pub command: &'a [String],
    /// Its exit code (absent when it was killed by a signal).
    pub exit_code: Option<i32>,
    /// Wall time of the whole process, seconds.
    pub process_wall_s: f64,
    /// Simulator seed.
    pub seed: u64,
    /// Deployment: the preset's name or the configuration file.
    pub deployment: String,
    /// The judge's report (its own `schema_version` inside).
    pub report: &'a Report,
}

impl ExecPlan {
    /// The deployment in words, for the JSON document.
    pub fn deployment(&self) -> String {
        match (&self.config, &self.preset) {
            (Some(p), _) => p.display().to_string(),
            (None, Some(n)) => n.clone(),
            (None, None) => "ideal".to_string(),
        }
    }
}

/// Starts the simulator, runs the command against it, waits for it and judges the trace.
pub fn run(plan: &ExecPlan) -> Result<ExecOutcome, ExecError> {
    let builder = SimBuilder::new().seed(plan.seed).time_scale(plan.time_scale);
    let builder = match (&plan.config, &plan.preset) {
        (Some(p), _) => builder.config_file(p),
        (None, Some(n)) => builder.preset(n),
        (None, None) => builder.preset("ideal"),
    }
    .map_err(|e| ExecError::Config(e.to_string()))?;
    let builder = match plan.instances {
        Some(n) => builder.instances(n),
        None => builder,
    };
    let builder = plan.preload.iter().fold(builder, |b, m| b.preload(m.clone()));
    let sim = builder.start().map_err(|e| match e {
        // A model the simulator lacks is the caller's mistake, like a bad preset.
        sim_ollama::Error::Preload { .. } => ExecError::Config(e.to_string()),
        _ => ExecError::Start(e.to_string()),
    })?;
    let program = plan.command.first().cloned().unwrap_or_default();
    let started = Instant::now();
    let status = std::process::Command::new(&program)
        .args(plan.command.iter().skip(1))
        .env("OLLAMA_HOST", sim.url())
        .env("SIM_OLLAMA_URLS", sim.urls().join(","))
        .status()
        .map_err(|e| ExecError::Spawn(program, e))?;
    let process_wall_s = started.elapsed().as_secs_f64();
    // Answers the program stopped reading finish on the server shortly after it exits; the
    // judge notes any that are still running.
    let _ = sim.wait_idle(Duration::from_secs(2));
    let trace = sim.trace();
    let mut opts = JudgeOptions::new();
    if let Some(n) = plan.agents {
        opts = opts.expected_agents(n);
    }
    let report = sim_ollama::judge::judge(&trace, &opts);
    Ok(ExecOutcome { status, process_wall_s, trace, report })
}

/// The report in words, as `harness exec` prints it on stderr.
pub fn render(o: &ExecOutcome) -> String {
    let mut s = format!("harness exec: {}", o.report);
    s.push_str(&format!("  the process ran {:.3} s (wall, startup included)\n", o.process_wall_s));
    s
}
