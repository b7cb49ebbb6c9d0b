//! Measurements of the simulator itself: how late tokens leave against their deadlines.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::Mutex;
use std::time::Duration;

/// A histogram of token emission lateness (emission time minus deadline), in microseconds.
#[derive(Debug)]
pub(crate) struct Lateness {
    hist: Mutex<Histogram<u64>>,
}

/// Summary of a lateness histogram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatenessSummary {
    /// Tokens recorded.
    pub count: u64,
    /// Median lateness, microseconds.
    pub p50_us: u64,
    /// 90th percentile, microseconds.
    pub p90_us: u64,
    /// 99th percentile, microseconds.
    pub p99_us: u64,
    /// 99.9th percentile, microseconds.
    pub p999_us: u64,
    /// Largest lateness seen, microseconds.
    pub max_us: u64,
    /// Mean lateness, microseconds.
    pub mean_us: f64,
}

impl Default for Lateness {
    fn default() -> Self {
        // 3 significant digits, auto-resizing: a few KB.
        let mut h = Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant figures is a valid precision"));
        h.auto(true);
        Lateness { hist: Mutex::new(h) }
    }
}

impl Lateness {
    pub(crate) fn record_all(&self, late: &[Duration]) {
        if late.is_empty() {
            return;
        }
        let mut h = self.hist.lock().unwrap_or_else(|e| e.into_inner());
        for l in late {
            let _ = h.record(l.as_micros().min(u128::from(u64::MAX)) as u64);
        }
    }

    /// Forgets everything recorded.
    pub(crate) fn reset(&self) {
        self.hist.lock().unwrap_or_else(|e| e.into_inner()).reset();
    }

    /// Percentiles of what was recorded.
    pub(crate) fn summary(&self) -> LatenessSummary {
        let h = self.hist.lock().unwrap_or_else(|e| e.into_inner());
        LatenessSummary {
            count: h.len(),
            p50_us: h.value_at_quantile(0.5),
            p90_us: h.value_at_quantile(0.9),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            mean_us: if h.is_empty() { 0.0 } else { h.mean() },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_what_was_recorded() {
        let l = Lateness::default();
        let v: Vec<Duration> = (1..=1000u64).map(Duration::from_micros).collect();
        l.record_all(&v);
        let s = l.summary();
        assert_eq!(s.count, 1000);
        assert!((499..=501).contains(&s.p50_us), "{s:?}");
        assert!((989..=991).contains(&s.p99_us), "{s:?}");
        assert_eq!(s.max_us, 1000);
        l.reset();
        assert_eq!(l.summary().count, 0);
    }
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

/// Live state of one device.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceMetrics {
    /// Device index.
    pub device: usize,
    /// Its name.
    pub name: String,
    /// Streams evaluating or decoding on it now.
    pub streams: usize,
}

/// `GET /sim/metrics` body.
#[derive(Debug, Clone, Serialize)]
pub struct SimMetrics {
    /// Seconds since the simulator started.
    pub uptime_s: f64,
    /// Tasks alive in the simulator's runtime (servers, connections, timers).
    pub tasks: usize,
    /// Requests in the trace that have not finished.
    pub requests_in_flight: usize,
    /// Token deadlines waiting in the timer (0 when nothing streams).
    #[serde(default)]
    pub timer_entries: usize,
    /// Estimated memory held by the trace's finished requests, bytes (bounded by the budget).
    #[serde(default)]
    pub trace_bytes: usize,
    /// Per instance.
    pub instances: Vec<InstanceMetrics>,
    /// Per device.
    pub devices: Vec<DeviceMetrics>,
    /// Token emission lateness against the schedule.
    pub lateness: LatenessSummary,
}
