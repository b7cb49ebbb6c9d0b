//! One request's life: plan its text and schedule (pure functions of the seed), get a
//! runner and a slot from the instance's scheduler, join the device, then emit tokens at
//! their deadlines. Streaming and non-streaming handlers, native and OpenAI, all drive a
//! [`Running`]. Just over 600 lines: the life is one sequence of steps (runner, slot, the
//! runner's refusals, context, device, tokens) whose order is the real server's, kept in one
//! place to be read in that order.

use crate::cache::{Choice, Claim, Tok};
use crate::clock::{Clock, rfc3339, unix_seconds};
use crate::error::ApiError;
use crate::keepalive::KeepAlive;
use crate::latency::{self, Timing};
use crate::metrics::Lateness;
use crate::pacer::{Pacer, Step};
use crate::request::Options;
use crate::scheduler::{Instance, Lease, RunnerOptions, RunnerRequest};
use crate::seed::SeedBuilder;
use crate::store::Installed;
use crate::tokens::{self, DoneReason, OutputFormat, TextPlan};
use crate::trace::{CacheUse, Outcome, TraceGuard};
use crate::wire::Metrics;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::OwnedSemaphorePermit;

/// What decides a response's content: everything but the timing.
#[derive(Debug)]
pub(crate) struct PlanInput<'a> {
    pub(crate) sim_seed: u64,
    pub(crate) time_scale: f64,
    pub(crate) model: &'a Installed,
    /// The prompt as the model would see it (system, messages, prompt), for the seed and
    /// the token count.
    pub(crate) rendered: &'a str,
    /// Whether the chat template wraps the prompt (not in raw mode).
    pub(crate) templated: bool,
    pub(crate) images: usize,
    pub(crate) options: &'a Options,
    /// The sampling temperature when the request sets none (0.8 native, 1.0 OpenAI).
    pub(crate) default_temperature: f64,
    pub(crate) format: OutputFormat,
    /// Tools the request offers (chat endpoints).
    pub(crate) tools: &'a [crate::tools::ToolDef],
    /// Role of the last message (chat endpoints): a user's turn may call a tool.
    pub(crate) last_role: Option<&'a str>,
    /// A scripted answer (text or tool calls) replaces the generated one.
    pub(crate) scripted: Option<crate::script::Reply>,
    /// How much the model reasons before answering ([`crate::request::Think::factor`]; 0: not).
    pub(crate) think: f64,
    /// The runner's context per slot: generation is bounded at ten of them.
    pub(crate) num_ctx: u64,
    /// The slot the answer is decoded in: without context shift it stops when that is full.
    pub(crate) slot: crate::context::SlotContext,
    /// A probe run's answer under a hand-off test: its words marked (prose only), the same
    /// pieces and schedule ([`tokens::marked_text`]).
    pub(crate) marked: bool,
}

/// A request's content and intended schedule.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) prompt_tokens: u32,
    pub(crate) text: TextPlan,
    pub(crate) timing: Timing,
    /// Seed of everything else random in the response (OpenAI ids).
    pub(crate) seed: u64,
}

/// Tokens an image costs in the prompt.
const IMAGE_TOKENS: u32 = 256;

