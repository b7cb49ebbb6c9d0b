//! The simulator's own endpoints: `GET /sim/trace`, `DELETE /sim/trace`, `GET /sim/metrics`.
//! They are served by every instance and cover the whole simulator.

use super::{AppState, json_response};
use crate::metrics::LatenessSummary;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// `GET /sim/trace`: every request so far (schema in `docs/trace.md`).
pub(crate) async fn get_trace(State(s): State<AppState>) -> Response {
    json_response(StatusCode::OK, &s.shared.trace.snapshot())
}

/// `DELETE /sim/trace`: forgets finished requests.
pub(crate) async fn delete_trace(State(s): State<AppState>) -> Response {
    s.shared.trace.clear();
    StatusCode::OK.into_response()
}

/// Live state of one instance.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceMetrics {
    /// Instance index.
    pub instance: usize,
    /// Its port.
    pub port: u16,
    /// Its device index.
    pub device: usize,
    /// Requests decoding or evaluating prompts now (holding a slot).
    pub active: usize,
    /// Requests holding a runner but waiting for a slot.
    pub waiting_for_slot: usize,
    /// Requests waiting for the scheduler (load, reload, eviction).
    pub pending: usize,
    /// Loaded models with their slot use.
    pub loaded: Vec<LoadedMetrics>,
}

/// A loaded model in [`InstanceMetrics`].
#[derive(Debug, Clone, Serialize)]
pub struct LoadedMetrics {
    /// `name:tag`.
    pub model: String,
    /// Slots in use.
    pub busy_slots: usize,
    /// `num_parallel`.
    pub num_parallel: usize,
    /// Context length per slot.
    pub context_length: u64,
}

/// `GET /sim/metrics` body.
#[derive(Debug, Clone, Serialize)]
pub struct SimMetrics {
    /// Seconds since the simulator started.
    pub uptime_s: f64,
    /// Per instance.
    pub instances: Vec<InstanceMetrics>,
    /// Token emission lateness against the schedule.
    pub lateness: LatenessSummary,
}

pub(crate) fn collect(s: &crate::server::Shared) -> SimMetrics {
    let instances = s
        .instances
        .iter()
        .map(|i| {
            let runners = i.runners();
            InstanceMetrics {
                instance: i.index,
                port: i.port.load(std::sync::atomic::Ordering::Relaxed),
                device: i.device.index,
                active: runners.iter().map(|r| r.busy_slots).sum(),
                waiting_for_slot: runners.iter().map(|r| r.waiting_for_slot).sum(),
                pending: i.pending(),
                loaded: runners
                    .iter()
                    .map(|r| LoadedMetrics {
                        model: r.display.clone(),
                        busy_slots: r.busy_slots,
                        num_parallel: r.num_parallel,
                        context_length: r.num_ctx,
                    })
                    .collect(),
            }
        })
        .collect();
    SimMetrics { uptime_s: s.origin.elapsed().as_secs_f64(), instances, lateness: s.lateness.summary() }
}

/// `GET /sim/metrics`.
pub(crate) async fn metrics(State(s): State<AppState>) -> Response {
    json_response(StatusCode::OK, &collect(&s.shared))
}
