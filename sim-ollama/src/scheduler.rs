//! One instance's scheduler, as the real server's (`server/sched.go`): loaded runners with
//! reference counts and keep-alive timers, one load at a time in FIFO order, the pending
//! limit (`OLLAMA_MAX_QUEUE`, then 503) for requests that need scheduling, reloads when runner
//! options differ (after in-flight requests finish), eviction past
//! `OLLAMA_MAX_LOADED_MODELS`, and `num_parallel` FIFO slots per runner.

use crate::clock::Clock;
use crate::config::{ModelSpec, ResolvedInstance};
use crate::device::Device;
use crate::error::ApiError;
use crate::keepalive::KeepAlive;
use crate::latency;
use crate::request::Options;
use crate::seed::SeedBuilder;
use crate::store::Store;
use crate::trace::{Load, TraceGuard, WaitReason};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};

/// The options a runner is loaded with; a request with different ones forces a reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunnerOptions {
    /// Effective context length per slot (default 4096, capped at the model's).
    pub(crate) num_ctx: u64,
    pub(crate) num_batch: i64,
    /// `None` = automatic (all layers on the GPU).
    pub(crate) num_gpu: Option<i64>,
    pub(crate) main_gpu: Option<i64>,
    pub(crate) use_mmap: Option<bool>,
    pub(crate) num_thread: i64,
    pub(crate) shift: bool,
}

/// The default `num_ctx` of a machine with less than 24 GiB of VRAM.
pub(crate) const DEFAULT_NUM_CTX: u64 = 4096;

impl RunnerOptions {
    pub(crate) fn from_options(o: &Options, model: &ModelSpec, shift: bool) -> Self {
        let num_ctx = match o.num_ctx {
            Some(n) if n > 0 => (n as u64).clamp(4, model.context_length.max(4)),
            _ => DEFAULT_NUM_CTX.min(model.context_length.max(4)),
        };
        RunnerOptions {
            num_ctx,
            num_batch: o.num_batch.unwrap_or(512),
            num_gpu: o.num_gpu.filter(|n| *n >= 0),
            main_gpu: o.main_gpu,
            use_mmap: o.use_mmap,
            num_thread: o.num_thread.unwrap_or(0),
            shift,
        }
    }

    /// Why a runner loaded with `self` cannot serve a request asking for `req`, if it cannot.
    pub(crate) fn reload_reason(&self, req: &RunnerOptions) -> Option<String> {
        let mut diffs = Vec::new();
        if self.num_ctx != req.num_ctx {
            diffs.push(format!("num_ctx {} -> {}", self.num_ctx, req.num_ctx));
        }
        if self.num_batch != req.num_batch {
            diffs.push(format!("num_batch {} -> {}", self.num_batch, req.num_batch));
        }
        // An unset num_gpu in the request accepts whatever is loaded.
        if req.num_gpu.is_some() && self.num_gpu != req.num_gpu {
            diffs.push(format!("num_gpu {} -> {}", fmt_opt(self.num_gpu), fmt_opt(req.num_gpu)));
        }
        if self.main_gpu != req.main_gpu {
            diffs.push(format!("main_gpu {} -> {}", fmt_opt(self.main_gpu), fmt_opt(req.main_gpu)));
        }
        if self.use_mmap != req.use_mmap {
            diffs.push(format!("use_mmap {:?} -> {:?}", self.use_mmap, req.use_mmap));
        }
        if self.num_thread != req.num_thread {
            diffs.push(format!("num_thread {} -> {}", self.num_thread, req.num_thread));
        }
        if self.shift != req.shift {
            diffs.push(format!("shift {} -> {}", self.shift, req.shift));
        }
        if diffs.is_empty() { None } else { Some(diffs.join(", ")) }
    }
}

fn fmt_opt(v: Option<i64>) -> String {
    v.map_or_else(|| "auto".to_string(), |n| n.to_string())
}

/// A loaded (or loading) model.
#[derive(Debug)]
pub(crate) struct Runner {
    pub(crate) id: u64,
    pub(crate) key: String,
    pub(crate) display: String,
    pub(crate) model: Arc<ModelSpec>,
    pub(crate) opts: RunnerOptions,
    pub(crate) num_parallel: usize,
    pub(crate) slots: Arc<Semaphore>,
    /// Modelled duration of this runner's load.
    pub(crate) load_time: Duration,
    pub(crate) load_start: Instant,
    ready: watch::Sender<bool>,
    st: Mutex<RunnerState>,
}