impl Plan {
    /// Plans a response. `options.seed` (other than -1) replaces the server seed.
    pub(crate) fn new(input: &PlanInput<'_>) -> Plan {
        let base = match input.options.seed {
            Some(s) if s != -1 => s as u64,
            _ => input.sim_seed,
        };
        let o = input.options;
        let key = input.model.name.key();
        let content = SeedBuilder::new(base)
            .str(&key)
            .str(input.rendered)
            .u64(input.images as u64)
            .u64(!matches!(input.format, OutputFormat::Prose) as u64)
            .u64(o.temperature.unwrap_or(input.default_temperature).to_bits())
            .u64(o.top_k.unwrap_or(40) as u64)
            .u64(o.top_p.unwrap_or(0.9).to_bits());
        // A schema and the tools offered seed the answer too; without them the seed is what it
        // was before they existed, so recorded answers stay byte for byte the same.
        let mut content = content;
        if let OutputFormat::Schema(v) = &input.format {
            content = content.str(&v.to_string());
        }
        for t in input.tools {
            content = content.str(&t.name).str(&t.parameters.to_string());
        }
        let profile = &input.model.spec.profile;
        let tok = profile.tokenizer();
        let mut text_rng = content.str("text").rng();
        // Generation is bounded by the context, as the real server bounds it
        // ([`crate::context::generation_cap`]).
        let cap = crate::context::generation_cap(input.num_ctx);
        // One more than the cap is enough to know the answer would run past it.
        let natural = match o.sim_tokens {
            Some(n) if n > 0 => (n as usize).min(cap + 1),
            _ => latency::output_len(profile, &mut text_rng),
        };
        // `boundedNumPredict`: unset, negative or past the cap, it is the cap; and without
        // context shift the answer ends where the slot is full (llama-server's
        // `n_tokens + 1 >= n_ctx`: a prompt that does not leave a token is refused before).
        let prompt_tokens = prompt_tokens(input.model, input.rendered, input.templated, input.images);
        let room = input.slot.room(prompt_tokens as usize).map_or(usize::MAX, |r| r.max(1));
        let num_predict = Some(o.num_predict.filter(|n| *n > 0).map_or(cap, |n| (n as usize).min(cap)).min(room));
        let policy = crate::tools::Policy {
            probability: o.sim_tool_call_probability.unwrap_or(1.0),
            max_calls: o.sim_tool_calls.map_or(1, |n| n.clamp(0, 64) as usize),
        };
        let mut tools_rng = content.str("tools").rng();
        let text = match &input.scripted {
            Some(crate::script::Reply::Text(t)) => tokens::scripted_text(tok, t, num_predict),
            Some(crate::script::Reply::ToolCalls(scripted)) => {
                let calls = crate::tools::scripted(scripted, &mut tools_rng);
                if input.last_role.is_some() {
                    tokens::generate(&mut text_rng, tok, natural, num_predict, &[], &OutputFormat::Prose, calls)
                } else {
                    // No tool parser outside chat: the calls' text is the answer.
                    let text: String = calls.iter().map(|c| c.raw_text()).collect();
                    tokens::scripted_text(tok, &text, num_predict)
                }
            }
            _ => {
                let calls = crate::tools::plan(input.tools, input.last_role, policy, &mut tools_rng);
                tokens::generate(&mut text_rng, tok, natural, num_predict, &o.stop, &input.format, calls)
            }
        };
        let text = if input.marked && matches!(input.format, OutputFormat::Prose) && input.scripted.is_none() {
            tokens::marked_text(text)
        } else {
            text
        };
        // Reasoning first, from its own seed stream (answers without it are unchanged).
        let text = match (&profile.thinking_tokens, input.think > 0.0) {
            (Some(spec), true) => {
                let mut rng = content.str("thinking").rng();
                let n = (spec.sampler().sample(&mut rng) * input.think).round().clamp(1.0, cap as f64) as usize;
                tokens::think_first(&mut rng, tok, n, num_predict, text)
            }
            _ => text,
        };
        let timing = Timing::new(profile, prompt_tokens, input.time_scale, content.str("timing").rng());
        Plan { prompt_tokens, text, timing, seed: content.str("misc").finish() }
    }
}

/// Tokens of a prompt as the model sees it: the text, the chat template's own tokens (not in
/// raw mode), and each image's; at least 1.
pub(crate) fn prompt_tokens(model: &Installed, rendered: &str, templated: bool, images: usize) -> u32 {
    let template = if templated { model.spec.profile.template_tokens } else { 0 };
    (model.spec.profile.tokenizer().count(rendered) + template + IMAGE_TOKENS * images as u32).max(1)
}

