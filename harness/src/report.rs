//! Reports: `results.json` (every run and a summary per cell), `summary.md` (a table like
//! the study's, with true and apparent efficiency side by side), CSV, and `report.html`
//! (charts and links to every run's timeline). Files are rewritten
//! atomically after every run, so an interrupted matrix keeps what it finished.

use crate::measure::{AgentTimes, CallMetrics};
use crate::stats::{Summary, percentile, summarize};
use crate::verdict::{PARALLEL_MIN_SAVING, SERIALIZED_MAX_SAVING, Verdict};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Version of `results.json`'s schema (5: `shard`, and each cell's `cell` index).
pub const SCHEMA_VERSION: u32 = 5;

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
    /// Wall time of the concurrent run, seconds (time-scaled on the simulator).
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub wall_s: f64,
    /// Sum of solo durations / (agents x wall).
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub efficiency_true: f64,
    /// The study's formula: sum of concurrent durations / (agents x wall).
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub efficiency_apparent: f64,
    /// Sum of solo durations / wall.
    #[serde(deserialize_with = "crate::stats::nan_or")]
    pub speedup: f64,
    /// Share of the possible saving achieved, as the verdict read it: on the simulator the
    /// judge's (modelled solo costs, `judge.time`), in live mode against the measured solo
    /// baselines. NaN when there was nothing to save.
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
        if by_saving && crate::verdict::crosses_parallel_line(lo, hi) {
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
        runs: all.len(),
        efficiency_true: f(|r| r.efficiency_true),
        efficiency_apparent: f(|r| r.efficiency_apparent),
        speedup: f(|r| r.speedup),
        saving: f(|r| r.saving),
        saving_interval: interval.map(|(a, b)| [a, b]),
        wall_s: f(|r| r.wall_s),
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
        deployment: median.and_then(|r| r.deployment.clone()),
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
            .map(|x| x.efficiency_true)
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

fn pct(x: f64) -> String {
    if x.is_nan() { "-".into() } else { format!("{:.1}", x * 100.0) }
}

/// The Markdown summary.
pub fn markdown(r: &Results) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Runtime x scenario matrix\n");
    let _ = writeln!(
        s,
        "Mode: {} (seed {}){}. True efficiency = sum of solo durations / (agents x concurrent wall); apparent = the study's formula (sum of concurrent durations / (agents x wall)); saving = the client's share of the time saving the deployment allows. Two verdicts: the **client** verdict (did the program overlap its agents as far as the deployment allows: parallel at a saving >= {:.0} %, serialized at <= {:.0} %, partly serialized in between; where the deployment allows no saving, the overlap decides) and the **deployment** verdict (how much of an ideal server's saving the deployment allows, and what limits it).\n",
        r.mode,
        r.seed,
        if r.server_trace {
            ""
        } else {
            "; no server trace in live mode, reasons come from client timings only: a run whose calls never overlapped is serialized, and a run or cell whose saving's 80 % interval over the solo rounds crosses the parallel line is inconclusive"
        },
        r.thresholds.parallel_min_saving * 100.0,
        r.thresholds.serialized_max_saving * 100.0
    );
    // What each scenario's deployment allows, from the first cell of it that has a verdict:
    // the replay of a perfectly concurrent client depends on the scenario, not the runtime.
    let mut scenarios: Vec<&CellSummary> = Vec::new();
    for c in &r.summary {
        if c.deployment.is_some() && !scenarios.iter().any(|x| x.scenario == c.scenario) {
            scenarios.push(c);
        }
    }
    if !scenarios.is_empty() {
        let _ = writeln!(s, "## What each deployment allows\n");
        let _ = writeln!(s, "| scenario | deployment | limit | speedup allowed (x) | ideal server (x) | reason |");
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for c in &scenarios {
            let Some(d) = &c.deployment else { continue };
            let x = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                c.scenario,
                d.verdict,
                d.limit.as_str(),
                x(d.speedup),
                x(d.ideal_speedup),
                d.reason.replace('|', "/")
            );
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## By runtime (all scenarios)\n");
    let _ = writeln!(s, "Figures over the runs that did not fail; client verdicts over every run.\n");
    let _ = writeln!(
        s,
        "| runtime | peak true eff (%) | mean true eff (%) | sd (pp) | mean apparent eff (%) | peak speedup (x) | client verdicts |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    let mut runtimes: Vec<&str> = Vec::new();
    for c in &r.summary {
        if !runtimes.contains(&c.runtime.as_str()) {
            runtimes.push(&c.runtime);
        }
    }
    for rt in &runtimes {
        let all: Vec<&RunResult> = r.runs.iter().filter(|x| &x.runtime == rt).collect();
        // A failed run's figures are no evidence (a killed server's run can read 100 %).
        let runs: Vec<&&RunResult> = all.iter().filter(|x| x.verdict != Verdict::Failed).collect();
        let t = summarize(&runs.iter().map(|x| x.efficiency_true).collect::<Vec<_>>());
        let a = summarize(&runs.iter().map(|x| x.efficiency_apparent).collect::<Vec<_>>());
        let sp = summarize(&runs.iter().map(|x| x.speedup).collect::<Vec<_>>());
        let mut counts = std::collections::BTreeMap::new();
        for x in &all {
            *counts.entry(x.verdict.to_string()).or_insert(0) += 1;
        }
        let v: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = writeln!(
            s,
            "| {rt} | {} | {} | {:.1} | {} | {:.2} | {} |",
            pct(t.max),
            pct(t.mean),
            t.sd * 100.0,
            pct(a.mean),
            sp.max,
            v.join(", ")
        );
    }
    if r.summary.iter().any(|c| c.effect_size_vs_tokio_default.is_some()) {
        let _ = writeln!(s, "\n## Effect sizes against {EFFECT_BASELINE} (true efficiency, Cohen's d)\n");
        let _ = writeln!(
            s,
            "A difference under {} percentage points matters to nobody, however large its Cohen's d (the simulator's runs vary little, so tiny differences get large d).\n",
            crate::stats::PRACTICAL_DIFFERENCE_PP
        );
        let _ = writeln!(s, "| runtime | scenario | mean difference (pp) | Cohen's d | meaning |");
        let _ = writeln!(s, "|---|---|---|---|---|");
        for c in &r.summary {
            let Some(d) = c.effect_size_vs_tokio_default else { continue };
            let base = r.summary.iter().find(|b| b.runtime == EFFECT_BASELINE && b.scenario == c.scenario);
            let diff = base.map_or(f64::NAN, |b| (c.efficiency_true.mean - b.efficiency_true.mean) * 100.0);
            let meaning = if diff.abs() < crate::stats::PRACTICAL_DIFFERENCE_PP {
                "no practical difference"
            } else if diff < 0.0 {
                "less efficient"
            } else {
                "more efficient"
            };
            let _ = writeln!(s, "| {} | {} | {:+.1} | {:+.2} | {meaning} |", c.runtime, c.scenario, diff, d);
        }
    }
    let _ = writeln!(s, "\n## By cell\n");
    let _ = writeln!(
        s,
        "| runtime | scenario | runs | true eff (%) mean [95% CI] | apparent eff (%) | speedup (x) | saving (%) median [80% interval, live] | TTFT p50 (ms, {time}) | prompt eval p50 (ms, {time}) | ITL p50 (ms, {time}) | client verdict | reason | deployment |",
        time = if r.server_trace { "modelled" } else { "wall" }
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for c in &r.summary {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} [{}, {}] | {} | {:.2} | {} | {:.1} | {:.1} | {:.3} | {} | {} | {} |",
            c.runtime,
            c.scenario,
            c.runs,
            pct(c.efficiency_true.mean),
            pct(c.efficiency_true.ci95_low),
            pct(c.efficiency_true.ci95_high),
            pct(c.efficiency_apparent.mean),
            c.speedup.mean,
            match c.saving_interval {
                Some([lo, hi]) => format!("{} [{}, {}]", pct(c.saving.median), pct(lo), pct(hi)),
                None => pct(c.saving.median),
            },
            c.ttft_ms_p50 / c.time_scale,
            c.prompt_eval_ms_p50 / c.time_scale,
            c.itl_ms_p50 / c.time_scale,
            c.verdict,
            c.reason.replace('|', "/"),
            c.deployment.as_ref().map_or("-".to_string(), |d| format!("{} ({})", d.verdict, d.limit.as_str()))
        );
    }
    s
}

/// A row of `runs.csv`.
#[derive(Serialize)]
struct RunRow<'a> {
    runtime: &'a str,
    scenario: &'a str,
    run: usize,
    wall_s: f64,
    efficiency_true: f64,
    efficiency_apparent: f64,
    speedup: f64,
    saving: f64,
    verdict: Verdict,
    reason: &'a str,
    deployment: &'a str,
    deployment_limit: &'a str,
}

