//! How long this process's client threads have waited for a CPU: runnable, not running. Linux
//! keeps it per thread (`/proc/self/task/TID/schedstat`, its second field, in nanoseconds); the
//! embedded simulator's threads (named `sim-ollama*`) are left out; a thread that has exited
//! takes its figure with it, so a difference over a run counts the threads that lived through
//! it (the runtimes' workers do). Elsewhere, or where the kernel keeps no such figures, `None`.
//!
//! A client whose answers reach its agents late either had its executor blocked (its threads
//! sleep or run: they do not wait for a CPU) or was starved by a busy machine (they wait): the
//! judge is told which ([`sim_ollama::judge::JudgeOptions::client_cpu_wait`]).

use std::time::Duration;

/// The process's threads' time spent waiting for a CPU so far, summed.
pub(crate) fn waited() -> Option<Duration> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut ns: u64 = 0;
    let mut any = false;
    for t in tasks.flatten() {
        // The embedded simulator's threads (`sim-ollama`, `sim-ollama-main`, ...) are the
        // server's, not the client's.
        let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if name.starts_with("sim-ollama") {
            continue;
        }
        // A thread that exits between the listing and the read is skipped.
        let Ok(text) = std::fs::read_to_string(t.path().join("schedstat")) else { continue };
        if let Some(wait) = text.split_whitespace().nth(1).and_then(|w| w.parse::<u64>().ok()) {
            ns = ns.saturating_add(wait);
            any = true;
        }
    }
    any.then(|| Duration::from_nanos(ns))
}

/// How long the process's threads waited for a CPU while `f` ran.
pub(crate) fn while_running<T>(f: impl FnOnce() -> T) -> (T, Option<Duration>) {
    let before = waited();
    let out = f();
    let after = waited();
    (out, before.zip(after).map(|(b, a)| a.saturating_sub(b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::time::Instant;

    #[test]
    fn threads_kept_from_the_cpu_by_busy_siblings_are_counted() {
        let Some(before) = waited() else {
            // No schedstat (not Linux): nothing is measured, and the judge is told nothing.
            return;
        };
        // Three spinning threads per core for 300 ms, then alive (asleep) until the figure is
        // read: two in three of them wait for a CPU at any instant, some 600 ms of waiting per
        // core in all (more on a busy machine); 100 ms is a floor no such run falls under.
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let read = Barrier::new(cores * 3 + 1);
        let during = std::thread::scope(|s| {
            for _ in 0..cores * 3 {
                s.spawn(|| {
                    let until = Instant::now() + Duration::from_millis(300);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                    read.wait();
                    read.wait();
                });
            }
            read.wait();
            let during = waited();
            read.wait();
            during
        });
        let waited_while = during.expect("still measurable").saturating_sub(before);
        assert!(waited_while >= Duration::from_millis(100), "{waited_while:?}");
    }
}
