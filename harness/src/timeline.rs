//! Pictures: an SVG timeline of a run (one lane per request: waiting, loading, waiting for a
//! slot, prompt evaluation, decoding, with every token as a tick), and the self-contained
//! HTML report of a matrix (the summary table, true and apparent efficiency per runtime and
//! scenario as charts, links to every run's timeline). Drawn with plotters' SVG backend.

use crate::results::Results;
use plotters::prelude::*;
use sim_ollama::advanced::trace::{RequestTrace, TraceSnapshot};
use std::fmt::Write as _;

/// A phase of a request's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the scheduler, a reload or an eviction.
    Waiting,
    /// A model load.
    Loading,
    /// Holding a runner, waiting for a parallel slot.
    SlotWait,
    /// Prompt evaluation (and the overhead before it).
    Prompt,
    /// Emitting tokens.
    Decoding,
    /// Between two calls: the agent's own work (as a probe run, or the program, measured it).
    OwnWork,
    /// Between two calls: waiting for other agents (their local work, or their answers).
    Waited,
    /// A probe run's answer held back while another agent worked.
    Held,
}

impl Phase {
    fn color(self) -> RGBColor {
        match self {
            Phase::Waiting => RGBColor(200, 200, 200),
            Phase::Loading => RGBColor(240, 170, 60),
            Phase::SlotWait => RGBColor(220, 80, 80),
            Phase::Prompt => RGBColor(150, 120, 200),
            Phase::Decoding => RGBColor(80, 150, 220),
            Phase::OwnWork => RGBColor(120, 190, 120),
            Phase::Waited => RGBColor(170, 30, 90),
            Phase::Held => RGBColor(90, 90, 90),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Phase::Waiting => "waiting (scheduler, reload, eviction)",
            Phase::Loading => "model load",
            Phase::SlotWait => "waiting for a slot",
            Phase::Prompt => "prompt evaluation",
            Phase::Decoding => "decoding (ticks: tokens)",
            Phase::OwnWork => "between calls: the agent's own work",
            Phase::Waited => "between calls: waiting for other agents",
            Phase::Held => "probe run: the answer held back while another agent worked",
        }
    }
    const ALL: [Phase; 8] = [
        Phase::Waiting,
        Phase::Loading,
        Phase::SlotWait,
        Phase::Prompt,
        Phase::Decoding,
        Phase::OwnWork,
        Phase::Waited,
        Phase::Held,
    ];
}

/// One lane: a request.
#[derive(Debug, Clone)]
pub struct Lane {
    /// `agent #id endpoint`.
    pub label: String,
    /// (from s, to s, phase).
    pub spans: Vec<(f64, f64, Phase)>,
    /// Token times, s.
    pub tokens: Vec<f64>,
}

fn lane(r: &RequestTrace, t0: u64) -> Lane {
    let s = |us: u64| us.saturating_sub(t0) as f64 / 1e6;
    let end = r.end_us.unwrap_or_else(|| r.token_us.last().copied().unwrap_or(r.received_us));
    let runner = r.runner_us.unwrap_or(end);
    let mut spans = Vec::new();
    // Before the runner: loads, and waiting around them.
    let mut cursor = r.received_us;
    let mut loads: Vec<(u64, u64)> =
        r.loads.iter().map(|l| (l.start_us.max(r.received_us), (l.start_us + l.duration_us).min(runner))).collect();
    loads.sort();
    for (a, b) in loads {
        if a > cursor {
            spans.push((s(cursor), s(a), Phase::Waiting));
        }
        if b > a {
            spans.push((s(a), s(b), Phase::Loading));
        }
        cursor = cursor.max(b);
    }
    if runner > cursor {
        spans.push((s(cursor), s(runner), Phase::Waiting));
    }
    let slot = r.slot_us.unwrap_or(end);
    if slot > runner {
        spans.push((s(runner), s(slot), Phase::SlotWait));
    }
    let first = r.first_token_us.unwrap_or(end);
    if first > slot {
        spans.push((s(slot), s(first), Phase::Prompt));
    }
    // A probe run's hold: the tokens were all out, the last line waited.
    let decoded = end.saturating_sub(r.held_us).max(first);
    if decoded > first && r.first_token_us.is_some() {
        spans.push((s(first), s(decoded), Phase::Decoding));
    }
    if end > decoded {
        spans.push((s(decoded), s(end), Phase::Held));
    }
    let label = format!("{} #{} {}", r.agent, r.id, r.endpoint.trim_start_matches("/api/"));
    Lane { label, spans, tokens: r.token_us.iter().map(|t| s(*t)).collect() }
}

