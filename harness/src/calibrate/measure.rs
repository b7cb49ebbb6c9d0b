//! The measurement against live servers: a session of streamed calls (every prompt starting
//! with a word of its own, so no prompt cache helps), in the order the module above lists.
//!
//! A little over 600 lines: the eight steps are one session, each step reading what the ones
//! before measured (the warm first token, the loads) through the session's private helpers
//! (calls, unloads, `/api/ps`), which a sibling module could only reach made public.

use super::devices::{apart_in_speed, busy_note, device_groups};
use super::figures::{
    Answers, CalibratePlan, Calibration, Figure, LoadBurst, ModelMeta, OtherModel, Pair, Slots, decoded_at_once, num,
};
use super::fits::{PromptFit, TokenizerFit, robust_rising_line};
use crate::client::{CallOpts, CallRecord, Stack, tagged};
use std::time::{Duration, Instant};

/// Progress: (step done, steps in all, what was just done).
pub type ProgressFn<'a> = &'a mut dyn FnMut(usize, usize, &str);

/// Measures the deployment. On an error, what was measured so far comes back with it.
pub fn calibrate(plan: &CalibratePlan, progress: ProgressFn<'_>) -> Result<Calibration, (Box<Calibration>, String)> {
    let mut cal = Calibration {
        endpoints: plan.endpoints.clone(),
        model: plan.model.clone(),
        tokens: plan.tokens,
        max_streams: plan.max_streams,
        reps: plan.reps,
        started: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        ..Calibration::default()
    };
    if plan.endpoints.is_empty() {
        return Err((Box::new(cal), "no server to calibrate: give --endpoints".into()));
    }
    if plan.reps < 2 || plan.max_streams < 2 || plan.tokens < 8 {
        return Err((Box::new(cal), "--reps and --max-streams must be at least 2, --tokens at least 8".into()));
    }
    // The model on every server; the others on the first, where they are loaded.
    let mut checks = std::iter::once(crate::client::check_live(&plan.endpoints, &plan.model))
        .chain(plan.others.iter().map(|m| crate::client::check_live(&plan.endpoints[..1], m)));
    if let Some(Err(e)) = checks.find(Result::is_err) {
        return Err((Box::new(cal), e));
    }
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return Err((Box::new(cal), format!("tokio runtime: {e}"))),
    };
    let begun = Instant::now();
    let r = rt.block_on(measure(plan, &mut cal, progress));
    cal.elapsed_s = begun.elapsed().as_secs_f64();
    match r {
        Ok(()) => Ok(cal),
        Err(e) => Err((Box::new(cal), e)),
    }
}

/// [`super::twin::check`] of `now` against `twin`, confirmed where a figure moved: the servers are
/// measured again (`plan`, reporting to `progress`) and a figure is moved only where it moves in
/// both ([`super::twin::confirm`]: a slow stretch of a busy machine can fall on every round of one
/// measurement). Returns the drifts and the seconds the second measurement took (0 when none
/// was needed).
pub fn check_confirmed(
    plan: &CalibratePlan,
    twin: &Calibration,
    now: &Calibration,
    progress: ProgressFn<'_>,
) -> Result<(Vec<super::twin::Drift>, f64), String> {
    let drifts = super::twin::check(twin, now);
    let moved: Vec<&str> = drifts.iter().filter(|d| d.moved).map(|d| d.figure.as_str()).collect();
    if moved.is_empty() {
        return Ok((drifts, 0.0));
    }
    progress(0, 0, &format!("{} moved; measuring again, to call moved only what moves again", moved.join(", ")));
    let again = calibrate(plan, progress).map_err(|(_, e)| e)?;
    Ok((super::twin::confirm(&drifts, &super::twin::check(twin, &again)), again.elapsed_s))
}

/// Calls to one set of servers.
struct Session<'a> {
    plan: &'a CalibratePlan,
    http: reqwest::Client,
    stack: Stack,
    nonce: std::sync::atomic::AtomicU64,
}

/// The longest calibration prompt, in characters (about 375 of the simulator's tokens): well
/// inside any model's context, with room for the answer.
const LONG_PROMPT_CHARS: usize = 1500;

/// The prompt of the calls started together (the batching rounds, the pairs), characters.
const PAIR_PROMPT_CHARS: usize = 80;

/// The prompt lengths of the one-token calls, characters: several, so that a prompt's time that
/// bends upward with its length shows (`PromptFit::fit`), the longest twice the long prompt's
/// (about 750 of the simulator's tokens; 2,564 of the real tiny model's, whose tokens are a
/// few characters, within Ollama's default context of 4,096): the real tiny model's prompt
/// bends past 2,000 of its tokens (35 µs a token at 2,564, 21 at 1,302).
const PROMPT_CHARS: [usize; 4] = [60, 600, LONG_PROMPT_CHARS, 2 * LONG_PROMPT_CHARS];

/// [`PROMPT_CHARS`] in words: "60, 600, 1500 and 3000 characters".
fn prompt_lengths_words() -> String {
    let all: Vec<String> = PROMPT_CHARS.iter().map(|c| c.to_string()).collect();
    format!("{} and {} characters", all[..all.len() - 1].join(", "), all[all.len() - 1])
}

