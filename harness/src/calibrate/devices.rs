//! Which servers share a device: the groups the pairs of servers that slowed each other make
//! (`harness calibrate`'s step 5), each shared device's figure, each device's speed where the
//! servers decoded at different speeds alone, and what the twin's file says of a server on a
//! device of its own.

use super::figures::{Calibration, Figure, Pair, num, round3};
use super::fits::{fit_sharing, fit_sharing_parts, sharing_efficiency};

/// Servers the twin puts on one device, and what measured their sharing.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceGroup {
    /// The servers, indices into `endpoints`, in order.
    pub servers: Vec<usize>,
    /// Each stream's speed, relative to its server's solo speed, with `busy` servers of the
    /// group decoding at once (`None`: a server alone on its device).
    pub together: Option<Figure>,
    /// How many servers decoded at once in those rounds.
    pub busy: usize,
    /// Each stream's speed relative to solo in the pairs' rounds after a long prompt.
    pub after_long: Option<Figure>,
}

impl DeviceGroup {
    /// The device's `cross_process_efficiency`: `busy` servers time-slicing it got `together`
    /// each (1 for a server alone).
    pub fn efficiency(&self) -> f64 {
        self.together.map_or(1.0, |t| sharing_efficiency(t.median, self.busy))
    }

    /// The device's `(cross_process_efficiency, cross_process_attention_efficiency)` from its
    /// pairs' speeds at the short and the long prompt ([`fit_sharing_parts`]), their attention
    /// the profile's `slowdown_per_1k` at the rounds' mean contexts; `together` and
    /// `after_long` may be moved first (`moved`, as [`super::tolerance`] moves them). The
    /// second is `None` where the two rounds cannot tell the parts apart: one share for both.
    pub fn efficiencies(
        &self,
        cal: &Calibration,
        slowdown_per_1k: f64,
        moved: impl Fn(&Figure) -> f64,
    ) -> (f64, Option<f64>) {
        let Some(t) = self.together else { return (1.0, None) };
        let one = (sharing_efficiency(moved(&t), self.busy), None);
        let (Some(l), Some([short, long])) = (self.after_long, cal.pair_contexts) else { return one };
        let x = |c: f64| slowdown_per_1k * c / 1000.0;
        fit_sharing_parts((x(short), moved(&t)), (x(long), moved(&l)), self.busy).map_or(one, |(e, ea)| (e, Some(ea)))
    }
}

