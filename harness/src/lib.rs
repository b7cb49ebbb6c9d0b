//! Runs multi-agent LLM workloads on every Rust async runtime variant, against the embedded
//! sim-ollama or real Ollama servers, measures them honestly (solo baselines, true and
//! apparent efficiency), and says in words where concurrency collapsed.
//!
//! Data flow: workload → runtime variant → HTTP client → measurement (+ the simulator's
//! trace) → verdict → report.
//!
//! # Map of the code
//! - [`matrix`]: start here: runs runtimes x scenarios x runs, with solo baselines.
//! - [`workload`]: scenarios and agents, from `fixtures/scenarios/*.toml`.
//! - [`runtime`]: the variants (tokio, LocalSet, async-std, smol, 1 KB reads, the study's
//!   bridge) and the controls with deliberate serialization bugs.
//! - [`client`]: the HTTP stacks that stream a call and time every token.
//! - [`measure`]: per-call metrics and efficiencies against measured solo baselines.
//! - [`verdict`]: a run's verdict: the simulator's judge (`sim_ollama::judge`) told what the
//!   client saw, or, in live mode, the measured efficiencies.
//! - [`stats`]: mean, sd, 95 % CI, effect size.
//! - [`report`]: `results.json`, `summary.md`, CSV, written atomically.
//! - [`thresholds`]: `fixtures/thresholds.toml`, what each cell must read.
//! - [`compare`]: two reports cell by cell, for CI.
//! - [`exec`]: run any program against the simulator and print the judge's report.
//! - [`timeline`]: SVG timelines of runs and the HTML report of a matrix.
//! - [`record`]: per-token timings of a live server, for the simulator to replay.
//! - [`soak`]: the reliability benchmark of a long-running simulator (`harness soak`).

pub mod baseline;
pub mod client;
pub mod compare;
pub mod exec;
pub mod matrix;
pub mod measure;
pub mod record;
pub mod report;
pub mod runtime;
pub mod soak;
pub mod stats;
pub mod thresholds;
pub mod timeline;
pub mod verdict;
pub mod workload;