/// A row of `summary.csv`. TTFT and ITL are given as measured (wall) and in modelled time
/// (wall / time scale; equal in live mode).
#[derive(Serialize)]
struct CellRow<'a> {
    runtime: &'a str,
    scenario: &'a str,
    runs: usize,
    eff_true_mean: f64,
    eff_true_sd: f64,
    eff_true_ci95_low: f64,
    eff_true_ci95_high: f64,
    eff_true_min: f64,
    eff_true_max: f64,
    eff_apparent_mean: f64,
    speedup_mean: f64,
    wall_s_mean: f64,
    time_scale: f64,
    ttft_ms_p50_wall: f64,
    itl_ms_p50_wall: f64,
    ttft_ms_p50_modelled: f64,
    itl_ms_p50_modelled: f64,
    prompt_eval_ms_p50_modelled: f64,
    ttft_thinking_ms_p50_modelled: f64,
    verdict: Verdict,
    reason: &'a str,
    deployment: &'a str,
    deployment_limit: &'a str,
    deployment_speedup: f64,
    deployment_reason: &'a str,
}

fn to_csv<T: Serialize>(rows: impl IntoIterator<Item = T>) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        // Serializing plain numbers and strings into memory cannot fail.
        let _ = w.serialize(r);
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// `runs.csv`.
pub(crate) fn runs_csv(r: &Results) -> String {
    to_csv(r.runs.iter().map(|x| RunRow {
        runtime: &x.runtime,
        scenario: &x.scenario,
        run: x.run,
        wall_s: x.wall_s,
        efficiency_true: x.efficiency_true,
        efficiency_apparent: x.efficiency_apparent,
        speedup: x.speedup,
        saving: x.saving,
        verdict: x.verdict,
        reason: &x.reason,
        deployment: x.deployment.as_ref().map_or("", |d| d.verdict.as_str()),
        deployment_limit: x.deployment.as_ref().map_or("", |d| d.limit.as_str()),
    }))
}

