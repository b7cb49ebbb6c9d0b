//! The models Ollama's native API lists and manages: `/`, `/api/version`, `/api/tags`,
//! `/api/ps`, `/api/show`, `/api/pull`, `/api/copy`, `/api/delete` (`/api/create` is
//! `super::create`). Validation order, status codes and texts follow `server/routes.go`.

use super::http::{AppState, BodyErrors, bytes_response, json_body, json_response};
use crate::clock::rfc3339;
use crate::config::ModelSpec;
use crate::error::ApiError;
use crate::names::Name;
use crate::request::Fields;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Instant;

/// `GET /` and `HEAD /`.
pub(crate) async fn root() -> Response {
    bytes_response(StatusCode::OK, "text/plain; charset=utf-8", b"Ollama is running".to_vec())
}

#[derive(Serialize)]
struct Version<'a> {
    version: &'a str,
}

/// `GET /api/version`.
pub(crate) async fn version(State(s): State<AppState>) -> Response {
    json_response(StatusCode::OK, &Version { version: &s.shared.cfg.version })
}

/// `GET /api/status`: whether the server may reach ollama.com's cloud models. The real answer
/// on a server started without `OLLAMA_NO_CLOUD` (server/routes.go v0.33.0-rc2 2146,
/// internal/cloud/policy.go 11), which the simulator, with no cloud behind it, says as well.
pub(crate) async fn status() -> Response {
    json_response(StatusCode::OK, &serde_json::json!({"cloud": {"disabled": false, "source": "none"}}))
}

#[derive(Serialize)]
pub(crate) struct Details<'a> {
    parent_model: &'a str,
    format: &'a str,
    family: &'a str,
    families: [&'a str; 1],
    parameter_size: &'a str,
    quantization_level: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_length: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    embedding_length: Option<u64>,
}

fn details(m: &ModelSpec, with_lengths: bool) -> Details<'_> {
    Details {
        parent_model: "",
        format: "gguf",
        family: &m.family,
        families: [&m.family],
        parameter_size: &m.parameter_size,
        quantization_level: &m.quantization_level,
        context_length: with_lengths.then_some(m.context_length),
        embedding_length: with_lengths.then_some(m.embedding_length),
    }
}

#[derive(Serialize)]
struct TagModel<'a> {
    name: String,
    model: String,
    modified_at: String,
    size: u64,
    digest: String,
    details: Details<'a>,
    capabilities: &'a [String],
}

#[derive(Serialize)]
struct Tags<'a> {
    models: Vec<TagModel<'a>>,
}

/// `GET /api/tags`.
pub(crate) async fn tags(State(s): State<AppState>) -> Response {
    let list = s.instance.store.list();
    let models = list
        .iter()
        .map(|m| TagModel {
            name: m.name.display(),
            model: m.name.display(),
            modified_at: rfc3339(m.modified_at),
            size: m.spec.size,
            digest: m.spec.digest(),
            details: details(&m.spec, true),
            capabilities: &m.spec.capabilities,
        })
        .collect();
    json_response(StatusCode::OK, &Tags { models })
}

#[derive(Serialize)]
struct PsModel<'a> {
    name: &'a str,
    model: &'a str,
    size: u64,
    digest: String,
    details: Details<'a>,
    expires_at: String,
    size_vram: u64,
    context_length: u64,
}

#[derive(Serialize)]
struct Ps<'a> {
    models: Vec<PsModel<'a>>,
}

/// `GET /api/ps`.
pub(crate) async fn ps(State(s): State<AppState>) -> Response {
    let mut runners = s.instance.runners();
    runners.sort_by(|a, b| b.expires_at.cmp(&a.expires_at));
    let models = runners
        .iter()
        .map(|r| PsModel {
            name: &r.display,
            model: &r.display,
            size: r.size,
            digest: r.model.digest(),
            details: details(&r.model, false),
            expires_at: rfc3339(r.expires_at),
            size_vram: r.size_vram,
            context_length: r.num_ctx,
        })
        .collect();
    json_response(StatusCode::OK, &Ps { models })
}

