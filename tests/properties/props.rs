use crate::util::raw_blocking;
use proptest::prelude::*;
use serde_json::{Value, json};
use sim_ollama::{SimBuilder, SimHandle};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn sim() -> &'static SimHandle {
    static SIM: OnceLock<SimHandle> = OnceLock::new();
    SIM.get_or_init(|| SimBuilder::new().seed(5).num_parallel(4).start().expect("simulator starts"))
}

fn post(path: &str, body: &str) -> crate::util::RawResponse {
    raw_blocking(sim().addrs()[0], "POST", path, Some(body), &[])
}

/// A recursive strategy for arbitrary JSON values.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        "[a-z:0-9 ]{0,12}".prop_map(Value::from),
        prop_oneof![Just("tiny"), Just("model"), Just("prompt"), Just("gemma3"), Just("json")].prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("model"),
                        Just("prompt"),
                        Just("messages"),
                        Just("options"),
                        Just("stream"),
                        Just("keep_alive"),
                        Just("input"),
                        Just("x")
                    ],
                    inner
                ),
                0..5
            )
            .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// However a stream is cut into chunks (the 1 KB client, a proxy, TCP), the harness reads
    /// the same tokens, and as many as the server's eval_count.
    #[test]
    fn any_split_of_a_stream_reassembles_to_the_same_tokens(cuts in prop::collection::vec(0usize..4000, 0..40), n in 1u32..60) {
        let r = post("/api/generate", &json!({"model": "tiny", "prompt": "split me", "options": {"num_predict": n, "seed": 3}}).to_string());
        prop_assert_eq!(r.status, 200);
        let body = r.body;
        let whole = harness::parse_stream([body.as_slice()]);
        let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (body.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut last = 0;
        for p in points.into_iter().chain([body.len()]) {
            chunks.push(&body[last..p]);
            last = p;
        }
        let split = harness::parse_stream(chunks);
        prop_assert_eq!(&split, &whole);
        prop_assert_eq!(split.error, None);
        prop_assert_eq!(split.eval_count, Some(split.tokens as u64));
    }

    /// Tokens delivered equal eval_count, streamed or not, generate or chat.
    #[test]
    fn tokens_delivered_equal_eval_count(prompt in "[a-zA-Z ]{1,50}", n in 1u32..80, chat: bool, stop in prop::option::of("[a-e]")) {
        let mut options = json!({"num_predict": n});
        if let Some(s) = &stop {
            options["stop"] = json!([s]);
        }
        let (path, body) = if chat {
            ("/api/chat", json!({"model": "tiny", "messages": [{"role": "user", "content": prompt}], "options": options}))
        } else {
            ("/api/generate", json!({"model": "tiny", "prompt": prompt, "options": options}))
        };
        let r = post(path, &body.to_string());
        prop_assert_eq!(r.status, 200);
        let lines = r.lines();
        let last = lines.last().unwrap();
        let pieces: Vec<&str> = lines[..lines.len() - 1]
            .iter()
            .map(|l| l.get("response").or(l.pointer("/message/content")).and_then(Value::as_str).unwrap_or(""))
            .collect();
        prop_assert_eq!(last["eval_count"].as_u64().unwrap_or(0), pieces.len() as u64);
        prop_assert!(pieces.len() as u32 <= n);
        let mut nb = body.clone();
        nb["stream"] = json!(false);
        let whole = post(path, &nb.to_string()).json();
        let text = whole.get("response").or(whole.pointer("/message/content")).and_then(Value::as_str).unwrap_or("").to_string();
        prop_assert_eq!(text, pieces.concat());
    }

    /// Arbitrary bytes, invalid UTF-8 included, get a complete answer (never a dropped
    /// connection) in Ollama's error shape: 400 for anything that is not a JSON object, the
    /// endpoint's own answer for the rare body that is one.
    #[test]
    fn arbitrary_bytes_get_an_ollama_shaped_answer(body in prop::collection::vec(any::<u8>(), 0..200), which in 0usize..6) {
        let path = ["/api/generate", "/api/chat", "/api/embed", "/api/show", "/v1/chat/completions", "/v1/completions"][which];
        let r = crate::util::raw_bytes_blocking(sim().addrs()[0], path, &body).map_err(TestCaseError::fail)?;
        let is_object = serde_json::from_slice::<Value>(&body).is_ok_and(|v| v.is_object());
        if !is_object {
            prop_assert_eq!(r.status, 400, "{}: {:?} -> {}", path, String::from_utf8_lossy(&body), r.text());
        }
        check_shape(path, &r)?;
    }

    /// Arbitrary JSON (often almost right) is answered in Ollama's shape too.
    #[test]
    fn arbitrary_json_gets_an_ollama_shaped_answer(v in json_value(), which in 0usize..7) {
        let path = ["/api/generate", "/api/chat", "/api/embed", "/api/embeddings", "/api/show", "/v1/chat/completions", "/v1/embeddings"][which];
        let r = crate::util::raw_bytes_blocking(sim().addrs()[0], path, v.to_string().as_bytes()).map_err(TestCaseError::fail)?;
        check_shape(path, &r)?;
    }
}

