use crate::helpers::{plan, run, scenario};

#[test]
fn results_are_written_after_every_run_with_the_schema() {
    let dir = std::env::temp_dir().join(format!("harness-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut p = plan(&["tokio-default", "ctl-one-permit"], vec![scenario("ideal_2", "ideal", 2, 80, 0.05)], 3);
    p.out = Some(dir.clone());
    let r = run(&p);
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json");
    let back: harness::report::Results = serde_json::from_str(&text).expect("results.json reads back");
    assert_eq!(back.runs.len(), 6);
    assert_eq!(back.summary.len(), 2);
    assert_eq!(r.summary[0].runs, 3);
    let s = &back.summary[1];
    assert!(
        s.efficiency_true.ci95_low <= s.efficiency_true.mean && s.efficiency_true.mean <= s.efficiency_true.ci95_high
    );
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("| tokio-default | ideal_2 | 3 |") && md.contains("apparent"), "{md}");
    let csv = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
    assert_eq!(csv.lines().count(), 7);
    assert!(!dir.join("results.json.tmp").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_html_report_and_every_timeline_are_well_formed_and_complete() {
    let dir = std::env::temp_dir().join(format!("harness-html-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut p = plan(&["tokio-default", "ctl-sequential"], vec![scenario("ideal_3", "ideal", 3, 60, 0.05)], 2);
    p.out = Some(dir.clone());
    let r = run(&p);
    let html = std::fs::read_to_string(dir.join("report.html")).expect("report.html");
    crate::util::tags_balance(&html, &["meta", "br", "img", "link"]).unwrap_or_else(|e| panic!("report.html: {e}"));
    for c in &r.summary {
        assert!(
            html.contains(&format!("<td>{}</td><td>{}</td>", c.runtime, c.scenario)),
            "the table has {} x {}",
            c.runtime,
            c.scenario
        );
    }
    assert_eq!(html.matches("<svg").count(), 1, "one chart per scenario");
    for run in &r.runs {
        let rel = run.timeline.as_deref().expect("every run has a timeline");
        assert!(html.contains(&format!("href=\"{rel}\"")), "the report links {rel}");
        let svg = std::fs::read_to_string(dir.join(rel)).expect("the timeline exists");
        crate::util::tags_balance(&svg, &[]).unwrap_or_else(|e| panic!("{rel}: {e}"));
        for agent in ["agent-1", "agent-2", "agent-3"] {
            assert!(svg.contains(agent), "{rel} has a lane for {agent}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
