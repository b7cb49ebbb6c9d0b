//! Runs a matrix: runtime variants x scenarios x runs, with solo baselines, on the embedded
//! simulator (one per scenario, with the scenario's deployment preset) or against live
//! servers. Results are written after every run.
//!
//! About 880 lines, 100 of them its tests: one concept, running the matrix and keeping what it
//! measured, whatever fails later; each step (solo rounds, a run, judging, recording, the
//! rounds added while a cell is in doubt, a run the simulator was late for run again) is a
//! function of its own.

use crate::baseline::{Rounds, RunShape};
use crate::measure::{self, CallMetrics};
use crate::report::{self, Results, RunResult, Shard, VerdictBands};
use crate::runtime::{self, AgentRecord, Executor, Job};
use crate::stats::percentile;
use crate::verdict::{self, Verdict};
use crate::workload::{AgentPlan, Scenario};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

/// Where the agents' requests go.
#[derive(Debug, Clone)]
pub enum Target {
    /// A simulator started in this process for each scenario.
    Simulator,
    /// A twin of live servers (`harness calibrate`): a simulator started for each scenario
    /// with this configuration instead of the scenario's preset, its agents on the twin's
    /// servers as `Live` puts them on the endpoints (instance i on server i), every call on
    /// `model`, at time scale 1 unless the plan says otherwise.
    Twin {
        /// The twin's configuration.
        config: std::sync::Arc<sim_ollama::advanced::config::ConfigFile>,
        /// Model every call uses instead of the scenario's.
        model: String,
    },
    /// Real Ollama servers (or a separately started `sim-ollama`): no server trace.
    Live {
        /// Base URLs; agents on instance `i` use endpoint `i` (modulo their number).
        endpoints: Vec<String>,
        /// Model every call uses instead of the scenario's.
        model: String,
    },
}

/// What to run.
#[derive(Debug, Clone)]
pub struct MatrixPlan {
    /// Variant names.
    pub runtimes: Vec<String>,
    /// Scenarios.
    pub scenarios: Vec<Scenario>,
    /// Concurrent runs per cell.
    pub runs: usize,
    /// Master seed of the simulator.
    pub seed: u64,
    /// Time scale for every scenario (default: each scenario's, else 0.01).
    pub time_scale: Option<f64>,
    /// Solo runs per distinct agent for the baseline (median taken).
    pub solo_runs: usize,
    /// Live mode: while a cell's saving is too noisy to tell (its 80 % interval lies on both
    /// sides of the parallel line), one more run and a solo and reference round after it, up to
    /// this many rounds in all; at most `solo_runs` adds none. The simulator's figures are
    /// modelled: it never adds any.
    pub max_solo_runs: usize,
    /// Where requests go.
    pub target: Target,
    /// Output directory (nothing written when absent).
    pub out: Option<PathBuf>,
    /// A call slower than this is abandoned with an error.
    pub timeout: Duration,
    /// The command line, for the report.
    pub command: String,
    /// Run only this share of the cells (`--shard K/N`; `harness merge` puts the shards back
    /// together). `None`: every cell.
    pub shard: Option<Shard>,
}

/// Errors that stop a matrix (a failing agent does not: it is reported in its run).
#[derive(Debug)]
#[non_exhaustive]
pub enum MatrixError {
    /// A runtime variant is unknown or its runtime cannot start.
    Runtime(String),
    /// The simulator cannot start.
    Simulator(String),
    /// Live mode: a server is unreachable or lacks the model.
    Live(String),
    /// Results cannot be written.
    Output(std::io::Error),
}

impl std::fmt::Display for MatrixError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MatrixError::Runtime(e) => write!(f, "harness: {e}"),
            MatrixError::Simulator(e) => write!(f, "harness: the simulator did not start: {e}"),
            MatrixError::Live(e) => write!(f, "harness live mode: {e}"),
            MatrixError::Output(e) => write!(f, "harness: cannot write results: {e}"),
        }
    }
}

impl std::error::Error for MatrixError {}

/// Progress callbacks (a bar on a terminal, plain lines otherwise).
pub trait Progress: Send {
    /// A cell begins.
    fn cell(&mut self, index: usize, cells: usize, runtime: &str, scenario: &str);
    /// A run (or a baseline) ended.
    fn step(&mut self, what: &str);
    /// A run of the cell ended, with its verdict.
    fn run(&mut self, run: &RunResult);
}

/// A progress sink that prints nothing.
#[derive(Debug, Default)]
pub struct Quiet;

impl Progress for Quiet {
    fn cell(&mut self, _: usize, _: usize, _: &str, _: &str) {}
    fn step(&mut self, _: &str) {}
    fn run(&mut self, _: &RunResult) {}
}

