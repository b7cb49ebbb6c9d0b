//! Devices (GPUs): streams decoding at the same time on one device share its capacity.
//!
//! Each stream's work is measured in *solo nanoseconds*: how long it would take alone on the
//! device. Streams are grouped into batches (one per loaded runner: the streams one server
//! process decodes together). A batch steps its streams together: a step of `n` streams costs
//! `1 + batch_penalty * (n - 1) + X`, `X` the sum of their attention over their own contexts
//! (`crate::trace::DeviceSharing::stream_speed`), where a stream of attention `x` alone takes
//! `1 + x`; and `m` processes active on one device time-slice it, each getting
//! `cross_process_efficiency / m` of it.
//!
//! Because a batch's streams step together, a batch keeps one *virtual clock* (its steps, in
//! solo nanoseconds of a stream of no attention), the way generalized processor sharing is
//! simulated: a stream of attention `x` that needs `w` solo-ns of work after joining at
//! virtual time `v0` finishes when the clock reads `v0 + w / (1 + x)`. When membership
//! changes, every clock on the device is advanced to now and the speeds are recomputed;
//! streams whose deadline moved earlier are woken.

use crate::config::DeviceSpec;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::{Duration, Instant};

/// Identifies a batch on a device: (instance index, runner id).
pub(crate) type BatchKey = (usize, u64);

#[derive(Debug)]
pub(crate) struct Device {
    pub(crate) index: usize,
    pub(crate) spec: DeviceSpec,
    state: Mutex<DeviceState>,
    /// Bumped (under the lock) on every membership change, so streams can keep a copy of
    /// their batch's clock and skip the lock while nothing changed.
    epoch: AtomicU64,
    /// Memory held by the runners on this device, of every instance: (instance, runner) ->
    /// bytes. What each server's scheduler sees as used when it asks the GPU what is free.
    memory: Mutex<HashMap<BatchKey, u64>>,
}

#[derive(Debug, Default)]
struct DeviceState {
    batches: HashMap<BatchKey, Batch>,
    next_member: u64,
}

#[derive(Debug)]
struct Batch {
    members: usize,
    /// The sum of its members' attention ([`crate::trace::DeviceSharing::stream_speed`]).
    attention: f64,
    /// Virtual clock reading at `t`: the batch's steps, in solo-ns of a stream of no attention
    /// (a member of attention `x` progresses `1 + x` solo-ns of its own per unit).
    v: f64,
    t: Instant,
    /// Clock units per real ns: the speed of a member of no attention.
    speed: f64,
    wakers: HashMap<u64, Waker>,
}

impl Device {
    pub(crate) fn new(index: usize, spec: DeviceSpec) -> Self {
        Device {
            index,
            spec,
            state: Mutex::new(DeviceState::default()),
            epoch: AtomicU64::new(0),
            memory: Mutex::new(HashMap::new()),
        }
    }

    fn memory(&self) -> MutexGuard<'_, HashMap<BatchKey, u64>> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes held by runners on the device.
    pub(crate) fn memory_used(&self) -> u64 {
        self.memory().values().sum()
    }

    /// Free bytes, when the device's memory is modelled.
    pub(crate) fn memory_free(&self) -> Option<u64> {
        self.spec.memory_bytes().map(|m| m.saturating_sub(self.memory_used()))
    }

    /// Records a runner's memory (replacing what it held).
    pub(crate) fn hold_memory(&self, key: BatchKey, bytes: u64) {
        self.memory().insert(key, bytes);
    }

    /// Forgets a runner's memory (it unloaded).
    pub(crate) fn release_memory(&self, key: BatchKey) {
        self.memory().remove(&key);
    }

    fn lock(&self) -> MutexGuard<'_, DeviceState> {
        // A panic while holding this lock cannot leave the state half-updated in a way that
        // matters more than stopping the simulator, so poisoning is ignored.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The clock rate of a batch of `n` whose attention sums to `attention` when `m` batches
    /// are active on the device: the speed of a member of no attention in it.
    fn speed(&self, n: usize, m: usize, attention: f64) -> f64 {
        self.spec.sharing().stream_speed(n, m, 0.0, attention)
    }