/// Everything a generation needs from the request besides its plan.
#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) instance: Arc<Instance>,
    pub(crate) model: Installed,
    pub(crate) opts: RunnerOptions,
    pub(crate) keep_alive: Option<KeepAlive>,
    pub(crate) plan: Plan,
    pub(crate) clock: Clock,
    pub(crate) lateness: Arc<Lateness>,
    pub(crate) timer: Arc<crate::timer::Timer>,
    pub(crate) arrival: Instant,
    /// The prompt's tokens, for the slot's prompt cache.
    pub(crate) prompt: Vec<Tok>,
    /// What the prompt template puts between the prompt and the answer when the next turn
    /// resends both (`"assistant: "` in chat), so a slot holds what the next turn will send.
    pub(crate) reply_prefix: &'static str,
    /// Modelled time of copying one token's KV state between device and host memory.
    pub(crate) copy_per_token: Duration,
    /// `truncate` (default true), and no images: a prompt longer than its slot is cut rather
    /// than refused ([`crate::context::fit_prompt`]).
    pub(crate) truncate: bool,
    /// Its place in a probe run, if one is in progress ([`crate::probe`]).
    pub(crate) probe: Option<crate::probe::Ticket>,
    /// Log probabilities asked for, with this many alternatives per token ([`crate::logprob`]).
    pub(crate) logprobs: Option<usize>,
    /// Images sent with the prompt: refused by the runner of a model without vision.
    pub(crate) images: usize,
    /// Sampling parameters the runner refuses once it has the request ([`Options::runner_refusal`]).
    pub(crate) refusal: Option<ApiError>,
}

/// What llama-server answers, and Ollama passes on as its error text with status 400, when a
/// request carries images for a model without a multimodal projector: Ollama does not check the
/// vision capability itself (server/routes.go v0.33.0-rc2 448-467 and 2610-2635 ask only for
/// completion, insert, tools and thinking), so the request loads the model, takes a slot and
/// is refused by the runner (captured from the real CPU build: `/api/chat`, `/api/generate`
/// and `/v1/chat/completions`, streamed or not).
pub(crate) fn multimodal_refusal() -> ApiError {
    ApiError::llama_server_refusal("Multimodal data provided, but model does not support multimodal requests.")
}

/// The trace's record of a cache claim.
fn cache_use(c: &Claim) -> CacheUse {
    CacheUse {
        slot: c.slot,
        chosen_by: match c.choice {
            Choice::Similarity => "similarity",
            Choice::LeastRecentlyUsed => "least_recently_used",
        }
        .to_string(),
        cached_tokens: c.cached as u64,
        evaluated_tokens: c.evaluated as u64,
        restored_tokens: c.restored as u64,
        saved_tokens: c.saved as u64,
        lost_to: c.lost_to.as_ref().map(|l| l.0.clone()),
        lost_tokens: c.lost_to.as_ref().map_or(0, |l| l.1 as u64),
    }
}

/// The prompt's tokens as the prompt cache compares them: the chat template's own tokens
/// first (not in raw mode), the text's, then each image's (never shared).
pub(crate) fn prompt_hashes(model: &Installed, rendered: &str, templated: bool, images: usize) -> Vec<Tok> {
    let template = if templated { model.spec.profile.template_tokens } else { 0 };
    let mut out = Vec::with_capacity(template as usize + rendered.len() / 4);
    out.extend((0..u64::from(template)).map(|i| crate::seed::mix(i ^ 0x7465_6d70_6c61_7465)));
    model.spec.profile.tokenizer().hashes(rendered, &mut out);
    let salt = crate::seed::fnv1a(rendered.as_bytes());
    out.extend((0..u64::from(IMAGE_TOKENS) * images as u64).map(|i| crate::seed::mix(salt ^ i)));
    if out.is_empty() {
        out.push(0);
    }
    out
}

/// A token that has just been emitted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Emitted {
    /// 0-based token index.
    pub(crate) index: usize,
    /// When it was emitted.
    pub(crate) at: Instant,
}

