//! The deployment verdict: how much of an ideal server's saving the deployment allows this
//! workload, what limits it, and the fix, in words a user acts on.
//!
//! The figures come from the judge: the one-at-a-time time, an infinitely parallel server's
//! (the longest chain, no loads), and what a perfectly concurrent client takes on this
//! deployment (`allowed.rs`, plus the run's loads). Each limit's cost is what lifting that limit
//! alone would save in the replay (slots, batching, time-slicing of a shared device), or the
//! loads' time; the largest names the limit.

use super::decision::{PARALLEL_MIN_SAVING, SERIALIZED_MAX_SAVING};
use super::figures::{pct, plural};
use super::report::{Allows, DeploymentReport, Limit, LimitCost};
use crate::trace::{DeviceSharing, Load, LoadCause};
use std::collections::{BTreeMap, BTreeSet};

/// A runner the calls ran on: (instance, model) with its parallel slots and its device.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Runner {
    pub(super) instance: usize,
    pub(super) model: String,
    pub(super) slots: usize,
    pub(super) device: usize,
    /// Why the server gave it one slot whatever `OLLAMA_NUM_PARALLEL` asks, if it did.
    pub(super) forced: Option<String>,
}

/// What the deployment verdict is computed from (microseconds of wall time at the run's scale).
#[derive(Debug)]
pub(super) struct Inputs<'a> {
    /// Whether the trace describes the deployment (its devices and every runner's slots).
    pub(super) described: bool,
    /// Requests that ran.
    pub(super) requests: usize,
    /// One call at a time, loads included.
    pub(super) sequential_us: u64,
    /// An infinitely parallel server with the models loaded.
    pub(super) ideal_us: u64,
    /// A perfectly concurrent client on this deployment, loads included.
    pub(super) allowed_us: u64,
    /// The most calls the client had in flight, fewer than its agents, and the time its agents
    /// waited at that limit between their calls, taken out of their own work in the figures
    /// above (`gaps::AtLimit`).
    pub(super) client_waits: Option<(usize, u64)>,
    /// Loads during the run.
    pub(super) load_us: u64,
    /// What lifting each replayed limit alone saves: slots, batching, time-slicing.
    pub(super) replayed: [(Limit, u64); 3],
    /// Requests the server's queue refused (HTTP 503).
    pub(super) queue_refused: usize,
    /// The runners the calls ran on.
    pub(super) runners: BTreeSet<Runner>,
    /// The devices' sharing model.
    pub(super) devices: &'a [DeviceSharing],
    /// How many agents could have run at once, when known.
    pub(super) agents: Option<usize>,
    /// Why each load of the run happened (a cold start, a reload for runner options, an
    /// eviction at the loaded-model limit or for memory).
    pub(super) load_causes: Vec<LoadCause>,
    /// The calls' mean attention over their contexts ([`crate::trace::RequestTrace::attention`]):
    /// how much batching slows them depends on it.
    pub(super) attention: f64,
}

fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}

/// The band a share of the ideal saving falls in: the client verdict's bands.
fn allows(share: f64) -> Allows {
    if share >= PARALLEL_MIN_SAVING {
        Allows::Full
    } else if share <= SERIALIZED_MAX_SAVING {
        Allows::NoSpeedup
    } else {
        Allows::Partial
    }
}

/// A deployment verdict that cannot be given, and why.
fn unknown(reason: String) -> DeploymentReport {
    DeploymentReport {
        verdict: Allows::Unknown,
        limit: Limit::Unknown,
        reason,
        speedup: None,
        ideal_speedup: None,
        share: None,
        share_interval: None,
        costs: Vec::new(),
    }
}

