use crate::helpers::{plan, run, scenario};

/// Reads results.json each time a run ends (before that run is written): the file must
/// already hold every earlier run, so a matrix stopped at any point keeps what it finished.
struct Watcher {
    dir: std::path::PathBuf,
    seen: Vec<usize>,
}

impl harness::matrix::Progress for Watcher {
    fn cell(&mut self, _: usize, _: usize, _: &str, _: &str) {}
    fn step(&mut self, _: &str) {}
    fn run(&mut self, _: &harness::report::RunResult) {
        let runs = std::fs::read_to_string(self.dir.join("results.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<harness::report::Results>(&t).ok())
            .map_or(0, |r| r.runs.len());
        self.seen.push(runs);
    }
}

#[test]
fn results_are_written_after_every_run_with_the_schema() {
    let dir = std::env::temp_dir().join(format!("harness-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut p = plan(&["tokio-default", "ctl-one-permit"], vec![scenario("ideal_2", "ideal", 2, 80, 0.05)], 3);
    p.out = Some(dir.clone());
    let mut w = Watcher { dir: dir.clone(), seen: Vec::new() };
    let r = harness::matrix::run(&p, &mut w).expect("the matrix ran");
    // Issue 10: the old test looked only at the final files. When run k ends, runs 1..k-1 are
    // on disk already.
    assert_eq!(w.seen, vec![0, 1, 2, 3, 4, 5], "runs on disk when each run ended");
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json");
    let back: harness::report::Results = serde_json::from_str(&text).expect("results.json reads back");
    assert_eq!(back.runs.len(), 6);
    assert_eq!(back.summary.len(), 2);
    assert_eq!(r.summary[0].runs, 3);
    // The interval computed by hand from the three runs: mean +- t(2) sd / sqrt(3), t(2) = 4.303.
    let s = &back.summary[1];
    let effs: Vec<f64> =
        back.runs.iter().filter(|x| x.runtime == "ctl-one-permit").map(|x| x.efficiency.efficiency_true).collect();
    let mean = effs.iter().sum::<f64>() / 3.0;
    let sd = (effs.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
    let half = 4.303 * sd / 3f64.sqrt();
    assert!((s.efficiency_true.mean - mean).abs() < 1e-12);
    assert!(
        (s.efficiency_true.ci95_low - (mean - half)).abs() < 1e-3 * half.max(1e-6),
        "{:?} vs {}",
        s.efficiency_true,
        half
    );
    assert!((s.efficiency_true.ci95_high - (mean + half)).abs() < 1e-3 * half.max(1e-6));
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("| tokio-default | ideal_2 | 3 |") && md.contains("apparent"), "{md}");
    let csv = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
    assert_eq!(csv.lines().count(), 7);
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(files.iter().all(|f| !f.contains("tmp")), "no temporary file is left: {files:?}");
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
