use crate::helpers::{plan, run, scenario};
use harness::runtime::VARIANTS;
use harness::verdict::Verdict;

#[test]
fn every_correct_variant_reads_parallel_on_an_ideal_deployment() {
    let correct: Vec<&str> = VARIANTS.iter().filter(|v| v.control.is_none()).map(|v| v.name).collect();
    let r = run(&plan(&correct, vec![scenario("ideal_4", "ideal", 4, 150, 0.05)], 3));
    let mut bad = Vec::new();
    for c in &r.summary {
        // Parallel means a median true efficiency of 85 % or more; a correct client on an
        // ideal deployment loses only connection set-up and scheduling noise.
        if c.verdict != Verdict::Parallel {
            bad.push(format!("{}: {} ({:.1}%): {}", c.runtime, c.verdict, c.efficiency_true.median * 100.0, c.reason));
        }
    }
    assert!(bad.is_empty(), "correct variants not parallel:\n{}", bad.join("\n"));
    assert_eq!(r.summary.len(), correct.len());
}

#[test]
fn every_control_is_caught_with_its_reason() {
    let expected: &[(&str, &str)] = &[
        ("ctl-mutex-semaphore", "serialized in the client"),
        ("ctl-blocking-sleep", "executor was blocked"),
        ("ctl-block-on", "serialized in the client"),
        ("ctl-one-permit", "serialized in the client"),
        ("ctl-one-connection", "connection pool"),
        ("ctl-sequential", "serialized in the client"),
    ];
    let controls: Vec<&str> = VARIANTS.iter().filter(|v| v.control.is_some()).map(|v| v.name).collect();
    assert_eq!(controls.len(), expected.len(), "every control has an expected reason here");
    let r = run(&plan(&controls, vec![scenario("ideal_4", "ideal", 4, 150, 0.05)], 2));
    for (name, reason) in expected {
        let c = r.summary.iter().find(|c| c.runtime == *name).unwrap_or_else(|| panic!("{name} ran"));
        assert_eq!(c.verdict, Verdict::Serialized, "{name}: {}", c.reason);
        assert!(c.reason.contains(reason), "{name}: expected a reason with {reason:?}, got {:?}", c.reason);
        assert!(c.control.is_some());
    }
}
