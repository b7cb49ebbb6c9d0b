//! The data model of a matrix's results: every run, a summary per cell, the shard a file
//! holds, and how shards merge. `report` writes it as JSON, Markdown, CSV and HTML.

use crate::measure::{AgentTimes, CallMetrics, Efficiency};
use crate::stats::{Summary, percentile, summarize};
use crate::verdict::{PARALLEL_MIN_SAVING, SERIALIZED_MAX_SAVING, Verdict};
use serde::{Deserialize, Serialize};

/// Version of `results.json`'s schema (5: `shard`, and each cell's `cell` index; 6: `mode`
/// `twin`, and each cell's `twin_deployment` in live mode with `--twin`).
pub const SCHEMA_VERSION: u32 = 6;

fn one() -> f64 {
    1.0
}

fn nan() -> f64 {
    f64::NAN
}

/// One run of one cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    /// Runtime variant.
    pub runtime: String,
    /// Scenario.
    pub scenario: String,
    /// Run number, from 1.
    pub run: usize,
    /// Wall time, true and apparent efficiency and speedup against the solo baselines
    /// (time-scaled on the simulator), written as fields of the run.
    #[serde(flatten)]
    pub efficiency: Efficiency,
    /// Share of the possible saving achieved, as the verdict read it: (one at a time - wall) /
    /// (one at a time - allowed), 1.0 = as fast as the deployment allows, 0.0 = no faster than
    /// one after the other. On the simulator the judge's (modelled solo costs, `judge.time`),
    /// in live mode against the measured solo baselines and reference rounds. Unlike the true
    /// efficiency it is 1.0 for a perfect run of unequal agents, so verdicts use it. NaN where
    /// the deployment allows (next to) no saving: the overlap evidence decided.
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub saving: f64,
    /// Live mode with two or more solo rounds: the 80 % bootstrap interval of `saving` over
    /// the rounds (resampled; see `harness/src/baseline.rs`).
    #[serde(default)]
    pub saving_interval: Option<[f64; 2]>,
    /// Live mode: whether calls of two agents were ever in flight together, as the client saw
    /// them (`false` decides a serialized verdict by itself); absent on the simulator, whose
    /// judge reads the server's trace.
    #[serde(default)]
    pub calls_overlapped: Option<bool>,
    /// parallel / degraded / serialized / inconclusive / failed.
    pub verdict: Verdict,
    /// Why, in a sentence.
    pub reason: String,
    /// Each agent's solo and concurrent durations.
    pub agents: Vec<AgentTimes>,
    /// Per-call client metrics.
    pub calls: Vec<CallMetrics>,
    /// The simulator's judge on the run's trace (absent in live mode).
    pub judge: Option<sim_ollama::Report>,
    /// The deployment verdict: the judge's on the simulator; in live mode measured with the
    /// reference client (absent without reference rounds).
    #[serde(default)]
    pub deployment: Option<sim_ollama::judge::DeploymentReport>,
    /// The time scale the run ran at (1.0 in live mode).
    #[serde(default = "one", deserialize_with = "crate::stats::nan_or")]
    pub time_scale: f64,
    /// What the scenario's local work (modelled ms) was multiplied by: the time scale on the
    /// simulator; in live mode the measured call time over the modelled one, so local work
    /// keeps its share of a call.
    #[serde(default = "one", deserialize_with = "crate::stats::nan_or")]
    pub local_work_scale: f64,
    /// Path of the run's SVG timeline, relative to the output directory (simulator mode with
    /// an output directory only).
    #[serde(default)]
    pub timeline: Option<String>,
    /// On the simulator, where Linux keeps the figures: how long the client's threads waited for
    /// a CPU during the run, s (`sim-ollama/src/cpu.rs`), which the judge weighs against the
    /// time lost where answers reached the agents late.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_wait_s: Option<f64>,
}

#[cfg(test)]
impl RunResult {
    /// A run for the crate's tests: one of `runtime` x `scenario`, judged `verdict` with
    /// `saving`, of 1 s at a true efficiency of 50 %, with no agents, calls or trace.
    pub(crate) fn judged(runtime: &str, scenario: &str, saving: f64, verdict: Verdict) -> RunResult {
        RunResult {
            runtime: runtime.into(),
            scenario: scenario.into(),
            run: 1,
            efficiency: Efficiency { wall_s: 1.0, efficiency_true: 0.5, efficiency_apparent: 0.5, speedup: 1.0 },
            saving,
            saving_interval: None,
            calls_overlapped: None,
            verdict,
            reason: verdict.to_string(),
            agents: Vec::new(),
            calls: Vec::new(),
            judge: None,
            deployment: None,
            time_scale: 1.0,
            local_work_scale: 1.0,
            timeline: None,
            client_cpu_wait_s: None,
        }
    }
}