#[derive(Serialize)]
struct Show<'a> {
    /// First, and only when the model has one (`api.ShowResponse`, api/types.go v0.33.0-rc2 738).
    #[serde(skip_serializing_if = "str::is_empty")]
    license: &'a str,
    modelfile: String,
    parameters: String,
    template: &'a str,
    /// The request's `system`, when it gives one (`GetModelInfo` sets the model's system to it,
    /// server/routes.go v0.33.0-rc2 1447-1449); the catalogue's models have none of their own.
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    details: Details<'a>,
    model_info: Map<String, Value>,
    tensors: Vec<crate::gguf::Tensor>,
    capabilities: &'a [String],
    modified_at: String,
}

/// A Modelfile command's argument as Ollama's parser writes it: in triple quotes when it holds
/// a line break or edge space and a double quote, in double quotes when only the former, bare
/// otherwise.
fn go_quote(s: &str) -> String {
    if s.contains('\n') || s.starts_with(' ') || s.ends_with(' ') {
        if s.contains('"') { format!("\"\"\"{s}\"\"\"") } else { format!("\"{s}\"") }
    } else {
        s.to_string()
    }
}

/// `POST /api/show` (`GetModelInfo`, server/routes.go v0.33.0-rc2 1396-1598; what the model
/// file says is in [`crate::gguf`]).
pub(crate) async fn show(State(s): State<AppState>, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let body = json_body(&s, body, "ShowRequest", BodyErrors::Native)?;
    let f = Fields::of(&body, "ShowRequest");
    // Bound whole before the handler looks at the name (api.ShowRequest, api/types.go
    // v0.33.0-rc2 722-734): a field of the wrong type is named before a missing model.
    f.in_body_order(|f, key| match key {
        "model" | "name" | "system" | "template" => f.string(key).map(drop),
        "verbose" => f.bool(key).map(drop),
        "options" => f.object(key, "map[string]interface {}").map(drop),
        _ => Ok(()),
    })?;
    let model =
        f.string("model")?.filter(|m| !m.trim().is_empty()).or(f.string("name")?.filter(|m| !m.trim().is_empty()));
    let Some(model) = model else {
        return Err(ApiError::bad_request("model is required"));
    };
    let verbose = f.bool("verbose")?.unwrap_or(false);
    // `template` and `options` are bound, not used by the handler.
    let system = f.string("system")?.unwrap_or_default();
    let name = Name::parse(&model).ok_or_else(ApiError::invalid_model_name)?;
    let m = s.instance.store.get(&name).ok_or_else(|| ApiError::model_not_found(&name.display()))?;
    let spec = &m.spec;
    let display = m.name.display();
    let mut modelfile = format!(
        "# Modelfile generated by \"ollama show\"\n# To build a new Modelfile based on this, replace FROM with:\n# FROM {display}\n\nFROM /root/.ollama/models/blobs/sha256-{}\n",
        spec.digest()
    );
    if !spec.template.is_empty() {
        modelfile.push_str(&format!("TEMPLATE {:?}\n", spec.template));
    }
    modelfile.push_str(&crate::gguf::modelfile_parameters(spec));
    if !spec.license.is_empty() {
        // After the parameters (server/images.go v0.33.0-rc2 660-665), quoted as the parser
        // quotes a command's argument (parser/parser.go 413-414, 644-654).
        modelfile.push_str(&format!("LICENSE {}\n", go_quote(&spec.license)));
    }
    let model_info = crate::gguf::model_info(spec, verbose);
    let show = Show {
        license: &spec.license,
        modelfile,
        parameters: crate::gguf::parameters(spec),
        template: &spec.template,
        system: &system,
        details: details(spec, false),
        tensors: crate::gguf::tensors(spec, &model_info),
        model_info,
        capabilities: &spec.capabilities,
        modified_at: rfc3339(m.modified_at),
    };
    Ok(json_response(StatusCode::OK, &show))
}

#[derive(Serialize)]
pub(super) struct Progress<'a> {
    pub(super) status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) digest: Option<String>,
    #[serde(skip_serializing_if = "super::http::is_zero")]
    pub(super) total: u64,
    #[serde(skip_serializing_if = "super::http::is_zero")]
    pub(super) completed: u64,
    #[serde(skip)]
    pub(super) _p: std::marker::PhantomData<&'a ()>,
}