/// Lanes of every model request of a trace, in arrival order.
pub(crate) fn lanes(trace: &TraceSnapshot) -> Vec<Lane> {
    let reqs: Vec<&RequestTrace> = trace
        .requests
        .iter()
        .filter(|r| r.endpoint != "/api/tags" && (r.tokens > 0 || !r.loads.is_empty() || r.first_token_us.is_some()))
        .collect();
    let t0 = reqs.iter().map(|r| r.received_us).min().unwrap_or(0);
    reqs.iter().map(|r| lane(r, t0)).collect()
}

/// One lane per agent of a judge's report: each agent's requests side by side on its lane, so
/// agents that waited for each other show as lanes that take turns. Where the report found
/// waiting between calls (a probe run, or local work the program gave), each such gap shows the
/// agent's own work and the wait; a probe run's lanes follow, from its own start, with the
/// answers it held back.
pub fn agent_lanes(trace: &TraceSnapshot, report: &sim_ollama::Report) -> Vec<Lane> {
    let by_id: std::collections::BTreeMap<u64, &RequestTrace> = trace.requests.iter().map(|r| (r.id, r)).collect();
    let merged = |label: String, ids: &[u64], t0: u64| {
        let mut lane_of = Lane { label, spans: Vec::new(), tokens: Vec::new() };
        for r in ids.iter().filter_map(|id| by_id.get(id)) {
            let l = lane(r, t0);
            lane_of.spans.extend(l.spans);
            lane_of.tokens.extend(l.tokens);
        }
        lane_of
    };
    let t0_of = |ids: &mut dyn Iterator<Item = &u64>| ids.filter_map(|id| by_id.get(id)).map(|r| r.received_us).min();
    let Some(t0) = t0_of(&mut report.agents.iter().flat_map(|a| a.ids.iter())) else { return Vec::new() };
    let s = |us: u64| us.saturating_sub(t0) as f64 / 1e6;
    let gaps = report.gaps.as_ref();
    let mut lanes: Vec<Lane> = report
        .agents
        .iter()
        .map(|a| {
            let mut l = merged(format!("{} ({} requests)", a.agent, a.requests), &a.ids, t0);
            for w in gaps.iter().flat_map(|g| g.waits.iter()).filter(|w| w.agent == a.agent) {
                let Some(r) = by_id.get(&w.request) else { continue };
                let to = s(r.received_us);
                let from = (to - w.gap_s).max(0.0);
                let own_from = (to - w.own_s.unwrap_or(0.0)).max(from);
                l.spans.push((from, own_from, Phase::Waited));
                if to > own_from {
                    l.spans.push((own_from, to, Phase::OwnWork));
                }
            }
            l
        })
        .collect();
    if let Some(g) = gaps.filter(|g| !g.probe_agents.is_empty()) {
        if let Some(p0) = t0_of(&mut g.probe_agents.iter().flat_map(|a| a.ids.iter())) {
            lanes.extend(g.probe_agents.iter().map(|a| merged(format!("probe run: {}", a.agent), &a.ids, p0)));
        }
    }
    lanes
}