/// `summary.csv`.
pub(crate) fn summary_csv(r: &Results) -> String {
    to_csv(r.summary.iter().map(|c| {
        let e = &c.efficiency_true;
        CellRow {
            runtime: &c.runtime,
            scenario: &c.scenario,
            runs: c.runs,
            eff_true_mean: e.mean,
            eff_true_sd: e.sd,
            eff_true_ci95_low: e.ci95_low,
            eff_true_ci95_high: e.ci95_high,
            eff_true_min: e.min,
            eff_true_max: e.max,
            eff_apparent_mean: c.efficiency_apparent.mean,
            speedup_mean: c.speedup.mean,
            wall_s_mean: c.wall_s.mean,
            time_scale: c.time_scale,
            ttft_ms_p50_wall: c.ttft_ms_p50,
            itl_ms_p50_wall: c.itl_ms_p50,
            ttft_ms_p50_modelled: c.ttft_ms_p50 / c.time_scale,
            itl_ms_p50_modelled: c.itl_ms_p50 / c.time_scale,
            prompt_eval_ms_p50_modelled: c.prompt_eval_ms_p50 / c.time_scale,
            ttft_thinking_ms_p50_modelled: c.ttft_thinking_ms_p50 / c.time_scale,
            verdict: c.verdict,
            reason: &c.reason,
            deployment: c.deployment.as_ref().map_or("", |d| d.verdict.as_str()),
            deployment_limit: c.deployment.as_ref().map_or("", |d| d.limit.as_str()),
            deployment_speedup: c.deployment.as_ref().and_then(|d| d.speedup).unwrap_or(f64::NAN),
            deployment_reason: c.deployment.as_ref().map_or("", |d| d.reason.as_str()),
        }
    }))
}

