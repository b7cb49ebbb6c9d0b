//! `harness conformance`: one battery of requests sent to a real Ollama server and to a fresh
//! simulator, every difference that is not the model's own output reported.
//!
//! What is compared, case by case (the battery is `harness/conformance/battery.toml`, run in
//! order, each case on the real server first): the status code; the response headers, their
//! names exactly as written on the wire (case and order) and their values, except `Date` and
//! `Content-Length` whose values vary; the body's shape. A JSON body is reduced to a skeleton:
//! objects keep their keys in order, numbers and generated strings become their kind, and the
//! strings the protocol fixes (error texts, `type`, `object`, `role`, `model`, reasons...)
//! are kept as they are. A stream (NDJSON lines, or server-sent events with their `event:`
//! names) becomes the sequence of its events' skeletons, with repeats of one skeleton merged, so
//! a model that writes 5 tokens and one that writes 8 give the same sequence. Go escapes `<`,
//! `>` and `&` in every JSON string it writes; a body of the simulator's that writes them raw
//! where the real server's never does is a difference too.
//!
//! The raw HTTP/1.1 client here is deliberate: HTTP libraries lower-case header names, and the
//! case is one of the things compared.
//!
//! Differences that are known and kept on purpose are listed with their reasons in
//! `harness/conformance/accepted.toml`; the command fails (exit 3) on any other.
//!
//! One concept, in one file of about 700 lines: the battery, the raw client, the comparison
//! and the model's description read from the real server; a fifth of it is its unit tests.

use serde::Deserialize;
use serde_json::Value;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The default battery, compiled in.
pub const BATTERY_TOML: &str = include_str!("../conformance/battery.toml");
/// The default list of accepted differences, compiled in.
pub const ACCEPTED_TOML: &str = include_str!("../conformance/accepted.toml");

/// How long one response may take, from the request's send to its last byte.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

/// One request of the battery. `{model}` in `path` or `body` is the model under test.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// A short name, unique in the battery: the accepted list refers to it.
    pub name: String,
    /// `GET`, `POST`, `HEAD`, ...
    pub method: String,
    /// Path and query.
    pub path: String,
    /// The body, sent as it is (it may be malformed on purpose); none sends no body.
    #[serde(default)]
    pub body: Option<String>,
    /// Extra request headers, in order.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
}

/// The battery: its cases, in order.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Battery {
    /// Cases, run in this order (the order matters: loads, unloads).
    #[serde(rename = "case")]
    pub cases: Vec<Case>,
}

impl Battery {
    /// Parses a battery and checks its names are unique.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let b: Battery = toml::from_str(text).map_err(|e| format!("the battery: {e}"))?;
        let mut seen = std::collections::HashSet::new();
        for c in &b.cases {
            if !seen.insert(c.name.as_str()) {
                return Err(format!("the battery: the case name `{}` is used twice", c.name));
            }
        }
        if b.cases.is_empty() {
            return Err("the battery has no cases".into());
        }
        Ok(b)
    }
}

/// A difference kept on purpose.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accepted {
    /// The case's name, `*` for every case, or a prefix ending in `*` (`generated/chat/*`).
    pub case: String,
    /// Where: a difference whose place starts with this is accepted (`headers`, `status`,
    /// `body $.model_info`, `events`, `escaping`).
    pub place: String,
    /// Why the simulator differs here.
    pub reason: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct AcceptedFile {
    #[serde(default)]
    accepted: Vec<Accepted>,
}

/// Parses the list of accepted differences.
pub fn accepted_from_toml(text: &str) -> Result<Vec<Accepted>, String> {
    let f: AcceptedFile = toml::from_str(text).map_err(|e| format!("the accepted list: {e}"))?;
    if let Some(a) = f.accepted.iter().find(|a| a.reason.trim().is_empty()) {
        return Err(format!("the accepted list: `{}` at `{}` gives no reason", a.case, a.place));
    }
    Ok(f.accepted)
}

/// One response as it came off the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct RawResponse {
    /// The status code.
    pub status: u16,
    /// Header names as written, with their values, in order.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Sends one request on a fresh connection and reads the whole response.
