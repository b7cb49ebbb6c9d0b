//! What a gate expects of a report, and the judgement document that says whether it passed.

use super::decision::Verdict;
use super::report::Report;
use serde::{Deserialize, Serialize};

/// What a gate expects of a report: the client verdict, the client's share of the saving the
/// deployment allows, the speedup the deployment allows. Shared by `harness exec` and
/// `GET /sim/judge`, so both gates say the same thing in the same words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Expectations {
    /// The client verdict expected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Lowest client saving accepted (0-1); a client-parallel report on a deployment that
    /// allows no saving meets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_saving: Option<f64>,
    /// Lowest speedup the deployment must allow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_speedup: Option<f64>,
}

impl Expectations {
    /// Whether nothing is expected.
    pub fn is_empty(&self) -> bool {
        *self == Expectations::default()
    }

    /// Each expectation the report does not meet, in a sentence with the report's reason.
    pub fn check(&self, report: &Report) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(v) = self.verdict {
            if v != report.verdict {
                out.push(format!("expected {v}, got {}: {}", report.verdict, report.reason));
            }
        }
        if let Some(min) = self.min_saving {
            match report.time.saving {
                Some(s) if s >= min => {}
                Some(s) => out.push(format!(
                    "saved {:.0}% of what the deployment allows, below the minimum {:.0}%: {}",
                    s * 100.0,
                    min * 100.0,
                    report.reason
                )),
                // Nothing to save on this deployment: the overlap decided the verdict.
                None if report.verdict == Verdict::Parallel => {}
                None => out.push(format!(
                    "no saving could be measured ({}), so the minimum {:.0}% is not met",
                    report.reason,
                    min * 100.0
                )),
            }
        }
        if let Some(min) = self.min_speedup {
            let d = &report.deployment;
            if !d.speedup.is_some_and(|x| x >= min) {
                out.push(format!(
                    "the deployment allows a speedup of {} where at least {min:.2}x is required: {}",
                    d.speedup.map_or("n/a".to_string(), |x| format!("{x:.2}x")),
                    d.reason
                ));
            }
        }
        out
    }
}

/// Version of the judgement document (`GET /sim/judge`; `harness exec --json` writes the same
/// document with the command's fields added).
pub const JUDGEMENT_SCHEMA_VERSION: u32 = 2;

/// The judgement document: the report, what was expected of it, and whether it passed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// [`JUDGEMENT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The simulator's master seed.
    pub seed: u64,
    /// The first trace id judged (the mark), when there was one.
    pub since: Option<u64>,
    /// What was expected.
    pub expectations: Expectations,
    /// Whether every expectation was met (true when none was given).
    pub passed: bool,
    /// The expectations not met, in words.
    pub failures: Vec<String>,
    /// The judge's report.
    pub report: Report,
}
