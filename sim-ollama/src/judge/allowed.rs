//! What the deployment allows: the same requests, issued by a perfectly concurrent client
//! against the same deployment, replayed in the simulator's own model.
//!
//! Each agent's calls form a chain (a call follows the agent's previous answer by its local
//! work), and a call whose prompt carries other calls' answers also follows them. The replay
//! issues every call as soon as those let it, the way a client that never holds a call back
//! would, and runs it on the deployment the trace describes:
//! - a call needs one of its runner's parallel slots (`RequestTrace::slots`), taken in FIFO
//!   order as the real scheduler hands them out (server/sched.go's pending queue, the
//!   runner's semaphore);
//! - its work is its modelled solo cost, done at the speed its device gives it: a batch of
//!   `n` streams in one runner and `m` runners decoding on one device run each stream at
//!   [`DeviceSharing::speed`]`(n, m)`, the formula the simulator's devices run streams at
//!   (`crate::device`), tracked as processor sharing (each stream's remaining solo work falls
//!   at its speed, recomputed whenever a stream starts or ends);
//! - before it queues for a slot, a call on a loaded runner pays its per-call overhead
//!   (`RequestTrace::ping_us`: the scheduler's check of the runner, in the request's own
//!   goroutine), off the slots and the device, so it overlaps other calls' slots even on a
//!   server with one;
//! - optionally at most `permits` calls at once (a program that says it runs that many agents),
//!   each holding its permit from when it is sent to its end;
//! - where the run's server had to reload or evict to serve the calls, the calls that need
//!   different runners cannot share the server ([`Exclusive`]): as the real scheduler keeps
//!   one runner per model (reloaded when options change) and at most `OLLAMA_MAX_LOADED_MODELS`
//!   or what memory holds, a call whose runner is not resident starts only when a resident
//!   one has no call running (it is unloaded for it), while calls of a resident runner start
//!   at once (server/sched.go v0.33.0-rc2 169-211, `useLoadedRunner`).
//!
//! The makespan is the time such a client would take, model loads aside (the judge adds the
//! loads of the run to both this figure and the one-at-a-time figure). It can exceed the
//! one-at-a-time figure: two server processes time-slicing one GPU lose capacity to the
//! switching, so overlapping their streams is slower than running them in turn.
//!
//! Relaxing one limit at a time ([`Relax`]) tells which limit costs the most time.

use crate::trace::{DeviceSharing, LoadCause, RequestTrace};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// One call to replay.
#[derive(Debug, Clone)]
pub(super) struct Call {
    /// Modelled solo cost in its slot, µs at the run's time scale.
    pub(super) work: f64,
    /// Its per-call overhead before it queues for a slot, µs (`RequestTrace::ping_us`).
    pub(super) ping: f64,
    /// The calls it follows: the same agent's previous call and the calls whose answers it
    /// carries. It starts `local` after the last of them ends; with none, it is ready at
    /// `local` from the start.
    pub(super) after: Vec<usize>,
    /// The agent's local work before it, µs.
    pub(super) local: f64,
    /// Its runner: (instance, model). Calls of one runner share its slots and its batch.
    pub(super) runner: (usize, String),
    /// The runner's parallel slots; 0 when unknown (then unlimited).
    pub(super) slots: usize,
    /// Its device's index into the trace's devices.
    pub(super) device: usize,
    /// Whether it needs a runner that excludes others (see the module's header).
    pub(super) exclusive: Option<Exclusive>,
    /// Its attention over its context ([`crate::trace::RequestTrace::attention`]): a batch's
    /// step costs the sum of its streams' attention, each stream's solo step its own.
    pub(super) attention: f64,
}

/// Calls whose runners exclude each other: on one `domain` (an instance, or one model of an
/// instance) at most `capacity` runner configurations are resident at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Exclusive {
    /// Where the configurations compete: an index of the judge's choosing.
    pub(super) domain: usize,
    /// The runner this call needs (model and runner options).
    pub(super) config: String,
    /// Configurations resident at once (1: every switch unloads the other).
    pub(super) capacity: usize,
}

