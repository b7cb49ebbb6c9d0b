//! One instance's scheduler, as the real server's (`server/sched.go` of Ollama v0.33.0-rc2):
//! loaded runners with reference counts and keep-alive timers; one scheduling loop that takes
//! pending requests in FIFO order and loads one model at a time; the pending limit
//! (`OLLAMA_MAX_QUEUE`, then 503) for every request that cannot use a loaded runner at once,
//! including those that arrive while their model loads; reloads when runner options differ and
//! eviction past `OLLAMA_MAX_LOADED_MODELS`, both by expiring a runner (keep-alive zero) and
//! waiting until it is idle, while compatible requests keep using it; loads aborted when the
//! loading request's client goes away; and `num_parallel` FIFO slots per runner.
//!
//! How the real scheduler does each of these, with its lines:
//! - `getRunner` (sched.go 169-211): a request whose model is in `s.loaded` with matching
//!   options takes it at once (`useLoadedRunner`), with no queue, even when that runner has
//!   been told to expire for a reload or an eviction; every other request is sent to
//!   `pendingReqCh`, a channel of `OLLAMA_MAX_QUEUE` places, and is refused with `ErrMaxQueue`
//!   (503) when it is full.
//! - `processPending` (225-363), one goroutine: it takes one pending request at a time and
//!   blocks until that request has a runner; `load` (496-755) runs the whole start of a
//!   llama-server (`llamaServerRunner.Load` -> `WaitUntilRunning`, llm/llama_server.go
//!   1047-1061) before the runner enters `s.loaded`, so requests for a model that is loading
//!   find nothing loaded and wait in the pending queue, counted, then go through the loop one
//!   by one once it is loaded.
//! - `WaitUntilRunning(req.ctx)` (llama_server.go 1281-1295): the loading request's client
//!   going away aborts the load (the process is closed, sched.go 643-648); the next pending
//!   request starts a new one.
//! - A runner to reload or evict gets `sessionDuration = 0` once (sched.go 330-341) and the loop
//!   waits for an unload; a later request that passes its own `keep_alive` sets the duration
//!   again (`useLoadedRunner`, 475-493), and the runner then lives until that expires.
//! - The victim (`findRunnerToUnload`, 1664-1693, `ByDurationAndName`, 1557-1578): the runners
//!   sorted by keep-alive, then name; the first idle one, else the first (busy) one.
//!
//! One concept in one file of about 860 lines, on purpose: Ollama's scheduler is one file too
//! (`server/sched.go`), and this one's state machine (runners, loads, reloads, evictions,
//! slots, the queue) keeps its invariants under one lock, which files split by step would
//! scatter. Its parts are in order: runner options, runners, the instance's state, the
//! acquire loop, the lease that gives a slot back.

use crate::cache::{Claim, PromptCache};
use crate::clock::Clock;
use crate::config::{ModelSpec, ResolvedInstance};
use crate::device::Device;
use crate::error::ApiError;
use crate::keepalive::KeepAlive;
use crate::latency;
use crate::request::Options;
use crate::seed::SeedBuilder;
use crate::store::Store;
use crate::trace::{Load, LoadCause, TraceGuard, WaitReason};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// The options a runner is loaded with; a request with different ones forces a reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunnerOptions {
    /// Effective context length per slot (the device's default tier, capped at the model's).
    pub(crate) num_ctx: u64,
    /// The request left `num_ctx` to the server: an automatic value matches any other
    /// automatic one when deciding a reload (`needsReload`, server/sched.go 1396-1398).
    pub(crate) num_ctx_auto: bool,
    pub(crate) num_batch: i64,
    /// `None` = automatic (all layers on the GPU).
    pub(crate) num_gpu: Option<i64>,
    pub(crate) main_gpu: Option<i64>,
    pub(crate) use_mmap: Option<bool>,
    pub(crate) num_thread: i64,
    pub(crate) shift: bool,
}

