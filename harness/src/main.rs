//! `harness`: the runtime x scenario matrix, one cell, or the list of what exists.
//!
//! Exit codes: 0 when it ran (whatever the verdicts), 2 for bad arguments, 1 when it could not
//! run (a server unreachable, a runtime that does not start, results that cannot be written,
//! unreadable reports); `matrix` and `run` exit 5 when they ran to the end but some runs failed
//! (a call failed or timed out: those runs are reported and left out of every figure);
//! `compare` exits 3 when a cell regressed, `conformance` when a difference is not accepted; `exec` passes the command's own non-zero exit code
//! through, and exits 4 when `--expect` does not match the verdict.
//!
//! One concept, the command line, in about 800 lines: each of the eleven subcommands' arguments
//! (clap) beside the function that runs it and maps its outcome to an exit code; the work
//! itself is in the library.

use clap::{Args, Parser, Subcommand};
use harness::matrix::{self, MatrixPlan, Progress, Target};
use harness::report::RunResult;
use harness::runtime::VARIANTS;
use harness::workload;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Multi-agent Ollama workloads on every Rust async runtime, with verdicts.
#[derive(Debug, Parser)]
#[command(name = "harness", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs runtimes x scenarios x runs (on the embedded simulator unless --endpoints).
    Matrix(MatrixArgs),
    /// Runs one cell: one runtime, one scenario.
    Run(RunArgs),
    /// Lists the runtime variants and the scenarios.
    List,
    /// Compares two results.json files cell by cell; exits 3 when a cell regressed.
    Compare(CompareArgs),
    /// Sends one battery of requests to a real Ollama server and to a fresh simulator and
    /// reports every difference (status, headers, key order, error text, event sequence);
    /// exits 3 when one is not on the accepted list.
    Conformance(ConformanceArgs),
    /// Combines the shards of one matrix (`matrix --shard K/N`, every K) into one results.json
    /// and one set of reports, as the unsharded matrix writes them.
    Merge(MergeArgs),
    /// Runs a program against the simulator and judges its concurrency from the trace.
    Exec(ExecArgs),
    /// Records per-token timings of a live server as NDJSON, for the simulator to replay.
    Record(RecordArgs),
    /// Measures live servers and writes their twin, a simulator configuration that behaves as
    /// they do (`--check TWIN`: measures again and says which figures moved; exits 3 if any).
    Calibrate(CalibrateArgs),
    /// The reliability benchmark: bad requests, disconnects, the pending limit, a soak.
    Soak(SoakArgs),
    /// The pacing benchmark: the simulator and a bare tokio writer, each in its own process,
    /// under the same load from this one; prints the performance table.
    Bench(BenchArgs),
    /// The bare writer of `harness bench` (serves until killed).
    #[command(hide = true)]
    BenchWriter(BenchWriterArgs),
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// Concurrent streams of each load, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 1000])]
    streams: Vec<usize>,
    /// Tokens per stream.
    #[arg(long, default_value_t = 100)]
    tokens: u32,
    /// Modelled time between tokens, ms.
    #[arg(long, default_value_t = 10.0, value_parser = positive_finite)]
    interval_ms: f64,
    /// Rounds per load and server (a fresh server process each); medians are reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The sim-ollama binary (default: the one beside this harness binary).
    #[arg(long)]
    sim_bin: Option<PathBuf>,
    /// Also write every round's figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct BenchWriterArgs {
    /// Tokens per stream.
    #[arg(long)]
    tokens: u32,
    /// Time between tokens, µs.
    #[arg(long)]
    interval_us: u64,
}

fn bench(a: BenchArgs) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("harness bench: cannot find this binary: {e}");
            return ExitCode::from(1);
        }
    };
    let plan = harness::bench::BenchPlan {
        streams: a.streams,
        tokens: a.tokens,
        interval: Duration::from_secs_f64(a.interval_ms / 1e3),
        rounds: a.rounds,
        sim_bin: a.sim_bin.unwrap_or_else(|| exe.with_file_name("sim-ollama")),
        writer_bin: exe,
    };
    match harness::bench::run(&plan, &mut |what| eprintln!("harness bench: {what}")) {
        Ok(rep) => {
            print!("{rep}");
            if let Some(p) = &a.json {
                if !write_json("bench", p, &rep) {
                    return ExitCode::from(1);
                }
            }
            if rep.error.is_some() { ExitCode::from(1) } else { ExitCode::SUCCESS }
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}

#[derive(Debug, Args)]
struct SoakArgs {
    /// Generated bad requests to send.
    #[arg(long, default_value_t = 1_000_000)]
    bad_requests: usize,
    /// Clients that disconnect mid-stream.
    #[arg(long, default_value_t = 10_000)]
    disconnects: usize,
    /// Seconds of steady load with the trace on.
    #[arg(long, default_value_t = 300.0, value_parser = positive_finite)]
    soak_s: f64,
    /// Concurrent client connections.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Seed of the generated requests.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The simulator's trace budget, MiB: the trace stays on, and memory must level off.
    #[arg(long, default_value_t = 64)]
    trace_budget_mb: u64,
    /// Also write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn soak(a: SoakArgs) -> ExitCode {
    let plan = harness::soak::SoakPlan {
        bad_requests: a.bad_requests,
        disconnects: a.disconnects,
        soak_s: a.soak_s,
        concurrency: a.concurrency.max(1),
        seed: a.seed,
        trace_budget_mb: a.trace_budget_mb,
    };
    match harness::soak::run(&plan) {
        Ok(rep) => {
            print!("{rep}");
            if let Some(p) = &a.json {
                if !write_json("soak", p, &rep) {
                    return ExitCode::from(1);
                }
            }
            if rep.broken().is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) }
        }
        Err(e) => {
            eprintln!("harness soak: {e}");
            ExitCode::from(1)
        }
    }
}

