//! What the judge reads besides the trace: its options and the client's view of each call;
//! and one request as the judge sees it.

use crate::trace::RequestTrace;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What the client saw of one request (optional: the harness knows it, `harness exec` does
/// not). Times in microseconds since the simulator started, like the trace's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientCall {
    /// The request's trace id.
    pub request: u64,
    /// When the client made the call.
    pub sent_us: u64,
    /// When the client had read the last byte of the answer.
    pub end_us: u64,
}

/// What to judge and what is known besides the trace.
#[derive(Debug, Clone, Default)]
pub struct JudgeOptions {
    pub(super) expected_agents: Option<usize>,
    pub(super) handoff_tolerance: Option<Duration>,
    pub(super) client_calls: Vec<ClientCall>,
    pub(super) since: Option<u64>,
}

impl JudgeOptions {
    /// Judge everything in the trace, agents from labels or conversations.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many agents the program runs that should be able to run at once. Without labels
    /// the judge cannot count agents, so unlabelled programs whose agents make several
    /// unrelated calls need it; with labels, a smaller number than the labelled agents says the
    /// program limits itself to that many at once by design.
    pub fn expected_agents(mut self, n: usize) -> Self {
        self.expected_agents = Some(n.max(1));
        self
    }

    /// Hand-offs: a call that arrives within this much wall time after another agent's request
    /// ended, where such requests ran back to back since the agent's previous answer, waited
    /// for them. Default: 20 ms, or a quarter of the median solo cost of a request when that is
    /// shorter, and at least 1 ms.
    pub fn handoff_tolerance(mut self, d: Duration) -> Self {
        self.handoff_tolerance = Some(d);
        self
    }

    /// Client-side observations of the requests (when the call was made, when the client had
    /// read the whole answer): the judge then measures the program's time and local work on
    /// the client's clock and can name a blocked executor or a connection pool.
    pub fn client_calls(mut self, calls: Vec<ClientCall>) -> Self {
        self.client_calls = calls;
        self
    }

    /// Only requests with this trace id or a later one (a mark taken before the program ran).
    pub fn since(mut self, first_id: u64) -> Self {
        self.since = Some(first_id);
        self
    }
}

/// One request as the judge sees it.
#[derive(Debug, Clone)]
pub(super) struct Req<'a> {
    pub(super) r: &'a RequestTrace,
    /// Start and end on the program's clock (the client's when known).
    pub(super) start: u64,
    pub(super) end: u64,
    /// Server-side end.
    pub(super) server_end: u64,
    pub(super) group: usize,
}
