//! The waits a probe run found between the agents' calls, in figures and in words: how many
//! agents' local work ran at once where they waited ([`at_once`]), how long they waited for it
//! ([`local_waits`]), and what each kind of wait says ([`waits_in_words`]). The probe's
//! reading that finds them is `probed.rs`.

use super::agents::Links;
use super::input::Req;
use super::report::{GapWait, WaitKind};

/// How many agents' local work ran at once at most, where agents waited for it: over each
/// cluster of gaps that overlap in time (the run judged), the agents' own work (as the probe
/// measured it) over the time the cluster spans; one at a time fills it once, `k` at a time up
/// to `k` times. `(k, agents in that cluster)` for the cluster whose gaps held the most waiting.
pub(super) fn at_once(reqs: &[Req<'_>], links: &Links, own_most: &[u64]) -> (usize, usize) {
    let gaps: Vec<(u64, u64, usize)> = (0..reqs.len())
        .filter_map(|i| {
            let p = links.from[i]?;
            let (a, b) = (reqs[p].end, reqs[i].start);
            (b > a).then_some((a, b, i))
        })
        .collect();
    let mut best = (0u64, 1usize, 1usize);
    for (start, end, members) in super::figures::clusters(gaps) {
        let own: u64 = members.iter().map(|&i| own_most[i]).sum();
        let waited: u64 = members.iter().map(|&i| links.local[i].saturating_sub(own_most[i])).sum();
        let mut agents: Vec<usize> = members.iter().map(|&i| reqs[i].group).collect();
        agents.sort_unstable();
        agents.dedup();
        let ratio = own as f64 / (end - start).max(1) as f64;
        let at_once = ((ratio - 0.15).ceil() as usize).max(1);
        if waited > best.0 {
            best = (waited, at_once, agents.len());
        }
    }
    (best.1, best.2)
}

/// How long the agents waited for other agents' local work between their calls, s.
pub(super) fn local_waits(waits: &[GapWait]) -> f64 {
    waited(waits, WaitKind::LocalWork)
}

/// Whether agents that waited `waited_us` in all for each other's work waited longer than their
/// processing taking turns on a shared executor could explain: each µs the client ran on a CPU
/// holds at most the `others` agents waiting, and each µs its threads waited for a CPU one
/// (`cpu_us`: ran, waited, [`super::input::JudgeOptions::client_cpu_time`]). Unknown figures
/// explain anything.
pub(super) fn beyond_cpu(waited_us: u64, others: usize, cpu_us: Option<(u64, u64)>) -> bool {
    cpu_us.is_some_and(|(ran, starved)| waited_us > others as u64 * ran + starved)
}

/// How long the agents waited for other agents' work between their calls, s: at their local
/// work and at barriers.
pub(super) fn others_work(waits: &[GapWait]) -> f64 {
    waited(waits, WaitKind::LocalWork) + waited(waits, WaitKind::Barrier)
}

/// How long the agents waited in the waits of one kind, s: each gap less the agent's own work
/// in it (all of it where the probe could not measure that).
fn waited(waits: &[GapWait], kind: WaitKind) -> f64 {
    waits.iter().filter(|w| w.kind == kind).map(|w| w.gap_s - w.own_s.unwrap_or(0.0)).sum()
}

/// The waits a probe found, in words: which agents waited for what, and how long in all.
/// `(k, n)`: at most `k` of the `n` agents' local work ran at once where they waited.
pub(super) fn waits_in_words(waits: &[GapWait], (k, n): (usize, usize)) -> (String, f64) {
    let mut parts = Vec::new();
    let mut total = 0.0;
    let agents_of = |kind: WaitKind| {
        let mut names: Vec<&str> = waits.iter().filter(|w| w.kind == kind).map(|w| w.agent.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.join(", ")
    };
    let local = local_waits(waits);
    if local > 0.0 {
        total += local;
        let how = if k <= 1 {
            ": their local work ran one agent at a time: a blocking call or CPU work holding the executor (time.sleep, a sync client or a CPU-heavy step inside async code; execSync or a busy loop in Node; std::thread::sleep or blocking I/O on an async runtime), or a lock held around the tools".to_string()
        } else if k < n {
            format!(
                ": at most {k} of {n} agents' local work ran at a time: a permit around the tools (a semaphore of {k}, or a pool of {k} workers)"
            )
        } else {
            String::new()
        };
        parts.push(format!(
            "{} waited {:.2} s in all for other agents' work between their calls{how}",
            agents_of(WaitKind::LocalWork),
            local
        ));
    }
    let barrier = waited(waits, WaitKind::Barrier);
    if barrier > 0.0 {
        total += barrier;
        parts.push(format!(
            "{} waited for each other between their calls and sent their next calls together, with no data passed between them: a barrier (a gather per round?), up to {:.2} s of waiting",
            agents_of(WaitKind::Barrier),
            barrier
        ));
    }
    // The probe measured none of these gaps' own work: the whole gap.
    let answer = waited(waits, WaitKind::Answer);
    if answer > 0.0 {
        total += answer;
        parts.push(format!(
            "{} waited for other agents' answers without carrying them (data passed in a form the judge does not recognise, or a wait with no data behind it), up to {:.2} s",
            agents_of(WaitKind::Answer),
            answer
        ));
    }
    (parts.join("; "), total)
}