#[derive(Debug, Args)]
struct RecordArgs {
    /// Base URL of the server.
    #[arg(long)]
    endpoint: String,
    /// Model to call.
    #[arg(long)]
    model: String,
    /// Calls to record (after one unrecorded warm-up call).
    #[arg(long, default_value_t = 20)]
    calls: usize,
    /// num_predict of each call.
    #[arg(long, default_value_t = 512)]
    max_tokens: u32,
    /// Prompt of each call.
    #[arg(long, default_value = "Summarise the state of the project in a few paragraphs.")]
    prompt: String,
    /// Output file (NDJSON), e.g. fixtures/traces/my-gpu.ndjson.
    #[arg(long)]
    out: PathBuf,
}

fn record(a: RecordArgs) -> ExitCode {
    let plan = harness::record::RecordPlan {
        endpoint: a.endpoint,
        model: a.model,
        calls: a.calls,
        max_tokens: a.max_tokens,
        prompt: a.prompt,
        timeout: Duration::from_secs(300),
    };
    match harness::record::record(&plan) {
        Ok(calls) => match harness::report::write_atomic(&a.out, harness::record::to_ndjson(&calls).as_bytes()) {
            Ok(()) => {
                eprintln!("harness record: {} calls written to {}", calls.len(), a.out.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("harness record: cannot write {}: {e}", a.out.display());
                ExitCode::from(1)
            }
        },
        Err(e) => {
            eprintln!("harness record: {e}");
            ExitCode::from(1)
        }
    }
}

#[derive(Debug, Args)]
struct CalibrateArgs {
    /// Comma-separated base URLs of the servers (with --check: default, the twin's).
    #[arg(long, value_delimiter = ',')]
    endpoints: Vec<String>,
    /// The model (with --check: default, the twin's).
    #[arg(long)]
    model: Option<String>,
    /// Comma-separated other models the agents use on the first server: each one's load is
    /// measured, and whether they stay loaded beside --model (OLLAMA_MAX_LOADED_MODELS, or the
    /// memory they need); the twin serves them too (with --check: default, the twin's).
    #[arg(long, value_delimiter = ',')]
    with_models: Option<Vec<String>>,
    /// Where to write the twin (TOML).
    #[arg(long, required_unless_present = "check")]
    out: Option<PathBuf>,
    /// Measure again and compare with this twin instead of writing one.
    #[arg(long, conflicts_with = "out")]
    check: Option<PathBuf>,
    /// Measure nothing: write the twin again (to --out) from the figures this twin records in
    /// its [calibration] table, with this version's fits (a newer harness may read the same
    /// measurements into other figures).
    #[arg(long, conflicts_with = "check", requires = "out")]
    refit: Option<PathBuf>,
    /// Most calls sent to one server at once: slots beyond it are not found [default: 6; with
    /// --check, the twin's].
    #[arg(long)]
    max_streams: Option<usize>,
    /// Tokens of each decoding call, best near your agents' answer lengths: the batching
    /// slowdown is measured at this length [default: 300; with --check, the twin's].
    #[arg(long)]
    tokens: Option<u32>,
    /// Repetitions of each measurement [default: 3; with --check, the twin's].
    #[arg(long)]
    reps: Option<usize>,
    /// Abandon a call after this many seconds.
    #[arg(long, default_value_t = 300.0, value_parser = timeout_seconds)]
    timeout_s: f64,
}

/// The twin of what `cal` measured, written to `out` with its comments.
fn write_twin(cal: &harness::calibrate::Calibration, out: &std::path::Path) -> Result<(), String> {
    let (file, why) =
        harness::calibrate::twin(cal).ok_or("too little was measured for a twin (no solo call decoded)")?;
    let text = harness::calibrate::to_toml(cal, &file, &why)?;
    harness::report::write_atomic(out, text.as_bytes()).map_err(|e| format!("cannot write {}: {e}", out.display()))
}

/// `harness calibrate`: 0 when the twin is written (or, with --check, nothing moved); 1 on an
/// error (what was measured is still written: the twin with a note, or the figures); 3 when
/// --check finds figures that moved.
fn calibrate(a: CalibrateArgs) -> ExitCode {
    if let (Some(from), Some(out)) = (&a.refit, &a.out) {
        let written = sim_ollama::advanced::config::ConfigFile::from_path(from)
            .map_err(|e| e.to_string())
            .and_then(|f| harness::calibrate::calibration_of(&f).map_err(|e| format!("{}: {e}", from.display())))
            .and_then(|cal| write_twin(&cal, out));
        return match written {
            Ok(()) => {
                eprintln!("harness calibrate: the twin refitted from {} is in {}", from.display(), out.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("harness calibrate --refit: {e}");
                ExitCode::from(1)
            }
        };
    }
    let twin_file = match &a.check {
        Some(path) => match sim_ollama::advanced::config::ConfigFile::from_path(path)
            .map_err(|e| e.to_string())
            .and_then(|f| harness::calibrate::calibration_of(&f).map_err(|e| format!("{}: {e}", path.display())))
        {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("harness calibrate: {e}");
                return ExitCode::from(1);
            }
        },
        None => None,
    };
    let endpoints = if a.endpoints.is_empty() {
        twin_file.as_ref().map(|c| c.endpoints.clone()).unwrap_or_default()
    } else {
        a.endpoints.clone()
    };
    let endpoints = match endpoints.iter().map(|e| harness::endpoint_url(e)).collect::<Result<Vec<_>, _>>() {
        Ok(e) if !e.is_empty() => e,
        Ok(_) => {
            eprintln!("harness calibrate: give --endpoints URL[,URL]");
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("harness calibrate: {e}");
            return ExitCode::from(1);
        }
    };
    let Some(model) = a.model.clone().or_else(|| twin_file.as_ref().map(|c| c.model.clone())) else {
        eprintln!("harness calibrate: give --model NAME");
        return ExitCode::from(1);
    };
    let plan = harness::calibrate::CalibratePlan {
        endpoints,
        model,
        max_streams: a.max_streams.or(twin_file.as_ref().map(|c| c.max_streams)).filter(|&n| n > 0).unwrap_or(6),
        tokens: a.tokens.or(twin_file.as_ref().map(|c| c.tokens)).filter(|&n| n > 0).unwrap_or(300),
        reps: a.reps.or(twin_file.as_ref().map(|c| c.reps)).filter(|&n| n > 0).unwrap_or(3),
        timeout: Duration::try_from_secs_f64(a.timeout_s).unwrap_or(Duration::from_secs(300)),
        others: a
            .with_models
            .clone()
            .or(twin_file.as_ref().map(|c| c.others.iter().map(|o| o.name.clone()).collect()))
            .unwrap_or_default(),
    };
    let interactive = std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
    let bar = interactive.then(|| {
        let b = indicatif::ProgressBar::new(1);
        b.set_style(
            indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} steps, {elapsed} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let mut progress = |done: usize, total: usize, what: &str| match &bar {
        Some(b) => {
            b.set_length(total as u64);
            b.set_position(done as u64);
            b.set_message(what.to_string());
        }
        None => eprintln!("harness calibrate: [{done}/{total}] {what}"),
    };
    let result = harness::calibrate::calibrate(&plan, &mut progress);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let (cal, failed) = match result {
        Ok(c) => (c, None),
        Err((c, e)) => (*c, Some(e)),
    };
    if let Some(old) = &twin_file {
        if let Some(e) = &failed {
            eprintln!("harness calibrate --check: {e}");
            return ExitCode::from(1);
        }
        // A figure is moved only where it moves in a second measurement too.
        let (drifts, again_s) = match harness::calibrate::check_confirmed(&plan, old, &cal, &mut progress) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("harness calibrate --check: {e}");
                return ExitCode::from(1);
            }
        };
        if let Some(b) = &bar {
            b.finish_and_clear();
        }
        let elapsed = cal.elapsed_s + again_s;
        println!("| figure | twin | now | |\n|---|---|---|---|");
        for d in &drifts {
            println!("| {} | {:.3} | {:.3} | {} |", d.figure, d.twin, d.now, if d.moved { "moved" } else { "held" });
        }
        let moved = drifts.iter().filter(|d| d.moved).count();
        eprintln!("harness calibrate --check: {moved} of {} figures moved ({elapsed:.0} s)", drifts.len());
        return if moved > 0 { ExitCode::from(3) } else { ExitCode::SUCCESS };
    }
    let out = a.out.unwrap_or_default();
    let mut cal = cal;
    if let Some(e) = &failed {
        cal.notes.push(format!(
            "calibration stopped early ({e}): figures it did not reach are guesses, marked not measured"
        ));
    }
    let written = write_twin(&cal, &out);
    match (written, failed) {
        (Ok(()), None) => {
            eprintln!(
                "harness calibrate: the twin of {} is in {} ({:.0} s)",
                plan.endpoints.join(", "),
                out.display(),
                cal.elapsed_s
            );
            ExitCode::SUCCESS
        }
        (Ok(()), Some(e)) => {
            eprintln!("harness calibrate: {e}; what was measured is in {} (a partial twin)", out.display());
            ExitCode::from(1)
        }
        (Err(w), failed) => {
            // Keep the figures themselves.
            let json = out.with_extension("measured.json");
            let kept = serde_json::to_vec_pretty(&cal).ok().and_then(|b| harness::report::write_atomic(&json, &b).ok());
            let e = failed.map_or(w.clone(), |f| format!("{f}; {w}"));
            match kept {
                Some(()) => eprintln!("harness calibrate: {e}; the figures measured are in {}", json.display()),
                None => eprintln!("harness calibrate: {e}"),
            }
            ExitCode::from(1)
        }
    }
}

/// `harness exec --probe`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ProbeArg {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Args)]
struct ExecArgs {
    /// Deployment preset (default: `ideal`, so any serialization is the program's).
    #[arg(long, conflicts_with = "config")]
    preset: Option<String>,
    /// Simulator configuration file instead of a preset.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Number of instances (default: the preset's).
    #[arg(long)]
    instances: Option<usize>,
    /// Time scale of the simulator.
    #[arg(long, default_value_t = 0.1, value_parser = positive_finite)]
    time_scale: f64,
    /// Master seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// How many agents the program runs that should run at once (needed for unlabelled
    /// programs whose agents make several unrelated calls: the chains of calls a probe run finds
    /// back a verdict of parallel only when they are that many; with X-Agent labels, fewer than
    /// the labelled agents says the program limits itself by design).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    agents: Option<u64>,
    /// Load this model before the command starts, kept loaded, so its load is not judged
    /// (repeat for several; a model the simulator lacks exits 2 naming the ones it has).
    #[arg(long, value_name = "NAME")]
    preload: Vec<String>,
    /// Answer for the model names the simulator's catalogue lacks with a copy of this
    /// catalogue model (e.g. `llama3.2:1b`), so a program naming its own model runs unchanged.
    #[arg(long, value_name = "MODEL")]
    stand_in: Option<String>,
    /// Exit 4 when the client verdict is not this one (parallel, partly_serialized,
    /// serialized, inconclusive): did the program overlap its agents as far as the deployment
    /// allows?
    #[arg(long)]
    expect: Option<sim_ollama::Verdict>,
    /// Exit 4 when the client's share of the saving the deployment allows is below this (0-1),
    /// or unknown; where the deployment allows no saving, a client-parallel verdict meets it.
    #[arg(long, value_parser = unit_interval)]
    min_saving: Option<f64>,
    /// Exit 4 when the deployment allows less than this speedup (one call at a time over a
    /// perfectly concurrent client's time), or it is unknown: a check of the deployment, apart
    /// from the client's.
    #[arg(long, value_parser = positive_finite)]
    min_speedup: Option<f64>,
    /// Also write the report as JSON here (schema: docs/judge.md).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also draw the run's timeline (SVG, one lane per agent) here.
    #[arg(long)]
    timeline: Option<PathBuf>,
    /// Also write the simulator's trace here (JSON: every request of the run judged, of its
    /// probe run and of a confirmation run, with when each arrived, streamed, was held and
    /// ended): what the verdict was read from.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// When to run the command a second time as a probe run (the simulator holding answers
    /// back so the agents do their local work one at a time): `auto` when the gaps between the
    /// agents' calls decide the verdict and one run cannot tell their own work from waiting
    /// for each other's; `always`; `never` (such a verdict then stays inconclusive). Where the
    /// probed verdict rests on the agents waiting for each other, falls short of parallel and
    /// does not meet --expect, the command runs a third time to confirm it (a pause of the
    /// whole process in one run reads the same and does not recur).
    #[arg(long, value_enum, default_value_t = ProbeArg::Auto)]
    probe: ProbeArg,
    /// The command and its arguments (after `--`).
    #[arg(trailing_var_arg = true, required = true, num_args = 1..)]
    command: Vec<String>,
}

/// Writes `value` as pretty JSON to `path`, atomically; says why on stderr when it cannot.
fn write_json(command: &str, path: &std::path::Path, value: &impl serde::Serialize) -> bool {
    let written = serde_json::to_vec_pretty(value)
        .map_err(std::io::Error::other)
        .and_then(|b| harness::report::write_atomic(path, &b));
    if let Err(e) = &written {
        eprintln!("harness {command}: cannot write {}: {e}", path.display());
    }
    written.is_ok()
}

fn positive_finite(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    if v.is_finite() && v > 0.0 && v <= 1e6 {
        Ok(v)
    } else {
        Err(format!("{s} must be a number above 0 and at most 1000000"))
    }
}

fn timeout_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    if v.is_finite() && (0.1..=86_400.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{s} must be from 0.1 to 86400 seconds"))
    }
}

