//! The reliability benchmark in small (`harness soak` runs it at full size; README figures).
//! See: issue 10.

#[test]
fn a_short_soak_keeps_every_promise() {
    let plan = harness::soak::SoakPlan {
        bad_requests: 3000,
        disconnects: 500,
        soak_s: 2.0,
        concurrency: 16,
        seed: 3,
        trace_budget_mb: 8,
    };
    let rep = harness::soak::run(&plan).expect("the soak ran");
    assert!(rep.broken().is_empty(), "{rep}");
    assert_eq!(rep.bad_requests, 3000);
    assert!(rep.statuses.get(&400).is_some_and(|n| *n > 1000), "most garbage is a 400: {rep}");
    assert!(rep.statuses.get(&200).is_some_and(|n| *n > 0), "the valid requests among them were served: {rep}");
    assert_eq!(rep.busy_answers, 50, "every request past the pending limit got 503: {rep}");
    assert!(rep.soak_requests > 100, "{rep}");
    assert!(rep.trace_mib <= 8.0, "the trace kept to its budget: {rep}");
}