    /// Advances every clock to `now`, applies `change`, recomputes speeds and wakes the streams
    /// of batches that got faster.
    fn update(&self, now: Instant, change: impl FnOnce(&mut DeviceState)) {
        let mut to_wake = Vec::new();
        {
            let mut st = self.lock();
            for b in st.batches.values_mut() {
                let dt = now.saturating_duration_since(b.t).as_nanos() as f64;
                b.v += b.speed * dt;
                b.t = now;
            }
            change(&mut st);
            self.epoch.fetch_add(1, Ordering::Release);
            st.batches.retain(|_, b| b.members > 0);
            let m = st.batches.len();
            let speeds: Vec<(BatchKey, f64)> =
                st.batches.iter().map(|(k, b)| (*k, self.speed(b.members, m, b.attention))).collect();
            for (k, s) in speeds {
                if let Some(b) = st.batches.get_mut(&k) {
                    if s > b.speed {
                        to_wake.extend(b.wakers.drain().map(|(_, w)| w));
                    }
                    b.speed = s;
                }
            }
        }
        for w in to_wake {
            w.wake();
        }
    }

    /// Streams decoding on this device now.
    pub(crate) fn streams(&self) -> usize {
        self.lock().batches.values().map(|b| b.members).sum()
    }

    /// Adds a stream to a batch, with its attention ([`crate::trace::RequestTrace::attention`]).
    /// The stream leaves when the returned handle is dropped.
    pub(crate) fn join(self: &Arc<Self>, key: BatchKey, attention: f64) -> Member {
        let attention = if attention.is_finite() { attention.max(0.0) } else { 0.0 };
        let now = Instant::now();
        let mut id = 0;
        let mut v_join = 0.0;
        self.update(now, |st| {
            id = st.next_member;
            st.next_member += 1;
            let b = st.batches.entry(key).or_insert_with(|| Batch {
                members: 0,
                attention: 0.0,
                v: 0.0,
                t: now,
                speed: 1.0,
                wakers: HashMap::new(),
            });
            b.members += 1;
            b.attention += attention;
            v_join = b.v;
        });
        Member {
            device: Arc::clone(self),
            key,
            id,
            attention,
            v_join,
            joined: now,
            cache: None,
            peers: BTreeSet::new(),
            max_batch: 0,
            seen_version: 0,
            left: false,
        }
    }
}

/// A stream's membership in a batch.
#[derive(Debug)]
pub(crate) struct Member {
    device: Arc<Device>,
    key: BatchKey,
    id: u64,
    attention: f64,
    v_join: f64,
    pub(crate) joined: Instant,
    /// (epoch, clock reading, its time, speed) of the batch when last read.
    cache: Option<(u64, f64, Instant, f64)>,
    /// Other instances seen decoding on the device while this stream was.
    pub(crate) peers: BTreeSet<usize>,
    /// Largest batch this stream was part of.
    pub(crate) max_batch: usize,
    /// Bumped when `peers` or `max_batch` change.
    pub(crate) seen_version: u64,
    /// Whether it has left its batch ([`Member::leave`]).
    left: bool,
}

impl Member {
    /// The batch's clock, from the copy unless membership changed since it was taken.
    fn clock(&mut self) -> (f64, Instant, f64) {
        let epoch = self.device.epoch.load(Ordering::Acquire);
        match self.cache {
            Some((e, v, t, speed)) if e == epoch => (v, t, speed),
            _ => {
                let st = self.device.lock();
                let e = self.device.epoch.load(Ordering::Acquire);
                let (v, t, speed) =
                    st.batches.get(&self.key).map_or((self.v_join, self.joined, 1.0), |b| (b.v, b.t, b.speed));
                self.cache = Some((e, v, t, speed));
                let batch = st.batches.get(&self.key).map_or(0, |b| b.members);
                let before = (self.peers.len(), self.max_batch);
                self.peers.extend(st.batches.keys().map(|k| k.0).filter(|i| *i != self.key.0));
                self.max_batch = self.max_batch.max(batch);
                if (self.peers.len(), self.max_batch) != before {
                    self.seen_version += 1;
                }
                (v, t, speed)
            }
        }
    }