/// The devices the servers sit on, from what slowed which: two servers that ran below 0.9 of
/// their solo speeds beside each other in every round share a device, and so does every server linked to them
/// through such pairs (a device is what a pair's slowdown shows, passed on: A slowed by B and
/// B by C puts the three on one). Each shared device's figure is its pairs' readings below
/// the line, pooled. With no pairs measured (a twin of two servers written before pairs were),
/// `together` (every server at once) decides: all on one device or each on its own. Returns
/// the groups in order of their first server and a note for each reading the grouping
/// overrules (a pair above the line on one device through others).
pub fn device_groups(cal: &Calibration) -> (Vec<DeviceGroup>, Vec<String>) {
    let n = cal.endpoints.len().max(cal.slots.len()).max(1);
    let alone = |i: usize| DeviceGroup { servers: vec![i], together: None, busy: 1, after_long: None };
    if cal.pairs.is_empty() {
        return match cal.together.filter(|t| fit_sharing(t.median, n).is_some()) {
            Some(t) if n > 1 => {
                (vec![DeviceGroup { servers: (0..n).collect(), together: Some(t), busy: n, after_long: None }], vec![])
            }
            _ => ((0..n).map(alone).collect(), vec![]),
        };
    }
    // Every round below the line, not the median only: on a busy machine two servers on
    // cores of their own read 0.84 [0.57 .. 1.34] once, and chained the three servers here
    // into one device (their other calibrations: 1.07 and 0.72). Or the median below and every
    // round after the long prompt below too (rounds of their own, at another context): two
    // servers on one machine's 2 cores read 0.80 [0.69 .. 0.92] once, and 0.85 [0.83 .. 0.87]
    // after the long prompt, and were put on a device each.
    let shared = |p: &Pair| {
        fit_sharing(p.speed.max, 2).is_some()
            || (fit_sharing(p.speed.median, 2).is_some()
                && p.after_long.is_some_and(|l| fit_sharing(l.max, 2).is_some()))
    };
    // Union-find over the pairs that slowed each other.
    let mut root: Vec<usize> = (0..n).collect();
    fn find(root: &mut [usize], i: usize) -> usize {
        let mut r = i;
        while root[r] != r {
            r = root[r];
        }
        root[i] = r;
        r
    }
    for p in cal.pairs.iter().filter(|p| shared(p) && p.a < n && p.b < n) {
        let (ra, rb) = (find(&mut root, p.a), find(&mut root, p.b));
        root[ra.max(rb)] = ra.min(rb);
    }
    let mut groups: Vec<DeviceGroup> = Vec::new();
    let mut notes = Vec::new();
    for i in 0..n {
        let r = find(&mut root, i);
        match groups.iter_mut().find(|g| g.servers[0] == r) {
            Some(g) => g.servers.push(i),
            None => groups.push(alone(i)),
        }
    }
    for g in groups.iter_mut().filter(|g| g.servers.len() > 1) {
        let (below, above): (Vec<&Pair>, Vec<&Pair>) =
            cal.pairs.iter().filter(|p| g.servers.contains(&p.a) && g.servers.contains(&p.b)).partition(|p| shared(p));
        let medians: Vec<f64> = below.iter().map(|p| p.speed.median).collect();
        g.together = pooled(below.iter().map(|p| p.speed));
        g.busy = 2;
        g.after_long = pooled(below.iter().filter_map(|p| p.after_long));
        if let (Some(lo), Some(hi)) =
            (medians.iter().copied().reduce(f64::min), medians.iter().copied().reduce(f64::max))
        {
            if hi - lo > 0.15 {
                notes.push(format!(
                    "the pairs of {} slowed each other unevenly ({} .. {} of their solo speeds): the simulator's device gives every pair on it one share, the median {}; servers that interfere in part (cores of one machine, a memory bus) are not modelled",
                    g.servers.iter().map(|&i| cal.endpoint(i)).collect::<Vec<_>>().join(", "),
                    num(lo),
                    num(hi),
                    num(g.together.map_or(f64::NAN, |t| t.median))
                ));
            }
        }
        for p in above {
            notes.push(format!(
                "{} and {} ran at {} of their solo speeds beside each other (a device each), yet each slowed beside another server of the same group: the twin puts them on one device",
                cal.endpoint(p.a),
                cal.endpoint(p.b),
                num(p.speed.median)
            ));
        }
    }
    // Pairs kept apart though slower at the median (a pair inside a group is said above).
    let together = |p: &Pair| groups.iter().any(|g| g.servers.contains(&p.a) && g.servers.contains(&p.b));
    for p in cal.pairs.iter().filter(|p| !shared(p) && !together(p) && fit_sharing(p.speed.median, 2).is_some()) {
        notes.push(format!(
            "{} and {} ran at {} of their solo speeds beside each other: slower in most rounds, but not in every one, so not taken for a shared device",
            cal.endpoint(p.a),
            cal.endpoint(p.b),
            p.speed.words("x")
        ));
    }
    (groups, notes)
}

/// Figures of several pairs as one: the median of their medians, the range of their ranges.
fn pooled(figures: impl Iterator<Item = Figure> + Clone) -> Option<Figure> {
    let medians: Vec<f64> = figures.clone().map(|f| f.median).collect();
    Figure::of(&medians).map(|f| Figure {
        min: figures.clone().map(|p| p.min).fold(f.min, f64::min),
        max: figures.clone().map(|p| p.max).fold(f.max, f64::max),
        samples: figures.map(|p| p.samples).sum(),
        ..f
    })
}

/// What showed a server has a device of its own: each other server beside it ran at its solo
/// speed, or near it.
pub(super) fn alone_words(cal: &Calibration, i: usize) -> String {
    if cal.pairs.is_empty() {
        return match cal.together {
            Some(t) => format!(
                "one call on each of the servers at once ran at {} of its solo speed: a device each",
                t.words("x")
            ),
            None => "a device of its own (not measured)".into(),
        };
    }
    let beside: Vec<String> = cal
        .pairs
        .iter()
        .filter(|p| p.a == i || p.b == i)
        .map(|p| format!("beside {} at {}", cal.endpoint(if p.a == i { p.b } else { p.a }), p.speed.words("x")))
        .collect();
    format!(
        "one call with one on each other server at once ran near its solo speed ({}): a device of its own",
        beside.join("; ")
    )
}

