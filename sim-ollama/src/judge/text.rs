//! The report in words, as `harness exec` prints it and a failed assertion shows it.

use super::figures::{pct, plural};
use super::report::{AgentSource, Cause, GapsReport, GapsStatus, Report};
use std::fmt;

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.time;
        let c = &self.concurrency;
        writeln!(f, "{}: {}", self.verdict, self.reason)?;
        writeln!(f, "  deployment: {}: {}", self.deployment.verdict, self.deployment.reason)?;
        writeln!(
            f,
            "  requests: {} ran ({} failed); agents: {} ({})",
            self.requests,
            self.failed,
            self.agents.len(),
            self.agents_from.words()
        )?;
        for a in &self.agents {
            writeln!(
                f,
                "    {:<24} {}, {} tokens, solo {:.3} s + local {:.3} s, active {:.3}-{:.3} s{}",
                a.agent,
                plural(a.requests, "request", "requests"),
                a.tokens,
                a.solo_s,
                a.local_s,
                a.span_s.0,
                a.span_s.1,
                if a.handoffs > 0 { format!(", {} right after another agent's", a.handoffs) } else { String::new() }
            )?;
        }
        let possible = c.possible.map_or(String::new(), |p| format!(" of {p} possible"));
        writeln!(
            f,
            "  concurrency: max {} in flight{possible} (max {} decoding); {} of the busy time with 2+ in flight; {} connection(s)",
            c.max_in_flight,
            c.max_decoding,
            pct(c.overlap),
            c.connections
        )?;
        writeln!(
            f,
            "  time (seconds of wall time at time scale {}; modelled seconds = these / {}):",
            t.time_scale, t.time_scale
        )?;
        writeln!(f, "    took           {:>8.3} s  measured, first request to last answer", t.took_s)?;
        writeln!(
            f,
            "    one at a time  {:>8.3} s  modelled solo costs {:.3} s + local work {:.3} s (measured) + loads {:.3} s (modelled)",
            t.sequential_s, t.solo_s, t.local_s, t.load_s
        )?;
        let longest = self
            .agents
            .iter()
            .max_by(|a, b| a.chain_s.total_cmp(&b.chain_s))
            .map_or(String::new(), |a| format!(" (longest: {})", a.agent));
        let ideal_words = if self.agents_from == AgentSource::Program {
            "the program's lower bound: its longest request or conversation, or its work spread over the agents, + idle time + loads".to_string()
        } else {
            format!("the longest agent's chain + loads{longest}")
        };
        writeln!(f, "    ideal          {:>8.3} s  {ideal_words}", t.ideal_s)?;
        writeln!(
            f,
            "    allowed        {:>8.3} s  a perfectly concurrent client on this deployment (its slots and devices replayed) + loads",
            t.allowed_s
        )?;
        match t.saving {
            Some(s) => writeln!(
                f,
                "    saved          {:>8}    of the {:.3} s the deployment allows to save ({:.3} s lost)",
                pct(s.max(-9.99)),
                (t.sequential_s - t.allowed_s).max(0.0),
                (t.took_s - t.allowed_s).max(0.0)
            )?,
            None => writeln!(f, "    saved          n/a        the deployment allows nothing to save")?,
        }
        if let Some(l) = t.client_lag_s {
            writeln!(f, "    client lag     {:>8.3} s  median, server's last byte to the client's (measured)", l)?;
        }
        writeln!(
            f,
            "  waits: {:.3} s for parallel slots, {:.3} s for loads; idle {:.3} s (longest gap {:.3} s); decode speed {} of solo",
            c.slot_wait_s,
            c.load_wait_s,
            c.idle_s,
            c.longest_gap_s,
            pct(c.mean_speed)
        )?;
        let shown: Vec<String> = c.profile.iter().take(40).map(|(t, n)| format!("{t:.3}s:{n}")).collect();
        let more = if c.profile.len() > 40 { format!(" ... ({} changes)", c.profile.len()) } else { String::new() };
        writeln!(f, "  in flight over time: {}{more}", shown.join(" "))?;
        // What a probe run found of the gaps between calls (or why it is void), where the
        // reason above does not already say it.
        let probed = |g: &&GapsReport| matches!(g.status, GapsStatus::Probed | GapsStatus::Void);
        let said = matches!(self.cause, Cause::BetweenCalls | Cause::UnprobedGaps);
        if let Some(g) = self.gaps.as_ref().filter(probed).filter(|g| !said && !self.reason.contains(&g.reason)) {
            writeln!(f, "  between calls: {}", g.reason)?;
        }
        for n in &self.notes {
            writeln!(f, "  note: {n}")?;
        }
        Ok(())
    }
}