/// Limits to lift, to see what each one costs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Relax {
    /// Every runner has as many slots as calls.
    pub(super) slots: bool,
    /// Streams batched in one runner run at full speed.
    pub(super) batch: bool,
    /// Runners sharing a device do not time-slice it.
    pub(super) cross_process: bool,
    /// Runners never exclude each other (no reloads, no evictions).
    pub(super) exclusive: bool,
}

/// A ready call waiting in the FIFO order: earliest ready first, then the earliest call.
#[derive(Debug, PartialEq)]
struct Ready(f64, usize);

impl Eq for Ready {}

impl Ord for Ready {
    fn cmp(&self, other: &Self) -> Ordering {
        // A max-heap: reversed, so the earliest pops first.
        other.0.total_cmp(&self.0).then_with(|| other.1.cmp(&self.1))
    }
}

impl PartialOrd for Ready {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The time a perfectly concurrent client takes to run `calls` on the deployment, µs from the
/// start, loads aside.
pub(super) fn makespan(calls: &[Call], devices: &[DeviceSharing], permits: Option<usize>, relax: Relax) -> f64 {
    let n = calls.len();
    let mut runners: BTreeMap<&(usize, String), usize> = BTreeMap::new();
    for c in calls {
        let next = runners.len();
        runners.entry(&c.runner).or_insert(next);
    }
    let runner_of: Vec<usize> = calls.iter().map(|c| runners[&c.runner]).collect();
    let mut slots = vec![usize::MAX; runners.len()];
    let mut device_of = vec![0usize; runners.len()];
    for (i, c) in calls.iter().enumerate() {
        if c.slots > 0 && !relax.slots {
            slots[runner_of[i]] = c.slots;
        }
        device_of[runner_of[i]] = c.device;
    }
    let mut next_calls: Vec<Vec<usize>> = vec![Vec::new(); n];
    // Calls not yet ready: known ready times, in a heap; calls after unfinished calls wait
    // (`waiting`: how many have yet to end; `after_end`: when the last of those ended).
    let mut future = BinaryHeap::new();
    let mut waiting = vec![0usize; n];
    let mut after_end = vec![0.0f64; n];
    for (i, c) in calls.iter().enumerate() {
        for &p in &c.after {
            if p < n && p != i {
                next_calls[p].push(i);
                waiting[i] += 1;
            }
        }
        if waiting[i] == 0 {
            future.push(Ready(c.local.max(0.0), i));
        }
    }
    let mut queued = BinaryHeap::new();
    let mut running: Vec<(usize, f64)> = Vec::new();
    // Calls sent (holding a permit: pinging, queued for a slot after it, or running).
    let mut sent = vec![false; n];
    let mut holding = 0usize;
    let mut busy = vec![0usize; runners.len()];
    // Per exclusion domain: the resident configurations and their running calls.
    let mut resident: BTreeMap<usize, BTreeMap<&str, usize>> = BTreeMap::new();
    let exclusive = |i: usize| if relax.exclusive { None } else { calls[i].exclusive.as_ref() };
    let (mut t, mut end, mut done) = (0.0f64, 0.0f64, 0usize);
    while done < n {
        while future.peek().is_some_and(|r: &Ready| r.0 <= t) {
            queued.push(future.pop().expect("peeked"));
        }
        // Send what the permits allow and start what the slots allow, in FIFO order. A call
        // that finds its runner's slots taken waits, and so do the calls behind it: each
        // runner's queue is FIFO, and so is the permit queue. A call sent pays its ping, off
        // the slots, then queues for one.
        let mut held = Vec::new();
        let mut permits_out = false;
        while let Some(r) = queued.pop() {
            let i = r.1;
            let k = runner_of[i];
            if !sent[i] {
                permits_out = permits_out || permits.is_some_and(|p| holding >= p);
                if permits_out {
                    held.push(r);
                    continue;
                }
                sent[i] = true;
                holding += 1;
                if calls[i].ping > 0.0 {
                    future.push(Ready(t + calls[i].ping, i));
                    continue;
                }
            }
            if busy[k] < slots[k] && admit(&mut resident, exclusive(i)) {
                busy[k] += 1;
                running.push((r.1, calls[r.1].work.max(0.0)));
            } else {
                held.push(r);
            }
        }
        queued.extend(held);
        // Speeds: streams per runner, runners decoding per device.
        let mut per_device: BTreeMap<usize, usize> = BTreeMap::new();
        for (k, b) in busy.iter().enumerate() {
            if *b > 0 {
                *per_device.entry(device_of[k]).or_insert(0) += 1;
            }
        }
        // The attention of each runner's running calls, summed.
        let mut attention = vec![0.0; busy.len()];
        for &(i, _) in &running {
            attention[runner_of[i]] += calls[i].attention;
        }
        let speed = |i: usize| -> f64 {
            let k = runner_of[i];
            let Some(d) = devices.get(device_of[k]) else { return 1.0 };
            let batch = if relax.batch { 1 } else { busy[k] };
            let m = if relax.cross_process { 1 } else { per_device.get(&device_of[k]).copied().unwrap_or(1) };
            let own = calls[i].attention;
            let total = if relax.batch { own } else { attention[k] };
            d.stream_speed(batch, m, own, total).max(1e-9)
        };
        let speeds: Vec<f64> = running.iter().map(|&(i, _)| speed(i)).collect();
        let next_finish = running.iter().zip(&speeds).map(|(&(_, rem), s)| rem / s).fold(f64::INFINITY, f64::min);
        let next_ready = future.peek().map_or(f64::INFINITY, |r| r.0 - t);
        let dt = next_finish.min(next_ready);
        if !dt.is_finite() {
            // Nothing running and nothing to come: a chain pointing at a call that never ran.
            break;
        }
        t += dt;
        let mut still = Vec::with_capacity(running.len());
        for ((i, rem), s) in running.drain(..).zip(speeds) {
            let left = rem - s * dt;
            // A relative epsilon: remaining work within a nanosecond's worth is done.
            if left <= 1e-6 * (1.0 + calls[i].work.abs()) {
                busy[runner_of[i]] -= 1;
                holding -= 1;
                if let Some(n) =
                    exclusive(i).and_then(|ex| resident.get_mut(&ex.domain).and_then(|d| d.get_mut(ex.config.as_str())))
                {
                    *n -= 1;
                }
                done += 1;
                end = end.max(t);
                for &j in &next_calls[i] {
                    after_end[j] = after_end[j].max(t);
                    waiting[j] -= 1;
                    if waiting[j] == 0 {
                        future.push(Ready(after_end[j] + calls[j].local.max(0.0), j));
                    }
                }
            } else {
                still.push((i, left));
            }
        }
        running = still;
    }
    end
}

/// Whether a call may start as far as its runner's residency goes, and if so counts it: its
/// configuration is resident, or there is room for it, or a resident one with no call running
/// is unloaded for it.
fn admit<'a>(resident: &mut BTreeMap<usize, BTreeMap<&'a str, usize>>, ex: Option<&'a Exclusive>) -> bool {
    let Some(ex) = ex else { return true };
    let d = resident.entry(ex.domain).or_default();
    if !d.contains_key(ex.config.as_str()) {
        if d.len() >= ex.capacity.max(1) {
            let Some(idle) = d.iter().find(|(_, n)| **n == 0).map(|(c, _)| *c) else { return false };
            d.remove(idle);
        }
        d.insert(ex.config.as_str(), 0);
    }
    *d.get_mut(ex.config.as_str()).expect("inserted") += 1;
    true
}