/// One one-token call of the prompt rounds ([`Session::prompt_rounds`]).
struct PromptCall {
    /// The prompt's length asked for (one of [`PROMPT_CHARS`]).
    chars: usize,
    text: String,
    ttft_ms: f64,
    /// The server's count of the prompt (`prompt_eval_count`).
    counted: Option<f64>,
}

/// The model's tokenizer fitted to the server's counts of the prompt rounds' prompts, and the
/// rounds' points of time to first token against the prompt's tokens as that tokenizer counts
/// them (the default's without a count).
fn prompt_fits(calls: &[PromptCall]) -> (Option<TokenizerFit>, Option<PromptFit>) {
    let counted: Vec<(&str, f64)> = calls.iter().filter_map(|c| Some((c.text.as_str(), c.counted?))).collect();
    let tokenizer = TokenizerFit::fit(&counted);
    let count = |t: &str| match &tokenizer {
        Some(f) => f.count(t),
        None => f64::from(sim_ollama::advanced::Tokenizer::default().count(t)),
    };
    let points = calls.iter().map(|c| (count(&c.text), c.ttft_ms)).collect();
    (tokenizer, PromptFit::fit(points))
}

/// Words the calibration prompts are made of.
const FILLER: &str = "The agents read the report, compare the figures with last week, and write a short note on what changed and why it matters to the team. ";

impl Session<'_> {
    fn url(&self, server: usize, path: &str) -> String {
        format!("{}{path}", self.plan.endpoints[server].trim_end_matches('/'))
    }

    /// A prompt of about `chars` characters that no earlier prompt starts like.
    fn prompt(&self, chars: usize) -> String {
        let n = self.nonce.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let mut p = format!("Calibration{n}x{stamp:x}: ");
        while p.len() < chars {
            p.push_str(FILLER);
        }
        p
    }

    /// One streamed `/api/generate` call; an error or an answer without tokens is an `Err`.
    async fn call(
        &self,
        server: usize,
        prompt: String,
        tokens: u32,
        options: serde_json::Value,
    ) -> Result<CallRecord, String> {
        let rec = self.record(&self.plan.model, server, prompt, tokens, options).await;
        answered(rec, &self.plan.endpoints[server])
    }

    /// The time to first token of a one-token call of `model` (not the one calibrated), ms.
    async fn first_token_of(&self, model: &str, server: usize) -> Result<f64, String> {
        self.call_of(model, server, self.prompt(60), 1).await.map(|r| ttft_ms(&r))
    }

    /// One streamed call of `model` (not the one calibrated) that answered with tokens.
    async fn call_of(&self, model: &str, server: usize, prompt: String, tokens: u32) -> Result<CallRecord, String> {
        let rec = self.record(model, server, prompt, tokens, serde_json::json!({})).await;
        answered(rec, &format!("{} ({model})", self.plan.endpoints[server]))
    }

    /// One-token calls on the first server at each of [`PROMPT_CHARS`], `--reps` rounds of one
    /// call at each length (a slow stretch of the machine then slows calls of every length, not
    /// all the calls of one, which would bend the line), of the model calibrated or of `other`:
    /// each call's [`PromptCall`], in order. `round_done` is told each round's number as it
    /// ends.
    async fn prompt_rounds(
        &self,
        other: Option<&str>,
        mut round_done: impl FnMut(usize),
    ) -> Result<Vec<PromptCall>, String> {
        let mut calls = Vec::new();
        for round in 1..=self.plan.reps {
            for chars in PROMPT_CHARS {
                let text = self.prompt(chars);
                let r = match other {
                    Some(model) => self.call_of(model, 0, text.clone(), 1).await?,
                    None => self.call(0, text.clone(), 1, serde_json::json!({})).await?,
                };
                let counted = r.prompt_eval_count.filter(|n| *n > 0).map(|n| n as f64);
                calls.push(PromptCall { chars, text, ttft_ms: ttft_ms(&r), counted });
            }
            round_done(round);
        }
        Ok(calls)
    }

    /// One streamed `/api/generate` call of `model`, as the client saw it (errors in the record).
    async fn record(
        &self,
        model: &str,
        server: usize,
        prompt: String,
        tokens: u32,
        options: serde_json::Value,
    ) -> CallRecord {
        let mut opts = serde_json::json!({"num_predict": tokens});
        if let (Some(o), Some(extra)) = (opts.as_object_mut(), options.as_object()) {
            o.extend(extra.clone());
        }
        let body = serde_json::json!({"model": model, "prompt": prompt, "stream": true, "options": opts});
        let call_opts =
            CallOpts { per_token_block: None, agent: "harness-calibrate".into(), timeout: self.plan.timeout };
        self.stack
            .call(&self.url(server, "/api/generate"), serde_json::to_vec(&body).unwrap_or_default(), &call_opts)
            .await
    }

    /// `k` one-token calls sent at once to a server whose model is unloaded: those that cannot
    /// wait for the load are refused with HTTP 503 (the scheduler's pending queue,
    /// `OLLAMA_MAX_QUEUE`, holds the requests waiting for a load; server/sched.go). Any other
    /// error is an `Err`.
    async fn load_burst(&self, server: usize, k: usize) -> Result<LoadBurst, String> {
        let calls = (0..k).map(|_| self.record(&self.plan.model, server, self.prompt(60), 1, serde_json::json!({})));
        let recs = futures::future::join_all(calls).await;
        let busy = |r: &CallRecord| r.status == Some(503);
        if let Some(e) = recs.iter().filter(|r| !busy(r)).find_map(|r| r.error.as_ref()) {
            return Err(format!("{}: {e}", self.plan.endpoints[server]));
        }
        Ok(LoadBurst { sent: k, refused: recs.iter().filter(|r| busy(r)).count() })
    }

    /// Calls started together, one per entry of `servers`, each after a prompt of `chars`.
    async fn together(&self, servers: &[usize], chars: usize, tokens: u32) -> Result<Vec<CallRecord>, String> {
        let calls = servers.iter().map(|&s| self.call(s, self.prompt(chars), tokens, serde_json::json!({})));
        futures::future::join_all(calls).await.into_iter().collect()
    }

    async fn get(&self, server: usize, path: &str) -> Result<serde_json::Value, String> {
        let url = self.url(server, path);
        let r =
            self.http.get(&url).send().await.map_err(|e| format!("{url}: {}", crate::client::describe_error(&e)))?;
        r.json().await.map_err(|e| format!("{url}: {e}"))
    }

    async fn post(&self, server: usize, path: &str, body: serde_json::Value) -> Result<serde_json::Value, String> {
        let url = self.url(server, path);
        let r = self
            .http
            .post(&url)
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("{url}: {}", crate::client::describe_error(&e)))?;
        let status = r.status();
        let v: serde_json::Value = r.json().await.map_err(|e| format!("{url}: {e}"))?;
        if !status.is_success() {
            return Err(format!("{url} answered HTTP {}: {}", status.as_u16(), v["error"].as_str().unwrap_or("")));
        }
        Ok(v)
    }

    /// Unloads the model from a server and waits until `/api/ps` no longer lists it (other
    /// models may stay loaded: the agents' others, or anyone's).
    async fn unload(&self, server: usize) -> Result<(), String> {
        self.unload_model(server, &self.plan.model).await
    }

    /// The models a server has loaded (`/api/ps`).
    async fn ps(&self, server: usize) -> Result<Vec<Loaded>, String> {
        let ps = self.get(server, "/api/ps").await?;
        Ok(ps["models"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| {
                Some(Loaded {
                    name: m["name"].as_str()?.to_string(),
                    size: m["size"].as_u64(),
                    size_vram: m["size_vram"].as_u64(),
                })
            })
            .collect())
    }

    /// The names of the models a server has loaded.
    async fn loaded(&self, server: usize) -> Result<Vec<String>, String> {
        Ok(self.ps(server).await?.into_iter().map(|m| m.name).collect())
    }

    /// [`Session::unload`] of `model`.
    async fn unload_model(&self, server: usize, model: &str) -> Result<(), String> {
        self.post(server, "/api/generate", serde_json::json!({"model": model, "keep_alive": 0, "stream": false}))
            .await?;
        let name = tagged(model);
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if !self.loaded(server).await?.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(format!("{}: {model} was still loaded 30 s after an unload", self.plan.endpoints[server]))
    }
}

