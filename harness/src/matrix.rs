//! Runs a matrix: runtime variants x scenarios x runs, with solo baselines, on the embedded
//! simulator (one per scenario, with the scenario's deployment preset) or against live
//! servers. Results are written after every run.

use crate::measure::{self, CallMetrics};
use crate::report::{self, Results, RunResult, VerdictBands};
use crate::runtime::{self, AgentRecord, Executor, Job};
use crate::stats::percentile;
use crate::verdict;
use crate::workload::{AgentPlan, Scenario};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

/// Where the agents' requests go.
#[derive(Debug, Clone)]
pub enum Target {
    /// A simulator started in this process for each scenario.
    Simulator,
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
    /// Where requests go.
    pub target: Target,
    /// Output directory (nothing written when absent).
    pub out: Option<PathBuf>,
    /// A call slower than this is abandoned with an error.
    pub timeout: Duration,
    /// The command line, for the report.
    pub command: String,
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
    time_scale: f64,
}

fn deploy(plan: &MatrixPlan, s: &Scenario) -> Result<Deployment, MatrixError> {
    let time_scale = plan.time_scale.or(s.time_scale).unwrap_or(0.01);
    match &plan.target {
        Target::Simulator => {
            let sim = sim_ollama::SimBuilder::new()
                .preset(&s.preset)
                .map_err(|e| MatrixError::Simulator(e.to_string()))?
                .seed(plan.seed)
                .time_scale(time_scale)
                .start()
                .map_err(|e| MatrixError::Simulator(e.to_string()))?;
            let urls = sim.urls().to_vec();
            Ok(Deployment { sim: Some(sim), urls, model: s.model.clone(), time_scale })
        }
        Target::Live { endpoints, model } => {
            Ok(Deployment { sim: None, urls: endpoints.clone(), model: model.clone(), time_scale: 1.0 })
        }
    }
}

/// Checks that every live endpoint answers and has the model.
pub fn check_live(endpoints: &[String], model: &str) -> Result<(), MatrixError> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| MatrixError::Live(e.to_string()))?;
    let want = if model.contains(':') { model.to_string() } else { format!("{model}:latest") };
    for url in endpoints {
        let (client, u) = (client.clone(), format!("{url}/api/tags"));
        let r = crate::client::bridge_blocking(async move {
            let resp = client
                .get(&u)
                .send()
                .await
                .map_err(|e| format!("cannot reach {u}: {}", crate::client::describe_error(&e)))?;
            if !resp.status().is_success() {
                return Err(format!("{u} answered HTTP {}", resp.status().as_u16()));
            }
            resp.json::<serde_json::Value>().await.map_err(|e| format!("{u} did not answer like Ollama: {e}"))
        })
        .map_err(MatrixError::Live)?;
        let has = r["models"]
            .as_array()
            .is_some_and(|m| m.iter().any(|x| x["name"].as_str().is_some_and(|n| n.eq_ignore_ascii_case(&want))));
        if !has {
            return Err(MatrixError::Live(format!(
                "{url} does not have the model {want} (pull it first: ollama pull {model})"
            )));
        }
    }
    Ok(())
}

fn job(d: &Deployment, agents: Vec<AgentPlan>, token_gap: Duration, timeout: Duration) -> Job {
    Job { agents, urls: d.urls.clone(), model: d.model.clone(), time_scale: d.time_scale, token_gap, timeout }
}

fn duration_s(a: &AgentRecord) -> f64 {
    a.end.saturating_duration_since(a.start).as_secs_f64()
}