/// The deployment an agent set runs on.
struct Deployment {
    sim: Option<sim_ollama::SimHandle>,
    urls: Vec<String>,
    model: String,
    /// The simulator's time scale (1 in live mode): modelled time = wall time / this.
    time_scale: f64,
    /// Live mode and twins: what local work is multiplied by, measured once per scenario
    /// ([`calibrate_local_work`]); `None` until measured. The simulator with a scenario's own
    /// preset scales local work by its time scale instead.
    local_work_scale: Option<f64>,
    /// Local work sized as live mode sizes it (live servers, and twins of them, whose model is
    /// not the scenario's): measured, not the time scale.
    sized_as_live: bool,
    /// A twin's batching and sharing at the ends of what `--check` tolerates: its deployment
    /// verdict is given a band only where both ends agree ([`verdict::twin_deployment`]).
    tolerance: Option<crate::calibrate::Tolerance>,
}

impl Deployment {
    /// What the scenario's local work (modelled milliseconds) is multiplied by.
    fn local_scale(&self) -> f64 {
        match (self.local_work_scale, &self.sim) {
            (Some(f), _) => f,
            (None, Some(_)) => self.time_scale,
            (None, None) => 1.0,
        }
    }
}

fn deploy(plan: &MatrixPlan, s: &Scenario) -> Result<Deployment, MatrixError> {
    let time_scale = plan.time_scale.or(s.time_scale).unwrap_or(0.01);
    match &plan.target {
        Target::Simulator => {
            let file =
                s.deployment().ok_or_else(|| MatrixError::Simulator(format!("unknown preset {:?}", s.preset)))?;
            let sim = sim_ollama::SimBuilder::new()
                .config((*file).clone())
                .seed(plan.seed)
                .time_scale(time_scale)
                .start()
                .map_err(|e| MatrixError::Simulator(e.to_string()))?;
            let urls = sim.urls().to_vec();
            Ok(Deployment {
                sim: Some(sim),
                urls,
                model: s.model.clone(),
                time_scale,
                local_work_scale: None,
                sized_as_live: false,
                tolerance: None,
            })
        }
        Target::Twin { config, model } => {
            let time_scale = plan.time_scale.unwrap_or(1.0);
            let sim = sim_ollama::SimBuilder::new()
                .config((**config).clone())
                .seed(plan.seed)
                .time_scale(time_scale)
                .start()
                .map_err(|e| MatrixError::Simulator(e.to_string()))?;
            // As live mode: a scenario of one server runs on the twin's first server only.
            let urls = sim.urls().iter().take(s.instances()).cloned().collect();
            Ok(Deployment {
                sim: Some(sim),
                urls,
                model: model.clone(),
                time_scale,
                local_work_scale: None,
                sized_as_live: true,
                tolerance: crate::calibrate::tolerance(config),
            })
        }
        Target::Live { endpoints, model } => {
            // Instance i is endpoint i: a scenario of one server uses the first endpoint only,
            // so it measures one server (with the slots that server has), not two.
            let urls = endpoints.iter().take(s.instances()).cloned().collect();
            Ok(Deployment {
                sim: None,
                urls,
                model: model.clone(),
                time_scale: 1.0,
                local_work_scale: None,
                sized_as_live: true,
                tolerance: None,
            })
        }
    }
}

/// Live mode beside a twin (`--twin`): runs every scenario of the plan once on the twin, with
/// the reference client, and puts the twin's deployment verdict beside each live cell's
/// (`twin_deployment`), so one table shows what the twin predicted next to what the servers
/// did. The plan's scenarios, model and token scale; the twin at time scale 1.
pub fn predict_with_twin(
    plan: &MatrixPlan,
    twin: std::sync::Arc<sim_ollama::advanced::config::ConfigFile>,
    results: &mut Results,
) -> Result<(), MatrixError> {
    let Target::Live { model, .. } = &plan.target else {
        return Err(MatrixError::Live("a twin's prediction is set beside a live run: give --endpoints".into()));
    };
    let twin_plan = MatrixPlan {
        runtimes: vec![REFERENCE_RUNTIME.to_string()],
        runs: 1,
        solo_runs: 1,
        max_solo_runs: 1,
        time_scale: None,
        target: Target::Twin { config: twin, model: model.clone() },
        out: None,
        shard: None,
        ..plan.clone()
    };
    let predicted = run_here(&twin_plan, &mut Quiet)?;
    for c in &mut results.summary {
        c.twin_deployment =
            predicted.summary.iter().find(|t| t.scenario == c.scenario).and_then(|t| t.deployment.clone());
    }
    Ok(())
}