impl RunnerOptions {
    /// The runner options of a request; `default_num_ctx` is the server's automatic value
    /// ([`crate::config::DeviceSpec::default_num_ctx`]).
    pub(crate) fn from_options(o: &Options, model: &ModelSpec, shift: bool, default_num_ctx: u64) -> Self {
        let (num_ctx, num_ctx_auto) = match o.num_ctx {
            Some(n) if n > 0 => ((n as u64).clamp(4, model.context_length.max(4)), false),
            _ => (default_num_ctx.min(model.context_length.max(4)), true),
        };
        RunnerOptions {
            num_ctx,
            num_ctx_auto,
            num_batch: o.num_batch.unwrap_or(512),
            num_gpu: o.num_gpu.filter(|n| *n >= 0),
            main_gpu: o.main_gpu,
            use_mmap: o.use_mmap,
            num_thread: o.num_thread.unwrap_or(0),
            shift,
        }
    }

    /// What a generation meets when it fills a slot of a runner of these options for `model`:
    /// its slot's tokens, and a shift of them unless context shift is off (asked off, or a
    /// deepseek2 model: `supportsContextShift`, server/sched.go 129-147).
    pub(crate) fn slot(&self, model: &ModelSpec) -> crate::context::SlotContext {
        crate::context::SlotContext {
            tokens: crate::context::slot_tokens(self.num_ctx, model.context_length),
            shift: self.shift && model.family != "deepseek2",
        }
    }

    /// Why a runner loaded with `self` cannot serve a request asking for `req`, if it cannot.
    pub(crate) fn reload_reason(&self, req: &RunnerOptions) -> Option<String> {
        let mut diffs = Vec::new();
        if self.num_ctx != req.num_ctx && !(self.num_ctx_auto && req.num_ctx_auto) {
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
    /// Why it has one slot whatever `OLLAMA_NUM_PARALLEL` asks, when the server forces one.
    pub(crate) forced_one_slot: Option<String>,
    pub(crate) slots: Arc<Semaphore>,
    /// Modelled duration of this runner's load.
    pub(crate) load_time: Duration,
    /// Set when the load has finished; until then no request can use the runner.
    ready: AtomicBool,
    /// Its memory (what `/api/ps` reports as `size`): the real scheduler's prediction when the
    /// device's memory is modelled, else the catalogue's `size_loaded`.
    pub(crate) memory: u64,
    /// The part of it on the device (`size_vram`): all of it when it fits, what is free when it
    /// is the only model and does not (the real server then offloads layers to the CPU; the
    /// slower decoding that follows is not modelled), none with `num_gpu` 0 or on a CPU.
    pub(crate) vram: u64,
    st: Mutex<RunnerState>,
    /// What each slot holds of its last prompt, and the host prompt cache.
    cache: Mutex<PromptCache>,
}

#[derive(Debug)]
struct RunnerState {
    refs: usize,
    /// Zero once the scheduler has expired the runner for a reload or an eviction (the real
    /// `sessionDuration = 0`): it unloads as soon as it is idle.
    keep_alive: KeepAlive,
    /// Set when the runner goes idle; unset until its first request ends (the real scheduler
    /// "waits to set expiresAt").
    expires_at: Option<SystemTime>,
    /// Bumped whenever the runner goes busy, so a stale expiry timer does nothing.
    idle_gen: u64,
    /// The keep-alive timer of an idle runner, aborted when it goes busy again.
    expiry: Option<tokio::task::AbortHandle>,
}

impl Runner {
    fn lock(&self) -> MutexGuard<'_, RunnerState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes an idle slot's cache for a prompt (the caller holds a slot permit).
    pub(crate) fn claim(&self, prompt: &[crate::cache::Tok], agent: &str) -> Claim {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).claim(prompt, agent)
    }

    /// Frees a slot's cache with the tokens it generated, before its permit is returned.
    pub(crate) fn release_slot(&self, slot: usize, generated: &[crate::cache::Tok]) {
        let full = self.opts.slot(&self.model);
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).release(slot, generated, full);
    }

