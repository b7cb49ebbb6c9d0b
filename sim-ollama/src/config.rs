//! Configuration: the model catalogue with each model's latency profile, the devices and
//! instances of a deployment, and server-wide settings. Everything can be written in TOML
//! (`sim-ollama/fixtures/catalogue.toml` is the default catalogue; `sim-ollama/fixtures/presets/*.toml` are
//! deployments) and overridden by the builder or the command line.
//!
//! `config/file.rs` is the TOML schema; `config/model.rs` what a model does from its spec
//! (memory, cost per token, a call's modelled time); `config/resolve.rs` the resolution of
//! defaults, file and overrides into the configuration a simulator runs with. This file only
//! names them: each reads the schema, none reads this file.

mod file;
mod model;
mod resolve;

pub use file::*;
pub(crate) use resolve::{RawConfig, ResolvedInstance, SimConfig};
