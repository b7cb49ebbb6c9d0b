//! The server-side trace: what every request went through, with monotonic timestamps in
//! microseconds since the simulator started. Readable in-process
//! ([`SimHandle::trace`](crate::SimHandle::trace)) and over HTTP (`GET /sim/trace`,
//! `DELETE /sim/trace`). The JSON schema is documented in `docs/trace.md`.
//!
//! `trace/record.rs` holds the records (the schema); `trace/recorder.rs` the store that
//! records them, within its budget, and the guard each request records through.

mod record;
mod recorder;

pub use record::*;
pub(crate) use recorder::{Trace, TraceGuard};