pub fn send(base: &str, case: &Case, model: &str) -> Result<RawResponse, String> {
    let authority = base
        .trim_end_matches('/')
        .strip_prefix("http://")
        .ok_or_else(|| format!("{base}: only http:// URLs are supported"))?;
    let path = case.path.replace("{model}", model);
    let mut stream = TcpStream::connect(authority).map_err(|e| format!("{base}: {e}"))?;
    stream.set_read_timeout(Some(RESPONSE_TIMEOUT)).map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let mut req = format!(
        "{} {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: harness-conformance\r\nAccept: */*\r\n",
        case.method
    );
    for (n, v) in &case.headers {
        let _ = write!(req, "{n}: {v}\r\n");
    }
    let body = case.body.as_deref().map(|b| b.replace("{model}", model));
    if let Some(b) = &body {
        if !case.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-type")) {
            req.push_str("Content-Type: application/json\r\n");
        }
        let _ = write!(req, "Content-Length: {}\r\n", b.len());
    }
    req.push_str("\r\n");
    if let Some(b) = &body {
        req.push_str(b);
    }
    stream.write_all(req.as_bytes()).map_err(|e| format!("{base}{path}: {e}"))?;
    read_response(BufReader::new(stream), case.method.eq_ignore_ascii_case("HEAD"))
        .map_err(|e| format!("{base}{path}: {e}"))
}

/// Reads one HTTP/1.1 response: status line, headers as written, body by its framing.
pub fn read_response(mut r: impl BufRead, head: bool) -> Result<RawResponse, String> {
    let mut line = String::new();
    r.read_line(&mut line).map_err(|e| e.to_string())?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("not an HTTP status line: {:?}", line.trim_end()))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if r.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Err("the connection closed inside the headers".into());
        }
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').ok_or_else(|| format!("not a header line: {l:?}"))?;
        headers.push((n.to_string(), v.trim().to_string()));
    }
    let mut resp = RawResponse { status, headers, body: Vec::new() };
    if head || status == 204 || status == 304 || (100..200).contains(&status) {
        return Ok(resp);
    }
    if resp.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            r.read_line(&mut line).map_err(|e| e.to_string())?;
            let size = line.trim_end().split(';').next().unwrap_or("");
            let n = usize::from_str_radix(size.trim(), 16)
                .map_err(|_| format!("bad chunk size line {:?}", line.trim_end()))?;
            if n == 0 {
                // Trailers, then the empty line.
                loop {
                    line.clear();
                    if r.read_line(&mut line).map_err(|e| e.to_string())? == 0 || line.trim_end().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = resp.body.len();
            resp.body.resize(start + n, 0);
            r.read_exact(&mut resp.body[start..]).map_err(|e| format!("inside a chunk: {e}"))?;
            line.clear();
            r.read_line(&mut line).map_err(|e| e.to_string())?;
        }
    } else if let Some(n) = resp.header("content-length") {
        let n: usize = n.parse().map_err(|_| format!("bad Content-Length {n:?}"))?;
        resp.body.resize(n, 0);
        r.read_exact(&mut resp.body).map_err(|e| format!("inside the body: {e}"))?;
    } else {
        r.read_to_end(&mut resp.body).map_err(|e| e.to_string())?;
    }
    Ok(resp)
}

/// One difference between the real server's response and the simulator's.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// The case's name.
    pub case: String,
    /// Where: `status`, `headers`, `body $.a.b`, `events`, `escaping`.
    pub place: String,
    /// What the real server sent there.
    pub real: String,
    /// What the simulator sent there.
    pub sim: String,
    /// The accepted list's reason, when this difference is on it.
    pub accepted: Option<String>,
}

/// Header values that vary between two responses of one server.
const VARYING_HEADERS: &[&str] = &["date", "content-length"];

/// Strings the protocol fixes: compared as they are. Every other string is taken for generated,
/// per-request (text, ids, timestamps, digests) or a fact of one model file that the
/// catalogue's entry need not share with the real server's (`parameter_size`, `template`,
/// `parameters`, whose lines Go writes in map order) and compared by kind only.
const FIXED_STRING_KEYS: &[&str] = &[
    "error",
    "message",
    "type",
    "object",
    "role",
    "code",
    "param",
    "done_reason",
    "finish_reason",
    "stop_reason",
    "model",
    "name",
    "owned_by",
    "format",
    "family",
    "families",
    "quantization_level",
    "parent_model",
    "capabilities",
    "event",
];

