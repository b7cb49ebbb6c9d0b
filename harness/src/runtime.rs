//! Runtime variants: an async runtime, an HTTP stack, and (for controls) a deliberate,
//! named serialization bug. All live in one binary and are chosen by name. Each variant
//! builds its runtime once, outside the timed region, and runs a whole job (all agents) on it.
//!
//! About 600 lines, 20 of them its test: one concept, the variants, each an executor (tokio,
//! LocalSet, async-std, smol, the bridge, the controls) beside the table that names them.

use crate::client::{CallOpts, CallRecord, OneConnection, Stack, bridge};
use crate::workload::{AgentPlan, Call};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one agent did.
#[derive(Debug, Clone)]
pub struct AgentRecord {
    /// Agent name.
    pub name: String,
    /// Instance it used.
    pub instance: usize,
    /// When it started its first call.
    pub start: Instant,
    /// When it finished its last call (or gave up).
    pub end: Instant,
    /// Its calls, in order.
    pub calls: Vec<CallRecord>,
}

/// One run: the agents to run together, and where.
#[derive(Debug, Clone)]
pub struct Job {
    /// The agents.
    pub agents: Vec<AgentPlan>,
    /// Base URL of every instance.
    pub urls: Vec<String>,
    /// Model name.
    pub model: String,
    /// Time scale of local work (the simulator's, so local work shrinks with the calls).
    pub time_scale: f64,
    /// Expected gap between tokens of one stream alone (the blocking control blocks
    /// `BLOCKING_CONTROL_FACTOR` times this long per token).
    pub token_gap: Duration,
    /// A call that takes longer than this is abandoned with an error.
    pub timeout: Duration,
}

/// A runtime variant with its runtime built.
pub trait Executor {
    /// Runs every agent of the job, as the variant does, and returns what each did.
    fn run(&mut self, job: &Job) -> Vec<AgentRecord>;
}

/// A variant's description.
#[derive(Debug, Clone, Copy)]
pub struct VariantInfo {
    /// Name on the command line.
    pub name: &'static str,
    /// The async runtime.
    pub runtime: &'static str,
    /// The HTTP stack.
    pub http: &'static str,
    /// The deliberate bug of a control; `None` for correct variants.
    pub control: Option<Control>,
}

/// A control's deliberate bug: what it does, in words, and which agents it can hold back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Control {
    /// The bug, in words.
    pub bug: &'static str,
    /// The agents it holds back.
    pub reach: Reach,
}

/// Which agents a control's bug holds back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Any two agents (a lock, one permit, a blocked executor, agents awaited in turn).
    AnyTwoAgents,
    /// Only agents that share a server (one connection per server).
    AgentsSharingAServer,
    /// Only agents that do local work between their calls (a blocked executor in that work).
    AgentsWithLocalWork,
}