/// Live mode: every scenario must find a server for each of its instances (issue 14: a
/// scenario spread over the wrong number of servers measures another deployment).
fn check_servers(plan: &MatrixPlan) -> Result<(), MatrixError> {
    let (servers, what) = match &plan.target {
        Target::Live { endpoints, .. } => (endpoints.len(), "endpoint(s) given"),
        Target::Twin { config, .. } => (config.instances.len().max(1), "server(s) in the twin"),
        Target::Simulator => return Ok(()),
    };
    let short: Vec<String> = plan
        .scenarios
        .iter()
        .filter(|s| s.instances() > servers)
        .map(|s| format!("{} needs {} (preset {})", s.name, s.instances(), s.preset))
        .collect();
    if short.is_empty() {
        return Ok(());
    }
    Err(MatrixError::Live(format!(
        "{servers} {what}, but instance i of a scenario runs on server i and {}: give as many servers, or choose scenarios with fewer instances",
        short.join("; ")
    )))
}

fn job(d: &Deployment, agents: Vec<AgentPlan>, token_gap: Duration, timeout: Duration) -> Job {
    Job { agents, urls: d.urls.clone(), model: d.model.clone(), time_scale: d.local_scale(), token_gap, timeout }
}

/// Loads each agent's first model on its instance with its runner options (one token), so no
/// timed run pays for a load the deployment would not repeat.
fn warm_up(exec: &mut dyn Executor, d: &Deployment, agents: &[AgentPlan], timeout: Duration) {
    let mut seen = Vec::new();
    for a in agents {
        let key =
            (a.instance, a.calls[0].model.clone(), serde_json::to_string(&a.calls[0].options).unwrap_or_default());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let mut w = a.clone();
        w.calls =
            vec![crate::workload::Call { tokens: 1, local_work_ms: 0.0, tool_work_ms: None, ..a.calls[0].clone() }];
        exec.run(&job(d, vec![w], Duration::ZERO, timeout));
    }
}

/// How many solo rounds run before concurrent run `i + 1` (`slots[runs]`: after the last).
/// On the simulator every round runs first (its solo cost does not drift); in live mode the
/// rounds are spread from before the first run to after the last, so a server that drifts
/// during the cell drifts in the baselines too.
fn round_slots(rounds: usize, runs: usize, live: bool) -> Vec<usize> {
    let mut slots = vec![0; runs + 1];
    if !live || rounds == 1 {
        slots[0] = rounds;
        return slots;
    }
    for k in 0..rounds {
        let at = (k as f64 * runs as f64 / (rounds - 1) as f64).round() as usize;
        slots[at.min(runs)] += 1;
    }
    slots
}

/// One solo round: each distinct agent (instance and calls) alone, once. Returns each agent's
/// duration (agents of one shape share it; a failed solo run, or one whose server ended a call
/// early, is no baseline and is left out)
/// and the mean inter-token gap of every call.
fn solo_round(
    exec: &mut dyn Executor,
    d: &Deployment,
    agents: &[AgentPlan],
    timeout: Duration,
) -> (BTreeMap<String, f64>, Vec<f64>) {
    let mut round = BTreeMap::new();
    let mut itl = Vec::new();
    let mut by_shape: Vec<((usize, String), Option<f64>)> = Vec::new();
    for a in agents {
        let shape = (a.instance, format!("{:?}", a.calls));
        let measured = match by_shape.iter().find(|(k, _)| *k == shape) {
            Some((_, v)) => *v,
            None => {
                let recs = exec.run(&job(d, vec![a.clone()], Duration::ZERO, timeout));
                // A solo run that failed, or whose server ended a call early, did not do the
                // agent's work: no baseline.
                let ok = recs.first().filter(|r| {
                    r.calls.iter().all(|c| c.error.is_none()) && verdict::ended_early(std::slice::from_ref(r)).is_none()
                });
                if let Some(r) = ok {
                    // The mean gap of each call (first to last token over the gaps), not every
                    // gap: tokens that arrive bunched in one read would make the median gap ~0
                    // on a loaded machine, and the blocking control's sleep with it.
                    for c in &r.calls {
                        if let (Some(a), Some(b), true) = (c.tokens.first(), c.tokens.last(), c.tokens.len() > 1) {
                            itl.push((*b - *a).as_secs_f64() / (c.tokens.len() - 1) as f64);
                        }
                    }
                }
                let v = ok.map(|r| r.end.saturating_duration_since(r.start).as_secs_f64());
                by_shape.push((shape, v));
                v
            }
        };
        if let Some(v) = measured {
            round.insert(a.name.clone(), v);
        }
    }
    (round, itl)
}