    pub(crate) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Requests holding the runner.
    pub(crate) fn refs(&self) -> usize {
        self.lock().refs
    }

    /// Slots in use.
    pub(crate) fn busy_slots(&self) -> usize {
        self.num_parallel - self.slots.available_permits()
    }

    /// When it expires, as `/api/ps` says: before its first request has ended, now plus its
    /// keep-alive (the real `loadedModels`, server/sched.go v0.33.0-rc2 1775-1780).
    pub(crate) fn expires_at(&self, now: SystemTime) -> SystemTime {
        let rs = self.lock();
        rs.expires_at.unwrap_or_else(|| match rs.keep_alive {
            KeepAlive::For(d) => now.checked_add(d).unwrap_or(now + FOREVER),
            KeepAlive::Forever => now + FOREVER,
        })
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
    /// Loads take no time ([`Instance::set_instant_loads`]): while the simulator preloads its
    /// models, before any program's request.
    instant_loads: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    runners: BTreeMap<String, Arc<Runner>>,
    /// Requests waiting for the scheduler (bounded by `max_queue`).
    pending: usize,
    /// Loads started per model key (the first one is cold).
    loads: HashMap<String, u64>,
    /// Model keys whose last load was aborted by its client.
    aborted: HashSet<String>,
    /// Until when the device is still releasing the memory of the last unload (real:
    /// `waitForVRAMRecovery`); a request that waited for an unload loads after it.
    vram_released_at: Option<Instant>,
}

/// What a request asks the scheduler for.
#[derive(Debug)]
pub(crate) struct RunnerRequest<'a> {
    /// The runner's identity: the model's weights ([`crate::store::Installed::runner_key`]).
    pub(crate) key: String,
    /// The name the request used (lower case), which seeds its load and ping draws.
    pub(crate) name_key: String,
    pub(crate) display: String,
    pub(crate) model: Arc<ModelSpec>,
    pub(crate) opts: RunnerOptions,
    pub(crate) keep_alive: Option<KeepAlive>,
    pub(crate) trace: &'a TraceGuard,
    /// When the request reached the server ([`crate::arrival`]): a runner found loaded at
    /// once was had from then, and its per-call overhead counts from then.
    pub(crate) arrival: Instant,
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
    /// When, in the modelled timeline, the request had its runner: its arrival plus the
    /// per-call overhead when the runner was there at once, else the end of what it waited
    /// for (a load, the scheduler) plus the overhead. Can be earlier than the moment
    /// `acquire` returned, when the simulator itself was late to handle the request.
    pub(crate) ready_at: Instant,
}