impl Control {
    /// Why the bug cannot act on these agents, if it cannot: then a parallel verdict is the
    /// right one, not a control that escaped (one connection per server, with one agent per
    /// server, is a correct client).
    pub fn idle(&self, agents: &[AgentPlan]) -> Option<&'static str> {
        let mut per_instance = std::collections::BTreeMap::<usize, usize>::new();
        for a in agents {
            *per_instance.entry(a.instance).or_default() += 1;
        }
        let shared = per_instance.values().any(|n| *n >= 2);
        let calls = |a: &AgentPlan| a.calls.len();
        let works = agents.iter().any(|a| {
            a.calls
                .iter()
                .enumerate()
                .any(|(i, c)| c.tool_work_ms.is_some_and(|w| w > 0.0) || (i + 1 < calls(a) && c.local_work_ms > 0.0))
        });
        match self.reach {
            Reach::AnyTwoAgents => None,
            Reach::AgentsSharingAServer => {
                (!shared).then_some("one agent per server, so one connection per server holds nothing back")
            }
            Reach::AgentsWithLocalWork => (!works).then_some(
                "the agents do no local work between their calls, so blocking the executor in it holds nothing back",
            ),
        }
    }

    /// Why the bug cannot cost enough to judge, given each agent's solo wall time (`solo`:
    /// seconds, its calls and local work alone) and the wall seconds of a modelled ms of local
    /// work (`local_scale` / 1000): a blocked executor in local work serializes the agents'
    /// local work, at most every agent's but the longest; where that is under a fifth of what
    /// running the agents together saves (every agent's solo time but the longest), the run
    /// stays in the parallel band whatever the bug does.
    pub fn idle_by_cost(
        &self,
        agents: &[AgentPlan],
        solo: &std::collections::BTreeMap<String, f64>,
        local_scale: f64,
    ) -> Option<&'static str> {
        if self.reach != Reach::AgentsWithLocalWork {
            return None;
        }
        let local: Vec<f64> = agents
            .iter()
            .map(|a| {
                let n = a.calls.len();
                let ms: f64 = a
                    .calls
                    .iter()
                    .enumerate()
                    .map(|(i, c)| c.tool_work_ms.unwrap_or(0.0) + if i + 1 < n { c.local_work_ms } else { 0.0 })
                    .sum();
                ms / 1000.0 * local_scale
            })
            .collect();
        let walls: Vec<f64> = agents.iter().filter_map(|a| solo.get(&a.name).copied()).collect();
        if walls.len() != agents.len() {
            return None;
        }
        let beyond_longest = |v: &[f64]| v.iter().sum::<f64>() - v.iter().copied().fold(0.0, f64::max);
        (beyond_longest(&local) < 0.2 * beyond_longest(&walls)).then_some(
            "the agents' local work is short beside their calls: blocking the executor in it costs under a fifth of what running them together saves",
        )
    }
}

/// Every variant: the study's five runtimes (each non-tokio one with its ecosystem's HTTP
/// stack and with the study's bridge), then the controls.
pub const VARIANTS: &[VariantInfo] = &[
    VariantInfo {
        name: "tokio-default",
        runtime: "tokio multi-thread, one spawned task per agent",
        http: "reqwest",
        control: None,
    },
    VariantInfo {
        name: "tokio-localset",
        runtime: "tokio current-thread, LocalSet, spawn_local (!Send client)",
        http: "reqwest",
        control: None,
    },
    VariantInfo { name: "async-std", runtime: "async-std tasks", http: "reqwest inside async-compat", control: None },
    VariantInfo {
        name: "async-std-bridge",
        runtime: "async-std tasks",
        http: "reqwest spawned on a global tokio runtime (the study's bridge)",
        control: None,
    },
    VariantInfo {
        name: "smol",
        runtime: "smol tasks",
        http: "hyper over smol's TcpStream (smol-hyper)",
        control: None,
    },
    VariantInfo {
        name: "smol-bridge",
        runtime: "smol tasks",
        http: "reqwest spawned on a global tokio runtime (the study's bridge)",
        control: None,
    },
    VariantInfo {
        name: "smol-1kb",
        runtime: "smol tasks",
        http: "hyper over smol's TcpStream, read 1 KB at a time",
        control: None,
    },
    VariantInfo {
        name: "smol-1kb-bridge",
        runtime: "smol tasks",
        http: "the study's bridge, bytes held until 1 KB arrived (BytesStream1KB)",
        control: None,
    },
    VariantInfo {
        name: "ctl-mutex-semaphore",
        runtime: "async-std tasks",
        http: "the study's bridge",
        control: Some(Control {
            bug: "an async Mutex used as a semaphore around each agent (the study's async-std bug)",
            reach: Reach::AnyTwoAgents,
        }),
    },
    VariantInfo {
        name: "ctl-blocking-sleep",
        runtime: "tokio current-thread, LocalSet",
        http: "reqwest",
        control: Some(Control {
            bug: "std::thread::sleep for each token (twice the token time) inside async code on a single-threaded executor",
            reach: Reach::AnyTwoAgents,
        }),
    },
    VariantInfo {
        name: "ctl-blocking-tool",
        runtime: "tokio current-thread, LocalSet",
        http: "reqwest",
        control: Some(Control {
            bug: "std::thread::sleep for each agent's local work between its calls, inside async code on a single-threaded executor (a blocking tool)",
            reach: Reach::AgentsWithLocalWork,
        }),
    },
    VariantInfo {
        name: "ctl-block-on",
        runtime: "tokio current-thread, LocalSet",
        http: "the study's bridge",
        control: Some(Control { bug: "futures::executor::block_on inside a task", reach: Reach::AnyTwoAgents }),
    },
    VariantInfo {
        name: "ctl-one-permit",
        runtime: "tokio multi-thread",
        http: "reqwest",
        control: Some(Control { bug: "a semaphore with one permit around each call", reach: Reach::AnyTwoAgents }),
    },
    VariantInfo {
        name: "ctl-one-connection",
        runtime: "tokio multi-thread",
        http: "one HTTP/1.1 connection per instance shared by all agents",
        control: Some(Control {
            bug: "one connection per server for all the agents it serves (a pool of one)",
            reach: Reach::AgentsSharingAServer,
        }),
    },
    VariantInfo {
        name: "ctl-sequential",
        runtime: "tokio multi-thread",
        http: "reqwest",
        control: Some(Control { bug: "agents awaited one after the other", reach: Reach::AnyTwoAgents }),
    },
];

