//! What the judge's unit tests on constructed traces share (`gaps/tests.rs`,
//! `recovered/tests.rs`): times in ms, and a trace on a deployment that never slows a stream.

use crate::trace::{RequestTrace, TraceSnapshot};

pub(super) const MS: u64 = 1_000;

/// A trace of `requests` on one device that never slows a stream, each request's runner with
/// more slots than any test has requests (what an infinitely parallel server allows).
pub(super) fn trace(requests: Vec<RequestTrace>) -> TraceSnapshot {
    TraceSnapshot {
        schema_version: crate::trace::TRACE_SCHEMA_VERSION,
        time_scale: 1.0,
        dropped: 0,
        requests: requests.into_iter().map(|r| RequestTrace { slots: 64, ..r }).collect(),
        devices: vec![crate::trace::DeviceSharing { batch_penalty: 0.0, cross_process_efficiency: 1.0 }],
    }
}