/// A generation that has its runner and slot and has evaluated its prompt.
#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) prompt_tokens: u32,
    pub(crate) text: TextPlan,
    overhead: Duration,
    prompt_work: Duration,
    clock: Clock,
    trace: TraceGuard,
    pacer: Pacer,
    /// The slot's place in its runner's prompt cache, released (with the generated tokens)
    /// when the generation is dropped, before the permit.
    cache_slot: CacheSlot,
    reply_prefix: &'static str,
    /// The model's tokenizer: what the slot holds of the answer, for the next turn's cache.
    tokenizer: tokens::Tokenizer,
    // Held for the life of the generation; dropped (freeing the slot, then the runner) when
    // the client goes away or the response ends. Field order is drop order.
    _slot: OwnedSemaphorePermit,
    lease: Lease,
    arrival: Instant,
    obtained: Instant,
    overhead_done: Instant,
    prompt_done: Instant,
    last_at: Instant,
    last_intended: Duration,
    emitted: usize,
    /// The device-sharing facts last copied into the trace.
    seen_version: u64,
    /// Whether a chunk of content or tool calls has been written (OpenAI puts the role on
    /// the first one only).
    pub(crate) wrote_chunk: bool,
    /// Its place in a probe run: asked, once its tokens are out, whether its answer may end.
    probe: Option<crate::probe::Ticket>,
    /// Its answer's end, held by the probe run.
    hold: Option<crate::probe::Hold>,
    /// Log probabilities asked for, with this many alternatives per token.
    logprobs: Option<usize>,
    /// The seed of their draws.
    lp_seed: u64,
}

