//! Reports: `results.json` (every run and a summary per cell), `summary.md` (a table like
//! the study's, with true and apparent efficiency side by side), CSV, and `report.html`
//! (charts and links to every run's timeline). Files are rewritten
//! atomically after every run, so an interrupted matrix keeps what it finished.

use crate::stats::{pct, summarize};
use crate::verdict::Verdict;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

// The data model lives in `results` (the timeline renderer reads it too); here as well, where
// readers of the reports have always found it.
pub use crate::results::{CellSummary, Results, RunResult, SCHEMA_VERSION, Shard, VerdictBands, merge};
pub(crate) use crate::results::{EFFECT_BASELINE, fill_effect_sizes, summarize_cell};

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
        // Live mode with a twin: what the twin predicted, beside what the servers gave.
        let twin = scenarios.iter().any(|c| c.twin_deployment.is_some());
        let (head, rule) = if twin { (" twin predicted (x) |", "---|") } else { ("", "") };
        let _ =
            writeln!(s, "| scenario | deployment | limit | speedup allowed (x) |{head} ideal server (x) | reason |");
        let _ = writeln!(s, "|---|---|---|---|{rule}---|---|");
        for c in &scenarios {
            let Some(d) = &c.deployment else { continue };
            let x = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
            let predicted = match (&c.twin_deployment, twin) {
                (Some(t), _) => format!(" {} ({}) |", x(t.speedup), t.verdict),
                (None, true) => " - |".to_string(),
                (None, false) => String::new(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |{predicted} {} | {} |",
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
        let t = summarize(&runs.iter().map(|x| x.efficiency.efficiency_true).collect::<Vec<_>>());
        let a = summarize(&runs.iter().map(|x| x.efficiency.efficiency_apparent).collect::<Vec<_>>());
        let sp = summarize(&runs.iter().map(|x| x.efficiency.speedup).collect::<Vec<_>>());
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
        wall_s: x.efficiency.wall_s,
        efficiency_true: x.efficiency.efficiency_true,
        efficiency_apparent: x.efficiency.efficiency_apparent,
        speedup: x.efficiency.speedup,
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
        RunResult::judged("r", "s", saving, verdict)
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
        bad.efficiency.efficiency_true = 0.0001;
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
