//! Multi-turn agents (issue 12, item 5): each call resends the conversation so far, so
//! histories grow call by call; on one shared slot each turn finds another agent's prompt in
//! the slot (restored from the host prompt cache, or evaluated again without it), with a slot
//! each only the new turn is evaluated. Checked on the simulator's trace, which records what
//! every request found in its slot.

use harness::runtime::{self, Job};
use harness::workload;
use sim_ollama::SimBuilder;
use sim_ollama::advanced::trace::{CacheUse, TraceSnapshot};
use std::time::Duration;

/// Runs a history scenario once with tokio-default; returns the trace and the agents' records.
fn run(name: &str) -> (TraceSnapshot, Vec<harness::runtime::AgentRecord>) {
    let scenario = workload::select(&[name.to_string()], None).unwrap().remove(0);
    let sim = SimBuilder::new().preset(&scenario.preset).unwrap().time_scale(0.05).start().unwrap();
    let job = Job {
        agents: scenario.plan(1),
        urls: sim.urls().to_vec(),
        model: scenario.model.clone(),
        time_scale: 0.05,
        token_gap: Duration::ZERO,
        timeout: Duration::from_secs(60),
    };
    let recs = runtime::build("tokio-default").unwrap().run(&job);
    sim.wait_idle(Duration::from_secs(5)).unwrap();
    (sim.trace(), recs)
}

/// Every agent's requests, in order, with their cache records.
fn by_agent(t: &TraceSnapshot) -> Vec<Vec<(&sim_ollama::advanced::trace::RequestTrace, &CacheUse)>> {
    let mut names: Vec<&str> = t.requests.iter().filter_map(|r| r.agent_label.as_deref()).collect();
    names.sort();
    names.dedup();
    names
        .iter()
        .map(|n| {
            t.requests
                .iter()
                .filter(|r| r.agent_label.as_deref() == Some(*n))
                .map(|r| (r, r.cache.as_ref().expect("every generation has a cache record")))
                .collect()
        })
        .collect()
}

fn evaluated(t: &TraceSnapshot) -> u64 {
    t.requests.iter().filter_map(|r| r.cache.as_ref()).map(|c| c.evaluated_tokens).sum()
}

#[test]
fn a_multi_turn_agent_resends_its_growing_history_and_with_a_slot_each_evaluates_only_the_new_turn() {
    let (t, recs) = run("history_slot_each");
    let agents = by_agent(&t);
    assert_eq!(agents.len(), 3);
    for calls in &agents {
        assert_eq!(calls.len(), 6);
        for w in calls.windows(2) {
            let ((prev, _), (next, c)) = (w[0], w[1]);
            // One conversation, one turn on: the server chains it, and the prompt grew by the
            // answer and a new question.
            let (p, n) = (prev.conversation.as_ref().unwrap(), next.conversation.as_ref().unwrap());
            assert_eq!(n.parent.as_ref(), Some(&p.key));
            assert!(
                next.prompt_tokens > prev.prompt_tokens + prev.tokens,
                "{} -> {}",
                prev.prompt_tokens,
                next.prompt_tokens
            );
            // Its slot holds the whole earlier turn: only the new question is evaluated.
            assert!(
                c.cached_tokens >= prev.prompt_tokens + prev.tokens - 1,
                "{c:?} after {} + {}",
                prev.prompt_tokens,
                prev.tokens
            );
            assert!(c.evaluated_tokens < 30 && c.lost_to.is_none(), "{c:?}");
        }
    }
    // The client read the server's prompt evaluation of every call.
    assert!(recs.iter().flat_map(|a| &a.calls).all(|c| c.prompt_eval_duration_ns.is_some()));
}

#[test]
fn agents_sharing_one_slot_lose_each_others_prefix_without_the_host_cache_and_get_it_back_with_it() {
    let (lost, _) = run("history_1slot_shared_nocache");
    let (kept, _) = run("history_1slot_shared");
    let (each, _) = run("history_slot_each");
    // Without the host cache, a turn that finds another agent's prompt in the slot evaluates
    // its history again, and the trace names who took it.
    let lost_turns: Vec<_> =
        lost.requests.iter().filter_map(|r| r.cache.as_ref()).filter(|c| c.lost_to.is_some()).collect();
    assert!(lost_turns.len() >= 6, "most later turns lost their prefix: {lost_turns:?}");
    assert!(lost_turns.iter().all(|c| c.cached_tokens < c.lost_tokens), "{lost_turns:?}");
    // With it, the prefix comes back from host memory.
    let restored = kept.requests.iter().filter_map(|r| r.cache.as_ref()).filter(|c| c.restored_tokens > 0).count();
    assert!(restored >= 6, "{restored} turns restored their prefix");
    assert!(kept.requests.iter().filter_map(|r| r.cache.as_ref()).all(|c| c.lost_to.is_none()));
    // What the lost cache costs, in prompt tokens evaluated.
    let (l, k, e) = (evaluated(&lost), evaluated(&kept), evaluated(&each));
    assert!(l > 10 * k && l > 10 * e, "evaluated: {l} shared without host cache, {k} with it, {e} with a slot each");
}

/// A thinking model (issue 12, item 3): the harness reads the time to the first token of
/// reasoning apart from the time to the first token of the answer. A timing test (`timing_*`:
/// it runs alone): the gap it bounds is the client's clock over about 18 ms of reasoning, which
/// a crowded machine's stall can swallow (seen beside the suite under four busy loops).
#[test]
fn timing_a_thinking_models_first_reasoning_and_first_answer_token_read_apart() {
    let sim = SimBuilder::new().time_scale(0.02).start().unwrap();
    let call: workload::Call =
        toml::from_str("endpoint = \"/api/chat\"\nprompt = \"Is 1009 prime?\"\ntokens = 500").unwrap();
    let agent =
        workload::AgentPlan { name: "thinker".into(), instance: 0, history: false, system: None, calls: vec![call] };
    let job = Job {
        agents: vec![agent],
        urls: sim.urls().to_vec(),
        model: "qwen3:0.6b".into(),
        time_scale: 0.02,
        token_gap: Duration::ZERO,
        timeout: Duration::from_secs(60),
    };
    let recs = runtime::build("tokio-default").unwrap().run(&job);
    let c = &recs[0].calls[0];
    assert!(c.error.is_none(), "{:?}", c.error);
    let m = harness::CallMetrics::of("thinker", 0, 0, c);
    let (thinking, answer) = (m.ttft_thinking_ms.expect("reasoning seen"), m.ttft_ms.expect("an answer"));
    sim.wait_idle(Duration::from_secs(5)).unwrap();
    let r = &sim.trace().requests[0];
    // The reasoning took thinking_tokens token times at 170 tokens/s, at time scale 0.02.
    let modelled_ms = r.thinking_tokens as f64 / 170.0 * 1000.0 * 0.02;
    assert!(
        answer - thinking > 0.5 * modelled_ms,
        "first reasoning {thinking} ms, first answer {answer} ms, {} tokens",
        r.thinking_tokens
    );
}