/// Looks a variant up.
pub(crate) fn info(name: &str) -> Option<&'static VariantInfo> {
    VARIANTS.iter().find(|v| v.name == name)
}

/// The request body of a call.
pub fn body(call: &Call, model: &str) -> Vec<u8> {
    let mut options = call.options.clone();
    if call.tool_work_ms.is_some() {
        // The tool-calling turn: its length is the call's own (no num_predict that could cut
        // it); `tokens` is the length of the answer after the tool result.
        let v = serde_json::json!({"model": model, "messages": [{"role": "user", "content": call.prompt}],
            "tools": [crate::workload::tool()], "stream": true, "options": options});
        return serde_json::to_vec(&v).unwrap_or_default();
    }
    options.insert("num_predict".into(), serde_json::Value::from(call.tokens));
    // The simulator's natural answer length (real Ollama ignores unknown options), so every
    // run has the scenario's lengths.
    options.insert("sim_tokens".into(), serde_json::Value::from(call.tokens));
    let v = if call.endpoint == "/api/chat" {
        serde_json::json!({"model": model, "messages": [{"role": "user", "content": call.prompt}], "stream": true, "options": options})
    } else {
        serde_json::json!({"model": model, "prompt": call.prompt, "stream": true, "options": options})
    };
    serde_json::to_vec(&v).unwrap_or_default()
}

/// A multi-turn agent's call: its conversation so far (`messages`: the system prompt, earlier
/// prompts and answers) and the call's prompt.
pub(crate) fn history_body(call: &Call, model: &str, messages: &[serde_json::Value]) -> Vec<u8> {
    let mut options = call.options.clone();
    options.insert("num_predict".into(), serde_json::Value::from(call.tokens));
    options.insert("sim_tokens".into(), serde_json::Value::from(call.tokens));
    let mut all = messages.to_vec();
    all.push(serde_json::json!({"role": "user", "content": call.prompt}));
    let v = serde_json::json!({"model": model, "messages": all, "stream": true, "options": options});
    serde_json::to_vec(&v).unwrap_or_default()
}

