//! Issue 12, item 1: each parallel slot keeps its last prompt (llama-server's `cache_prompt`),
//! so a growing history is evaluated only past what its slot already holds; slots are chosen by
//! the longest shared prefix, else least recently used; a prompt evicted from its slot is saved
//! in the host prompt cache and restored when its conversation comes back (or, with
//! `cache_ram_mib = 0`, evaluated again in full, and the trace says who took it).
//!
//! Frozen clock: durations are the modelled ones, so every figure here is exact.

use crate::util::Result;
use serde_json::{Value, json};
use sim_ollama::{SimBuilder, SimHandle};

const MODEL: &str = "gemma3";

/// A long text: `words` words.
fn text(seed: &str, words: usize) -> String {
    (0..words).map(|i| format!("{seed}{i}")).collect::<Vec<_>>().join(" ")
}

fn sim(slots: usize, cache_ram_mib: u64) -> SimHandle {
    SimBuilder::new()
        .frozen_clock(true)
        .time_scale(0.01)
        .num_parallel(slots)
        .cache_ram_mib(cache_ram_mib)
        .start()
        .expect("simulator starts")
}

/// One chat turn as `agent`; returns the answer object.
async fn chat(sim: &SimHandle, agent: &str, messages: &[Value]) -> Value {
    let r = reqwest::Client::new()
        .post(format!("{}/api/chat", sim.url()))
        .header("X-Agent", agent)
        .json(&json!({"model": MODEL, "messages": messages, "stream": false, "options": {"num_predict": 20}}))
        .send()
        .await
        .expect("sent");
    assert_eq!(r.status(), 200);
    r.json().await.expect("json")
}

/// An agent's conversation: a system prompt and a first question, growing by the answer and
/// a new question each turn.
struct Agent {
    name: &'static str,
    messages: Vec<Value>,
}

impl Agent {
    fn new(name: &'static str, words: usize) -> Self {
        Agent {
            name,
            messages: vec![
                json!({"role": "system", "content": text(&format!("{name}sys"), words)}),
                json!({"role": "user", "content": text(&format!("{name}q"), 20)}),
            ],
        }
    }

    async fn turn(&mut self, sim: &SimHandle) -> (Value, sim_ollama::advanced::trace::CacheUse, String) {
        let answer = chat(sim, self.name, &self.messages).await;
        self.messages.push(answer["message"].clone());
        let n = self.messages.len();
        self.messages.push(json!({"role": "user", "content": text(&format!("{}q{n}x", self.name), 20)}));
        let t = sim.trace();
        let rec = t.requests.iter().rev().find(|r| r.agent == self.name).expect("traced");
        (answer, rec.cache.clone().expect("a cache record"), rec.explanation.clone())
    }
}

