//! The program's agents run against the simulator, and the judge says whether they ran
//! together: the correct program passes, every bug fails, labelled or not.

use agent_check::{Bug, Program, run};
use sim_ollama::{JudgeOptions, Report, SimBuilder, Verdict};
use std::time::Duration;

/// Runs the program against a fresh simulator (an ideal deployment, so any serialization is
/// the program's) and judges it.
async fn judged(bug: Bug, labelled: bool) -> Report {
    let sim = SimBuilder::new().preset("ideal").expect("preset").time_scale(0.05).start().expect("simulator starts");
    // The model is loaded first (an empty prompt loads it, as on real Ollama), so the judge sees
    // the agents and not a cold load they all wait for: with the load in the run, a loaded
    // machine once read a correct program as degraded (73 % of a small saving).
    let loaded = reqwest::Client::new()
        .post(format!("{}/api/generate", sim.url()))
        .json(&serde_json::json!({"model": "gemma3"}))
        .send()
        .await
        .expect("load request");
    assert!(loaded.status().is_success());
    sim.clear_trace();
    let counts = run(Program { base: sim.url().to_string(), agents: 3, labelled, bug }).await.expect("agents ran");
    assert_eq!(counts.len(), 3);
    sim.wait_idle(Duration::from_secs(5)).expect("the simulator finished every answer");
    sim.judge(&JudgeOptions::new())
}

#[tokio::test]
async fn the_correct_program_is_parallel_with_labels() {
    let r = judged(Bug::None, true).await;
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    insta::assert_snapshot!("correct_labelled", r.summary());
}

#[tokio::test]
async fn the_correct_program_is_parallel_without_labels_its_conversations_tell_the_agents_apart() {
    let r = judged(Bug::None, false).await;
    assert_eq!(r.verdict, Verdict::Parallel, "{r}");
    assert_eq!(r.agents.len(), 3, "{r}");
}

#[tokio::test]
async fn agents_awaited_in_turn_are_serialized() {
    for labelled in [true, false] {
        let r = judged(Bug::AwaitedInTurn, labelled).await;
        assert_eq!(r.verdict, Verdict::Serialized, "labelled {labelled}: {r}");
    }
}

#[tokio::test]
async fn a_mutex_held_across_calls_is_serialized() {
    let r = judged(Bug::SharedMutex, true).await;
    assert_eq!(r.verdict, Verdict::Serialized, "{r}");
    insta::assert_snapshot!("mutex_labelled", r.summary());
    let r = judged(Bug::SharedMutex, false).await;
    assert_eq!(r.verdict, Verdict::Serialized, "{r}");
}

#[tokio::test]
async fn a_one_permit_semaphore_is_serialized() {
    for labelled in [true, false] {
        let r = judged(Bug::OnePermit, labelled).await;
        assert_eq!(r.verdict, Verdict::Serialized, "labelled {labelled}: {r}");
    }
}

/// `#[tokio::test]` runs a current-thread runtime: a blocking call holds every agent.
#[tokio::test]
async fn a_blocking_call_inside_async_code_is_serialized() {
    for labelled in [true, false] {
        let r = judged(Bug::BlockingCall, labelled).await;
        assert_eq!(r.verdict, Verdict::Serialized, "labelled {labelled}: {r}");
    }
}
