//! Properties (proptest) of the simulator and the harness's stream parsing (issue 5), and the
//! workspace build's one feature set (issue 25), and the docs' Rust snippets (issue 24).

#[path = "../util.rs"]
mod util;

// Chunking, token counts, parser robustness, cancellation.
mod props;

// One feature set for every build of the workspace (workspace-hack).
mod workspace;

// Every Rust snippet of the docs compiles and runs.
mod docs;
