//! Recording: the trace store of one simulator (active and finished requests, the byte
//! budget, the answers carried into later prompts) and the guard each request records through.

use super::record::{
    DeviceSharing, Load, Outcome, RequestTrace, TRACE_SCHEMA_VERSION, TraceSnapshot, Wait, WaitReason, explain,
};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How many finished requests the trace keeps before dropping the oldest (besides its byte
/// budget).
const MAX_FINISHED: usize = 200_000;

/// An estimate of the memory a finished record holds, bytes: its fixed part, its token times,
/// waits, loads, strings and options.
fn record_bytes(r: &RequestTrace) -> usize {
    let strings = r.endpoint.len()
        + r.model.len()
        + r.agent.len()
        + r.agent_label.as_ref().map_or(0, String::len)
        + r.client.len()
        + r.error.as_ref().map_or(0, String::len)
        + r.fault.as_ref().map_or(0, String::len)
        + r.conversation.as_ref().map_or(0, |c| 64 + c.key.len() + c.parent.as_ref().map_or(0, String::len));
    let options = if r.options.is_null() { 0 } else { r.options.to_string().len() * 2 };
    std::mem::size_of::<RequestTrace>()
        + r.token_us.capacity() * 8
        + r.waits.iter().map(|w| std::mem::size_of::<Wait>() + w.detail.len()).sum::<usize>()
        + r.loads.iter().map(|l| std::mem::size_of::<Load>() + l.reason.len()).sum::<usize>()
        + r.shared_device_with.len() * 8
        + strings
        + options
}

/// The trace store of one simulator.
#[derive(Debug)]
pub(crate) struct Trace {
    origin: Instant,
    time_scale: f64,
    next_id: AtomicU64,
    active: Mutex<BTreeMap<u64, Arc<Mutex<RequestTrace>>>>,
    /// Finished records with their estimated size, and the sizes' sum.
    finished: Mutex<(VecDeque<(RequestTrace, usize)>, usize)>,
    dropped: AtomicU64,
    /// Bytes the finished records may hold.
    budget: usize,
    /// The devices' sharing model, copied into every snapshot.
    devices: Vec<DeviceSharing>,
    /// The answers given so far, to recognise them in later prompts.
    answers: crate::carried::Answers,
}

impl Trace {
    pub(crate) fn new(origin: Instant, time_scale: f64, budget: usize, devices: Vec<DeviceSharing>) -> Self {
        Trace {
            devices,
            origin,
            time_scale,
            next_id: AtomicU64::new(1),
            active: Mutex::new(BTreeMap::new()),
            finished: Mutex::new((VecDeque::new(), 0)),
            dropped: AtomicU64::new(0),
            budget,
            answers: crate::carried::Answers::default(),
        }
    }

    /// Estimated bytes held by finished records.
    pub(crate) fn finished_bytes(&self) -> usize {
        lock(&self.finished).1
    }

    /// Microseconds since the simulator started.
    pub(crate) fn us(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.origin).as_micros() as u64
    }

    /// Starts recording a request; the record is finished when the guard is dropped.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn begin(
        self: &Arc<Self>,
        received: Instant,
        instance: usize,
        device: usize,
        endpoint: &str,
        model: &str,
        agent: Option<String>,
        client: String,
        stream: bool,
        options: serde_json::Value,
    ) -> TraceGuard {
        let received_us = self.us(received);
        let rec = Arc::new(Mutex::new(RequestTrace {
            instance,
            device,
            endpoint: endpoint.to_string(),
            model: model.to_string(),
            agent: agent.clone().unwrap_or_else(|| client.clone()),
            agent_label: agent,
            client,
            stream,
            options,
            handled_us: self.us(Instant::now().max(received)),
            ..RequestTrace::arrived(received_us)
        }));
        // The id is taken under the `active` lock, with the insertion: a snapshot never shows a
        // request without the ones that arrived before it.
        let id = {
            let mut active = lock(&self.active);
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            lock(&rec).id = id;
            active.insert(id, Arc::clone(&rec));
            id
        };
        TraceGuard {
            trace: Arc::clone(self),
            rec,
            id,
            pending: Vec::new(),
            speed_sum: 0.0,
            speed_min: 1.0,
            tokens: 0,
            solo_us: 0,
            late_us: 0,
            start_late_us: 0,
        }
    }

    /// Every request so far.
    ///
    /// Atomic: the `active` lock is held while the finished list is copied, and a request
    /// moves from one to the other under that same lock, so a request that finishes during a
    /// snapshot is in exactly one of them.
    pub(crate) fn snapshot(&self) -> TraceSnapshot {
        let mut requests: Vec<RequestTrace>;
        {
            let active = lock(&self.active);
            requests = lock(&self.finished).0.iter().map(|(r, _)| r.clone()).collect();
            requests.extend(active.values().map(|r| lock(r).clone()));
        }
        requests.sort_by_key(|r| r.id);
        for r in &mut requests {
            r.explanation = explain(r);
        }
        TraceSnapshot {
            schema_version: TRACE_SCHEMA_VERSION,
            time_scale: self.time_scale,
            dropped: self.dropped.load(Ordering::Relaxed),
            requests,
            devices: self.devices.clone(),
        }
    }

    /// The id the next request will get.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed)
    }

    /// Requests not finished yet.
    pub(crate) fn in_flight(&self) -> usize {
        lock(&self.active).len()
    }

    /// Forgets finished requests (active ones stay) and the answers they gave.
    pub(crate) fn clear(&self) {
        *lock(&self.finished) = (VecDeque::new(), 0);
        self.answers.clear();
        self.dropped.store(0, Ordering::Relaxed);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records into one request's trace; finishes it on drop (as cancelled unless told otherwise).
#[derive(Debug)]
pub(crate) struct TraceGuard {
    trace: Arc<Trace>,
    rec: Arc<Mutex<RequestTrace>>,
    id: u64,
    /// Token times not yet copied into the shared record (one lock per batch of tokens).
    pending: Vec<u64>,
    speed_sum: f64,
    speed_min: f64,
    tokens: u64,
    /// Modelled solo cost so far (written with the token batches and at the end).
    solo_us: u64,
    /// How late the latest token went out against its schedule, µs.
    late_us: u64,
    /// How late the stream's schedule started against when the request had its slot (the
    /// simulator got to it after its first token was due, so the schedule was moved), µs.
    start_late_us: u64,
}

/// Token times are copied into the shared record this many at a time (and at the end), so a
/// snapshot of a request in flight may lack its latest few tokens.
const TOKEN_BATCH: usize = 32;

impl TraceGuard {
    pub(crate) fn us(&self, at: Instant) -> u64 {
        self.trace.us(at)
    }

    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut RequestTrace) -> R) -> R {
        f(&mut lock(&self.rec))
    }

    /// Starts a wait; returns its index for [`TraceGuard::end_wait`].
    pub(crate) fn begin_wait(&self, reason: WaitReason, at: Instant, detail: String) -> usize {
        let from_us = self.us(at);
        self.with(|r| {
            r.waits.push(Wait { reason, from_us, to_us: None, detail });
            r.waits.len() - 1
        })
    }

    /// Rewrites an open wait's detail (the same cause, its figures changed).
    pub(crate) fn wait_detail(&self, index: usize, detail: String) {
        self.with(|r| {
            if let Some(w) = r.waits.get_mut(index) {
                w.detail = detail;
            }
        });
    }

    pub(crate) fn end_wait(&self, index: usize, at: Instant) {
        let to = self.us(at);
        self.with(|r| {
            if let Some(w) = r.waits.get_mut(index) {
                w.to_us = Some(to);
            }
        });
    }

    /// The request's id in the trace.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Records which earlier answers the request's `prompt` carries, and remembers its own
    /// `answer` and tool `call_ids` for the requests to come (see `crate::carried`).
    pub(crate) fn carry(&self, prompt: &str, answer: &str, call_ids: &[&str]) {
        let (carries, hints) = self.trace.answers.link(self.id, prompt, answer, call_ids);
        if !carries.is_empty() || !hints.is_empty() {
            self.with(|r| {
                r.carries = carries;
                r.hints = hints;
            });
        }
    }

    /// The request's modelled solo work so far (see [`RequestTrace::solo_us`]).
    pub(crate) fn solo(&mut self, work: std::time::Duration) {
        self.solo_us = work.as_micros() as u64;
    }

    /// The stream's schedule started `by` later than the request had its slot: the simulator
    /// got to it after its first token was due (a machine too busy to run it on time). Every
    /// token's lateness counts it.
    pub(crate) fn started_late(&mut self, by: std::time::Duration) {
        self.start_late_us = by.as_micros() as u64;
    }

    /// A token went out at `at`, due at `due`, its stream at `speed` of its solo speed.
    pub(crate) fn token(&mut self, at: Instant, due: Instant, speed: f64) {
        self.late_us = self.start_late_us + at.saturating_duration_since(due).as_micros() as u64;
        self.pending.push(self.us(at));
        self.tokens += 1;
        self.speed_sum += speed;
        self.speed_min = self.speed_min.min(speed);
        // The first token is published at once (it marks when the response started).
        if self.tokens == 1 || self.pending.len() >= TOKEN_BATCH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let (tokens, sum, min, solo, late) = (self.tokens, self.speed_sum, self.speed_min, self.solo_us, self.late_us);
        let pending = std::mem::take(&mut self.pending);
        self.with(|r| {
            r.solo_us = solo;
            r.late_us = late;
            if r.first_token_us.is_none() {
                r.first_token_us = pending.first().copied();
            }
            r.token_us.extend_from_slice(&pending);
            r.tokens = tokens;
            r.min_speed = min;
            r.mean_speed = sum / tokens as f64;
        });
        self.pending = pending;
        self.pending.clear();
    }

    /// Ends the record with an outcome.
    pub(crate) fn finish(&mut self, outcome: Outcome, status: u16, error: Option<String>) {
        self.flush();
        let now = self.us(Instant::now());
        let solo = self.solo_us;
        self.with(|r| {
            if r.outcome == Outcome::Active {
                r.solo_us = solo;
                r.outcome = outcome;
                r.status = status;
                r.error = error;
                r.end_us = Some(now);
            }
        });
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        // A request dropped before it finished was cancelled by its client.
        self.finish(Outcome::Cancelled, 499, None);
        // Moved under the `active` lock, so a snapshot sees it in exactly one list.
        let mut active = lock(&self.trace.active);
        if let Some(rec) = active.remove(&self.id) {
            // Moved out, not copied: no one reads this request's shared record after this.
            let mut r = std::mem::take(&mut *lock(&rec));
            r.token_us.shrink_to_fit();
            let size = record_bytes(&r);
            let mut fin = lock(&self.trace.finished);
            fin.0.push_back((r, size));
            fin.1 += size;
            // The oldest go first, past the count or the byte budget (a budget of 0 keeps none).
            while fin.0.len() > MAX_FINISHED || (fin.1 > self.trace.budget && !fin.0.is_empty()) {
                if let Some((_, s)) = fin.0.pop_front() {
                    fin.1 -= s;
                    self.trace.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}
