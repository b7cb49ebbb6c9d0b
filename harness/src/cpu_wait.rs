//! How long this process's client threads have waited for a CPU: runnable, not running. Linux
//! keeps it per thread (`/proc/self/task/TID/schedstat`, its second field, in nanoseconds); the
//! embedded simulator's threads (named `sim-ollama*`) are left out; a thread that has exited
//! takes its figure with it, so a difference over a run counts the threads that lived through
//! it (the runtimes' workers do). Elsewhere, or where the kernel keeps no such figures, `None`.
//!
//! A client whose answers reach its agents late either had its executor blocked (its threads
//! sleep or run: they do not wait for a CPU) or was starved by a busy machine (they wait): the
//! judge is told which ([`sim_ollama::judge::JudgeOptions::client_cpu_wait`]).
//!
//! `harness exec` runs the client as a process of its own: [`watch`] samples its process
//! tree's threads (`/proc/PID/task/TID/schedstat`, children through `.../children`) while it
//! runs, and [`Samples::between`] says how long they waited for a CPU while the calls ran, and
//! [`Samples::ran_between`] how long they ran on one (the first field): the most time its
//! agents can have waited for each other's processing on a shared executor.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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

/// How often [`watch`] samples the process tree: a thread that lives less than this may be
/// missed, and a thread's last wait before it exits (at most this long) is lost.
const SAMPLE: Duration = Duration::from_millis(20);

/// A process tree watched while it runs ([`watch`]).
pub(crate) struct TreeWatch {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Samples>,
}

/// The watched tree's threads' waits for a CPU and time on one, each summed over the threads
/// alive at each two samples in a row, at each sample: `(when, waited ns so far, ran ns so
/// far)`.
#[derive(Debug, Default)]
pub(crate) struct Samples(Vec<(Instant, u64, u64)>);

/// Starts sampling the waits for a CPU of process `pid`'s threads and its descendants'.
/// `None` where the kernel keeps no such figures (not Linux, no schedstat).
pub(crate) fn watch(pid: u32) -> Option<TreeWatch> {
    if read(pid).is_empty() {
        return None;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let handle = std::thread::Builder::new()
        .name("harness-cpu-wait".into())
        .spawn(move || {
            let (mut last, mut waited, mut ran, mut samples) = (HashMap::new(), 0u64, 0u64, Vec::new());
            loop {
                let now = read(pid);
                for (tid, &(r, w)) in &now {
                    if let Some(&(r0, w0)) = last.get(tid) {
                        ran += r.saturating_sub(r0);
                        waited += w.saturating_sub(w0);
                    }
                }
                samples.push((Instant::now(), waited, ran));
                last = now;
                if last.is_empty() || flag.load(Ordering::Relaxed) {
                    return Samples(samples);
                }
                std::thread::sleep(SAMPLE);
            }
        })
        .ok()?;
    Some(TreeWatch { stop, handle })
}

impl TreeWatch {
    /// Stops sampling (the process has exited) and returns what was sampled.
    pub(crate) fn finish(self) -> Samples {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

impl Samples {
    /// How long the threads waited for a CPU from `from` to `to` (the samples nearest inside).
    pub(crate) fn between(&self, from: Instant, to: Instant) -> Option<Duration> {
        self.over(from, to, |&(_, waited, _)| waited)
    }

    /// How long the threads ran on a CPU from `from` to `to` (the samples nearest inside).
    pub(crate) fn ran_between(&self, from: Instant, to: Instant) -> Option<Duration> {
        self.over(from, to, |&(_, _, ran)| ran)
    }

    fn over(&self, from: Instant, to: Instant, field: impl Fn(&(Instant, u64, u64)) -> u64) -> Option<Duration> {
        let at = |t: Instant| self.0.iter().take_while(|(when, ..)| *when <= t).last().map(&field);
        let start = at(from).or_else(|| self.0.first().map(&field))?;
        Some(Duration::from_nanos(at(to)?.saturating_sub(start)))
    }
}

/// Each thread of `pid` and of its descendants, with its time on a CPU and its wait for one so
/// far, ns.
fn read(pid: u32) -> HashMap<u32, (u64, u64)> {
    let mut waits = HashMap::new();
    let mut procs = vec![pid];
    while let Some(p) = procs.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else { continue };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            // A thread that exits between the listing and the read is skipped.
            let Ok(text) = std::fs::read_to_string(t.path().join("schedstat")) else { continue };
            let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
            if let (Some(Some(ran)), Some(Some(wait))) = (fields.next(), fields.next()) {
                waits.insert(tid, (ran, wait));
            }
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            procs.extend(children.split_whitespace().filter_map(|c| c.parse::<u32>().ok()));
        }
    }
    waits
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

    #[test]
    fn a_process_tree_kept_from_the_cpu_by_its_busy_children_is_counted_while_it_runs() {
        // A shell that starts two busy loops per core for 200 ms (processes of its own, each a
        // grandchild through `timeout`): half of them wait for a CPU at any instant, some 200 ms
        // of waiting per core in all; 100 ms is a floor no such run falls under. Then it sleeps
        // 400 ms: a window over that sleep counts next to nothing.
        let loops = std::thread::available_parallelism().map_or(2, |n| n.get()) * 2;
        let script =
            format!("for i in $(seq {loops}); do timeout 0.2 sh -c 'while :; do :; done' & done; wait; sleep 0.4");
        let mut child = std::process::Command::new("sh").args(["-c", &script]).spawn().expect("sh runs");
        let started = Instant::now();
        let Some(w) = watch(child.id()) else {
            let _ = child.wait();
            // No schedstat (not Linux): nothing is measured, and the judge is told nothing.
            return;
        };
        child.wait().expect("the shell exits");
        let (samples, ended) = (w.finish(), Instant::now());
        let during = samples.between(started, ended).expect("sampled");
        assert!(during >= Duration::from_millis(100), "{during:?}");
        let asleep = samples.between(ended - Duration::from_millis(250), ended).expect("sampled");
        assert!(asleep < Duration::from_millis(30), "{asleep:?} of {during:?}");
        // The loops ran 200 ms each, as many as the cores at once: at least 100 ms of CPU per
        // core in all, whatever else the machine runs; asleep, next to nothing.
        let cores = loops as u64 / 2;
        let ran = samples.ran_between(started, ended).expect("sampled");
        assert!(ran >= Duration::from_millis(100 * cores), "{ran:?}");
        let idle = samples.ran_between(ended - Duration::from_millis(250), ended).expect("sampled");
        assert!(idle < Duration::from_millis(30), "{idle:?} of {ran:?}");
    }
}
