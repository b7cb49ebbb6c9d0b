//! The rules in force, each counting the requests that matched it: the one rule set that
//! faults (`faults.rs`) and scripted answers (`script.rs`) are kept in, read from the
//! configuration and replaced, extended or cleared at run time over HTTP (`/sim/faults`,
//! `/sim/script`).

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::{Mutex, MutexGuard};

/// Most rules of one kind in force at once. Every model request walks the rules in force under
/// one lock, so a long-running simulator fed rules over HTTP must not let the list grow without
/// bound; 1,024 is far more than any test scripts (one rule per scripted turn of every agent)
/// and keeps the walk to microseconds.
pub const MAX_RULES: usize = 1024;

/// A kind of rule.
pub(crate) trait Rule: Clone + Serialize + DeserializeOwned {
    /// What a list of them is called in messages ("fault rules").
    const WHAT: &'static str;
    /// The key of the list in the `/sim` endpoints' documents (`{"faults": [...]}`).
    const KEY: &'static str;
    /// Checks one rule, with the reason it is refused.
    fn validate(&self) -> Result<(), String>;
}

/// What a rule may choose its requests by; each filter left out matches every request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Filter<'a> {
    /// The model, as a name the catalogue resolves (`gemma3` is `gemma3:latest`).
    pub(crate) model: Option<&'a str>,
    /// The endpoint's path.
    pub(crate) endpoint: Option<&'a str>,
}

impl Filter<'_> {
    /// Whether a request for the model `model_key` (its resolved key) on `endpoint` matches.
    pub(crate) fn matches(&self, model_key: &str, endpoint: &str) -> bool {
        self.endpoint.is_none_or(|e| e == endpoint)
            && self.model.is_none_or(|m| crate::names::Name::parse(m).is_some_and(|n| n.key() == model_key))
    }
}

/// Rules in force, in order, each with the number of requests that matched it.
#[derive(Debug)]
pub(crate) struct RuleSet<R> {
    rules: Mutex<Vec<(R, u64)>>,
}

impl<R: Rule> RuleSet<R> {
    /// The configured rules, their counters at 0.
    pub(crate) fn new(rules: Vec<R>) -> Self {
        RuleSet { rules: Mutex::new(rules.into_iter().map(|r| (r, 0)).collect()) }
    }

    /// The rules and their counters (a poisoned lock is still the rules: a panicking request
    /// cannot leave them half-written, every change replaces or extends the list whole).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<(R, u64)>> {
        self.rules.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The rules in force.
    pub(crate) fn list(&self) -> Vec<R> {
        self.lock().iter().map(|(r, _)| r.clone()).collect()
    }

    /// Replaces the rules (counters restart), after checking each and their number.
    pub(crate) fn set(&self, rules: Vec<R>) -> Result<(), String> {
        check(&rules)?;
        *self.lock() = rules.into_iter().map(|r| (r, 0)).collect();
        Ok(())
    }

    /// Adds rules after those in force (their counters at 0), after checking each and that
    /// the list stays within [`MAX_RULES`].
    pub(crate) fn add(&self, rules: Vec<R>) -> Result<(), String> {
        check(&rules)?;
        let mut g = self.lock();
        if g.len() + rules.len() > MAX_RULES {
            return Err(format!(
                "sim-ollama: at most {MAX_RULES} {} may be in force; DELETE /sim/{} or PUT a shorter list",
                R::WHAT,
                R::KEY
            ));
        }
        g.extend(rules.into_iter().map(|r| (r, 0)));
        Ok(())
    }

    /// Removes every rule.
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }
}

/// Checks rules and their number.
pub(crate) fn check<R: Rule>(rules: &[R]) -> Result<(), String> {
    if rules.len() > MAX_RULES {
        return Err(format!("sim-ollama: {} {}; at most {MAX_RULES} may be in force", rules.len(), R::WHAT));
    }
    rules.iter().try_for_each(R::validate)
}

/// Reads the rules of a `/sim` request body: `{"<key>": [...]}`, a bare array, or one rule
/// (checked by [`RuleSet::set`] or [`RuleSet::add`], which take them).
pub(crate) fn read<R: Rule>(body: &[u8]) -> Result<Vec<R>, String> {
    let bad = |e: serde_json::Error| format!("invalid {}: {e}", R::WHAT);
    let v: serde_json::Value = serde_json::from_slice(body).map_err(bad)?;
    match v {
        serde_json::Value::Array(_) => serde_json::from_value(v),
        serde_json::Value::Object(mut o) if o.contains_key(R::KEY) => {
            serde_json::from_value(o.remove(R::KEY).unwrap_or_default())
        }
        other => serde_json::from_value(other).map(|r| vec![r]),
    }
    .map_err(bad)
}

/// The `/sim` endpoints' document of the rules: `{"<key>": [...]}`.
pub(crate) fn document<R: Rule>(rules: Vec<R>) -> serde_json::Value {
    let mut o = serde_json::Map::new();
    o.insert(R::KEY.to_string(), serde_json::to_value(rules).unwrap_or_default());
    serde_json::Value::Object(o)
}
