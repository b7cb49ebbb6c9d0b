//! `/v1/responses`' request as the real middleware reads it (`ResponsesMiddleware`,
//! middleware/openai.go v0.33.0-rc2 1154-1180): bound by `ShouldBindJSON` into
//! `openai.ResponsesRequest` (openai/responses.go 368-413), whose `input` decodes itself item by
//! item (`ResponsesInput.UnmarshalJSON` and the items' and contents' own, 62-332), then turned
//! into a chat request by `FromResponsesRequest` (416-621), each step with its own errors.

use super::history::ChatMessage;
use crate::error::ApiError;
use crate::gotype::{self, Failure, Go, GoStruct, TOOL_FUNCTION_PARAMETERS};
use serde_json::{Map, Value};

/// `openai.ResponsesRequest`.
static REQUEST: GoStruct = GoStruct {
    name: "ResponsesRequest",
    type_name: "openai.ResponsesRequest",
    fields: &[
        ("model", Go::String),
        ("background", Go::Bool),
        ("conversation", Go::Any),
        ("include", Go::Slice("[]string", &Go::String)),
        ("input", Go::Own(input_decodes)),
        ("instructions", Go::String),
        ("max_output_tokens", Go::Int),
        ("reasoning", Go::Struct(&REASONING)),
        ("temperature", Go::Float64),
        ("text", Go::Struct(&TEXT)),
        ("top_p", Go::Float64),
        ("truncation", Go::String),
        ("tools", Go::Slice("[]openai.ResponsesTool", &TOOL_TYPE)),
        ("stream", Go::Bool),
    ],
};

static REASONING: GoStruct = GoStruct {
    name: "ResponsesReasoning",
    type_name: "openai.ResponsesReasoning",
    fields: &[("effort", Go::String), ("generate_summary", Go::String), ("summary", Go::String)],
};

static TEXT: GoStruct =
    GoStruct { name: "ResponsesText", type_name: "openai.ResponsesText", fields: &[("format", Go::Struct(&FORMAT))] };

static FORMAT: GoStruct = GoStruct {
    name: "ResponsesTextFormat",
    type_name: "openai.ResponsesTextFormat",
    fields: &[("type", Go::String), ("name", Go::String), ("schema", Go::Any), ("strict", Go::Bool)],
};

static TOOL: GoStruct = GoStruct {
    name: "ResponsesTool",
    type_name: "openai.ResponsesTool",
    fields: &[
        ("type", Go::String),
        ("name", Go::String),
        ("description", Go::String),
        ("strict", Go::Bool),
        ("parameters", Go::Map("map[string]interface {}")),
        ("tools", Go::Slice("[]openai.ResponsesTool", &TOOL_TYPE)),
    ],
};

static TOOL_TYPE: Go = Go::Struct(&TOOL);

/// The struct `unmarshalResponsesInputItem` first reads an item into, to pick its type.
static TYPE_AND_ROLE: GoStruct = GoStruct {
    name: "",
    type_name: "struct { Type string \"json:\\\"type\\\"\"; Role string \"json:\\\"role\\\"\" }",
    fields: &[("type", Go::String), ("role", Go::String)],
};

/// The struct `unmarshalResponsesContent` first reads a content part into.
static TYPE_ONLY: GoStruct =
    GoStruct { name: "", type_name: "struct { Type string \"json:\\\"type\\\"\" }", fields: &[("type", Go::String)] };

static FUNCTION_CALL: GoStruct = GoStruct {
    name: "ResponsesFunctionCall",
    type_name: "openai.ResponsesFunctionCall",
    fields: &[
        ("id", Go::String),
        ("type", Go::String),
        ("call_id", Go::String),
        ("name", Go::String),
        ("arguments", Go::String),
    ],
};

/// What `ResponsesFunctionCallOutput.UnmarshalJSON` reads first (`output` raw).
static FUNCTION_CALL_OUTPUT: GoStruct = GoStruct {
    name: "",
    type_name: "struct { Type string \"json:\\\"type\\\"\"; CallID string \"json:\\\"call_id\\\"\"; Output json.RawMessage \"json:\\\"output\\\"\" }",
    fields: &[("type", Go::String), ("call_id", Go::String), ("output", Go::Any)],
};

static REASONING_INPUT: GoStruct = GoStruct {
    name: "ResponsesReasoningInput",
    type_name: "openai.ResponsesReasoningInput",
    fields: &[
        ("id", Go::String),
        ("type", Go::String),
        ("summary", Go::Slice("[]openai.ResponsesReasoningSummary", &SUMMARY_TYPE)),
        ("encrypted_content", Go::String),
    ],
};