/// Numbers the conversations of multi-turn agents, so each run's is new to the server.
static CONVERSATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The request after a tool call: the history (the user's message, the model's calls, one
/// result per call) with the tool still offered, answered in `call.tokens` tokens.
pub(crate) fn tool_result_body(call: &Call, model: &str, tool_calls: &serde_json::Value) -> Vec<u8> {
    let mut options = call.options.clone();
    options.insert("num_predict".into(), serde_json::Value::from(call.tokens));
    options.insert("sim_tokens".into(), serde_json::Value::from(call.tokens));
    let mut messages = vec![
        serde_json::json!({"role": "user", "content": call.prompt}),
        serde_json::json!({"role": "assistant", "content": "", "tool_calls": tool_calls}),
    ];
    for c in tool_calls.as_array().into_iter().flatten() {
        let name = c.pointer("/function/name").cloned().unwrap_or_default();
        messages.push(serde_json::json!({"role": "tool", "tool_name": name, "content": "3 documents found: runbook.md, deploy.md, oncall.md"}));
    }
    let v = serde_json::json!({"model": model, "messages": messages, "tools": [crate::workload::tool()], "stream": true, "options": options});
    serde_json::to_vec(&v).unwrap_or_default()
}

/// How an agent waits for its local work.
#[derive(Debug, Clone, Copy)]
enum Sleeper {
    /// tokio's timer (tokio variants, and async-std inside async-compat).
    Tokio,
    /// async-io's timer (smol and async-std without tokio).
    AsyncIo,
    /// `std::thread::sleep`: the bug of `ctl-blocking-tool`, holding the executor.
    Blocking,
}

impl Sleeper {
    async fn sleep(self, d: Duration) {
        if d.is_zero() {
            return;
        }
        match self {
            Sleeper::Tokio => tokio::time::sleep(d).await,
            Sleeper::AsyncIo => {
                async_io::Timer::after(d).await;
            }
            Sleeper::Blocking => std::thread::sleep(d),
        }
    }
}

/// How each call is made.
#[derive(Debug, Clone)]
enum CallMode {
    /// Await the stack's call.
    Await,
    /// Await it while holding the one permit.
    OnePermit(Arc<tokio::sync::Semaphore>),
    /// Block the executor thread on the (bridged) call.
    BlockOn,
}

/// How long `ctl-blocking-sleep` blocks its executor per token, in solo token gaps.
///
/// At 1 (a blocking call as long as the model's token time) the single-threaded client reads
/// exactly one stream's worth of tokens per unit of time: where the deployment itself
/// serializes (one slot, two instances sharing a device: one stream's worth of tokens in all)
/// the client keeps up only just, every scheduling hiccup puts it behind for good, and whether
/// the judge blames the client's lag or the server's slots was decided by the machine's load
/// (CI saw both). At 2 the blocked executor is the bottleneck on every deployment with a 2x
/// margin: the control is caught for what it is, the same way, on a busy machine as on an idle
/// one.
pub(crate) const BLOCKING_CONTROL_FACTOR: u32 = 2;

fn call_opts(agent: &AgentPlan, job: &Job, per_token_block: bool) -> CallOpts {
    CallOpts {
        per_token_block: per_token_block.then_some(job.token_gap * BLOCKING_CONTROL_FACTOR),
        agent: agent.name.clone(),
        timeout: job.timeout,
    }
}

/// One agent: its calls in order, local work between them.
async fn run_agent(
    stack: &Stack,
    sleeper: Sleeper,
    mode: &CallMode,
    agent: &AgentPlan,
    job: &Job,
    per_token_block: bool,
) -> AgentRecord {
    let start = Instant::now();
    let opts = call_opts(agent, job, per_token_block);
    let url_base = job.urls.get(agent.instance).cloned().unwrap_or_else(|| job.urls[0].clone());
    let mut calls = Vec::with_capacity(agent.calls.len());
    let mut history = Vec::new();
    if agent.history {
        let n = CONVERSATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let system = agent.system.as_deref().unwrap_or("You are a helpful agent.");
        history.push(serde_json::json!({"role": "system", "content": format!("Conversation {n}.\n{system}")}));
    }
    let mut local_before = Duration::ZERO;
    for (i, c) in agent.calls.iter().enumerate() {
        let url = format!("{url_base}{}", c.endpoint);
        let model = c.model.as_deref().unwrap_or(&job.model);
        let b = if agent.history { history_body(c, model, &history) } else { body(c, model) };
        let mut rec = call_in_mode(stack, mode, &url, b, &opts).await;
        rec.local_before = local_before;
        if c.tool_work_ms.is_none() {
            rec.expected_tokens = Some(u64::from(c.tokens));
        }
        if agent.history {
            history.push(serde_json::json!({"role": "user", "content": c.prompt}));
            history.push(serde_json::json!({"role": "assistant", "content": rec.content}));
        }
        let failed = rec.error.is_some();
        let tool_calls = rec.tool_calls.clone();
        calls.push(rec);
        if failed {
            break;
        }
        // A tool round trip: run the tool, send its result, read the answer.
        if let (Some(work), Some(tc)) = (c.tool_work_ms, tool_calls) {
            let tool = Duration::from_secs_f64(work / 1000.0 * job.time_scale);
            sleeper.sleep(tool).await;
            let mut rec = call_in_mode(stack, mode, &url, tool_result_body(c, model, &tc), &opts).await;
            rec.expected_tokens = Some(u64::from(c.tokens));
            rec.local_before = tool;
            let failed = rec.error.is_some();
            calls.push(rec);
            if failed {
                break;
            }
        }
        local_before = Duration::from_secs_f64(c.local_work_ms / 1000.0 * job.time_scale);
        if i + 1 < agent.calls.len() {
            sleeper.sleep(local_before).await;
        }
    }
    AgentRecord { name: agent.name.clone(), instance: agent.instance, start, end: Instant::now(), calls }
}

/// Makes one call the way the variant makes calls.
async fn call_in_mode(stack: &Stack, mode: &CallMode, url: &str, b: Vec<u8>, opts: &CallOpts) -> CallRecord {
    match mode {
        CallMode::Await => stack.call(url, b, opts).await,
        CallMode::OnePermit(sem) => {
            let _permit = sem.acquire().await;
            stack.call(url, b, opts).await
        }
        CallMode::BlockOn => {
            let (s, o, u) = (stack.clone(), opts.clone(), url.to_string());
            futures::executor::block_on(bridge(async move { s.call(&u, b, &o).await }))
        }
    }
}

/// Waits for tokio agent tasks, in order. A panicking agent is a bug in the harness.
async fn join_tokio(handles: Vec<tokio::task::JoinHandle<AgentRecord>>) -> Vec<AgentRecord> {
    futures::future::join_all(handles)
        .await
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("an agent task panicked: {e}")))
        .collect()
}