pub(super) fn progress(status: impl Into<String>) -> Progress<'static> {
    Progress { status: status.into(), digest: None, total: 0, completed: 0, _p: std::marker::PhantomData }
}

/// `POST /api/pull`: a simulated progress stream that installs a catalogue model.
pub(crate) async fn pull(State(s): State<AppState>, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let body = json_body(&s, body, "PullRequest", BodyErrors::Native)?;
    let f = Fields::of(&body, "PullRequest");
    // Bound whole first (api.PullRequest, api/types.go v0.33.0-rc2 764-773): a field that came
    // twice is checked at each place.
    f.in_body_order(|f, key| match key {
        "model" | "name" | "username" | "password" => f.string(key).map(drop),
        "insecure" | "stream" => f.bool(key).map(drop),
        _ => Ok(()),
    })?;
    let model_s = f.string("model")?.filter(|m| !m.is_empty()).or(f.string("name")?.filter(|m| !m.is_empty()));
    let _insecure = f.bool("insecure")?;
    let stream = f.bool("stream")?.unwrap_or(true);
    let Some(model_s) = model_s else {
        return Err(ApiError::bad_request("model is required"));
    };
    let name = Name::parse(&model_s).ok_or_else(ApiError::invalid_model_name)?;
    let missing = "pull model manifest: file does not exist";
    let Some(spec) = s.instance.store.registry_entry(&name) else {
        if !stream {
            return Err(ApiError::internal(missing));
        }
        return Ok(manifest_missing(missing));
    };
    let digest = spec.digest();
    let cached = s.instance.store.installed(&name).is_some();
    let mut lines: Vec<Progress<'static>> = vec![progress("pulling manifest")];
    let steps: u64 = if cached { 1 } else { 4 };
    for i in 1..=steps {
        lines.push(Progress {
            status: format!("pulling {}", digest.get(..12).unwrap_or(&digest)),
            digest: Some(format!("sha256:{digest}")),
            total: spec.size,
            completed: spec.size * i / steps,
            _p: std::marker::PhantomData,
        });
    }
    lines.extend([progress("verifying sha256 digest"), progress("writing manifest"), progress("success")]);
    let installed_at = s.shared.clock.now();
    if !stream {
        // A download of a few simulated steps, paced like the stream.
        tokio::time::sleep(pull_step(&s) * steps as u32).await;
        s.instance.store.install(name, spec, installed_at).map_err(ApiError::internal)?;
        return Ok(json_response(StatusCode::OK, &progress("success")));
    }
    let step = pull_step(&s);
    Ok(installing(&s, lines, step, name, spec, installed_at))
}

/// A progress stream that installs `spec` as `name` when its last line goes out (pull, create).
pub(super) fn installing(
    s: &AppState,
    lines: Vec<Progress<'static>>,
    step: std::time::Duration,
    name: Name,
    spec: Arc<ModelSpec>,
    at: std::time::SystemTime,
) -> Response {
    let inst = Arc::clone(&s.instance);
    let stream = async_stream(lines, step, move || {
        if let Err(e) = inst.store.install(name, spec, at) {
            tracing::warn!(target: "sim_ollama", "{e}");
        }
    });
    let mut r = (StatusCode::OK, Body::from_stream(stream)).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    r
}

/// The stream of a pull (or a create from a model) whose manifest the registry does not have:
/// "pulling manifest", then the error, in a 200.
pub(super) fn manifest_missing(missing: &str) -> Response {
    status_then_error("pulling manifest", missing, false)
}

/// A 200 stream of one progress line, `status`, then the error that ended it, as Ollama's
/// `streamResponse` writes one; `chunked`, or with its length (the pull's is sent whole).
pub(super) fn status_then_error(status: &str, error: &str, chunked: bool) -> Response {
    let lines = [
        crate::gojson::to_go_json(&progress(status)),
        crate::gojson::to_go_json(&serde_json::json!({ "error": error })),
    ];
    if !chunked {
        return bytes_response(
            StatusCode::OK,
            "application/x-ndjson",
            lines.join(&b'\n').into_iter().chain([b'\n']).collect(),
        );
    }
    let chunks = lines.map(|mut l| {
        l.push(b'\n');
        Ok::<_, std::convert::Infallible>(Bytes::from(l))
    });
    let mut r = (StatusCode::OK, Body::from_stream(futures::stream::iter(chunks))).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    r
}