static SUMMARY_TYPE: Go = Go::Struct(&SUMMARY);

static SUMMARY: GoStruct = GoStruct {
    name: "ResponsesReasoningSummary",
    type_name: "openai.ResponsesReasoningSummary",
    fields: &[("type", Go::String), ("text", Go::String)],
};

static WEB_SEARCH_CALL: GoStruct = GoStruct {
    name: "ResponsesWebSearchCall",
    type_name: "openai.ResponsesWebSearchCall",
    fields: &[("id", Go::String), ("type", Go::String), ("status", Go::String), ("action", Go::Struct(&ACTION))],
};

static ACTION: GoStruct = GoStruct {
    name: "ResponsesWebSearchAction",
    type_name: "openai.ResponsesWebSearchAction",
    fields: &[("type", Go::String), ("query", Go::String)],
};

static TEXT_CONTENT: GoStruct = GoStruct {
    name: "ResponsesTextContent",
    type_name: "openai.ResponsesTextContent",
    fields: &[("type", Go::String), ("text", Go::String)],
};

static OUTPUT_TEXT_CONTENT: GoStruct = GoStruct {
    name: "ResponsesOutputTextContent",
    type_name: "openai.ResponsesOutputTextContent",
    fields: &[("type", Go::String), ("text", Go::String)],
};

static IMAGE_CONTENT: GoStruct = GoStruct {
    name: "ResponsesImageContent",
    type_name: "openai.ResponsesImageContent",
    fields: &[("type", Go::String), ("detail", Go::String), ("file_id", Go::String), ("image_url", Go::String)],
};

static FILE_CONTENT: GoStruct = GoStruct {
    name: "ResponsesFileContent",
    type_name: "openai.ResponsesFileContent",
    fields: &[
        ("type", Go::String),
        ("file_data", Go::String),
        ("file_id", Go::String),
        ("file_url", Go::String),
        ("filename", Go::String),
    ],
};

/// One part of a message's content (or of a tool's output).
#[derive(Debug, Clone, PartialEq)]
enum Part {
    /// `input_text`, `output_text`.
    Text(String),
    /// `input_image`: its `image_url` (empty: skipped, as a `file_id` is).
    Image(String),
    /// `input_file`: refused when converted.
    File,
}

/// One item of `input`.
#[derive(Debug, Clone, PartialEq)]
enum Item {
    Message {
        role: String,
        content: Vec<Part>,
    },
    FunctionCall {
        call_id: String,
        name: String,
        arguments: String,
    },
    FunctionCallOutput {
        call_id: String,
        output: Vec<Part>,
    },
    /// `reasoning` and `web_search_call`: history kept out of the prompt here.
    Other,
}

/// `input`: a string, or items.
#[derive(Debug, Default)]
struct Input {
    text: String,
    items: Vec<Item>,
}

fn bad(e: Failure) -> ApiError {
    ApiError::bad_request(e.text()).from_middleware()
}

/// Binds a request body (`ShouldBindJSON`) and converts its history (`FromResponsesRequest`'s
/// messages): the chat messages, or the first error as the middleware answers it.
pub(crate) fn bind(body: &crate::request::Body) -> Result<Vec<ChatMessage>, ApiError> {
    let map = &body.map;
    // A field that came twice is bound at each of its places.
    let bound = if body.repeats() {
        gotype::check_entries(body.occurrences(), &REQUEST)
    } else {
        gotype::check_object(map, &REQUEST)
    };
    bound.map_err(bad)?;
    let input = decode_input(gotype::field(map, "input").unwrap_or(&Value::Null)).map_err(bad)?;
    let mut messages = Vec::new();
    let instructions = gotype::string_field(map, "instructions");
    if !instructions.is_empty() {
        messages.push(message("system", instructions, 0, String::new()));
    }
    if !input.text.is_empty() {
        messages.push(message("user", input.text, 0, String::new()));
    }
    for item in input.items {
        match item {
            Item::Message { role, content } => {
                let (text, images) = converted(&content)?;
                messages.push(message(&role, text, images, String::new()));
            }
            Item::FunctionCall { call_id, name, arguments } => {
                function_arguments(&arguments)?;
                let call = serde_json::json!({"id": call_id, "function": {"name": name, "arguments": arguments}});
                match messages.last_mut().filter(|m| m.role == "assistant") {
                    Some(m) => m.tool_text.push_str(&call.to_string()),
                    None => messages.push(message("assistant", String::new(), 0, call.to_string())),
                }
            }
            Item::FunctionCallOutput { call_id, output } => {
                let (text, images) = converted(&output)?;
                messages.push(message("tool", text, images, call_id));
            }
            Item::Other => {}
        }
    }
    Ok(messages)
}