/// Builds a variant's runtime.
pub fn build(name: &str) -> Result<Box<dyn Executor>, String> {
    let rt_multi = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))
    };
    let rt_current = || {
        tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| format!("tokio runtime: {e}"))
    };
    let reqwest = || reqwest::Client::builder().build().map_err(|e| format!("reqwest client: {e}"));
    Ok(match name {
        "tokio-default" => {
            Box::new(TokioMulti { rt: rt_multi()?, stack: Stack::Reqwest(reqwest()?), mode: MultiMode::Spawn })
        }
        "ctl-one-permit" => {
            Box::new(TokioMulti { rt: rt_multi()?, stack: Stack::Reqwest(reqwest()?), mode: MultiMode::OnePermit })
        }
        "ctl-sequential" => {
            Box::new(TokioMulti { rt: rt_multi()?, stack: Stack::Reqwest(reqwest()?), mode: MultiMode::Sequential })
        }
        "ctl-one-connection" => Box::new(TokioMulti {
            rt: rt_multi()?,
            stack: Stack::OneConnection(Arc::new(OneConnection::default())),
            mode: MultiMode::Spawn,
        }),
        "tokio-localset" => {
            Box::new(TokioLocal { rt: rt_current()?, stack: Stack::Reqwest(reqwest()?), mode: LocalMode::Spawn })
        }
        "ctl-blocking-sleep" => Box::new(TokioLocal {
            rt: rt_current()?,
            stack: Stack::Reqwest(reqwest()?),
            mode: LocalMode::BlockingSleep,
        }),
        "ctl-blocking-tool" => Box::new(TokioLocal {
            rt: rt_current()?,
            stack: Stack::Reqwest(reqwest()?),
            mode: LocalMode::BlockingLocalWork,
        }),
        "ctl-block-on" => Box::new(TokioLocal {
            rt: rt_current()?,
            stack: Stack::Bridge { client: reqwest()?, accumulate: None },
            mode: LocalMode::BlockOn,
        }),
        "async-std" => Box::new(AsyncStd { stack: Stack::Reqwest(reqwest()?), compat: true, mutex: false }),
        "async-std-bridge" => Box::new(AsyncStd {
            stack: Stack::Bridge { client: reqwest()?, accumulate: None },
            compat: false,
            mutex: false,
        }),
        "ctl-mutex-semaphore" => Box::new(AsyncStd {
            stack: Stack::Bridge { client: reqwest()?, accumulate: None },
            compat: false,
            mutex: true,
        }),
        "smol" => Box::new(Smol { stack: Stack::HyperSmol { read_cap: None } }),
        "smol-1kb" => Box::new(Smol { stack: Stack::HyperSmol { read_cap: Some(1024) } }),
        "smol-bridge" => Box::new(Smol { stack: Stack::Bridge { client: reqwest()?, accumulate: None } }),
        "smol-1kb-bridge" => Box::new(Smol { stack: Stack::Bridge { client: reqwest()?, accumulate: Some(1024) } }),
        other => {
            let names: Vec<&str> = VARIANTS.iter().map(|v| v.name).collect();
            return Err(format!("unknown runtime variant {other:?}; variants: {}", names.join(", ")));
        }
    })
}

