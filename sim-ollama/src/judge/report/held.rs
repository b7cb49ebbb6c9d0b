//! The report's part on calls that never overlapped (`judge/held.rs` reads them).

use serde::{Deserialize, Serialize};

/// Calls that never overlapped, each after a gap longer than a call: whether they waited for
/// each other's answers, as a probe run holding every answer shows. See docs/judge.md, "Calls
/// that never overlapped".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldReport {
    /// Unprobed, waited, did not wait, void, too long to probe, or followed the answers.
    pub status: HeldStatus,
    /// How long the probe run held each answer back at most, s (0 when too long to probe).
    pub hold_s: f64,
    /// The median gap from one call's end to the next one's start in the run judged, s.
    pub gap_s: f64,
    /// The median call in the run judged, s.
    pub call_s: f64,
    /// Calls of the probe run that came while an earlier answer was held or in flight.
    pub overtook: usize,
    /// Answers the probe run held back (it stops holding once a call came while one was, or
    /// three were held to the end with none coming).
    pub held: usize,
    /// Where each call followed the answer before it (`followed`): the standard deviation of
    /// the gaps, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_spread_s: Option<f64>,
    /// The same, of the spacing of the calls' starts, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_spread_s: Option<f64>,
    /// Why the probe run was void.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub void: Option<String>,
}

/// What a probe run holding every answer found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldStatus {
    /// No probe run yet: the verdict (serialized) stands until one tells.
    Unprobed,
    /// No call came while an answer was held: each waited for the one before (serialized).
    Waited,
    /// Calls came while answers were held: they did not wait (inconclusive, `time_scale`).
    DidNotWait,
    /// The probe run failed or made other calls: the verdict stands.
    Void,
    /// The gaps are longer than a probe run holds an answer: a longer time scale tells.
    TooLong,
    /// Each call came a steady gap after the answer before it, however long that answer took:
    /// it waited for it (serialized), shown by the run judged, no probe run needed.
    Followed,
}
