//! A high-resolution timer for token deadlines. tokio's timer rounds every deadline up to
//! the next millisecond tick, which makes tokens leave 0.5-1.5 ms late; this one thread
//! sleeps on a condition variable (futex timeouts are precise to tens of microseconds on
//! Linux) and wakes every stream whose deadline has passed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

/// Deadlines this close are treated as due: waking a few microseconds early costs one
/// extra poll, sleeping for them costs more than they are worth.
pub(crate) const SLACK: Duration = Duration::from_micros(50);

#[derive(Debug)]
struct Entry {
    at: Instant,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

#[derive(Debug, Default)]
struct State {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
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

    /// Wakes `waker` at `at` (or at once if `at` has passed).
    pub(crate) fn wake_at(&self, at: Instant, waker: &Waker) {
        let mut st = self.lock();
        st.seq += 1;
        let seq = st.seq;
        let earliest = st.heap.peek().is_none_or(|e| at < e.0.at);
        st.heap.push(Reverse(Entry { at, seq, waker: waker.clone() }));
        drop(st);
        if earliest {
            self.cond.notify_one();
        }
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
            while st.heap.peek().is_some_and(|e| e.0.at <= now + SLACK) {
                if let Some(Reverse(e)) = st.heap.pop() {
                    due.push(e.waker);
                }
            }
            if due.is_empty() {
                let wait = st
                    .heap
                    .peek()
                    .map_or(Duration::from_millis(100), |e| (e.0.at - now).min(Duration::from_millis(100)));
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
}
