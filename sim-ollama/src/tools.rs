//! Simulated tool calls: which tools a request offers, whether the model calls one, and with
//! what arguments.
//!
//! Shapes from Ollama's source: `api/types.go` (`Tool`, `ToolCall{ID, Function{Index, Name,
//! Arguments}}`, arguments an ordered JSON object), `server/routes.go` `toolCallId` (`call_` and
//! 8 characters of `[a-z0-9]`) and ChatHandler (a tool call leaves in a `done:false` chunk with
//! empty content once the parser has read all of it; the tokens of the call itself are never
//! sent as content), `openai/openai.go` `ToToolCalls` (arguments re-encoded as a JSON string,
//! with `index` and `type:"function"`) and `FinishChunk` (`stop` becomes `tool_calls`).
//!
//! The policy, by default: the model calls one tool when the last message is the user's (or a
//! system message), and answers in text after a tool result, so an ordinary agent loop (ask,
//! call, run the tool, send the result, answer) ends. Request options (simulator extensions,
//! ignored by real Ollama) change it: `sim_tool_call_probability` (0 to 1, default 1) and
//! `sim_tool_calls` (calls per turn, default 1; more is a parallel tool call; 0 never calls).

use crate::error::ApiError;
use crate::schema;
use crate::seed::SimRng;
use rand::RngExt;
use serde_json::{Map, Value};

/// A tool the request offers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolDef {
    pub(crate) name: String,
    /// The `parameters` JSON Schema (an empty object schema when absent).
    pub(crate) parameters: Value,
}

/// A tool call the simulated model makes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolCall {
    /// `call_` and 8 characters of `[a-z0-9]`, seeded.
    pub(crate) id: String,
    /// Position among this response's calls.
    pub(crate) index: usize,
    pub(crate) name: String,
    /// A JSON object valid against the tool's parameters.
    pub(crate) arguments: Value,
}

impl ToolCall {
    /// The text the model generates for this call (what its tokens are counted on), in the
    /// JSON form most tool-calling templates use.
    pub(crate) fn raw_text(&self) -> String {
        format!(
            "{{\"name\": {}, \"arguments\": {}}}",
            Value::String(self.name.clone()),
            serde_json::to_string(&self.arguments).unwrap_or_default()
        )
    }
}

/// Reads `tools` (`[]api.Tool`). The real server accepts whatever unmarshals into a tool; one
/// without a function name cannot be called, so the simulated model never picks it.
pub(crate) fn parse(tools: Option<&Vec<Value>>) -> Result<Vec<ToolDef>, ApiError> {
    let mut out = Vec::new();
    for t in tools.into_iter().flatten() {
        let Value::Object(t) = t else {
            return Err(ApiError::bad_request(format!(
                "json: cannot unmarshal {} into Go struct field ChatRequest.tools of type api.Tool",
                crate::request::json_kind(t)
            )));
        };
        let f = t.get("function").and_then(Value::as_object);
        let name = f.and_then(|f| f.get("name")).and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            continue;
        }
        let parameters = f
            .and_then(|f| f.get("parameters"))
            .filter(|p| p.is_object())
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::from_iter([("type".to_string(), Value::from("object"))])));
        out.push(ToolDef { name: name.to_string(), parameters });
    }
    Ok(out)
}

/// When the model calls tools.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Policy {
    /// Chance of calling when the turn is the user's.
    pub(crate) probability: f64,
    /// Calls per turn (parallel tool calls when more than one).
    pub(crate) max_calls: usize,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { probability: 1.0, max_calls: 1 }
    }
}

/// The calls of one response: none unless tools are offered and the last message asks for
/// work (the user's or a system message; after a tool result or an assistant message the
/// model answers in text).
pub(crate) fn plan(tools: &[ToolDef], last_role: Option<&str>, policy: Policy, rng: &mut SimRng) -> Vec<ToolCall> {
    if tools.is_empty() || policy.max_calls == 0 || !matches!(last_role, Some("user") | Some("system")) {
        return Vec::new();
    }
    if !rng.random_bool(policy.probability.clamp(0.0, 1.0)) {
        return Vec::new();
    }
    (0..policy.max_calls)
        .map(|index| {
            let tool = &tools[rng.random_range(0..tools.len())];
            let mut arguments = schema::synthesize(&tool.parameters, rng, 2);
            if !arguments.is_object() {
                // A parameters schema that is not an object schema: arguments are an object
                // on the wire whatever it says.
                arguments = Value::Object(Map::new());
            }
            ToolCall { id: call_id(rng), index, name: tool.name.clone(), arguments }
        })
        .collect()
}

/// Scripted calls, with seeded ids.
pub(crate) fn scripted(calls: &[crate::script::ScriptedCall], rng: &mut SimRng) -> Vec<ToolCall> {
    calls
        .iter()
        .enumerate()
        .map(|(index, c)| ToolCall { id: call_id(rng), index, name: c.name.clone(), arguments: c.arguments.clone() })
        .collect()
}

fn call_id(rng: &mut SimRng) -> String {
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let s: String = (0..8).map(|_| LETTERS[rng.random_range(0..LETTERS.len())] as char).collect();
    format!("call_{s}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use serde_json::json;

    fn weather() -> Vec<ToolDef> {
        parse(Some(&vec![json!({"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})]))
        .unwrap()
    }

    #[test]
    fn a_user_turn_calls_a_tool_and_a_tool_result_is_answered_in_text() {
        let mut rng = SimRng::seed_from_u64(1);
        let calls = plan(&weather(), Some("user"), Policy::default(), &mut rng);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "get_weather");
        assert!(calls[0].arguments["city"].is_string());
        assert!(calls[0].id.starts_with("call_") && calls[0].id.len() == 13, "{}", calls[0].id);
        assert!(plan(&weather(), Some("tool"), Policy::default(), &mut rng).is_empty());
        assert!(plan(&[], Some("user"), Policy::default(), &mut rng).is_empty());
        let two = plan(&weather(), Some("user"), Policy { probability: 1.0, max_calls: 2 }, &mut rng);
        assert_eq!(two.iter().map(|c| c.index).collect::<Vec<_>>(), [0, 1]);
        assert!(plan(&weather(), Some("user"), Policy { probability: 0.0, max_calls: 1 }, &mut rng).is_empty());
    }

    #[test]
    fn a_tool_without_a_name_is_never_called() {
        assert!(parse(Some(&vec![json!({"type": "function", "function": {}})])).unwrap().is_empty());
        assert!(parse(Some(&vec![json!(3)])).is_err());
    }
}