/// The deployment verdict.
pub(super) fn report(i: &Inputs<'_>) -> DeploymentReport {
    if i.requests < 2 {
        return unknown("fewer than two requests ran: nothing to say about what the deployment allows".into());
    }
    if !i.described {
        return unknown(
            "the trace does not describe its deployment (its slots and devices): what it allows is not known".into(),
        );
    }
    let mut costs: Vec<LimitCost> = i
        .replayed
        .iter()
        .chain(std::iter::once(&(Limit::Loads, i.load_us)))
        .filter(|(_, us)| *us > 0)
        .map(|&(limit, us)| LimitCost { limit, seconds: secs(us) })
        .collect();
    costs.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    let (seq, ideal, allowed) = (i.sequential_us as f64, i.ideal_us as f64, i.allowed_us as f64);
    let speedup = (allowed > 0.0).then(|| seq / allowed);
    let ideal_speedup = (ideal > 0.0).then(|| seq / ideal);
    let room = seq - ideal;
    if room < 0.05 * seq {
        return DeploymentReport {
            costs,
            speedup,
            ideal_speedup,
            ..unknown(format!(
                "one chain of calls is nearly all the work ({:.2} s of {:.2} s one at a time): even an ideal server could save little",
                secs(i.ideal_us),
                secs(i.sequential_us)
            ))
        };
    }
    let share = (seq - allowed) / room;
    let verdict = allows(share);
    let figures = format!(
        "a perfectly concurrent client takes {:.2} s here against {:.2} s one call at a time ({}) and {:.2} s on an infinitely parallel server with the models loaded ({})",
        secs(i.allowed_us),
        secs(i.sequential_us),
        speedup.map_or("n/a".into(), |s| format!("{s:.2}x")),
        secs(i.ideal_us),
        ideal_speedup.map_or("n/a".into(), |s| format!("{s:.2}x")),
    );
    let figures = match i.client_waits {
        Some((k, us)) => format!(
            "{figures}, the {:.2} s the agents waited between their calls while the client had {k} in flight (its most; a pool or limit of its own) not counted as their own work",
            secs(us)
        ),
        None => figures,
    };
    // The limits that matter: the largest, and any other costing at least a quarter of it.
    let lost = (allowed - ideal).max(0.0);
    let top = costs.first().map_or(0.0, |c| c.seconds);
    let named: Vec<&LimitCost> = if verdict == Allows::Full {
        Vec::new()
    } else {
        costs.iter().filter(|c| c.seconds > 0.0 && c.seconds >= 0.25 * top && c.seconds * 1e6 >= 0.05 * lost).collect()
    };
    let mut limit = named.first().map_or(Limit::None, |c| c.limit);
    let mut words: Vec<String> = named.iter().map(|c| limit_words(c, i)).collect();
    if i.queue_refused > 0 {
        words.insert(
            0,
            format!(
                "the server's queue refused {} (HTTP 503 \"server busy\"): raise OLLAMA_MAX_QUEUE or send fewer calls at once",
                plural(i.queue_refused, "request", "requests")
            ),
        );
        limit = Limit::Queue;
    }
    let head = match verdict {
        Allows::Full => "the deployment allows the agents to run together".to_string(),
        Allows::Partial => format!("the deployment allows part of the speedup ({} of an ideal server's)", pct(share)),
        Allows::NoSpeedup if seq < allowed => {
            "the deployment allows no speedup: overlapping the calls is slower than taking turns".to_string()
        }
        Allows::NoSpeedup | Allows::Unknown => "the deployment allows no real speedup".to_string(),
    };
    let reason = if words.is_empty() {
        format!("{head}: {figures}")
    } else {
        format!("{head}: {}; {figures}", words.join("; "))
    };
    DeploymentReport { verdict, limit, reason, speedup, ideal_speedup, share: Some(share), share_interval: None, costs }
}

