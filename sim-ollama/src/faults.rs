//! Injected faults, by rule and seeded: HTTP errors before streaming, an error line
//! mid-stream, stalls, disconnects, truncated streams, malformed lines, slow headers.
//! Rules come from the configuration's `[[faults]]` tables and can be replaced at run time
//! over HTTP (`GET`/`PUT`/`POST`/`DELETE /sim/faults`).

use crate::rules::{Filter, Rule, RuleSet};
use crate::seed::SeedBuilder;
use rand::RngExt;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Most fault rules in force at once: the one cap of the rule set ([`crate::rules::MAX_RULES`]).
pub use crate::rules::MAX_RULES;

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Answer with an HTTP error (`status`) before anything is streamed.
    HttpError,
    /// After the trigger, write one `{"error":...}` line and end the stream (no `done`).
    ErrorLine,
    /// After the trigger, stop sending for `duration_ms` (forever when absent), then go on.
    Stall,
    /// After the trigger, drop the connection without ending the HTTP body.
    Disconnect,
    /// After the trigger, end the body cleanly but without the final `done` object.
    Truncate,
    /// After the trigger, write one line that is not valid JSON, then go on.
    MalformedLine,
    /// Hold the response headers (and the first token) back for `duration_ms`.
    SlowHeaders,
}

/// A fault rule. Filters (`instance`, `model`, `endpoint`) narrow which requests it applies
/// to; `every` and `probability` choose among those; `after_tokens` / `after_ms` say when a
/// mid-stream fault strikes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// What happens.
    pub kind: FaultKind,
    /// Only this instance (0-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<usize>,
    /// Only this model (name as in the catalogue; tag defaults to `latest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Only this path (`/api/generate`, `/api/chat`, `/v1/chat/completions`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Every n-th matching request (1 = each one).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub every: u64,
    /// Chance that a chosen request is hit (seeded by the master seed).
    #[serde(default = "full", skip_serializing_if = "is_full")]
    pub probability: f64,
    /// Mid-stream faults strike after this many tokens (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_tokens: Option<u64>,
    /// ...or after this many milliseconds of streaming (wall time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_ms: Option<u64>,
    /// Length of a stall or of slow headers, milliseconds (wall time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// HTTP status of an `http_error` (default 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Error text (defaults to what the real server says for that status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

fn one() -> u64 {
    1
}
fn is_one(v: &u64) -> bool {
    *v == 1
}
fn full() -> f64 {
    1.0
}
fn is_full(v: &f64) -> bool {
    *v >= 1.0
}

impl FaultRule {
    /// Checks the rule, naming what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.every == 0 {
            return Err("fault: every must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.probability) {
            return Err(format!("fault: probability must be in [0, 1], got {}", self.probability));
        }
        if let Some(s) = self.status {
            if !(400..=599).contains(&s) {
                return Err(format!("fault: status must be a 4xx or 5xx code, got {s}"));
            }
        }
        if self.kind == FaultKind::SlowHeaders && self.duration_ms.is_none() {
            return Err("fault: slow_headers needs duration_ms".into());
        }
        Ok(())
    }

    fn matches(&self, instance: usize, model_key: &str, endpoint: &str) -> bool {
        self.instance.is_none_or(|i| i == instance)
            && Filter { model: self.model.as_deref(), endpoint: self.endpoint.as_deref() }.matches(model_key, endpoint)
    }

    /// The error text of an error fault.
    pub(crate) fn message_or_default(&self) -> String {
        if let Some(m) = &self.message {
            return m.clone();
        }
        match self.status.unwrap_or(500) {
            503 => "server busy, please try again.  maximum pending requests exceeded".into(),
            404 => "model not found".into(),
            429 => "too many requests".into(),
            _ => "model runner has unexpectedly stopped, this may be due to resource limitations or an internal error, check ollama server logs for details".into(),
        }
    }

    /// When a mid-stream fault strikes.
    pub(crate) fn trigger(&self) -> Trigger {
        match (self.after_ms, self.after_tokens) {
            (Some(ms), _) => Trigger::AfterTime(Duration::from_millis(ms)),
            (None, t) => Trigger::AfterTokens(t.unwrap_or(1)),
        }
    }

    /// One-line description for the trace.
    pub(crate) fn describe(&self) -> String {
        let mut s =
            serde_json::to_value(self.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        if let Some(st) = self.status {
            s.push_str(&format!(" {st}"));
        }
        match self.trigger() {
            _ if matches!(self.kind, FaultKind::HttpError | FaultKind::SlowHeaders) => {}
            Trigger::AfterTime(d) => s.push_str(&format!(" after {} ms", d.as_millis())),
            Trigger::AfterTokens(n) => s.push_str(&format!(" after {n} tokens")),
        }
        if let Some(d) = self.duration_ms {
            s.push_str(&format!(" for {d} ms"));
        }
        s
    }
}