/// Statistics and verdict of one cell (runtime x scenario).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellSummary {
    /// Its place in the whole matrix (scenarios in the order given, then runtimes), from 0:
    /// the order `harness merge` puts shards' cells back in.
    #[serde(default)]
    pub cell: usize,
    /// Runtime variant.
    pub runtime: String,
    /// Scenario.
    pub scenario: String,
    /// The control's deliberate bug, for control variants.
    pub control: Option<String>,
    /// For a control whose bug cannot act on this scenario's agents, why (one connection per
    /// server, one agent per server): its parallel verdict is then right, not a control that
    /// escaped. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_idle: Option<String>,
    /// Runs.
    pub runs: usize,
    /// True efficiency over runs.
    pub efficiency_true: Summary,
    /// Apparent (study) efficiency over runs.
    pub efficiency_apparent: Summary,
    /// Speedup over runs.
    pub speedup: Summary,
    /// Share of the possible saving, over runs.
    pub saving: Summary,
    /// Live mode: the 80 % bootstrap interval of the cell's saving (the median run's), over
    /// the solo rounds and the runs; a cell whose interval crosses the parallel line is
    /// inconclusive.
    #[serde(default)]
    pub saving_interval: Option<[f64; 2]>,
    /// Wall time over runs, seconds.
    pub wall_s: Summary,
    /// The time scale the cell ran at (1.0 in live mode): modelled time = wall / time scale.
    #[serde(default = "one", deserialize_with = "crate::stats::nan_or")]
    pub time_scale: f64,
    /// Median TTFT over all calls, ms of wall time.
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub ttft_ms_p50: f64,
    /// Median inter-token latency over all calls, ms of wall time.
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub itl_ms_p50: f64,
    /// 99th percentile of the calls' ITL p99, ms.
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub itl_ms_p99: f64,
    /// Median time to the first token of reasoning over the calls that reasoned, ms of wall
    /// time (NaN when none did; `ttft_ms_p50` is then the time to the answer's first token).
    #[serde(default = "nan", deserialize_with = "crate::stats::nan_or")]
    pub ttft_thinking_ms_p50: f64,
    /// Median server-reported prompt evaluation over calls, ms of wall time (NaN when no
    /// server reported one).
    #[serde(default = "nan", deserialize_with = "crate::stats::nan_or")]
    pub prompt_eval_ms_p50: f64,
    /// Median client-side tokens/s over calls.
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub tok_per_s_p50: f64,
    /// The cell's verdict (from its median run).
    pub verdict: Verdict,
    /// The median run's reason.
    pub reason: String,
    /// What the median run's client verdict blamed (simulator runs; absent in live mode).
    #[serde(default)]
    pub cause: Option<sim_ollama::judge::Cause>,
    /// The median run's deployment verdict: how much speedup the deployment allows this
    /// scenario and what limits it (in live mode measured with the reference client, its limit
    /// unnamed).
    #[serde(default)]
    pub deployment: Option<sim_ollama::judge::DeploymentReport>,
    /// Live mode with `--twin`: the deployment verdict the twin predicted for this scenario
    /// (its reference client, one run), beside the one the live servers gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twin_deployment: Option<sim_ollama::judge::DeploymentReport>,
    /// Runs per verdict.
    pub verdicts: std::collections::BTreeMap<String, usize>,
    /// Runs that failed (a call failed, or nothing to judge them by): excluded from every
    /// figure above but counted here and in `runs`.
    #[serde(default)]
    pub failed_runs: usize,
    /// Cohen's d of this cell's true efficiency against the same scenario's `tokio-default`
    /// cell (absent for that cell, or when it did not run).
    #[serde(default)]
    pub effect_size_vs_tokio_default: Option<f64>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `simulator` or `live`.
    pub mode: String,
    /// Whether runs carry the simulator's trace evidence (false in live mode).
    pub server_trace: bool,
    /// Master seed of the simulator.
    pub seed: u64,
    /// The command line.
    pub command: String,
    /// Verdict bands, for readers of the file.
    pub thresholds: VerdictBands,
    /// Which share of the matrix this file holds (`harness matrix --shard K/N`); absent for a
    /// whole matrix, merged or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// Every run, in the order they ran.
    pub runs: Vec<RunResult>,
    /// One entry per cell.
    pub summary: Vec<CellSummary>,
}