enum MultiMode {
    Spawn,
    OnePermit,
    Sequential,
}

struct TokioMulti {
    rt: tokio::runtime::Runtime,
    stack: Stack,
    mode: MultiMode,
}

impl Executor for TokioMulti {
    fn run(&mut self, job: &Job) -> Vec<AgentRecord> {
        let job = Arc::new(job.clone());
        let stack = self.stack.clone();
        let mode = match self.mode {
            MultiMode::OnePermit => CallMode::OnePermit(Arc::new(tokio::sync::Semaphore::new(1))),
            _ => CallMode::Await,
        };
        let sequential = matches!(self.mode, MultiMode::Sequential);
        self.rt.block_on(async move {
            if sequential {
                let mut out = Vec::new();
                for a in &job.agents {
                    out.push(run_agent(&stack, Sleeper::Tokio, &mode, a, &job, false).await);
                }
                return out;
            }
            let handles: Vec<_> = (0..job.agents.len())
                .map(|i| {
                    let (stack, job, mode) = (stack.clone(), Arc::clone(&job), mode.clone());
                    tokio::spawn(
                        async move { run_agent(&stack, Sleeper::Tokio, &mode, &job.agents[i], &job, false).await },
                    )
                })
                .collect();
            join_tokio(handles).await
        })
    }
}

enum LocalMode {
    Spawn,
    BlockingSleep,
    BlockingLocalWork,
    BlockOn,
}

struct TokioLocal {
    rt: tokio::runtime::Runtime,
    stack: Stack,
    mode: LocalMode,
}

