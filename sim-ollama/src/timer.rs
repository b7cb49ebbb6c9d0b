//! A high-resolution timer for token deadlines. tokio's timer rounds every deadline up to
//! the next millisecond tick, which makes tokens leave 0.5-1.5 ms late; this one thread
//! sleeps on a condition variable (futex timeouts are precise to tens of microseconds on
//! Linux) and wakes every stream whose deadline has passed.
//!
//! Under load it fires at most once per [`TICK`]: each firing costs a sleep and a wake-up of
//! this thread and of a runtime worker (two context switches, a futex or an eventfd write),
//! and with 100 streams of 100 tokens/s the deadlines are 100 µs apart, so firing for each
//! made those switches the largest cost of a paced token after its own `writev` (issue 15).
//! A deadline is therefore kept exactly while the timer fired more than a tick ago, and waits
//! for the tick otherwise (at most [`TICK`] late), so every stream due in it is woken at once.
//! And on the simulator's runtime ([`Timer::start_on`]) the thread does not wake the streams
//! itself, one cross-thread wake-up each: it hands them to a dispatcher task on the runtime and
//! wakes that one task, which wakes them all from a worker, where a wake-up is a push onto
//! the worker's own run queue.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

/// Deadlines this close are treated as due: waking a few microseconds early costs one
/// extra poll, sleeping for them costs more than they are worth.
pub(crate) const SLACK: Duration = Duration::from_micros(50);

/// The shortest time between two firings of the timer: a deadline that falls within a tick of
/// the previous firing waits for the tick.
pub(crate) const TICK: Duration = Duration::from_micros(500);

#[derive(Debug, Default)]
struct State {
    /// Deadlines, earliest first, by entry id. An id whose waker is gone was cancelled.
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    /// The wakers of live entries: a cancelled entry's waker (and the task it keeps alive)
    /// is dropped at once, not when its deadline passes.
    wakers: HashMap<u64, Waker>,
    seq: u64,
    /// When the timer last woke entries.
    fired: Option<Instant>,
    /// Whether a dispatcher task wakes due entries on the runtime (else this thread does).
    dispatched: bool,
    /// Wakers due, for the dispatcher.
    due: Vec<Waker>,
    /// The dispatcher's waker.
    dispatcher: Option<Waker>,
}

impl State {
    /// Drops cancelled deadlines once they outnumber the live ones, so a stream stalled for a
    /// year and then cancelled does not keep its heap entry for a year.
    fn compact(&mut self) {
        if self.heap.len() > 2 * self.wakers.len() + 1024 {
            let wakers = &self.wakers;
            self.heap.retain(|Reverse((_, id))| wakers.contains_key(id));
        }
    }
}

/// The timer; its thread stops when the last handle is dropped.
#[derive(Debug)]
pub(crate) struct Timer {
    state: Mutex<State>,
    cond: Condvar,
    stop: AtomicBool,
}

impl Timer {
    /// Starts the timer thread.
    pub(crate) fn start() -> std::io::Result<Arc<Timer>> {
        let t =
            Arc::new(Timer { state: Mutex::new(State::default()), cond: Condvar::new(), stop: AtomicBool::new(false) });
        let weak = Arc::downgrade(&t);
        std::thread::Builder::new().name("sim-ollama-timer".into()).spawn(move || {
            while let Some(t) = weak.upgrade() {
                if !t.run_once() {
                    break;
                }
            }
        })?;
        Ok(t)
    }

    /// Starts the timer thread, and a dispatcher task on `rt` that wakes due streams from a
    /// worker of `rt` (see the module's documentation).
    pub(crate) fn start_on(rt: &tokio::runtime::Handle) -> std::io::Result<Arc<Timer>> {
        let t = Timer::start()?;
        t.lock().dispatched = true;
        let guard = Dispatcher(Arc::downgrade(&t));
        rt.spawn(async move {
            let mut batch = Vec::new();
            std::future::poll_fn(|cx| {
                let Some(t) = guard.0.upgrade() else { return std::task::Poll::Ready(()) };
                {
                    let mut st = t.lock();
                    std::mem::swap(&mut st.due, &mut batch);
                    if !st.dispatcher.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        st.dispatcher = Some(cx.waker().clone());
                    }
                }
                for w in batch.drain(..) {
                    w.wake();
                }
                std::task::Poll::Pending
            })
            .await
        });
        Ok(t)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes `waker` at `at` (or at once if `at` has passed). Returns the entry's id, for
    /// [`Timer::cancel`].
    pub(crate) fn wake_at(&self, at: Instant, waker: &Waker) -> u64 {
        let mut st = self.lock();
        st.seq += 1;
        let id = st.seq;
        let earliest = st.heap.peek().is_none_or(|e| at < e.0.0);
        st.heap.push(Reverse((at, id)));
        st.wakers.insert(id, waker.clone());
        drop(st);
        if earliest {
            self.cond.notify_one();
        }
        id
    }

