//! Runs multi-agent LLM workloads on every Rust async runtime variant, against the embedded
//! sim-ollama or real Ollama servers, measures them honestly (solo baselines, true and
//! apparent efficiency), and says in words where concurrency collapsed.
//!
//! Data flow: workload → runtime variant → HTTP client → measurement (+ the simulator's
//! trace) → verdict → report.
//!
//! # The public surface
//! What a user (and `main.rs`, and the tests) needs is re-exported here: run a matrix with
//! [`run`] and a [`MatrixPlan`] of [`Scenario`]s, read its [`Results`] and their
//! [`Verdict`]s, compare two results, judge a program ([`exec`]), and the figures every run
//! carries ([`CallMetrics`], [`AgentTimes`], [`Efficiency`]). The modules below are public for
//! their details; the HTTP stacks, the measurement and the baselines are private.
//!
//! # Map of the code
//! By concept; `docs/architecture.md` draws the same modules by floor.
//! - [`matrix`]: start here: runs runtimes x scenarios x runs, with solo baselines.
//! - [`workload`]: scenarios and agents, from `harness/scenarios/*.toml`.
//! - [`runtime`]: the variants (tokio, LocalSet, async-std, smol, 1 KB reads, the study's
//!   bridge) and the controls with deliberate serialization bugs.
//! - `client` (private): the HTTP stacks that stream a call and time every token.
//! - `measure` (private): per-call metrics and efficiencies against the solo baselines.
//! - `baseline` (private): solo rounds, their medians, and the bootstrap interval of a saving.
//! - [`verdict`]: a run's verdict: the simulator's judge (`sim_ollama::judge`) told what the
//!   client saw, or, in live mode, the calls' order and the saving against the solo rounds.
//! - [`stats`]: mean, sd, 95 % CI, effect size.
//! - `results` (private; re-exported by [`report`]): the data model, cells, shards, merging.
//! - [`report`]: `results.json`, `summary.md`, CSV, written atomically.
//! - [`thresholds`]: `harness/thresholds.toml`, what each cell must read.
//! - [`compare`]: two reports cell by cell, for CI.
//! - [`conformance`]: one battery of requests to a real Ollama and to the simulator, every
//!   difference in status, headers, key order, error text and event sequence reported.
//! - [`exec`]: run any program against the simulator and print the judge's report.
//! - [`timeline`]: SVG timelines of runs and the HTML report of a matrix.
//! - [`record`]: per-token timings of a live server, for the simulator to replay.
//! - [`calibrate`]: measures live servers and writes their twin, a simulator configuration.
//! - [`soak`]: the reliability benchmark of a long-running simulator (`harness soak`).
//! - [`bench`](mod@bench): the pacing benchmark, client and servers in separate processes (`harness bench`).

mod baseline;
pub mod bench;
pub mod calibrate;
mod client;
pub mod compare;
pub mod conformance;
pub mod differential;
pub mod exec;
pub mod matrix;
mod measure;
pub mod record;
pub mod report;
mod results;
pub mod runtime;
pub mod soak;
pub mod stats;
pub mod thresholds;
pub mod timeline;
pub mod verdict;
pub mod workload;

pub use client::{CallRecord, ParsedStream, endpoint_url, parse_stream};
pub use matrix::{MatrixError, MatrixPlan, Progress, Quiet, Target, run};
pub use measure::{AgentTimes, CallMetrics, Efficiency};
pub use report::{CellSummary, Results, RunResult};
pub use verdict::Verdict;
pub use workload::Scenario;