fn us(v: &Value) -> u64 {
    v["prompt_eval_duration"].as_u64().expect("prompt_eval_duration") / 1000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_growing_history_is_evaluated_only_past_its_cached_prefix() -> Result {
    let sim = sim(1, 0);
    let mut a = Agent::new("a", 400);
    let (first, c1, _) = a.turn(&sim).await;
    assert_eq!((c1.cached_tokens, c1.chosen_by.as_str()), (0, "least_recently_used"));
    let (second, c2, words) = a.turn(&sim).await;
    // The second turn resends the first prompt and its answer: all of it is in the slot.
    let first_total = first["prompt_eval_count"].as_u64().unwrap();
    assert!(c2.cached_tokens > first_total, "{c2:?} after a {first_total}-token prompt");
    assert_eq!(c2.chosen_by, "similarity");
    // prompt_eval_count counts cached and evaluated tokens (Ollama's promptEvalCount); the
    // duration only the evaluated ones: gemma3 evaluates 4000 tokens/s, at time scale 0.01.
    let total = second["prompt_eval_count"].as_u64().unwrap();
    assert_eq!(total, c2.cached_tokens + c2.evaluated_tokens);
    assert_eq!(us(&second), c2.evaluated_tokens * 1_000_000 / 4000 / 100);
    assert!(us(&second) * 10 < us(&first), "{} µs against {} µs", us(&second), us(&first));
    assert!(words.contains(&format!("{} of {total} prompt tokens cached in slot 0", c2.cached_tokens)), "{words}");
    Ok(())
}

/// A prompt whose tokens slow with the context before them (`prompt_slowdown_per_1k`): the
/// turn that evaluates only past its cached prefix pays for those tokens at their positions,
/// after the prefix, not as if they began the prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_past_a_cached_prefix_are_evaluated_at_their_positions_speed() -> Result {
    let mut bent =
        sim_ollama::advanced::config::default_catalogue().into_iter().find(|m| m.name == "gemma3:latest").unwrap();
    bent.profile.prompt_slowdown_per_1k = 2.0;
    let sim = SimBuilder::new()
        .frozen_clock(true)
        .time_scale(0.01)
        .num_parallel(1)
        .cache_ram_mib(0)
        .model(bent.clone())
        .start()?;
    let mut a = Agent::new("a", 400);
    let (first, c1, _) = a.turn(&sim).await;
    let (second, c2, _) = a.turn(&sim).await;
    // µs at time scale 0.01, as the real server reports it (whole µs).
    let modelled = |before: u64, n: u64| (bent.profile.prompt_ms(before as f64, n as f64) * 10.0) as u64;
    assert_eq!(c1.cached_tokens, 0);
    let n1 = first["prompt_eval_count"].as_u64().unwrap();
    assert!(us(&first).abs_diff(modelled(0, n1)) <= 1, "{} µs, modelled {}", us(&first), modelled(0, n1));
    // The second turn's new tokens come after its cached ones: each slower than a token at
    // the prompt's start.
    let (cached, evaluated) = (c2.cached_tokens, c2.evaluated_tokens);
    assert!(cached > 400 && evaluated > 0, "{c2:?}");
    assert!(
        us(&second).abs_diff(modelled(cached, evaluated)) <= 1,
        "{} µs, modelled {}",
        us(&second),
        modelled(cached, evaluated)
    );
    assert!(modelled(cached, evaluated) > modelled(0, evaluated) * 3 / 2, "at its positions, not the prompt's start");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_return_to_their_own_slots_when_there_is_one_each() -> Result {
    let sim = sim(2, 0);
    let (mut a, mut b) = (Agent::new("a", 300), Agent::new("b", 300));
    let (_, ca, _) = a.turn(&sim).await;
    let (_, cb, _) = b.turn(&sim).await;
    // Both idle and unused: the last slot first, then the other (least recently used).
    assert_eq!((ca.slot, cb.slot), (1, 0));
    for _ in 0..2 {
        let (_, cb2, _) = b.turn(&sim).await;
        let (_, ca2, _) = a.turn(&sim).await;
        assert_eq!((ca2.slot, cb2.slot), (1, 0), "each agent's slot holds its longest prefix");
        assert!(ca2.cached_tokens > 300 && cb2.cached_tokens > 300, "{ca2:?} {cb2:?}");
        assert!(ca2.evaluated_tokens < 40 && cb2.evaluated_tokens < 40, "{ca2:?} {cb2:?}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_host_cache_a_shared_slot_loses_each_agents_prefix_and_says_to_whom() -> Result {
    let sim = sim(1, 0);
    let (mut a, mut b) = (Agent::new("a", 300), Agent::new("b", 300));
    a.turn(&sim).await;
    b.turn(&sim).await;
    let (answer, c, words) = a.turn(&sim).await;
    // b's prompt replaced a's in the only slot: all a keeps is what every chat prompt of
    // this model starts with (the template's 8 tokens, then `system:`).
    assert_eq!(c.cached_tokens, 10, "{c:?}");
    assert_eq!(c.lost_to.as_deref(), Some("b"));
    assert!(c.lost_tokens > 300, "{c:?}");
    assert_eq!(answer["prompt_eval_count"].as_u64(), Some(c.cached_tokens + c.evaluated_tokens));
    assert!(words.contains("lost its cached prompt in slot 0 to b"), "{words}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_prompt_cache_restores_an_evicted_prefix_for_the_cost_of_a_copy() -> Result {
    let sim = sim(1, 8192);
    let (mut a, mut b) = (Agent::new("a", 300), Agent::new("b", 300));
    let (first, _, _) = a.turn(&sim).await;
    let (_, cb, _) = b.turn(&sim).await;
    assert!(cb.saved_tokens > 300, "a's prompt saved to host memory before b took the slot: {cb:?}");
    let (answer, c, words) = a.turn(&sim).await;
    assert_eq!(c.lost_to, None);
    assert!(c.restored_tokens > 300 && c.cached_tokens > 300 && c.evaluated_tokens < 40, "{c:?}");
    assert!(words.contains("(restored from the host prompt cache)"), "{words}");
    // The copies (b's prompt out, a's in) at 10 GiB/s cost gemma3 174,080 bytes a token.
    let per_token_ns = 174_080.0 / (10.0 * (1u64 << 30) as f64) * 1e9 * 0.01;
    let copy_us = ((c.saved_tokens + c.restored_tokens) as f64 * per_token_ns / 1000.0) as u64;
    let eval_us = c.evaluated_tokens * 1_000_000 / 4000 / 100;
    let got = us(&answer);
    assert!(got.abs_diff(copy_us + eval_us) <= 1, "{got} µs = copy {copy_us} + evaluation {eval_us}");
    assert!(got * 5 < us(&first), "restoring is much cheaper than evaluating: {got} against {}", us(&first));
    Ok(())
}

/// A client that goes away while its prompt is evaluated frees its slot's cache with the slot
/// (the claim is held by a guard from the moment it is made): two agents that then run
/// together get a slot each. Were the cache slot left marked busy, the second agent would be
/// put in the first one's slot, overwriting its prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cancelled_during_its_prompt_frees_its_cache_slot() -> Result {
    // llama3.2:1b evaluating 10 prompt tokens a second: a prompt phase of seconds, so the
    // cancellation surely lands in it.
    let mut slow =
        sim_ollama::advanced::config::default_catalogue().into_iter().find(|m| m.name == "llama3.2:1b").unwrap();
    slow.name = "slowprompt:latest".into();
    slow.profile.prompt_tokens_per_s = 10.0;
    let sim = SimBuilder::new().model(slow).num_parallel(2).time_scale(0.05).start()?;
    let url = sim.url().to_string();
    let body = |who: &str| json!({"model": "slowprompt", "prompt": text(who, 30), "stream": false, "options": {"num_predict": 40}});
    let client = reqwest::Client::new();
    let doomed = {
        let (c, u, b) = (client.clone(), url.clone(), body("x"));
        tokio::spawn(async move { c.post(format!("{u}/api/generate")).header("X-Agent", "x").json(&b).send().await })
    };
    crate::helpers::until(&sim, "x is evaluating its prompt", |s| {
        s.trace().requests.iter().any(|r| r.agent == "x" && r.slot_us.is_some())
    })
    .await;
    doomed.abort();
    crate::helpers::until(&sim, "x is gone", |s| s.trace().requests.iter().all(|r| r.end_us.is_some())).await;
    let send = |who: &'static str| {
        let (c, u, b) = (client.clone(), url.clone(), body(who));
        tokio::spawn(async move { c.post(format!("{u}/api/generate")).header("X-Agent", who).json(&b).send().await })
    };
    let (a, b) = (send("a"), send("b"));
    a.await??;
    b.await??;
    let t = sim.trace();
    let slot = |who: &str| t.requests.iter().find(|r| r.agent == who).and_then(|r| r.cache.clone()).unwrap().slot;
    assert_ne!(slot("a"), slot("b"), "two requests in flight together hold two slots");
    Ok(())
}
