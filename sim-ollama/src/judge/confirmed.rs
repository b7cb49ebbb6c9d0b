//! A confirmation run: one more run of a program whose verdict rests on waits a probe run
//! found, repeating the run that a pause of the whole process would explain.
//!
//! A probe run compares each gap between an agent's calls with the same gap measured with the
//! agents' local work done one at a time. A pause of the whole process (a full garbage
//! collection over a large heap; a machine starving the program of CPU) stretches every gap
//! open at that moment: in the run judged it reads as agents waiting for each other's work, in
//! the probe run as an agent waiting for an answer the probe held. Its shape cannot be told
//! from agents taking turns (both stretch the gaps that were open together, and a permit of `k`
//! explains most stretches), but it does not recur where it was, and agents taking turns do.
//! So the run the waits would blame is run once more ([`ConfirmRun`]: the run judged where a
//! probed gap was shorter, the probe run where one outlasted its twin), the other pair is
//! judged, and the verdict closer to parallel is kept: waits that do not recur are not the
//! program's, and waits that do are confirmed (an inconclusive confirmation that found them
//! again, at least half as long, leaves the first verdict standing; a confirmation that found
//! them again and measured them decides a first pair that could not).

use super::decision::Verdict;
use super::input::{ConfirmRun, Confirmation, JudgeOptions, Windows};
use super::report::{ConfirmationReport, GapsStatus, KeptPair, Report};
use crate::trace::TraceSnapshot;

/// What [`Report::confirm`] says, from the rest of the report, where no confirmation ran yet
/// (`judge` asks it only then): a probed verdict short of parallel with waits found. Where a gap of the probe run outlasted its first-run length
/// (a wait whose own work the probe could not measure), the probe run is repeated; else
/// the run judged.
pub(super) fn wanted(report: &Report) -> Option<ConfirmRun> {
    let g = report.gaps.as_ref().filter(|g| g.status == GapsStatus::Probed && !g.waits.is_empty())?;
    if report.verdict == Verdict::Parallel {
        return None;
    }
    Some(if g.waits.iter().any(|w| w.own_s.is_none()) { ConfirmRun::Probe } else { ConfirmRun::Plain })
}

/// How close to parallel a verdict is: where two pairs of runs disagree, the one closer to
/// parallel is kept (an inconclusive pair says the other's waits may not be the program's).
fn rank(v: Verdict) -> u8 {
    match v {
        Verdict::Parallel => 4,
        Verdict::Inconclusive => 3,
        Verdict::PartlySerialized => 2,
        Verdict::Serialized => 1,
        Verdict::Failed => 0,
    }
}

/// The two pairs' options: the run judged with the first probe run, and the pair with the
/// confirmation in the place of the run it repeats.
fn pairs(opts: &JudgeOptions, probe_since: u64, c: &Confirmation) -> (JudgeOptions, JudgeOptions) {
    let mut first = opts.clone();
    first.confirmation = None;
    first.windows = Some(Windows { first: (opts.since, Some(probe_since)), probe: Some((probe_since, Some(c.since))) });
    let mut again = first.clone();
    again.windows = Some(match c.run {
        ConfirmRun::Plain => Windows { first: (Some(c.since), None), probe: Some((probe_since, Some(c.since))) },
        ConfirmRun::Probe => Windows { first: (opts.since, Some(probe_since)), probe: Some((c.since, None)) },
    });
    (first, again)
}