/// A model a server has loaded, as `/api/ps` lists it.
struct Loaded {
    name: String,
    /// Bytes in memory.
    size: Option<u64>,
    /// Of them, on a GPU.
    size_vram: Option<u64>,
}

/// A call that answered with tokens, else what went wrong at `at` (a server, and the model
/// where it is not the one calibrated).
fn answered(rec: CallRecord, at: &str) -> Result<CallRecord, String> {
    match &rec.error {
        Some(e) => Err(format!("{at}: {e}")),
        None if rec.tokens.is_empty() => Err(format!("{at}: an answer without tokens")),
        None => Ok(rec),
    }
}

fn ttft_ms(r: &CallRecord) -> f64 {
    r.tokens.first().map_or(f64::NAN, |t| t.saturating_duration_since(r.sent).as_secs_f64() * 1e3)
}

/// Tokens per second after the first token: the tokens the server counted (the chunks when it
/// sent no count) over the time from the first chunk to the last.
fn decode_rate(r: &CallRecord) -> f64 {
    let (Some(first), Some(last)) = (r.tokens.first(), r.tokens.last()) else { return f64::NAN };
    let n = r.eval_count.map_or(r.tokens.len() as f64, |c| c as f64);
    let span = last.saturating_duration_since(*first).as_secs_f64();
    if n < 3.0 || span <= 0.0 { f64::NAN } else { (n - 1.0) / span }
}