    /// When the stream will have done `work` solo-ns since joining, at the current speeds:
    /// the batch's clock counts steps, of which this stream's solo time is `1 + attention`
    /// units each ([`crate::trace::DeviceSharing::stream_speed`]).
    pub(crate) fn deadline(&mut self, work: Duration) -> Instant {
        let (v, t, speed) = self.clock();
        let remaining = self.v_join + work.as_nanos() as f64 / (1.0 + self.attention) - v;
        if remaining <= 0.0 {
            return t;
        }
        t + Duration::from_nanos((remaining / speed).min(u64::MAX as f64 / 2.0) as u64)
    }

    /// The speed the stream runs at now, as a fraction of its solo speed.
    pub(crate) fn speed(&mut self) -> f64 {
        (1.0 + self.attention) * self.clock().2
    }

    /// Asks to be woken when the stream's batch gets faster (its deadline moved earlier).
    pub(crate) fn wake_on_speedup(&self, waker: &Waker) {
        let mut st = self.device.lock();
        if let Some(b) = st.batches.get_mut(&self.key) {
            match b.wakers.get_mut(&self.id) {
                Some(w) if w.will_wake(waker) => {}
                Some(w) => w.clone_from(waker),
                None => {
                    b.wakers.insert(self.id, waker.clone());
                }
            }
        }
    }
}