/// Snapshot of a loaded runner, for `/api/ps` and `/sim/metrics`.
#[derive(Debug, Clone)]
pub(crate) struct RunnerInfo {
    pub(crate) display: String,
    pub(crate) model: Arc<ModelSpec>,
    pub(crate) num_ctx: u64,
    /// Bytes in memory and on the device (`/api/ps` `size` and `size_vram`).
    pub(crate) size: u64,
    pub(crate) size_vram: u64,
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
            instant_loads: AtomicBool::new(false),
        }
    }

    /// Whether loads take no time. `SimBuilder::start` preloads the models so: a load before
    /// the program starts is outside every judged window (the trace is then forgotten), and
    /// its modelled time (0.5 s of wall time for gemma3 at the default time scale) was only
    /// waited for by each test that starts a simulator. The load still counts as the model's
    /// first (a later reload is warm) and leaves the runner resident as before.
    pub(crate) fn set_instant_loads(&self, on: bool) {
        self.instant_loads.store(on, Ordering::Relaxed);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the runner if it is loaded with compatible options, as `useLoadedRunner` does:
    /// even a runner expired for a reload or an eviction, and a `keep_alive` in the request
    /// replaces the runner's (so it may no longer unload when idle). A runner still loading is
    /// not in the real `s.loaded`: it is never taken here.
    fn attach(
        &self,
        st: &State,
        key: &str,
        opts: &RunnerOptions,
        keep_alive: Option<KeepAlive>,
    ) -> Option<Arc<Runner>> {
        let r = st.runners.get(key)?;
        if !r.is_ready() || r.opts.reload_reason(opts).is_some() {
            return None;
        }
        let mut rs = r.lock();
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
        // Fast path: loaded with the right options: never enters the queue.
        let attached = {
            let st = self.lock();
            self.attach(&st, &req.key, &req.opts, req.keep_alive)
        };
        if let Some(runner) = attached {
            return self.ping(Lease::new(self, runner, Duration::ZERO), &req, req.arrival).await;
        }

        // Slow path: the pending queue, bounded by max_queue, then the scheduling loop.
        let loading = {
            let mut st = self.lock();
            if st.pending >= self.cfg.max_queue {
                return Err(ApiError::busy());
            }
            st.pending += 1;
            st.runners.values().find(|r| !r.is_ready()).map(|r| r.display.clone())
        };
        let pending = PendingGuard(self);
        let sched = match Arc::clone(&self.sched).try_lock_owned() {
            Ok(g) => g,
            Err(_) => {
                let (reason, detail) = match loading {
                    Some(m) if m == req.display => (
                        WaitReason::ModelLoading,
                        format!("queued while {m} loads ({} pending, max {})", self.pending(), self.cfg.max_queue),
                    ),
                    Some(m) => (WaitReason::Scheduler, format!("queued while {m} loads")),
                    None => (WaitReason::Scheduler, "queued behind other requests being scheduled".to_string()),
                };
                let w = req.trace.begin_wait(reason, Instant::now(), detail);
                let g = Arc::clone(&self.sched).lock_owned().await;
                req.trace.end_wait(w, Instant::now());
                g
            }
        };
        // The scheduling loop has taken this request off the pending queue (the real
        // `processPending` receives it from `pendingReqCh`): it no longer counts.
        drop(pending);
        let mut steps = Steps::default();
        // The wait in progress: one wait for as long as the decisions give the same reason (each
        // change of the scheduler's state decides again), so the trace never shows the request
        // between two waits of one cause.
        let mut open: Option<(usize, WaitReason)> = None;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let decision = self.schedule_step(&req, &mut steps);
            // Any decision but another look or a wait of the same cause ends the wait in progress.
            if let Some((w, r)) = open
                && !matches!(&decision, Decision::Retry)
                && !matches!(&decision, Decision::Wait(reason, _) if *reason == r)
            {
                req.trace.end_wait(w, Instant::now());
                open = None;
            }
            match decision {
                Decision::Retry => continue,
                Decision::Attached(runner) => {
                    drop(sched);
                    return self.ping(Lease::new(self, runner, Duration::ZERO), &req, Instant::now()).await;
                }
                Decision::Load(runner) => {
                    // The load holds the scheduler, so one model loads at a time, and runs in
                    // this request: dropping it (its client went away) drops the lease first,
                    // which removes the unfinished runner, then the scheduler.
                    let load_time =
                        if self.instant_loads.load(Ordering::Relaxed) { Duration::ZERO } else { runner.load_time };
                    let loading = Loading { lease: Lease::new(self, runner, load_time), _sched: sched };
                    let w = req.trace.begin_wait(
                        WaitReason::ModelLoading,
                        Instant::now(),
                        format!("loading {}", loading.lease.runner.display),
                    );
                    tokio::time::sleep(load_time).await;
                    req.trace.end_wait(w, Instant::now());
                    let Loading { mut lease, _sched } = loading;
                    lease.runner.ready.store(true, Ordering::Release);
                    lease.ready_at = Instant::now();
                    return Ok(lease);
                }
                Decision::Wait(reason, detail) => {
                    match open {
                        Some((w, _)) => req.trace.wait_detail(w, detail),
                        None => open = Some((req.trace.begin_wait(reason, Instant::now(), detail), reason)),
                    }
                    notified.await;
                }
                Decision::Settle(at) => {
                    let detail = format!("{} releasing the unloaded model's memory", self.device.spec.name);
                    let w = req.trace.begin_wait(WaitReason::MemoryRelease, Instant::now(), detail);
                    tokio::time::sleep_until(at.into()).await;
                    req.trace.end_wait(w, Instant::now());
                }
            }
        }
    }

    /// One decision of the scheduler for a request, under the state lock.
    fn schedule_step(&self, req: &RunnerRequest<'_>, steps: &mut Steps) -> Decision {
        let mut st = self.lock();
        if let Some(runner) = self.attach(&st, &req.key, &req.opts, req.keep_alive) {
            return Decision::Attached(runner);
        }
        // A runner to expire first: this model's, loaded with other options (a reload); at the
        // loaded-model limit, the victim; or the victim when the model would not fit in memory.
        let victim_of = |st: &State| st.runners.values().min_by_key(|r| victim_order(r)).cloned();
        let (victim, wait) = if let Some(r) = st.runners.get(&req.key) {
            let why = r.opts.reload_reason(&req.opts).unwrap_or_else(|| "model is unloading".into());
            (Arc::clone(r), Wait::Reload(why))
        } else if st.runners.len() >= self.cfg.max_loaded_models {
            let Some(v) = victim_of(&st) else { return Decision::Retry };
            let max = self.cfg.max_loaded_models;
            (
                v,
                Wait::Evict(
                    format!("{} models loaded (max {max})", st.runners.len()),
                    LoadCause::EvictedAtLimit { max },
                ),
            )
        } else if let Some(why) = self.does_not_fit(&st, req) {
            let Some(v) = victim_of(&st) else { return Decision::Retry };
            let cause = LoadCause::EvictedForMemory { detail: why.clone() };
            (v, Wait::Evict(why, cause))
        } else {
            // A request that waited for an unload loads once the device has released its
            // memory.
            if let Some(at) = st.vram_released_at.filter(|at| steps.expired.is_some() && *at > Instant::now()) {
                return Decision::Settle(at);
            }
            drop(st);
            return self.start_load(req, steps.unloaded.as_ref());
        };
        let first = steps.expired != Some(victim.id);
        if first {
            steps.expired = Some(victim.id);
            steps.unloaded = Some(match &wait {
                Wait::Reload(why) => {
                    (LoadCause::Reload { changed: why.clone() }, format!("reload for runner options: {why}"))
                }
                Wait::Evict(why, cause) => (cause.clone(), format!("load after evicting {}: {why}", victim.display)),
            });
        }
        let mut vs = victim.lock();
        if vs.refs == 0 {
            drop(vs);
            self.remove_runner(&mut st, &victim);
            return Decision::Retry;
        }
        if first {
            vs.keep_alive = KeepAlive::For(Duration::ZERO);
        }
        let refs = vs.refs;
        drop(vs);
        match wait {
            Wait::Reload(why) => Decision::Wait(
                WaitReason::ReloadForOptions,
                format!("{} busy with {refs} request(s); reload for {why}", victim.display),
            ),
            Wait::Evict(why, _) => Decision::Wait(
                WaitReason::Eviction,
                format!("{why}; evicting {} once its {refs} request(s) finish", victim.display),
            ),
        }
    }

    /// Why a model would not fit, when the device's memory is modelled and other models of
    /// this instance are loaded: the real pre-flight check (server/sched.go 544-567) asks the
    /// predicted memory to fit in 80 % of what is free. With nothing else loaded the model
    /// loads whatever its size (sched.go 295-302: "prefer the best fit").
    fn does_not_fit(&self, st: &State, req: &RunnerRequest<'_>) -> Option<String> {
        let free = self.device.memory_free()?;
        if st.runners.is_empty() || req.opts.num_gpu == Some(0) {
            return None;
        }
        let slots = self.num_parallel(&req.model);
        let need = req.model.predicted_memory(req.opts.num_ctx, slots);
        (need > free / 100 * 80).then(|| {
            format!(
                "{} needs {} (num_ctx {} x {}), more than 80 % of the {} free on {}",
                req.display,
                gib(need),
                req.opts.num_ctx,
                if slots == 1 { "1 parallel slot".to_string() } else { format!("{slots} parallel slots") },
                gib(free),
                self.device.spec.name
            )
        })
    }

    /// Slots of a runner of `model`: `OLLAMA_NUM_PARALLEL`, but 1 for embedding models and for
    /// the architectures the real server forces to 1 (server/sched.go 500-511).
    fn num_parallel(&self, model: &ModelSpec) -> usize {
        if self.forced_one_slot(model).is_some() { 1 } else { self.cfg.num_parallel }
    }

    /// Why a runner of `model` gets one slot although `OLLAMA_NUM_PARALLEL` asks for more: an
    /// embedding model, or an architecture the real server does not run in parallel
    /// (server/sched.go v0.33.0-rc2 500-511; Ollama issue #4165, and #14638's multi-agent
    /// workflow on qwen35moe).
    fn forced_one_slot(&self, model: &ModelSpec) -> Option<String> {
        const ONE_SLOT: [&str; 11] = [
            "mllama",
            "qwen3vl",
            "qwen3vlmoe",
            "qwen35",
            "qwen35moe",
            "qwen3next",
            "lfm2",
            "lfm2moe",
            "nemotron_h",
            "nemotron_h_moe",
            "nemotron_h_omni",
        ];
        if self.cfg.num_parallel <= 1 {
            None
        } else if !model.has("completion") {
            Some("an embedding model".into())
        } else if ONE_SLOT.contains(&model.family.as_str()) {
            Some(format!("the {} architecture", model.family))
        } else {
            None
        }
    }

    /// Unloads a runner: forgets it, frees its memory on the device, and, for a runner that had
    /// loaded, starts the device's release of that memory.
    fn remove_runner(&self, st: &mut State, runner: &Runner) {
        if st.runners.get(&runner.key).is_some_and(|r| r.id == runner.id) {
            st.runners.remove(&runner.key);
        }
        self.device.release_memory((self.index, runner.id));
        let release = latency::scaled_ms(self.device.spec.vram_release_ms, self.time_scale);
        if runner.is_ready() && !release.is_zero() {
            st.vram_released_at = Some(Instant::now() + release);
        }
    }

    /// Creates the runner a request will load, and records the load in its trace, with why
    /// (`unloaded`: the reload or eviction that made room for it).
    fn start_load(&self, req: &RunnerRequest<'_>, unloaded: Option<&(LoadCause, String)>) -> Decision {
        let mut st = self.lock();
        let n = st.loads.entry(req.key.clone()).or_insert(0);
        let cold = *n == 0;
        *n += 1;
        let mut rng = SeedBuilder::new(self.seed).str("load").u64(self.index as u64).str(&req.name_key).u64(*n).rng();
        let load_time = latency::load_time(&req.model.profile, cold, self.time_scale, &mut rng);
        let restart = st.aborted.remove(&req.key);
        let num_parallel = self.num_parallel(&req.model);
        // With the device's memory modelled, the real prediction and what of it fits; without,
        // the catalogue's measured size, all of it on the device.
        let free = self.device.memory_free();
        let memory = match free {
            Some(_) => req.model.predicted_memory(req.opts.num_ctx, num_parallel),
            None => req.model.size_loaded.unwrap_or(req.model.size),
        };
        let vram = match (req.opts.num_gpu, free) {
            _ if self.device.spec.cpu => 0,
            (Some(0), _) => 0,
            (_, Some(free)) => memory.min(free),
            (_, None) => memory,
        };
        let runner = Arc::new(Runner {
            id: self.next_runner.fetch_add(1, Ordering::Relaxed),
            key: req.key.clone(),
            display: req.display.clone(),
            model: Arc::clone(&req.model),
            opts: req.opts.clone(),
            num_parallel,
            forced_one_slot: self.forced_one_slot(&req.model),
            slots: Arc::new(Semaphore::new(num_parallel)),
            load_time,
            ready: AtomicBool::new(false),
            memory,
            vram,
            cache: Mutex::new(PromptCache::new(num_parallel, {
                // llama-server's limit: the byte budget in tokens of this model's KV cache,
                // and never below the whole context (`server_prompt_cache::update`).
                let ram = self.cfg.cache_ram;
                if ram == 0 {
                    0
                } else {
                    let ctx = req.opts.num_ctx.saturating_mul(num_parallel as u64);
                    (ram / req.model.kv_bytes_per_token()).max(ctx) as usize
                }
            })),
            st: Mutex::new(RunnerState {
                refs: 1,
                keep_alive: req.keep_alive.unwrap_or(self.default_keep_alive),
                expires_at: None,
                idle_gen: 0,
                expiry: None,
            }),
        });
        st.runners.insert(req.key.clone(), Arc::clone(&runner));
        self.device.hold_memory((self.index, runner.id), vram);
        drop(st);
        let (cause, reason) = match unloaded {
            Some((cause, why)) => (cause.clone(), why.as_str()),
            None if restart => {
                (LoadCause::Load, "a new start: the previous load was aborted when its client went away")
            }
            None if cold => (LoadCause::Load, "first use (cold start)"),
            None => (LoadCause::Load, "not loaded"),
        };
        let now = Instant::now();
        req.trace.with(|r| {
            r.loads.push(Load {
                start_us: req.trace.us(now),
                duration_us: load_time.as_micros() as u64,
                cold,
                reason: reason.to_string(),
                cause: Some(cause),
            })
        });
        Decision::Load(runner)
    }

    /// A request that found its runner loaded pays the per-call overhead (the real
    /// scheduler's health ping, [`crate::config::Profile::call_overhead_ms`]): it shows in its
    /// `load_duration`. It runs from `from`: the request's arrival when the runner was there
    /// at once, so time the simulator spent before handling the request is not paid again.
    async fn ping(&self, mut lease: Lease, req: &RunnerRequest<'_>, from: Instant) -> Result<Lease, ApiError> {
        let mut rng =
            SeedBuilder::new(self.seed).str("ping").u64(self.index as u64).str(&req.name_key).u64(req.trace.id()).rng();
        let d = latency::call_overhead(&req.model.profile, self.time_scale, &mut rng);
        let until = from + d;
        if until > Instant::now() {
            tokio::time::sleep_until(until.into()).await;
        }
        lease.load_modelled = d;
        lease.ping = d;
        lease.ready_at = until;
        Ok(lease)
    }

    /// Releases a runner reference; starts the keep-alive timer, or unloads when the runner
    /// is expired (keep-alive zero) or its load never finished (the loading client went away).
    fn release(self: &Arc<Self>, runner: &Arc<Runner>) {
        let mut st = self.lock();
        let mut rs = runner.lock();
        rs.refs = rs.refs.saturating_sub(1);
        if rs.refs == 0 {
            let aborted = !runner.is_ready();
            if aborted || rs.keep_alive.is_zero() {
                drop(rs);
                if aborted && st.runners.get(&runner.key).is_some_and(|r| r.id == runner.id) {
                    st.aborted.insert(runner.key.clone());
                    tracing::debug!(target: "sim_ollama", instance = self.index, model = %runner.display, "load aborted: its client went away");
                }
                self.remove_runner(&mut st, runner);
            } else {
                rs.idle_gen += 1;
                match rs.keep_alive {
                    KeepAlive::Forever => rs.expires_at = Some(self.clock.now() + FOREVER),
                    KeepAlive::For(d) => {
                        // A keep-alive too long to add is forever.
                        rs.expires_at = Some(self.clock.now().checked_add(d).unwrap_or(self.clock.now() + FOREVER));
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
            self.remove_runner(&mut st, runner);
            tracing::debug!(target: "sim_ollama", instance = self.index, model = %runner.display, "keep-alive expired: unloaded");
        }
        drop(st);
        self.changed.notify_waiters();
    }

    /// Unloads a model as soon as it is idle (an empty prompt with `keep_alive: 0`), as the
    /// real `expireRunner` (sched.go 1713-1730) does: a model still loading is not loaded yet
    /// and is left alone.
    pub(crate) fn unload(&self, key: &str) {
        let mut st = self.lock();
        if let Some(r) = st.runners.get(key).filter(|r| r.is_ready()).cloned() {
            let mut rs = r.lock();
            rs.keep_alive = KeepAlive::For(Duration::ZERO);
            if rs.refs == 0 {
                drop(rs);
                self.remove_runner(&mut st, &r);
            }
        }
        drop(st);
        self.changed.notify_waiters();
    }

    /// Loaded runners, for `/api/ps` (ready ones) and metrics.
    pub(crate) fn runners(&self) -> Vec<RunnerInfo> {
        let now = self.clock.now();
        let st = self.lock();
        st.runners
            .values()
            .filter(|r| r.is_ready())
            .map(|r| RunnerInfo {
                display: r.display.clone(),
                model: Arc::clone(&r.model),
                num_ctx: r.opts.num_ctx,
                size: r.memory,
                size_vram: r.vram,
                expires_at: r.expires_at(now),
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
    /// Wait until the device has released an unloaded model's memory, then decide again.
    Settle(Instant),
}

/// What one request's scheduling has done so far.
#[derive(Default)]
struct Steps {
    /// The runner it expired (told to unload when idle): the real loop does that once, then
    /// waits for an unload.
    expired: Option<u64>,
    /// Why, as its load will say.
    unloaded: Option<(LoadCause, String)>,
}

/// Why a request waits for a runner to unload.
enum Wait {
    /// Its model is loaded with other options.
    Reload(String),
    /// Another model must make room (why, in words and as data).
    Evict(String, LoadCause),
}

/// Bytes in GiB, for messages.
fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / crate::config::GIB as f64)
}

/// The order in which the real `findRunnerToUnload` picks a victim (smallest first): idle
/// before busy, then the shortest keep-alive (forever last), then the name.
fn victim_order(r: &Runner) -> (bool, Duration, String) {
    let rs = r.lock();
    let keep = match rs.keep_alive {
        KeepAlive::Forever => Duration::MAX,
        KeepAlive::For(d) => d,
    };
    (rs.refs > 0, keep, r.key.clone())
}

/// A load in progress, in the request that started it. Fields drop in order: the lease first
/// (removing a runner whose load did not finish), then the scheduler.
struct Loading {
    lease: Lease,
    _sched: tokio::sync::OwnedMutexGuard<()>,
}

struct PendingGuard<'a>(&'a Instance);

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.pending = st.pending.saturating_sub(1);
    }
}

impl Lease {
    fn new(instance: &Arc<Instance>, runner: Arc<Runner>, load_modelled: Duration) -> Self {
        Lease { instance: Arc::clone(instance), runner, load_modelled, ping: Duration::ZERO, ready_at: Instant::now() }
    }

    /// Takes one of the runner's parallel slots, in FIFO order, and says when, in the modelled
    /// timeline, the request had it: when it had the runner if a slot was free, else now.
    pub(crate) async fn slot(&self, trace: &TraceGuard) -> (OwnedSemaphorePermit, Instant) {
        let sem = Arc::clone(&self.runner.slots);
        if let Ok(p) = Arc::clone(&sem).try_acquire_owned() {
            return (p, self.ready_at);
        }
        let detail =
            format!("{}/{} slots of {} busy", self.runner.busy_slots(), self.runner.num_parallel, self.runner.display);
        let w = trace.begin_wait(WaitReason::SlotBusy, Instant::now(), detail);
        // The semaphore is never closed.
        let p = sem.acquire_owned().await.unwrap_or_else(|_| unreachable!("slot semaphores are never closed"));
        let now = Instant::now();
        trace.end_wait(w, now);
        (p, now)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.instance.release(&self.runner);
    }
}
