//! The program's agents run against the simulator, and the judge says whether they ran
//! together: the correct program passes, every bug fails, labelled or not.

use agent_check::{Bug, Program, Tool, run, run_with_tool};
use sim_ollama::{JudgeOptions, Report, SimBuilder, Verdict};

/// Runs the program against a fresh simulator set up for judging (an ideal deployment, so any
/// serialization is the program's, with the model loaded before the agents start) and judges
/// it once every answer has finished.
async fn judged(bug: Bug, labelled: bool) -> Report {
    let sim = SimBuilder::judging("gemma3").time_scale(0.05).start().expect("simulator starts");
    let counts = run(Program { base: sim.url().to_string(), agents: 3, labelled, bug }).await.expect("agents ran");
    assert_eq!(counts.len(), 3);
    sim.judged(&JudgeOptions::new()).await
}

/// The three lines of the README ("From a Rust test"), as written there (checked by the
/// suite's `every_rust_snippet_in_the_docs_is_compiled_code`).
#[tokio::test]
async fn readme_three_lines() -> Result<(), sim_ollama::Error> {
    let run_my_agents = |url: &str| {
        let program = Program { base: url.to_string(), agents: 3, labelled: false, bug: Bug::None };
        async move { run(program).await.expect("agents ran") }
    };
    // README begin
    let sim = sim_ollama::SimBuilder::judging("gemma3").start()?;
    run_my_agents(sim.url()).await;
    sim.judged(&sim_ollama::JudgeOptions::new()).await.assert_parallel();
    // README end
    Ok(())
}

/// docs/judge.md's snippet ("From a Rust test"), as written there (checked by the suite's
/// `every_rust_snippet_in_the_docs_is_compiled_code`): the report kept, asserted and
/// snapshot-checked.
#[tokio::test]
async fn judge_md_snippet() -> Result<(), sim_ollama::Error> {
    let run_my_agents = |url: &str| {
        let program = Program { base: url.to_string(), agents: 3, labelled: true, bug: Bug::None };
        async move { run(program).await.expect("agents ran") }
    };
    let sim = sim_ollama::SimBuilder::judging("gemma3").start()?; // ideal deployment, model loaded
    run_my_agents(sim.url()).await; // any runtime, any client
    let report = sim.judged(&sim_ollama::JudgeOptions::new()).await; // waits for the last answer
    report.assert_parallel(); // panics with the report in words
    insta::assert_snapshot!(report.summary()); // verdict, cause and bands: no raw floats
    Ok(())
}

/// `assert_parallel` on a program that awaits its agents in turn panics with the report in
/// words; `assert_verdict` checks any verdict.
#[tokio::test]
async fn assert_parallel_panics_with_the_report_for_a_bug() {
    let sim = SimBuilder::judging("gemma3").time_scale(0.05).start().expect("simulator starts");
    run(Program { base: sim.url().to_string(), agents: 3, labelled: true, bug: Bug::AwaitedInTurn })
        .await
        .expect("ran");
    let report = sim.judged(&JudgeOptions::new()).await;
    let panic = std::panic::catch_unwind(|| {
        report.assert_parallel();
    })
    .expect_err("a serialized program fails the assertion");
    let text = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(text.starts_with("the agents were not judged parallel:\nserialized: "), "{text}");
    report.assert_verdict(Verdict::Serialized);
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

/// Issue 36: agents on a current-thread runtime (`#[tokio::test]`'s) whose tool between two
/// turns is `std::thread::sleep` wait for each other's tools; one run cannot tell, so
/// `judge_program` runs the program again as a probe run, and the cause is the work between
/// calls (confirmed by a third run, in which the agents wait for each other again). The same tool awaited, or on the blocking pool, is parallel.
async fn judged_with_tool(tool: Tool, labelled: bool) -> Report {
    let sim = SimBuilder::judging("gemma3").start().expect("simulator starts");
    let base = sim.url().to_string();
    sim.judge_program(&JudgeOptions::new(), || {
        let program = Program { base: base.clone(), agents: 3, labelled, bug: Bug::None };
        async move {
            run_with_tool(program, tool).await.expect("agents ran");
        }
    })
    .await
}

#[tokio::test]
async fn a_tool_that_blocks_the_executor_between_calls_is_caught() {
    for labelled in [true, false] {
        let report = judged_with_tool(Tool::Blocking(300), labelled).await;
        assert!(matches!(report.verdict, Verdict::PartlySerialized | Verdict::Serialized), "{report}");
        assert_eq!(report.cause, sim_ollama::judge::Cause::BetweenCalls, "{report}");
        // Resting on waits the probe found, the verdict was confirmed by a third run.
        let c = report.confirmation.as_ref().expect("judge_program ran a confirmation");
        assert!(c.waits_recurred && c.kept == sim_ollama::judge::KeptPair::First, "{c:?}");
    }
}

#[tokio::test]
async fn a_tool_awaited_or_on_the_blocking_pool_is_parallel() {
    for tool in [Tool::Awaited(300), Tool::BlockingPool(300)] {
        let report = judged_with_tool(tool, true).await;
        assert_eq!(report.verdict, Verdict::Parallel, "{tool:?}: {report}");
    }
}
