//! A deterministic Ollama simulator: Ollama's real HTTP API (native and OpenAI-compatible),
//! token streams whose text and intended timing are pure functions of a seed, and a model of
//! what makes real deployments slow (parallel slots, FIFO queueing, model loads and reloads,
//! instances sharing one GPU).
//!
//! Data flow: config → seeded latency model → scheduler (runner, slot) → device (shared
//! capacity) → paced token stream → routes.
//!
//! # Map of the code
//! - [`server`]: start here. [`SimBuilder`] and [`SimHandle`]: instances on their own runtime.
//! - `config`: the catalogue, profiles, devices, instances; TOML in `fixtures/`.
//! - `dist`, `latency`: seeded distributions and a request's intended schedule.
//! - `tokens`: the simulated tokenizer and deterministic text.
//! - `scheduler`: one instance's runners, keep-alive, loads, reloads, slots, the 503 limit.
//! - `device`: GPU sharing, by virtual clocks (processor sharing).
//! - `pacer`, `timer`: emit steps at absolute deadlines, woken by a high-resolution timer.
//! - `generation`: one request's life, from plan to final metrics.
//! - `routes`: the HTTP surface (`native`, `openai`, `sim`), built by a pure `app()`.
//! - `arrival`: when each request reached the server, so the simulator's own delay in getting
//!   to it (a burst of connections) is not added to its schedule.
//! - `request`, `wire`, `error`: decoding with Go's errors, encoding like Go, error shapes.
//! - `trace`, `metrics`: what the server saw, and how late it emitted tokens.
//! - `carried`: answers recognised in later prompts, the data flow between agents.
//! - `faults`: injected errors, stalls, disconnects, by rule and seeded.
//! - [`judge`]: from a trace, how a program's requests overlapped, the time it could have
//!   saved, and a verdict with its reason (`SimHandle::judge`).
//!
//! # Example
//! ```
//! let sim = sim_ollama::SimBuilder::new().seed(42).start().unwrap();
//! println!("Ollama API at {}", sim.url());
//! // Point any Ollama client at sim.url(); the simulator stops when `sim` is dropped.
//! ```
//!
//! # Tracing
//! The crate logs under the target `sim_ollama`: `RUST_LOG=sim_ollama=debug sim-ollama`.

pub mod clock;
pub mod config;
pub mod dist;
pub mod faults;
pub mod judge;
pub mod keepalive;
pub mod metrics;
pub mod noise;
pub mod script;
pub mod server;
pub mod trace;

mod arrival;
mod cache;
mod carried;
mod context;
mod device;
mod error;
mod generation;
mod latency;
mod names;
mod pacer;
mod request;
mod routes;
mod scheduler;
mod schema;
mod seed;
mod store;
mod timer;
mod tokens;
mod tools;
mod wire;

pub use config::{ConfigError, ConfigFile, DeviceSpec, InstanceSpec, ModelSpec, Profile, Replay};
pub use faults::{FaultKind, FaultRule};
pub use judge::{JudgeOptions, Report, Verdict};
pub use keepalive::KeepAlive;
pub use metrics::LatenessSummary;
pub use noise::NoiseSpec;
pub use routes::sim::{DeviceMetrics, InstanceMetrics, LoadedMetrics, SimMetrics};
pub use script::{ScriptRule, ScriptedCall, ScriptedError};
pub use server::{JUDGE_WAIT, NotIdle, SimBuilder, SimHandle, StartError, listen, parse_ollama_host};
pub use trace::{CacheUse, Conversation, Outcome, RequestTrace, TraceSnapshot, Wait, WaitReason};
