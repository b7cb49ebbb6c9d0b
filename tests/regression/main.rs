//! The regression gate: every runtime variant x the CI scenarios on the embedded simulator,
//! each cell checked against `harness/thresholds.toml` and the verdict table snapshot-checked
//! (`snapshots/verdicts_*.snap`: variant, verdict, efficiency band; never raw floats).
//! A change that serializes agents or costs efficiency fails here. See: issue 5.
//! The whole binary runs in the serial timing group.

use suite as util;

// One test per CI scenario: all variants, thresholds, snapshot.
mod matrix;
