//! `harness exec -- CMD ARGS...`: judge any program, in any language, from the server side.
//! The simulator starts, the command runs with `OLLAMA_HOST`, `OPENAI_BASE_URL` (`.../v1`) and
//! `ANTHROPIC_BASE_URL` pointing at the first instance (every instance's URL in
//! `SIM_OLLAMA_URLS`; `OPENAI_API_KEY` and `ANTHROPIC_API_KEY` set where unset, as the SDKs
//! insist on one: the pytest fixture's environment), and when it ends the simulator's judge
//! ([`sim_ollama::judge`]) reads the trace: requests per agent, how they overlapped, the time
//! the program took against the time it could have taken, and a verdict with its reason. This
//! module runs the command and shapes the output; it does no judging of its own.
//!
//! Where the gaps between the agents' calls decide the verdict (their own work, or waiting for
//! each other's: one run cannot tell), the command runs once more as a **probe run**, the
//! simulator holding answers back so the agents do their local work one at a time, and the
//! judge compares the two runs (docs/judge.md, "The gaps between calls"); `--probe` says when.
//! Where the probed verdict rests on the agents waiting for each other, the command runs a
//! third time to confirm it (docs/judge.md, "A confirmation run"). Where the verdict may be the
//! machine's (the report's `rerun`: the simulator itself late, a stall reading the last
//! answer), the whole is done once more in a new window, whose verdict stands.

use serde::Serialize;
use sim_ollama::advanced::trace::TraceSnapshot;
use sim_ollama::{JudgeOptions, Report, SimBuilder};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// Version of the `--json` document's schema (the judge's report inside it has its own,
/// `report.schema_version`). Documented in `docs/judge.md`.
pub const EXEC_SCHEMA_VERSION: u32 = 2;

/// When `exec` runs the command a second time as a probe run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProbeMode {
    /// When the verdict depends on the gaps between calls and one run cannot settle it.
    #[default]
    Auto,
    /// Every time the first run succeeded.
    Always,
    /// Never: such a verdict stays inconclusive (`unprobed_gaps`).
    Never,
}

/// The probe run, when one ran.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeRun {
    /// Its exit code (absent when it was killed: by a signal, or for outlasting its limit).
    pub exit_code: Option<i32>,
    /// Its wall time, seconds.
    pub wall_s: f64,
    /// Why it cannot be compared with the first run, if it cannot.
    pub void: Option<String>,
}

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
    /// A catalogue model that answers for the model names the catalogue lacks
    /// ([`SimBuilder::stand_in`]), so a program naming its own model runs unchanged.
    pub stand_in: Option<String>,
    /// The command and its arguments.
    pub command: Vec<String>,
    /// When to run it again as a probe run.
    pub probe: ProbeMode,
    /// What the caller expects (`--expect` and the rest): a verdict that rests on waits a probe
    /// run found is confirmed by a third run unless it already meets them.
    pub expect: sim_ollama::judge::Expectations,
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
    /// The probe run, if the command ran twice.
    pub probe: Option<ProbeRun>,
    /// The confirmation run, if the command ran a third time.
    pub confirmation: Option<ProbeRun>,
    /// How long the process ran on after the simulator wrote the last answer of the run judged,
    /// seconds: time the judge does not see (the program's own work after its calls, or its
    /// answers read late).
    pub after_last_answer_s: Option<f64>,
    /// The first window's reason, when its verdict may have been the machine's (the judge's
    /// `rerun`: the simulator itself late, a stall reading the last answer) and the command ran
    /// again in a new window, whose verdict this is.
    pub rerun_after: Option<String>,
    /// Where the first run was inconclusive for its time scale (the judge's
    /// `longer_time_scale`) and the command ran again at the longer one: whose verdict this is
    /// (`stands`: the longer one's, where it was parallel; else the first's).
    pub longer_scale_after: Option<LongerScale>,
}

