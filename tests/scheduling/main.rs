//! How the simulator models deployments: slots, queueing, loads and reloads, keep-alive,
//! device sharing, injected faults, and what it leaks (nothing). See: issue 3.

use suite as util;

// Shared request helpers for this binary.
mod helpers;
// One slot serializes, two slots overlap; reloads; keep-alive.
mod semantics;
// Instances sharing a device, or not (serial timing group).
mod devices;
// Every fault kind does what it says and leaves the server healthy.
mod faults;
// Thousands of aborted streams leak no slot, task or request.
mod leaks;
// Loads as the real scheduler runs them: queued, counted, aborted, served while expiring.
mod loads;
// Device memory: eviction by memory, servers sharing a GPU, memory release, num_ctx tiers.
mod memory;
// The prompt cache of each slot and in host memory (issue 12).
mod cache;