    /// Forgets an entry (its stream re-armed for another deadline, or went away).
    pub(crate) fn cancel(&self, id: u64) {
        let mut st = self.lock();
        st.wakers.remove(&id);
        st.compact();
    }

    /// Entries waiting for their deadline.
    pub(crate) fn pending(&self) -> usize {
        self.lock().wakers.len()
    }

    /// Stops the thread.
    pub(crate) fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        self.cond.notify_one();
    }

    /// Waits for the next deadline (at most 100 ms, so a dropped timer is noticed) and wakes
    /// what is due. Returns false when stopped.
    fn run_once(&self) -> bool {
        let mut due = Vec::new();
        let dispatcher;
        {
            let mut st = self.lock();
            if self.stop.load(Ordering::Acquire) {
                return false;
            }
            let now = Instant::now();
            let ticked = st.fired.is_none_or(|f| now + SLACK >= f + TICK);
            while ticked && st.heap.peek().is_some_and(|e| e.0.0 <= now + SLACK) {
                if let Some(Reverse((_, id))) = st.heap.pop() {
                    if let Some(w) = st.wakers.remove(&id) {
                        due.push(w);
                    }
                }
            }
            if due.is_empty() {
                let next = st.heap.peek().map(|e| st.fired.map_or(e.0.0, |f| e.0.0.max(f + TICK)));
                let wait = next.map_or(Duration::from_millis(100), |at| (at - now).min(Duration::from_millis(100)));
                let _ = self.cond.wait_timeout(st, wait);
                return true;
            }
            st.fired = Some(now);
            dispatcher = if st.dispatched {
                st.due.append(&mut due);
                st.dispatcher.clone()
            } else {
                None
            };
        }
        if let Some(d) = dispatcher {
            d.wake();
        }
        for w in due {
            w.wake();
        }
        true
    }
}

/// Held by the dispatcher task: when the runtime drops the task (it shuts down), the timer
/// thread goes back to waking entries itself, and what was handed over is woken.
struct Dispatcher(std::sync::Weak<Timer>);