impl Executor for TokioLocal {
    fn run(&mut self, job: &Job) -> Vec<AgentRecord> {
        // An Rc'd client and job: the agent futures are !Send, as LocalSet allows.
        let stack = Rc::new(self.stack.clone());
        let job = Rc::new(job.clone());
        let (mode, block) = match self.mode {
            LocalMode::Spawn | LocalMode::BlockingLocalWork => (CallMode::Await, false),
            LocalMode::BlockingSleep => (CallMode::Await, true),
            LocalMode::BlockOn => (CallMode::BlockOn, false),
        };
        let sleeper =
            if matches!(self.mode, LocalMode::BlockingLocalWork) { Sleeper::Blocking } else { Sleeper::Tokio };
        let local = tokio::task::LocalSet::new();
        local.block_on(&self.rt, async move {
            let handles: Vec<_> = (0..job.agents.len())
                .map(|i| {
                    let (stack, job, mode) = (Rc::clone(&stack), Rc::clone(&job), mode.clone());
                    tokio::task::spawn_local(async move {
                        run_agent(&stack, sleeper, &mode, &job.agents[i], &job, block).await
                    })
                })
                .collect();
            join_tokio(handles).await
        })
    }
}

struct AsyncStd {
    stack: Stack,
    /// Wrap each agent in async-compat (the ecosystem's way to run tokio-based clients).
    compat: bool,
    /// The study's bug: an async Mutex held for each agent's whole run.
    mutex: bool,
}

impl Executor for AsyncStd {
    fn run(&mut self, job: &Job) -> Vec<AgentRecord> {
        let job = Arc::new(job.clone());
        let lock = Arc::new(async_std::sync::Mutex::new(()));
        let (compat, mutex) = (self.compat, self.mutex);
        async_std::task::block_on(async {
            let handles: Vec<_> = (0..job.agents.len())
                .map(|i| {
                    let (stack, job, lock) = (self.stack.clone(), Arc::clone(&job), Arc::clone(&lock));
                    async_std::task::spawn(async move {
                        let _guard = if mutex { Some(lock.lock().await) } else { None };
                        if compat {
                            async_compat::Compat::new(run_agent(
                                &stack,
                                Sleeper::Tokio,
                                &CallMode::Await,
                                &job.agents[i],
                                &job,
                                false,
                            ))
                            .await
                        } else {
                            run_agent(&stack, Sleeper::AsyncIo, &CallMode::Await, &job.agents[i], &job, false).await
                        }
                    })
                })
                .collect();
            futures::future::join_all(handles).await
        })
    }
}

struct Smol {
    stack: Stack,
}

impl Executor for Smol {
    fn run(&mut self, job: &Job) -> Vec<AgentRecord> {
        let job = Arc::new(job.clone());
        smol::block_on(async {
            let handles: Vec<_> = (0..job.agents.len())
                .map(|i| {
                    let (stack, job) = (self.stack.clone(), Arc::clone(&job));
                    smol::spawn(async move {
                        run_agent(&stack, Sleeper::AsyncIo, &CallMode::Await, &job.agents[i], &job, false).await
                    })
                })
                .collect();
            futures::future::join_all(handles).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_connection_per_server_is_idle_only_where_no_server_has_two_agents() {
        let idle = |name: &str, agents: &[AgentPlan]| info(name).and_then(|v| v.control).and_then(|c| c.idle(agents));
        let scenario =
            |name: &str| crate::workload::builtin().into_iter().find(|s| s.name == name).expect("a built-in scenario");
        // Two agents on two instances: nothing for one connection per server to hold back.
        let dual = scenario("deploy_dual_two_devices");
        let agents = dual.plan(dual.instances());
        assert!(idle("ctl-one-connection", &agents).is_some());
        // The same two agents against one server: they share its one connection.
        assert_eq!(idle("ctl-one-connection", &dual.plan(1)), None);
        // Four agents on one instance; and the controls that hold back any two agents.
        let four = scenario("scale_4");
        assert_eq!(idle("ctl-one-connection", &four.plan(four.instances())), None);
        for v in VARIANTS.iter().filter(|v| v.control.is_some_and(|c| c.reach == Reach::AnyTwoAgents)) {
            assert_eq!(idle(v.name, &agents), None, "{}", v.name);
        }
    }
}