/// When a mid-stream fault strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trigger {
    AfterTokens(u64),
    AfterTime(Duration),
}

impl Rule for FaultRule {
    const WHAT: &'static str = "fault rules";
    const KEY: &'static str = "faults";
    fn validate(&self) -> Result<(), String> {
        FaultRule::validate(self)
    }
}

/// The fault rules in force, seeded.
#[derive(Debug)]
pub(crate) struct Faults {
    seed: u64,
    /// The rules, with a counter of matching requests each.
    pub(crate) rules: RuleSet<FaultRule>,
}

impl Faults {
    pub(crate) fn new(seed: u64, rules: Vec<FaultRule>) -> Self {
        Faults { seed, rules: RuleSet::new(rules) }
    }

    /// The fault a request gets, if any: the first rule that matches and chooses it.
    pub(crate) fn pick(&self, instance: usize, model_key: &str, endpoint: &str) -> Option<FaultRule> {
        let mut rules = self.rules.lock();
        for (i, (rule, count)) in rules.iter_mut().enumerate() {
            if !rule.matches(instance, model_key, endpoint) {
                continue;
            }
            *count += 1;
            if *count % rule.every.max(1) != 0 {
                continue;
            }
            if rule.probability < 1.0 {
                let mut rng = SeedBuilder::new(self.seed).str("fault").u64(i as u64).u64(*count).rng();
                if !rng.random_bool(rule.probability) {
                    continue;
                }
            }
            return Some(rule.clone());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(kind: FaultKind) -> FaultRule {
        serde_json::from_value(serde_json::json!({ "kind": kind })).unwrap()
    }

    #[test]
    fn every_nth_matching_request_is_picked() {
        let mut r = rule(FaultKind::HttpError);
        r.every = 3;
        r.model = Some("tiny".into());
        let f = Faults::new(1, vec![r]);
        let key = crate::names::Name::parse("tiny").unwrap().key();
        let picks: Vec<bool> = (0..6).map(|_| f.pick(0, &key, "/api/generate").is_some()).collect();
        assert_eq!(picks, [false, false, true, false, false, true]);
        assert!(f.pick(0, "other", "/api/generate").is_none(), "the model filter applies");
    }

    #[test]
    fn probability_is_seeded_and_roughly_right() {
        let mut r = rule(FaultKind::Disconnect);
        r.probability = 0.3;
        let count = |seed| {
            let f = Faults::new(seed, vec![r.clone()]);
            (0..1000).filter(|_| f.pick(0, "m", "/api/chat").is_some()).count()
        };
        assert_eq!(count(5), count(5), "same seed, same choices");
        let n = count(5);
        assert!((240..360).contains(&n), "{n} of 1000 at p=0.3");
    }

    #[test]
    fn bad_rules_are_rejected_with_a_reason() {
        let mut r = rule(FaultKind::HttpError);
        r.status = Some(200);
        assert!(r.validate().unwrap_err().contains("status"));
        assert!(rule(FaultKind::SlowHeaders).validate().unwrap_err().contains("duration_ms"));
    }
}
