//! `harness calibrate`: measures a live deployment (one or more Ollama servers and a model)
//! and writes its *twin*: a simulator configuration whose servers behave as the measured ones
//! did, so `sim-ollama --config TWIN` and `harness matrix --config TWIN` answer "what does my
//! deployment allow?" for that hardware, with no server.
//!
//! What is measured, in this order (every call streams, timed by the client as an agent times
//! it; every prompt starts with a word of its own, so no server reuses a cached prompt):
//! 1. the model's metadata (`/api/show`, `/api/tags`) and whether it runs on a CPU (`/api/ps`);
//! 2. solo calls: decode speed, the spread of the gaps between tokens, the per-call overhead
//!    the server reports in `load_duration`;
//! 3. time to first token against prompt length (one token answers at four lengths, in
//!    rounds): the fixed part, the prompt speed and whether it falls with the prompt's length
//!    (a curve where the fastest calls bend upward), in the simulator's own token counts of
//!    the same texts;
//! 4. 2..N calls at once on one server: the slots (how many decode before one finishes) and
//!    each stream's speed beside k-1 others (the batching slowdown);
//! 5. one call on each of two servers at once, every pair: which servers slow which (the
//!    devices: some servers may share one while others have their own); and three servers or
//!    more all at once, against what those devices give them;
//! 6. loads: an unload then a call, and a reload for changed runner options;
//! 7. bursts of one-token calls at a load, each four times the last until one is refused (128
//!    at most): how many may wait for it (`OLLAMA_MAX_QUEUE`);
//! 8. with `--with-models`, the other models the agents use, each loaded in turn: its load, its
//!    time to first token at the four prompt lengths and its decode speed, and how many stay
//!    loaded together (`OLLAMA_MAX_LOADED_MODELS`, or the memory they need).
//!
//! [`twin`] turns the figures into a [`ConfigFile`] with the figures kept in its
//! `[calibration]` table; [`to_toml`] writes it with a comment above each value saying what
//! measured it; [`check`] compares a new calibration with a twin's (`--check`: has the server
//! drifted?). What the model cannot express is said in the file's notes, not fitted.
//!
//! `calibrate/figures.rs` holds the figures, `calibrate/fits.rs` the fits;
//! `calibrate/devices.rs` which servers share a device; `calibrate/measure.rs` the session of
//! calls to the servers; `calibrate/twin.rs` the twin file and the drift check. This file only
//! names them.

mod devices;
mod figures;
mod fits;
mod measure;
mod twin;

pub use devices::{DeviceGroup, apart_in_speed, busy_note, device_groups};
pub use figures::{CalibratePlan, Calibration, Figure, LoadBurst, ModelMeta, OtherModel, Pair, Slots, decoded_at_once};
pub use fits::{PromptFit, fit_batch_penalty, fit_prompt, fit_sharing, rising_curve, rising_line, robust_rising_line};
pub use measure::{ProgressFn, calibrate, check_confirmed};
pub use twin::{Drift, Tolerance, calibration_of, check, confirm, to_toml, tolerance, twin};
