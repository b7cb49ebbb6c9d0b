//! The harness: every runtime variant, the controls, the verdicts, live mode, reports.
//! See: issue 4. These tests measure wall time, so the whole binary runs in the serial
//! timing group (`.config/nextest.toml`).

use suite as util;

// Helpers: small scenarios and a matrix runner.
mod helpers;
// Deployments: one slot serializes at the server; one device gives no real speedup.
mod deployments;
// Live mode against a separate sim-ollama process and against failing servers (wiremock).
mod live;
// Reports: files, schema, atomic writes, the CLI.
mod reports;
// Record a server's timings, replay them as an empirical profile.
mod replay;
// The reliability benchmark in small: bad requests, disconnects, the pending limit, a soak.
mod soak;
// Agents whose calls are tool round trips.
mod tools;
// Multi-turn agents whose histories grow, on one shared slot or a slot each (issue 12).
mod history;
// The pacing benchmark: the simulator and a bare writer in processes of their own (issue 15).
mod bench;
// A twin of live servers: calibrate against a simulator of known configuration (issue 37).
mod calibrate;