/// Draws lanes as an SVG document.
pub fn svg(title: &str, lanes: &[Lane]) -> Result<String, String> {
    let n = lanes.len().max(1);
    let t_max = lanes.iter().flat_map(|l| l.spans.iter().map(|s| s.1)).fold(0.0f64, f64::max).max(1e-3) * 1.02;
    let label_width = lanes.iter().map(|l| l.label.len()).max().unwrap_or(10).clamp(10, 48) as u32 * 7 + 20;
    let height = 110 + 26 * n as u32 + 22 * Phase::ALL.len() as u32;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1100, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let legend_h = 22 * Phase::ALL.len() as u32 + 10;
        let (chart_area, legend_area) = root.split_vertically(height - legend_h);
        let mut chart = ChartBuilder::on(&chart_area)
            .caption(title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(label_width)
            .build_cartesian_2d(0f64..t_max, (0..n - 1).into_segmented())
            .map_err(|e| e.to_string())?;
        let labels: Vec<String> = lanes.iter().map(|l| l.label.clone()).collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) if *i < n => labels.get(n - 1 - *i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .x_desc("seconds since the first request")
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(|e| e.to_string())?;
        for (k, l) in lanes.iter().enumerate() {
            // Arrival order from the top.
            let i = n - 1 - k;
            chart
                .draw_series(l.spans.iter().map(|(a, b, p)| {
                    let mut r = Rectangle::new(
                        [(*a, SegmentValue::Exact(i)), (*b, SegmentValue::Exact(i + 1))],
                        p.color().filled(),
                    );
                    r.set_margin(4, 4, 0, 0);
                    r
                }))
                .map_err(|e| e.to_string())?;
            // Every token as a tick (thinned to at most 400 per lane to keep files small).
            let step = (l.tokens.len() / 400).max(1);
            chart
                .draw_series(l.tokens.iter().step_by(step).map(|t| {
                    let mut r = Rectangle::new(
                        [(*t, SegmentValue::Exact(i)), (*t + t_max / 2000.0, SegmentValue::Exact(i + 1))],
                        RGBColor(20, 60, 120).filled(),
                    );
                    r.set_margin(8, 8, 0, 0);
                    r
                }))
                .map_err(|e| e.to_string())?;
        }
        for (k, p) in Phase::ALL.iter().enumerate() {
            let y = 5 + 22 * k as i32;
            legend_area
                .draw(&Rectangle::new([(label_width as i32, y), (label_width as i32 + 18, y + 14)], p.color().filled()))
                .map_err(|e| e.to_string())?;
            legend_area
                .draw(&Text::new(p.name(), (label_width as i32 + 26, y + 1), ("sans-serif", 13)))
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// A horizontal bar chart of true and apparent efficiency per runtime, for one scenario.
fn efficiency_chart(scenario: &str, rows: &[(String, f64, f64)]) -> Result<String, String> {
    let n = rows.len().max(1);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (760, 70 + 34 * n as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let names: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{scenario}: true (dark) and apparent (light) efficiency, %"), ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(24)
            .y_label_area_size(170)
            .build_cartesian_2d(0f64..110f64, (0..n - 1).into_segmented())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) if *i < n => names.get(n - 1 - *i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(|e| e.to_string())?;
        for (k, (_, t, a)) in rows.iter().enumerate() {
            let i = n - 1 - k;
            let mut dark = Rectangle::new(
                [(0.0, SegmentValue::Exact(i)), (t * 100.0, SegmentValue::Exact(i + 1))],
                RGBColor(40, 90, 170).filled(),
            );
            dark.set_margin(4, 17, 0, 0);
            let mut light = Rectangle::new(
                [(0.0, SegmentValue::Exact(i)), (a * 100.0, SegmentValue::Exact(i + 1))],
                RGBColor(160, 195, 235).filled(),
            );
            light.set_margin(17, 4, 0, 0);
            chart.draw_series([dark, light]).map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The self-contained HTML report of a matrix. `timelines` maps (runtime, scenario, run) to a
/// relative path of its SVG timeline.
pub fn html(r: &Results, timelines: &[(String, String, usize, String)]) -> Result<String, String> {
    let mut s = String::from(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>harness report</title><style>body{font-family:sans-serif;margin:24px;max-width:1200px}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}th{background:#f0f0f0}.parallel{color:#176e2b}.degraded{color:#a06000}.serialized,.failed{color:#b00020}</style></head><body>\n",
    );
    let _ = writeln!(
        s,
        "<h1>Runtime x scenario matrix</h1><p>Mode: {} (seed {}). True efficiency = sum of solo durations / (agents x concurrent wall); apparent = the study's formula.</p>",
        esc(&r.mode),
        r.seed
    );
    let _ = writeln!(
        s,
        "<h2>Summary</h2><table><tr><th>runtime</th><th>scenario</th><th>runs</th><th>true eff (%)</th><th>95% CI</th><th>apparent (%)</th><th>speedup</th><th>verdict</th><th>reason</th></tr>"
    );
    for c in &r.summary {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>[{:.1}, {:.1}]</td><td>{:.1}</td><td>{:.2}x</td><td class=\"{}\">{}</td><td>{}</td></tr>",
            esc(&c.runtime),
            esc(&c.scenario),
            c.runs,
            c.efficiency_true.mean * 100.0,
            c.efficiency_true.ci95_low * 100.0,
            c.efficiency_true.ci95_high * 100.0,
            c.efficiency_apparent.mean * 100.0,
            c.speedup.mean,
            c.verdict,
            c.verdict,
            esc(&c.reason)
        );
    }
    s.push_str("</table>\n<h2>Efficiency per runtime and scenario</h2>\n");
    let mut scenarios: Vec<&str> = Vec::new();
    for c in &r.summary {
        if !scenarios.contains(&c.scenario.as_str()) {
            scenarios.push(&c.scenario);
        }
    }
    for sc in &scenarios {
        let rows: Vec<(String, f64, f64)> = r
            .summary
            .iter()
            .filter(|c| c.scenario == *sc)
            .map(|c| (c.runtime.clone(), c.efficiency_true.mean, c.efficiency_apparent.mean))
            .collect();
        s.push_str(&efficiency_chart(sc, &rows)?);
        s.push('\n');
    }
    if !timelines.is_empty() {
        s.push_str("<h2>Timelines</h2><ul>\n");
        for (rt, sc, run, path) in timelines {
            let _ = writeln!(s, "<li><a href=\"{}\">{} x {} run {}</a></li>", esc(path), esc(rt), esc(sc), run);
        }
        s.push_str("</ul>\n");
    }
    s.push_str("</body></html>\n");
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: u64, agent: &str, received: u64, first: u64, end: u64) -> RequestTrace {
        RequestTrace {
            agent: agent.into(),
            client: "c".into(),
            runner_us: Some(received + 10),
            slot_us: Some(received + 500),
            first_token_us: Some(first),
            prompt_tokens: 3,
            tokens: 3,
            token_us: vec![first, first + 100, first + 200],
            ..RequestTrace::ran(id, received, end)
        }
    }

    #[test]
    fn a_timeline_has_one_lane_per_request_with_its_phases() {
        let trace = TraceSnapshot {
            schema_version: 2,
            time_scale: 1.0,
            dropped: 0,
            requests: vec![req(1, "a", 0, 1000, 5000), req(2, "b", 100, 6000, 9000)],
            devices: Vec::new(),
        };
        let l = lanes(&trace);
        assert_eq!(l.len(), 2);
        assert!(l[1].spans.iter().any(|s| s.2 == Phase::SlotWait));
        let doc = svg("test", &l).unwrap();
        assert!(doc.starts_with("<svg") && doc.trim_end().ends_with("</svg>"), "well-formed document");
        assert!(doc.contains("a #1 generate") && doc.contains("b #2 generate"), "every lane is labelled");
        assert!(doc.contains("waiting for a slot"), "the legend names the phases");
    }

    #[test]
    fn agent_lanes_put_each_agents_requests_on_one_lane() {
        let mut a2 = req(3, "a", 7000, 7100, 8000);
        a2.agent_label = Some("a".into());
        let mut a1 = req(1, "a", 0, 1000, 5000);
        a1.agent_label = Some("a".into());
        let mut b = req(2, "b", 100, 6000, 9000);
        b.agent_label = Some("b".into());
        let trace = TraceSnapshot {
            schema_version: 2,
            time_scale: 1.0,
            dropped: 0,
            requests: vec![a1, b, a2],
            devices: Vec::new(),
        };
        let report = sim_ollama::judge::judge(&trace, &sim_ollama::JudgeOptions::new());
        let l = agent_lanes(&trace, &report);
        assert_eq!(l.len(), 2, "one lane per agent");
        assert!(l[0].label.starts_with("a (2 requests)"), "{}", l[0].label);
        assert!(l[0].spans.iter().filter(|s| s.2 == Phase::Decoding).count() == 2, "both of a's requests on its lane");
    }
}
