//! A high-resolution timer for token deadlines. tokio's timer rounds every deadline up to
//! the next millisecond tick, which makes tokens leave 0.5-1.5 ms late; this one thread
//! sleeps on a condition variable (futex timeouts are precise to tens of microseconds on
//! Linux) and wakes every stream whose deadline has passed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

/// Deadlines this close are treated as due: waking a few microseconds early costs one
/// extra poll, sleeping for them costs more than they are worth.
pub(crate) const SLACK: Duration = Duration::from_micros(50);

#[derive(Debug, Default)]
struct State {
    /// Deadlines, earliest first, by entry id. An id whose waker is gone was cancelled.
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    /// The wakers of live entries: a cancelled entry's waker (and the task it keeps alive)
    /// is dropped at once, not when its deadline passes.
    wakers: HashMap<u64, Waker>,
    seq: u64,
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
        {
            let mut st = self.lock();
            if self.stop.load(Ordering::Acquire) {
                return false;
            }
            let now = Instant::now();
            while st.heap.peek().is_some_and(|e| e.0.0 <= now + SLACK) {
                if let Some(Reverse((_, id))) = st.heap.pop() {
                    if let Some(w) = st.wakers.remove(&id) {
                        due.push(w);
                    }
                }
            }
            if due.is_empty() {
                let wait = st
                    .heap
                    .peek()
                    .map_or(Duration::from_millis(100), |e| (e.0.0 - now).min(Duration::from_millis(100)));
                let _ = self.cond.wait_timeout(st, wait);
                return true;
            }
        }
        for w in due {
            w.wake();
        }
        true
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
        t.wake_at(now + Duration::from_millis(30), &w);
        t.wake_at(now, &w);
        std::thread::sleep(Duration::from_millis(10));
        assert_eq!(c.0.load(Ordering::SeqCst), 1, "only the due entry fired");
        std::thread::sleep(Duration::from_millis(60));
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
        let soon = t.wake_at(Instant::now() + Duration::from_millis(5), &w);
        t.cancel(soon);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(c.0.load(Ordering::SeqCst), 0, "a cancelled entry never fires");
        t.shutdown();
    }
}