#[derive(Debug)]
struct RunnerState {
    refs: usize,
    keep_alive: KeepAlive,
    draining: bool,
    expires_at: SystemTime,
    /// Bumped whenever the runner goes busy, so a stale expiry timer does nothing.
    idle_gen: u64,
    /// The keep-alive timer of an idle runner, aborted when it goes busy again.
    expiry: Option<tokio::task::AbortHandle>,
}

impl Runner {
    fn lock(&self) -> MutexGuard<'_, RunnerState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Requests holding the runner.
    pub(crate) fn refs(&self) -> usize {
        self.lock().refs
    }

    /// Slots in use.
    pub(crate) fn busy_slots(&self) -> usize {
        self.num_parallel - self.slots.available_permits()
    }

    pub(crate) fn expires_at(&self) -> SystemTime {
        self.lock().expires_at
    }
}

/// One simulated server's scheduling state.
#[derive(Debug)]
pub(crate) struct Instance {
    pub(crate) index: usize,
    pub(crate) cfg: ResolvedInstance,
    pub(crate) device: Arc<Device>,
    pub(crate) store: Store,
    pub(crate) port: AtomicU16,
    seed: u64,
    time_scale: f64,
    default_keep_alive: KeepAlive,
    clock: Clock,
    rt: tokio::runtime::Handle,
    state: Mutex<State>,
    sched: Arc<tokio::sync::Mutex<()>>,
    changed: Notify,
    next_runner: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    runners: BTreeMap<String, Arc<Runner>>,
    /// Requests waiting for the scheduler (bounded by `max_queue`).
    pending: usize,
    /// Loads done per model key (the first one is cold).
    loads: HashMap<String, u64>,
}

/// What a request asks the scheduler for.
#[derive(Debug)]
pub(crate) struct RunnerRequest<'a> {
    pub(crate) key: String,
    pub(crate) display: String,
    pub(crate) model: Arc<ModelSpec>,
    pub(crate) opts: RunnerOptions,
    pub(crate) keep_alive: Option<KeepAlive>,
    pub(crate) trace: &'a TraceGuard,
}

/// A request's hold on a runner: released (and the keep-alive timer started) on drop.
#[derive(Debug)]
pub(crate) struct Lease {
    instance: Arc<Instance>,
    pub(crate) runner: Arc<Runner>,
    /// Modelled load time this request paid for or waited on, or its per-call overhead on a
    /// loaded runner (what its `load_duration` reports).
    pub(crate) load_modelled: Duration,
    /// The per-call overhead alone (zero when the request loaded or waited for a load): part
    /// of what the call costs alone, so the trace's modelled solo cost includes it.
    pub(crate) ping: Duration,
}

/// Snapshot of a loaded runner, for `/api/ps` and `/sim/metrics`.
#[derive(Debug, Clone)]
pub(crate) struct RunnerInfo {
    pub(crate) display: String,
    pub(crate) model: Arc<ModelSpec>,
    pub(crate) num_ctx: u64,
    pub(crate) on_gpu: bool,
    pub(crate) expires_at: SystemTime,
    pub(crate) busy_slots: usize,
    pub(crate) num_parallel: usize,
    pub(crate) waiting_for_slot: usize,
}

/// Go's "forever": the maximum duration, about 292 years.
const FOREVER: Duration = Duration::from_secs(292 * 365 * 24 * 3600);

