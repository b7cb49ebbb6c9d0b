use crate::util::{Result, raw_blocking};
use sim_ollama::SimBuilder;

/// (method, path, body, status, content type, exact body) from the captures and the
/// reference's error table.
const CASES: &[(&str, &str, Option<&str>, u16, &str, &str)] = &[
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"nosuchmodel","prompt":"hi"}"#),
        404,
        "application/json; charset=utf-8",
        r#"{"error":"model 'nosuchmodel' not found"}"#,
    ),
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"tiny","prompt":"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"unexpected EOF"}"#,
    ),
    (
        "POST",
        "/api/generate",
        Some(r#"{"prompt":"hi"}"#),
        404,
        "application/json; charset=utf-8",
        r#"{"error":"model '' not found"}"#,
    ),
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"tiny","prompt":"hi","stream":false,"options":{"num_ctx":"abc"}}"#),
        500,
        "application/json; charset=utf-8",
        r#"{"error":"option \"num_ctx\" must be of type integer"}"#,
    ),
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"tiny","prompt":"hi","stream":false,"keep_alive":"300"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"time: missing unit in duration \"300\""}"#,
    ),
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"tiny","prompt":"hi","stream":false,"keep_alive":"abc"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"time: invalid duration \"abc\""}"#,
    ),
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"tiny","prompt":"hi","keep_alive":true}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"Unsupported type: 'bool'"}"#,
    ),
    ("POST", "/api/generate", Some(""), 400, "application/json; charset=utf-8", r#"{"error":"missing request body"}"#),
    // Go binds a key to a field ignoring its case (an untagged struct's `Model`), names the
    // field by its own name in a type error, and reads a message's keys the same way.
    (
        "POST",
        "/api/generate",
        Some(r#"{"MODEL":"nosuchmodel","prompt":"hi"}"#),
        404,
        "application/json; charset=utf-8",
        r#"{"error":"model 'nosuchmodel' not found"}"#,
    ),
    (
        "POST",
        "/api/generate",
        Some(r#"{"Model":5,"prompt":"hi"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"json: cannot unmarshal number into Go struct field GenerateRequest.model of type string"}"#,
    ),
    (
        "POST",
        "/api/chat",
        Some(r#"{"Model":"tiny","Messages":[{"Role":"user","Content":5}],"Stream":false}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"json: cannot unmarshal number into Go struct field ChatRequest.messages.content of type string"}"#,
    ),
    // Two fields of the wrong type: Go's decoder names the first in the body, whichever the
    // handler reads first (seen on Ollama 0.33 by the generated conformance run, seed 11).
    (
        "POST",
        "/api/chat",
        Some(r#"{"model":"tiny","messages":[{"role":"user","content":5}],"stream":false,"options":["x"]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"json: cannot unmarshal number into Go struct field ChatRequest.messages.content of type string"}"#,
    ),
    // A message is decoded by its own UnmarshalJSON (api/types.go), whose failure ends the
    // decoding: its error wins over an earlier field's.
    (
        "POST",
        "/api/chat",
        Some(r#"{"model":"tiny","options":["x"],"messages":[{"role":"user","content":5}],"stream":false}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"json: cannot unmarshal number into Go struct field ChatRequest.messages.content of type string"}"#,
    ),
    (
        "POST",
        "/api/chat",
        Some(r#"{"model":"tiny","options":["x"],"stream":"yes"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"json: cannot unmarshal array into Go struct field ChatRequest.options of type map[string]interface {}"}"#,
    ),
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"tiny","stream":"yes","prompt":5}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"json: cannot unmarshal string into Go struct field GenerateRequest.stream of type bool"}"#,
    ),
    // A type with an UnmarshalJSON of its own that fails ends the decoding there, before or
    // after a plain field's type error (the real server's answers).
    (
        "POST",
        "/api/chat",
        Some(r#"{"model":"tiny","stream":"yes","keep_alive":true}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"Unsupported type: 'bool'"}"#,
    ),
    (
        "POST",
        "/api/chat",
        Some(r#"{"model":"tiny","messages":[{"role":5,"content":"x"}],"keep_alive":"abc"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"json: cannot unmarshal number into Go struct field ChatRequest.messages.role of type string"}"#,
    ),
    // `context` is a list of Go ints: each element is bound (the real server's texts).
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"tiny","prompt":"hi","stream":false,"context":["a"]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"json: cannot unmarshal string into Go struct field GenerateRequest.context of type int"}"#,
    ),
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"tiny","prompt":"hi","stream":false,"context":[1.5]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"json: cannot unmarshal number 1.5 into Go struct field GenerateRequest.context of type int"}"#,
    ),
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"tiny","prompt":"hi","stream":"yes"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"json: cannot unmarshal string into Go struct field GenerateRequest.stream of type bool"}"#,
    ),
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"tiny","prompt":"hi","options":{"stop":"x"}}"#),
        500,
        "application/json; charset=utf-8",
        r#"{"error":"option \"stop\" must be of type array"}"#,
    ),
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"tiny","prompt":"hi","raw":true,"system":"s"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"raw mode does not support template, system, or context"}"#,
    ),
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"nomic-embed-text","prompt":"hi"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"\"nomic-embed-text\" does not support generate"}"#,
    ),
    (
        "POST",
        "/api/chat",
        Some(r#"{"model":"nosuchmodel","messages":[{"role":"user","content":"hi"}]}"#),
        404,
        "application/json; charset=utf-8",
        r#"{"error":"model 'nosuchmodel' not found"}"#,
    ),
    (
        "POST",
        "/api/chat",
        Some(r#"{"messages":[]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"model is required"}"#,
    ),
    (
        "POST",
        "/api/chat",
        Some(r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"think":true,"stream":false}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"\"tiny\" does not support thinking"}"#,
    ),
    (
        "POST",
        "/api/chat",
        Some(
            r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"stream":false,"tools":[{"type":"function","function":{"name":"f"}}]}"#,
        ),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"registry.ollama.ai/library/tiny:latest does not support tools"}"#,
    ),
    (
        "POST",
        "/api/show",
        Some(r#"{"model":"nosuchmodel"}"#),
        404,
        "application/json; charset=utf-8",
        r#"{"error":"model 'nosuchmodel:latest' not found"}"#,
    ),
    ("POST", "/api/show", Some(r#"{}"#), 400, "application/json; charset=utf-8", r#"{"error":"model is required"}"#),
    (
        "POST",
        "/api/embed",
        Some(r#"{"model":"nosuchmodel","input":"x"}"#),
        404,
        "application/json; charset=utf-8",
        r#"{"error":"model \"nosuchmodel\" not found, try pulling it first"}"#,
    ),
    (
        "POST",
        "/api/embed",
        Some(r#"{"model":"tiny","input":"Hello world"}"#),
        501,
        "application/json; charset=utf-8",
        r#"{"error":"This server does not support embeddings. Start it with `--embeddings`"}"#,
    ),
    (
        "POST",
        "/api/embed",
        Some(r#"{"model":"nomic-embed-text","input":3}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"invalid input type"}"#,
    ),
    (
        "POST",
        "/api/embeddings",
        Some(r#"{"prompt":"x"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"model is required"}"#,
    ),
    (
        "POST",
        "/api/copy",
        Some(r#"{"source":"nosuchmodel","destination":"x"}"#),
        404,
        "application/json; charset=utf-8",
        r#"{"error":"model \"nosuchmodel\" not found"}"#,
    ),
    (
        "DELETE",
        "/api/delete",
        Some(r#"{"model":"nosuchmodel"}"#),
        404,
        "application/json; charset=utf-8",
        r#"{"error":"model 'nosuchmodel' not found"}"#,
    ),
    ("GET", "/api/nonexistent", None, 404, "text/plain", "404 page not found"),
    ("PUT", "/api/generate", Some(r#"{"model":"tiny","prompt":"hi"}"#), 405, "text/plain", "405 method not allowed"),
    ("GET", "/api/generate", None, 405, "text/plain", "405 method not allowed"),
    (
        "POST",
        "/v1/chat/completions",
        Some(r#"{"model":"nosuchmodel","messages":[{"role":"user","content":"hi"}]}"#),
        404,
        "application/json",
        "{\"error\":{\"message\":\"model 'nosuchmodel' not found\",\"type\":\"not_found_error\",\"param\":null,\"code\":null}}\n",
    ),
    // A message's content parts are read as maps, so `Type` is no type (2026-11-26), though the
    // message's own keys bind ignoring case.
    (
        "POST",
        "/v1/chat/completions",
        Some(
            r#"{"Model":"tiny","Messages":[{"Role":"user","Content":[{"Type":"image_url","Image_Url":{"Url":"http://x"}}]}]}"#,
        ),
        400,
        "application/json; charset=utf-8",
        "{\"error\":{\"message\":\"invalid message format\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}",
    ),
    (
        "POST",
        "/v1/chat/completions",
        Some(r#"{"messages":[{"role":"user","content":"hi"}]}"#),
        400,
        "application/json",
        "{\"error\":{\"message\":\"model is required\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}\n",
    ),
    // A blank name passes the middlewares (they refuse an empty one) and the chat handler,
    // which trims it, refuses it (the real server's answers; the generated conformance run
    // found it on /v1/messages).
    (
        "POST",
        "/v1/chat/completions",
        Some(r#"{"model":" ","messages":[{"role":"user","content":"hi"}]}"#),
        400,
        "application/json",
        "{\"error\":{\"message\":\"model is required\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}\n",
    ),
    (
        "POST",
        "/v1/responses",
        Some(r#"{"model":" ","input":"hi"}"#),
        400,
        "application/json",
        "{\"error\":{\"message\":\"model is required\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}\n",
    ),
    (
        "POST",
        "/v1/chat/completions",
        Some(r#"{"model":"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"unexpected EOF","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    // The /v1 middleware's own checks answer through gin's AbortWithStatusJSON: a charset and
    // no newline (checked against the real CPU build, 2026-11-26, found by `harness
    // conformance --generated`), where the handler's errors pass its response writer.
    (
        "POST",
        "/v1/chat/completions",
        Some(r#"{"model":"tiny","messages":[]}"#),
        400,
        "application/json; charset=utf-8",
        "{\"error\":{\"message\":\"[] is too short - 'messages'\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}",
    ),
    (
        "GET",
        "/v1/models/nosuchmodel",
        None,
        404,
        "application/json",
        // Named with its tag, as the show handler behind the middleware names it (a real
        // Ollama 0.33 answered `model 'missing:latest' not found`, 2026-11-26).
        "{\"error\":{\"message\":\"model 'nosuchmodel:latest' not found\",\"type\":\"not_found_error\",\"param\":null,\"code\":null}}\n",
    ),
    (
        "POST",
        "/v1/embeddings",
        Some(r#"{"model":"nomic-embed-text","input":[]}"#),
        400,
        "application/json; charset=utf-8",
        "{\"error\":{\"message\":\"invalid input\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}",
    ),
    // `think` as ThinkValue reads it: the string "true" is not a level, and a number is not a
    // boolean or a string (api/types.go 1202-1222).
    (
        "POST",
        "/api/chat",
        Some(r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"think":"true"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"invalid think value: \"true\" (must be \"high\", \"medium\", \"low\", \"max\", true, or false)"}"#,
    ),
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"tiny","prompt":"hi","think":1}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"think must be a boolean or string (\"high\", \"medium\", \"low\", \"max\", true, or false)"}"#,
    ),
    // /v1 chat as the real FromChatRequest reads it: content may be null only beside tool
    // calls (Go's encoder escapes the "<nil>" of the message); reasoning efforts are mapped, checked, and refused for a model that cannot think.
    (
        "POST",
        "/v1/chat/completions",
        Some(r#"{"model":"tiny","messages":[{"role":"user","content":null}]}"#),
        400,
        "application/json; charset=utf-8",
        "{\"error\":{\"message\":\"invalid message content type: \\u003cnil\\u003e\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}",
    ),
    (
        "POST",
        "/v1/chat/completions",
        Some(r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"extreme"}"#),
        400,
        "application/json; charset=utf-8",
        "{\"error\":{\"message\":\"invalid reasoning value: \\\"extreme\\\" (must be \\\"minimal\\\", \\\"low\\\", \\\"medium\\\", \\\"high\\\", \\\"xhigh\\\", \\\"ultra\\\", \\\"max\\\", or \\\"none\\\")\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}",
    ),
    (
        "POST",
        "/v1/chat/completions",
        Some(r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"reasoning":{"effort":"low"}}"#),
        400,
        "application/json",
        "{\"error\":{\"message\":\"\\\"tiny\\\" does not support thinking\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}\n",
    ),
    // A format that is neither "json" nor a schema object: the real runner's text, with the
    // raw JSON quoted (llm/llama_server.go 1583-1596).
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"tiny","prompt":"hi","format":"yaml","stream":false}"#),
        500,
        "application/json; charset=utf-8",
        r#"{"error":"invalid format: \"\\\"yaml\\\"\"; expected \"json\" or a valid JSON Schema object"}"#,
    ),
    // A name the real server cannot parse is 400 "invalid model name" (writeModelRefParseError,
    // server/routes.go 66-75), not a 404; delete says it its own way.
    (
        "POST",
        "/api/generate",
        Some(r#"{"model":"bad!name","prompt":"hi"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"invalid model name"}"#,
    ),
    (
        "POST",
        "/api/chat",
        Some(r#"{"model":"bad!name","messages":[{"role":"user","content":"hi"}]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"invalid model name"}"#,
    ),
    (
        "POST",
        "/api/embed",
        Some(r#"{"model":"bad!name","input":"hi"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"invalid model name"}"#,
    ),
    (
        "POST",
        "/api/show",
        Some(r#"{"model":"bad!name"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"invalid model name"}"#,
    ),
    (
        "DELETE",
        "/api/delete",
        Some(r#"{"model":"bad!name"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"name \"bad!name\" is invalid"}"#,
    ),
    (
        "POST",
        "/v1/chat/completions",
        Some(r#"{"model":"bad!name","messages":[{"role":"user","content":"hi"}]}"#),
        400,
        "application/json",
        "{\"error\":{\"message\":\"invalid model name\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}\n",
    ),
    (
        "GET",
        "/v1/models/bad!name",
        None,
        400,
        "application/json",
        "{\"error\":{\"message\":\"invalid model name\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}\n",
    ),
    // The real middleware checks encoding_format before the input (middleware/openai.go
    // v0.33.0-rc2 404-410) ...
    (
        "POST",
        "/v1/embeddings",
        Some(r#"{"model":"nomic-embed-text","input":[],"encoding_format":"int8"}"#),
        400,
        "application/json; charset=utf-8",
        "{\"error\":{\"message\":\"Invalid value for 'encoding_format' = int8. Supported values: ['float', 'base64'].\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}",
    ),
    // ... and the handler finds no model named "" (EmbedHandler -> parseAndValidateModelRef).
    (
        "POST",
        "/v1/embeddings",
        Some(r#"{"input":"hi"}"#),
        404,
        "application/json",
        "{\"error\":{\"message\":\"model '' not found\",\"type\":\"not_found_error\",\"param\":null,\"code\":null}}\n",
    ),
    // /v1/responses' binding (its input decoding itself, nested structs named as Go names
    // them), its conversion's errors, images, and Go's scanner texts (captured 2026-11-26).
    (
        "POST",
        "/v1/responses",
        Some(r#"{"model":"tiny","temperature":"x","input":5}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"input must be a string or array: json: cannot unmarshal number into Go value of type []json.RawMessage","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/responses",
        Some(r#"{"model":"tiny","input":["hi"]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"input[0]: json: cannot unmarshal string into Go value of type struct { Type string \"json:\\\"type\\\"\"; Role string \"json:\\\"role\\\"\" }","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/responses",
        Some(r#"{"model":"tiny","input":[{"role":"user","content":5}]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"input[0]: content must be a string or array: json: cannot unmarshal number into Go value of type []json.RawMessage","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/responses",
        Some(r#"{"model":"tiny","input":[{"role":"user","content":[{"type":"input_file","file_data":"x"}]}]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"file inputs are not currently supported","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/responses",
        Some(r#"{"model":"tiny","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{bad"}]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"failed to parse function call arguments: invalid character 'b' looking for beginning of object key string","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/responses",
        Some(r#"{"model":"tiny","input":"hi","reasoning":{"effort":5}}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"json: cannot unmarshal number into Go struct field ResponsesReasoning.reasoning.effort of type string","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/responses",
        Some(r#"{"model":"tiny","input":"hi","reasoning":{"effort":"extreme"}}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"invalid reasoning value: \"extreme\" (must be \"minimal\", \"low\", \"medium\", \"high\", \"xhigh\", \"ultra\", \"max\", or \"none\")","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/responses",
        Some(r#"{"model":"tiny","input":"hi","tools":[{"type":"namespace","tools":[{"name":5}]}]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"json: cannot unmarshal number into Go struct field ResponsesTool.tools.tools.name of type string","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/responses",
        Some(
            r#"{"model":"tiny","input":"hi","tools":[{"type":"function","name":"f","parameters":{"properties":{"a":{"type":5}}}}]}"#,
        ),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"failed to unmarshal tool parameters: json: cannot unmarshal number into Go struct field ToolFunctionParameters.properties.type of type []string","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/responses",
        Some(r#"{"model":"tiny","input":[{"role":"user","content":[{"type":"bogus"}]}]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"input[0]: content[0]: unknown content type: bogus","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/responses",
        Some(r#"{"model":"tiny","input":[null]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"input[0]: input item missing required 'type' field","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/responses",
        Some(
            r#"{"model":"tiny","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":5}]}]}"#,
        ),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"input[0]: output[0]: json: cannot unmarshal number into Go struct field ResponsesTextContent.text of type string","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/responses",
        Some(
            r#"{"model":"tiny","input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,!!"}]}]}"#,
        ),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"invalid image input","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/chat/completions",
        Some(
            r#"{"model":"tiny","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/gif;base64,AAAA"}}]}]}"#,
        ),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"invalid image input","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/chat/completions",
        Some(r#"{"model":"tiny","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":5}}]}]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"invalid message format","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/api/chat",
        Some(r#"{"model" 5}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"invalid character '5' after object key"}"#,
    ),
    (
        "POST",
        "/api/chat",
        Some(r#"{"model":"tiny","options":{"a":1e+}}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"invalid character '}' in exponent of numeric literal"}"#,
    ),
    (
        "POST",
        "/api/chat",
        Some(r#"{"model":"tiny","messages":[1 2]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"invalid character '2' after array element"}"#,
    ),
    // A chat's tools decoded to the bottom: the innermost struct named, an error inside a
    // tool's `properties` (an ordered map decoding itself) ending the decoding.
    (
        "POST",
        "/api/chat",
        Some(
            r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"required":[5]}}}]}"#,
        ),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"json: cannot unmarshal number into Go struct field ToolFunctionParameters.tools.function.parameters.required of type string"}"#,
    ),
    (
        "POST",
        "/api/chat",
        Some(
            r#"{"model":"tiny","stream":"x","tools":[{"function":{"name":"f","parameters":{"properties":{"a":5}}}}],"messages":[]}"#,
        ),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"json: cannot unmarshal number into Go struct field ToolFunctionParameters.tools.function.parameters.properties of type api.ToolProperty"}"#,
    ),
    (
        "POST",
        "/api/chat",
        Some(r#"{"model":"tiny","tools":[{"function":{"name":5}}],"stream":"x","messages":[]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"json: cannot unmarshal number into Go struct field ToolFunction.tools.function.name of type string"}"#,
    ),
    (
        "POST",
        "/v1/chat/completions",
        Some(r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"tools":[5]}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"json: cannot unmarshal number into Go struct field ChatCompletionRequest.tools of type api.Tool","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/v1/chat/completions",
        Some(
            r#"{"model":"tiny","stream":"x","messages":[{"role":"user","content":"hi"}],"tools":[{"function":{"name":"f","parameters":{"properties":{"a":{"type":[5]}}}}}]}"#,
        ),
        400,
        "application/json; charset=utf-8",
        r#"{"error":{"message":"json: cannot unmarshal number into Go struct field ToolFunctionParameters.tools.function.parameters.properties.type of type string","type":"invalid_request_error","param":null,"code":null}}"#,
    ),
    (
        "POST",
        "/api/chat",
        Some(r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"tools":"x"}"#),
        400,
        "application/json; charset=utf-8",
        r#"{"error":"json: cannot unmarshal string into Go struct field ChatRequest.tools of type api.Tools"}"#,
    ),
];

#[test]
fn every_error_has_the_real_servers_status_content_type_and_body() {
    let sim = SimBuilder::new().start().unwrap();
    let addr = sim.addrs()[0];
    let mut failures = Vec::new();
    for (method, path, body, status, ct, expected) in CASES {
        let r = raw_blocking(addr, method, path, *body, &[]);
        let got = (r.status, r.header("content-type").unwrap_or(""), r.text());
        if got != (*status, *ct, expected.to_string()) {
            failures.push(format!(
                "{method} {path} {body:?}\n  expected {status} {ct:?} {expected}\n  got      {} {:?} {}",
                got.0, got.1, got.2
            ));
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn wrong_methods_name_the_allowed_one() {
    let sim = SimBuilder::new().start().unwrap();
    let r = raw_blocking(sim.addrs()[0], "PUT", "/api/generate", Some("{}"), &[]);
    assert_eq!(r.header("allow"), Some("POST"));
}

#[test]
fn a_foreign_origin_is_forbidden_and_a_local_one_allowed() {
    let sim = SimBuilder::new().start().unwrap();
    let addr = sim.addrs()[0];
    let r = raw_blocking(
        addr,
        "OPTIONS",
        "/api/generate",
        None,
        &[("Origin", "http://example.com"), ("Access-Control-Request-Method", "POST")],
    );
    assert_eq!((r.status, r.body.len()), (403, 0));
    let ok = raw_blocking(
        addr,
        "OPTIONS",
        "/api/generate",
        None,
        &[("Origin", "http://localhost:3000"), ("Access-Control-Request-Method", "POST")],
    );
    assert_eq!(ok.status, 204);
    assert_eq!(ok.header("access-control-allow-origin"), Some("http://localhost:3000"));
    // A preflight varies by the three things it was asked, as the real server's does.
    let vary: Vec<&str> = ok.headers.iter().filter(|(k, _)| k == "vary").map(|(_, v)| v.as_str()).collect();
    assert_eq!(vary, ["Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers"]);
    // Not only preflights: an allowed origin's request is answered with the CORS headers, a
    // foreign one's refused before any handler runs.
    let get = raw_blocking(addr, "GET", "/api/version", None, &[("Origin", "http://localhost:3000")]);
    assert_eq!(get.status, 200);
    assert_eq!(get.header("access-control-allow-origin"), Some("http://localhost:3000"));
    assert_eq!(get.header("vary"), Some("Origin"));
    let foreign = raw_blocking(addr, "GET", "/api/version", None, &[("Origin", "http://example.com")]);
    assert_eq!((foreign.status, foreign.body.len()), (403, 0));
}

#[test]
fn a_trailing_slash_redirects_like_gin() {
    let sim = SimBuilder::new().start().unwrap();
    let r = raw_blocking(sim.addrs()[0], "GET", "/api/tags/", None, &[]);
    assert_eq!((r.status, r.header("location")), (301, Some("/api/tags")));
    // As a real Ollama 0.33 answered (http.Redirect's body for GET).
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.body, b"<a href=\"/api/tags\">Moved Permanently</a>.\n\n");
}

/// A path that is not clean (a base URL ending in `/` joined to `/api/chat`, `.` or `..`
/// elements) gets Go's ServeMux redirect to the clean path, as a real Ollama 0.33 answered
/// (`curl --path-as-is`, 2026-11-26): 307 for every method, with http.Redirect's body for GET.
#[test]
fn a_path_that_is_not_clean_redirects_like_gos_serve_mux() {
    let sim = SimBuilder::new().start().unwrap();
    let addr = sim.addrs()[0];
    let body = r#"{"model":"gemma3","messages":[{"role":"user","content":"hi"}],"stream":false}"#;
    for (method, path, to) in [
        ("POST", "//api/chat", "/api/chat"),
        ("POST", "//v1/chat/completions", "/v1/chat/completions"),
        ("POST", "/api//generate/", "/api/generate/"),
        ("GET", "/api/../api/version", "/api/version"),
        ("GET", "/./api/tags?x=1", "/api/tags?x=1"),
    ] {
        let r = raw_blocking(addr, method, path, (method == "POST").then_some(body), &[]);
        assert_eq!((r.status, r.header("location")), (307, Some(to)), "{method} {path}");
        if method == "GET" {
            assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
            assert_eq!(
                String::from_utf8_lossy(&r.body),
                format!("<a href=\"{}\">Temporary Redirect</a>.\n\n", to.replace('&', "&amp;"))
            );
        } else {
            assert!(r.body.is_empty() && r.header("content-type").is_none(), "{method} {path}: {r:?}");
        }
    }
    // Clean paths are served, or are gin's 404.
    assert_eq!(raw_blocking(addr, "GET", "/api/version", None, &[]).status, 200);
    assert_eq!(raw_blocking(addr, "GET", "/api/foo", None, &[]).status, 404);
}

#[test]
fn a_body_over_the_limit_gets_413_in_ollamas_shape() -> Result {
    let sim = SimBuilder::new().body_limit(1024).start()?;
    let big = format!(r#"{{"model":"tiny","prompt":"{}"}}"#, "x".repeat(4096));
    let r = raw_blocking(sim.addrs()[0], "POST", "/api/generate", Some(&big), &[]);
    assert_eq!(r.status, 413);
    assert_eq!(r.json()["error"], "request body too large: the limit is 1024 bytes");
    Ok(())
}

#[test]
fn the_503_limit_applies_to_requests_that_need_the_scheduler() -> Result {
    // max_queue 1: while a slow cold load holds the scheduler, one request may wait for it
    // and the next gets 503 at once.
    let sim = SimBuilder::new().max_queue(1).time_scale(0.2).start()?;
    let addr = sim.addrs()[0];
    let body = r#"{"model":"gemma3","prompt":"hi","stream":false,"options":{"num_predict":1}}"#;
    let first = std::thread::spawn(move || raw_blocking(addr, "POST", "/api/generate", Some(body), &[]));
    // Wait until the first request is loading (it holds the scheduler), then send two more.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while sim.trace().requests.first().is_none_or(|r| r.loads.is_empty()) {
        assert!(std::time::Instant::now() < deadline, "the first request never started loading");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let other = r#"{"model":"llama3.2:1b","prompt":"hi","stream":false,"options":{"num_predict":1}}"#;
    let second = std::thread::spawn(move || raw_blocking(addr, "POST", "/api/generate", Some(other), &[]));
    while sim.metrics().instances[0].pending < 1 {
        assert!(std::time::Instant::now() < deadline, "the second request never queued");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let third = raw_blocking(addr, "POST", "/api/generate", Some(other), &[]);
    assert_eq!(third.status, 503);
    assert_eq!(third.json()["error"], "server busy, please try again.  maximum pending requests exceeded");
    assert_eq!(first.join().unwrap().status, 200);
    assert_eq!(second.join().unwrap().status, 200);
    Ok(())
}

/// Issue 10: limits a long-running simulator needs, each answered in Ollama's error shape.
#[test]
fn a_long_running_server_refuses_unbounded_growth_with_clear_errors() -> Result {
    let sim = SimBuilder::new().start()?;
    let addr = sim.addrs()[0];
    // An embedding request with more inputs than the simulator embeds at once: 400, not tens
    // of gigabytes of vectors.
    let inputs = vec![""; 2049];
    let body = serde_json::json!({"model": "nomic-embed-text", "input": inputs}).to_string();
    let r = raw_blocking(addr, "POST", "/api/embed", Some(&body), &[]);
    assert_eq!(r.status, 400);
    assert!(r.json()["error"].as_str().is_some_and(|e| e.contains("at most 2048")), "{}", r.text());
    let body = serde_json::json!({"model": "nomic-embed-text", "input": inputs}).to_string();
    let r = raw_blocking(addr, "POST", "/v1/embeddings", Some(&body), &[]);
    assert_eq!(r.status, 400);
    assert!(r.json().pointer("/error/message").and_then(|e| e.as_str()).is_some_and(|e| e.contains("at most 2048")));
    // Rules: at most MAX_RULES of a kind in force, over HTTP (replaced or added) and through
    // the library; faults and scripts alike, one rule set.
    let max = sim_ollama::advanced::faults::MAX_RULES;
    let rule = serde_json::json!({"kind": "stall", "duration_ms": 1});
    let many = serde_json::json!({"faults": vec![rule.clone(); max + 1]}).to_string();
    let r = raw_blocking(addr, "PUT", "/sim/faults", Some(&many), &[]);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.json()["error"].as_str().is_some_and(|e| e.contains(&format!("at most {max}"))), "{}", r.text());
    let full = serde_json::json!({"faults": vec![rule.clone(); max]}).to_string();
    assert_eq!(raw_blocking(addr, "PUT", "/sim/faults", Some(&full), &[]).status, 200);
    let r = raw_blocking(addr, "POST", "/sim/faults", Some(&rule.to_string()), &[]);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.json()["error"].as_str().is_some_and(|e| e.contains("DELETE /sim/faults")), "{}", r.text());
    assert_eq!(raw_blocking(addr, "DELETE", "/sim/faults", None, &[]).status, 200);
    let scripted = serde_json::json!({"text": "x"});
    let many = serde_json::json!({"script": vec![scripted; max + 1]}).to_string();
    let r = raw_blocking(addr, "PUT", "/sim/script", Some(&many), &[]);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.json()["error"].as_str().is_some_and(|e| e.contains("script rules")), "{}", r.text());
    let rule: sim_ollama::advanced::faults::FaultRule =
        serde_json::from_value(serde_json::json!({"kind": "stall", "every": 0}))?;
    let e = sim.set_faults(vec![rule]).expect_err("every = 0 is refused, as over HTTP");
    assert!(e.to_string().contains("every"), "{e}");
    Ok(())
}

/// Issue 10: a configured model digest shorter than 12 characters used to panic the pull.
#[test]
fn a_short_configured_digest_does_not_panic_a_pull() -> Result {
    let cfg = "[[models]]\nname = \"short:latest\"\nfamily = \"llama\"\nparameter_size = \"1B\"\nquantization_level = \"Q4_0\"\nsize = 10\ncontext_length = 4096\nembedding_length = 8\ncapabilities = [\"completion\"]\ndigest = \"abc\"\n[models.profile]\nload_ms = { dist = \"constant\", mean = 0.0 }\nprompt_tokens_per_s = 1000.0\ndecode_tokens_per_s = 1000.0\ninter_token = { dist = \"constant\" }\noutput_tokens = { dist = \"constant\", mean = 3.0 }\n";
    let sim =
        SimBuilder::new().config(sim_ollama::advanced::config::ConfigFile::from_toml(cfg)?).time_scale(0.0).start()?;
    let r = raw_blocking(sim.addrs()[0], "POST", "/api/pull", Some(r#"{"model":"short","stream":false}"#), &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["status"], "success");
    Ok(())
}

/// Issue 10: a time scale so large that scaled durations overflow is refused at start.
#[test]
fn an_unrepresentable_time_scale_is_refused_at_start() {
    let e = SimBuilder::new().time_scale(1e300).start().unwrap_err().to_string();
    assert!(e.contains("time_scale"), "{e}");
}

/// Images for a model without vision (issue 38): Ollama does not check the capability, so the
/// model loads, the request takes a slot, and the runner refuses it with llama-server's text,
/// which Ollama passes on with 400 (captured from the real CPU build; the conformance battery
/// holds the cases). In a streamed answer the error is written inside the stream: no charset,
/// chunked. A model with vision answers.
#[test]
fn images_for_a_model_without_vision_are_refused_by_its_runner_as_ollama_refuses_them() {
    const PNG: &str =
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let refusal = r#"{"error":{"code":400,"message":"Multimodal data provided, but model does not support multimodal requests.","type":"invalid_request_error"}}"#;
    let sim = SimBuilder::new().seed(1).time_scale(0.01).start().unwrap();
    let addr = sim.addrs()[0];
    let chat = |model: &str, stream: bool| {
        let body = serde_json::json!({"model": model, "stream": stream, "options": {"num_predict": 4},
            "messages": [{"role": "user", "content": "hi", "images": [PNG]}]});
        raw_blocking(addr, "POST", "/api/chat", Some(&body.to_string()), &[])
    };
    let r = chat("llama3.2:1b", false);
    assert_eq!((r.status, r.json()), (400, serde_json::json!({ "error": refusal })), "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json; charset=utf-8"));
    assert!(r.header("content-length").is_some());
    let r = chat("llama3.2:1b", true);
    assert_eq!((r.status, r.json()), (400, serde_json::json!({ "error": refusal })), "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!((r.header("transfer-encoding"), r.header("content-length")), (Some("chunked"), None));
    // The runner refused it: the model was loaded first.
    let ps = raw_blocking(addr, "GET", "/api/ps", None, &[]).json();
    assert_eq!(ps["models"][0]["name"], "llama3.2:1b", "{ps}");
    let body = serde_json::json!({"model": "llama3.2:1b", "max_tokens": 4, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}}]}]});
    let r = raw_blocking(addr, "POST", "/v1/chat/completions", Some(&body.to_string()), &[]);
    assert_eq!((r.status, r.json()["error"]["message"].as_str()), (400, Some(refusal)), "{}", r.text());
    let r = chat("gemma3", false);
    assert_eq!(r.status, 200, "{}", r.text());
}

/// The differences `harness conformance --generated` found against the real CPU build
/// (2026-11-26, closed in 7983bdd), each as the real server answered it: status, content type,
/// and the error text (the Anthropic shape's `request_id` is random, so its message is compared).
#[test]
fn the_differences_generated_requests_found_stay_closed() {
    let sim = SimBuilder::new().start().unwrap();
    let addr = sim.addrs()[0];
    let charset = "application/json; charset=utf-8";
    let runner = |m: &str| serde_json::json!({"error": serde_json::json!({"error": {"code": 400, "message": m, "type": "invalid_request_error"}}).to_string()});
    let native = |m: &str| serde_json::json!({"error": m});
    let openai = |m: &str| serde_json::json!({"error": {"message": m, "type": "invalid_request_error", "param": null, "code": null}});
    let cases: Vec<(&str, &str, u16, &str, serde_json::Value)> = vec![
        // The runner's refusals, once it has the request.
        (
            "/api/generate",
            r#"{"model":"tiny","prompt":"x","stream":false,"options":{"num_predict":3,"repeat_penalty":0}}"#,
            400,
            charset,
            runner("Failed to initialize samplers: penalty_repeat must be finite and greater than 0"),
        ),
        (
            "/api/generate",
            r#"{"model":"tiny","prompt":"x","stream":false,"options":{"num_predict":3,"num_keep":-100}}"#,
            400,
            charset,
            runner("Field 'n_keep': Value must be between -1 <= value <= 2147483647, but got -100"),
        ),
        (
            "/api/generate",
            r#"{"model":"tiny","prompt":"x","stream":false,"options":{"num_predict":3,"repeat_last_n":1000000000000}}"#,
            400,
            charset,
            runner("Field 'repeat_last_n': Value must be between 0 <= value <= 2147483647, but got -727379968"),
        ),
        (
            "/api/chat",
            r#"{"model":"tiny","messages":[{"role":"user","content":"x"}],"stream":false,"options":{"num_predict":3},"format":{"type":"nonsense"}}"#,
            400,
            charset,
            runner(
                "Field 'json_schema': \"json_schema\": JSON schema conversion failed:\nJSON schema error at #: unrecognized type nonsense",
            ),
        ),
        // Every invalid pattern, a line each (llama.cpp's converter); a repetition of more than
        // 2,000 at least, refused by its grammar parser as the slot starts.
        (
            "/api/generate",
            r#"{"model":"tiny","prompt":"x","stream":false,"options":{"num_predict":3},"format":{"properties":{"a":{"pattern":"^(a$"},"b":{"type":"string","pattern":"^*$"}}}}"#,
            400,
            charset,
            runner(
                "Field 'json_schema': \"json_schema\": JSON schema conversion failed:\nInvalid pattern ^(a$: unbalanced parentheses\nInvalid pattern ^*$: nothing to repeat",
            ),
        ),
        (
            "/api/generate",
            r#"{"model":"tiny","prompt":"x","stream":false,"options":{"num_predict":3},"format":{"type":"array","minItems":2002}}"#,
            400,
            charset,
            runner("Failed to initialize samplers: failed to parse grammar"),
        ),
        // Options and names.
        (
            "/api/embed",
            r#"{"model":"tiny","input":"x","options":{"stop":[1]}}"#,
            500,
            charset,
            native("option \"stop\" must be of an array of strings"),
        ),
        (
            "/api/chat",
            r#"{"model":" ","messages":[{"role":"user","content":"x"}]}"#,
            400,
            charset,
            native("model is required"),
        ),
        (
            "/api/show",
            r#"{"model":"tiny","system":1.5}"#,
            400,
            charset,
            native("json: cannot unmarshal number into Go struct field ShowRequest.system of type string"),
        ),
        // The /v1 middleware (gin: a charset) and handler (none).
        ("/v1/chat/completions", "", 400, charset, openai("EOF")),
        (
            "/v1/embeddings",
            r#""hi""#,
            400,
            charset,
            openai("json: cannot unmarshal string into Go value of type openai.EmbedRequest"),
        ),
        (
            "/v1/chat/completions",
            r#"{"model":"tiny","messages":[{"role":"user","content":"x"}],"reasoning_effort":"\u0000"}"#,
            400,
            charset,
            openai(
                "invalid reasoning value: \"\\x00\" (must be \"minimal\", \"low\", \"medium\", \"high\", \"xhigh\", \"ultra\", \"max\", or \"none\")",
            ),
        ),
        (
            "/v1/chat/completions",
            r#"{"model":"tiny","max_tokens":4,"presence_penalty":"text"}"#,
            400,
            charset,
            openai(
                "json: cannot unmarshal string into Go struct field ChatCompletionRequest.presence_penalty of type float64",
            ),
        ),
        (
            "/v1/completions",
            r#"{"model":"tiny","prompt":"x","max_tokens":2,"stop":[1]}"#,
            400,
            charset,
            openai("invalid type for 'stop' field: float64"),
        ),
        (
            "/v1/completions",
            r#"{"model":"tiny","prompt":"x","max_tokens":2,"top_p":true}"#,
            400,
            charset,
            openai("json: cannot unmarshal bool into Go struct field CompletionRequest.top_p of type float32"),
        ),
        // Audio parts (openai/openai.go v0.33.0-rc2 597-610): checked by the middleware, then
        // refused by a runner with no projector, as the real CPU build answers them.
        (
            "/v1/chat/completions",
            r#"{"model":"tiny","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"@@@","format":"wav"}}]}],"max_tokens":3}"#,
            400,
            charset,
            openai("invalid input_audio base64 data: illegal base64 data at input byte 0"),
        ),
        (
            "/v1/chat/completions",
            r#"{"model":"tiny","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":5}}]}],"max_tokens":3}"#,
            400,
            charset,
            openai("invalid input_audio format: missing data"),
        ),
        (
            "/v1/chat/completions",
            r#"{"model":"tiny","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]}],"max_tokens":3}"#,
            400,
            "application/json",
            openai(
                r#"{"error":{"code":400,"message":"Multimodal data provided, but model does not support multimodal requests.","type":"invalid_request_error"}}"#,
            ),
        ),
        (
            "/v1/completions",
            r#"{"model":"tiny","prompt":"x","max_tokens":2,"suffix":" "}"#,
            400,
            "application/json",
            openai("registry.ollama.ai/library/tiny:latest does not support insert"),
        ),
        // Two fields of the wrong type: Go's decoder names the earlier in the body.
        (
            "/v1/completions",
            r#"{"model":"tiny","prompt":"x","max_tokens":2.7,"stream":1.5}"#,
            400,
            charset,
            openai("json: cannot unmarshal number 2.7 into Go struct field CompletionRequest.max_tokens of type int"),
        ),
        (
            "/v1/chat/completions",
            r#"{"model":"tiny","max_tokens":"x","messages":[{"role":"user","content":"hi"}],"stream":5}"#,
            400,
            charset,
            openai("json: cannot unmarshal string into Go struct field ChatCompletionRequest.max_tokens of type int"),
        ),
        (
            "/v1/embeddings",
            r#"{"input":"x","dimensions":"y","model":5}"#,
            400,
            charset,
            openai("json: cannot unmarshal string into Go struct field EmbedRequest.dimensions of type int"),
        ),
        (
            "/api/embed",
            r#"{"model":5,"input":"x","dimensions":"y"}"#,
            400,
            charset,
            native("json: cannot unmarshal number into Go struct field EmbedRequest.model of type string"),
        ),
        // `keep_alive` decodes itself: its failure ends the binding, whatever came before.
        (
            "/api/embeddings",
            r#"{"model":["x"],"prompt":"Say hi.","keep_alive":"forever"}"#,
            400,
            charset,
            native("time: invalid duration \"forever\""),
        ),
        // Bound whole before the name is looked at.
        (
            "/api/show",
            r#"{"model":" ","options":true}"#,
            400,
            charset,
            native(
                "json: cannot unmarshal bool into Go struct field ShowRequest.options of type map[string]interface {}",
            ),
        ),
        // The runner checks `format` when inference starts: streamed, its error is written
        // in the stream (no charset); with nothing to generate, it is never seen (a load).
        (
            "/api/chat",
            r#"{"model":"tiny","messages":[{"role":"user","content":"x"}],"options":{"num_predict":3},"format":7}"#,
            500,
            "application/json",
            native("invalid format: \"7\"; expected \"json\" or a valid JSON Schema object"),
        ),
        (
            "/api/generate",
            r#"{"model":"tiny","prompt":"x","stream":false,"options":{"num_predict":3},"format":7}"#,
            500,
            charset,
            native("invalid format: \"7\"; expected \"json\" or a valid JSON Schema object"),
        ),
    ];
    let mut failures = Vec::new();
    for (path, body, status, ct, expected) in &cases {
        let r = raw_blocking(addr, "POST", path, Some(body), &[]);
        let got: serde_json::Value = serde_json::from_str(r.text().trim()).unwrap_or(serde_json::Value::Null);
        if (r.status, r.header("content-type").unwrap_or("")) != (*status, *ct) || got != *expected {
            failures.push(format!(
                "POST {path} {body}\n  expected {status} {ct} {expected}\n  got      {} {:?} {}",
                r.status,
                r.header("content-type"),
                r.text()
            ));
        }
    }
    // A load with a bad format: the runner never sees it.
    let r = raw_blocking(addr, "POST", "/api/generate", Some(r#"{"model":"tiny","prompt":"","format":7}"#), &[]);
    let v: serde_json::Value = serde_json::from_str(r.text().trim()).unwrap_or(serde_json::Value::Null);
    if r.status != 200 || v["done_reason"] != "load" {
        failures.push(format!("a load with format 7: expected 200 done_reason load, got {} {}", r.status, r.text()));
    }
    // An empty stop string: no text, and the one token it began in counted (llama-server).
    let body = r#"{"model":"tiny","prompt":"x","stream":false,"options":{"num_predict":4,"stop":[""]}}"#;
    let r = raw_blocking(addr, "POST", "/api/generate", Some(body), &[]);
    let v: serde_json::Value = serde_json::from_str(r.text().trim()).unwrap_or(serde_json::Value::Null);
    if (v["response"].as_str(), v["eval_count"].as_u64(), v["done_reason"].as_str())
        != (Some(""), Some(1), Some("stop"))
    {
        failures.push(format!("stop [\"\"]: expected no text, eval_count 1, done_reason stop; got {}", r.text()));
    }
    // Anthropic binding: the middleware's error (a charset), Go's texts.
    for (body, says) in [
        (
            r#"{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":5}]}"#,
            "json: cannot unmarshal number into Go struct field MessagesRequest.messages of type []anthropic.ContentBlock",
        ),
        (
            r#"{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"x"}],"top_p":true}"#,
            "json: cannot unmarshal bool into Go struct field MessagesRequest.top_p of type float64",
        ),
        (r#"{"model":"tiny","max_tokens":4,"messages":[{"role":"user"}]}"#, "unexpected end of JSON input"),
        ("", "EOF"),
        // Two wrong fields: the earlier in the body, unless a message that decodes itself
        // fails, which ends the decoding there (the real server's answers).
        (
            r#"{"model":"tiny","top_p":"x","max_tokens":4,"messages":[{"role":"user","content":"hi"}],"stream":{"k":1}}"#,
            "json: cannot unmarshal string into Go struct field MessagesRequest.top_p of type float64",
        ),
        (
            r#"{"model":"tiny","stream":{"k":1},"max_tokens":4,"messages":[{"role":"user","content":5}]}"#,
            "json: cannot unmarshal number into Go struct field MessagesRequest.messages of type []anthropic.ContentBlock",
        ),
        // Nested types bound, and a tool's input_schema decoded by the conversion (2026-11-26).
        (
            r#"{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":5}]}"#,
            "json: cannot unmarshal number into Go struct field Tool.tools.name of type string",
        ),
        (
            r#"{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"properties":{"a":{"type":5}}}}]}"#,
            "invalid input_schema for tool \"f\": json: cannot unmarshal number into Go struct field ToolFunctionParameters.properties.type of type []string",
        ),
        (
            r#"{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"auto","disable_parallel_tool_use":"x"}}"#,
            "json: cannot unmarshal string into Go struct field ToolChoice.tool_choice.disable_parallel_tool_use of type bool",
        ),
        (
            r#"{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":"x"}}"#,
            "json: cannot unmarshal string into Go struct field ThinkingConfig.thinking.budget_tokens of type int",
        ),
        // Keys bind ignoring case, as Go binds them; the error names the field (2026-11-26).
        (
            r#"{"Model":"tiny","Max_Tokens":"x","Messages":[{"Role":"user","Content":"hi"}]}"#,
            "json: cannot unmarshal string into Go struct field MessagesRequest.max_tokens of type int",
        ),
    ] {
        let r = raw_blocking(addr, "POST", "/v1/messages", Some(body), &[]);
        let v: serde_json::Value = serde_json::from_str(r.text().trim()).unwrap_or(serde_json::Value::Null);
        if (r.status, r.header("content-type")) != (400, Some(charset))
            || v["error"]["type"] != "invalid_request_error"
            || v["error"]["message"] != says
        {
            failures.push(format!(
                "POST /v1/messages {body}\n  expected 400 {charset} {says}\n  got      {} {:?} {}",
                r.status,
                r.header("content-type"),
                r.text()
            ));
        }
    }
    // An empty stop string stops at once; a given system is echoed by /api/show.
    let r = raw_blocking(
        addr,
        "POST",
        "/v1/messages",
        Some(r#"{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"x"}],"stop_sequences":[""]}"#),
        &[],
    );
    let v: serde_json::Value = serde_json::from_str(r.text().trim()).unwrap_or(serde_json::Value::Null);
    if v["content"] != serde_json::Value::Null {
        failures.push(format!("stop_sequences [\"\"]: content {}", v["content"]));
    }
    // A model with audio takes an audio part (its load modelled at a hundredth).
    let fast = SimBuilder::new().time_scale(0.01).start().unwrap();
    let r = raw_blocking(
        fast.addrs()[0],
        "POST",
        "/v1/chat/completions",
        Some(
            r#"{"model":"gemma4:e2b","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]}],"max_tokens":3}"#,
        ),
        &[],
    );
    if r.status != 200 {
        failures.push(format!("an audio part to gemma4:e2b: {} {}", r.status, r.text()));
    }
    // /v1/audio/transcriptions: the middleware's checks (a charset), the runner's refusal on a
    // model with no projector (chunked, as inside the chat it makes), a transcription.
    let form = |fields: &[(&str, &str)], file: Option<&str>| {
        let mut b = String::new();
        for (n, v) in fields {
            b.push_str(&format!("--B\r\nContent-Disposition: form-data; name=\"{n}\"\r\n\r\n{v}\r\n"));
        }
        if let Some(data) = file {
            b.push_str(&format!("--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\n{data}\r\n"));
        }
        b.push_str("--B--\r\n");
        b
    };
    let multipart = [("Content-Type", "multipart/form-data; boundary=B")];
    for (body, headers, status, ct, says) in [
        (form(&[], Some("RIFF")), &multipart[..], 400, charset, "model is required"),
        (form(&[("model", "tiny")], None), &multipart[..], 400, charset, "file is required: http: no such file"),
        (form(&[("model", "tiny")], Some("")), &multipart[..], 400, charset, "audio file is empty"),
        (
            "{}".to_string(),
            &[][..],
            400,
            charset,
            "failed to parse multipart form: request Content-Type isn't multipart/form-data",
        ),
        (
            form(&[("model", "tiny")], Some("RIFF")),
            &multipart[..],
            400,
            "application/json",
            r#"{"error":{"code":400,"message":"Multimodal data provided, but model does not support multimodal requests.","type":"invalid_request_error"}}"#,
        ),
    ] {
        let r = raw_blocking(addr, "POST", "/v1/audio/transcriptions", Some(&body), headers);
        let v: serde_json::Value = serde_json::from_str(r.text().trim()).unwrap_or(serde_json::Value::Null);
        if (r.status, r.header("content-type")) != (status, Some(ct)) || v != openai(says) {
            failures.push(format!(
                "transcription {body:?}\n  expected {status} {ct} {says}\n  got      {} {:?} {}",
                r.status,
                r.header("content-type"),
                r.text()
            ));
        }
    }
    let r = raw_blocking(
        fast.addrs()[0],
        "POST",
        "/v1/audio/transcriptions",
        Some(&form(&[("model", "gemma4:e2b")], Some("RIFF"))),
        &multipart,
    );
    let v: serde_json::Value = serde_json::from_str(r.text().trim()).unwrap_or(serde_json::Value::Null);
    if r.status != 200 || !v["text"].as_str().is_some_and(|t| !t.is_empty() && t.trim() == t) {
        failures.push(format!("a transcription: {} {}", r.status, r.text()));
    }
    let r = raw_blocking(
        fast.addrs()[0],
        "POST",
        "/v1/audio/transcriptions",
        Some(&form(&[("model", "gemma4:e2b"), ("response_format", "text")], Some("RIFF"))),
        &multipart,
    );
    if (r.status, r.header("content-type")) != (200, Some("text/plain")) || r.text().is_empty() {
        failures.push(format!("a text transcription: {} {:?} {}", r.status, r.header("content-type"), r.text()));
    }
    let r = raw_blocking(addr, "POST", "/api/show", Some(r#"{"model":"tiny","system":"Be brief."}"#), &[]);
    let v: serde_json::Value = serde_json::from_str(r.text().trim()).unwrap_or(serde_json::Value::Null);
    if v["system"] != "Be brief." {
        failures.push(format!("/api/show with a system: {}", v["system"]));
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// Native `images` are Go `[]byte`s, decoded from base64 while the request is bound: a data URL
/// (what OpenAI-style code sends, and Ollama's native API does not take) or any string that is
/// not base64 gets 400 `illegal base64 data at input byte N` before any model is looked at,
/// as a real Ollama 0.33 answered (the conformance battery holds the cases), even for a model
/// with vision, which the simulator had answered. Bare base64 is answered.
#[test]
fn images_that_are_not_base64_are_refused_as_gos_decoder_refuses_them() {
    let sim = SimBuilder::new().seed(1).time_scale(0.01).start().unwrap();
    let addr = sim.addrs()[0];
    let chat = |image: &str| {
        let body = serde_json::json!({"model": "gemma3", "stream": false, "options": {"num_predict": 2},
            "messages": [{"role": "user", "content": "hi", "images": [image]}]});
        raw_blocking(addr, "POST", "/api/chat", Some(&body.to_string()), &[])
    };
    let r = chat("data:image/png;base64,iVBORw0KGgo=");
    assert_eq!((r.status, r.json()), (400, serde_json::json!({"error": "illegal base64 data at input byte 4"})));
    assert_eq!(chat("iVBORw0KGgo=").status, 200);
    let body = r#"{"model":"nosuchmodel","prompt":"x","images":["ok==","@@@"],"stream":false}"#;
    let r = raw_blocking(addr, "POST", "/api/generate", Some(body), &[]);
    assert_eq!((r.status, r.json()), (400, serde_json::json!({"error": "illegal base64 data at input byte 0"})));
}
