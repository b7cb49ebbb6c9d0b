//! The simulator's own endpoints: `GET /sim/trace`, `DELETE /sim/trace`, `GET /sim/metrics`,
//! `POST /sim/mark`, `POST /sim/probe`, `POST /sim/confirm`, `GET /sim/judge`, and the fault and script rules. They are served by every
//! instance and cover the whole simulator.

use super::http::{AppState, body_bytes, json_response};
use crate::error::ApiError;
use crate::faults::FaultRule;
use crate::rules::{self, Rule, RuleSet};
use crate::script::ScriptRule;
use crate::shared::Shared;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// `GET /sim/trace`: every request so far (schema in `docs/trace.md`).
pub(crate) async fn get_trace(State(s): State<AppState>) -> Response {
    json_response(StatusCode::OK, &s.shared.trace.snapshot())
}

/// `DELETE /sim/trace`: forgets finished requests (and the mark: what is left is judged).
pub(crate) async fn delete_trace(State(s): State<AppState>) -> Response {
    s.shared.trace.clear();
    s.shared.mark.store(0, std::sync::atomic::Ordering::Relaxed);
    end_probe(&s.shared);
    StatusCode::OK.into_response()
}

/// Ends a probe run, if one is in progress, and forgets where it began (and any
/// confirmation run).
fn end_probe(shared: &Shared) {
    shared.probe.end();
    shared.probe_mark.store(0, std::sync::atomic::Ordering::Relaxed);
    *shared.confirm.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// `POST /sim/mark`: `GET /sim/judge` judges only requests that arrive after this, until the
/// next mark or `DELETE /sim/trace`. Answers `{"mark": ID}`, the id the next request gets.
pub(crate) async fn post_mark(State(s): State<AppState>) -> Response {
    let id = s.shared.trace.next_id();
    s.shared.mark.store(id, std::sync::atomic::Ordering::Relaxed);
    end_probe(&s.shared);
    json_response(StatusCode::OK, &serde_json::json!({ "mark": id }))
}

/// `POST /sim/probe`: the program judged since the mark is about to run again as a probe run
/// (docs/judge.md, "The gaps between calls"): from the next request on, the simulator holds
/// answers back so the agents do their local work one at a time, and `GET /sim/judge` then
/// compares the two runs. Answers `{"probe": ID, "agents": N, "one_at_a_time": B}`: the id
/// the probe run's first request gets, how many agents the plan knows, and whether it releases
/// one answer at a time (a program whose agents the judge cannot tell apart; `agents` is then
/// 0: the probe run finds them). One probe run per mark: a second is a
/// 400 until `POST /sim/mark` or `DELETE /sim/trace` starts over.
pub(crate) async fn post_probe(State(s): State<AppState>) -> Result<Response, ApiError> {
    use std::sync::atomic::Ordering::Relaxed;
    if s.shared.probe_mark.load(Relaxed) != 0 {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "probe: a probe run has already begun since the mark; POST /sim/mark (or DELETE /sim/trace) to start over",
        ));
    }
    wait_for_answers(&s.shared, JUDGE_WAIT_MS).await;
    let mut opts = crate::judge::JudgeOptions::new();
    if let Some(m) = marked(&s.shared) {
        opts = opts.since(m);
    }
    let plan = crate::judge::probe_plan(&s.shared.trace.snapshot(), &opts);
    let one_at_a_time = plan.serial.is_some();
    let agents = if one_at_a_time { 0 } else { plan.gaps.len() };
    let id = s.shared.trace.next_id();
    s.shared.probe_mark.store(id, Relaxed);
    s.shared.probe.begin(plan, tokio::runtime::Handle::current());
    Ok(json_response(
        StatusCode::OK,
        &serde_json::json!({ "probe": id, "agents": agents, "one_at_a_time": one_at_a_time }),
    ))
}

