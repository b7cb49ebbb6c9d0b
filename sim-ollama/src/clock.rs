//! Wall-clock timestamps in Ollama's format, and the frozen clock that makes them
//! deterministic.
//!
//! Ollama prints Go `time.Time` values: RFC 3339 in UTC with a fraction of 0 to 9 digits,
//! trailing zeros trimmed (`2025-10-26T17:21:21.196249Z`).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The fixed epoch a frozen clock reports: 2026-01-01T00:00:00Z.
pub const FROZEN_EPOCH_UNIX_S: u64 = 1_767_225_600;

/// Maps monotonic instants to wall-clock timestamps, or to a fixed epoch when frozen.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    frozen: bool,
    /// A (monotonic, wall) pair taken at start, so every timestamp of a run comes from one
    /// monotonic clock and timestamps never go backwards within a stream.
    origin: Instant,
    origin_wall: SystemTime,
}

impl Clock {
    pub(crate) fn new(frozen: bool) -> Self {
        Clock { frozen, origin: Instant::now(), origin_wall: SystemTime::now() }
    }

    pub(crate) fn is_frozen(&self) -> bool {
        self.frozen
    }

    /// Now, as a timestamp: the fixed epoch when frozen, the system clock otherwise.
    pub(crate) fn now(&self) -> SystemTime {
        if self.frozen { frozen_epoch() } else { SystemTime::now() }
    }

    /// Wall time of a monotonic instant (real clock only).
    pub(crate) fn wall(&self, at: Instant) -> SystemTime {
        if at >= self.origin { self.origin_wall + (at - self.origin) } else { self.origin_wall - (self.origin - at) }
    }

    /// The timestamp of an event: the real wall time of `at`, or, when frozen, the fixed epoch
    /// plus `modelled_offset` (the event's offset in the request's intended schedule).
    pub(crate) fn stamp(&self, at: Instant, modelled_offset: Duration) -> SystemTime {
        if self.frozen { frozen_epoch() + modelled_offset } else { self.wall(at) }
    }
}

/// The frozen clock's epoch as a `SystemTime`.
pub(crate) fn frozen_epoch() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(FROZEN_EPOCH_UNIX_S)
}

/// Formats like Go's `time.RFC3339Nano` in UTC: fraction trimmed of trailing zeros.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let mut s = humantime::format_rfc3339_nanos(t).to_string();
    // humantime always prints 9 digits: "....123450000Z".
    if let Some(dot) = s.rfind('.') {
        let frac_end = s.len() - 1; // before 'Z'
        let trimmed = s[dot + 1..frac_end].trim_end_matches('0').len();
        if trimmed == 0 {
            s.replace_range(dot..frac_end, "");
        } else {
            s.replace_range(dot + 1 + trimmed..frac_end, "");
        }
    }
    s
}

/// Seconds since the Unix epoch, as the OpenAI layer's `created` field.
pub(crate) fn unix_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_trims_trailing_zeros_like_go() {
        let base = UNIX_EPOCH + Duration::from_secs(1_761_499_281);
        assert_eq!(rfc3339(base + Duration::from_nanos(196_249_000)), "2025-10-26T17:21:21.196249Z");
        assert_eq!(rfc3339(base), "2025-10-26T17:21:21Z");
        assert_eq!(rfc3339(base + Duration::from_nanos(1)), "2025-10-26T17:21:21.000000001Z");
        assert_eq!(rfc3339(base + Duration::from_nanos(500_000_000)), "2025-10-26T17:21:21.5Z");
    }

    #[test]
    fn frozen_clock_reports_epoch_plus_offset() {
        let c = Clock::new(true);
        let t = c.stamp(Instant::now(), Duration::from_millis(1500));
        assert_eq!(rfc3339(t), "2026-01-01T00:00:01.5Z");
    }
}