fn message(role: &str, content: String, images: usize, tool_text: String) -> ChatMessage {
    ChatMessage { role: role.to_string(), content, images, tool_text }
}

/// `convertResponsesContent`: the text and the number of images, or why not.
fn converted(parts: &[Part]) -> Result<(String, usize), ApiError> {
    let (mut text, mut images) = (String::new(), 0);
    for p in parts {
        match p {
            Part::Text(t) => text.push_str(t),
            Part::Image(url) if url.is_empty() => {}
            Part::Image(url) => {
                crate::request::decode_image_url(url)?;
                images += 1;
            }
            Part::File => {
                return Err(ApiError::bad_request("file inputs are not currently supported").from_middleware());
            }
        }
    }
    Ok((text, images))
}

/// A replayed call's arguments decode into `api.ToolCallFunctionArguments` (an ordered map read
/// with `buger/jsonparser`): a JSON object, or nothing.
fn function_arguments(arguments: &str) -> Result<(), ApiError> {
    if arguments.is_empty() {
        return Ok(());
    }
    let why = match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(_)) => return Ok(()),
        Ok(_) => "Value looks like object, but can't find closing '}' symbol".to_string(),
        Err(e) => crate::goscan::syntax_error(arguments.as_bytes(), true).unwrap_or_else(|| e.to_string()),
    };
    Err(ApiError::bad_request(format!("failed to parse function call arguments: {why}")).from_middleware())
}

/// The chat request's tools (`[]api.Tool` as JSON) from the request's (`convertTools` and
/// `convertTool`, openai/responses.go 662-714): a `namespace`'s members with its name before
/// theirs, the built-in `web_search` as a function of that name (a declared function of the
/// same name left out), any other type as it is. Each tool's parameters must decode into
/// `api.ToolFunctionParameters` (`convertTool` marshals the map, so with its keys sorted, and
/// unmarshals it).
pub(crate) fn chat_tools(tools: &[Value]) -> Result<Vec<Value>, ApiError> {
    let web_search = tools.iter().any(|t| t.get("type").and_then(Value::as_str) == Some("web_search"));
    let mut out = Vec::new();
    for t in tools.iter().filter_map(Value::as_object) {
        if gotype::string_field(t, "type") == "web_search" {
            out.push(serde_json::json!({"type": "function", "function": {"name": "web_search",
                "description": "Search the web for current information.",
                "parameters": {"type": "object", "required": ["query"],
                    "properties": {"query": {"type": "string", "description": "The search query."}}}}}));
            continue;
        }
        for tool in converted_tool(t)? {
            if !(web_search && tool["function"]["name"] == "web_search") {
                out.push(tool);
            }
        }
    }
    Ok(out)
}

fn converted_tool(t: &Map<String, Value>) -> Result<Vec<Value>, ApiError> {
    let (kind, name) = (gotype::string_field(t, "type"), gotype::string_field(t, "name"));
    if kind == "namespace" {
        let mut out = Vec::new();
        for member in gotype::field(t, "tools").and_then(Value::as_array).into_iter().flatten() {
            for mut tool in member.as_object().map(converted_tool).transpose()?.into_iter().flatten() {
                let prefix = format!("{name}.");
                let inner = tool["function"]["name"].as_str().unwrap_or_default().to_string();
                if !name.is_empty() && !inner.starts_with(&prefix) {
                    tool["function"]["name"] = Value::from(format!("{prefix}{inner}"));
                }
                out.push(tool);
            }
        }
        return Ok(out);
    }
    let parameters = gotype::field(t, "parameters").filter(|p| p.is_object());
    if let Some(p) = parameters {
        gotype::check(&crate::gojson::sorted(p.clone()), Go::Struct(&TOOL_FUNCTION_PARAMETERS)).map_err(|e| {
            ApiError::bad_request(format!("failed to unmarshal tool parameters: {}", e.text())).from_middleware()
        })?;
    }
    Ok(vec![serde_json::json!({"type": kind, "function": {"name": name,
        "description": gotype::field(t, "description"), "parameters": parameters}})])
}

