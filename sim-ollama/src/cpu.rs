//! How long a client's threads waited for a CPU (runnable, not running) and ran on one. Linux
//! keeps both per thread (`/proc/PID/task/TID/schedstat`: time on a CPU, then time waiting for
//! one, in nanoseconds); a thread that has exited takes its figures with it, so a difference
//! over a run counts the threads that lived through it. Elsewhere, or where the kernel keeps no
//! such figures, `None`.
//!
//! A client whose answers reach its agents late either had its executor blocked (its threads
//! sleep or run: they do not wait for a CPU) or was starved by a busy machine (they wait); and
//! agents that wait for each other's processing on one executor wait at most the time it ran
//! times the other agents. The judge is told both ([`crate::JudgeOptions::client_cpu_wait`],
//! [`crate::JudgeOptions::client_cpu_time`]).
//!
//! Three ways in: [`waited`] and [`while_running`] for the calling process (the harness's own
//! client threads, the embedded simulator's `sim-ollama*` threads left out); [`watch`] for
//! another process's tree (`harness exec`'s program; the simulator started with
//! `--client-pid`, the Python package's test process), sampled while it runs, its figures over
//! a window read with [`TreeWatch::samples`] or [`TreeWatch::finish`] and [`Samples::between`],
//! [`Samples::ran_between`].

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The process's threads' time spent waiting for a CPU so far, summed.
pub fn waited() -> Option<Duration> {
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
        if let Some((_, wait)) = schedstat(&t.path()) {
            ns = ns.saturating_add(wait);
            any = true;
        }
    }
    any.then(|| Duration::from_nanos(ns))
}

/// A thread's time on a CPU and its wait for one so far, ns (`TASK/schedstat`'s first two
/// fields); `None` for a thread that exited between the listing and the read.
fn schedstat(task: &std::path::Path) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(task.join("schedstat")).ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some((fields.next()??, fields.next()??))
}

/// How long the process's threads waited for a CPU while `f` ran.
pub fn while_running<T>(f: impl FnOnce() -> T) -> (T, Option<Duration>) {
    let before = waited();
    let out = f();
    let after = waited();
    (out, before.zip(after).map(|(b, a)| a.saturating_sub(b)))
}

/// How often [`watch`] samples the process tree: a thread that lives less than this may be
/// missed, and a thread's last wait before it exits (at most this long) is lost.
const SAMPLE: Duration = Duration::from_millis(20);

/// How many samples a watch keeps, the oldest dropped first: an hour at one per [`SAMPLE`].
const KEPT: usize = 180_000;

/// A process tree watched while it runs ([`watch`]).
pub struct TreeWatch {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<VecDeque<(Instant, u64, u64)>>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

/// The watched tree's threads' waits for a CPU and time on one, each summed over the threads
/// alive at each two samples in a row, at each sample: `(when, waited ns so far, ran ns so
/// far)`.
#[derive(Debug, Default, Clone)]
pub struct Samples(Vec<(Instant, u64, u64)>);

/// Starts sampling the waits for a CPU and the time on one of process `pid`'s threads and its
/// descendants', until the tree has no thread left or the watch is finished or dropped.
/// `None` where the kernel keeps no such figures (not Linux, no schedstat) or no such process.
pub fn watch(pid: u32) -> Option<TreeWatch> {
    if read(pid).is_empty() {
        return None;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(Mutex::new(VecDeque::new()));
    let (flag, kept) = (Arc::clone(&stop), Arc::clone(&samples));
    let handle = std::thread::Builder::new()
        .name("cpu-watch".into())
        .spawn(move || {
            let (mut last, mut waited, mut ran) = (HashMap::new(), 0u64, 0u64);
            loop {
                let now = read(pid);
                for (tid, &(r, w)) in &now {
                    if let Some(&(r0, w0)) = last.get(tid) {
                        ran += r.saturating_sub(r0);
                        waited += w.saturating_sub(w0);
                    }
                }
                {
                    let mut k = kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    k.push_back((Instant::now(), waited, ran));
                    while k.len() > KEPT {
                        k.pop_front();
                    }
                }
                last = now;
                if last.is_empty() || flag.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(SAMPLE);
            }
        })
        .ok()?;
    Some(TreeWatch { stop, samples, handle: Some(handle) })
}

impl TreeWatch {
    /// What was sampled so far (the watch goes on).
    pub fn samples(&self) -> Samples {
        Samples(self.samples.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().copied().collect())
    }

    /// Stops sampling (the process has exited) and returns what was sampled.
    pub fn finish(mut self) -> Samples {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        self.samples()
    }
}

impl Drop for TreeWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for TreeWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeWatch").finish_non_exhaustive()
    }
}

impl Samples {
    /// How long the threads waited for a CPU from `from` to `to` (the samples nearest inside).
    pub fn between(&self, from: Instant, to: Instant) -> Option<Duration> {
        self.over(from, to, |&(_, waited, _)| waited)
    }

    /// How long the threads ran on a CPU from `from` to `to` (the samples nearest inside).
    pub fn ran_between(&self, from: Instant, to: Instant) -> Option<Duration> {
        self.over(from, to, |&(_, _, ran)| ran)
    }

    fn over(&self, from: Instant, to: Instant, field: impl Fn(&(Instant, u64, u64)) -> u64) -> Option<Duration> {
        let at = |t: Instant| self.0.iter().take_while(|(when, ..)| *when <= t).last().map(&field);
        let start = at(from).or_else(|| self.0.first().map(&field))?;
        Some(Duration::from_nanos(at(to)?.saturating_sub(start)))
    }
}

/// Each thread of `pid` and of its descendants, with its time on a CPU and its wait for one so
/// far, ns. This process is left out, with its own descendants: a simulator started by the
/// process it watches (the Python package's) is the server, not the client.
fn read(pid: u32) -> HashMap<u32, (u64, u64)> {
    let mut waits = HashMap::new();
    let mut procs = vec![pid];
    let me = std::process::id();
    while let Some(p) = procs.pop() {
        if p == me {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else { continue };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            if let Some(figures) = schedstat(&t.path()) {
                waits.insert(tid, figures);
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
        // A busy loop is runnable all its life, running or waiting: the loops' time on a CPU and
        // their waits for one add up to their 200 ms each (less what the first and last samples
        // miss, 40 ms each at most), however busy the machine (a suite beside it left them 135
        // ms of CPU in all once, their waits the rest); half of it is a floor. Some of it ran,
        // and asleep, next to nothing.
        let ran = samples.ran_between(started, ended).expect("sampled");
        let total = ran + during;
        assert!(total >= Duration::from_millis(100 * loops as u64), "{ran:?} ran, {during:?} waited");
        assert!(ran >= Duration::from_millis(20), "{ran:?} ran, {during:?} waited");
        let idle = samples.ran_between(ended - Duration::from_millis(250), ended).expect("sampled");
        assert!(idle < Duration::from_millis(30), "{idle:?} of {ran:?}");
    }
}
