//! `POST /v1/audio/transcriptions` (issue 38): the OpenAI transcription form, as Ollama's
//! `TranscriptionMiddleware` turns it into a chat (middleware/openai.go v0.33.0-rc2 1233-1345,
//! openai/openai.go 864-887): a system prompt asking for the spoken words, the audio as the
//! user message's multimodal data, temperature 0, the answer's text as `{"text"}` (or plain
//! text with `response_format=text`). A model with no projector for audio or images refuses it
//! as its runner refuses any multimodal data.
//!
//! The form is read by a small multipart/form-data reader here: the simulator keeps no
//! multipart crate for one route of two text fields and a file.

use super::history::ChatMessage;
use super::http::{AppState, body_bytes, bytes_response, encoder_response};
use super::peer::Peer;
use super::pipeline::{self, ChatInput, Started, begin_trace, traced};
use crate::error::ApiError;
use crate::request::Options;
use crate::wire::Wire;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;

/// The real middleware's form limit: 25 MiB.
const FORM_LIMIT: usize = 25 << 20;

/// One part of a multipart form.
#[derive(Debug, PartialEq)]
struct Part {
    name: String,
    filename: Option<String>,
    data: Vec<u8>,
}

/// The parts of a `multipart/form-data` body, or Go's reason it is not one.
fn form_parts(content_type: &str, body: &[u8]) -> Result<Vec<Part>, String> {
    let not_form = || "request Content-Type isn't multipart/form-data".to_string();
    let (kind, params) = content_type.split_once(';').unwrap_or((content_type, ""));
    if !kind.trim().eq_ignore_ascii_case("multipart/form-data") {
        return Err(not_form());
    }
    let boundary = params
        .split(';')
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("boundary"))
        .map(|(_, v)| v.trim().trim_matches('"').to_string())
        .filter(|b| !b.is_empty())
        .ok_or_else(|| "no multipart boundary param in Content-Type".to_string())?;
    let delimiter = format!("--{boundary}").into_bytes();
    let find = |hay: &[u8], from: usize| {
        hay.get(from..)?.windows(delimiter.len()).position(|w| w == delimiter).map(|i| i + from)
    };
    let eof = || "multipart: NextPart: EOF".to_string();
    let mut at = find(body, 0).ok_or_else(eof)? + delimiter.len();
    let mut parts = Vec::new();
    loop {
        if body.get(at..at + 2) == Some(b"--") {
            return Ok(parts);
        }
        let start = at + body.get(at..).map_or(0, |r| if r.starts_with(b"\r\n") { 2 } else { 0 });
        let head_end =
            body.get(start..).and_then(|r| r.windows(4).position(|w| w == b"\r\n\r\n")).ok_or_else(eof)? + start;
        let head = String::from_utf8_lossy(&body[start..head_end]);
        let next = find(body, head_end + 4).ok_or_else(eof)?;
        let data_end = if next >= 2 && &body[next - 2..next] == b"\r\n" { next - 2 } else { next };
        let (mut name, mut filename) = (String::new(), None);
        for line in head.lines() {
            let Some((k, v)) = line.split_once(':') else { continue };
            if !k.trim().eq_ignore_ascii_case("content-disposition") {
                continue;
            }
            for p in v.split(';').filter_map(|p| p.split_once('=')) {
                let value = p.1.trim().trim_matches('"').to_string();
                match p.0.trim() {
                    "name" => name = value,
                    "filename" => filename = Some(value),
                    _ => {}
                }
            }
        }
        parts.push(Part { name, filename, data: body[head_end + 4..data_end.max(head_end + 4)].to_vec() });
        at = next + delimiter.len();
    }
}

/// `POST /v1/audio/transcriptions`.
pub(crate) async fn transcriptions(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let arrival = peer.arrival();
    // The middleware's own checks answer through gin (a charset).
    let mw = |m: String| ApiError::bad_request(m).from_middleware().openai();
    let bytes = body_bytes(body, s.shared.cfg.body_limit.min(FORM_LIMIT)).map_err(|e| e.from_middleware().openai())?;
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let parts = form_parts(content_type, &bytes).map_err(|e| mw(format!("failed to parse multipart form: {e}")))?;
    let field = |n: &str| {
        parts.iter().find(|p| p.name == n && p.filename.is_none()).map(|p| String::from_utf8_lossy(&p.data).to_string())
    };
    let model_s = field("model").unwrap_or_default();
    if model_s.is_empty() {
        return Err(mw("model is required".into()));
    }
    let Some(file) = parts.iter().find(|p| p.name == "file" && p.filename.is_some()) else {
        return Err(mw("file is required: http: no such file".into()));
    };
    if file.data.is_empty() {
        return Err(mw("audio file is empty".into()));
    }
    let text_format = field("response_format").is_some_and(|f| f == "text");
    let mut system = "Transcribe the audio exactly as spoken. Output only the spoken words. Do not answer any question in the audio.".to_string();
    if let Some(l) = field("language").filter(|l| !l.is_empty()) {
        system.push_str(&format!(" The audio is in {l}."));
    }
    if let Some(p) = field("prompt").filter(|p| !p.is_empty()) {
        system.push_str(&format!(" Context: {p}"));
    }
    let messages = vec![
        ChatMessage { role: "system".into(), content: system, images: 0, tool_text: String::new() },
        ChatMessage {
            role: "user".into(),
            content: "What exact words are spoken in this audio?".into(),
            images: 1,
            tool_text: String::new(),
        },
    ];
    let mut trace = None;
    let r = async {
        trace = Some(begin_trace(&s, arrival, "/v1/audio/transcriptions", &model_s, peer, false, None));
        let model = pipeline::chat_model(&s, &model_s, None, 0)?;
        let options = Options { temperature: Some(0.0), ..Options::default() };
        let input = ChatInput::new("/v1/audio/transcriptions", messages, options, Vec::new(), arrival);
        // The chat the middleware makes streams: a runner's refusal comes inside it.
        let Started { run, fault, .. } =
            pipeline::chat(&s, input, model, &mut trace).await.map_err(|e| e.in_stream(true))?;
        let wire = Wire::OpenAiChat { id: String::new(), model: model_s.clone(), created: 0, include_usage: false };
        Ok(pipeline::respond(run, wire, false, fault, move |_, text, _| {
            let text = text.trim().to_string();
            if text_format {
                bytes_response(StatusCode::OK, "text/plain", text.into_bytes())
            } else {
                encoder_response(&serde_json::json!({ "text": text }))
            }
        })
        .await)
    }
    .await;
    traced(&mut trace, r).map_err(ApiError::openai)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_is_read_into_its_fields_and_files() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\ngemma4:e2b\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"prompt.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF\r\n\x00\x01--\r\n--XyZ--\r\n";
        let parts = form_parts("multipart/form-data; boundary=XyZ", body).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[0].name.as_str(), parts[0].filename.as_deref(), parts[0].data.as_slice()),
            ("model", None, &b"gemma4:e2b"[..])
        );
        assert_eq!(parts[1].filename.as_deref(), Some("prompt.wav"));
        assert_eq!(parts[1].data, b"RIFF\r\n\x00\x01--");
        assert_eq!(form_parts("application/json", body).unwrap_err(), "request Content-Type isn't multipart/form-data");
        assert_eq!(
            form_parts("multipart/form-data; boundary=XyZ", b"--XyZ\r\nContent-Disp").unwrap_err(),
            "multipart: NextPart: EOF"
        );
    }
}
