//! `POST /api/create`: a model from an installed one (`from`), as the real server creates it
//! (its quantizing, layers, template, parameters, license), and from `files` the simulator does
//! not hold, as the real server answers for blobs it does not have (server/create.go
//! v0.33.0-rc2).

use super::http::{AppState, BodyErrors, json_body, json_response};
use super::models::{Progress, installing, manifest_missing, progress, pull_step, status_then_error};
use crate::error::ApiError;
use crate::names::Name;
use crate::request::Fields;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value};
use std::sync::Arc;

/// Quantization types `/api/create` accepts, with their bits per weight (for the new file's
/// size): `ggml.ParseFileType` (fs/ggml/type.go v0.33.0-rc2 60-90; `Q4_K` is `Q4_K_M`, `BF16`
/// parses but is not listed as supported).
const QUANTIZATIONS: &[(&str, f64)] =
    &[("F32", 32.0), ("F16", 16.0), ("Q4_K_S", 4.58), ("Q4_K_M", 4.85), ("Q8_0", 8.5), ("BF16", 16.0)];

/// `POST /api/create` from an installed model (`from`; the `files` and adapter forms are not
/// simulated): a new model under `model` with the source's runner and metadata, its
/// `template` and `parameters` when given, and `quantize` (or the older `quantization`)
/// applied to a source in F16, BF16 or F32, as the real server streams it: the quantizing
/// progress, the layers, "writing manifest", "success" (server/create.go v0.33.0-rc2 1014-1055,
/// 885-889). An error before any progress is the answer (500 unless said); one after it, a
/// line of the stream, as Ollama's `streamResponse` writes them.
pub(crate) async fn create(
    State(s): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = json_body(&s, body, "CreateRequest", BodyErrors::Native)?;
    let (map, f) = (&body.map, Fields::of(&body, "CreateRequest"));
    // Bound whole first, in the body's order (api.CreateRequest, api/types.go v0.33.0-rc2
    // 652-708; server/create.go 57-64): each field's type, a map's values' (`files`'s are
    // strings), a message's own decoding left to where the messages are read.
    f.in_body_order(|f, key| match key {
        "model" | "quantize" | "draft_quantize" | "from" | "remote_host" | "template" | "system" | "renderer"
        | "parser" | "requires" | "name" | "quantization" => f.string(key).map(drop),
        "stream" => f.bool(key).map(drop),
        "files" | "draft_files" | "adapters" => {
            match f
                .object(key, "map[string]string")?
                .into_iter()
                .flatten()
                .find(|(_, v)| !v.is_string() && !v.is_null())
            {
                Some((_, v)) => Err(f.type_error(key, v, "string")),
                None => Ok(()),
            }
        }
        "parameters" | "info" => f.object(key, "map[string]interface {}").map(drop),
        "messages" => f.array(key, "[]api.Message").map(drop),
        _ => Ok(()),
    })?;
    let nonempty = |v: Option<String>| v.filter(|m| !m.trim().is_empty());
    let model_s = nonempty(f.string("model")?).or(nonempty(f.string("name")?));
    let from_s = f.string("from")?.unwrap_or_default();
    let quantize = nonempty(f.string("quantize")?).or(nonempty(f.string("quantization")?));
    let stream = f.bool("stream")?.unwrap_or(true);
    let template = f.string("template")?;
    let system = f.string("system")?;
    let parameters = f.object("parameters", "map[string]interface {}")?;
    // Written by `streamResponse` (server/routes.go): `application/json` without a charset,
    // chunked when the request streams.
    let first = |msg: String| {
        let mut e = ApiError::internal(msg);
        e.chunked = stream;
        e.charset = false;
        e
    };
    // The files' paths and digests, the draft's, the adapters' digests, before the name
    // (server/create.go v0.33.0-rc2 70-101).
    let files = |key: &str| f.object(key, "map[string]string").ok().flatten();
    for key in ["files", "draft_files"] {
        for (path, digest) in files(key).into_iter().flatten() {
            if !go_valid_path(path) {
                return Err(ApiError::bad_request("file path must be relative"));
            }
            if digest.as_str().is_none_or(str::is_empty) {
                return Err(ApiError::bad_request("invalid digest format"));
            }
        }
    }
    if f.string("draft_quantize")?.is_some_and(|q| !q.is_empty()) && files("draft_files").is_none_or(|m| m.is_empty()) {
        return Err(ApiError::bad_request("--draft-quantize requires a DRAFT model"));
    }
    if files("adapters").into_iter().flatten().any(|(_, d)| d.as_str().is_none_or(str::is_empty)) {
        return Err(ApiError::bad_request("invalid digest format"));
    }
    let Some(model_s) = model_s else {
        return Err(ApiError::bad_request("model is required"));
    };
    let name = Name::parse(&model_s).ok_or_else(ApiError::invalid_model_name)?;
    if from_s.is_empty() {
        // Created from files: the simulator has no blobs, so what the real server answers
        // for files it does not hold (create.go 191-201, convertModelFromFiles 290-330).
        let e = match files("files") {
            None => ApiError::bad_request("neither 'from' or 'files' was specified"),
            Some(m) => {
                return Ok(from_missing_files(m, stream).map_err(|mut e| {
                    e.chunked = stream;
                    e.charset = false;
                    e
                })?);
            }
        };
        let mut e = first(e.message);
        e.status = StatusCode::BAD_REQUEST;
        return Err(e);
    }
    let quant =
        match quantize.map(|q| if q.eq_ignore_ascii_case("Q4_K") { "Q4_K_M".to_string() } else { q.to_uppercase() }) {
            Some(q) => match QUANTIZATIONS.iter().find(|(t, _)| *t == q) {
                Some(&(t, bits)) => Some((t, bits)),
                None => {
                    return Err(first(format!(
                        "unsupported quantization type {q} - supported types are F32, F16, Q4_K_S, Q4_K_M, Q8_0"
                    )));
                }
            },
            None => None,
        };
    let from = Name::parse(&from_s).ok_or_else(ApiError::invalid_model_name)?;
    let missing = "pull model manifest: file does not exist";
    let Some(src) = s.instance.store.get(&from) else {
        if !stream {
            return Err(first(missing.into()));
        }
        return Ok(manifest_missing(missing));
    };
    let mut spec = (*src.spec).clone();
    spec.name = name.full();
    spec.digest = None;
    let mut lines: Vec<Progress<'static>> = Vec::new();
    match quant {
        Some((t, bits)) => {
            let level = spec.quantization_level.to_uppercase();
            let Some(&(_, from_bits)) =
                QUANTIZATIONS.iter().find(|(q, _)| *q == level && matches!(*q, "F16" | "BF16" | "F32"))
            else {
                return Err(first("quantization is only supported for F16, BF16 and F32 models".into()));
            };
            spec.size = (spec.size as f64 * bits / from_bits) as u64;
            lines.push(Progress {
                status: format!("quantizing {level} model to {t}"),
                digest: Some("0000000000000000000".into()),
                total: src.spec.size,
                completed: src.spec.size,
                _p: std::marker::PhantomData,
            });
            lines.push(progress("verifying conversion"));
            spec.quantization_level = t.to_string();
            lines.push(progress(format!("creating new layer sha256:{}", spec.digest())));
        }
        None => lines.push(progress(format!("using existing layer sha256:{}", src.spec.digest()))),
    }
    // `license` is an `any`: a string, or what re-marshals to a list of strings; anything else
    // fails the creation after its layers, before anything is streamed (server/create.go
    // v0.33.0-rc2 842-866; on Ollama 0.33 a 500 with the error alone, streamed or not).
    let license = match map.get("license") {
        Some(Value::Array(items)) => items
            .iter()
            .find(|v| !v.is_string() && !v.is_null())
            .map(|v| format!("json: cannot unmarshal {} into Go value of type string", crate::request::json_kind(v))),
        Some(l) if !l.is_null() && !l.is_string() => {
            Some(format!("json: cannot unmarshal {} into Go value of type []string", crate::request::json_kind(l)))
        }
        _ => None,
    };
    if let Some(e) = license {
        return Err(first(e));
    }
    if let Some(t) = template.filter(|t| !t.is_empty()) {
        spec.template = t;
    }
    if let Some(p) = parameters {
        for (k, v) in p {
            let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            spec.parameters.retain(|(key, _)| key != k);
            spec.parameters.push((k.clone(), v));
        }
    }
    // The layers a Modelfile's commands write (template, system, params), then the config.
    let layer = |what: &str| {
        let h = crate::seed::mix(crate::seed::fnv1a(format!("{}{what}", spec.name).as_bytes()));
        progress(format!("creating new layer sha256:{h:016x}{:016x}{:016x}{:016x}", h ^ 1, h ^ 2, h ^ 3))
    };
    if system.as_deref().is_some_and(|s| !s.is_empty()) {
        lines.push(layer("system"));
    }
    if !spec.parameters.is_empty() {
        lines.push(layer("params"));
    }
    lines.extend([layer("config"), progress("writing manifest"), progress("success")]);
    let at = s.shared.clock.now();
    let spec = Arc::new(spec);
    if !stream {
        s.instance.store.install(name, spec, at).map_err(ApiError::internal)?;
        return Ok(json_response(StatusCode::OK, &progress("success")));
    }
    Ok(installing(&s, lines, pull_step(&s), name, spec, at))
}