/// Whether a server's solo calls all ran more than 15 % faster or slower than the first
/// server's median (every call, not the median only: a client descheduled at a call's start
/// and reading its tokens in a burst read a simulator's 1,700 tokens/s at 2,981 once, in a
/// suite run, and the median of two calls moved 19 %).
pub fn apart_in_speed(first: f64, server: &Figure) -> bool {
    server.max < 0.85 * first || server.min > 1.15 * first
}

/// A device's `speed` and what measured it, where some server's solo calls all ran more than
/// 15 % from the first server's median ([`apart_in_speed`]; the profile is fitted on the
/// first server's calls): its servers' median solo speed over the first server's where one of
/// them is apart, else 1. `None` where no server is apart (the profile's speed for every
/// device: a difference within the machine's noise is not fitted).
pub(super) fn device_speed(cal: &Calibration, g: &DeviceGroup) -> Option<(f64, String)> {
    let first = cal.decode_per_server.first()?.median;
    let apart = |i: &usize| cal.decode_per_server.get(*i).is_some_and(|f| apart_in_speed(first, f));
    let differ = (0..cal.decode_per_server.len()).any(|i| apart(&i));
    let own: Vec<f64> = g.servers.iter().filter_map(|&i| cal.decode_per_server.get(i).map(|f| f.median)).collect();
    let median = Figure::of(&own)?.median;
    (differ && first > 0.0).then(|| {
        let x = if g.servers.iter().any(apart) { round3(median / first) } else { 1.0 };
        (
            x,
            format!(
                "{}: decoded alone at median {} tokens/s, the first server {}: {} of the profile's speed",
                g.servers.iter().map(|&i| cal.endpoint(i)).collect::<Vec<_>>().join(", "),
                num(median),
                num(first),
                num(x)
            ),
        )
    })
}

/// A device's `prompt_speed` and what measured it, where it differs from `speed` (the device's
/// decode speed, which scales a stream's start too) by more than 15 %: the speed its servers'
/// times to first token of a long prompt show against the first server's where one of them is
/// apart in every call ([`apart_in_speed`] on their inverses), else 1.
pub(super) fn device_prompt_speed(cal: &Calibration, g: &DeviceGroup, speed: f64) -> Option<(f64, String)> {
    let rate = |f: &Figure| Figure { median: 1.0 / f.median, min: 1.0 / f.max, max: 1.0 / f.min, samples: f.samples };
    let first = rate(cal.long_ttft_per_server.first().filter(|f| f.min > 0.0)?);
    let own: Vec<(usize, Figure)> = g
        .servers
        .iter()
        .filter_map(|&i| cal.long_ttft_per_server.get(i).filter(|f| f.min > 0.0).map(|f| (i, rate(f))))
        .collect();
    let median = Figure::of(&own.iter().map(|(_, f)| f.median).collect::<Vec<_>>())?.median;
    let x = if own.iter().any(|(_, f)| apart_in_speed(first.median, f)) { round3(median / first.median) } else { 1.0 };
    ((x / speed - 1.0).abs() > 0.15).then(|| {
        (
            x,
            format!(
                "{}: time to first token of a {LONG_PROMPT_CHARS_WORDS} prompt {} ms (median), the first server {} ms: prompts at {} of the profile's speed where it decodes at {}",
                own.iter().map(|(i, _)| cal.endpoint(*i)).collect::<Vec<_>>().join(", "),
                num(1.0 / median),
                num(1.0 / first.median),
                num(x),
                num(speed)
            ),
        )
    })
}

/// How the long prompt of [`device_prompt_speed`] is named in the twin's comments.
const LONG_PROMPT_CHARS_WORDS: &str = "1,500-character";