/// Live mode: what local work is multiplied by so that it keeps the share of a call it has on
/// the simulator (issue 14: 150 ms of local work beside 30-60 ms calls on a fast server made a
/// one-permit control cost nothing measurable). The first agent's calls run alone, without
/// local work or tools (with the matrix's first runtime variant, after its warm-up); the
/// factor is their measured time over the time the scenario's model
/// is modelled to take for them ([`sim_ollama::advanced::config::ModelSpec::solo_call_ms`]). 1 when the model
/// is not in the catalogue or nothing could be measured.
fn calibrate_local_work(
    exec: &mut dyn Executor,
    d: &Deployment,
    s: &Scenario,
    agents: &[AgentPlan],
    timeout: Duration,
) -> f64 {
    let (Some(spec), Some(first)) = (s.model_spec(), agents.first()) else { return 1.0 };
    let mut probe = first.clone();
    for c in &mut probe.calls {
        c.local_work_ms = 0.0;
        c.tool_work_ms = None;
    }
    let modelled: f64 = probe.calls.iter().map(|c| spec.solo_call_ms(&c.prompt, c.tokens)).sum();
    let recs = exec.run(&Job { time_scale: 1.0, ..job(d, vec![probe], Duration::ZERO, timeout) });
    let measured: f64 = match recs.first() {
        Some(r) if r.calls.iter().all(|c| c.error.is_none()) => {
            r.calls.iter().map(|c| c.end.saturating_duration_since(c.sent).as_secs_f64() * 1e3).sum()
        }
        _ => return 1.0,
    };
    let f = measured / modelled;
    if f.is_finite() && f > 0.0 { f } else { 1.0 }
}

/// Writes a run's timeline SVG; returns its path relative to `dir`.
fn write_timeline(
    dir: &std::path::Path,
    rt: &str,
    scenario: &str,
    r: usize,
    t: &sim_ollama::advanced::trace::TraceSnapshot,
) -> Result<String, MatrixError> {
    let rel = format!("timelines/{rt}__{scenario}__{r}.svg");
    let title = format!("{rt} x {scenario} run {r}");
    let doc = crate::timeline::svg(&title, &crate::timeline::lanes(t))
        .map_err(|e| MatrixError::Output(std::io::Error::other(e)))?;
    std::fs::create_dir_all(dir.join("timelines")).map_err(MatrixError::Output)?;
    report::write_atomic(&dir.join(&rel), doc.as_bytes()).map_err(MatrixError::Output)?;
    Ok(rel)
}

fn shape(recs: &[AgentRecord], wall_s: f64) -> RunShape {
    RunShape { wall_s, agents: recs.iter().map(|a| a.name.clone()).collect() }
}

/// Live mode: what the servers allow this run's agents, measured by the reference client's
/// rounds (`reference_s` is `None` where every reference round failed); `None` without solo
/// durations.
fn live_measured(recs: &[AgentRecord], medians: &BTreeMap<String, f64>, rounds: &Rounds) -> Option<verdict::Measured> {
    let reference_s = rounds.reference();
    let names: Vec<String> = recs.iter().map(|a| a.name.clone()).collect();
    let (sequential_s, ideal_s) = crate::baseline::sequential_and_ideal(&names, medians)?;
    let room_established = rounds.room_established(&names);
    Some(verdict::Measured { reference_s, sequential_s, ideal_s, room_established })
}

/// The runtime the reference client runs on in live mode: the plainest correct variant.
pub(crate) const REFERENCE_RUNTIME: &str = "tokio-default";

/// Live mode: one run of the scenario by the reference client (every agent at once); its wall
/// time from the first call made to the last answer read, or `None` when a call failed.
fn reference_round(exec: &mut dyn Executor, d: &Deployment, agents: &[AgentPlan], timeout: Duration) -> Option<f64> {
    let recs = exec.run(&job(d, agents.to_vec(), Duration::ZERO, timeout));
    if recs.is_empty() || recs.iter().any(|a| a.calls.iter().any(|c| c.error.is_some())) {
        return None;
    }
    let start = recs.iter().map(|a| a.start).min()?;
    let end = recs.iter().map(|a| a.end).max()?;
    Some(end.saturating_duration_since(start).as_secs_f64())
}

/// Runs `attempt` (one concurrent run, judged) and, where the judge asks for another run
/// ([`sim_ollama::Report::needs_rerun`]: the simulator itself late, a stall reading the last
/// answer: what a busy machine does), once more: the second attempt stands, its reason naming
/// the first's. As the pytest fixture and `harness exec` do.
fn unless_late<T, E>(mut attempt: impl FnMut() -> Result<(T, RunResult), E>) -> Result<(T, RunResult), E> {
    let first = attempt()?;
    if !first.1.judge.as_ref().is_some_and(sim_ollama::Report::needs_rerun) {
        return Ok(first);
    }
    let (t, mut run) = attempt()?;
    run.reason.push_str(&format!(" (run twice: the first attempt's verdict was the machine's: {})", first.1.reason));
    Ok((t, run))
}