async fn measure(plan: &CalibratePlan, cal: &mut Calibration, progress: ProgressFn<'_>) -> Result<(), String> {
    let http = reqwest::Client::builder().timeout(plan.timeout).build().map_err(|e| e.to_string())?;
    let s = Session { plan, stack: Stack::Reqwest(http.clone()), http, nonce: Default::default() };
    let n = plan.endpoints.len();
    let ks: Vec<usize> = (2..=plan.max_streams).collect();
    let total = 1
        + n
        + n * plan.reps
        + 1
        + plan.reps
        + usize::from(n > 1)
        + ks.len()
        + (n - 1)
        + n * (n - 1) / 2
        + usize::from(n > 1)
        + 3
        + usize::from(!plan.others.is_empty());
    let mut done = 0;
    // `advance` false: a line of news, not a step.
    let mut step = |what: &str, advance: bool| {
        done += usize::from(advance);
        progress(done, total, what);
    };

    // 1. Metadata, and a warm-up call on every server (it may load the model).
    cal.meta = Some(metadata(&s, &plan.model).await?);
    step("model metadata", true);
    for i in 0..n {
        s.call(i, s.prompt(40), 8, serde_json::json!({})).await?;
        step(&format!("warm-up of {}", plan.endpoints[i]), true);
    }
    if let Some(meta) = &mut cal.meta {
        if let Some(m) = s.ps(0).await.ok().and_then(|ps| ps.into_iter().next()) {
            meta.size_loaded = m.size;
            meta.cpu = m.size_vram == Some(0);
        }
    }

    // 2. Solo calls: reps on every server (each server's own speed is what its streams beside
    // another's are compared with; one call on a busy machine can read half its speed), in
    // rounds of one call per server, so that a slow stretch of the machine's falls on every
    // server and not on one server's calls alone (two identical real servers, each's calls
    // made one after the other, read 1.25 apart in every call once).
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); n];
    let (mut gaps, mut overheads, mut by_context) = (Vec::new(), Vec::new(), Vec::new());
    // How each decoding call's answer ended (every one asked for --tokens).
    let mut answers = Vec::new();
    for i in (0..plan.reps).flat_map(|_| 0..n) {
        let prompt = s.prompt(80);
        let context = f64::from(sim_ollama::advanced::Tokenizer::default().count(&prompt));
        let r = s.call(i, prompt, plan.tokens, serde_json::json!({})).await?;
        rates[i].push(decode_rate(&r));
        gaps.extend(r.tokens.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()));
        // The decode line is the first server's (the profile's): the others' speeds are
        // their devices' `speed` relative to it.
        if i == 0 {
            by_context.extend(segment_gaps(&r, context));
        }
        overheads.extend(r.load_duration_ns.map(|ns| ns as f64 / 1e6));
        let first_call = rates[0].len() == 1 && i == 0;
        answers.push((r.done_reason.clone(), r.eval_count));
        if first_call {
            // At most: every call of the sweeps waiting for the one before (one slot).
            let per_call = r.end.saturating_duration_since(r.sent).as_secs_f64();
            let calls = (n + 1) * plan.reps
                + plan.reps * ks.iter().sum::<usize>()
                + (n - 1) * plan.max_streams
                + 2 * n * (n - 1) * plan.reps
                + usize::from(n > 1) * plan.reps
                + 2 * plan.others.len() * plan.reps;
            let bursts = burst_sizes(plan);
            step(
                &format!(
                    "one {}-token call takes {per_call:.2} s: the decoding calls take at most {:.0} s, then {} one-token calls, at most {} more in bursts at a load, and at most {} loads",
                    plan.tokens,
                    per_call * calls as f64,
                    (PROMPT_CHARS.len() + if n > 1 { n } else { 0 }) * plan.reps
                        + (PROMPT_CHARS.len() * plan.reps + 1) * plan.others.len(),
                    bursts.iter().sum::<usize>(),
                    2 * plan.reps + bursts.len() + plan.others.len()
                ),
                false,
            );
        }
        step(&format!("solo call on {}", plan.endpoints[i]), true);
    }
    // The solo figures, kept whatever fails below.
    cal.decode_per_server = rates.iter().filter_map(|r| Figure::of(r)).collect();
    cal.decode_tokens_per_s = Figure::of(&rates.concat());
    // The first server's solo speed: the batching rounds below run on it.
    let solo = cal.decode_per_server.first().map(|f| f.median).ok_or("no solo call decoded enough tokens to time")?;
    cal.inter_token_cv = cv(&gaps);
    cal.call_overhead_ms = Figure::of(&overheads);
    cal.answers = Answers::of(&answers);
    // 2b. Solo calls after a long prompt: the gaps at a context the short calls never reach,
    // so the line's slope rests on a range of contexts several times their answers' length
    // (100-token answers alone leave 100 tokens of context to fit it on, where a busy
    // machine's stalls tilt it). Not in the solo speed: the k-stream rounds below are compared
    // with calls of the short prompt.
    for _ in 0..plan.reps {
        let prompt = s.prompt(LONG_PROMPT_CHARS);
        let context = f64::from(sim_ollama::advanced::Tokenizer::default().count(&prompt));
        let r = s.call(0, prompt, plan.tokens, serde_json::json!({})).await?;
        by_context.extend(segment_gaps(&r, context));
        answers.push((r.done_reason.clone(), r.eval_count));
    }
    // 2c. Short answers after a short prompt: the gaps nearest an empty context, where the
    // line's intercept (each token's work besides its attention) is read.
    for _ in 0..plan.reps {
        let prompt = s.prompt(40);
        let context = f64::from(sim_ollama::advanced::Tokenizer::default().count(&prompt));
        let r = s.call(0, prompt, (plan.tokens / 8).max(17), serde_json::json!({})).await?;
        by_context.extend(segment_gaps(&r, context));
    }
    // Again, with the long prompt's calls (the solo calls' alone were kept above).
    cal.answers = Answers::of(&answers);
    step(&format!("solo calls after a prompt of {LONG_PROMPT_CHARS} characters"), true);
    cal.decode_line = robust_rising_line(&by_context).map(|(a, b, _)| (a, b)).filter(|(a, _)| *a > 0.0);
    if cal.decode_per_server.iter().any(|f| apart_in_speed(solo, f)) {
        cal.notes.push(format!(
            "the servers decode at different speeds alone ({} tokens/s): the twin's profile is the first server's, and each device runs at its servers' median speed over it (`speed`)",
            cal.decode_per_server.iter().map(|f| num(f.median)).collect::<Vec<_>>().join(", ")
        ));
    }

    // 3. Time to first token against prompt length: one-token calls at four lengths, in
    // rounds ([`Session::prompt_rounds`]).
    let calls = s
        .prompt_rounds(None, |round| {
            step(&format!("one-token calls of {}, round {round} of {}", prompt_lengths_words(), plan.reps), true)
        })
        .await?;
    let at = |len: usize| calls.iter().filter(|c| c.chars == len).map(|c| c.ttft_ms).collect::<Vec<_>>();
    let short = at(PROMPT_CHARS[0]);
    let mut long = vec![Vec::new(); n];
    if n == 1 {
        long[0] = at(LONG_PROMPT_CHARS);
    }
    // With more servers, the long prompt's time to first token on every server, in rounds of
    // one call each (as the solo calls): a device may process prompts faster or slower than it
    // decodes, against the first.
    if n > 1 {
        for i in (0..plan.reps).flat_map(|_| 0..n) {
            let r = s.call(i, s.prompt(LONG_PROMPT_CHARS), 1, serde_json::json!({})).await?;
            long[i].push(ttft_ms(&r));
        }
        step(&format!("one-token calls of {LONG_PROMPT_CHARS} characters on every server, in rounds"), true);
    }
    cal.long_ttft_per_server = long.iter().filter_map(|t| Figure::of(t)).collect();
    cal.warm_ttft_ms = Figure::of(&short);
    (cal.tokenizer, cal.prompt) = prompt_fits(&calls);

    // 4. k calls at once on the first server; then the slots of every other server.
    let mut found = 0usize;
    let mut batch_rates: Vec<(usize, Vec<f64>)> = Vec::new();
    let mut batch_recs = Vec::new();
    let short_sim = f64::from(sim_ollama::advanced::Tokenizer::default().count(&s.prompt(PAIR_PROMPT_CHARS)));
    for &k in &ks {
        // Rounds of k, `reps` of them: contention on a shared CPU varies from round to round.
        let mut rel = Vec::new();
        let mut seen = Vec::new();
        for _ in 0..plan.reps {
            let recs = s.together(&vec![0; k], PAIR_PROMPT_CHARS, plan.tokens).await?;
            let (starts, ends) = spans(&recs);
            let at_once = decoded_at_once(&starts, &ends);
            seen.push(at_once);
            if at_once == k {
                rel.extend(recs.iter().map(|r| decode_rate(r) / solo));
                batch_recs.extend(recs);
            }
        }
        // The slots: what most rounds showed (a round whose first call ended early shows fewer).
        seen.sort_unstable();
        let at_once = seen[seen.len() / 2];
        found = found.max(at_once);
        if at_once == k && !rel.is_empty() {
            batch_rates.push((k, rel));
        }
        step(&format!("{k} calls at once, {} rounds: {at_once} decoded together", plan.reps), true);
    }
    cal.slots.push(Slots {
        endpoint: plan.endpoints[0].clone(),
        slots: found.max(1),
        at_least: found >= plan.max_streams,
    });
    cal.batch = batch_rates.iter().filter_map(|(k, v)| Figure::of(v).map(|f| (*k, f))).collect();
    cal.batch_context =
        mean_context(&batch_recs, short_sim, plan.tokens).or(Some(short_sim + f64::from(plan.tokens) / 2.0));
    for i in 1..n {
        let recs = s.together(&vec![i; plan.max_streams], PAIR_PROMPT_CHARS, plan.tokens).await?;
        let (starts, ends) = spans(&recs);
        let at_once = decoded_at_once(&starts, &ends);
        cal.slots.push(Slots {
            endpoint: plan.endpoints[i].clone(),
            slots: at_once.max(1),
            at_least: at_once >= plan.max_streams,
        });
        step(&format!("{} calls at once on {}: {at_once} decoded together", plan.max_streams, plan.endpoints[i]), true);
    }

    // 5. Each pair of servers with one call on each at once: which servers slow which (a
    // shared device, or shared cores), so servers on one device and servers on their own in
    // one deployment each get theirs.
    // Then the same after a long prompt, where attention is more of each token's work: servers
    // may share it otherwise than the rest (cores of one machine: the weights' part time-sliced,
    // each process's attention hardly slowed), against solo calls after that prompt.
    let solo_of = |i: usize| cal.decode_per_server.get(i).map_or(solo, |f| f.median);
    let long_sim = f64::from(sim_ollama::advanced::Tokenizer::default().count(&s.prompt(2 * LONG_PROMPT_CHARS)));
    if n > 1 {
        let mut long_rates = Vec::new();
        for _ in 0..plan.reps {
            let r = s.call(0, s.prompt(2 * LONG_PROMPT_CHARS), plan.tokens, serde_json::json!({})).await?;
            long_rates.push(decode_rate(&r));
        }
        cal.long_decode_tokens_per_s = Figure::of(&long_rates);
        step(&format!("solo calls after a prompt of {} characters", 2 * LONG_PROMPT_CHARS), true);
    }
    let (mut short_recs, mut long_recs) = (Vec::new(), Vec::new());
    let long_solo_of = |i: usize| cal.long_decode_tokens_per_s.map(|f| f.median * solo_of(i) / solo);
    for a in 0..n {
        for b in a + 1..n {
            let (mut rel, mut rel_long) = (Vec::new(), Vec::new());
            for _ in 0..plan.reps {
                let recs = s.together(&[a, b], PAIR_PROMPT_CHARS, plan.tokens).await?;
                rel.extend(recs.iter().zip([a, b]).map(|(r, i)| decode_rate(r) / solo_of(i)));
                short_recs.extend(recs);
                let recs = s.together(&[a, b], 2 * LONG_PROMPT_CHARS, plan.tokens).await?;
                rel_long.extend(recs.iter().zip([a, b]).filter_map(|(r, i)| Some(decode_rate(r) / long_solo_of(i)?)));
                long_recs.extend(recs);
            }
            if let Some(speed) = Figure::of(&rel) {
                cal.pairs.push(Pair { a, b, speed, after_long: Figure::of(&rel_long) });
            }
            step(
                &format!(
                    "one call on {} and one on {} at once, after a short and a long prompt",
                    plan.endpoints[a], plan.endpoints[b]
                ),
                true,
            );
        }
    }
    if let (Some(short), Some(long)) =
        (mean_context(&short_recs, short_sim, plan.tokens), mean_context(&long_recs, long_sim, plan.tokens))
    {
        cal.pair_contexts = Some([short, long]);
    }
    if n == 2 {
        cal.together = cal.pairs.first().map(|p| p.speed);
    }
    let (groups, overruled) = device_groups(cal);
    cal.notes.extend(overruled);
    // 5b. Three servers or more: all of them at once, against what the twin's devices give
    // them (`efficiency / m` on a device of m, the efficiency from pairs; 1 alone). Servers
    // sharing a pool of fewer cores than they are interfere only when more are busy than
    // cores: their pairs do not show it.
    if n >= 3 {
        let all: Vec<usize> = (0..n).collect();
        let mut rel = Vec::new();
        for _ in 0..plan.reps {
            let recs = s.together(&all, PAIR_PROMPT_CHARS, plan.tokens).await?;
            rel.extend(recs.iter().zip(&all).map(|(r, &i)| decode_rate(r) / solo_of(i)));
        }
        if let Some(speed) = Figure::of(&rel) {
            cal.notes.extend(busy_note(&groups, speed));
            cal.all_busy = Some(speed);
        }
        step(&format!("one call on each of the {n} servers at once"), false);
    }

    // 6. Loads, last: an unload, then a call; then calls that change the runner's options.
    let warm = cal.warm_ttft_ms.map_or(0.0, |f| f.median);
    let mut loads = Vec::new();
    for _ in 0..plan.reps {
        s.unload(0).await?;
        let r = s.call(0, s.prompt(60), 1, serde_json::json!({})).await?;
        loads.push(ttft_ms(&r) - warm);
    }
    cal.load_ms = Figure::of(&loads);
    step("loads after an unload", true);
    let mut reloads = Vec::new();
    for i in 0..plan.reps {
        let ctx = if i % 2 == 0 { 1536 } else { 1024 };
        let r = s.call(0, s.prompt(60), 1, serde_json::json!({"num_ctx": ctx})).await?;
        reloads.push(ttft_ms(&r) - warm);
    }
    cal.reload_ms = Figure::of(&reloads);
    step("reloads for changed options", true);
    // 7. Bursts of calls at a load: how many requests may wait for it (`OLLAMA_MAX_QUEUE`),
    // each burst four times the last until one is refused or MAX_LOAD_BURST were taken.
    let mut burst = None;
    for (i, k) in burst_sizes(plan).into_iter().enumerate() {
        s.unload(0).await?;
        let b = s.load_burst(0, k).await?;
        step(&format!("{} calls at once at a load: {} refused (server busy)", b.sent, b.refused), i == 0);
        burst = Some(b);
        if b.refused > 0 {
            break;
        }
    }
    cal.load_burst = burst;
    // Back to the server's own options, loaded, so the model is left as it was found.
    s.call(0, s.prompt(60), 1, serde_json::json!({})).await?;
    // 8. The other models the agents use, each loaded in turn after the model: its load (its
    // first call's time to first token over its second's), then which are still loaded.
    if !plan.others.is_empty() {
        others(&s, cal).await?;
        step(
            &format!(
                "{} models loaded in turn: {} still loaded together",
                plan.others.len() + 1,
                cal.loaded_together.map_or("?".to_string(), |k| k.to_string())
            ),
            true,
        );
        // The model last, so it is left loaded as it was found.
        s.call(0, s.prompt(60), 1, serde_json::json!({})).await?;
    }
    if let (Some(l), Some(r)) = (cal.load_ms, cal.reload_ms) {
        if r.median > 1.5 * l.median || l.median > 1.5 * r.median {
            cal.notes.push(format!(
                "a load after an unload took {} ms and a reload for new options {} ms: the simulator charges one load time for both; the twin uses their median",
                num(l.median),
                num(r.median)
            ));
        }
    }
    Ok(())
}