/// Where every server at once ran at `speed` of their solo speeds (the median over them) away
/// from what the twin's devices give them (`efficiency / m` on a device of m, 1 alone; their
/// median) by more than 15 %: a note saying so. The twin keeps what its pairs showed.
pub fn busy_note(groups: &[DeviceGroup], speed: Figure) -> Option<String> {
    let modelled: Vec<f64> = groups
        .iter()
        .flat_map(|g| std::iter::repeat_n(g.efficiency() / g.servers.len() as f64, g.servers.len()))
        .collect();
    let modelled = Figure::of(&modelled)?.median;
    let n: usize = groups.iter().map(|g| g.servers.len()).sum();
    ((speed.median / modelled - 1.0).abs() > 0.15).then(|| {
        format!(
            "the {n} servers all at once ran at {} of their solo speeds, where the twin's devices (from pairs of servers) give them {}: {}",
            speed.words("x"),
            num(modelled),
            if speed.median < modelled {
                "they slow each other when more are busy than pairs show (servers sharing fewer cores than they are, or a memory bus), which the twin's devices do not follow: it is faster than they were with all of them busy"
            } else {
                "a device time-sliced by more than two loses less than the pairs' share says: the twin is slower than they were with all of them busy"
            }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_servers_at_once_are_noted_where_the_devices_do_not_follow() {
        // Three servers, each pair at 0.6 (one device, efficiency 1.2): the simulator gives
        // each of three busy 0.4. At 0.42 nothing to say; at 0.55, said.
        let fig = |m: f64| Figure { median: m, min: m, max: m, samples: 3 };
        let mut cal = Calibration {
            endpoints: (0..3).map(|i| format!("http://s{i}")).collect(),
            pairs: vec![
                Pair { a: 0, b: 1, speed: fig(0.6), after_long: None },
                Pair { a: 0, b: 2, speed: fig(0.6), after_long: None },
                Pair { a: 1, b: 2, speed: fig(0.6), after_long: None },
            ],
            ..Calibration::default()
        };
        let (groups, _) = device_groups(&cal);
        assert_eq!(busy_note(&groups, fig(0.42)), None);
        let note = busy_note(&groups, fig(0.55)).expect("said");
        assert!(note.contains("give them 0.40") && note.contains("the twin is slower"), "{note}");
        // Three servers on two cores: no pair slowed much (a core each), all three at once
        // did: devices of their own give 1, said.
        cal.pairs = vec![
            Pair { a: 0, b: 1, speed: fig(0.95), after_long: None },
            Pair { a: 0, b: 2, speed: fig(0.97), after_long: None },
            Pair { a: 1, b: 2, speed: fig(0.94), after_long: None },
        ];
        let (groups, _) = device_groups(&cal);
        assert_eq!(groups.len(), 3);
        let note = busy_note(&groups, fig(0.66)).expect("said");
        assert!(note.contains("give them 1.00") && note.contains("more are busy than pairs show"), "{note}");
    }

    #[test]
    fn a_device_runs_at_its_own_speed_only_where_every_solo_call_says_so() {
        let fig = |med: f64, min: f64, max: f64| Figure { median: med, min, max, samples: 2 };
        let mut cal = Calibration {
            endpoints: (0..3).map(|i| format!("http://s{i}")).collect(),
            decode_per_server: vec![fig(1705.0, 1696.0, 1714.0), fig(1715.0, 1690.0, 1740.0), fig(849.0, 848.0, 850.0)],
            ..Calibration::default()
        };
        let groups = vec![
            DeviceGroup { servers: vec![0, 1], together: None, busy: 1, after_long: None },
            DeviceGroup { servers: vec![2], together: None, busy: 1, after_long: None },
        ];
        let speed = |c: &Calibration, g: &DeviceGroup| device_speed(c, g).map(|(x, _)| x);
        assert_eq!((speed(&cal, &groups[0]), speed(&cal, &groups[1])), (Some(1.0), Some(0.5)));
        // One of server 1's two calls read fast (a client reading a burst): its median 19 %
        // above the first's, but not every call: its device stays at the profile's speed.
        cal.decode_per_server[1] = fig(2338.0, 1694.0, 2981.0);
        assert_eq!(speed(&cal, &groups[0]), Some(1.0));
        // Alike within the noise: no speed at all.
        cal.decode_per_server[2] = fig(1600.0, 1500.0, 1700.0);
        assert_eq!(speed(&cal, &groups[1]), None);
    }

    #[test]
    fn servers_go_on_the_devices_their_pairs_show() {
        let fig = |m: f64| Figure { median: m, min: m - 0.02, max: m + 0.02, samples: 4 };
        let pair = |a, b, m| Pair { a, b, speed: fig(m), after_long: None };
        let servers = |n: usize| Calibration {
            endpoints: (0..n).map(|i| format!("http://s{i}")).collect(),
            ..Calibration::default()
        };
        // Four servers: 0 and 1 slow each other, 2 and 3 do not, nor does anything else.
        let mut cal = servers(4);
        cal.pairs = vec![
            pair(0, 1, 0.55),
            pair(0, 2, 0.97),
            pair(0, 3, 0.98),
            pair(1, 2, 0.96),
            pair(1, 3, 0.99),
            pair(2, 3, 0.95),
        ];
        let (groups, notes) = device_groups(&cal);
        let sets: Vec<Vec<usize>> = groups.iter().map(|g| g.servers.clone()).collect();
        assert_eq!(sets, vec![vec![0, 1], vec![2], vec![3]]);
        assert!((groups[0].efficiency() - 1.1).abs() < 1e-9, "two at 0.55 each: 1.1 of the device");
        assert_eq!((groups[1].efficiency(), groups[1].together), (1.0, None));
        assert!(notes.is_empty());
        // Linked through a third: 0 slows 1, 1 slows 2, 0 and 2 read apart; one device, said.
        let mut chain = servers(3);
        chain.pairs = vec![pair(0, 1, 0.6), pair(1, 2, 0.62), pair(0, 2, 0.93)];
        let (groups, notes) = device_groups(&chain);
        assert_eq!(groups.iter().map(|g| g.servers.clone()).collect::<Vec<_>>(), vec![vec![0, 1, 2]]);
        assert!((groups[0].together.unwrap().median - 0.61).abs() < 1e-9, "the pairs below the line");
        assert_eq!(notes.len(), 1, "{notes:?}");
        // Pairs of one device far apart (this machine's three servers, two pinned to one core
        // and one to the other): said, not fitted.
        let mut uneven = servers(3);
        uneven.pairs = vec![pair(0, 1, 0.40), pair(0, 2, 0.66), pair(1, 2, 0.72)];
        let (groups, notes) = device_groups(&uneven);
        assert_eq!(groups.len(), 1);
        assert!(notes.len() == 1 && notes[0].contains("unevenly (0.40 .. 0.72"), "{notes:?}");
        // A pair slower at the median but at its solo speed in some round: apart, said.
        let mut noisy = servers(3);
        let wide = Figure { median: 0.84, min: 0.57, max: 1.34, samples: 6 };
        noisy.pairs = vec![pair(0, 1, 0.39), pair(0, 2, 1.07), Pair { a: 1, b: 2, speed: wide, after_long: None }];
        let (groups, notes) = device_groups(&noisy);
        assert_eq!(groups.iter().map(|g| g.servers.clone()).collect::<Vec<_>>(), vec![vec![0, 1], vec![2]]);
        assert!(notes.len() == 1 && notes[0].contains("not in every one"), "{notes:?}");
        // Still apart where the rounds after the long prompt reach the line too; one device
        // where they all stay below it (two servers on one machine's cores).
        let after = |median: f64, max: f64| Some(Figure { median, min: median - 0.03, max, samples: 6 });
        noisy.pairs[2].after_long = after(0.95, 1.1);
        assert_eq!(device_groups(&noisy).0.len(), 2);
        let mut cores = servers(2);
        let one_round_above = Figure { median: 0.80, min: 0.69, max: 0.92, samples: 6 };
        cores.pairs = vec![Pair { a: 0, b: 1, speed: one_round_above, after_long: after(0.85, 0.87) }];
        let (groups, notes) = device_groups(&cores);
        assert_eq!(groups.iter().map(|g| g.servers.clone()).collect::<Vec<_>>(), vec![vec![0, 1]], "{notes:?}");
        assert!(groups[0].after_long.is_some_and(|l| l.median == 0.85));
        // A twin of two written before pairs: every server at once decides.
        let mut old = servers(2);
        old.together = Some(fig(0.6));
        let (groups, _) = device_groups(&old);
        assert_eq!(groups.len(), 1);
        assert!((groups[0].efficiency() - 1.2).abs() < 1e-9);
        old.together = Some(fig(0.95));
        assert_eq!(device_groups(&old).0.len(), 2);
    }
}