/// Keys that say how a generation ended.
const ENDING_KEYS: &[&str] = &["done_reason", "finish_reason", "stop_reason"];
/// Endings a model chooses (it stopped, or ran into its limit), as opposed to `load`, `unload`
/// or a tool call, which the request decides.
const GENERATION_ENDINGS: &[&str] = &["stop", "length", "end_turn", "max_tokens", "stop_sequence"];

/// Compares one case's two responses.
pub fn compare(case: &str, real: &RawResponse, sim: &RawResponse) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut diff = |place: &str, r: String, s: String| {
        out.push(Difference { case: case.to_string(), place: place.to_string(), real: r, sim: s, accepted: None })
    };
    if real.status != sim.status {
        diff("status", real.status.to_string(), sim.status.to_string());
    }
    let names = |h: &[(String, String)]| h.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>().join(", ");
    if names(&real.headers) != names(&sim.headers) {
        diff("headers", names(&real.headers), names(&sim.headers));
    }
    // A header sent more than once (a preflight's three `Vary`) is compared value by value.
    let values = |h: &[(String, String)], n: &str| {
        h.iter().filter(|(k, _)| k.eq_ignore_ascii_case(n)).map(|(_, v)| v.as_str()).collect::<Vec<_>>().join(" | ")
    };
    let mut compared: Vec<&str> = Vec::new();
    for (n, _) in &real.headers {
        if VARYING_HEADERS.iter().any(|x| n.eq_ignore_ascii_case(x))
            || compared.iter().any(|c| c.eq_ignore_ascii_case(n))
        {
            continue;
        }
        compared.push(n);
        let (rv, sv) = (values(&real.headers, n), values(&sim.headers, n));
        if sim.header(n).is_some() && rv != sv {
            diff(&format!("headers {n}"), rv, sv);
        }
    }
    // A stream on either side is compared as one (a JSON answer where the other streams is a
    // difference of its events).
    let is_stream = |t: &&str| t.starts_with("text/event-stream") || t.starts_with("application/x-ndjson");
    let content_type = [real.header("content-type").unwrap_or(""), sim.header("content-type").unwrap_or("")]
        .into_iter()
        .find(is_stream)
        .unwrap_or(real.header("content-type").unwrap_or(""));
    let real_text = String::from_utf8_lossy(&real.body);
    let sim_text = String::from_utf8_lossy(&sim.body);
    let is_json_body = |t: &str| serde_json::from_str::<Value>(t).is_ok();
    if is_stream(&content_type) {
        let sse = content_type.starts_with("text/event-stream");
        let events = |t: &str| if sse { sse_events(t) } else { ndjson_events(t) };
        let (r, s) = (events(&real_text), events(&sim_text));
        if r != s {
            let at = r.iter().zip(&s).position(|(a, b)| a != b).unwrap_or(r.len().min(s.len()));
            let show = |v: &[String]| v.get(at).cloned().unwrap_or_else(|| "(the stream ends)".into());
            diff(
                &format!("events #{at}"),
                format!("{} ({} kinds of event)", show(&r), r.len()),
                format!("{} ({} kinds of event)", show(&s), s.len()),
            );
        }
    } else if is_json_body(&real_text) {
        match serde_json::from_str::<Value>(&sim_text) {
            Ok(sv) => {
                let rv: Value = serde_json::from_str(&real_text).expect("checked above");
                let mut shape = Vec::new();
                diff_skeletons("$", &skeleton(None, &rv), &skeleton(None, &sv), &mut shape);
                for (place, r, s) in shape {
                    diff(&format!("body {place}"), r, s);
                }
            }
            Err(_) => diff("body", abbreviate(&real_text), abbreviate(&sim_text)),
        }
    } else if real_text != sim_text {
        diff("body", abbreviate(&real_text), abbreviate(&sim_text));
    }
    if !real.body.is_empty() && !has_raw_html_chars(&real_text) && has_raw_html_chars(&sim_text) {
        diff("escaping", "<, > and & escaped as \\u003c, \\u003e, \\u0026".into(), "written raw".into());
    }
    out
}

