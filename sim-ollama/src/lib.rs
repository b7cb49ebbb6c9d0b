//! A deterministic Ollama simulator: Ollama's real HTTP API (native and OpenAI-compatible),
//! token streams whose text and intended timing are pure functions of a seed, and a model of
//! what makes real deployments slow (parallel slots, FIFO queueing, model loads and reloads,
//! instances sharing one GPU).
//!
//! Data flow: config → seeded latency model → scheduler (runner, slot) → device (shared
//! capacity) → paced token stream → routes.
//!
//! # What is public
//! [`SimBuilder`] starts a simulator, [`SimHandle`] runs it (its URLs, its trace, the judge),
//! [`JudgeOptions`] and [`Report`] (with its [`Verdict`]) judge a program, [`Error`] is every
//! fallible call's error, and [`judge`] holds the report's parts. [`advanced`] has the rest:
//! configuration, faults, scripts, noise, the raw trace, metrics.
//!
//! A crate that only judges its agents can leave out the command line's dependencies:
//! `sim-ollama = { version = "0.1", default-features = false }` (the `cli` feature builds the
//! `sim-ollama` binary).
//!
//! # Map of the code
//! By concept; `docs/architecture.md` draws the same modules by floor, with what each may
//! import (checked by `tests/properties/layering.rs`).
//! - `server`: start here. [`SimBuilder`] and [`SimHandle`]: instances on their own runtime.
//! - `config`: the catalogue, profiles, devices, instances; TOML in `sim-ollama/fixtures/`.
//! - `dist`, `latency`: seeded distributions and a request's intended schedule.
//! - `tokens`: the simulated tokenizer and deterministic text.
//! - `contexts`: what each `/api/generate` `context` the simulator answered stands for.
//! - `cpu`: a client's time on a CPU and waits for one (schedstat), for the judge.
//! - `scheduler`: one instance's runners, keep-alive, loads, reloads, slots, the 503 limit.
//! - `device`: GPU sharing, by virtual clocks (processor sharing).
//! - `pacer`, `timer`: emit steps at absolute deadlines, woken by a high-resolution timer.
//! - `generation`: one request's life, from plan to final metrics.
//! - `routes`: the HTTP surface, built by a pure `app()`: adapters per API (`native`, `openai`,
//!   `anthropic`, `responses`, `embed`, `models`, `sim`) over one `pipeline` (chat requests:
//!   `pipeline::chat`), every JSON body read by `http::json_body`.
//! - `arrival`: when each request reached the server, so the simulator's own delay in getting
//!   to it (a burst of connections) is not added to its schedule.
//! - `http1`: each connection served by hyper, the response head written as Go writes it
//!   (canonical header case and order, chunked above Go's 2 KB buffer).
//! - `request`, `wire`, `error`, `gojson`, `gotype`, `goscan`: decoding with Go's errors, the
//!   streaming formats, error shapes, JSON encoded as Go encodes it, what Go's decoder says of
//!   JSON that does not fit a nested Go type and of JSON that does not parse.
//! - `trace`, `metrics`: what the server saw, and how late it emitted tokens.
//! - `carried`: answers recognised in later prompts, the data flow between agents.
//! - `probe`: probe runs, in which the simulator holds answers back so that the agents do their
//!   local work one at a time, and the judge tells their own work from waiting for each other.
//! - `faults`, `script`: injected errors, stalls, disconnects, and scripted answers, by rule
//!   (both kept in `rules`: one rule set, one filter, one cap).
//! - [`judge`]: from a trace, how a program's requests overlapped, the time it could have
//!   saved, and a verdict with its reason (`SimHandle::judge`); its decision core
//!   ([`judge::decision`]) is shared with the harness's live mode.
//!
//! # Example
//! ```
//! # fn main() -> Result<(), sim_ollama::Error> {
//! let sim = sim_ollama::SimBuilder::new().instances(2).seed(7).time_scale(0.01).start()?;
//! let url = sim.url();          // http://127.0.0.1:PORT of instance 0; sim.urls() for all
//! // ... point any client, on any runtime, at the URLs ...
//! let trace = sim.trace();      // what the server saw
//! drop(sim);                    // stops the instances
//! # assert!(trace.requests.is_empty());
//! # Ok(()) }
//! ```
//!
//! # Tracing
//! The crate logs under the target `sim_ollama`: `RUST_LOG=sim_ollama=debug sim-ollama`.

mod arrival;
mod cache;
mod carried;
mod clock;
mod config;
mod context;
mod contexts;
mod cpu;
mod device;
mod dist;
mod error;
mod faults;
mod generation;
mod gguf;
mod gobase64;
mod gojson;
mod goscan;
mod gotype;
mod grammar;
mod http1;
mod keepalive;
mod latency;
mod logprob;
mod metrics;
mod names;
mod noise;
mod pacer;
mod probe;
mod request;
mod routes;
mod rules;
mod scheduler;
mod schema;
mod script;
mod seed;
mod server;
mod shared;
mod store;
mod timer;
mod tokenizer;
mod tokens;
mod tools;
mod trace;
mod wire;
mod words;

pub mod judge;

pub use judge::{JudgeOptions, Report, Verdict};
pub use server::{Error, JUDGE_WAIT, SimBuilder, SimHandle};

/// What a harness, a benchmark or a tool built on the simulator needs beyond checking a
/// program: configuration files and presets, fault and script rules, latency noise, the raw
/// trace, live metrics. A test that judges agents needs none of it.
pub mod advanced {
    pub use crate::clock::FROZEN_EPOCH_UNIX_S;
    pub use crate::keepalive::KeepAlive;
    pub use crate::server::{listen, parse_ollama_host};

    /// The catalogue of models, their latency profiles, devices, instances, presets, and the
    /// TOML configuration file ([`ConfigFile`](crate::advanced::config::ConfigFile)).
    pub mod config {
        pub use crate::config::*;
    }
    /// Seeded distributions a profile's latencies are drawn from.
    pub mod dist {
        pub use crate::dist::*;
    }
    /// Injected faults: errors, stalls, disconnects, by rule and seeded (`PUT /sim/faults`).
    pub mod faults {
        pub use crate::faults::*;
    }
    /// Scripted turns: tool calls, texts and errors answered on cue (`PUT /sim/script`).
    pub mod script {
        pub use crate::script::*;
    }
    /// Latency noise: a real server's variation, drawn per request.
    pub mod noise {
        pub use crate::noise::*;
    }
    /// What the server saw: every request's arrival, waits, loads, tokens and outcome.
    pub mod trace {
        pub use crate::trace::*;
    }
    /// Live state and token lateness (`GET /sim/metrics`, [`SimHandle::metrics`](crate::SimHandle::metrics)).
    pub mod metrics {
        pub use crate::metrics::*;
    }
    /// A client's time on a CPU and waits for one, from Linux's schedstat: what the judge
    /// weighs its agents' waits against.
    pub mod cpu {
        pub use crate::cpu::*;
    }

    /// How the simulator counts a model's tokens in a text: what its prompt evaluation is
    /// charged for (`harness calibrate` fits a server's tokenizer from its
    /// `prompt_eval_count`, then its prompt speed in the tokens that tokenizer counts, so a
    /// twin given the same text takes the time the server took).
    pub use crate::tokenizer::{LETTERS_PER_TOKEN, Tokenizer};
}
