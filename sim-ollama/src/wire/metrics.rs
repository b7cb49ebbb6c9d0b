//! The timing and token counts of a final object, shared by every wire format.

use serde::Serialize;

/// The metrics of a final `done:true` object. Zero values are omitted, as Go's `omitempty`.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Metrics {
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) total_duration: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) load_duration: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) prompt_eval_count: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) prompt_eval_duration: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) eval_count: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) eval_duration: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}