/// A share of a matrix: shard `index` (1-based) of `count` holds the cells whose index `c`
/// (0-based, scenarios in the order given, then runtimes) has `c % count == index - 1`, so
/// shards are deterministic and each gets cells of every scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which shard, from 1.
    pub index: usize,
    /// How many shards.
    pub count: usize,
    /// Cells in the whole matrix.
    pub cells: usize,
}

impl Shard {
    /// Parses `K/N` (1 <= K <= N); `cells` is the whole matrix's.
    pub fn parse(text: &str, cells: usize) -> Result<Shard, String> {
        let bad = || format!("--shard wants K/N with 1 <= K <= N (shard K of N), got {text:?}");
        let (k, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count): (usize, usize) =
            (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count, cells })
    }

    /// Whether cell `c` is this shard's.
    pub fn holds(&self, c: usize) -> bool {
        c % self.count == self.index - 1
    }

    /// How many of the matrix's cells are this shard's.
    pub fn held(&self) -> usize {
        (0..self.cells).filter(|&c| self.holds(c)).count()
    }
}

/// Combines the shards of one matrix (`harness matrix --shard K/N`, every K of one N) into the
/// results of the whole matrix: the cells and runs in the unsharded order, the effect sizes
/// recomputed over all of them. Refuses shards of different matrices (mode, seed, bands,
/// schema, shard count) and names the shards or cells missing or given twice.
pub fn merge(parts: Vec<(String, Results)>) -> Result<Results, String> {
    let Some((first_name, first)) = parts.first() else {
        return Err("nothing to merge: give the shards' directories".into());
    };
    let mut seen = std::collections::BTreeMap::new();
    let mut count = None;
    for (name, r) in &parts {
        if r.schema_version != SCHEMA_VERSION {
            return Err(format!("{name}: results schema {}; this harness reads {SCHEMA_VERSION}", r.schema_version));
        }
        let Some(sh) = r.shard else { return Err(format!("{name}: not a shard (made without --shard K/N)")) };
        if *count.get_or_insert((sh.count, sh.cells)) != (sh.count, sh.cells) {
            return Err(format!(
                "{name}: shard {}/{} of {} cells, but {first_name} is of another matrix",
                sh.index, sh.count, sh.cells
            ));
        }
        if r.mode != first.mode || r.seed != first.seed || r.server_trace != first.server_trace {
            return Err(format!("{name}: another matrix than {first_name} (mode {}, seed {})", r.mode, r.seed));
        }
        if let Some(other) = seen.insert(sh.index, name.clone()) {
            return Err(format!("shard {}/{} given twice: {other} and {name}", sh.index, sh.count));
        }
    }
    let (n, cells) = count.unwrap_or((0, 0));
    let missing: Vec<String> = (1..=n).filter(|k| !seen.contains_key(k)).map(|k| format!("{k}/{n}")).collect();
    if !missing.is_empty() {
        return Err(format!("shard(s) {} missing: every shard of the matrix is needed", missing.join(", ")));
    }
    let mut summary: Vec<CellSummary> = parts.iter().flat_map(|(_, r)| r.summary.iter().cloned()).collect();
    summary.sort_by_key(|c| c.cell);
    let indices: Vec<usize> = summary.iter().map(|c| c.cell).collect();
    if indices != (0..cells).collect::<Vec<_>>() {
        let list = |v: Vec<usize>| {
            let more = if v.len() > 10 { format!(" and {} more", v.len() - 10) } else { String::new() };
            format!("{}{more}", v.iter().take(10).map(usize::to_string).collect::<Vec<_>>().join(", "))
        };
        let missing: Vec<usize> = (0..cells).filter(|c| !indices.contains(c)).collect();
        let twice: Vec<usize> = indices.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
        let mut what = Vec::new();
        if !missing.is_empty() {
            what.push(format!("cell(s) {} missing (an interrupted shard? run it again)", list(missing)));
        }
        if !twice.is_empty() {
            what.push(format!("cell(s) {} in more than one shard (shards of different plans?)", list(twice)));
        }
        return Err(format!("the shards do not make the matrix of {cells} cells: {}", what.join("; ")));
    }
    let order: std::collections::HashMap<(&str, &str), usize> =
        summary.iter().map(|c| ((c.runtime.as_str(), c.scenario.as_str()), c.cell)).collect();
    let mut runs: Vec<RunResult> = parts.iter().flat_map(|(_, r)| r.runs.iter().cloned()).collect();
    runs.sort_by_key(|x| (order.get(&(x.runtime.as_str(), x.scenario.as_str())).copied().unwrap_or(usize::MAX), x.run));
    let words: Vec<&str> = first.command.split(' ').collect();
    let mut command = Vec::new();
    let mut skip = false;
    for w in words {
        if std::mem::take(&mut skip) || w.starts_with("--shard=") {
            continue;
        }
        if w == "--shard" {
            skip = true;
            continue;
        }
        command.push(w);
    }
    let mut merged = Results {
        schema_version: SCHEMA_VERSION,
        mode: first.mode.clone(),
        server_trace: first.server_trace,
        seed: first.seed,
        command: format!("{} (merged from {n} shards)", command.join(" ")),
        thresholds: first.thresholds,
        shard: None,
        runs,
        summary,
    };
    fill_effect_sizes(&mut merged);
    Ok(merged)
}

