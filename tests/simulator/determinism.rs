use crate::util::{raw_blocking, snapshot_settings};
use proptest::prelude::*;
use sim_ollama::SimBuilder;
use std::sync::OnceLock;

/// Three frozen-clock simulators: two with seed 11, one with seed 12.
fn sims() -> &'static [sim_ollama::SimHandle; 3] {
    static SIMS: OnceLock<[sim_ollama::SimHandle; 3]> = OnceLock::new();
    SIMS.get_or_init(|| {
        let s = |seed| SimBuilder::new().seed(seed).frozen_clock(true).start().expect("simulator starts");
        [s(11), s(11), s(12)]
    })
}

fn exchange(sim: &sim_ollama::SimHandle, path: &str, body: &str) -> String {
    let r = raw_blocking(sim.addrs()[0], "POST", path, Some(body), &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    r.text()
}

fn generate_body(prompt: &str, num_predict: u32, stream: bool, seed: Option<i64>) -> String {
    let mut options = serde_json::json!({"num_predict": num_predict});
    if let Some(s) = seed {
        options["seed"] = s.into();
    }
    serde_json::json!({"model": "tiny", "prompt": prompt, "stream": stream, "options": options}).to_string()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_same_seed_and_request_give_byte_identical_streams(prompt in "[a-zA-Z ,.]{1,60}", n in 1u32..40, stream: bool) {
        let [a, b, _] = sims();
        let body = generate_body(&prompt, n, stream, None);
        prop_assert_eq!(exchange(a, "/api/generate", &body), exchange(b, "/api/generate", &body));
    }

    #[test]
    fn a_different_server_seed_gives_different_text(prompt in "[a-zA-Z ]{1,40}") {
        let [a, _, c] = sims();
        let body = generate_body(&prompt, 20, false, None);
        let text = |s| serde_json::from_str::<serde_json::Value>(&exchange(s, "/api/generate", &body)).unwrap()["response"].as_str().unwrap().to_string();
        prop_assert_ne!(text(a), text(c));
    }

    #[test]
    fn options_seed_overrides_the_server_seed(prompt in "[a-zA-Z ]{1,40}", seed in 0i64..1_000_000) {
        let [a, _, c] = sims();
        let body = generate_body(&prompt, 16, true, Some(seed));
        prop_assert_eq!(exchange(a, "/api/generate", &body), exchange(c, "/api/generate", &body));
    }
}

#[test]
fn frozen_clock_generate_stream_matches_its_snapshot() {
    let sim = SimBuilder::new().seed(3).frozen_clock(true).time_scale(0.01).start().unwrap();
    let body = r#"{"model":"gemma3","prompt":"Why is the sky blue?","options":{"num_predict":12}}"#;
    let text = exchange(&sim, "/api/generate", body);
    snapshot_settings().bind(|| insta::assert_snapshot!("frozen_generate_stream", text));
}

#[test]
fn frozen_clock_openai_chat_stream_matches_its_snapshot() {
    let sim = SimBuilder::new().seed(3).frozen_clock(true).time_scale(0.01).start().unwrap();
    let body = r#"{"model":"llama3.2:1b","messages":[{"role":"user","content":"Say hello"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":6}"#;
    let text = exchange(&sim, "/v1/chat/completions", body);
    snapshot_settings().bind(|| insta::assert_snapshot!("frozen_openai_chat_stream", text));
}
