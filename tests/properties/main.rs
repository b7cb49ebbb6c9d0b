//! Properties (proptest) of the simulator and the harness's stream parsing. See: issue 5.

#[path = "../util.rs"]
mod util;

// Chunking, token counts, parser robustness, cancellation.
mod props;