/// `POST /sim/confirm?run=plain|probe`: after the probe run, where the report asks for a
/// confirmation (`"confirm": "plain"` or `"probe"`), the program is about to run a third time,
/// repeating that run (docs/judge.md, "A confirmation run"): a probe run in progress ends, and
/// a repeated probe run holds answers as the first did; `GET /sim/judge` then judges both
/// pairs. `run` is the report's `confirm` (without it, the judge's own report on the runs since
/// the mark decides, with no other option). Answers `{"confirm": ID, "run": RUN}`: the id the
/// confirmation's first request gets. One per probe run; before a probe run, or where the
/// report asks for none, a 400.
pub(crate) async fn post_confirm(
    State(s): State<AppState>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Result<Response, ApiError> {
    use crate::judge::ConfirmRun;
    use std::sync::atomic::Ordering::Relaxed;
    let bad = |m: &str| ApiError::new(StatusCode::BAD_REQUEST, m.to_string());
    let mut run = None;
    for pair in query.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("run", "plain") => run = Some(ConfirmRun::Plain),
            ("run", "probe") => run = Some(ConfirmRun::Probe),
            ("run", v) => return Err(bad(&format!("confirm: run must be plain or probe, got {v:?}"))),
            (k, _) => return Err(bad(&format!("confirm: unknown option {k:?}; the option is run"))),
        }
    }
    let probe_mark = s.shared.probe_mark.load(Relaxed);
    if probe_mark == 0 {
        return Err(bad("confirm: no probe run since the mark; POST /sim/probe and run the program first"));
    }
    if s.shared.confirm.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
        return Err(bad(
            "confirm: a confirmation run has already begun since the probe run; POST /sim/mark (or DELETE /sim/trace) to start over",
        ));
    }
    wait_for_answers(&s.shared, JUDGE_WAIT_MS).await;
    let mut opts = crate::judge::JudgeOptions::new().probe_since(probe_mark);
    if let Some(m) = marked(&s.shared) {
        opts = opts.since(m);
    }
    let run = match run {
        Some(r) => r,
        None => crate::judge::judge(&s.shared.trace.snapshot(), &opts).confirm.ok_or_else(|| {
            bad("confirm: the report on the runs since the mark asks for no confirmation (its verdict does not rest on waits a probe found)")
        })?,
    };
    let c = s.shared.begin_confirmation(&opts, run);
    *s.shared.confirm.lock().unwrap_or_else(|e| e.into_inner()) = Some((run, c.since));
    Ok(json_response(StatusCode::OK, &serde_json::json!({ "confirm": c.since, "run": run.as_str() })))
}

/// The mark `GET /sim/judge` judges from by default, if one was taken.
fn marked(shared: &Shared) -> Option<u64> {
    match shared.mark.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        m => Some(m),
    }
}

/// Waits, without blocking the runtime, until no request is in flight or `wait_ms` passed.
async fn wait_for_answers(shared: &Shared, wait_ms: u64) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(wait_ms);
    while shared.trace.in_flight() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

/// The options `GET /sim/judge` takes, as `harness exec` has them.
const JUDGE_OPTIONS: &str = "agents, since, expect, min_saving, min_speedup, wait_ms";

/// How long `GET /sim/judge` waits by default for requests still running to finish, and at most.
const JUDGE_WAIT_MS: u64 = 2_000;
const JUDGE_WAIT_MAX_MS: u64 = 60_000;