/// Go's `fs.ValidPath`: a slash-separated relative path of no empty, `.` or `..` element
/// (`.` alone is valid).
fn go_valid_path(path: &str) -> bool {
    path == "." || (!path.is_empty() && path.split('/').all(|e| !e.is_empty() && e != "." && e != ".."))
}

/// `/api/create` from `files` the server does not hold, as the real server answers it: no
/// GGUF or safetensors file name (a blob it cannot read is no GGUF either), 400 "unknown type";
/// safetensors, "converting model", then the missing `config.json`; a GGUF file, "parsing
/// GGUF", then its digest's error ("invalid digest format", or the blob's path missing); a 500
/// with the error alone unstreamed.
fn from_missing_files(files: &Map<String, Value>, stream: bool) -> Result<Response, ApiError> {
    let gguf = |v: &Value| {
        let d = v.as_str().unwrap_or_default();
        match d.strip_prefix("sha256:").filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit())) {
            None => "invalid digest format".to_string(),
            Some(hex) => format!("open {MODELS_DIR}/blobs/sha256-{hex}: no such file or directory"),
        }
    };
    let (status, error) = files
        .iter()
        .find_map(|(k, v)| {
            if k.ends_with(".safetensors") {
                Some(("converting model", "open config.json: no such file or directory".to_string()))
            } else {
                k.ends_with(".gguf").then(|| ("parsing GGUF", gguf(v)))
            }
        })
        .ok_or_else(|| ApiError::bad_request("unknown type"))?;
    if !stream {
        return Err(ApiError::internal(error));
    }
    Ok(status_then_error(status, &error, true))
}

/// Where the simulated server keeps its models (`OLLAMA_MODELS`' default for root).
const MODELS_DIR: &str = "/root/.ollama/models";