/// Which runners excluded each other in the run: the server reloaded a model for other runner
/// options, or evicted one for another (the loads' reasons, as `scheduler.rs` words them). Only
/// what the run shows: runners that never displaced each other are replayed side by side.
#[derive(Clone)]
pub(super) struct Exclusions {
    /// (instance, model) whose runner was reloaded for other options.
    reloaded: BTreeSet<(usize, String)>,
    /// Instances that evicted a model for another, with how many models they held at once
    /// (`OLLAMA_MAX_LOADED_MODELS` from the reason; 1 when memory was the limit).
    evicting: BTreeMap<usize, usize>,
}

impl Exclusions {
    pub(super) fn new<'a>(reqs: impl Iterator<Item = &'a RequestTrace>) -> Self {
        let mut reloaded = BTreeSet::new();
        let mut evicting: BTreeMap<usize, usize> = BTreeMap::new();
        for r in reqs {
            for l in &r.loads {
                let held = match super::deployment::load_cause(l) {
                    LoadCause::Reload { .. } => {
                        reloaded.insert((r.instance, r.model.clone()));
                        continue;
                    }
                    LoadCause::EvictedAtLimit { max } => max,
                    LoadCause::EvictedForMemory { .. } => 1,
                    LoadCause::Load => continue,
                };
                let e = evicting.entry(r.instance).or_insert(held);
                *e = (*e).min(held);
            }
        }
        Exclusions { reloaded, evicting }
    }

    /// The runner a request needs, where runners excluded each other: its model and the
    /// runner options that force a reload when they change (`needsReload`, server/sched.go
    /// v0.33.0-rc2 1381-1410; an option left out is the server's default).
    pub(super) fn of(&self, r: &RequestTrace) -> Option<Exclusive> {
        const RUNNER_OPTIONS: [&str; 6] = ["num_ctx", "num_batch", "num_gpu", "main_gpu", "use_mmap", "num_thread"];
        let options = RUNNER_OPTIONS
            .iter()
            .map(|k| format!("{k}={}", r.options.get(k).map_or("auto".to_string(), |v| v.to_string())))
            .collect::<Vec<_>>()
            .join(",");
        if let Some(&capacity) = self.evicting.get(&r.instance) {
            return Some(Exclusive { domain: r.instance, config: format!("{} {options}", r.model), capacity });
        }
        let key = (r.instance, r.model.clone());
        self.reloaded.contains(&key).then(|| Exclusive {
            // Past every instance's own domain.
            domain: usize::MAX / 2 + self.reloaded.iter().position(|k| *k == key).unwrap_or(0),
            config: options,
            capacity: 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(work: f64, after: Option<usize>, local: f64, instance: usize, slots: usize, device: usize) -> Call {
        Call {
            work,
            ping: 0.0,
            after: after.into_iter().collect(),
            local,
            runner: (instance, "m".into()),
            slots,
            device,
            exclusive: None,
            attention: 0.0,
        }
    }

    #[test]
    fn runners_that_exclude_each_other_take_turns_and_a_resident_one_serves_at_once() {
        // Four slots. Calls 0 and 1 need runner A, call 2 runner B, call 3 runner A again, all
        // of 100 µs and ready at once, on a server that holds one runner at a time: A serves 0,
        // 1 and 3 together (a resident runner takes its calls at once), then B: 200. Without
        // the exclusion: 100.
        let ex = |c: &str| Some(Exclusive { domain: 0, config: c.into(), capacity: 1 });
        let calls: Vec<Call> =
            ["a", "a", "b", "a"].iter().map(|c| Call { exclusive: ex(c), ..call(100.0, None, 0.0, 0, 4, 0) }).collect();
        assert!((makespan(&calls, &[IDEAL], None, Relax::default()) - 200.0).abs() < 1e-6);
        let relax = Relax { exclusive: true, ..Relax::default() };
        assert!((makespan(&calls, &[IDEAL], None, relax) - 100.0).abs() < 1e-6);
        // Room for two runners: no turns.
        let two: Vec<Call> = calls
            .iter()
            .map(|c| Call { exclusive: c.exclusive.clone().map(|e| Exclusive { capacity: 2, ..e }), ..c.clone() })
            .collect();
        assert!((makespan(&two, &[IDEAL], None, Relax::default()) - 100.0).abs() < 1e-6);
    }

    const IDEAL: DeviceSharing = DeviceSharing {
        batch_penalty: 0.0,
        cross_process_efficiency: 1.0,
        cross_process_attention_efficiency: None,
        attention_batch_penalty: 0.0,
    };

    #[test]
    fn unlimited_slots_on_an_ideal_device_take_the_longest_chain() {
        // Agent a: 100, local 10, 100; agent b: 300. Longest chain: 300.
        let calls =
            [call(100.0, None, 0.0, 0, 0, 0), call(100.0, Some(0), 10.0, 0, 0, 0), call(300.0, None, 0.0, 0, 0, 0)];
        assert!((makespan(&calls, &[IDEAL], None, Relax::default()) - 300.0).abs() < 1e-6);
    }

    #[test]
    fn one_slot_runs_the_calls_one_after_another_in_fifo_order() {
        // Three agents' 100 µs calls at once on one slot: 300. With a second call of agent 0
        // 10 µs after its first, it queues behind the other two: 0-100, 100-200, 200-300,
        // then 300-400.
        let mut calls = vec![call(100.0, None, 0.0, 0, 1, 0); 3];
        assert!((makespan(&calls, &[IDEAL], None, Relax::default()) - 300.0).abs() < 1e-6);
        calls.push(call(100.0, Some(0), 10.0, 0, 1, 0));
        assert!((makespan(&calls, &[IDEAL], None, Relax::default()) - 400.0).abs() < 1e-6);
        // Relaxing the slots gives the longest chain back: 100 + 10 + 100.
        let relax = Relax { slots: true, ..Relax::default() };
        assert!((makespan(&calls, &[IDEAL], None, relax) - 210.0).abs() < 1e-6);
    }

    #[test]
    fn two_processes_on_one_device_share_it_and_lose_the_switching() {
        // Instances 0 and 1 on device 0 at 0.78: each stream at 0.39 while both decode. Calls
        // of 390 and 640: the first ends at 390 / 0.39 = 1000, when the second has 250 left,
        // alone at full speed: 1250. One after the other: 1030. Overlapping is slower.
        let dev = DeviceSharing {
            batch_penalty: 0.0,
            cross_process_efficiency: 0.78,
            cross_process_attention_efficiency: None,
            attention_batch_penalty: 0.0,
        };
        let calls = [call(390.0, None, 0.0, 0, 1, 0), call(640.0, None, 0.0, 1, 1, 0)];
        assert!((makespan(&calls, &[dev], None, Relax::default()) - 1250.0).abs() < 1e-6);
        let relax = Relax { cross_process: true, ..Relax::default() };
        assert!((makespan(&calls, &[dev], None, relax) - 640.0).abs() < 1e-6);
        // On two devices they do not meet.
        let apart = [call(390.0, None, 0.0, 0, 1, 0), call(640.0, None, 0.0, 1, 1, 1)];
        assert!((makespan(&apart, &[dev, dev], None, Relax::default()) - 640.0).abs() < 1e-6);
    }

    #[test]
    fn a_batch_runs_each_stream_slower_by_its_penalty() {
        // Two 100 µs calls batched at penalty 1: each at 1/2 speed, both end at 200.
        let dev = DeviceSharing {
            batch_penalty: 1.0,
            cross_process_efficiency: 1.0,
            cross_process_attention_efficiency: None,
            attention_batch_penalty: 0.0,
        };
        let calls = [call(100.0, None, 0.0, 0, 4, 0), call(100.0, None, 0.0, 0, 4, 0)];
        assert!((makespan(&calls, &[dev], None, Relax::default()) - 200.0).abs() < 1e-6);
        let relax = Relax { batch: true, ..Relax::default() };
        assert!((makespan(&calls, &[dev], None, relax) - 100.0).abs() < 1e-6);
    }

    #[test]
    fn a_batch_steps_its_streams_together_whatever_their_contexts() {
        // Penalty 0. Two calls batched: one of attention 1 (solo 200 µs: 100 steps of 2), one
        // of attention 3 (solo 400 µs: 100 steps of 4). A step of both costs 1 + 1 + 3 = 5:
        // both end at 500, the short one held to the long one's step. The streams' mean
        // attention (2, the model before) ends the short one at 200 x 5 / 3 = 333 and the
        // long one at 400 x 5 / 3 = 667.
        let dev = DeviceSharing {
            batch_penalty: 0.0,
            cross_process_efficiency: 1.0,
            cross_process_attention_efficiency: None,
            attention_batch_penalty: 0.0,
        };
        let calls = [
            Call { attention: 1.0, ..call(200.0, None, 0.0, 0, 4, 0) },
            Call { attention: 3.0, ..call(400.0, None, 0.0, 0, 4, 0) },
        ];
        let got = makespan(&calls, &[dev], None, Relax::default());
        assert!((got - 500.0).abs() < 1e-6, "{got}");
        // Batching lifted: each at its solo speed, the longest alone.
        let relax = Relax { batch: true, ..Relax::default() };
        assert!((makespan(&calls, &[dev], None, relax) - 400.0).abs() < 1e-6);
    }

    #[test]
    fn the_ping_before_a_slot_overlaps_other_calls_slots() {
        // One slot, three agents' calls sent at once, each 100 µs of ping then 100 µs in the
        // slot: the pings run together (0-100), then the slot serves one after another:
        // 100-200, 200-300, 300-400. Counted as slot work, the same calls take 600.
        let pinged = vec![Call { ping: 100.0, ..call(100.0, None, 0.0, 0, 1, 0) }; 3];
        let got = makespan(&pinged, &[IDEAL], None, Relax::default());
        assert!((got - 400.0).abs() < 1e-6, "{got}");
        let in_slot = vec![call(200.0, None, 0.0, 0, 1, 0); 3];
        assert!((makespan(&in_slot, &[IDEAL], None, Relax::default()) - 600.0).abs() < 1e-6);
        // Its permit is held from when it is sent: one permit, one call at a time, 600.
        assert!((makespan(&pinged, &[IDEAL], Some(1), Relax::default()) - 600.0).abs() < 1e-6);
    }

    #[test]
    fn permits_bound_the_calls_in_flight() {
        // Four 100 µs calls, two permits: 200.
        let calls = vec![call(100.0, None, 0.0, 0, 0, 0); 4];
        assert!((makespan(&calls, &[IDEAL], Some(2), Relax::default()) - 200.0).abs() < 1e-6);
    }

    #[test]
    fn a_call_that_carries_answers_waits_for_the_last_of_them() {
        // Three reviewers of 100, 200 and 300 µs at once, then an editor carrying all three
        // answers, 5 µs after the last: 300 + 5 + 50. On one slot: 600 + 5 + 50.
        let mut calls =
            vec![call(100.0, None, 0.0, 0, 0, 0), call(200.0, None, 0.0, 0, 0, 0), call(300.0, None, 0.0, 0, 0, 0)];
        calls.push(Call { after: vec![0, 1, 2], ..call(50.0, None, 5.0, 0, 0, 0) });
        assert!((makespan(&calls, &[IDEAL], None, Relax::default()) - 355.0).abs() < 1e-6);
        for c in &mut calls {
            c.slots = 1;
        }
        assert!((makespan(&calls, &[IDEAL], None, Relax::default()) - 655.0).abs() < 1e-6);
    }

    #[test]
    fn an_unknown_device_or_slot_count_limits_nothing() {
        let calls = vec![call(100.0, None, 0.0, 0, 0, 7); 3];
        assert!((makespan(&calls, &[], None, Relax::default()) - 100.0).abs() < 1e-6);
    }
}