/// The verdict bands, on the share of the possible saving (not the per-cell expectations of
/// `harness/thresholds.toml`, which are [`crate::thresholds::Thresholds`]).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct VerdictBands {
    /// A saving at or above this is parallel.
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub parallel_min_saving: f64,
    /// A saving at or below this is serialized.
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub serialized_max_saving: f64,
}

impl Default for VerdictBands {
    fn default() -> Self {
        VerdictBands { parallel_min_saving: PARALLEL_MIN_SAVING, serialized_max_saving: SERIALIZED_MAX_SAVING }
    }
}

/// How far a verdict is from parallel, for ordering runs: the cell takes its median run, so
/// a verdict that is not parallel (inconclusive included) never lifts a cell above its evidence.
fn rank(v: Verdict) -> u8 {
    match v {
        Verdict::Failed => 0,
        Verdict::Serialized => 1,
        Verdict::PartlySerialized => 2,
        Verdict::Inconclusive => 3,
        Verdict::Parallel => 4,
    }
}

/// Summarises the runs of one cell. `interval` is the live cell's 80 % interval of the saving
/// (a bootstrap over its solo rounds and runs): a cell whose median run reads parallel, or
/// short of parallel by its saving, while the interval lies on both sides of the parallel
/// line, is inconclusive.
pub(crate) fn summarize_cell(
    runtime: &str,
    scenario: &str,
    control: Option<&str>,
    all: &[&RunResult],
    interval: Option<(f64, f64)>,
) -> CellSummary {
    // Failed runs are no evidence: their figures are left out, their number and first reason
    // are told. A cell whose every run failed is failed.
    let runs: Vec<&RunResult> = all.iter().copied().filter(|r| r.verdict != Verdict::Failed).collect();
    let failed: Vec<&RunResult> = all.iter().copied().filter(|r| r.verdict == Verdict::Failed).collect();
    let runs = &runs[..];
    let f = |g: fn(&RunResult) -> f64| summarize(&runs.iter().map(|r| g(r)).collect::<Vec<_>>());
    let calls: Vec<&CallMetrics> = runs.iter().flat_map(|r| r.calls.iter()).collect();
    let col = |g: fn(&CallMetrics) -> Option<f64>| calls.iter().filter_map(|c| g(c)).collect::<Vec<f64>>();
    // The median run gives the cell's verdict and reason: runs ordered by verdict, then by
    // saving; of an even number of runs, the lower of the two middle ones, so a cell of two
    // runs is parallel only if both were. Runs with nothing to save (NaN) sort first among
    // their verdict: they never lift a cell.
    let mut sorted: Vec<&&RunResult> = runs.iter().collect();
    sorted.sort_by(|a, b| {
        let key = |r: &RunResult| if r.saving.is_nan() { f64::NEG_INFINITY } else { r.saving };
        rank(a.verdict).cmp(&rank(b.verdict)).then(key(a).total_cmp(&key(b)))
    });
    let median = sorted.get(sorted.len().saturating_sub(1) / 2);
    let mut verdicts = std::collections::BTreeMap::new();
    for r in all {
        *verdicts.entry(r.verdict.to_string()).or_insert(0) += 1;
    }
    let mut reason =
        median.map_or_else(|| failed.first().map_or_else(String::new, |r| r.reason.clone()), |r| r.reason.clone());
    if median.is_some() && !failed.is_empty() {
        reason.push_str(&format!(
            " ({} of {} runs failed and are left out: {})",
            failed.len(),
            all.len(),
            failed[0].reason
        ));
    }
    let mut verdict = median.map_or(Verdict::Failed, |r| r.verdict);
    // Live cells: noise that could move the cell across the parallel line makes it
    // inconclusive, whichever side the median run fell on, unless the median run was
    // serialized by the calls' order (no two ever overlapped): that does not rest on timings.
    if let (Some((lo, hi)), Some(m)) = (interval, median) {
        let by_order = m.verdict == Verdict::Serialized && m.calls_overlapped == Some(false);
        // A run on servers that allow no saving has none (NaN): its verdict came from the
        // overlap, not from a saving the noise could move.
        let by_saving = matches!(verdict, Verdict::Parallel | Verdict::PartlySerialized | Verdict::Serialized)
            && !by_order
            && !m.saving.is_nan();
        if by_saving && sim_ollama::judge::decision::crosses_parallel_line(lo, hi) {
            verdict = Verdict::Inconclusive;
            reason = format!(
                "too noisy to tell: the cell's saving lies between {:.0}% and {:.0}% (80% interval over its solo rounds and runs), on both sides of the {:.0}% parallel line; the median run: {reason}",
                lo * 100.0,
                hi * 100.0,
                PARALLEL_MIN_SAVING * 100.0
            );
        }
    }
    CellSummary {
        cell: 0,
        runtime: runtime.to_string(),
        scenario: scenario.to_string(),
        control: control.map(str::to_string),
        control_idle: None,
        runs: all.len(),
        efficiency_true: f(|r| r.efficiency.efficiency_true),
        efficiency_apparent: f(|r| r.efficiency.efficiency_apparent),
        speedup: f(|r| r.efficiency.speedup),
        saving: f(|r| r.saving),
        saving_interval: interval.map(|(a, b)| [a, b]),
        wall_s: f(|r| r.efficiency.wall_s),
        time_scale: all.first().map_or(1.0, |r| r.time_scale),
        ttft_ms_p50: percentile(&col(|c| c.ttft_ms), 0.5),
        itl_ms_p50: percentile(&col(|c| c.itl_p50_ms), 0.5),
        itl_ms_p99: percentile(&col(|c| c.itl_p99_ms), 0.99),
        tok_per_s_p50: percentile(&col(|c| c.tok_per_s), 0.5),
        prompt_eval_ms_p50: percentile(&col(|c| c.prompt_eval_ms), 0.5),
        ttft_thinking_ms_p50: percentile(&col(|c| c.ttft_thinking_ms), 0.5),
        verdict,
        reason,
        cause: median.and_then(|r| r.judge.as_ref()).map(|j| j.cause),
        // The median run's, unless a run's requests were refused by the server's queue: the
        // refusals are what the deployment did to the cell (a refused run fails, so the median
        // run is one the queue spared). A cell whose every run failed has its first run's.
        deployment: all
            .iter()
            .filter_map(|r| r.deployment.as_ref())
            .find(|d| d.limit == sim_ollama::judge::Limit::Queue)
            .or_else(|| median.and_then(|r| r.deployment.as_ref()))
            .or_else(|| failed.first().and_then(|r| r.deployment.as_ref()))
            .cloned(),
        twin_deployment: None,
        verdicts,
        failed_runs: failed.len(),
        effect_size_vs_tokio_default: None,
    }
}

/// The baseline variant effect sizes are measured against.
pub(crate) const EFFECT_BASELINE: &str = "tokio-default";

/// Fills every cell's effect size against the same scenario's baseline cell.
pub(crate) fn fill_effect_sizes(r: &mut Results) {
    let eff = |rt: &str, sc: &str| -> Vec<f64> {
        r.runs
            .iter()
            .filter(|x| x.runtime == rt && x.scenario == sc && x.verdict != Verdict::Failed)
            .map(|x| x.efficiency.efficiency_true)
            .collect()
    };
    let sizes: Vec<Option<f64>> = r
        .summary
        .iter()
        .map(|c| {
            if c.runtime == EFFECT_BASELINE {
                return None;
            }
            let base = eff(EFFECT_BASELINE, &c.scenario);
            let d = crate::stats::cohens_d(&base, &eff(&c.runtime, &c.scenario));
            (!base.is_empty() && !d.is_nan()).then_some(d)
        })
        .collect();
    for (c, d) in r.summary.iter_mut().zip(sizes) {
        c.effect_size_vs_tokio_default = d;
    }
}
