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
//! - [`measure`]: per-call metrics, efficiencies, server-side evidence from the trace.
//! - [`verdict`]: parallel / degraded / serialized, with the reason.
//! - [`stats`]: mean, sd, 95 % CI, effect size.
//! - [`report`]: `results.json`, `summary.md`, CSV, written atomically.
//! - [`thresholds`]: `fixtures/thresholds.toml`, what each cell must read.
//! - [`compare`]: two reports cell by cell, for CI.
//! - [`exec`]: judge any program from the server's trace.
//! - [`timeline`]: SVG timelines of runs and the HTML report of a matrix.
//! - [`record`]: per-token timings of a live server, for the simulator to replay.

pub mod client;
pub mod compare;
pub mod exec;
pub mod matrix;
pub mod measure;
pub mod record;
pub mod report;
pub mod runtime;
pub mod stats;
pub mod thresholds;
pub mod timeline;
pub mod verdict;
pub mod workload;
