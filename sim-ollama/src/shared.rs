//! The state one simulator's instances share, and what `GET /sim/metrics` reads of it.

use crate::clock::Clock;
use crate::config::SimConfig;
use crate::metrics::{DeviceMetrics, InstanceMetrics, Lateness, LoadedMetrics, SimMetrics};
use crate::scheduler::Instance;
use crate::trace::Trace;
use std::sync::Arc;
use std::time::Instant;

/// What every instance of one simulator shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) cfg: SimConfig,
    pub(crate) clock: Clock,
    pub(crate) origin: Instant,
    pub(crate) trace: Arc<Trace>,
    pub(crate) lateness: Arc<Lateness>,
    pub(crate) timer: Arc<crate::timer::Timer>,
    pub(crate) faults: crate::faults::Faults,
    pub(crate) script: crate::script::Script,
    pub(crate) instances: Vec<Arc<Instance>>,
    pub(crate) rt: tokio::runtime::Handle,
    /// The first trace id `GET /sim/judge` judges by default (`POST /sim/mark`); 0: none.
    pub(crate) mark: std::sync::atomic::AtomicU64,
    /// A probe run in progress, if any (`POST /sim/probe`, `SimHandle::begin_probe`).
    pub(crate) probe: crate::probe::Probe,
    /// The first trace id of the probe run since the mark; 0: none.
    pub(crate) probe_mark: std::sync::atomic::AtomicU64,
    /// The confirmation run since the probe run, if any (`POST /sim/confirm`): which run it
    /// repeats and the trace id of its first request.
    pub(crate) confirm: std::sync::Mutex<Option<(crate::judge::ConfirmRun, u64)>>,
    /// What each `/api/generate` `context` answered stands for, for the requests that send
    /// one back.
    pub(crate) contexts: Arc<crate::contexts::Contexts>,
    /// The client process watched for its CPU figures (`SimBuilder::client_pid`), if any.
    pub(crate) client: Option<crate::cpu::TreeWatch>,
}

impl Shared {
    /// Starts a confirmation run of the program judged by `opts` with its probe run (the
    /// program must have finished): a probe run in progress ends, and a repeated probe run
    /// holds answers as the first did (its plan from the run judged). Its requests begin with
    /// the next one. `SimHandle::begin_confirmation` and `POST /sim/confirm` both start it so.
    pub(crate) fn begin_confirmation(
        &self,
        opts: &crate::judge::JudgeOptions,
        run: crate::judge::ConfirmRun,
    ) -> crate::judge::Confirmation {
        self.probe.end();
        let since = self.trace.next_id();
        if run == crate::judge::ConfirmRun::Probe {
            self.probe.begin(crate::judge::probe_plan(&self.trace.snapshot(), opts), self.rt.clone());
        }
        crate::judge::Confirmation { run, since, void: None }
    }

    /// Live state and token lateness, as `GET /sim/metrics` answers.
    pub(crate) fn metrics(&self) -> SimMetrics {
        let instances = self
            .instances
            .iter()
            .map(|i| {
                let runners = i.runners();
                InstanceMetrics {
                    instance: i.index,
                    port: i.port.load(std::sync::atomic::Ordering::Relaxed),
                    device: i.device.index,
                    active: runners.iter().map(|r| r.busy_slots).sum(),
                    waiting_for_slot: runners.iter().map(|r| r.waiting_for_slot).sum(),
                    pending: i.pending(),
                    loaded: runners
                        .iter()
                        .map(|r| LoadedMetrics {
                            model: r.display.clone(),
                            busy_slots: r.busy_slots,
                            num_parallel: r.num_parallel,
                            context_length: r.num_ctx,
                        })
                        .collect(),
                }
            })
            .collect();
        let mut devices: Vec<DeviceMetrics> = Vec::new();
        for i in &self.instances {
            if !devices.iter().any(|d| d.device == i.device.index) {
                devices.push(DeviceMetrics {
                    device: i.device.index,
                    name: i.device.spec.name.clone(),
                    streams: i.device.streams(),
                });
            }
        }
        SimMetrics {
            uptime_s: self.origin.elapsed().as_secs_f64(),
            tasks: self.rt.metrics().num_alive_tasks(),
            requests_in_flight: self.trace.in_flight(),
            timer_entries: self.timer.pending(),
            trace_bytes: self.trace.finished_bytes(),
            instances,
            devices,
            lateness: self.lateness.summary(),
        }
    }
}