/// Judges a program with its probe run and a confirmation run; `judged` judges one pair.
pub(super) fn judge(
    trace: &TraceSnapshot,
    opts: &JudgeOptions,
    c: &Confirmation,
    judged: impl Fn(&TraceSnapshot, &JudgeOptions) -> Report,
) -> Report {
    let Some(probe_since) = opts.probe_since else {
        // Nothing to confirm without a probe run: the program as judged alone.
        let mut alone = opts.clone();
        alone.confirmation = None;
        let mut report = judged(trace, &alone);
        report.notes.push("a confirmation run was given without a probe run: not used".to_string());
        return report;
    };
    let (first_opts, again_opts) = pairs(opts, probe_since, c);
    let mut first = judged(trace, &first_opts);
    let repeated = match c.run {
        ConfirmRun::Plain => "the program ran a third time, as the run judged",
        ConfirmRun::Probe => "the program ran a third time, as a probe run",
    };
    if let Some(why) = &c.void {
        first.notes.push(format!("a confirmation run ({repeated}) is void: {why}; the verdict rests on one probe run"));
        first.confirmation = Some(ConfirmationReport {
            run: c.run,
            first: first.verdict,
            again: None,
            waits_recurred: false,
            kept: KeptPair::First,
            void: Some(why.clone()),
        });
        return first;
    }
    let again = judged(trace, &again_opts);
    let waits = |r: &Report| {
        r.gaps.as_ref().map_or(0.0, |g| g.waits.iter().map(|w| w.gap_s - w.own_s.unwrap_or(0.0)).sum::<f64>())
    };
    let (waited_first, waited_again) = (waits(&first), waits(&again));
    let recurred = waited_again > 0.0;
    // Waits found again, at least half as long, are the program's (a pause does not recur where
    // it was): a confirmation pair that cannot decide does not set them aside. (A pair that
    // reads parallel is kept: what it found again cost nothing.)
    let confirmed = waited_first > 0.0 && waited_again >= waited_first / 2.0;
    let undecided = again.verdict == Verdict::Inconclusive && confirmed;
    // And a first pair that could not decide, whose waits the confirmation found again and
    // measured: the confirmation's verdict stands.
    let decided = first.verdict == Verdict::Inconclusive
        && confirmed
        && matches!(again.verdict, Verdict::PartlySerialized | Verdict::Serialized);
    let keep_again = (rank(again.verdict) > rank(first.verdict) && !undecided) || decided;
    let summary = ConfirmationReport {
        run: c.run,
        first: first.verdict,
        again: Some(again.verdict),
        waits_recurred: recurred,
        kept: if keep_again { KeptPair::Again } else { KeptPair::First },
        void: None,
    };
    let read = |v: Verdict| v.as_str().replace('_', " ");
    if keep_again {
        let mut report = again;
        let note = if decided {
            format!(
                "the first pair of runs read inconclusive (the probe found the agents waiting {waited_first:.2} s for each other between their calls, their own work not all measured); a confirmation run ({repeated}) found them waiting {waited_again:.2} s again and read {}: waits that recur are the program's, so its verdict stands, the deployment verdict the first run's",
                read(report.verdict),
            )
        } else {
            let (which, figures) = match c.run {
                ConfirmRun::Plain => ("the run judged", "the time figures are the confirmation run's"),
                ConfirmRun::Probe => ("the probe run", "the gaps are as the second probe run measured them"),
            };
            let found = if waited_first > 0.0 {
                format!(" (the probe found the agents waiting {waited_first:.2} s for each other between their calls)")
            } else {
                String::new()
            };
            format!(
                "the first pair of runs read {}{found}; a confirmation run ({repeated}) read {}{}: what stretched the gaps in {which} did not recur, as a pause of the whole process does not (a garbage collection over a large heap, a machine starving the program of CPU), so it is not counted: {figures}, the deployment verdict the first run's",
                read(first.verdict),
                read(report.verdict),
                if recurred { format!(", with {waited_again:.2} s of such waiting") } else { String::new() },
            )
        };
        report.notes.push(note);
        // What the deployment allows is the program's first run's (its model loads included),
        // whichever pair's client verdict stands.
        report.deployment = first.deployment;
        report.confirmation = Some(summary);
        report
    } else {
        first.notes.push(format!(
            "a confirmation run ({repeated}) read {}{}: the verdict stands",
            read(again.verdict),
            if recurred {
                format!(", the agents waiting {waited_again:.2} s for each other again")
            } else {
                String::new()
            },
        ));
        first.confirmation = Some(summary);
        first
    }
}

#[cfg(test)]
mod tests;