/// Writes `path` atomically and durably: a uniquely named temporary file in the same
/// directory (created if missing), flushed to disk, then renamed over `path`. A crash leaves
/// either the old file or the new one, never a torn one, and two writers never share a
/// temporary file.
pub fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
    tmp.write_all(contents)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Writes every output file into `dir`.
pub fn write_all(dir: &Path, r: &Results) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_vec_pretty(r).map_err(std::io::Error::other)?;
    write_atomic(&dir.join("results.json"), &json)?;
    write_atomic(&dir.join("summary.md"), markdown(r).as_bytes())?;
    write_atomic(&dir.join("runs.csv"), runs_csv(r).as_bytes())?;
    let timelines: Vec<(String, String, usize, String)> = r
        .runs
        .iter()
        .filter_map(|x| Some((x.runtime.clone(), x.scenario.clone(), x.run, x.timeline.clone()?)))
        .collect();
    let html = crate::timeline::html(r, &timelines).map_err(std::io::Error::other)?;
    write_atomic(&dir.join("report.html"), html.as_bytes())?;
    write_atomic(&dir.join("summary.csv"), summary_csv(r).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        let mut r = run(0.5, Verdict::PartlySerialized);
        r.reason = "a, \"b\"\nc".into();
        let results = Results {
            schema_version: SCHEMA_VERSION,
            mode: "simulator".into(),
            server_trace: true,
            seed: 0,
            command: String::new(),
            thresholds: VerdictBands::default(),
            shard: None,
            runs: vec![r],
            summary: Vec::new(),
        };
        let text = runs_csv(&results);
        let mut rd = csv::Reader::from_reader(text.as_bytes());
        let row = rd.records().next().unwrap().unwrap();
        assert_eq!(&row[9], "a, \"b\"\nc", "the reason reads back whole");
        assert_eq!(&row[8], "partly_serialized");
    }

    /// A shard's results: one cell per (runtime, cell index), one run each.
    fn shard(index: usize, count: usize, cells: &[(&str, usize)], seed: u64) -> Results {
        let runs: Vec<RunResult> =
            cells.iter().map(|(rt, _)| RunResult { runtime: rt.to_string(), ..run(1.0, Verdict::Parallel) }).collect();
        let summary = cells
            .iter()
            .map(|(rt, c)| {
                let refs: Vec<&RunResult> = runs.iter().filter(|r| r.runtime == *rt).collect();
                CellSummary { cell: *c, ..summarize_cell(rt, "s", None, &refs, None) }
            })
            .collect();
        Results {
            schema_version: SCHEMA_VERSION,
            mode: "simulator".into(),
            server_trace: true,
            seed,
            command: format!("harness matrix --shard {index}/{count} --runs 1"),
            thresholds: VerdictBands::default(),
            shard: Some(Shard { index, count, cells: 4 }),
            runs,
            summary,
        }
    }

    #[test]
    fn shards_merge_in_the_matrix_order_and_other_matrices_are_refused() {
        // Cells 0-3 over two shards: 1/2 holds 0 and 2, 2/2 holds 1 and 3.
        let a = shard(1, 2, &[("r0", 0), ("r2", 2)], 7);
        let b = shard(2, 2, &[("r1", 1), ("r3", 3)], 7);
        assert!(Shard { index: 1, count: 2, cells: 4 }.holds(2) && !Shard { index: 1, count: 2, cells: 4 }.holds(3));
        let m = merge(vec![("b".into(), b.clone()), ("a".into(), a.clone())]).expect("merges");
        let order: Vec<&str> = m.summary.iter().map(|c| c.runtime.as_str()).collect();
        assert_eq!(order, ["r0", "r1", "r2", "r3"]);
        let runs: Vec<&str> = m.runs.iter().map(|r| r.runtime.as_str()).collect();
        assert_eq!(runs, ["r0", "r1", "r2", "r3"]);
        assert_eq!(m.shard, None);
        assert_eq!(m.command, "harness matrix --runs 1 (merged from 2 shards)");
        let other = shard(2, 2, &[("r1", 1), ("r3", 3)], 8);
        let e = merge(vec![("a".into(), a.clone()), ("other".into(), other)]).expect_err("another seed");
        assert!(e.contains("other: another matrix"), "{e}");
        let e = merge(vec![("a".into(), a.clone())]).expect_err("a shard missing");
        assert!(e.contains("shard(s) 2/2 missing"), "{e}");
        assert!(Shard::parse("0/2", 4).is_err() && Shard::parse("3/2", 4).is_err() && Shard::parse("x", 4).is_err());
        assert_eq!(Shard::parse("2/3", 9), Ok(Shard { index: 2, count: 3, cells: 9 }));
    }

    fn run(saving: f64, verdict: Verdict) -> RunResult {
        RunResult {
            runtime: "r".into(),
            scenario: "s".into(),
            run: 1,
            wall_s: 1.0,
            efficiency_true: 0.5,
            efficiency_apparent: 0.5,
            speedup: 1.0,
            saving,
            verdict,
            reason: verdict.to_string(),
            agents: Vec::new(),
            calls: Vec::new(),
            judge: None,
            deployment: None,
            time_scale: 1.0,
            local_work_scale: 1.0,
            saving_interval: None,
            calls_overlapped: None,
            timeline: None,
        }
    }

    #[test]
    fn a_cell_of_two_runs_is_parallel_only_if_both_were() {
        // Issue 10: the "median" of two runs was the upper one, so one parallel run of two
        // passed the cell.
        let (good, bad) = (run(0.95, Verdict::Parallel), run(0.10, Verdict::Serialized));
        let c = summarize_cell("r", "s", None, &[&good, &bad], None);
        assert_eq!(c.verdict, Verdict::Serialized, "{}", c.reason);
        let c = summarize_cell("r", "s", None, &[&bad, &good], None);
        assert_eq!(c.verdict, Verdict::Serialized);
        let c = summarize_cell("r", "s", None, &[&good, &good.clone()], None);
        assert_eq!(c.verdict, Verdict::Parallel);
        // A run with nothing to save never lifts a cell.
        let none = run(f64::NAN, Verdict::Inconclusive);
        let c = summarize_cell("r", "s", None, &[&good, &none], None);
        assert_eq!(c.verdict, Verdict::Inconclusive);
    }

    /// Issue 14: a run with a failed call used to count: its 0.1 ms made the cell's figures
    /// absurd (a saving of -17,999.8 %). Failed runs are counted and told, never averaged.
    #[test]
    fn a_live_cell_whose_interval_crosses_the_parallel_line_is_inconclusive() {
        let par = run(0.9, Verdict::Parallel);
        let c = summarize_cell("r", "s", None, &[&par], Some((0.7, 0.95)));
        assert_eq!(c.verdict, Verdict::Inconclusive, "{}", c.reason);
        assert!(c.reason.contains("between 70% and 95%"), "{}", c.reason);
        assert_eq!(c.saving_interval, Some([0.7, 0.95]));
        assert_eq!(summarize_cell("r", "s", None, &[&par], Some((0.82, 0.95))).verdict, Verdict::Parallel);
        assert_eq!(summarize_cell("r", "s", None, &[&par], None).verdict, Verdict::Parallel);
        // Serialized by a low saving: noise could have made it parallel, so it cannot stand...
        let low = run(0.1, Verdict::Serialized);
        assert_eq!(summarize_cell("r", "s", None, &[&low], Some((-0.1, 0.9))).verdict, Verdict::Inconclusive);
        assert_eq!(summarize_cell("r", "s", None, &[&low], Some((-0.1, 0.5))).verdict, Verdict::Serialized);
        // ... serialized by the calls' order stands whatever the timings.
        let ordered = RunResult { calls_overlapped: Some(false), ..run(0.9, Verdict::Serialized) };
        assert_eq!(summarize_cell("r", "s", None, &[&ordered], Some((0.5, 0.99))).verdict, Verdict::Serialized);
        // Parallel on servers that allow no saving (none measured): the overlap decided, and
        // an interval from resampled rounds that sometimes found room does not undo it.
        let flat = run(f64::NAN, Verdict::Parallel);
        assert_eq!(summarize_cell("r", "s", None, &[&flat], Some((0.3, 1.2))).verdict, Verdict::Parallel);
    }

    #[test]
    fn unmeasured_numbers_survive_a_round_trip_through_results_json() {
        // serde_json writes NaN as null; a cell whose every run failed has NaN figures, and
        // `harness compare` must still read the file.
        let failed = run(f64::NAN, Verdict::Failed);
        let summary = vec![summarize_cell("r", "s", None, &[&failed], None)];
        let r = Results {
            schema_version: SCHEMA_VERSION,
            mode: "live".into(),
            server_trace: false,
            seed: 0,
            command: String::new(),
            thresholds: VerdictBands::default(),
            shard: None,
            runs: vec![failed],
            summary,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"saving\":null"), "{text}");
        let back: Results = serde_json::from_str(&text).expect("a results file with NaNs reads back");
        assert!(back.runs[0].saving.is_nan() && back.summary[0].efficiency_true.mean.is_nan());
    }

    #[test]
    fn runs_are_ordered_by_verdict_before_saving() {
        // An inconclusive run with a high saving never outranks a parallel one, nor lifts a
        // cell: of {serialized 0.95, inconclusive 0.99, parallel 0.85} the median is inconclusive.
        let (s, i, p) =
            (run(0.95, Verdict::Serialized), run(0.99, Verdict::Inconclusive), run(0.85, Verdict::Parallel));
        assert_eq!(summarize_cell("r", "s", None, &[&p, &i, &s], None).verdict, Verdict::Inconclusive);
    }

    #[test]
    fn failed_runs_are_left_out_of_a_cells_figures_and_told() {
        let good = run(0.95, Verdict::Parallel);
        let mut bad = run(-179.998, Verdict::Failed);
        bad.efficiency_true = 0.0001;
        bad.reason = "1 of 2 agents failed (b: HTTP 500)".into();
        let c = summarize_cell("r", "s", None, &[&good, &bad, &good.clone()], None);
        assert_eq!(c.verdict, Verdict::Parallel, "{}", c.reason);
        assert_eq!((c.runs, c.failed_runs), (3, 1));
        assert!((c.saving.mean - 0.95).abs() < 1e-9, "the failed run's saving is left out: {:?}", c.saving);
        assert!((c.efficiency_true.mean - 0.5).abs() < 1e-9);
        assert!(
            c.reason.contains("1 of 3 runs failed and are left out: 1 of 2 agents failed (b: HTTP 500)"),
            "{}",
            c.reason
        );
        assert_eq!(c.verdicts.get("failed"), Some(&1));
        // Every run failed: the cell failed, with the first run's reason.
        let c = summarize_cell("r", "s", None, &[&bad], None);
        assert_eq!(c.verdict, Verdict::Failed);
        assert_eq!(c.reason, "1 of 2 agents failed (b: HTTP 500)");
        assert!(c.saving.mean.is_nan());
    }

    #[test]
    fn atomic_writes_leave_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("harness-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("results.json");
        write_atomic(&p, b"{}").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"{}");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().filter_map(Result::ok).map(|e| e.file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("results.json")], "no temporary file is left");
        // The parent directory is created when missing.
        let nested = dir.join("a/b/report.json");
        write_atomic(&nested, b"[]").unwrap();
        assert_eq!(std::fs::read(&nested).unwrap(), b"[]");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