impl Instance {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        index: usize,
        cfg: ResolvedInstance,
        device: Arc<Device>,
        store: Store,
        seed: u64,
        time_scale: f64,
        default_keep_alive: KeepAlive,
        clock: Clock,
        rt: tokio::runtime::Handle,
    ) -> Self {
        Instance {
            index,
            cfg,
            device,
            store,
            port: AtomicU16::new(0),
            seed,
            time_scale,
            default_keep_alive,
            clock,
            rt,
            state: Mutex::new(State::default()),
            sched: Arc::new(tokio::sync::Mutex::new(())),
            changed: Notify::new(),
            next_runner: AtomicU64::new(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_wall(&self) -> SystemTime {
        if self.clock.is_frozen() { crate::clock::frozen_epoch() } else { SystemTime::now() }
    }

    /// Takes the runner if it is loaded with compatible options (or loading with them).
    fn attach(
        &self,
        st: &State,
        key: &str,
        opts: &RunnerOptions,
        keep_alive: Option<KeepAlive>,
    ) -> Option<Arc<Runner>> {
        let r = st.runners.get(key)?;
        let mut rs = r.lock();
        if rs.draining || r.opts.reload_reason(opts).is_some() {
            return None;
        }
        rs.refs += 1;
        rs.idle_gen += 1;
        if let Some(t) = rs.expiry.take() {
            t.abort();
        }
        if let Some(ka) = keep_alive {
            rs.keep_alive = ka;
        }
        Some(Arc::clone(r))
    }

    /// Gets a loaded runner for a request, loading, reloading or evicting as needed.
    pub(crate) async fn acquire(self: &Arc<Self>, req: RunnerRequest<'_>) -> Result<Lease, ApiError> {
        // Fast path: loaded (or loading) with the right options: never enters the queue.
        let attached = {
            let st = self.lock();
            self.attach(&st, &req.key, &req.opts, req.keep_alive)
        };
        if let Some(runner) = attached {
            let lease =
                Lease { instance: Arc::clone(self), runner, load_modelled: Duration::ZERO, ping: Duration::ZERO };
            return self.wait_ready(lease, &req).await;
        }

        // Slow path: through the scheduler, bounded by max_queue.
        {
            let mut st = self.lock();
            if st.pending >= self.cfg.max_queue {
                return Err(ApiError::busy());
            }
            st.pending += 1;
        }
        let pending = PendingGuard(self);
        let sched = match Arc::clone(&self.sched).try_lock_owned() {
            Ok(g) => g,
            Err(_) => {
                let w = req.trace.begin_wait(
                    WaitReason::Scheduler,
                    Instant::now(),
                    "another model load is in progress".into(),
                );
                let g = Arc::clone(&self.sched).lock_owned().await;
                req.trace.end_wait(w, Instant::now());
                g
            }
        };
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.schedule_step(&req) {
                Decision::Retry => continue,
                Decision::Attached(runner) => {
                    drop(pending);
                    drop(sched);
                    let lease = Lease {
                        instance: Arc::clone(self),
                        runner,
                        load_modelled: Duration::ZERO,
                        ping: Duration::ZERO,
                    };
                    return self.wait_ready(lease, &req).await;
                }
                Decision::Load(runner) => {
                    // The load runs in its own task holding the scheduler, so one model loads
                    // at a time even if this request goes away.
                    let loader = Arc::clone(&runner);
                    self.rt.spawn(async move {
                        tokio::time::sleep(loader.load_time).await;
                        loader.ready.send_replace(true);
                        drop(sched);
                    });
                    drop(pending);
                    let load_modelled = runner.load_time;
                    let lease = Lease { instance: Arc::clone(self), runner, load_modelled, ping: Duration::ZERO };
                    return self.wait_ready(lease, &req).await;
                }
                Decision::Wait(reason, detail) => {
                    let w = req.trace.begin_wait(reason, Instant::now(), detail);
                    notified.await;
                    req.trace.end_wait(w, Instant::now());
                }
            }
        }
    }

    /// One decision of the scheduler for a request, under the state lock.
    fn schedule_step(&self, req: &RunnerRequest<'_>) -> Decision {
        let mut st = self.lock();
        if let Some(runner) = self.attach(&st, &req.key, &req.opts, req.keep_alive) {
            return Decision::Attached(runner);
        }
        if let Some(r) = st.runners.get(&req.key).cloned() {
            // Loaded with other options (or already draining): reload once idle.
            let why = r.opts.reload_reason(&req.opts).unwrap_or_else(|| "model is unloading".into());
            let mut rs = r.lock();
            rs.draining = true;
            if rs.refs == 0 {
                drop(rs);
                st.runners.remove(&req.key);
                return Decision::Retry;
            }
            return Decision::Wait(
                WaitReason::ReloadForOptions,
                format!("{} busy with {} request(s); reload for {why}", r.display, rs.refs),
            );
        }
        if st.runners.len() >= self.cfg.max_loaded_models {
            // Evict the idle-soonest model: idle ones first, then the soonest to expire.
            let victim = st
                .runners
                .values()
                .min_by_key(|r| {
                    let rs = r.lock();
                    (rs.refs > 0, rs.expires_at)
                })
                .cloned();
            let Some(v) = victim else { return Decision::Retry };
            let mut vs = v.lock();
            vs.draining = true;
            if vs.refs == 0 {
                drop(vs);
                st.runners.remove(&v.key);
                return Decision::Retry;
            }
            return Decision::Wait(
                WaitReason::Eviction,
                format!(
                    "{} models loaded (max {}); evicting {}",
                    st.runners.len(),
                    self.cfg.max_loaded_models,
                    v.display
                ),
            );
        }
        // Load it.
        let n = st.loads.entry(req.key.clone()).or_insert(0);
        let cold = *n == 0;
        *n += 1;
        let mut rng = SeedBuilder::new(self.seed).str("load").u64(self.index as u64).str(&req.key).u64(*n).rng();
        let load_time = latency::load_time(&req.model.profile, cold, self.time_scale, &mut rng);
        let num_parallel = if req.model.has("embedding") { 1 } else { self.cfg.num_parallel };
        let (ready, _) = watch::channel(false);
        let now = Instant::now();
        let runner = Arc::new(Runner {
            id: self.next_runner.fetch_add(1, Ordering::Relaxed),
            key: req.key.clone(),
            display: req.display.clone(),
            model: Arc::clone(&req.model),
            opts: req.opts.clone(),
            num_parallel,
            slots: Arc::new(Semaphore::new(num_parallel)),
            load_time,
            load_start: now,
            ready,
            st: Mutex::new(RunnerState {
                refs: 1,
                keep_alive: req.keep_alive.unwrap_or(self.default_keep_alive),
                draining: false,
                expires_at: self.now_wall() + load_time,
                idle_gen: 0,
                expiry: None,
            }),
        });
        st.runners.insert(req.key.clone(), Arc::clone(&runner));
        drop(st);
        let reason = match req.trace.with(|r| r.waits.last().map(|w| w.reason)) {
            Some(WaitReason::ReloadForOptions) => "reload for runner options",
            Some(WaitReason::Eviction) => "load after eviction",
            _ if cold => "first use (cold start)",
            _ => "not loaded",
        };
        req.trace.with(|r| {
            r.loads.push(Load {
                start_us: req.trace.us(now),
                duration_us: load_time.as_micros() as u64,
                cold,
                reason: reason.to_string(),
            })
        });
        Decision::Load(runner)
    }

    /// Waits until the lease's runner has loaded. A request that found its runner loaded pays
    /// the per-call overhead instead (the real scheduler's health ping,
    /// [`crate::config::Profile::call_overhead_ms`]): it shows in its `load_duration`.
    async fn wait_ready(&self, mut lease: Lease, req: &RunnerRequest<'_>) -> Result<Lease, ApiError> {
        if lease.runner.is_ready() {
            if lease.load_modelled.is_zero() {
                let mut rng = SeedBuilder::new(self.seed)
                    .str("ping")
                    .u64(self.index as u64)
                    .str(&req.key)
                    .u64(req.trace.id())
                    .rng();
                let d = latency::call_overhead(&req.model.profile, self.time_scale, &mut rng);
                if !d.is_zero() {
                    tokio::time::sleep(d).await;
                }
                lease.load_modelled = d;
                lease.ping = d;
            }
            return Ok(lease);
        }
        let w =
            req.trace.begin_wait(WaitReason::ModelLoading, Instant::now(), format!("loading {}", lease.runner.display));
        if lease.load_modelled.is_zero() {
            // Joined a load already in progress: it shows in this request's load_duration too.
            lease.load_modelled = lease.runner.load_time;
            let (start, dur) = (lease.runner.load_start, lease.runner.load_time);
            req.trace.with(|r| {
                r.loads.push(Load {
                    start_us: req.trace.us(start),
                    duration_us: dur.as_micros() as u64,
                    cold: false,
                    reason: "joined a load in progress".into(),
                })
            });
        }
        let mut rx = lease.runner.ready.subscribe();
        // The sender lives in the runner, which the lease keeps alive.
        let _ = rx.wait_for(|ready| *ready).await;
        req.trace.end_wait(w, Instant::now());
        Ok(lease)
    }

    /// Releases a runner reference; starts the keep-alive timer or unloads when idle.
    fn release(self: &Arc<Self>, runner: &Arc<Runner>) {
        let mut st = self.lock();
        let mut rs = runner.lock();
        rs.refs = rs.refs.saturating_sub(1);
        if rs.refs == 0 {
            if rs.draining || rs.keep_alive.is_zero() {
                drop(rs);
                if st.runners.get(&runner.key).is_some_and(|r| r.id == runner.id) {
                    st.runners.remove(&runner.key);
                }
            } else {
                rs.idle_gen += 1;
                match rs.keep_alive {
                    KeepAlive::Forever => rs.expires_at = self.now_wall() + FOREVER,
                    KeepAlive::For(d) => {
                        // A keep-alive too long to add is forever.
                        rs.expires_at = self.now_wall().checked_add(d).unwrap_or(self.now_wall() + FOREVER);
                        let generation = rs.idle_gen;
                        let (inst, r) = (Arc::clone(self), Arc::clone(runner));
                        let task = self.rt.spawn(async move {
                            tokio::time::sleep(d).await;
                            inst.expire(&r, generation);
                        });
                        if let Some(old) = rs.expiry.replace(task.abort_handle()) {
                            old.abort();
                        }
                    }
                }
            }
        }
        drop(st);
        self.changed.notify_waiters();
    }

    fn expire(&self, runner: &Arc<Runner>, generation: u64) {
        let mut st = self.lock();
        let rs = runner.lock();
        if rs.refs == 0 && rs.idle_gen == generation && st.runners.get(&runner.key).is_some_and(|r| r.id == runner.id) {
            drop(rs);
            st.runners.remove(&runner.key);
            tracing::debug!(target: "sim_ollama", instance = self.index, model = %runner.display, "keep-alive expired: unloaded");
        }
        drop(st);
        self.changed.notify_waiters();
    }

    /// Unloads a model as soon as it is idle (an empty prompt with `keep_alive: 0`).
    pub(crate) fn unload(&self, key: &str) {
        let mut st = self.lock();
        if let Some(r) = st.runners.get(key).cloned() {
            let mut rs = r.lock();
            rs.keep_alive = KeepAlive::For(Duration::ZERO);
            rs.draining = true;
            if rs.refs == 0 {
                drop(rs);
                st.runners.remove(key);
            }
        }
        drop(st);
        self.changed.notify_waiters();
    }

    /// Loaded runners, for `/api/ps` (ready ones) and metrics.
    pub(crate) fn runners(&self) -> Vec<RunnerInfo> {
        let st = self.lock();
        st.runners
            .values()
            .filter(|r| r.is_ready())
            .map(|r| RunnerInfo {
                display: r.display.clone(),
                model: Arc::clone(&r.model),
                num_ctx: r.opts.num_ctx,
                on_gpu: r.opts.num_gpu != Some(0),
                expires_at: r.expires_at(),
                busy_slots: r.busy_slots(),
                num_parallel: r.num_parallel,
                waiting_for_slot: r.refs().saturating_sub(r.busy_slots()),
            })
            .collect()
    }

    /// Requests waiting for the scheduler.
    pub(crate) fn pending(&self) -> usize {
        self.lock().pending
    }
}

/// What the scheduler decided for a request.
enum Decision {
    /// Try again at once (something was unloaded).
    Retry,
    /// A compatible runner was there.
    Attached(Arc<Runner>),
    /// A new runner was created and must be loaded.
    Load(Arc<Runner>),
    /// Wait for a change (in-flight requests finishing), for this reason.
    Wait(WaitReason, String),
}

struct PendingGuard<'a>(&'a Instance);

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.pending = st.pending.saturating_sub(1);
    }
}

impl Lease {
    /// Takes one of the runner's parallel slots, in FIFO order.
    pub(crate) async fn slot(&self, trace: &TraceGuard) -> OwnedSemaphorePermit {
        let sem = Arc::clone(&self.runner.slots);
        if let Ok(p) = Arc::clone(&sem).try_acquire_owned() {
            return p;
        }
        let detail =
            format!("{}/{} slots of {} busy", self.runner.busy_slots(), self.runner.num_parallel, self.runner.display);
        let w = trace.begin_wait(WaitReason::SlotBusy, Instant::now(), detail);
        // The semaphore is never closed.
        let p = sem.acquire_owned().await.unwrap_or_else(|_| unreachable!("slot semaphores are never closed"));
        trace.end_wait(w, Instant::now());
        p
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.instance.release(&self.runner);
    }
}