/// Time between pull progress lines: the real server's 60 ms, scaled.
pub(super) fn pull_step(s: &AppState) -> std::time::Duration {
    std::time::Duration::try_from_secs_f64(0.060 * s.shared.cfg.time_scale)
        .unwrap_or(std::time::Duration::from_secs(60))
}

pub(super) fn async_stream(
    lines: Vec<Progress<'static>>,
    step: std::time::Duration,
    on_done: impl FnOnce() + Send + 'static,
) -> impl futures::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send {
    let n = lines.len();
    let mut on_done = Some(on_done);
    futures::stream::unfold((lines.into_iter().enumerate(), Instant::now()), move |(mut it, start)| {
        let done = if it.len() == 1 { on_done.take() } else { None };
        async move {
            let (i, p) = it.next()?;
            if i > 0 && i + 3 < n {
                tokio::time::sleep_until((start + step * i as u32).into()).await;
            }
            if let Some(f) = done {
                f();
            }
            let mut b = crate::gojson::to_go_json(&p);
            b.push(b'\n');
            Some((Ok(Bytes::from(b)), (it, start)))
        }
    })
}

/// `POST /api/copy`: 200 with an empty body.
pub(crate) async fn copy(State(s): State<AppState>, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let body = json_body(&s, body, "CopyRequest", BodyErrors::Native)?;
    let f = Fields::of(&body, "CopyRequest");
    // Bound whole first (api.CopyRequest, api/types.go v0.33.0-rc2 758-761).
    f.in_body_order(|f, key| match key {
        "source" | "destination" => f.string(key).map(drop),
        _ => Ok(()),
    })?;
    let src_s = f.string("source")?.unwrap_or_default();
    let dst_s = f.string("destination")?.unwrap_or_default();
    let src = Name::parse(&src_s).ok_or_else(|| ApiError::bad_request(format!("source \"{src_s}\" is invalid")))?;
    let dst =
        Name::parse(&dst_s).ok_or_else(|| ApiError::bad_request(format!("destination \"{dst_s}\" is invalid")))?;
    let m = s.instance.store.get(&src).ok_or_else(|| ApiError::not_found(format!("model \"{src_s}\" not found")))?;
    let at = s.shared.clock.now();
    s.instance.store.install(dst, m.spec, at).map_err(ApiError::internal)?;
    Ok(StatusCode::OK.into_response())
}

/// `DELETE /api/delete`: 200 with an empty body.
pub(crate) async fn delete(
    State(s): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = json_body(&s, body, "DeleteRequest", BodyErrors::Native)?;
    let f = Fields::of(&body, "DeleteRequest");
    // Bound whole first (api.DeleteRequest, api/types.go v0.33.0-rc2 714-719).
    f.in_body_order(|f, key| match key {
        "model" | "name" => f.string(key).map(drop),
        _ => Ok(()),
    })?;
    let model_s = f.string("model")?.filter(|m| !m.is_empty()).or(f.string("name")?.filter(|m| !m.is_empty()));
    let Some(model_s) = model_s else {
        return Err(ApiError::bad_request("model is required"));
    };
    // DeleteHandler's own text for a name it cannot parse (server/routes.go 1257-1266).
    let name = Name::parse(&model_s).ok_or_else(|| ApiError::bad_request(format!("name {model_s:?} is invalid")))?;
    if !s.instance.store.remove(&name) {
        return Err(ApiError::model_not_found(&model_s));
    }
    // The real DeleteHandler (server/routes.go v0.33.0-rc2 1247-1297) removes the manifest and
    // layers and never touches the scheduler: a loaded runner stays loaded (and in /api/ps)
    // until it expires.
    Ok(StatusCode::OK.into_response())
}