/// `GET /sim/judge?agents=N&since=ID&expect=VERDICT&min_saving=X&min_speedup=X&wait_ms=MS`: the
/// judge's report on the requests since the mark (`since` overrides it), once the requests in
/// flight have finished (at most `wait_ms`, default 2 s), with the expectations checked. The
/// answer is the judgement document (docs/judge.md); a bad option is a 400 in Ollama's error
/// shape naming the valid ones. Nothing to judge is a report saying so
/// (`inconclusive`, `nothing_to_judge`), never an empty answer.
pub(crate) async fn judge(
    State(s): State<AppState>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Result<Response, ApiError> {
    use crate::judge::{Expectations, JudgeOptions, Judgement, Verdict};
    let bad = |m: String| ApiError::new(StatusCode::BAD_REQUEST, m);
    let mut opts = JudgeOptions::new();
    let mut expect = Expectations::default();
    let mut since = marked(&s.shared);
    let mut wait_ms = JUDGE_WAIT_MS;
    let query = query.unwrap_or_default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let number = |what: &str| -> Result<f64, ApiError> {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| bad(format!("judge: {what} must be a number, got {v:?}")))
        };
        match k {
            "agents" => match v.parse::<usize>() {
                Ok(n) if n >= 1 => opts = opts.expected_agents(n),
                _ => return Err(bad(format!("judge: agents must be a whole number of at least 1, got {v:?}"))),
            },
            "since" => {
                since = Some(v.parse::<u64>().map_err(|_| bad(format!("judge: since must be a trace id, got {v:?}")))?)
            }
            "expect" => expect.verdict = Some(v.parse::<Verdict>().map_err(|e| bad(format!("judge: expect: {e}")))?),
            "min_saving" => {
                let x = number("min_saving")?;
                if !(0.0..=1.0).contains(&x) {
                    return Err(bad(format!("judge: min_saving must be between 0 and 1, got {v:?}")));
                }
                expect.min_saving = Some(x);
            }
            "min_speedup" => {
                let x = number("min_speedup")?;
                if x <= 0.0 {
                    return Err(bad(format!("judge: min_speedup must be above 0, got {v:?}")));
                }
                expect.min_speedup = Some(x);
            }
            "wait_ms" => {
                wait_ms = v
                    .parse::<u64>()
                    .ok()
                    .filter(|w| *w <= JUDGE_WAIT_MAX_MS)
                    .ok_or_else(|| bad(format!("judge: wait_ms must be 0-{JUDGE_WAIT_MAX_MS}, got {v:?}")))?
            }
            other => return Err(bad(format!("judge: unknown option {other:?}; the options are {JUDGE_OPTIONS}"))),
        }
    }
    if let Some(id) = since {
        opts = opts.since(id);
    }
    // Answers the program has read may still be finishing on the server: wait for them, as
    // harness exec does, without blocking the runtime. A probe run is over once its program
    // is: what it still holds goes out.
    wait_for_answers(&s.shared, wait_ms).await;
    s.shared.probe.end();
    match s.shared.probe_mark.load(std::sync::atomic::Ordering::Relaxed) {
        0 => {}
        p => opts = opts.probe_since(p),
    }
    if let Some((run, since)) = *s.shared.confirm.lock().unwrap_or_else(|e| e.into_inner()) {
        opts = opts.confirmation(crate::judge::Confirmation { run, since, void: None });
    }
    let trace = s.shared.trace.snapshot();
    if let Some(client) = &s.shared.client {
        opts = opts.client_cpu_samples(&client.samples(), &trace, s.shared.origin);
    }
    let report = crate::judge::judge(&trace, &opts);
    let failures = expect.check(&report);
    let doc = Judgement {
        schema_version: crate::judge::JUDGEMENT_SCHEMA_VERSION,
        seed: s.shared.cfg.seed,
        since,
        expectations: expect,
        passed: failures.is_empty(),
        failures,
        report,
    };
    Ok(json_response(StatusCode::OK, &doc))
}

/// `GET /sim/metrics`.
pub(crate) async fn metrics(State(s): State<AppState>) -> Response {
    json_response(StatusCode::OK, &s.shared.metrics())
}

/// A kind of rule the `/sim` endpoints serve (`/sim/faults`, `/sim/script`), and where the
/// simulator keeps it.
pub(crate) trait Served: Rule + Send + 'static {
    fn set_of(shared: &Shared) -> &RuleSet<Self>;
}

impl Served for FaultRule {
    fn set_of(shared: &Shared) -> &RuleSet<Self> {
        &shared.faults.rules
    }
}

impl Served for ScriptRule {
    fn set_of(shared: &Shared) -> &RuleSet<Self> {
        &shared.script.rules
    }
}

/// `GET /sim/faults`, `GET /sim/script`: the rules in force.
pub(crate) async fn get_rules<R: Served>(State(s): State<AppState>) -> Response {
    json_response(StatusCode::OK, &rules::document(R::set_of(&s.shared).list()))
}

/// `PUT /sim/faults`, `PUT /sim/script`: replaces the rules (counters restart). The body is
/// `{"faults": [...]}` (`{"script": [...]}`), a bare array, or one rule.
pub(crate) async fn put_rules<R: Served>(
    State(s): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let rules = rules::read::<R>(&body_bytes(body, s.shared.cfg.body_limit)?).map_err(ApiError::bad_request)?;
    let set = R::set_of(&s.shared);
    set.set(rules).map_err(ApiError::bad_request)?;
    Ok(json_response(StatusCode::OK, &rules::document(set.list())))
}

/// `POST /sim/faults`, `POST /sim/script`: adds rules after those in force.
pub(crate) async fn post_rules<R: Served>(
    State(s): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let rules = rules::read::<R>(&body_bytes(body, s.shared.cfg.body_limit)?).map_err(ApiError::bad_request)?;
    let set = R::set_of(&s.shared);
    set.add(rules).map_err(ApiError::bad_request)?;
    Ok(json_response(StatusCode::OK, &rules::document(set.list())))
}

/// `DELETE /sim/faults`, `DELETE /sim/script`: removes every rule.
pub(crate) async fn delete_rules<R: Served>(State(s): State<AppState>) -> Response {
    R::set_of(&s.shared).clear();
    json_response(StatusCode::OK, &rules::document(Vec::<R>::new()))
}