impl Running {
    /// Gets a runner and a slot, then evaluates the prompt. Errors finish the trace record.
    pub(crate) async fn start(job: Job, mut trace: TraceGuard) -> Result<Running, ApiError> {
        let Job {
            instance,
            model,
            opts,
            keep_alive,
            plan,
            clock,
            lateness,
            timer,
            arrival,
            mut prompt,
            reply_prefix,
            copy_per_token,
            truncate,
            mut probe,
            logprobs,
            images,
            refusal,
        } = job;
        let Plan { mut prompt_tokens, text, mut timing, seed: lp_seed, .. } = plan;
        trace.with(|r| {
            r.prompt_tokens = u64::from(prompt_tokens);
            r.thinking_tokens = text.thinking as u64;
        });
        let req = RunnerRequest {
            key: model.runner_key(),
            name_key: model.name.key(),
            display: model.name.display(),
            model: Arc::clone(&model.spec),
            opts,
            keep_alive,
            trace: &trace,
            arrival,
        };
        let lease = match instance.acquire(req).await {
            Ok(l) => l,
            Err(e) => {
                trace.finish(Outcome::Error, e.status.as_u16(), Some(e.message.clone()));
                return Err(e);
            }
        };
        // Modelled instants from here: when the request had its runner, then its slot. Both
        // run from its arrival when nothing modelled held it up, so the time the simulator
        // took to get to the request is not added to its schedule (see `crate::arrival`).
        let obtained = lease.ready_at;
        trace.with(|r| {
            r.runner_us = Some(trace.us(obtained));
            r.slots = lease.runner.num_parallel;
            r.one_slot_because.clone_from(&lease.runner.forced_one_slot);
        });
        let (slot, slot_at) = lease.slot(&trace).await;
        // llama-server reads the parameters before the prompt's images.
        if let Some(e) = refusal {
            let e = e.from_runner();
            trace.finish(Outcome::Error, e.status.as_u16(), Some(e.message.clone()));
            return Err(e);
        }
        // Images or audio: refused by a runner with no projector for either.
        if images > 0 && !model.spec.has("vision") && !model.spec.has("audio") {
            let e = multimodal_refusal().from_runner();
            trace.finish(Outcome::Error, e.status.as_u16(), Some(e.message.clone()));
            return Err(e);
        }
        // The slot's context: a longer prompt is cut or refused, as the real runner does it
        // once it has its slot.
        let planned = prompt.len();
        let full = lease.runner.opts.slot(&lease.runner.model);
        let limits = crate::context::Limits { num_ctx: lease.runner.opts.num_ctx as usize, slot: full, truncate };
        if let Err(e) = crate::context::fit_prompt(&mut prompt, limits) {
            let e = e.from_runner();
            trace.finish(Outcome::Error, e.status.as_u16(), Some(e.message.clone()));
            return Err(e);
        }
        if prompt.len() != planned {
            prompt_tokens = prompt.len() as u32;
            trace.with(|r| r.prompt_tokens = u64::from(prompt_tokens));
        }
        // The slot's prompt cache: only the tokens past the common prefix are evaluated, plus
        // the copies to and from host memory the cache made.
        let agent = trace.with(|r| r.agent.clone());
        let claim = lease.runner.claim(&prompt, &agent);
        // From here the slot's cache is held: a client that goes away during the prompt frees
        // it too (the guard's drop), not only a generation that ends.
        let cache_slot = CacheSlot { runner: Arc::clone(&lease.runner), slot: claim.slot, generated: Vec::new() };
        if timing.prompt > Duration::ZERO && planned > 0 {
            // The evaluated tokens are the prompt's last ones, each at its own position's
            // speed: their share of the whole prompt's time.
            let (profile, evaluated) = (&model.spec.profile, claim.evaluated as f64);
            let share =
                profile.prompt_ms(planned as f64 - evaluated, evaluated) / profile.prompt_ms(0.0, planned as f64);
            timing.prompt = timing.prompt.mul_f64(if share.is_finite() { share } else { 0.0 })
                + copy_per_token.saturating_mul(claim.copied() as u32);
        }
        trace.with(|r| r.cache = Some(cache_use(&claim)));
        timing.in_slot(full, prompt_tokens as usize);
        // Attention over the context at its mean during the answer (the prompt and half the
        // answer, less what a full slot's shifts discard): the part of each token that does not
        // batch with other streams.
        let mean_context = full.mean_context(prompt_tokens as usize, text.pieces.len());
        let attention = model.spec.profile.decode_slowdown_per_1k * mean_context / 1000.0;
        trace.with(|r| r.attention = attention);
        // A streamed answer in a probe run may be held whole, before it starts: its slot kept,
        // its device's batch not yet joined (`Ticket::at_start`); its schedule starts when it
        // is released, which is not the simulator being late.
        let streamed = trace.with(|r| r.stream);
        let slot_at = match probe.as_mut().filter(|_| streamed).map(crate::probe::Ticket::at_start) {
            Some(crate::probe::AtStart::Held(release)) => {
                let since = Instant::now();
                let _ = release.await;
                trace.with(|r| r.held_us = since.elapsed().as_micros() as u64);
                Instant::now()
            }
            _ => slot_at,
        };
        let member = instance.device.join((instance.index, lease.runner.id), attention);
        let (overhead, prompt_work) = (timing.overhead, timing.prompt);
        // The per-call overhead on a loaded runner is part of what the call costs alone.
        let ping = lease.ping;
        trace.with(|r| r.ping_us = ping.as_micros() as u64);
        let mut pacer = Pacer::new(member, slot_at, timing, text.pieces.len(), timer, lateness);
        // When its schedule starts: when it had its slot, or later when the simulator got to
        // it after its first token was due.
        trace.with(|r| r.slot_us = Some(trace.us(pacer.start())));
        trace.started_late(pacer.start().saturating_duration_since(slot_at));
        // Step 0: the overhead is over; step 1: the prompt is evaluated. Neither writes
        // anything, so a step that came late (the schedule started before the simulator got
        // to the request) is dated when it was due.
        let overhead_done = pacer.step().await.map_or_else(Instant::now, |s| s.at.min(s.due));
        trace.solo(ping + overhead);
        let prompt_done = pacer.step().await.map_or_else(Instant::now, |s| s.at.min(s.due));
        trace.solo(ping + overhead + prompt_work);
        Ok(Running {
            prompt_tokens,
            text,
            overhead,
            prompt_work,
            clock,
            trace,
            pacer,
            cache_slot,
            reply_prefix,
            tokenizer: model.spec.profile.tokenizer(),
            _slot: slot,
            lease,
            arrival,
            obtained,
            overhead_done,
            prompt_done,
            last_at: prompt_done,
            last_intended: overhead + prompt_work,
            emitted: 0,
            seen_version: 0,
            wrote_chunk: false,
            probe,
            hold: None,
            logprobs,
            lp_seed,
        })
    }