/// Step 8: each of `--with-models` unloaded, then loaded in turn on the first server (a
/// one-token call: its time to first token over the warm calls' median is its load), then
/// `--reps` one-token calls and `--reps` decoding calls as the model's own (its time to first
/// token and decode speed, so the twin serves it at its own speed); then `/api/ps`: how many
/// of the model and the others are still loaded (`Calibration::loaded_together`).
async fn others(s: &Session<'_>, cal: &mut Calibration) -> Result<(), String> {
    for name in &s.plan.others {
        // Unloaded first (a calibration minutes ago, or the agents, may have left it loaded),
        // so that its first call loads it.
        s.unload_model(0, name).await?;
        let first = s.first_token_of(name, 0).await?;
        // Its time to first token at the model's prompt lengths, in rounds (as the model's).
        let calls = s.prompt_rounds(Some(name), |_| {}).await?;
        let warm: Vec<f64> = calls.iter().filter(|c| c.chars == PROMPT_CHARS[0]).map(|c| c.ttft_ms).collect();
        let (tokenizer, prompt) = prompt_fits(&calls);
        // Its solo calls, after the model's short prompt (its speed) and after its long one
        // (its fall with context): the line through their gaps, as the model's.
        let (mut rates, mut long_rates, mut by_context) = (Vec::new(), Vec::new(), Vec::new());
        let mut long_context = None;
        for chars in [80, LONG_PROMPT_CHARS] {
            for _ in 0..s.plan.reps {
                let prompt = s.prompt(chars);
                let context = f64::from(sim_ollama::advanced::Tokenizer::default().count(&prompt));
                let r = s.call_of(name, 0, prompt, s.plan.tokens).await?;
                by_context.extend(segment_gaps(&r, context));
                if chars == LONG_PROMPT_CHARS {
                    long_rates.push(decode_rate(&r));
                    long_context = mean_context([&r], context, s.plan.tokens);
                } else {
                    rates.push(decode_rate(&r));
                }
            }
        }
        let warm = Figure::of(&warm);
        // The name the server loaded it as (a name without a tag is `:latest`), and its size.
        let want = tagged(name);
        let ps = s.ps(0).await?;
        let listed = ps.iter().find(|m| m.name.eq_ignore_ascii_case(&want));
        let mut meta = metadata(s, name).await?;
        meta.size_loaded = listed.and_then(|m| m.size);
        let loaded_as = listed.map_or(want, |m| m.name.clone());
        cal.others.push(OtherModel {
            name: name.clone(),
            loaded_as,
            load_ms: (first - warm.map_or(0.0, |w| w.median)).max(0.0),
            meta: Some(meta),
            warm_ttft_ms: warm,
            prompt,
            tokenizer,
            decode_tokens_per_s: Figure::of(&rates),
            decode_line: robust_rising_line(&by_context).map(|(a, b, _)| (a, b)).filter(|(a, _)| *a > 0.0),
            long_decode_tokens_per_s: Figure::of(&long_rates),
            long_context,
        });
    }
    let loaded = s.loaded(0).await?;
    let main =
        cal.meta.as_ref().map(|m| m.name.clone()).filter(|n| !n.is_empty()).unwrap_or_else(|| tagged(&s.plan.model));
    let names = std::iter::once(main).chain(cal.others.iter().map(|o| o.loaded_as.clone()));
    cal.loaded_together = Some(names.filter(|n| loaded.iter().any(|l| l.eq_ignore_ascii_case(n))).count());
    Ok(())
}