fn unit_interval(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    if (0.0..=1.0).contains(&v) { Ok(v) } else { Err(format!("{s} must be between 0 and 1")) }
}

fn exec(a: ExecArgs) -> ExitCode {
    let plan = harness::exec::ExecPlan {
        preset: a.preset,
        config: a.config,
        instances: a.instances,
        time_scale: a.time_scale,
        seed: a.seed,
        agents: a.agents.map(|n| n as usize),
        preload: a.preload,
        stand_in: a.stand_in,
        command: a.command,
        probe: match a.probe {
            ProbeArg::Auto => harness::exec::ProbeMode::Auto,
            ProbeArg::Always => harness::exec::ProbeMode::Always,
            ProbeArg::Never => harness::exec::ProbeMode::Never,
        },
        expect: sim_ollama::judge::Expectations {
            verdict: a.expect,
            min_saving: a.min_saving,
            min_speedup: a.min_speedup,
        },
    };
    let outcome = match harness::exec::run(&plan) {
        Ok(o) => o,
        Err(e @ harness::exec::ExecError::Config(_)) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    eprint!("{}", harness::exec::render(&outcome));
    let report = &outcome.report;
    if let Some(p) = &a.timeline {
        let title = format!("harness exec: {}", plan.command.join(" "));
        let drawn = harness::timeline::svg(&title, &harness::timeline::agent_lanes(&outcome.trace, report))
            .map_err(std::io::Error::other)
            .and_then(|doc| harness::report::write_atomic(p, doc.as_bytes()));
        if let Err(e) = drawn {
            eprintln!("harness exec: cannot write {}: {e}", p.display());
            return ExitCode::from(1);
        }
    }
    if let Some(p) = &a.trace {
        if !write_json("exec", p, &outcome.trace) {
            return ExitCode::from(1);
        }
    }
    if let Some(p) = &a.json {
        let doc = harness::exec::ExecJson {
            schema_version: harness::exec::EXEC_SCHEMA_VERSION,
            command: &plan.command,
            exit_code: outcome.status.code(),
            process_wall_s: outcome.process_wall_s,
            after_last_answer_s: outcome.after_last_answer_s,
            seed: plan.seed,
            deployment: plan.deployment(),
            report,
            probe: outcome.probe.as_ref(),
            confirmation: outcome.confirmation.as_ref(),
            rerun_after: outcome.rerun_after.as_deref(),
            longer_time_scale_after: outcome.longer_scale_after.as_ref(),
        };
        if !write_json("exec", p, &doc) {
            return ExitCode::from(1);
        }
    }
    if !outcome.status.success() {
        // The command's own exit code is passed through.
        return ExitCode::from(outcome.status.code().map_or(1, |c| c.clamp(1, 255) as u8));
    }
    // The same expectations, in the same words, as GET /sim/judge checks.
    let failures = plan.expect.check(report);
    for f in &failures {
        eprintln!("harness exec: {f}");
    }
    let failed = !failures.is_empty();
    if failed { ExitCode::from(4) } else { ExitCode::SUCCESS }
}

#[derive(Debug, Args)]
struct ConformanceArgs {
    /// The real Ollama server, `http://HOST:PORT`, with the model under test.
    #[arg(long)]
    real: String,
    /// A simulator already running (default: a fresh embedded one serving only the model, as
    /// the real server's `/api/show` describes it).
    #[arg(long)]
    sim: Option<String>,
    /// The model under test, `{model}` in the battery.
    #[arg(long, default_value = "tiny")]
    model: String,
    /// The battery, TOML (default: harness/conformance/battery.toml, compiled in).
    #[arg(long)]
    battery: Option<PathBuf>,
    /// Differences kept on purpose, TOML (default: harness/conformance/accepted.toml).
    #[arg(long)]
    accepted: Option<PathBuf>,
    /// Also send this many requests generated from Ollama's request types (valid values,
    /// absent fields, wrong types, out-of-range numbers, unknown fields, odd headers and
    /// bodies), each difference shrunk to the fewest changes that still show it.
    #[arg(long, default_value_t = 0)]
    generated: usize,
    /// The generator's seed: the same seed sends the same requests.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn conformance(a: ConformanceArgs) -> ExitCode {
    use harness::conformance as c;
    let read = |p: &Option<PathBuf>, builtin: &str| -> Result<String, String> {
        match p {
            Some(p) => std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display())),
            None => Ok(builtin.to_string()),
        }
    };
    let mut unexpected = 0;
    let outcome = (|| -> Result<(), String> {
        let battery = c::Battery::from_toml(&read(&a.battery, c::BATTERY_TOML)?)?;
        let accepted = c::accepted_from_toml(&read(&a.accepted, c::ACCEPTED_TOML)?)?;
        let embedded = match &a.sim {
            Some(_) => None,
            None => Some(c::simulator_for(&a.real, &a.model)?),
        };
        let sim = a.sim.clone().unwrap_or_else(|| embedded.as_ref().map(|s| s.url().to_string()).unwrap_or_default());
        eprintln!("harness conformance: {} cases, real {} against simulator {sim}", battery.cases.len(), a.real);
        let o = c::run(&a.real, &sim, &a.model, &battery, &accepted, &mut |_| {})?;
        print!("{o}");
        unexpected += o.unexpected();
        if a.generated > 0 {
            eprintln!("harness conformance: {} generated cases (seed {})", a.generated, a.seed);
            let cases = harness::differential::cases(a.generated, a.seed);
            // What was found before a later case fails is printed, not lost.
            let mut found = Vec::new();
            let result = harness::differential::run(&a.real, &sim, &a.model, &cases, &accepted, &mut found);
            print!("{}", harness::differential::Report { cases: cases.len(), findings: &found });
            unexpected += found.iter().filter(|f| f.unexpected()).count();
            result?;
        }
        Ok(())
    })();
    match outcome {
        Ok(()) if unexpected > 0 => ExitCode::from(3),
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("harness conformance: {e}");
            ExitCode::from(1)
        }
    }
}