/// A first run inconclusive for its time scale, and the longer one the command ran at again.
#[derive(Debug, Clone, Serialize)]
pub struct LongerScale {
    /// The longer time scale.
    pub time_scale: f64,
    /// The first run's time scale.
    pub first_time_scale: f64,
    /// Whether the run at the longer time scale gave the verdict reported (it was parallel);
    /// otherwise the first run's inconclusive verdict stands.
    pub stands: bool,
    /// The verdict at the longer time scale.
    pub verdict: sim_ollama::Verdict,
    /// Its reason.
    pub reason: String,
    /// The first run's reason.
    pub first_reason: String,
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
    /// How long the process ran on after the simulator wrote the run's last answer, seconds
    /// (time the judge does not see; absent when no request ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_last_answer_s: Option<f64>,
    /// Simulator seed.
    pub seed: u64,
    /// Deployment: the preset's name or the configuration file.
    pub deployment: String,
    /// The judge's report (its own `schema_version` inside).
    pub report: &'a Report,
    /// The probe run, when the command ran a second time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<&'a ProbeRun>,
    /// The confirmation run, when the command ran a third time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<&'a ProbeRun>,
    /// The first window's reason, when its report asked for a run again and the command ran
    /// once more in a new window ([`ExecOutcome::rerun_after`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun_after: Option<&'a str>,
    /// The run at a longer time scale and the first run, when that was inconclusive for its
    /// time scale ([`ExecOutcome::longer_scale_after`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub longer_time_scale_after: Option<&'a LongerScale>,
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
/// Where the verdict is inconclusive for the time scale (the program's own delays outlast
/// calls this short: [`sim_ollama::Report::longer_time_scale`]), the whole is done once more on
/// a simulator at that longer time scale: a parallel verdict there stands; any other keeps the
/// first (the time it loses there is the program's own delays, which no agent waited on
/// another for: a probe run showed it, and the judge does not blame a program for them).
pub fn run(plan: &ExecPlan) -> Result<ExecOutcome, ExecError> {
    let first = run_at(plan)?;
    let longer = first.report.longer_time_scale.filter(|&s| s > plan.time_scale * 1.05);
    let (Some(time_scale), true) = (longer, first.status.success()) else { return Ok(first) };
    let again = run_at(&ExecPlan { time_scale, ..plan.clone() })?;
    let stands = again.report.verdict == sim_ollama::Verdict::Parallel;
    let l = LongerScale {
        time_scale,
        first_time_scale: plan.time_scale,
        stands,
        verdict: again.report.verdict,
        reason: again.report.reason.clone(),
        first_reason: first.report.reason.clone(),
    };
    Ok(if stands {
        ExecOutcome { longer_scale_after: Some(l), ..again }
    } else {
        ExecOutcome { longer_scale_after: Some(l), ..first }
    })
}

/// [`run`] at the plan's time scale, with the new window its report may ask for.
fn run_at(plan: &ExecPlan) -> Result<ExecOutcome, ExecError> {
    let sim = start(plan)?;
    let first = judged_window(&sim, plan)?;
    if !first.report.needs_rerun() || !first.status.success() {
        return Ok(first);
    }
    // The run's loss may be the machine's (the simulator itself late, a stall reading the last
    // answer): once more in a new window, whose verdict stands.
    let again = judged_window(&sim, plan)?;
    Ok(ExecOutcome { rerun_after: Some(first.report.reason), ..again })
}

/// The plan's simulator, started.
fn start(plan: &ExecPlan) -> Result<sim_ollama::SimHandle, ExecError> {
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
    let builder = match &plan.stand_in {
        Some(m) => builder.stand_in(m.clone()),
        None => builder,
    };
    let builder = plan.preload.iter().fold(builder, |b, m| b.preload(m.clone()));
    builder.start().map_err(|e| match e {
        // A model the simulator lacks is the caller's mistake, like a bad preset.
        sim_ollama::Error::Preload { .. } | sim_ollama::Error::Config(_) => ExecError::Config(e.to_string()),
        _ => ExecError::Start(e.to_string()),
    })
}

/// Runs the command in a window of its own (a mark first) and judges it, with its probe and
/// confirmation runs where the verdict asks for them.
fn judged_window(sim: &sim_ollama::SimHandle, plan: &ExecPlan) -> Result<ExecOutcome, ExecError> {
    let mark = sim.trace_mark();
    let mut opts = JudgeOptions::new().since(mark);
    if let Some(n) = plan.agents {
        opts = opts.expected_agents(n);
    }
    let started = Instant::now();
    let mut child = spawn(sim, plan)?;
    // How long the program's threads waited for a CPU while its calls ran: a busy machine's
    // cores read the same as a blocked executor or a permit, and the judge weighs it.
    let watch = sim_ollama::advanced::cpu::watch(child.id());
    let status = child.wait().map_err(|e| ExecError::Spawn(program(plan), e))?;
    let exited = Instant::now();
    let samples = watch.map(sim_ollama::advanced::cpu::TreeWatch::finish);
    let process_wall_s = exited.duration_since(started).as_secs_f64();
    // Answers the program stopped reading finish on the server shortly after it exits; the
    // judge notes any that are still running.
    let _ = sim.wait_idle(Duration::from_secs(2));
    // One snapshot per run judged, read for the report, the last answer and the outcome.
    let mut trace = sim.trace();
    if let Some(s) = &samples {
        opts = opts.client_cpu_samples(s, &trace, sim.origin());
    }
    let last_answer = trace.requests.iter().filter(|r| r.id >= mark).filter_map(|r| r.end_us).max();
    let at = |us: u64| sim.origin() + Duration::from_micros(us);
    let mut report = sim_ollama::judge::judge(&trace, &opts);
    let after_last_answer_s = last_answer.map(|us| exited.saturating_duration_since(at(us)).as_secs_f64());
    let wanted = match plan.probe {
        ProbeMode::Auto => report.needs_probe(),
        ProbeMode::Always => true,
        ProbeMode::Never => false,
    };
    let mut probe = None;
    let mut confirmation = None;
    if wanted && status.success() {
        let since = sim.begin_probe(&opts);
        // The probe run holds answers back for at most the gaps of the first run, so it takes
        // at most about twice as long; a program that takes far longer is stopped.
        let limit = Duration::from_secs_f64((process_wall_s * 5.0 + 30.0).min(600.0));
        let run = rerun(sim, plan, limit, "the probe run")?;
        opts = opts.probe_since(since);
        if let Some(why) = &run.void {
            opts = opts.probe_void(why.clone());
        }
        trace = sim.trace();
        report = sim_ollama::judge::judge(&trace, &opts);
        probe = Some(run);
        // A verdict resting on waits the probe found, where it matters: one more run of the one
        // a pause of the whole process would explain (docs/judge.md, "A confirmation run").
        if let Some(which) = report.confirm.filter(|_| plan.expect.is_empty() || !plan.expect.check(&report).is_empty())
        {
            let mut c = sim.begin_confirmation(&opts, which);
            let run = rerun(sim, plan, limit, "the confirmation run")?;
            c.void = run.void.clone();
            trace = sim.trace();
            report = sim_ollama::judge::judge(&trace, &opts.confirmation(c));
            confirmation = Some(run);
        }
    }
    Ok(ExecOutcome {
        status,
        process_wall_s,
        trace,
        report,
        probe,
        confirmation,
        after_last_answer_s,
        rerun_after: None,
        longer_scale_after: None,
    })
}

/// Runs the command again (a probe or confirmation run, `what`), at most `limit`, ending any
/// probe once it is done: the run, with why it cannot be compared, if it cannot.
fn rerun(sim: &sim_ollama::SimHandle, plan: &ExecPlan, limit: Duration, what: &str) -> Result<ProbeRun, ExecError> {
    let started = Instant::now();
    let status = wait_at_most(spawn(sim, plan)?, limit).map_err(|e| ExecError::Spawn(program(plan), e))?;
    let wall_s = started.elapsed().as_secs_f64();
    let _ = sim.wait_idle(Duration::from_secs(2));
    sim.end_probe();
    let void = match status {
        Some(s) if s.success() => None,
        Some(s) => Some(format!("{what} (the command run again) failed: {s}")),
        None => Some(format!(
            "{what} (the command run again) did not finish in {:.0} s and was stopped",
            limit.as_secs_f64()
        )),
    };
    Ok(ProbeRun { exit_code: status.and_then(|s| s.code()), wall_s, void })
}

/// The command's program, for errors.
fn program(plan: &ExecPlan) -> String {
    plan.command.first().cloned().unwrap_or_default()
}

/// Starts the command against the simulator.
fn spawn(sim: &sim_ollama::SimHandle, plan: &ExecPlan) -> Result<std::process::Child, ExecError> {
    let mut c = std::process::Command::new(program(plan));
    c.args(plan.command.iter().skip(1)).envs(environment(sim.url(), &sim.urls(), |k| std::env::var_os(k)));
    c.spawn().map_err(|e| ExecError::Spawn(program(plan), e))
}

/// What the command is given to reach the simulator, as the pytest fixture gives a test
/// (python/src/sim_ollama/_sim.py `environment`): the native, OpenAI and Anthropic base URLs,
/// every instance's URL, and an API key for each SDK where the caller's environment (`var`)
/// has none or an empty one (the OpenAI and Anthropic SDKs refuse to start without one).
fn environment(url: &str, urls: &[String], var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Vec<(String, String)> {
    let mut env = vec![
        ("OLLAMA_HOST".to_string(), url.to_string()),
        ("OPENAI_BASE_URL".to_string(), format!("{url}/v1")),
        ("ANTHROPIC_BASE_URL".to_string(), url.to_string()),
        ("SIM_OLLAMA_URLS".to_string(), urls.join(",")),
    ];
    for key in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"] {
        if var(key).is_none_or(|v| v.is_empty()) {
            env.push((key.to_string(), "sim-ollama".to_string()));
        }
    }
    env
}

/// Waits for a child at most `limit`; kills it and answers `None` past that.
fn wait_at_most(mut child: std::process::Child, limit: Duration) -> std::io::Result<Option<ExitStatus>> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How long a process may run on after its last answer before `harness exec` says so, seconds:
/// longer than an interpreter takes to exit (Python with its SDKs imported: 0.1-0.3 s here).
const AFTER_LAST_ANSWER_S: f64 = 0.5;

/// The report in words, as `harness exec` prints it on stderr.
pub fn render(o: &ExecOutcome) -> String {
    let mut s = format!("harness exec: {}", o.report);
    s.push_str(&format!("  the process ran {:.3} s (wall, startup included)\n", o.process_wall_s));
    // Longer after its last answer than the calls took, and longer than an interpreter takes
    // to exit: say what the judge did not see.
    if let Some(tail) = o.after_last_answer_s.filter(|&t| t >= AFTER_LAST_ANSWER_S && t > o.report.time.took_s) {
        s.push_str(&format!(
            "  it ran on {tail:.2} s after the simulator wrote its last answer, longer than its calls took: the judge sees none of that time (the program's own work after its calls, or its answers read late: agents that work on each streamed chunk with a blocking call show it only where another call follows)\n"
        ));
    }
    if let Some(p) = &o.probe {
        s.push_str(&format!(
            "  it ran again as a probe run: {:.3} s{}\n",
            p.wall_s,
            p.void.as_ref().map_or(String::new(), |v| format!(" (void: {v})"))
        ));
    }
    if let Some(first) = &o.rerun_after {
        s.push_str(&format!("  it ran twice: the first run's verdict was the machine's ({first})\n"));
    }
    match &o.longer_scale_after {
        Some(l) if l.stands => s.push_str(&format!(
            "  judged at time scale {:.2}: at {} its own delays outlasted its calls, inconclusive ({})\n",
            l.time_scale, l.first_time_scale, l.first_reason
        )),
        Some(l) => s.push_str(&format!(
            "  judged again at time scale {:.2}: {} ({}); the time lost there is the program's own delays, which no agent waited on another for (a probe run showed it), so the verdict at {} stands\n",
            l.time_scale, l.verdict, l.reason, l.first_time_scale
        )),
        None => {}
    }
    if let Some(p) = &o.confirmation {
        s.push_str(&format!(
            "  and a third time to confirm what the probe found: {:.3} s{}\n",
            p.wall_s,
            p.void.as_ref().map_or(String::new(), |v| format!(" (void: {v})"))
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::environment;
    use std::ffi::OsString;

    #[test]
    fn the_command_gets_every_sdks_base_url_and_a_key_only_where_it_has_none() {
        let urls = ["http://127.0.0.1:1".to_string(), "http://127.0.0.1:2".to_string()];
        let none = environment(&urls[0], &urls, |_| None);
        let get = |env: &[(String, String)], k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
        assert_eq!(get(&none, "OLLAMA_HOST").as_deref(), Some("http://127.0.0.1:1"));
        assert_eq!(get(&none, "OPENAI_BASE_URL").as_deref(), Some("http://127.0.0.1:1/v1"));
        assert_eq!(get(&none, "ANTHROPIC_BASE_URL").as_deref(), Some("http://127.0.0.1:1"));
        assert_eq!(get(&none, "SIM_OLLAMA_URLS").as_deref(), Some("http://127.0.0.1:1,http://127.0.0.1:2"));
        assert_eq!(get(&none, "OPENAI_API_KEY").as_deref(), Some("sim-ollama"));
        assert_eq!(get(&none, "ANTHROPIC_API_KEY").as_deref(), Some("sim-ollama"));
        // The caller's own key is kept (an empty one is none: the SDKs refuse it too).
        let own = environment(&urls[0], &urls, |k| match k {
            "OPENAI_API_KEY" => Some(OsString::from("sk-mine")),
            "ANTHROPIC_API_KEY" => Some(OsString::new()),
            _ => None,
        });
        assert_eq!(get(&own, "OPENAI_API_KEY"), None);
        assert_eq!(get(&own, "ANTHROPIC_API_KEY").as_deref(), Some("sim-ollama"));
    }
}