/// The bursts at a load, each tried where the one before was refused nothing: the first twice
/// `--max-streams`, at least 8 (a queue of a few is what a server set up to shed load runs),
/// each next four times as large, up to [`MAX_LOAD_BURST`].
pub(crate) fn burst_sizes(plan: &CalibratePlan) -> Vec<usize> {
    let mut sizes = vec![(2 * plan.max_streams).clamp(8, MAX_LOAD_BURST)];
    while let Some(&k) = sizes.last().filter(|&&k| k < MAX_LOAD_BURST) {
        sizes.push((k * 4).min(MAX_LOAD_BURST));
    }
    sizes
}

/// The largest burst at a load: a queue of 127 or more waiting requests is taken for Ollama's
/// default, 512 (each burst's one-token calls all run once the model is loaded: 128 of them
/// are seconds on the tiny model, and a server refusing none of them sheds no load a team's
/// agents would reach).
pub(crate) const MAX_LOAD_BURST: usize = 128;

/// A call's mean gap per token over eighths of its tokens, each at the context in its middle:
/// (context before the token, ms). A segment's mean rests on its two end tokens only, so a
/// client that reads several tokens at once (a busy machine, a server that merges pieces)
/// moves no point, where single gaps would bunch into zeros and doubles.
fn segment_gaps(r: &CallRecord, sim_count: f64) -> Vec<(f64, f64)> {
    let context = prompt_context(r, sim_count);
    // Chunks that carry several tokens: positions in tokens, not chunks.
    let per_chunk = r.eval_count.map_or(1.0, |c| c as f64 / r.tokens.len().max(1) as f64).max(1.0);
    let n = r.tokens.len();
    if n < 17 {
        return Vec::new();
    }
    let bounds: Vec<usize> = (0..=8).map(|k| k * (n - 1) / 8).collect();
    bounds
        .windows(2)
        .filter(|b| b[1] > b[0])
        .map(|b| {
            let span = r.tokens[b[1]].saturating_duration_since(r.tokens[b[0]]).as_secs_f64() * 1e3;
            let tokens = (b[1] - b[0]) as f64 * per_chunk;
            (context + (b[0] + b[1]) as f64 / 2.0 * per_chunk, span / tokens)
        })
        .collect()
}