/// The statuses the real server answers these endpoints with: success, its client errors
/// (bad request, not found, too large) and its server errors (failed inference, not
/// implemented for the model, busy). A 500 must carry Ollama's error body, never a panic's.
const OLLAMA_STATUSES: &[u16] = &[200, 400, 404, 413, 500, 501, 503];

fn check_shape(path: &str, r: &crate::util::RawResponse) -> Result<(), TestCaseError> {
    prop_assert!(
        OLLAMA_STATUSES.contains(&r.status),
        "{path}: status {} is not one the real server answers: {}",
        r.status,
        r.text()
    );
    if r.status >= 400 {
        let v: Value = serde_json::from_slice(&r.body)
            .map_err(|e| TestCaseError::fail(format!("{path}: error body is not JSON ({e}): {}", r.text())))?;
        if path.starts_with("/v1") {
            prop_assert!(v.pointer("/error/message").and_then(Value::as_str).is_some(), "{path}: {v}");
        } else {
            prop_assert!(v.get("error").and_then(Value::as_str).is_some(), "{path}: {v}");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// Streams cancelled at random points leave no slot, stream or request behind.
    #[test]
    fn no_slot_leaks_under_random_cancellation(cancels in prop::collection::vec((0u64..40, 0usize..6), 1..24)) {
        let sim = SimBuilder::new().num_parallel(2).time_scale(0.05).start().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let url = format!("{}/api/generate", sim.url());
        rt.block_on(async {
            let client = reqwest::Client::new();
            let tasks: Vec<_> = cancels
                .iter()
                .map(|(ms, chunks)| {
                    let (c, u, ms, chunks) = (client.clone(), url.clone(), *ms, *chunks);
                    tokio::spawn(async move {
                        let body = json!({"model": "llama3.2:1b", "prompt": "go", "options": {"num_predict": 200}});
                        let fut = async {
                            let r = c.post(&u).json(&body).send().await?;
                            let mut r = r;
                            for _ in 0..chunks {
                                r.chunk().await?;
                            }
                            Ok::<_, reqwest::Error>(())
                        };
                        let _ = tokio::time::timeout(Duration::from_millis(ms), fut).await;
                    })
                })
                .collect();
            for t in tasks {
                let _ = t.await;
            }
        });
        let t0 = Instant::now();
        loop {
            let m = sim.metrics();
            let busy: usize = m.instances.iter().map(|i| i.active + i.waiting_for_slot + i.pending).sum();
            if busy == 0 && m.requests_in_flight == 0 && m.devices.iter().all(|d| d.streams == 0) {
                break;
            }
            prop_assert!(t0.elapsed() < Duration::from_secs(3), "left behind: {m:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