/// `ResponsesInput.UnmarshalJSON`, for the binding: whether it decodes.
fn input_decodes(v: &Value) -> Result<(), Failure> {
    decode_input(v).map(drop)
}

/// `ResponsesInput.UnmarshalJSON` (openai/responses.go 305-332).
fn decode_input(v: &Value) -> Result<Input, Failure> {
    match v {
        Value::Null => Ok(Input::default()),
        Value::String(s) => Ok(Input { text: s.clone(), items: Vec::new() }),
        Value::Array(raw) => {
            let items = raw
                .iter()
                .enumerate()
                .map(|(i, item)| input_item(item).map_err(|e| Failure::Other(format!("input[{i}]: {}", e.text()))))
                .collect::<Result<_, _>>()?;
            Ok(Input { text: String::new(), items })
        }
        other => Err(not_string_or_array("input", other)),
    }
}

fn not_string_or_array(what: &str, v: &Value) -> Failure {
    Failure::Other(format!("{what} must be a string or array: {}", Failure::type_at_top(v, "[]json.RawMessage").text()))
}

/// `unmarshalResponsesInputItem` (242-302): the item's type (a `role` alone makes a message),
/// then the item read as its type.
fn input_item(item: &Value) -> Result<Item, Failure> {
    gotype::check(item, Go::Struct(&TYPE_AND_ROLE))?;
    let empty = Map::new();
    let obj = item.as_object().unwrap_or(&empty);
    let get = |name: &str| gotype::string_field(obj, name);
    let (kind, role) = (get("type"), get("role"));
    let as_struct = |s: &'static GoStruct| gotype::check(item, Go::Struct(s));
    match (kind.as_str(), role.is_empty()) {
        ("message", _) | ("", false) => {
            let content = match gotype::field(obj, "content") {
                None => Vec::new(),
                Some(c) => parts("content", c)?,
            };
            Ok(Item::Message { role, content })
        }
        ("function_call", _) => {
            as_struct(&FUNCTION_CALL)?;
            Ok(Item::FunctionCall { call_id: get("call_id"), name: get("name"), arguments: get("arguments") })
        }
        ("function_call_output", _) => {
            as_struct(&FUNCTION_CALL_OUTPUT)?;
            let output = match gotype::field(obj, "output") {
                None => Vec::new(),
                Some(o) => parts("output", o)?,
            };
            Ok(Item::FunctionCallOutput { call_id: get("call_id"), output })
        }
        ("reasoning", _) => as_struct(&REASONING_INPUT).map(|()| Item::Other),
        ("web_search_call", _) => as_struct(&WEB_SEARCH_CALL).map(|()| Item::Other),
        ("", true) => Err(Failure::Other("input item missing required 'type' field".into())),
        (other, _) => Err(Failure::Other(format!("unknown input item type: {}", crate::gojson::go_quote(other)))),
    }
}

/// A message's `content` or a tool's `output`: a string (`null`: an empty one), or parts.
fn parts(what: &str, v: &Value) -> Result<Vec<Part>, Failure> {
    match v {
        Value::Null => Ok(vec![Part::Text(String::new())]),
        Value::String(s) => Ok(vec![Part::Text(s.clone())]),
        Value::Array(raw) => raw
            .iter()
            .enumerate()
            .map(|(j, p)| part(p).map_err(|e| Failure::Other(format!("{what}[{j}]: {}", e.text()))))
            .collect(),
        other => Err(not_string_or_array(what, other)),
    }
}

/// `unmarshalResponsesContent` (107-150).
fn part(v: &Value) -> Result<Part, Failure> {
    gotype::check(v, Go::Struct(&TYPE_ONLY))?;
    let empty = Map::new();
    let obj = v.as_object().unwrap_or(&empty);
    let kind = gotype::string_field(obj, "type");
    let as_struct = |s: &'static GoStruct| gotype::check(v, Go::Struct(s));
    match kind.as_str() {
        "input_text" => as_struct(&TEXT_CONTENT).map(|()| Part::Text(gotype::string_field(obj, "text"))),
        "output_text" => as_struct(&OUTPUT_TEXT_CONTENT).map(|()| Part::Text(gotype::string_field(obj, "text"))),
        "input_image" => as_struct(&IMAGE_CONTENT).map(|()| Part::Image(gotype::string_field(obj, "image_url"))),
        "input_file" => as_struct(&FILE_CONTENT).map(|()| Part::File),
        other => Err(Failure::Other(format!("unknown content type: {other}"))),
    }
}