/// Judges one concurrent run against the solo rounds so far: on the simulator by the judge on
/// its trace, in live mode by the client's view ([`verdict::judge_live`]).
#[allow(clippy::too_many_arguments)]
fn judge_run(
    rt: &str,
    scenario: &str,
    r: usize,
    d: &Deployment,
    recs: &[AgentRecord],
    rounds: &Rounds,
    trace: Option<&sim_ollama::advanced::trace::TraceSnapshot>,
    timeline: Option<String>,
    cpu_wait: Option<Duration>,
) -> RunResult {
    let medians = rounds.medians();
    let (eff, times) = measure::efficiency(recs, &medians);
    let times = times
        .into_iter()
        .map(|mut t| {
            let v = rounds.samples(&t.name);
            t.solo_rounds = v.len();
            t.solo_min_s = v.iter().copied().fold(f64::NAN, f64::min);
            t.solo_max_s = v.iter().copied().fold(f64::NAN, f64::max);
            t
        })
        .collect();
    // Live mode only: the simulator's judge reads the trace, not the baselines.
    let interval = if d.sim.is_none() { rounds.run_interval(&shape(recs, eff.wall_s)) } else { None };
    let (verdict, reason, judged, saving, deployment) = match (&d.sim, trace) {
        (Some(sim), Some(t)) => {
            let (v, reason, rep) = verdict::judge_simulated(t, sim.origin(), recs, &eff, cpu_wait);
            let saving = rep.time.saving.unwrap_or(f64::NAN);
            let deployment = Some(match &d.tolerance {
                Some(tol) => verdict::twin_deployment(rep.deployment.clone(), t, sim.origin(), recs, tol),
                None => rep.deployment.clone(),
            });
            (v, reason, Some(rep), saving, deployment)
        }
        _ => {
            let measured = live_measured(recs, &medians, rounds);
            let verdict::Judged { verdict: v, reason, saving } = verdict::judge_live(&eff, recs, interval, measured);
            let names: Vec<String> = recs.iter().map(|a| a.name.clone()).collect();
            let deployment = measured.and_then(|m| {
                Some(sim_ollama::judge::measured_deployment(
                    m.sequential_s,
                    m.ideal_s,
                    m.reference_s?,
                    verdict::REFERENCE_WORDS,
                    rounds.deployment_interval(&names),
                ))
            });
            (v, reason, None, saving, deployment)
        }
    };
    let calls: Vec<CallMetrics> = recs
        .iter()
        .flat_map(|a| a.calls.iter().enumerate().map(move |(i, c)| CallMetrics::of(&a.name, a.instance, i, c)))
        .collect();
    RunResult {
        runtime: rt.to_string(),
        scenario: scenario.to_string(),
        run: r,
        efficiency: eff,
        saving,
        saving_interval: interval.map(|(a, b)| [a, b]),
        calls_overlapped: d.sim.is_none().then(|| verdict::calls_overlap(recs)),
        verdict,
        reason,
        agents: times,
        calls,
        judge: judged,
        deployment,
        time_scale: d.time_scale,
        local_work_scale: d.local_scale(),
        timeline,
        client_cpu_wait_s: cpu_wait.map(|w| w.as_secs_f64()),
    }
}

/// A cell's control, if its variant is one: its deliberate bug, and why the bug cannot act on
/// the scenario's agents where it cannot ([`runtime::Control::idle`]).
#[derive(Debug, Clone, Copy)]
struct CellControl {
    bug: Option<&'static str>,
    idle: Option<&'static str>,
}

/// Adds runs of one cell to the results (replacing earlier judgements of the same runs),
/// summarises the cell again and writes everything, once. Returns whether the noise left the
/// cell in doubt: inconclusive, with its saving's interval across the parallel line.
fn record(
    results: &mut Results,
    runs: Vec<RunResult>,
    cell: usize,
    control: CellControl,
    plan: &MatrixPlan,
    rounds: &Rounds,
) -> Result<bool, MatrixError> {
    let Some(first) = runs.first() else { return Ok(false) };
    let (rt, sc) = (first.runtime.clone(), first.scenario.clone());
    results.runs.retain(|x| !(x.runtime == rt && x.scenario == sc && runs.iter().any(|r| r.run == x.run)));
    results.runs.extend(runs);
    let cell_runs: Vec<&RunResult> = results.runs.iter().filter(|x| x.runtime == rt && x.scenario == sc).collect();
    // Live mode: how sure the cell's saving is, over its rounds and its judged runs.
    let shapes: Vec<RunShape> = cell_runs
        .iter()
        .filter(|x| x.judge.is_none() && x.verdict != Verdict::Failed)
        .map(|x| RunShape { wall_s: x.efficiency.wall_s, agents: x.agents.iter().map(|a| a.name.clone()).collect() })
        .collect();
    let interval = if matches!(plan.target, Target::Live { .. }) { rounds.cell_interval(&shapes) } else { None };
    let mut summary = report::summarize_cell(&rt, &sc, control.bug, &cell_runs, interval);
    if let Some(why) = control.idle {
        summary.reason = format!("{} (a control whose bug cannot act here: {why})", summary.reason);
        summary.control_idle = Some(why.to_string());
    }
    let live = matches!(plan.target, Target::Live { .. });
    let in_doubt = (summary.verdict == Verdict::Inconclusive
        && interval.is_some_and(|(lo, hi)| sim_ollama::judge::decision::crosses_parallel_line(lo, hi)))
        || (live && deployment_in_doubt(&summary));
    summary.cell = cell;
    results.summary.retain(|c| !(c.runtime == rt && c.scenario == sc));
    results.summary.push(summary);
    report::fill_effect_sizes(results);
    if let Some(dir) = &plan.out {
        report::write_all(dir, results).map_err(MatrixError::Output)?;
    }
    Ok(in_doubt)
}