fn has_raw_html_chars(t: &str) -> bool {
    t.contains(['<', '>', '&'])
}

fn abbreviate(t: &str) -> String {
    const MAX: usize = 200;
    match t.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t.to_string(),
    }
}

/// A JSON value reduced to what the protocol fixes (see the module's header).
pub fn skeleton(key: Option<&str>, v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), skeleton(Some(k), v))).collect()),
        Value::Array(a) => {
            let mut out: Vec<Value> = Vec::new();
            for e in a {
                let s = skeleton(key, e);
                if out.last() != Some(&s) {
                    out.push(s);
                }
            }
            Value::Array(out)
        }
        // Whether a generation stopped by itself or at its token limit is the model's doing.
        Value::String(s)
            if key.is_some_and(|k| ENDING_KEYS.contains(&k)) && GENERATION_ENDINGS.contains(&s.as_str()) =>
        {
            Value::String("<stop or length>".into())
        }
        Value::String(s) if key.is_some_and(|k| FIXED_STRING_KEYS.contains(&k)) => Value::String(s.clone()),
        Value::String(_) => Value::String("<string>".into()),
        Value::Number(_) => Value::String("<number>".into()),
        other => other.clone(),
    }
}

/// A JSON value's kind, as the comparison names it.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn diff_skeletons(place: &str, r: &Value, s: &Value, out: &mut Vec<(String, String, String)>) {
    match (r, s) {
        (Value::Object(a), Value::Object(b)) => {
            let ka: Vec<&String> = a.keys().collect();
            let kb: Vec<&String> = b.keys().collect();
            if ka != kb {
                let list = |k: &[&String]| k.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
                out.push((format!("{place} keys"), list(&ka), list(&kb)));
            }
            for (k, va) in a {
                if let Some(vb) = b.get(k) {
                    diff_skeletons(&format!("{place}.{k}"), va, vb, out);
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                out.push((format!("{place} length"), format!("{} shapes", a.len()), format!("{} shapes", b.len())));
            }
            for (i, (va, vb)) in a.iter().zip(b).enumerate() {
                diff_skeletons(&format!("{place}[{i}]"), va, vb, out);
            }
        }
        _ if kind(r) != kind(s) => out.push((place.to_string(), kind(r).into(), kind(s).into())),
        _ if r != s => out.push((place.to_string(), r.to_string(), s.to_string())),
        _ => {}
    }
}

/// The skeleton of each line of an NDJSON stream, repeats merged.
fn ndjson_events(t: &str) -> Vec<String> {
    merge_repeats(t.lines().filter(|l| !l.trim().is_empty()).map(|l| match serde_json::from_str::<Value>(l) {
        Ok(v) => skeleton(None, &v).to_string(),
        Err(_) => format!("not JSON: {}", abbreviate(l)),
    }))
}

/// Each server-sent event as `event: NAME data: SKELETON`, repeats merged.
fn sse_events(t: &str) -> Vec<String> {
    let t = t.replace("\r\n", "\n");
    merge_repeats(t.split("\n\n").filter(|b| !b.trim().is_empty()).map(|block| {
        let mut desc = Vec::new();
        for l in block.lines() {
            let (field, value) =
                l.split_once(':').map(|(f, v)| (f, v.strip_prefix(' ').unwrap_or(v))).unwrap_or((l, ""));
            match field {
                "data" => desc.push(match serde_json::from_str::<Value>(value) {
                    Ok(v) => format!("data: {}", skeleton(None, &v)),
                    Err(_) => format!("data: {value}"),
                }),
                other => desc.push(format!("{other}: {value}")),
            }
        }
        desc.join(" ")
    }))
}

fn merge_repeats(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for i in items {
        if out.last() != Some(&i) {
            out.push(i);
        }
    }
    out
}

/// Marks the differences the accepted list covers.
pub fn apply_accepted(diffs: &mut [Difference], accepted: &[Accepted]) {
    for d in diffs {
        d.accepted = accepted
            .iter()
            .find(|a| names(&a.case, &d.case) && d.place.starts_with(&a.place))
            .map(|a| a.reason.clone());
    }
}