#[derive(Debug, Args)]
struct CompareArgs {
    /// The baseline results.json.
    baseline: PathBuf,
    /// The current results.json.
    current: PathBuf,
    /// Thresholds file (default: the compiled-in harness/thresholds.toml).
    #[arg(long)]
    thresholds: Option<PathBuf>,
}

fn read_results(p: &std::path::Path) -> Result<harness::report::Results, String> {
    let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not a harness results.json: {e}", p.display()))
}

fn compare(a: CompareArgs) -> ExitCode {
    let loaded = (|| -> Result<_, String> {
        let base = read_results(&a.baseline)?;
        let cur = read_results(&a.current)?;
        let t = match &a.thresholds {
            Some(p) => harness::thresholds::Thresholds::from_toml(
                &std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?,
            )?,
            None => harness::thresholds::Thresholds::builtin(),
        };
        Ok((base, cur, t))
    })();
    match loaded {
        Ok((base, cur, t)) => {
            let changes = harness::compare::compare(&base, &cur, &t);
            println!("{}", harness::compare::markdown(&changes));
            if changes.iter().any(|c| c.status == harness::compare::Status::Regressed) {
                ExitCode::from(3)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("harness compare: {e}");
            ExitCode::from(1)
        }
    }
}

#[derive(Debug, Args)]
struct RunOptions {
    /// Concurrent runs per cell.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Master seed of the simulator.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Time scale of the simulator (default: each scenario's, else 0.01).
    #[arg(long, value_parser = positive_finite)]
    time_scale: Option<f64>,
    /// Solo rounds per cell for the baselines (each agent's median is its baseline). Default:
    /// 1 on the simulator; in live mode one before every run and one after the last (at
    /// least 3), spread among the runs.
    #[arg(long)]
    solo_runs: Option<usize>,
    /// Live mode: while a cell's saving is too noisy to tell (its 80 % interval lies on both
    /// sides of the parallel line), add one more run and a solo and reference round after it,
    /// up to this many rounds in all. Default: twice the solo rounds; equal to --solo-runs adds
    /// none.
    #[arg(long)]
    max_solo_runs: Option<usize>,
    /// Output directory for results.json, summary.md and CSV.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Live mode: comma-separated base URLs of real Ollama servers.
    #[arg(long, value_delimiter = ',')]
    endpoints: Vec<String>,
    /// Live mode: the model to use (twin mode: default, the model the twin was measured with).
    #[arg(long)]
    model: Option<String>,
    /// Twin mode: a configuration `harness calibrate` wrote (or any simulator configuration):
    /// every scenario runs on its servers instead of the scenario's preset, as --endpoints runs
    /// it on live ones (instance i on server i, every call on --model), at time scale 1 unless
    /// --time-scale.
    #[arg(long, conflicts_with = "endpoints")]
    config: Option<PathBuf>,
    /// Live mode: also run each scenario once on this twin (`harness calibrate`) and show its
    /// predicted deployment verdict beside the live one.
    #[arg(long, requires = "endpoints")]
    twin: Option<PathBuf>,
    /// Extra scenario files (*.toml) to load.
    #[arg(long)]
    scenarios_dir: Option<PathBuf>,
    /// Abandon a call after this many seconds (0.1 to a day).
    #[arg(long, default_value_t = 120.0, value_parser = timeout_seconds)]
    timeout_s: f64,
    /// Multiplies every call's length in tokens (at least 1 each). In live mode, longer calls
    /// make the servers' run-to-run noise a smaller share of each call: two real servers on two
    /// cores vary by hundredths of a second, a tenth of a 300-token call on the tiny model.
    #[arg(long, default_value_t = 1.0, value_parser = positive_finite)]
    tokens_scale: f64,
}

#[derive(Debug, Args)]
struct MatrixArgs {
    /// Comma-separated variants, or `all`, `correct` (no controls), `controls`.
    #[arg(long, value_delimiter = ',', default_values_t = vec!["correct".to_string()])]
    runtimes: Vec<String>,
    /// Comma-separated scenarios, `tag:NAME`, or `all`.
    #[arg(long, value_delimiter = ',', default_values_t = vec!["tag:study".to_string()])]
    scenarios: Vec<String>,
    /// Run shard K of N: the cells whose index modulo N is K-1 (one CI job each; then
    /// `harness merge` the N output directories).
    #[arg(long, value_name = "K/N")]
    shard: Option<String>,
    #[command(flatten)]
    common: RunOptions,
}

#[derive(Debug, Args)]
struct MergeArgs {
    /// The shards' output directories (each with its results.json and timelines).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// Where to write the merged results.json and reports.
    #[arg(long)]
    out: PathBuf,
}

/// `harness merge`: exit 0 when merged, 1 when the shards cannot be read or do not make one
/// whole matrix (the message says which).
fn merge(a: MergeArgs) -> ExitCode {
    let run = || -> Result<harness::report::Results, String> {
        let mut parts = Vec::new();
        for dir in &a.dirs {
            let path = dir.join("results.json");
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let r: harness::report::Results =
                serde_json::from_str(&text).map_err(|e| format!("{}: not a results file: {e}", path.display()))?;
            parts.push((dir.display().to_string(), r));
        }
        // The timelines each shard drew, copied beside the merged results.
        for (dir, r) in &parts {
            for rel in r.runs.iter().filter_map(|x| x.timeline.as_deref()) {
                let to = a.out.join(rel);
                if let Some(parent) = to.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
                }
                std::fs::copy(std::path::Path::new(dir).join(rel), &to).map_err(|e| format!("{dir}/{rel}: {e}"))?;
            }
        }
        let merged = harness::report::merge(parts)?;
        harness::report::write_all(&a.out, &merged).map_err(|e| format!("{}: {e}", a.out.display()))?;
        Ok(merged)
    };
    match run() {
        Ok(m) => {
            println!("{}", harness::report::markdown(&m));
            eprintln!(
                "harness merge: {} shards, {} cells, {} runs; results in {}",
                a.dirs.len(),
                m.summary.len(),
                m.runs.len(),
                a.out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("harness merge: {e}");
            ExitCode::from(1)
        }
    }
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The runtime variant.
    #[arg(long)]
    runtime: String,
    /// The scenario.
    #[arg(long)]
    scenario: String,
    #[command(flatten)]
    common: RunOptions,
}

fn expand_runtimes(names: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for n in names {
        let add: Vec<&str> = match n.as_str() {
            "all" => VARIANTS.iter().map(|v| v.name).collect(),
            "correct" => VARIANTS.iter().filter(|v| v.control.is_none()).map(|v| v.name).collect(),
            "controls" => VARIANTS.iter().filter(|v| v.control.is_some()).map(|v| v.name).collect(),
            other if VARIANTS.iter().any(|v| v.name == other) => vec![other],
            other => {
                let names: Vec<&str> = VARIANTS.iter().map(|v| v.name).collect();
                return Err(format!(
                    "unknown runtime variant {other:?}; variants: {}, or all / correct / controls",
                    names.join(", ")
                ));
            }
        };
        for a in add {
            if !out.iter().any(|x| x == a) {
                out.push(a.to_string());
            }
        }
    }
    Ok(out)
}

fn plan(runtimes: Vec<String>, scenarios: Vec<String>, c: RunOptions) -> Result<MatrixPlan, String> {
    let mut scenarios = workload::select(&scenarios, c.scenarios_dir.as_deref()).map_err(|e| e.to_string())?;
    for s in &mut scenarios {
        s.scale_tokens(c.tokens_scale);
    }
    let target = match (c.endpoints.is_empty(), c.model) {
        (true, model) if c.config.is_some() => {
            let path = c.config.as_deref().unwrap_or(std::path::Path::new(""));
            let file = sim_ollama::advanced::config::ConfigFile::from_path(path).map_err(|e| e.to_string())?;
            let measured = harness::calibrate::calibration_of(&file).ok().map(|c| c.model);
            let model = model
                .or(measured)
                .ok_or_else(|| format!("{}: not a twin written by harness calibrate: give --model", path.display()))?;
            Target::Twin { config: std::sync::Arc::new(file), model }
        }
        (true, None) => Target::Simulator,
        (false, Some(model)) => {
            let endpoints = c.endpoints.iter().map(|e| harness::endpoint_url(e)).collect::<Result<Vec<_>, _>>()?;
            Target::Live { endpoints, model }
        }
        (false, None) => return Err("live mode needs --model with --endpoints".into()),
        (true, Some(_)) => return Err("--model is for live mode: give --endpoints too".into()),
    };
    if c.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    let solo_runs = match (c.solo_runs, &target) {
        (Some(0), _) => return Err("--solo-runs must be at least 1".into()),
        (Some(n), _) => n,
        (None, Target::Simulator | Target::Twin { .. }) => 1,
        (None, Target::Live { .. }) => (c.runs + 1).max(3),
    };
    let max_solo_runs = match (c.max_solo_runs, &target) {
        (Some(n), Target::Live { .. }) if n < solo_runs => {
            return Err(format!("--max-solo-runs {n} is fewer than the {solo_runs} solo rounds the cell runs anyway"));
        }
        (Some(_), Target::Simulator | Target::Twin { .. }) => {
            return Err(
                "--max-solo-runs is for live mode (the simulator's figures are modelled): give --endpoints".into()
            );
        }
        (Some(n), _) => n,
        (None, _) => 2 * solo_runs,
    };
    Ok(MatrixPlan {
        runtimes,
        scenarios,
        runs: c.runs,
        seed: c.seed,
        time_scale: c.time_scale,
        solo_runs,
        max_solo_runs,
        target,
        out: c.out,
        timeout: Duration::try_from_secs_f64(c.timeout_s).unwrap_or(Duration::from_secs(120)),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        shard: None,
    })
}

/// A progress bar on a terminal; plain lines on stderr in CI or when not a terminal.
struct Bar {
    bar: Option<indicatif::ProgressBar>,
    cells: usize,
    cell: String,
}

impl Bar {
    fn new(total_runs: u64) -> Self {
        let interactive = std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
        let bar = interactive.then(|| {
            let b = indicatif::ProgressBar::new(total_runs);
            b.set_style(
                indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs, ETA {eta} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        Bar { bar, cells: 0, cell: String::new() }
    }
}

impl Progress for Bar {
    fn cell(&mut self, index: usize, cells: usize, runtime: &str, scenario: &str) {
        self.cells = cells;
        self.cell = format!("cell {index}/{cells}: {runtime} x {scenario}");
        match &self.bar {
            Some(b) => b.set_message(self.cell.clone()),
            None => eprintln!("{}", self.cell),
        }
    }
    fn step(&mut self, _: &str) {}
    fn run(&mut self, r: &RunResult) {
        match &self.bar {
            Some(b) => b.inc(1),
            None => eprintln!(
                "  run {}: true efficiency {:.1}%, apparent {:.1}%: {}",
                r.run,
                r.efficiency.efficiency_true * 100.0,
                r.efficiency.efficiency_apparent * 100.0,
                r.verdict
            ),
        }
    }
}

fn execute(p: MatrixPlan, twin: Option<std::sync::Arc<sim_ollama::advanced::config::ConfigFile>>) -> ExitCode {
    let cells = p.runtimes.len() * p.scenarios.len();
    let mine = p.shard.map_or(cells, |sh| sh.held());
    if let Some(sh) = p.shard {
        eprintln!("harness: shard {}/{}: {mine} of {cells} cells", sh.index, sh.count);
    }
    let total = (mine * p.runs) as u64;
    let mut bar = Bar::new(total);
    let started = std::time::Instant::now();
    match matrix::run(&p, &mut bar) {
        Ok(mut results) => {
            if let Some(b) = &bar.bar {
                b.finish_and_clear();
            }
            // What the twin predicted, beside what the live servers gave; the live results are
            // already written, and stay so if the twin fails.
            if let Some(t) = twin {
                match matrix::predict_with_twin(&p, t, &mut results) {
                    Ok(()) => {
                        if let Some(dir) = &p.out {
                            if let Err(e) = harness::report::write_all(dir, &results) {
                                eprintln!("harness: cannot write results with the twin's predictions: {e}");
                            }
                        }
                    }
                    Err(e) => eprintln!("harness: the twin's predictions: {e}"),
                }
            }
            println!("{}", harness::report::markdown(&results));
            eprintln!(
                "harness: {} runs in {} cells in {:.1} s{}",
                results.runs.len(),
                results.summary.len(),
                started.elapsed().as_secs_f64(),
                p.out.as_ref().map_or(String::new(), |d| format!("; results in {}", d.display()))
            );
            let failed = results.runs.iter().filter(|r| r.verdict == harness::verdict::Verdict::Failed).count();
            if failed > 0 {
                eprintln!(
                    "harness: {failed} of {} runs failed (left out of the figures; see each cell's reason)",
                    results.runs.len()
                );
                return ExitCode::from(5);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let planned = match cli.command {
        Command::List => {
            println!("runtime variants:");
            for v in VARIANTS {
                let ctl = v.control.map_or(String::new(), |c| format!(" [control: {}]", c.bug));
                println!("  {:<20} {}; {}{ctl}", v.name, v.runtime, v.http);
            }
            println!("\nscenarios:");
            for s in workload::builtin() {
                println!(
                    "  {:<40} [{}] {} agents on {}: {}",
                    s.name,
                    s.tags.join(","),
                    s.agent_count(),
                    s.preset,
                    s.description
                );
            }
            return ExitCode::SUCCESS;
        }
        Command::Compare(c) => return compare(c),
        Command::Conformance(c) => return conformance(c),
        Command::Merge(m) => return merge(m),
        Command::Exec(e) => return exec(e),
        Command::Record(r) => return record(r),
        Command::Calibrate(c) => return calibrate(c),
        Command::Soak(s) => return soak(s),
        Command::Bench(b) => return bench(b),
        Command::BenchWriter(w) => {
            return match harness::bench::serve_bare_writer(w.tokens, Duration::from_micros(w.interval_us)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("harness bench-writer: {e}");
                    ExitCode::from(1)
                }
            };
        }
        Command::Matrix(mut m) => {
            let twin = match m
                .common
                .twin
                .take()
                .map(|t| sim_ollama::advanced::config::ConfigFile::from_path(&t).map_err(|e| e.to_string()))
            {
                Some(Err(e)) => {
                    eprintln!("harness: --twin: {e}");
                    return ExitCode::from(2);
                }
                Some(Ok(f)) => Some(std::sync::Arc::new(f)),
                None => None,
            };
            match expand_runtimes(&m.runtimes).and_then(|r| plan(r, m.scenarios, m.common)).and_then(|mut p| {
                if let Some(text) = &m.shard {
                    p.shard = Some(harness::report::Shard::parse(text, p.runtimes.len() * p.scenarios.len())?);
                }
                Ok(p)
            }) {
                Ok(p) => return execute(p, twin),
                Err(e) => Err(e),
            }
        }
        Command::Run(r) => expand_runtimes(&[r.runtime]).and_then(|rt| plan(rt, vec![r.scenario], r.common)),
    };
    match planned {
        Ok(p) => execute(p, None),
        Err(e) => {
            eprintln!("harness: {e}");
            ExitCode::from(2)
        }
    }
}