/// Whether the noise of the rounds alone leaves a live cell's deployment verdict `unknown`: its
/// share of an ideal server's saving has an interval, and its ends lie in two bands (the
/// verdict is `unknown` for that reason only when it has one:
/// [`sim_ollama::judge::measured_deployment`]). More rounds narrow it, as they narrow the
/// client's saving.
fn deployment_in_doubt(summary: &report::CellSummary) -> bool {
    summary
        .deployment
        .as_ref()
        .is_some_and(|d| d.verdict == sim_ollama::judge::Allows::Unknown && d.share_interval.is_some())
}

/// Live mode: judges a cell (`judge` says whether the noise leaves it in doubt) and, while it
/// is in doubt, adds one round at a time (`add`), from `tried` rounds up to `max` in all.
/// Bounded by the rounds tried, not those that succeeded: a round whose every solo run failed
/// adds nothing.
fn until_decided<S, E>(
    state: &mut S,
    mut tried: usize,
    max: usize,
    mut judge: impl FnMut(&S) -> Result<bool, E>,
    mut add: impl FnMut(&mut S),
) -> Result<(), E> {
    while judge(state)? && tried < max {
        add(state);
        tried += 1;
    }
    Ok(())
}

/// The blocking control blocks for a multiple of one solo inter-token gap per token
/// (runtime::BLOCKING_CONTROL_FACTOR; 0 when the baseline had no gaps: a single token), at most
/// a second: the median of the solo calls' mean gaps.
fn blocking_gap(solo_itl: &[f64]) -> Duration {
    Duration::from_secs_f64(if solo_itl.is_empty() { 0.0 } else { percentile(solo_itl, 0.5).clamp(1e-6, 1.0) })
}

/// Runs the plan. It blocks the calling thread until the matrix is done. Each runtime variant
/// builds and drives its own runtime, which cannot be done on a thread that already runs an
/// async runtime; called from async code (a `#[tokio::test]`, say), the matrix therefore runs on
/// a thread of its own while the caller's thread waits for it (use `spawn_blocking` if that
/// runtime must keep serving meanwhile).
pub fn run(plan: &MatrixPlan, progress: &mut dyn Progress) -> Result<Results, MatrixError> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("harness-matrix".into())
                .spawn_scoped(s, || run_here(plan, progress))
                .map_err(|e| MatrixError::Runtime(format!("cannot start the matrix thread: {e}")))?
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        });
    }
    run_here(plan, progress)
}