/// Whether an accepted entry's case names this case: its name, or a pattern where `*` stands
/// for any run of characters (`*` every case, `generated/chat/*` a route's generated cases,
/// `generated/*/options.num_batch=1` one change on any route).
fn names(pattern: &str, case: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = case.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for p in middle {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The outcome of a battery.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Cases run.
    pub cases: usize,
    /// Every difference, accepted ones marked.
    pub differences: Vec<Difference>,
}

impl Outcome {
    /// Differences not on the accepted list.
    pub fn unexpected(&self) -> usize {
        self.differences.iter().filter(|d| d.accepted.is_none()).count()
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for d in &self.differences {
            let mark = if d.accepted.is_some() { "accepted" } else { "DIFFERS" };
            writeln!(f, "{mark:8} {} {}\n         real: {}\n         sim:  {}", d.case, d.place, d.real, d.sim)?;
            if let Some(r) = &d.accepted {
                writeln!(f, "         why:  {r}")?;
            }
        }
        let accepted = self.differences.len() - self.unexpected();
        writeln!(f, "{} cases: {} differences not accepted, {accepted} accepted", self.cases, self.unexpected())
    }
}

/// Runs the battery against both servers, the real one first in each case.
pub fn run(
    real: &str,
    sim: &str,
    model: &str,
    battery: &Battery,
    accepted: &[Accepted],
    progress: &mut dyn FnMut(&str),
) -> Result<Outcome, String> {
    let mut differences = Vec::new();
    for case in &battery.cases {
        progress(&case.name);
        let r = send(real, case, model).map_err(|e| format!("case `{}`, the real server: {e}", case.name))?;
        let s = send(sim, case, model).map_err(|e| format!("case `{}`, the simulator: {e}", case.name))?;
        differences.extend(compare(&case.name, &r, &s));
    }
    apply_accepted(&mut differences, accepted);
    Ok(Outcome { cases: battery.cases.len(), differences })
}

/// A fresh simulator serving only `model`, described as the real server describes it, otherwise
/// as a real server starts (one slot, the default queue and keep-alive).
///
/// The model's facts (family, sizes, template, capabilities, Modelfile parameters, its file's
/// metadata) come from the real server's verbose `/api/show`, so that the battery compares
/// what the servers do and not two different model files; its timing profile is the
/// catalogue's entry of that name, else the catalogue's `tiny`.
pub fn simulator_for(real: &str, model: &str) -> Result<sim_ollama::SimHandle, String> {
    use sim_ollama::advanced::config::ConfigFile;
    let spec = model_as_served(real, model)?;
    let config = ConfigFile { replace_catalogue: true, models: vec![spec], ..ConfigFile::default() };
    sim_ollama::SimBuilder::new().config(config).start().map_err(|e| format!("the simulator: {e}"))
}

/// The catalogue entry for `model` with what the real server's verbose `/api/show` says of it.
pub fn model_as_served(real: &str, model: &str) -> Result<sim_ollama::advanced::config::ModelSpec, String> {
    use sim_ollama::advanced::config::default_catalogue;
    let full = if model.contains(':') { model.to_string() } else { format!("{model}:latest") };
    let case = Case {
        name: "show".into(),
        method: "POST".into(),
        path: "/api/show".into(),
        body: Some(serde_json::json!({"model": model, "verbose": true}).to_string()),
        headers: Vec::new(),
    };
    let r = send(real, &case, model)?;
    let show: Value = serde_json::from_slice(&r.body).map_err(|e| format!("{real}/api/show: not JSON: {e}"))?;
    if r.status != 200 {
        return Err(format!("{real}/api/show for `{model}`: {} {}", r.status, show["error"].as_str().unwrap_or("")));
    }
    let catalogue = default_catalogue();
    let mut spec = catalogue
        .iter()
        .find(|m| m.name == full)
        .or_else(|| catalogue.iter().find(|m| m.name == "tiny:latest"))
        .cloned()
        .ok_or("the catalogue has no `tiny`")?;
    spec.name = full;
    let text = |v: &Value| v.as_str().map(str::to_string);
    let details = &show["details"];
    if let Some(f) = text(&details["family"]) {
        spec.family = f;
    }
    if let Some(p) = text(&details["parameter_size"]) {
        spec.parameter_size = p;
    }
    if let Some(q) = text(&details["quantization_level"]) {
        spec.quantization_level = q;
    }
    spec.template = text(&show["template"]).unwrap_or_default();
    if let Some(c) = show["capabilities"].as_array() {
        spec.capabilities = c.iter().filter_map(text).collect();
    }
    if let Some(info) = show["model_info"].as_object() {
        let arch = info.get("general.architecture").and_then(Value::as_str).unwrap_or(&spec.family).to_string();
        if let Some(n) = info.get(&format!("{arch}.context_length")).and_then(Value::as_u64) {
            spec.context_length = n;
        }
        if let Some(n) = info.get(&format!("{arch}.embedding_length")).and_then(Value::as_u64) {
            spec.embedding_length = n;
        }
        spec.model_info = info.clone();
    }
    // `name<padding> value`, the value as Go's %#v prints it.
    spec.parameters = show["parameters"]
        .as_str()
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.split_once(char::is_whitespace))
        .map(|(k, v)| {
            let v = v.trim();
            (k.to_string(), serde_json::from_str::<String>(v).unwrap_or_else(|_| v.to_string()))
        })
        .collect();
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(text: &str) -> RawResponse {
        read_response(BufReader::new(text.as_bytes()), false).expect("parses")
    }

    /// A response with `head` (status line and headers, no length) and a body of its length.
    fn with_body(head: &str, body: &str) -> RawResponse {
        resp(&format!("{head}\r\nContent-Length: {}\r\n\r\n{body}", body.len()))
    }

    #[test]
    fn the_compiled_in_battery_and_accepted_list_parse() {
        let b = Battery::from_toml(BATTERY_TOML).expect("battery");
        assert!(b.cases.len() >= 40, "{}", b.cases.len());
        let a = accepted_from_toml(ACCEPTED_TOML).expect("accepted");
        for x in &a {
            // A generated case's name, or a pattern, names generated cases; any other name, a
            // battery case.
            assert!(
                x.case.contains('*') || x.case.starts_with("generated/") || b.cases.iter().any(|c| c.name == x.case),
                "accepted `{}` names no case",
                x.case
            );
        }
    }

    #[test]
    fn chunked_bodies_are_joined_and_header_case_is_kept() {
        let r = resp(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n5\r\n\":1}\n\r\n0\r\n\r\n",
        );
        assert_eq!(r.body, b"{\"a\":1}\n");
        assert_eq!(r.headers[1].0, "Transfer-Encoding");
    }

    #[test]
    fn header_case_and_order_differ() {
        let real = resp("HTTP/1.1 200 OK\r\nContent-Type: a\r\nDate: x\r\nContent-Length: 2\r\n\r\n{}");
        let sim = resp("HTTP/1.1 200 OK\r\ncontent-type: a\r\ncontent-length: 2\r\ndate: y\r\n\r\n{}");
        let d = compare("c", &real, &sim);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].place, "headers");
        assert_eq!(d[0].real, "Content-Type, Date, Content-Length");
        let same = resp("HTTP/1.1 200 OK\r\nContent-Type: a\r\nDate: z\r\nContent-Length: 2\r\n\r\n{}");
        assert!(compare("c", &real, &same).is_empty());
    }

    #[test]
    fn a_header_sent_more_than_once_is_compared_value_by_value() {
        let real = resp("HTTP/1.1 204 No Content\r\nVary: Origin\r\nVary: Access-Control-Request-Method\r\n\r\n");
        let sim = resp("HTTP/1.1 204 No Content\r\nVary: Origin\r\nVary: Accept\r\n\r\n");
        let d = compare("c", &real, &sim);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!((d[0].place.as_str(), d[0].sim.as_str()), ("headers Vary", "Origin | Accept"));
        assert!(compare("c", &real, &real).is_empty());
    }

    #[test]
    fn generated_values_do_not_differ_but_keys_kinds_and_error_texts_do() {
        let ok = "HTTP/1.1 200 OK";
        let real = with_body(ok, r#"{"model":"m","response":"abc","eval_count":3,"done_reason":"stop"}"#);
        let sim = with_body(ok, r#"{"model":"m","response":"xyzzy","eval_count":17,"done_reason":"length"}"#);
        assert!(compare("c", &real, &sim).is_empty());
        let reordered = with_body(ok, r#"{"response":"abc","model":"m","eval_count":3,"done_reason":"stop"}"#);
        assert_eq!(compare("c", &real, &reordered)[0].place, "body $ keys");
        let e1 = with_body("HTTP/1.1 400 Bad Request", r#"{"error":"a"}"#);
        let e2 = with_body("HTTP/1.1 400 Bad Request", r#"{"error":"b"}"#);
        assert_eq!(compare("c", &e1, &e2)[0].place, "body $.error");
        let kind = with_body(ok, r#"{"model":"m","response":"abc","eval_count":null,"done_reason":"stop"}"#);
        assert_eq!(compare("c", &real, &kind)[0].place, "body $.eval_count");
        let load = with_body(ok, r#"{"model":"m","response":"abc","eval_count":3,"done_reason":"load"}"#);
        assert_eq!(compare("c", &real, &load)[0].place, "body $.done_reason");
    }

    #[test]
    fn streams_compare_by_event_sequence_with_repeats_merged() {
        let ev = |n: usize, last: &str| {
            let mut b = String::from("event: start\ndata: {\"type\":\"start\"}\n\n");
            for i in 0..n {
                let _ = write!(b, "event: delta\ndata: {{\"type\":\"delta\",\"text\":\"t{i}\"}}\n\n");
            }
            let _ = write!(b, "event: {last}\ndata: {{\"type\":\"{last}\"}}\n\n");
            with_body("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream", &b)
        };
        assert!(compare("c", &ev(3, "stop"), &ev(9, "stop")).is_empty());
        let d = compare("c", &ev(3, "stop"), &ev(3, "end"));
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].place, "events #2");
    }

    #[test]
    fn raw_html_characters_where_go_escapes_them_differ() {
        let real = with_body("HTTP/1.1 200 OK", r#"{"template":"\u003c"}"#);
        let sim = with_body("HTTP/1.1 200 OK", r#"{"template":"<"}"#);
        let d = compare("c", &real, &sim);
        assert_eq!(d.iter().map(|d| d.place.as_str()).collect::<Vec<_>>(), ["escaping"]);
    }

    #[test]
    fn accepted_differences_are_matched_by_case_and_place_prefix() {
        let mut d = vec![
            Difference {
                case: "show".into(),
                place: "body $.model_info keys".into(),
                real: String::new(),
                sim: String::new(),
                accepted: None,
            },
            Difference {
                case: "tags".into(),
                place: "body $.models".into(),
                real: String::new(),
                sim: String::new(),
                accepted: None,
            },
        ];
        let a = accepted_from_toml("[[accepted]]\ncase = \"show\"\nplace = \"body $.model_info\"\nreason = \"r\"\n")
            .unwrap();
        apply_accepted(&mut d, &a);
        assert_eq!(d[0].accepted.as_deref(), Some("r"));
        assert_eq!(d[1].accepted, None);
        assert!(accepted_from_toml("[[accepted]]\ncase = \"show\"\nplace = \"x\"\nreason = \" \"\n").is_err());
        // A trailing `*` names every case whose name starts so (the generated cases).
        let mut g = vec![Difference {
            case: "generated/chat/think=true".into(),
            place: "status".into(),
            real: String::new(),
            sim: String::new(),
            accepted: None,
        }];
        let a = accepted_from_toml("[[accepted]]\ncase = \"generated/embed/*\"\nplace = \"status\"\nreason = \"e\"\n[[accepted]]\ncase = \"generated/chat/*\"\nplace = \"status\"\nreason = \"c\"\n").unwrap();
        apply_accepted(&mut g, &a);
        assert_eq!(g[0].accepted.as_deref(), Some("c"));
        assert!(names("generated/*/options.num_batch=1", "generated/embed/options.num_batch=1"));
        assert!(!names("generated/*/options.num_batch=1", "generated/embed/options.num_batch=10"));
        assert!(!names("show", "show-verbose") && names("*", "anything") && names("a*b*c", "aXbYc"));
    }
}