impl Drop for Dispatcher {
    fn drop(&mut self) {
        if let Some(t) = self.0.upgrade() {
            let due = {
                let mut st = t.lock();
                st.dispatched = false;
                st.dispatcher = None;
                std::mem::take(&mut st.due)
            };
            for w in due {
                w.wake();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn wakes_in_deadline_order_and_not_before() {
        let t = Timer::start().unwrap();
        let c = Arc::new(Count(AtomicUsize::new(0)));
        let w = Waker::from(Arc::clone(&c));
        let now = Instant::now();
        // The later deadline is far enough that a crowded machine's stalls (tens of ms) do not
        // reach it before the first look; that they did not is checked, not assumed.
        let later = now + Duration::from_millis(200);
        t.wake_at(later, &w);
        t.wake_at(now, &w);
        std::thread::sleep(Duration::from_millis(10));
        let fired = c.0.load(Ordering::SeqCst);
        assert!(Instant::now() < later, "the test thread stalled 200 ms");
        assert_eq!(fired, 1, "only the due entry fired");
        std::thread::sleep(later + Duration::from_millis(50) - Instant::now());
        assert_eq!(c.0.load(Ordering::SeqCst), 2);
        t.shutdown();
    }

    #[test]
    fn a_cancelled_entry_drops_its_waker_at_once_and_never_fires() {
        // Issue 10: entries of cancelled streams stayed until their deadline (a year for a
        // stalled stream), holding the task alive through its waker.
        let t = Timer::start().unwrap();
        let c = Arc::new(Count(AtomicUsize::new(0)));
        let w = Waker::from(Arc::clone(&c));
        let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
        let ids: Vec<u64> = (0..5000).map(|_| t.wake_at(far, &w)).collect();
        assert_eq!(t.pending(), 5000);
        assert_eq!(Arc::strong_count(&c), 5002, "each entry holds a waker");
        for id in ids {
            t.cancel(id);
        }
        assert_eq!(t.pending(), 0);
        assert_eq!(Arc::strong_count(&c), 2, "every cancelled waker was dropped");
        assert!(t.lock().heap.len() <= 1024, "cancelled deadlines were compacted away");
        // The deadline is far enough that the cancel lands before it even on a crowded CI
        // machine (at 5 ms, a test thread descheduled between the two calls let it fire once
        // in a fresh-clone CI run); that it did is checked, not assumed.
        let deadline = Instant::now() + Duration::from_millis(150);
        let soon = t.wake_at(deadline, &w);
        t.cancel(soon);
        assert!(Instant::now() < deadline, "the test thread stalled 150 ms between wake_at and cancel");
        std::thread::sleep(deadline + Duration::from_millis(50) - Instant::now());
        assert_eq!(c.0.load(Ordering::SeqCst), 0, "a cancelled entry never fires");
        t.shutdown();
    }

    /// Records where and when each wake-up happened.
    struct Log(Mutex<Vec<(Instant, Option<String>)>>);
    impl Wake for Log {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            let name = std::thread::current().name().map(str::to_string);
            self.0.lock().unwrap().push((Instant::now(), name));
        }
    }

    /// Waits (up to 10 s) until `log` holds `n` wake-ups, and takes them.
    fn take(log: &Log, n: usize) -> Vec<(Instant, Option<String>)> {
        let end = Instant::now() + Duration::from_secs(10);
        while log.0.lock().unwrap().len() < n && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::mem::take(&mut *log.0.lock().unwrap())
    }

    #[test]
    fn timing_dense_deadlines_are_woken_together_once_per_tick() {
        // Ten deadlines 200 µs apart: fired one by one they take ten firings; with the tick,
        // the first fires at once and the others wait for the next tick: five firings (at 0,
        // 500, 1,000, 1,500 and 2,000 µs, taking 1, 2, 3, 2 and 2). A sixth is allowed for a
        // thread descheduled in the middle of a firing (a gap of over 100 µs inside it).
        let t = Timer::start().unwrap();
        let log = Arc::new(Log(Mutex::new(Vec::new())));
        let w = Waker::from(Arc::clone(&log));
        let first = Instant::now() + Duration::from_millis(20);
        for i in 0..10u32 {
            t.wake_at(first + Duration::from_micros(200) * i, &w);
        }
        let times: Vec<Instant> = take(&log, 10).into_iter().map(|(at, _)| at).collect();
        assert_eq!(times.len(), 10);
        let firings = 1 + times.windows(2).filter(|p| p[1] - p[0] > Duration::from_micros(100)).count();
        assert!(firings <= 6, "{firings} firings for 10 deadlines over four ticks");
        let last_due = first + Duration::from_micros(1800);
        // No deadline waits much more than a tick (bound: the tick and 5 ms of scheduling).
        assert!(*times.last().unwrap() < last_due + TICK + Duration::from_millis(5));
        t.shutdown();
    }

    #[test]
    fn on_a_runtime_due_entries_are_woken_by_its_workers_and_without_it_by_the_thread() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("rt-worker")
            .enable_all()
            .build()
            .unwrap();
        let t = Timer::start_on(rt.handle()).unwrap();
        let log = Arc::new(Log(Mutex::new(Vec::new())));
        let w = Waker::from(Arc::clone(&log));
        for i in 0..5u32 {
            t.wake_at(Instant::now() + Duration::from_millis(5) * i, &w);
        }
        let names: Vec<Option<String>> = take(&log, 5).into_iter().map(|(_, n)| n).collect();
        assert_eq!(names.len(), 5);
        assert!(names.iter().all(|n| n.as_deref() == Some("rt-worker")), "woken on {names:?}");
        // The runtime gone (the simulator shutting down), the timer thread wakes entries itself.
        drop(rt);
        t.wake_at(Instant::now() + Duration::from_millis(5), &w);
        let names: Vec<Option<String>> = take(&log, 1).into_iter().map(|(_, n)| n).collect();
        assert_eq!(names, vec![Some("sim-ollama-timer".to_string())]);
        t.shutdown();
    }
}
