//! Scripted turns: what the Nth matching call answers (a text, tool calls, an error), for exact
//! agent tests, like wiremock's mounted responses; the timing still comes from the model's
//! profile. Rules come from the configuration's `[[script]]` tables, the builder
//! ([`SimBuilder::script`](crate::SimBuilder::script)), and at run time from
//! `GET`/`PUT`/`POST`/`DELETE /sim/script`.
//!
//! ```toml
//! [[script]]
//! agent = "planner"          # the X-Agent header; absent = any request
//! call = 1                   # the 1st request this rule matches; absent = every one
//! tool_calls = [{ name = "search", arguments = { query = "runbooks" } }]
//!
//! [[script]]
//! agent = "planner"
//! call = 2
//! text = "The deploy runbook is docs/deploy.md."
//!
//! [[script]]
//! endpoint = "/api/chat"
//! call = 3
//! error = { status = 500, message = "model runner has unexpectedly stopped" }
//! ```
//!
//! Every rule counts the requests that match its filters (agent, model, endpoint), whether or
//! not it answers them; a request gets the first rule whose count is its `call` (or that has no
//! `call`). A text reply is cut by `num_predict` like any answer; tool calls are sent only on
//! chat endpoints (elsewhere their text is the answer, as a model without a tool parser would
//! write it). Arguments keep their key order when given as JSON (`/sim/script`, the builder);
//! from TOML they come sorted by key (the TOML reader's tables are ordered maps).

use crate::rules::{Filter, Rule, RuleSet};
use serde::{Deserialize, Serialize};

/// Most script rules in force at once: the one cap of the rule set ([`crate::rules::MAX_RULES`]).
pub use crate::rules::MAX_RULES;

/// A tool call a script makes the model answer with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    /// The function's name.
    pub name: String,
    /// Its arguments (a JSON object).
    #[serde(default = "empty_object")]
    pub arguments: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

/// An error a script makes the server answer with, in Ollama's error shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedError {
    /// HTTP status (4xx or 5xx).
    pub status: u16,
    /// The error text.
    pub message: String,
}

/// One scripted turn: which requests, which of them, and the answer (exactly one of `text`,
/// `tool_calls`, `error`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptRule {
    /// Only requests with this `X-Agent` header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Only this model (tag defaults to `latest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Only this path (`/api/chat`, `/v1/chat/completions`, `/api/generate`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The n-th matching request (1-based); absent = every matching request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<u64>,
    /// Answer with this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Answer with these tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ScriptedCall>>,
    /// Answer with this error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ScriptedError>,
}

/// What a scripted request answers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    Text(String),
    ToolCalls(Vec<ScriptedCall>),
    Error(ScriptedError),
}

impl ScriptRule {
    /// Checks the rule: one answer, a valid status, a positive call number, object arguments.
    pub fn validate(&self) -> Result<(), String> {
        let answers = [self.text.is_some(), self.tool_calls.is_some(), self.error.is_some()];
        if answers.iter().filter(|a| **a).count() != 1 {
            return Err("script rule: exactly one of text, tool_calls, error".into());
        }
        if self.call == Some(0) {
            return Err("script rule: call counts from 1".into());
        }
        if let Some(e) = &self.error {
            if !(400..=599).contains(&e.status) {
                return Err(format!("script rule: error status must be a 4xx or 5xx code, got {}", e.status));
            }
        }
        if let Some(calls) = &self.tool_calls {
            if calls.is_empty() || calls.iter().any(|c| c.name.is_empty() || !c.arguments.is_object()) {
                return Err("script rule: tool_calls need a name and object arguments each".into());
            }
        }
        Ok(())
    }

    fn matches(&self, agent: Option<&str>, model_key: &str, endpoint: &str) -> bool {
        self.agent.as_deref().is_none_or(|a| agent == Some(a))
            && Filter { model: self.model.as_deref(), endpoint: self.endpoint.as_deref() }.matches(model_key, endpoint)
    }

    fn reply(&self) -> Option<Reply> {
        match (&self.text, &self.tool_calls, &self.error) {
            (Some(t), _, _) => Some(Reply::Text(t.clone())),
            (_, Some(c), _) => Some(Reply::ToolCalls(c.clone())),
            (_, _, Some(e)) => Some(Reply::Error(e.clone())),
            _ => None,
        }
    }
}

impl Rule for ScriptRule {
    const WHAT: &'static str = "script rules";
    const KEY: &'static str = "script";
    fn validate(&self) -> Result<(), String> {
        ScriptRule::validate(self)
    }
}

/// The script rules in force.
#[derive(Debug)]
pub(crate) struct Script {
    /// The rules, with a counter of matching requests each.
    pub(crate) rules: RuleSet<ScriptRule>,
}

impl Script {
    pub(crate) fn new(rules: Vec<ScriptRule>) -> Self {
        Script { rules: RuleSet::new(rules) }
    }

    /// The scripted answer of a request, if any; counts the request on every rule it matches.
    pub(crate) fn pick(&self, agent: Option<&str>, model_key: &str, endpoint: &str) -> Option<Reply> {
        let mut g = self.rules.lock();
        let mut chosen = None;
        for (rule, count) in g.iter_mut() {
            if !rule.matches(agent, model_key, endpoint) {
                continue;
            }
            *count += 1;
            if chosen.is_none() && rule.call.is_none_or(|n| n == *count) {
                chosen = rule.reply();
            }
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(agent: &str, call: u64, t: &str) -> ScriptRule {
        ScriptRule { agent: Some(agent.into()), call: Some(call), text: Some(t.into()), ..ScriptRule::default() }
    }

    #[test]
    fn the_nth_matching_request_gets_its_rule_and_others_go_on_unscripted() {
        let s = Script::new(vec![text("a", 1, "one"), text("a", 2, "two"), text("b", 1, "b-one")]);
        let pick = |agent| s.pick(Some(agent), "llama3.2:1b", "/api/chat");
        assert_eq!(pick("a"), Some(Reply::Text("one".into())));
        assert_eq!(pick("b"), Some(Reply::Text("b-one".into())));
        assert_eq!(pick("a"), Some(Reply::Text("two".into())));
        assert_eq!(pick("a"), None);
        assert_eq!(s.pick(None, "llama3.2:1b", "/api/chat"), None);
    }

    #[test]
    fn bad_rules_are_refused() {
        let none = ScriptRule::default();
        assert!(none.validate().is_err());
        let two = ScriptRule {
            text: Some("x".into()),
            error: Some(ScriptedError { status: 500, message: "m".into() }),
            ..ScriptRule::default()
        };
        assert!(two.validate().is_err());
        let status =
            ScriptRule { error: Some(ScriptedError { status: 200, message: "m".into() }), ..ScriptRule::default() };
        assert!(status.validate().is_err());
        let zero = ScriptRule { call: Some(0), text: Some("x".into()), ..ScriptRule::default() };
        assert!(zero.validate().is_err());
    }
}