    /// Polls for the next token; `None` after the last one.
    pub(crate) fn poll_token(&mut self, cx: &mut Context<'_>) -> Poll<Option<Emitted>> {
        match self.pacer.poll_step(cx) {
            Poll::Ready(Some(step)) => self.emit(step),
            Poll::Ready(None) => self.poll_release(cx),
            Poll::Pending => Poll::Pending,
        }
    }

    /// A step that happened: a token, recorded in the trace.
    fn emit(&mut self, step: Step) -> Poll<Option<Emitted>> {
        let Step { index, at, intended, due } = step;
        self.last_at = at;
        self.last_intended = intended;
        self.emitted = index - 1;
        self.trace.solo(self.lease.ping + intended);
        self.trace.token(at, due, self.pacer.speed());
        if self.pacer.member().seen_version != self.seen_version {
            let m = self.pacer.member();
            self.seen_version = m.seen_version;
            let (peers, batch) = (m.peers.iter().copied().collect::<Vec<_>>(), m.max_batch);
            self.trace.with(|r| {
                r.shared_device_with = peers;
                r.max_batch = batch;
            });
        }
        Poll::Ready(Some(Emitted { index: index - 2, at }))
    }

    /// Waits until a probe run releases the answer (at once outside probe runs): for answers
    /// sent whole (embeddings), whose end [`Self::poll_release`] would otherwise never see.
    pub(crate) async fn released(&mut self) {
        std::future::poll_fn(|cx| self.poll_release(cx).map(|_| ())).await;
    }

    /// Every token is out: a probe run may hold the answer's end back ([`crate::probe`]).
    fn poll_release(&mut self, cx: &mut Context<'_>) -> Poll<Option<Emitted>> {
        if let Some(ticket) = self.probe.take() {
            if let Some(release) = ticket.ready() {
                self.pacer.retire();
                self.hold = Some(crate::probe::Hold { since: Instant::now(), release });
            }
        }
        if let Some(h) = self.hold.as_mut() {
            if std::pin::Pin::new(&mut h.release).poll(cx).is_pending() {
                return Poll::Pending;
            }
            let held_us = h.since.elapsed().as_micros() as u64;
            self.hold = None;
            self.trace.with(|r| r.held_us = held_us);
        }
        Poll::Ready(None)
    }

    /// Whether the schedule puts the next token at the same instant as the last one (a
    /// zero-latency profile): such tokens share a chunk; the others get one each, and so does
    /// the final line, as the real server flushes it on its own.
    pub(crate) fn next_is_simultaneous(&self) -> bool {
        self.pacer.next_intended() == Some(self.last_intended)
    }

    /// Shifts every later deadline by `d` (an injected stall pauses the model).
    pub(crate) fn delay(&mut self, d: Duration) {
        self.pacer.delay(d);
    }

    /// Waits for the next token.
    pub(crate) async fn next_token(&mut self) -> Option<Emitted> {
        std::future::poll_fn(|cx| self.poll_token(cx)).await
    }

    /// Token `i`'s log probability, when they were asked for.
    pub(crate) fn logprob(&self, i: usize) -> Option<crate::logprob::Logprob> {
        let top = self.logprobs?;
        Some(crate::logprob::entry(self.lp_seed, i, self.piece(i), top))
    }

    /// Every emitted token's log probability, in order (none unless asked for): what a
    /// response that is not streamed carries.
    pub(crate) fn logprobs_so_far(&self) -> Vec<crate::logprob::Logprob> {
        (0..self.emitted).filter_map(|i| self.logprob(i)).collect()
    }

    /// The text of token `i`.
    pub(crate) fn piece(&self, i: usize) -> &str {
        self.text.pieces.get(i).map_or("", |p| p.as_ref())
    }

    /// The reasoning generated so far.
    pub(crate) fn thinking_text(&self) -> String {
        self.text.pieces[..self.text.thinking.min(self.emitted)].concat()
    }

    /// The tool calls whose text has been generated so far.
    pub(crate) fn tool_calls_so_far(&self) -> Vec<crate::tools::ToolCall> {
        self.text.calls.iter().filter(|c| c.end < self.emitted).map(|c| c.call.clone()).collect()
    }