/// The context before a call's first generated token: its prompt as the server counted it
/// (`prompt_eval_count`), else the simulator's count `sim_count`. A real model's tokenizer may
/// count a text as several times the simulator's tokens (the real tiny model: 2,564 for the
/// 3,000-character prompt the simulator counts as about 660), and each generated token attends
/// to the tokens the server holds: the decode line placed its calls after a long prompt at a
/// quarter of their context, and read 0.25 ms a token at an empty context for the 0.1 the
/// server's counts give.
fn prompt_context(r: &CallRecord, sim_count: f64) -> f64 {
    r.prompt_eval_count.filter(|n| *n > 0).map_or(sim_count, |n| n as f64)
}

/// The mean context of calls of `tokens` each whose prompts the simulator counts as
/// `sim_count`: their prompts' ([`prompt_context`]) and half their answers'.
fn mean_context<'a>(recs: impl IntoIterator<Item = &'a CallRecord>, sim_count: f64, tokens: u32) -> Option<f64> {
    let v: Vec<f64> = recs.into_iter().map(|r| prompt_context(r, sim_count) + f64::from(tokens) / 2.0).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn spans(recs: &[CallRecord]) -> (Vec<f64>, Vec<f64>) {
    let t0 = recs.iter().map(|r| r.sent).min().unwrap_or_else(Instant::now);
    let at = |t: &Instant| t.saturating_duration_since(t0).as_secs_f64();
    (
        recs.iter().filter_map(|r| r.tokens.first().map(at)).collect(),
        recs.iter().filter_map(|r| r.tokens.last().map(at)).collect(),
    )
}

/// Coefficient of variation of a sample (at least two values, a positive mean).
fn cv(v: &[f64]) -> Option<f64> {
    let s = crate::stats::summarize(v);
    (s.n >= 2 && s.mean > 0.0).then(|| s.sd / s.mean)
}

async fn metadata(s: &Session<'_>, model: &str) -> Result<ModelMeta, String> {
    let show = s.post(0, "/api/show", serde_json::json!({"model": model})).await?;
    let tags = s.get(0, "/api/tags").await?;
    let want = tagged(model);
    let tag = tags["models"]
        .as_array()
        .and_then(|m| m.iter().find(|x| x["name"].as_str().is_some_and(|n| n.eq_ignore_ascii_case(&want))))
        .cloned()
        .unwrap_or_default();
    let info = &show["model_info"];
    let arch = info["general.architecture"].as_str().unwrap_or_default();
    let key = |k: &str| info[format!("{arch}.{k}")].as_u64().unwrap_or(0);
    let d = &show["details"];
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let parameters = show["parameters"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(char::is_whitespace)?;
            Some((k.to_string(), v.trim().trim_matches('"').to_string()))
        })
        .collect();
    Ok(ModelMeta {
        name: tag["name"].as_str().map_or(want, str::to_string),
        family: text(&d["family"]),
        parameter_size: text(&d["parameter_size"]),
        quantization_level: text(&d["quantization_level"]),
        size: tag["size"].as_u64().unwrap_or(0),
        size_loaded: None,
        digest: tag["digest"].as_str().map(|x| x.trim_start_matches("sha256:").to_string()).filter(|x| x.len() == 64),
        context_length: key("context_length").max(1),
        embedding_length: key("embedding_length").max(1),
        capabilities: show["capabilities"]
            .as_array()
            .map(|c| c.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
            .unwrap_or_else(|| vec!["completion".into()]),
        template: text(&show["template"]),
        parameters,
        license: match &show["license"] {
            serde_json::Value::Array(a) => a.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>().join("\n"),
            v => text(v),
        },
        cpu: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_at_a_load_grow_fourfold_from_twice_the_streams_to_128() {
        let plan = |max_streams| CalibratePlan {
            endpoints: vec![],
            model: "m".into(),
            max_streams,
            tokens: 8,
            reps: 2,
            timeout: Duration::from_secs(1),
            others: vec![],
        };
        assert_eq!(burst_sizes(&plan(3)), [8, 32, 128]);
        assert_eq!(burst_sizes(&plan(6)), [12, 48, 128]);
        assert_eq!(burst_sizes(&plan(40)), [80, 128]);
        assert_eq!(burst_sizes(&plan(100)), [128]);
    }
}