impl Member {
    /// Leaves the batch before the membership is dropped (a stream whose tokens are all out,
    /// its answer held by a probe run): the others speed up now. Once.
    pub(crate) fn leave(&mut self) {
        if std::mem::replace(&mut self.left, true) {
            return;
        }
        let (key, id, attention) = (self.key, self.id, self.attention);
        self.device.update(Instant::now(), |st| {
            if let Some(b) = st.batches.get_mut(&key) {
                b.members -= 1;
                b.attention = if b.members == 0 { 0.0 } else { (b.attention - attention).max(0.0) };
                b.wakers.remove(&id);
            }
        });
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(eff: f64, penalty: f64) -> Arc<Device> {
        Arc::new(Device::new(
            0,
            DeviceSpec { cross_process_efficiency: eff, batch_penalty: penalty, ..DeviceSpec::new("gpu") },
        ))
    }

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[test]
    fn a_stream_alone_runs_at_solo_speed() {
        let d = device(0.8, 0.2);
        let mut m = d.join((0, 1), 0.0);
        let dl = m.deadline(Duration::from_secs(1));
        assert!((secs(dl - m.joined) - 1.0).abs() < 1e-3);
        assert_eq!(m.speed(), 1.0);
    }

    #[test]
    fn two_processes_on_one_device_each_get_a_share() {
        let d = device(0.8, 0.2);
        let mut a = d.join((0, 1), 0.0);
        let mut b = d.join((1, 1), 0.0);
        // Each gets 0.8 / 2 = 0.4 of its solo speed.
        assert!((a.speed() - 0.4).abs() < 1e-9);
        assert!((b.speed() - 0.4).abs() < 1e-9);
        let dl = b.deadline(Duration::from_secs(1));
        assert!((secs(dl - b.joined) - 2.5).abs() < 1e-2);
    }

    #[test]
    fn attention_over_each_streams_context_does_not_batch() {
        // p = 0.2; two streams whose attention is 1 and 3: a step of the two takes
        // 1 + 0.2 + 1 + 3 = 5.2, where the first alone takes 2 and the second 4: each runs at
        // its own solo step over the batch's, 2 / 5.2 and 4 / 5.2, not both at the mean's 3 / 5.2.
        let d = device(0.8, 0.2);
        let mut a = d.join((0, 1), 1.0);
        let mut b = d.join((0, 1), 3.0);
        assert!((a.speed() - 2.0 / 5.2).abs() < 1e-9, "{}", a.speed());
        assert!((b.speed() - 4.0 / 5.2).abs() < 1e-9, "{}", b.speed());
        // In step: 2 s of the first's solo work and 4 s of the second's are the same steps of
        // the batch (their solo steps are 2 : 4), so both end at once, 5.2 s in.
        let (da, db) = (a.deadline(Duration::from_secs(2)), b.deadline(Duration::from_secs(4)));
        assert!((secs(da - a.joined) - 5.2).abs() < 1e-2 && (secs(db - a.joined) - 5.2).abs() < 1e-2);
        // Alone again: its own attention is in its solo speed, which is 1.
        drop(b);
        assert!((a.speed() - 1.0).abs() < 1e-9, "{}", a.speed());
        // With a stream of no attention: 2 / (1 + 0.2 + 1 + 0), and that one 1 / 2.2.
        let mut c = d.join((0, 1), 0.0);
        assert!((a.speed() - 2.0 / 2.2).abs() < 1e-9, "{}", a.speed());
        assert!((c.speed() - 1.0 / 2.2).abs() < 1e-9, "{}", c.speed());
        drop(c);
        // Bad attention is none.
        let mut e = d.join((0, 2), f64::NAN);
        assert!((e.speed() - 0.4).abs() < 1e-9, "two processes at 0.8 / 2: {}", e.speed());
    }

    #[test]
    fn processes_may_share_a_devices_attention_otherwise_than_the_rest() {
        // Two real servers on this machine's 2 cores (the attention 4.77 times the rest per
        // 1,000 tokens of context): their weights slowed 2.15 times beside each other (0.93),
        // their attention 0.95 times (2.1). A call at a 176-token mean context (attention
        // 0.84) keeps 1.84 / (2 (1 / 0.93 + 0.84 / 2.1)) = 62 % of its solo speed (measured
        // 59 %); at 1,526 tokens (7.28), 91 % (measured 91 %).
        let sharing = DeviceSpec {
            cross_process_efficiency: 0.93,
            cross_process_attention_efficiency: Some(2.1),
            ..DeviceSpec::new("cores")
        };
        let d = Arc::new(Device::new(0, sharing));
        for (attention, speed) in [(0.839, 0.624), (7.28, 0.912)] {
            let mut a = d.join((0, 1), attention);
            let mut b = d.join((1, 1), attention);
            assert!((a.speed() - speed).abs() < 1e-3 && (b.speed() - speed).abs() < 1e-3, "{}", a.speed());
            drop(b);
            assert!((a.speed() - 1.0).abs() < 1e-9, "alone: {}", a.speed());
        }
    }

    #[test]
    fn streams_batched_in_one_process_pay_the_batch_penalty() {
        let d = device(0.8, 0.2);
        let mut a = d.join((0, 1), 0.0);
        let _b = d.join((0, 1), 0.0);
        assert!((a.speed() - 1.0 / 1.2).abs() < 1e-9);
    }

    #[test]
    fn leaving_speeds_the_others_up_and_keeps_their_progress() {
        // Each join and leave happens at an instant the device takes itself, somewhere between
        // the two instants taken around it here; the bounds follow from those intervals, so a
        // thread descheduled between two lines widens them instead of failing the test (a
        // fixed 2 ms bound did, once in a few runs on a busy machine).
        let d = device(1.0, 0.0);
        let t0 = Instant::now();
        let mut a = d.join((0, 1), 0.0);
        let t1 = Instant::now();
        let b = d.join((1, 1), 0.0);
        let t2 = Instant::now();
        assert!((a.speed() - 0.5).abs() < 1e-9);
        std::thread::sleep(Duration::from_millis(20));
        let t3 = Instant::now();
        drop(b);
        let t4 = Instant::now();
        assert_eq!(a.speed(), 1.0);
        // a joined at ja, b at jb, b left at lb: a ran alone until jb, at half speed until lb,
        // alone again after, so 100 ms of work ends at lb + 100 ms - (jb - ja) - (lb - jb) / 2
        // = ja + 100 ms + (lb - jb) / 2. Progress lost at the leave would put it 10 ms later.
        let work = Duration::from_millis(100);
        let earliest = t0 + work + (t3 - t2) / 2;
        let latest = t1 + work + (t4 - t1) / 2;
        let slack = Duration::from_micros(50);
        let deadline = a.deadline(work);
        assert!(
            deadline + slack >= earliest && deadline <= latest + slack,
            "deadline {:?} after t0, expected between {:?} and {:?}",
            deadline - t0,
            earliest - t0,
            latest - t0
        );
    }
}