    /// The `created_at` of something emitted at `at`, or (frozen clock) at the intended
    /// offset of the last emitted step.
    pub(crate) fn stamp(&self, at: Instant) -> SystemTime {
        self.clock.stamp(at, self.lease.load_modelled + self.last_intended)
    }

    /// `created_at` text of the latest step.
    pub(crate) fn created_at(&self, at: Instant) -> String {
        rfc3339(self.stamp(at))
    }

    /// `created` (Unix seconds) of the latest step.
    pub(crate) fn created_unix(&self, at: Instant) -> u64 {
        unix_seconds(self.stamp(at))
    }

    /// Both forms of the latest step's timestamp, computed once.
    pub(crate) fn created(&self, at: Instant) -> (String, u64) {
        let t = self.stamp(at);
        (rfc3339(t), unix_seconds(t))
    }

    /// Why the text ended.
    pub(crate) fn done_reason(&self) -> DoneReason {
        self.text.done_reason
    }

    /// Tokens emitted so far.
    pub(crate) fn emitted(&self) -> usize {
        self.emitted
    }

    /// The final metrics, as of now. Prompt and eval durations are whole microseconds, as
    /// the real server reports them, and at least 1 µs when anything was evaluated, so that
    /// clients computing rates never divide by zero (a zero would also be omitted).
    pub(crate) fn metrics(&self, now: Instant) -> Metrics {
        let us = |d: Duration| ((d.as_nanos() as u64 / 1000) * 1000).max(1000);
        let (total, load, prompt, eval) = if self.clock.is_frozen() {
            let load = self.lease.load_modelled;
            let eval = self.last_intended.saturating_sub(self.overhead + self.prompt_work);
            (load + self.overhead + self.prompt_work + eval, load, self.prompt_work, eval)
        } else {
            (
                now - self.arrival,
                self.obtained - self.arrival,
                self.prompt_done - self.overhead_done,
                self.last_at - self.prompt_done,
            )
        };
        // The token a stop sequence began in counts once every written one is out.
        let counted = self.emitted + usize::from(self.text.stop_token && self.emitted >= self.text.pieces.len());
        Metrics {
            total_duration: total.as_nanos() as u64,
            load_duration: (load.as_nanos() as u64).max(1),
            prompt_eval_count: u64::from(self.prompt_tokens),
            prompt_eval_duration: us(prompt),
            eval_count: counted as u64,
            eval_duration: if counted == 0 { 0 } else { us(eval) },
        }
    }

    /// The text of the tokens emitted so far (those of [`Running::output_ids`]).
    pub(crate) fn emitted_text(&self) -> String {
        self.text.pieces[..self.emitted.min(self.text.pieces.len())].concat()
    }

    /// Token ids of the generated text, for `context`.
    pub(crate) fn output_ids(&self) -> Vec<u32> {
        self.text.pieces[..self.emitted.min(self.text.pieces.len())]
            .iter()
            .flat_map(|p| tokens::token_ids(p, 1, 32_000).collect::<Vec<_>>())
            .collect()
    }

    /// The tokens the slot holds after the prompt: the reply prefix and what was generated.
    fn generated_hashes(&self) -> Vec<Tok> {
        let mut text = String::from(self.reply_prefix);
        for p in &self.text.pieces[..self.emitted.min(self.text.pieces.len())] {
            text.push_str(p);
        }
        let mut out = Vec::new();
        self.tokenizer.hashes(&text, &mut out);
        out
    }

    /// Records how the request ended.
    pub(crate) fn finish(&mut self, outcome: Outcome, error: Option<String>) {
        self.trace.finish(outcome, 200, error);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // The guard releases the slot's cache with these when the fields drop next.
        self.cache_slot.generated = self.generated_hashes();
    }
}

/// A claimed slot of a runner's prompt cache; dropping it releases the slot with the tokens
/// it generated.
#[derive(Debug)]
struct CacheSlot {
    runner: Arc<crate::scheduler::Runner>,
    slot: usize,
    generated: Vec<Tok>,
}

impl Drop for CacheSlot {
    fn drop(&mut self) {
        self.runner.release_slot(self.slot, &self.generated);
    }
}