/// One limit, its cost and its fix, in words.
fn limit_words(c: &LimitCost, i: &Inputs<'_>) -> String {
    let cost = format!("{:.2} s", c.seconds);
    match c.limit {
        Limit::Slots => {
            let few: Vec<&Runner> = i.runners.iter().filter(|r| i.agents.is_none_or(|a| r.slots < a)).collect();
            let list = if few.is_empty() { i.runners.iter().collect::<Vec<_>>() } else { few };
            let which = list
                .iter()
                .map(|r| {
                    format!(
                        "{} on instance {} has {}",
                        r.model,
                        r.instance,
                        plural(r.slots, "parallel slot", "parallel slots")
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            // A slot the server forces (server/sched.go 500-511) is not raised by the setting.
            if let Some(why) = list.iter().find_map(|r| r.forced.as_deref()) {
                return format!(
                    "{which}, so calls queue for it (costing {cost}): Ollama gives {why} one slot whatever OLLAMA_NUM_PARALLEL says; run a second server for it (another OLLAMA_HOST), or use a model of another architecture"
                );
            }
            let fix = match i.agents {
                Some(a) => format!("set OLLAMA_NUM_PARALLEL={} (memory: {} x the context)", a.max(2), a.max(2)),
                None => "raise OLLAMA_NUM_PARALLEL to the number of agents that call at once (memory: that many x the context)".to_string(),
            };
            let them = if list.len() == 1 && list[0].slots == 1 { "it" } else { "them" };
            format!("{which}, so calls queue for {them} (costing {cost}): {fix}")
        }
        Limit::SharedDevice => {
            let mut by_device: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
            for r in &i.runners {
                by_device.entry(r.device).or_default().insert(r.instance);
            }
            let shared: Vec<String> = by_device
                .iter()
                .filter(|(_, inst)| inst.len() >= 2)
                .map(|(d, inst)| {
                    // Where attention shares the device otherwise than the rest, the share at
                    // these calls' mean context: two processes' speeds, summed.
                    let sharing = i.devices.get(*d);
                    let eff = sharing.map_or(1.0, |s| 2.0 * s.speed(1, 2, i.attention));
                    let at = if sharing.is_some_and(|s| s.cross_process_attention_efficiency.is_some()) {
                        " at these calls' contexts"
                    } else {
                        ""
                    };
                    format!(
                        "instances {} share device {d} and time-slice it ({} of its capacity while both decode{at})",
                        inst.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" and "),
                        pct(eff)
                    )
                })
                .collect();
            let what =
                if shared.is_empty() { "server processes share a device".to_string() } else { shared.join(", ") };
            format!(
                "{what} (costing {cost}): run one server with OLLAMA_NUM_PARALLEL instead of one per agent, or give each its own device"
            )
        }
        Limit::Batch => {
            // Two streams of these calls' mean context, on the device that slows them most.
            let two = i.devices.iter().map(|d| d.speed(2, 1, i.attention)).fold(1.0, f64::min);
            let at = if i.attention > 0.0 { " at these calls' contexts" } else { "" };
            format!(
                "streams batched in one runner slow each other (two at once run at {} of solo speed each{at}; costing {cost}): the device's throughput, not the client; Ollama runs one copy of a model per server, so its parallel slots share that copy's device, and another GPU gets a copy only from a second server (its own OLLAMA_HOST and CUDA_VISIBLE_DEVICES)",
                pct(two)
            )
        }
        Limit::Loads => format!("model loads took {cost}: {}", load_words(&i.load_causes)),
        Limit::Queue | Limit::Cpu | Limit::None | Limit::Unknown => format!("{} ({cost})", c.limit.as_str()),
    }
}

/// What caused a load: the trace's cause, or, in a trace older than that field, read from its
/// reason (the words `scheduler.rs` writes: `reload for runner options: WHAT`, `load after
/// evicting M: N models loaded (max K)`, `load after evicting M: X needs ... free on D`, else a
/// first or plain load).
pub(super) fn load_cause(l: &Load) -> LoadCause {
    if let Some(c) = &l.cause {
        return c.clone();
    }
    let reason = l.reason.as_str();
    let detail = reason.split_once(": ").map_or("", |(_, w)| w).to_string();
    if reason.starts_with("reload for runner options") {
        return LoadCause::Reload { changed: detail };
    }
    if !reason.starts_with("load after evicting") {
        return LoadCause::Load;
    }
    match reason.rsplit_once("(max ").and_then(|(_, m)| m.trim_end_matches(')').parse::<usize>().ok()) {
        Some(max) if reason.contains("models loaded (max") => LoadCause::EvictedAtLimit { max },
        _ => LoadCause::EvictedForMemory { detail },
    }
}

/// Why the loads happened and what avoids them, from their causes.
fn load_words(causes: &[LoadCause]) -> String {
    let count = |f: fn(&LoadCause) -> bool| causes.iter().filter(|c| f(c)).count();
    let mut words = Vec::new();
    if let Some(what) =
        causes.iter().find_map(|c| if let LoadCause::Reload { changed } = c { Some(changed) } else { None })
    {
        words.push(format!(
            "{} because requests asked for other runner options ({what}): Ollama reloads a model for each change of num_ctx, num_batch, num_gpu and the like, so send the same options from every agent",
            plural(count(|c| matches!(c, LoadCause::Reload { .. })), "reload", "reloads")
        ));
    }
    if let Some(limit) =
        causes.iter().find_map(|c| if let LoadCause::EvictedAtLimit { max } = c { Some(*max) } else { None })
    {
        words.push(format!(
            "the models evict each other ({}): OLLAMA_MAX_LOADED_MODELS={limit} holds fewer models than the agents use; raise it (memory permitting) or give each model its own server",
            plural(count(|c| matches!(c, LoadCause::EvictedAtLimit { .. })), "eviction", "evictions")
        ));
    }
    if let Some(what) =
        causes.iter().find_map(|c| if let LoadCause::EvictedForMemory { detail } = c { Some(detail) } else { None })
    {
        words.push(format!(
            "the models do not fit in memory together ({}; {what}): every parallel slot reserves its own context, so lower OLLAMA_NUM_PARALLEL or num_ctx, or give each model its own device",
            plural(count(|c| matches!(c, LoadCause::EvictedForMemory { .. })), "eviction", "evictions")
        ));
    }
    if words.is_empty() {
        words.push(
            "load the models before the agents start and keep them loaded (keep_alive, OLLAMA_KEEP_ALIVE)".to_string(),
        );
    }
    words.join("; ")
}

/// "Whether WHO allow A or B is within WHY: S of an ideal server's saving (LO-HI WHERE)": the
/// head of a verdict whose share's interval reaches two bands.
fn across_bands(who: &str, why: &str, share: f64, (lo, hi): (f64, f64), where_: &str) -> String {
    let words = |a: Allows| match a {
        Allows::Full => "the whole of an ideal server's saving",
        Allows::Partial => "part of it",
        Allows::NoSpeedup | Allows::Unknown => "no real speedup",
    };
    format!(
        "whether {who} allow {} or {} is within {why}: {} of an ideal server's saving ({}-{} {where_})",
        words(allows(lo)),
        words(allows(hi)),
        pct(share),
        pct(lo),
        pct(hi)
    )
}

/// A deployment verdict of a twin (a simulator calibrated from live servers) with the share its
/// deployment allows at the two ends of what `harness calibrate --check` calls the same servers
/// (its batching and sharing figures moved by the 15 % the check lets them move): where those
/// ends lie in two bands, the verdict is `unknown`, the band in the reason's words, as the
/// live servers' own rounds would leave it; else the verdict stands, with the interval.
/// `ends` is the share at the slow end and at the fast end, in either order.
pub fn within_tolerance(mut rep: DeploymentReport, ends: (f64, f64)) -> DeploymentReport {
    let (Some(share), true) = (rep.share, ends.0.is_finite() && ends.1.is_finite()) else { return rep };
    let (lo, hi) = (ends.0.min(ends.1).min(share), ends.0.max(ends.1).max(share));
    rep.share_interval = Some([lo, hi]);
    if rep.verdict == Allows::Unknown || allows(lo) == allows(hi) {
        return rep;
    }
    let head = across_bands(
        "these servers",
        "what `harness calibrate --check` calls the same servers",
        share,
        (lo, hi),
        "with the twin's batching and sharing figures moved that far",
    );
    rep.reason = format!("{head}; as the twin has them, {}", rep.reason);
    rep.verdict = Allows::Unknown;
    rep
}

/// The deployment verdict from measured times alone (live mode: no trace, so no replay; what a
/// client that holds nothing back takes on these servers, `allowed_s`, is measured by running
/// one, as `how` says). Its limit cannot be named without the servers' trace. `spread` is the
/// share's 80 % interval over resamples of the rounds the times are medians of: where it
/// crosses the line between two bands, the verdict is `unknown`, the band in the reason's words
/// (a deployment is not called "partial" on a saving its own rounds cannot tell from none).
pub fn measured(
    sequential_s: f64,
    ideal_s: f64,
    allowed_s: f64,
    how: &str,
    spread: Option<(f64, f64)>,
) -> DeploymentReport {
    let finite = sequential_s.is_finite() && ideal_s.is_finite() && allowed_s.is_finite() && allowed_s > 0.0;
    let room = sequential_s - ideal_s;
    let speedup = finite.then(|| sequential_s / allowed_s);
    let ideal_speedup = (finite && ideal_s > 0.0).then(|| sequential_s / ideal_s);
    let not_known = |reason: String| DeploymentReport { speedup, ideal_speedup, ..unknown(reason) };
    if !finite {
        return not_known(format!("no measurement of what the servers allow ({how} did not complete)"));
    }
    if !(room >= 0.05 * sequential_s) {
        return not_known(format!(
            "the longest agent alone is nearly all the work ({ideal_s:.2} s of {sequential_s:.2} s one at a time): even an ideal server could save little"
        ));
    }
    let share = (sequential_s - allowed_s) / room;
    let spread = spread.filter(|(lo, hi)| lo.is_finite() && hi.is_finite() && lo <= hi);
    // The bands the interval reaches: one band, or the noise's choice.
    let reached = spread.filter(|(lo, hi)| allows(*lo) != allows(*hi));
    let verdict = if reached.is_some() { Allows::Unknown } else { allows(share) };
    let head = match (verdict, reached) {
        (_, Some((lo, hi))) => {
            across_bands("the servers", "the noise of the rounds", share, (lo, hi), "in their resamples")
        }
        (Allows::Full, None) => "the servers allow the agents to run together".to_string(),
        (Allows::Partial, None) => {
            format!("the servers allow part of the speedup ({} of an ideal server's)", pct(share))
        }
        (Allows::NoSpeedup | Allows::Unknown, None) => "the servers allow no real speedup".to_string(),
    };
    let limit = if verdict == Allows::Full { Limit::None } else { Limit::Unknown };
    let why = if verdict == Allows::Full {
        String::new()
    } else {
        "; without a server trace the limit (parallel slots, a shared GPU, or the CPU the servers share) cannot be named: run the scenario on the simulator for that".to_string()
    };
    DeploymentReport {
        verdict,
        limit,
        reason: format!(
            "{head}: {how} took {allowed_s:.2} s against {sequential_s:.2} s one call at a time and {ideal_s:.2} s for the longest agent alone{why}"
        ),
        speedup,
        ideal_speedup,
        share: Some(share),
        share_interval: spread.map(|(lo, hi)| [lo, hi]),
        costs: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measured_deployment_is_given_a_band_only_where_its_rounds_noise_stays_inside_it() {
        // One at a time 2.30 s, the longest agent 1.17 s, the reference client 2.08 s: 19 %
        // of an ideal server's saving, "partial" on its medians.
        let settled = measured(2.30, 1.17, 2.08, "the reference client", Some((0.17, 0.24)));
        assert_eq!(settled.verdict, Allows::Partial, "{}", settled.reason);
        assert_eq!(settled.share_interval, Some([0.17, 0.24]));
        assert!(settled.reason.starts_with("the servers allow part of the speedup (19%"), "{}", settled.reason);
        // The rounds' resamples reach below the 15 % line: the band is the noise's choice.
        let noisy = measured(2.30, 1.17, 2.08, "the reference client", Some((0.05, 0.31)));
        assert_eq!(noisy.verdict, Allows::Unknown, "{}", noisy.reason);
        assert_eq!(noisy.limit, Limit::Unknown);
        assert!(
            noisy.reason.starts_with(
                "whether the servers allow no real speedup or part of it is within the noise of the rounds: 19% of an ideal server's saving (5%-31% in their resamples)"
            ),
            "{}",
            noisy.reason
        );
        assert!(noisy.share.is_some_and(|s| (s - 0.1947).abs() < 1e-3) && noisy.speedup.is_some());
        // Across the 80 % line.
        let near_full = measured(2.0, 1.0, 1.15, "the reference client", Some((0.7, 0.9)));
        assert_eq!(near_full.verdict, Allows::Unknown);
        assert!(
            near_full.reason.contains("part of it or the whole of an ideal server's saving"),
            "{}",
            near_full.reason
        );
        // Without an interval (one round) the medians decide, as before.
        assert_eq!(measured(2.30, 1.17, 2.08, "the reference client", None).verdict, Allows::Partial);
        assert_eq!(measured(2.0, 1.0, 1.95, "the reference client", Some((-0.2, 0.1))).verdict, Allows::NoSpeedup);
    }

    #[test]
    fn the_batching_limit_quotes_two_streams_speed_at_the_calls_contexts() {
        // p = 0.48 and calls whose attention is 1.59 (the four-slot CPU server's twin): two
        // at once run at 2.59 / (1 + 0.48 + 3.18) = 56 % of solo speed, not 1 / 1.48 = 68 %.
        let devices = [DeviceSharing {
            batch_penalty: 0.48,
            cross_process_efficiency: 1.0,
            cross_process_attention_efficiency: None,
            attention_batch_penalty: 0.0,
        }];
        let inputs = |attention: f64| Inputs {
            described: true,
            requests: 2,
            sequential_us: 2_000_000,
            ideal_us: 1_000_000,
            allowed_us: 1_800_000,
            client_waits: None,
            load_us: 0,
            replayed: [(Limit::Slots, 0), (Limit::Batch, 800_000), (Limit::SharedDevice, 0)],
            queue_refused: 0,
            runners: [Runner { instance: 0, model: "m".into(), slots: 4, device: 0, forced: None }].into(),
            devices: &devices,
            agents: Some(2),
            load_causes: Vec::new(),
            attention,
        };
        let r = report(&inputs(1.59));
        assert_eq!((r.verdict, r.limit), (Allows::Partial, Limit::Batch), "{}", r.reason);
        assert!(
            r.reason.contains("two at once run at 56% of solo speed each at these calls' contexts"),
            "{}",
            r.reason
        );
        let r = report(&inputs(0.0));
        assert!(r.reason.contains("two at once run at 68% of solo speed each;"), "{}", r.reason);
    }

    #[test]
    fn a_twins_verdict_is_unknown_where_the_checks_tolerance_spans_two_bands() {
        // A twin's replay: 20 % of an ideal server's saving, "partial".
        let twin = measured(2.30, 1.17, 2.074, "the reference client", None);
        assert_eq!(twin.verdict, Allows::Partial);
        // Its batching figure at the check's ends: 8 % and 31 %: the band is not the twin's to say.
        let wide = within_tolerance(twin.clone(), (0.31, 0.08));
        assert_eq!(wide.verdict, Allows::Unknown, "{}", wide.reason);
        assert_eq!(wide.share_interval, Some([0.08, 0.31]));
        assert!(
            wide.reason.starts_with(
                "whether these servers allow no real speedup or part of it is within what `harness calibrate --check` calls the same servers: 20% of an ideal server's saving (8%-31% with the twin's"
            ),
            "{}",
            wide.reason
        );
        assert!(wide.reason.contains("as the twin has them, the servers allow part of the speedup"), "{}", wide.reason);
        // Ends inside one band: the verdict stands, with its interval.
        let narrow = within_tolerance(twin.clone(), (0.17, 0.3));
        assert_eq!(narrow.verdict, Allows::Partial);
        assert_eq!(narrow.share_interval, Some([0.17, 0.3]));
        // Ends that do not reach the share itself still contain it; non-finite ends change nothing.
        assert_eq!(within_tolerance(twin.clone(), (0.25, 0.3)).share_interval.map(|i| i[0]), twin.share);
        assert_eq!(within_tolerance(twin.clone(), (f64::NAN, 0.3)), twin);
    }
}
