//! Properties (proptest) of the simulator and the harness's stream parsing (issue 5), and the
//! workspace build's one feature set (issue 25), the docs' Rust snippets (issue 24), and the
//! crates' layering (issue 26).

use suite as util;

// Chunking, token counts, parser robustness, cancellation.
mod props;

// One feature set for every build of the workspace (workspace-hack).
mod workspace;

// Every Rust snippet of the docs compiles and runs.
mod docs;

// The crates' modules form layers: no import circles (issue 26).
mod layering;