fn run_here(plan: &MatrixPlan, progress: &mut dyn Progress) -> Result<Results, MatrixError> {
    check_servers(plan)?;
    if let Target::Live { endpoints, model } = &plan.target {
        crate::client::check_live(endpoints, model).map_err(MatrixError::Live)?;
    }
    // The cells to run: every one, or this shard's (by index in the whole matrix).
    let total = plan.scenarios.len() * plan.runtimes.len();
    let shard = plan.shard.map(|sh| Shard { cells: total, ..sh });
    let mine = |c: usize| shard.is_none_or(|sh| sh.holds(c));
    let cells = shard.map_or(total, |sh| sh.held());
    let mut results = Results {
        schema_version: report::SCHEMA_VERSION,
        mode: match plan.target {
            Target::Simulator => "simulator".into(),
            Target::Twin { .. } => "twin".into(),
            Target::Live { .. } => "live".into(),
        },
        server_trace: !matches!(plan.target, Target::Live { .. }),
        seed: plan.seed,
        command: plan.command.clone(),
        thresholds: VerdictBands::default(),
        shard,
        runs: Vec::new(),
        summary: Vec::new(),
    };
    let mut executors: HashMap<String, Box<dyn Executor>> = HashMap::new();
    // Live mode: the reference client, built once, outside every timed region.
    let mut reference: Option<Box<dyn Executor>> = match plan.target {
        Target::Live { .. } => Some(runtime::build(REFERENCE_RUNTIME).map_err(MatrixError::Runtime)?),
        Target::Simulator | Target::Twin { .. } => None,
    };
    let mut cell = 0;
    for (si, s) in plan.scenarios.iter().enumerate() {
        let first = si * plan.runtimes.len();
        if !(first..first + plan.runtimes.len()).any(mine) {
            continue;
        }
        let mut d = deploy(plan, s)?;
        let agents = s.plan(d.urls.len());
        for (ri, rt) in plan.runtimes.iter().enumerate() {
            let index = first + ri;
            if !mine(index) {
                continue;
            }
            cell += 1;
            progress.cell(cell, cells, rt, &s.name);
            // Built once per matrix, outside every timed region.
            if !executors.contains_key(rt) {
                executors.insert(rt.clone(), runtime::build(rt).map_err(MatrixError::Runtime)?);
            }
            let exec = executors.get_mut(rt).map(|b| b.as_mut()).ok_or_else(|| MatrixError::Runtime(rt.clone()))?;
            warm_up(exec, &d, &agents, plan.timeout);
            if d.sized_as_live && d.local_work_scale.is_none() {
                d.local_work_scale = Some(calibrate_local_work(exec, &d, s, &agents, plan.timeout));
            }
            let variant_control = runtime::info(rt).and_then(|v| v.control);
            let mut control = CellControl {
                bug: variant_control.map(|c| c.bug),
                idle: variant_control.and_then(|c| c.idle(&agents)),
            };
            let live = d.sim.is_none();

            // Solo baselines in rounds (each distinct agent alone, once per round): all before
            // the runs on the simulator, spread among them in live mode.
            let slots = round_slots(plan.solo_runs.max(1), plan.runs, live);
            let mut rounds = Rounds::new();
            let mut solo_itl: Vec<f64> = Vec::new();
            let mut to_judge_again: Vec<(usize, Vec<AgentRecord>)> = Vec::new();
            let mut round =
                |exec: &mut dyn Executor, rounds: &mut Rounds, itls: &mut Vec<f64>, progress: &mut dyn Progress| {
                    let (round, itl) = solo_round(exec, &d, &agents, plan.timeout);
                    rounds.push(round);
                    itls.extend(itl);
                    progress.step("solo baseline");
                    // Live mode: what these servers allow a client that holds nothing back,
                    // measured in the same rounds (a server that drifts drifts in it too).
                    if let Some(reference) = reference.as_mut() {
                        if let Some(wall) = reference_round(reference.as_mut(), &d, &agents, plan.timeout) {
                            rounds.push_reference(wall);
                        }
                        progress.step("reference run");
                    }
                };
            for slot in 0..=plan.runs {
                for _ in 0..slots[slot] {
                    round(exec, &mut rounds, &mut solo_itl, progress);
                }
                if control.idle.is_none() && rounds.len() > 0 {
                    // Whether the bug can cost enough to judge: known once the agents ran alone.
                    control.idle =
                        variant_control.and_then(|c| c.idle_by_cost(&agents, &rounds.medians(), d.local_scale()));
                }
                if slot == plan.runs {
                    break;
                }
                let r = slot + 1;
                // On the simulator, a run whose verdict may be the machine's is run once more
                // ([`unless_late`]).
                let (recs, run) = unless_late(|| {
                    if let Some(sim) = &d.sim {
                        sim.clear_trace();
                    }
                    let (recs, cpu_wait) = sim_ollama::advanced::cpu::while_running(|| {
                        exec.run(&job(&d, agents.clone(), blocking_gap(&solo_itl), plan.timeout))
                    });
                    let trace = d.sim.as_ref().map(|sim| {
                        // Answers the agents have read may still be finishing on the server.
                        let _ = sim.wait_idle(Duration::from_secs(2));
                        sim.trace()
                    });
                    let timeline = match (&plan.out, &trace) {
                        (Some(dir), Some(t)) => Some(write_timeline(dir, rt, &s.name, r, t)?),
                        _ => None,
                    };
                    let run = judge_run(rt, &s.name, r, &d, &recs, &rounds, trace.as_ref(), timeline, cpu_wait);
                    Ok((recs, run))
                })?;
                if live {
                    // Judged again when the cell's last solo round is in; shown then.
                    progress.step("concurrent run");
                    to_judge_again.push((r, recs));
                } else {
                    progress.run(&run);
                }
                record(&mut results, vec![run], index, control, plan, &rounds)?;
            }
            if live {
                // Every run of the cell against every solo round of the cell; while the noise
                // leaves the cell in doubt, one more run and one more round after it, up to
                // --max-solo-runs rounds in all (the cell's interval resamples both).
                let judge = |(rounds, runs): &(Rounds, Vec<(usize, Vec<AgentRecord>)>)| {
                    let judged: Vec<RunResult> = runs
                        .iter()
                        .map(|(r, recs)| judge_run(rt, &s.name, *r, &d, recs, rounds, None, None, None))
                        .collect();
                    record(&mut results, judged, index, control, plan, rounds)
                };
                let add = |(rounds, runs): &mut (Rounds, Vec<(usize, Vec<AgentRecord>)>)| {
                    let recs = exec.run(&job(&d, agents.clone(), blocking_gap(&solo_itl), plan.timeout));
                    progress.step("concurrent run");
                    runs.push((runs.len() + 1, recs));
                    round(exec, rounds, &mut solo_itl, &mut *progress);
                };
                let tried = rounds.len();
                until_decided(&mut (rounds, to_judge_again), tried, plan.max_solo_runs, judge, add)?;
                for run in results.runs.iter().filter(|x| x.runtime == *rt && x.scenario == s.name) {
                    progress.run(run);
                }
            }
        }
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::RunShape;
    use sim_ollama::judge::decision::crosses_parallel_line;

    /// Two agents of 1 s alone, a reference client at 1 s: a run of 1.15 s saved 85 % of the
    /// 1 s the servers allow. `a`'s first rounds vary by 30 % either way.
    fn noisy_start() -> (Rounds, Vec<RunShape>) {
        let mut rounds = Rounds::new();
        for a in [0.7, 1.3, 1.0] {
            rounds.push(BTreeMap::from([("a".to_string(), a), ("b".to_string(), 1.0)]));
            rounds.push_reference(1.0);
        }
        (rounds, vec![RunShape { wall_s: 1.15, agents: vec!["a".into(), "b".into()] }])
    }

    fn in_doubt(runs: &[RunShape]) -> impl Fn(&Rounds) -> Result<bool, ()> + '_ {
        |r: &Rounds| Ok(r.cell_interval(runs).is_some_and(|(lo, hi)| crosses_parallel_line(lo, hi)))
    }

    fn round(a: f64) -> impl Fn(&mut Rounds) {
        move |r: &mut Rounds| {
            r.push(BTreeMap::from([("a".to_string(), a), ("b".to_string(), 1.0)]));
            r.push_reference(1.0);
        }
    }

    #[test]
    fn a_run_the_simulator_was_late_for_runs_once_more_and_the_second_attempt_stands() {
        use sim_ollama::advanced::trace::TraceSnapshot;
        use sim_ollama::judge::Cause;
        let empty = TraceSnapshot { schema_version: 2, time_scale: 1.0, dropped: 0, requests: vec![], devices: vec![] };
        let run = |cause: Cause, reason: &str| {
            let mut report = sim_ollama::judge::judge(&empty, &sim_ollama::JudgeOptions::new());
            report.cause = cause;
            report.rerun = cause == Cause::SimulatorLate;
            RunResult {
                judge: Some(report),
                reason: reason.into(),
                ..RunResult::judged("rt", "s", 0.9, Verdict::Parallel)
            }
        };
        // Late, then on time: two attempts, the second standing with the first's reason.
        let mut n = 0;
        let (k, r) = unless_late(|| {
            n += 1;
            Ok::<_, ()>((n, if n == 1 { run(Cause::SimulatorLate, "late") } else { run(Cause::None, "fine") }))
        })
        .unwrap();
        assert_eq!(k, 2);
        assert!(
            r.reason.starts_with("fine (run twice: the first attempt's verdict was the machine's: late"),
            "{}",
            r.reason
        );
        // On time: one attempt. Late twice: the second stands, no third.
        for (cause, attempts) in [(Cause::None, 1), (Cause::SimulatorLate, 2)] {
            let mut n = 0;
            let (k, _) = unless_late(|| {
                n += 1;
                Ok::<_, ()>((n, run(cause, "r")))
            })
            .unwrap();
            assert_eq!(k, attempts, "{cause:?}");
        }
    }

    #[test]
    fn rounds_are_added_while_the_cell_is_in_doubt_and_no_further() {
        let (mut rounds, runs) = noisy_start();
        assert!(in_doubt(&runs)(&rounds).unwrap(), "the start is in doubt: {:?}", rounds.cell_interval(&runs));
        // Steady rounds settle the saving above the line: rounds stop being added then.
        until_decided(&mut rounds, 3, 12, in_doubt(&runs), round(1.0)).unwrap();
        let n = rounds.len();
        assert!(n > 3 && n < 12, "{n} rounds");
        assert!(!in_doubt(&runs)(&rounds).unwrap());
        // Rounds as noisy as the first: in doubt to the end, and stopped at the budget.
        let (mut rounds, runs) = noisy_start();
        let mut k = 0;
        let noisy = |r: &mut Rounds| {
            k += 1;
            round(if k % 2 == 0 { 0.7 } else { 1.3 })(r)
        };
        until_decided(&mut rounds, 3, 9, in_doubt(&runs), noisy).unwrap();
        assert_eq!(rounds.len(), 9);
        assert!(in_doubt(&runs)(&rounds).unwrap());
        // Rounds whose every solo run failed add nothing: still bounded by the rounds tried.
        let (mut rounds, runs) = noisy_start();
        let mut tried = 0;
        until_decided(&mut rounds, 3, 9, in_doubt(&runs), |_| tried += 1).unwrap();
        assert_eq!((rounds.len(), tried), (3, 6));
        // A budget no larger than the rounds in: none added.
        let (mut rounds, runs) = noisy_start();
        until_decided(&mut rounds, 3, 3, in_doubt(&runs), round(1.0)).unwrap();
        assert_eq!(rounds.len(), 3);
    }
}
