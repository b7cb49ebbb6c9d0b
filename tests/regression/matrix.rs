use crate::util::snapshot_settings;
use harness::matrix::{self, MatrixPlan, Quiet, Target};
use harness::runtime::VARIANTS;
use harness::thresholds::{Thresholds, band};
use harness::workload;
use std::fmt::Write as _;
use std::time::Duration;

/// Runs every variant on one CI scenario (3 runs per cell), checks every cell against the
/// thresholds, then snapshots the verdict table: the client verdict and what it blamed, the
/// deployment verdict and its limit, and the efficiency band. On a one-slot server a correct
/// client reads client-parallel with the deployment's slots named; a control that serialized
/// itself reads serialized in the client, whatever the deployment allows.
fn gate(scenario: &str) {
    let scenarios = workload::select(&[scenario.to_string()], None).expect("a built-in scenario");
    let plan = MatrixPlan {
        runtimes: VARIANTS.iter().map(|v| v.name.to_string()).collect(),
        scenarios,
        runs: 3,
        seed: 0,
        time_scale: None,
        solo_runs: 1,
        target: Target::Simulator,
        out: None,
        timeout: Duration::from_secs(30),
        command: format!("regression gate {scenario}"),
        shard: None,
    };
    let results = matrix::run(&plan, &mut Quiet).unwrap_or_else(|e| panic!("the matrix ran: {e}"));
    let thresholds = Thresholds::builtin();
    let failures: Vec<String> = results.summary.iter().flat_map(|c| thresholds.check(c)).collect();
    assert!(
        failures.is_empty(),
        "{} cell(s) of {scenario} broke fixtures/thresholds.toml:\n{}",
        failures.len(),
        failures.join("\n")
    );

    let mut table = format!(
        "{:<22} {:<17} {:<16} {:<11} {:<14} true efficiency\n",
        "variant", "client verdict", "cause", "deployment", "limit"
    );
    for c in &results.summary {
        let cause = c.cause.map_or("-", |c| c.as_str());
        let (dep, limit) = c.deployment.as_ref().map_or(("-", "-"), |d| (d.verdict.as_str(), d.limit.as_str()));
        let _ = writeln!(
            table,
            "{:<22} {:<17} {:<16} {:<11} {:<14} {}",
            c.runtime,
            c.verdict.as_str(),
            cause,
            dep,
            limit,
            band(c.efficiency_true.median)
        );
    }
    snapshot_settings().bind(|| insta::assert_snapshot!(format!("verdicts_{scenario}"), table));
}

#[test]
fn gate_dual_instances_on_separate_devices() {
    gate("deploy_dual_two_devices");
}

#[test]
fn gate_one_instance_with_one_slot() {
    gate("deploy_single_1slot");
}

#[test]
fn gate_two_instances_on_one_device() {
    gate("deploy_dual_one_device");
}

#[test]
fn gate_eight_agents_on_one_instance() {
    gate("scale_8");
}

/// Agents whose calls are tool round trips (issue 11): the correct variants overlap them, every
/// control is caught.
#[test]
fn gate_agents_running_tool_loops() {
    gate("tool_loops");
}