/// Loads the model on every instance with each agent's runner options (one token), so no
/// timed run pays for a load.
fn warm_up(exec: &mut dyn Executor, d: &Deployment, agents: &[AgentPlan], timeout: Duration) {
    let mut seen = Vec::new();
    for a in agents {
        let key = (a.instance, serde_json::to_string(&a.calls[0].options).unwrap_or_default());
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
    if let Target::Live { endpoints, model } = &plan.target {
        check_live(endpoints, model)?;
    }
    let mut results = Results {
        schema_version: report::SCHEMA_VERSION,
        mode: match plan.target {
            Target::Simulator => "simulator".into(),
            Target::Live { .. } => "live".into(),
        },
        server_trace: matches!(plan.target, Target::Simulator),
        seed: plan.seed,
        command: plan.command.clone(),
        thresholds: VerdictBands::default(),
        runs: Vec::new(),
        summary: Vec::new(),
    };
    let mut executors: HashMap<String, Box<dyn Executor>> = HashMap::new();
    let cells = plan.scenarios.len() * plan.runtimes.len();
    let mut cell = 0;
    for s in &plan.scenarios {
        let d = deploy(plan, s)?;
        let agents = s.plan(d.urls.len());
        for rt in &plan.runtimes {
            cell += 1;
            progress.cell(cell, cells, rt, &s.name);
            // Built once per matrix, outside every timed region.
            if !executors.contains_key(rt) {
                executors.insert(rt.clone(), runtime::build(rt).map_err(MatrixError::Runtime)?);
            }
            let exec = executors.get_mut(rt).map(|b| b.as_mut()).ok_or_else(|| MatrixError::Runtime(rt.clone()))?;
            warm_up(exec, &d, &agents, plan.timeout);

            // Solo baselines: each distinct agent (instance and calls) alone, median of runs.
            let mut solo: BTreeMap<String, f64> = BTreeMap::new();
            let mut solo_itl: Vec<f64> = Vec::new();
            let mut by_shape: Vec<((usize, String), f64)> = Vec::new();
            for a in &agents {
                let shape = (a.instance, format!("{:?}", a.calls));
                if let Some((_, v)) = by_shape.iter().find(|(k, _)| *k == shape) {
                    solo.insert(a.name.clone(), *v);
                    continue;
                }
                let mut ds = Vec::new();
                for _ in 0..plan.solo_runs.max(1) {
                    let recs = exec.run(&job(&d, vec![a.clone()], Duration::ZERO, plan.timeout));
                    // A failed solo run is no baseline: its duration is the failure's.
                    if let Some(r) = recs.first().filter(|r| r.calls.iter().all(|c| c.error.is_none())) {
                        ds.push(duration_s(r));
                        // The mean gap of each call (first to last token over the gaps), not
                        // every gap: tokens that arrive bunched in one read would make the
                        // median gap ~0 on a loaded machine, and the blocking control's sleep
                        // with it.
                        for c in &r.calls {
                            if let (Some(a), Some(b), true) = (c.tokens.first(), c.tokens.last(), c.tokens.len() > 1) {
                                solo_itl.push((*b - *a).as_secs_f64() / (c.tokens.len() - 1) as f64);
                            }
                        }
                    }
                }
                let m = percentile(&ds, 0.5);
                solo.insert(a.name.clone(), m);
                by_shape.push((shape, m));
                progress.step("solo baseline");
            }
            // The blocking control blocks for a multiple of one solo inter-token gap per token
            // (runtime::BLOCKING_CONTROL_FACTOR; 0 when the baseline had no gaps: a single
            // token), at most a second: the median of the solo calls' mean gaps.
            let gap = Duration::from_secs_f64(if solo_itl.is_empty() {
                0.0
            } else {
                percentile(&solo_itl, 0.5).clamp(1e-6, 1.0)
            });
            let control = runtime::info(rt).and_then(|v| v.control);

            for r in 1..=plan.runs {
                if let Some(sim) = &d.sim {
                    sim.clear_trace();
                }
                let recs = exec.run(&job(&d, agents.clone(), gap, plan.timeout));
                let (eff, times) = measure::efficiency(&recs, &solo);
                let trace = d.sim.as_ref().map(|sim| {
                    // Answers the agents have read may still be finishing on the server.
                    let _ = sim.wait_idle(Duration::from_secs(2));
                    sim.trace()
                });
                let timeline = match (&plan.out, &trace) {
                    (Some(dir), Some(t)) => {
                        let rel = format!("timelines/{rt}__{}__{r}.svg", s.name);
                        let title = format!("{rt} x {} run {r}", s.name);
                        let doc = crate::timeline::svg(&title, &crate::timeline::lanes(t))
                            .map_err(|e| MatrixError::Output(std::io::Error::other(e)))?;
                        std::fs::create_dir_all(dir.join("timelines")).map_err(MatrixError::Output)?;
                        report::write_atomic(&dir.join(&rel), doc.as_bytes()).map_err(MatrixError::Output)?;
                        Some(rel)
                    }
                    _ => None,
                };
                let (v, reason, judged, saving) = match (&d.sim, &trace) {
                    (Some(sim), Some(t)) => {
                        let (v, reason, rep) = verdict::judge_simulated(t, sim.origin(), &recs, &eff);
                        let saving = rep.time.saving.unwrap_or(f64::NAN);
                        (v, reason, Some(rep), saving)
                    }
                    _ => {
                        let (v, reason) = verdict::judge_live(&eff, &recs);
                        (v, reason, None, eff.saving)
                    }
                };
                let calls: Vec<CallMetrics> = recs
                    .iter()
                    .flat_map(|a| {
                        a.calls.iter().enumerate().map(move |(i, c)| CallMetrics::of(&a.name, a.instance, i, c))
                    })
                    .collect();
                let run = RunResult {
                    runtime: rt.clone(),
                    scenario: s.name.clone(),
                    run: r,
                    wall_s: eff.wall_s,
                    efficiency_true: eff.efficiency_true,
                    efficiency_apparent: eff.efficiency_apparent,
                    speedup: eff.speedup,
                    saving,
                    verdict: v,
                    reason,
                    agents: times,
                    calls,
                    judge: judged,
                    time_scale: d.time_scale,
                    timeline,
                };
                progress.run(&run);
                results.runs.push(run);
                let cell_runs: Vec<&RunResult> =
                    results.runs.iter().filter(|x| &x.runtime == rt && x.scenario == s.name).collect();
                let summary = report::summarize_cell(rt, &s.name, control, &cell_runs);
                results.summary.retain(|c| !(&c.runtime == rt && c.scenario == s.name));
                results.summary.push(summary);
                report::fill_effect_sizes(&mut results);
                if let Some(dir) = &plan.out {
                    report::write_all(dir, &results).map_err(MatrixError::Output)?;
                }
            }
        }
    }
    Ok(results)
}
