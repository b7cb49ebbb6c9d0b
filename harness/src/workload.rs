//! Workloads and scenarios: an agent is a sequence of LLM calls with local work between
//! them; a scenario assigns agents to instances of a deployment (a simulator preset). Written
//! in TOML in `harness/scenarios/`; the built-in ones are compiled in.

use serde::{Deserialize, Serialize};
use sim_ollama::advanced::config::ConfigFile;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// One LLM call of an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// `/api/generate` or `/api/chat`.
    #[serde(default = "default_endpoint")]
    pub endpoint: String,
    /// The prompt (the user message for chat).
    pub prompt: String,
    /// Expected output length; sent as `num_predict` so runs are comparable.
    pub tokens: u32,
    /// Other Ollama options (`num_gpu`, `num_ctx`, `temperature`, ...).
    #[serde(default)]
    pub options: serde_json::Map<String, serde_json::Value>,
    /// The model this call asks for, when not the scenario's (agents on different models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Local work after the call, milliseconds of modelled time (scaled like the simulator).
    #[serde(default)]
    pub local_work_ms: f64,
    /// A tool round trip (chat only): the call offers a tool ([`tool`]); when the model calls
    /// it, the agent runs the tool for this long (modelled milliseconds, scaled), sends the
    /// result back with the history, and the model's answer to that is `tokens` long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_work_ms: Option<f64>,
}

/// The tool a call with `tool_work_ms` offers.
pub fn tool() -> serde_json::Value {
    serde_json::json!({"type": "function", "function": {
        "name": "search_knowledge_base",
        "description": "Search the team's knowledge base",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10}
        }, "required": ["query"]}
    }})
}

fn default_endpoint() -> String {
    "/api/generate".into()
}

/// An agent: calls made one after the other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// Name (with `count` > 1, agents are named `name-1`, `name-2`, ...).
    pub name: String,
    /// Instance index; absent = round-robin over the deployment's instances.
    #[serde(default)]
    pub instance: Option<usize>,
    /// How many identical agents.
    #[serde(default = "one")]
    pub count: usize,
    /// A multi-turn agent: its `/api/chat` calls are one conversation whose history grows
    /// call by call. Each call sends the system prompt, every earlier prompt with the answer
    /// it got, and its own prompt, as an agent loop resends its history.
    #[serde(default)]
    pub history: bool,
    /// The system prompt of a multi-turn agent's conversation (its instructions, documents).
    /// Every run's conversation is a new one: the harness opens it with a line of its own, so a
    /// server's prompt cache never carries one run's history into the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The calls.
    pub calls: Vec<Call>,
}

fn one() -> usize {
    1
}

/// A scenario: a deployment and the agents that run on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name used on the command line and in reports.
    pub name: String,
    /// What it shows, in a sentence.
    #[serde(default)]
    pub description: String,
    /// Simulator preset (`sim-ollama/fixtures/presets/`) of the deployment.
    pub preset: String,
    /// Model every call uses.
    #[serde(default = "default_model")]
    pub model: String,
    /// Time scale for the embedded simulator when the command line gives none.
    #[serde(default)]
    pub time_scale: Option<f64>,
    /// Tags for selecting scenarios (`study`, `deployment`, `scaling`, `ci`, ...).
    #[serde(default)]
    pub tags: Vec<String>,
    /// The agents.
    pub agents: Vec<AgentSpec>,
    /// The preset's deployment, read once for every question asked of it.
    #[serde(skip)]
    deployment: PresetCache,
}

/// A scenario's preset, parsed on first use and kept with the name it was parsed for (the
/// `preset` field is public: a changed name is parsed again). Not part of the scenario's value:
/// two scenarios equal in their fields are equal whatever either has read.
#[derive(Debug, Default)]
struct PresetCache(Mutex<Option<(String, Option<Arc<ConfigFile>>)>>);

impl PresetCache {
    fn get(&self, name: &str) -> Option<Arc<ConfigFile>> {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match &*g {
            Some((n, file)) if n == name => file.clone(),
            _ => {
                let file = sim_ollama::advanced::config::preset(name).ok().map(Arc::new);
                *g = Some((name.to_string(), file.clone()));
                file
            }
        }
    }
}

impl Clone for PresetCache {
    fn clone(&self) -> Self {
        PresetCache(Mutex::new(self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()))
    }
}

impl PartialEq for PresetCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

fn default_model() -> String {
    "gemma3:latest".into()
}

/// An agent as it runs: its own name and instance, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentPlan {
    /// Unique name in the run.
    pub name: String,
    /// Instance index.
    pub instance: usize,
    /// Whether its chat calls are one growing conversation ([`AgentSpec::history`]).
    pub history: bool,
    /// Its conversation's system prompt.
    pub system: Option<String>,
    /// The calls.
    pub calls: Vec<Call>,
}

/// Errors reading scenarios.
#[derive(Debug)]
#[non_exhaustive]
pub enum WorkloadError {
    /// TOML error, with the file.
    Parse(String),
    /// A value is wrong, with a reason.
    Invalid(String),
    /// No scenario of that name.
    Unknown(String),
}

impl std::fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkloadError::Parse(e) => write!(f, "harness scenario: {e}"),
            WorkloadError::Invalid(e) => write!(f, "harness scenario: {e}"),
            WorkloadError::Unknown(e) => write!(f, "harness: unknown scenario {e}"),
        }
    }
}

impl std::error::Error for WorkloadError {}

impl Scenario {
    /// Parses a scenario.
    pub fn from_toml(text: &str) -> Result<Scenario, WorkloadError> {
        let s: Scenario = toml::from_str(text).map_err(|e| WorkloadError::Parse(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    fn validate(&self) -> Result<(), WorkloadError> {
        let bad = |m: String| Err(WorkloadError::Invalid(format!("{}: {m}", self.name)));
        if self.agents.is_empty() {
            return bad("no agents".into());
        }
        for a in &self.agents {
            if a.calls.is_empty() || a.count == 0 {
                return bad(format!("agent {} has no calls or count 0", a.name));
            }
            if a.history && a.calls.iter().any(|c| c.endpoint != "/api/chat" || c.tool_work_ms.is_some()) {
                return bad(format!("agent {}: history needs /api/chat calls without tool_work_ms", a.name));
            }
            if a.system.is_some() && !a.history {
                return bad(format!("agent {}: a system prompt needs history = true", a.name));
            }
            for c in &a.calls {
                if c.endpoint != "/api/generate" && c.endpoint != "/api/chat" {
                    return bad(format!(
                        "agent {}: endpoint must be /api/generate or /api/chat, got {}",
                        a.name, c.endpoint
                    ));
                }
                if let Some(t) = c.tool_work_ms {
                    if c.endpoint != "/api/chat" || !(t.is_finite() && (0.0..=3_600_000.0).contains(&t)) {
                        return bad(format!(
                            "agent {}: tool_work_ms needs endpoint /api/chat and a value between 0 and an hour",
                            a.name
                        ));
                    }
                }
                if c.tokens == 0 || !(c.local_work_ms.is_finite() && (0.0..=3_600_000.0).contains(&c.local_work_ms)) {
                    return bad(format!(
                        "agent {}: tokens must be > 0 and local_work_ms between 0 and an hour",
                        a.name
                    ));
                }
            }
        }
        if self.deployment.get(&self.preset).is_none() {
            return bad(format!("unknown preset {:?}", self.preset));
        }
        for m in self.agents.iter().flat_map(|a| &a.calls).filter_map(|c| c.model.as_deref()) {
            if self.spec_of(m).is_none() {
                return bad(format!("model {m:?} is neither in preset {:?} nor in the catalogue", self.preset));
            }
        }
        Ok(())
    }

    /// The scenario's deployment: its preset, parsed once; `None` for an unknown preset (which
    /// a scenario read with [`Scenario::from_toml`] never has).
    pub fn deployment(&self) -> Option<Arc<ConfigFile>> {
        self.deployment.get(&self.preset)
    }

    /// Number of instances of the scenario's deployment.
    pub fn instances(&self) -> usize {
        self.deployment.get(&self.preset).map_or(1, |f| f.instances.len().max(1))
    }

    /// The agents as they run, with names made unique and instances resolved against
    /// `instances` endpoints.
    pub fn plan(&self, instances: usize) -> Vec<AgentPlan> {
        let mut out = Vec::new();
        let mut rr = 0usize;
        for a in &self.agents {
            for i in 0..a.count {
                let name = if a.count == 1 { a.name.clone() } else { format!("{}-{}", a.name, i + 1) };
                let instance = match a.instance {
                    Some(n) => n.min(instances.saturating_sub(1)),
                    None => {
                        rr += 1;
                        (rr - 1) % instances.max(1)
                    }
                };
                out.push(AgentPlan {
                    name,
                    instance,
                    history: a.history,
                    system: a.system.clone(),
                    calls: a.calls.clone(),
                });
            }
        }
        out
    }

    /// The scenario's model as the simulator models it: from the preset's models, else the
    /// default catalogue (`None` when neither has it).
    pub fn model_spec(&self) -> Option<sim_ollama::advanced::config::ModelSpec> {
        self.spec_of(&self.model)
    }

    /// A model as the simulator models it: from the preset's models, else the catalogue.
    fn spec_of(&self, model: &str) -> Option<sim_ollama::advanced::config::ModelSpec> {
        let want = if model.contains(':') { model.to_string() } else { format!("{model}:latest") };
        let preset = self.deployment.get(&self.preset);
        let mut models = preset.iter().flat_map(|f| f.models.iter()).cloned();
        models
            .find(|m| m.name == want)
            .or_else(|| sim_ollama::advanced::config::default_catalogue().into_iter().find(|m| m.name == want))
    }

    /// Multiplies every call's `tokens` by `factor` (rounded, at least 1): the same workload
    /// with longer or shorter answers (`--tokens-scale`).
    pub fn scale_tokens(&mut self, factor: f64) {
        if factor == 1.0 || !factor.is_finite() || factor <= 0.0 {
            return;
        }
        for c in self.agents.iter_mut().flat_map(|a| a.calls.iter_mut()) {
            c.tokens = ((f64::from(c.tokens) * factor).round().clamp(1.0, f64::from(u32::MAX))) as u32;
        }
    }

    /// Total agents.
    pub fn agent_count(&self) -> usize {
        self.agents.iter().map(|a| a.count).sum()
    }
}

/// The built-in scenarios, compiled in from `harness/scenarios/`.
pub(crate) const BUILTIN: &[&str] = &[
    include_str!("../scenarios/baseline_vs_chimera_gpu80_ctx512.toml"),
    include_str!("../scenarios/chimera_hetero_gpu80-100_ctx512-1024.toml"),
    include_str!("../scenarios/chimera_homo_gpu80_ctx512.toml"),
    include_str!("../scenarios/chimera_homo_gpu80_ctx1024.toml"),
    include_str!("../scenarios/chimera_homo_gpu80_ctx2048.toml"),
    include_str!("../scenarios/chimera_homo_gpu100_ctx512.toml"),
    include_str!("../scenarios/deploy_single_1slot.toml"),
    include_str!("../scenarios/deploy_single_4slots.toml"),
    include_str!("../scenarios/deploy_dual_one_device.toml"),
    include_str!("../scenarios/deploy_dual_two_devices.toml"),
    include_str!("../scenarios/deploy_mixed_three.toml"),
    include_str!("../scenarios/scale_2.toml"),
    include_str!("../scenarios/scale_4.toml"),
    include_str!("../scenarios/scale_8.toml"),
    include_str!("../scenarios/scale_16.toml"),
    include_str!("../scenarios/scale_32.toml"),
    include_str!("../scenarios/hetero_short_long.toml"),
    include_str!("../scenarios/tool_loops.toml"),
    include_str!("../scenarios/tools_between_calls.toml"),
    include_str!("../scenarios/history_1slot_shared.toml"),
    include_str!("../scenarios/history_1slot_shared_nocache.toml"),
    include_str!("../scenarios/history_slot_each.toml"),
    include_str!("../scenarios/pitfall_context_memory.toml"),
    include_str!("../scenarios/pitfall_default_one_slot.toml"),
    include_str!("../scenarios/pitfall_max_queue.toml"),
    include_str!("../scenarios/pitfall_models_evict.toml"),
    include_str!("../scenarios/pitfall_one_copy.toml"),
    include_str!("../scenarios/pitfall_one_slot_architecture.toml"),
    include_str!("../scenarios/pitfall_options_reload.toml"),
];

/// Every built-in scenario.
pub fn builtin() -> Vec<Scenario> {
    // The built-ins are parsed by a unit test, so a bad one cannot ship.
    BUILTIN.iter().filter_map(|t| Scenario::from_toml(t).ok()).collect()
}

/// Scenarios by name, tag (`tag:study`) or `all`, from the built-ins and an optional
/// directory of extra `*.toml` files.
pub fn select(names: &[String], dir: Option<&Path>) -> Result<Vec<Scenario>, WorkloadError> {
    let mut all = builtin();
    if let Some(d) = dir {
        let entries = std::fs::read_dir(d).map_err(|e| WorkloadError::Parse(format!("{}: {e}", d.display())))?;
        let mut paths: Vec<_> =
            entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect();
        paths.sort();
        for p in paths {
            let text =
                std::fs::read_to_string(&p).map_err(|e| WorkloadError::Parse(format!("{}: {e}", p.display())))?;
            let s = Scenario::from_toml(&text).map_err(|e| WorkloadError::Parse(format!("{}: {e}", p.display())))?;
            all.retain(|x| x.name != s.name);
            all.push(s);
        }
    }
    let mut out: Vec<Scenario> = Vec::new();
    for n in names {
        let picked: Vec<Scenario> = if n == "all" {
            all.clone()
        } else if let Some(tag) = n.strip_prefix("tag:") {
            all.iter().filter(|s| s.tags.iter().any(|t| t == tag)).cloned().collect()
        } else {
            all.iter().filter(|s| &s.name == n).cloned().collect()
        };
        if picked.is_empty() {
            let known: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
            return Err(WorkloadError::Unknown(format!("{n:?}; known: {}, or tag:NAME, or all", known.join(", "))));
        }
        for p in picked {
            if !out.iter().any(|x| x.name == p.name) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unrepresentable_local_work_is_refused_not_a_panic_later() {
        // Issue 10: `local_work_ms = inf` parsed, then panicked in Duration::from_secs_f64.
        for v in ["inf", "nan", "-1.0", "1e300"] {
            let t = format!(
                "name = \"x\"\npreset = \"ideal\"\n[[agents]]\nname = \"a\"\n[[agents.calls]]\nprompt = \"p\"\ntokens = 3\nlocal_work_ms = {v}\n"
            );
            let e = Scenario::from_toml(&t).expect_err(v).to_string();
            assert!(e.contains("local_work_ms"), "{v}: {e}");
        }
    }

    #[test]
    fn every_builtin_scenario_parses() {
        for t in BUILTIN {
            Scenario::from_toml(t).unwrap_or_else(|e| panic!("{e}\n{t}"));
        }
        assert_eq!(builtin().len(), BUILTIN.len());
        assert_eq!(select(&["tag:study".into()], None).unwrap().len(), 6);
    }

    #[test]
    fn agents_are_replicated_and_spread_round_robin() {
        let s = Scenario::from_toml(
            "name = \"x\"\npreset = \"dual-two-devices\"\n[[agents]]\nname = \"a\"\ncount = 3\n[[agents.calls]]\nprompt = \"p\"\ntokens = 5\n",
        )
        .unwrap();
        let p = s.plan(2);
        let got: Vec<(String, usize)> = p.iter().map(|a| (a.name.clone(), a.instance)).collect();
        assert_eq!(got, [("a-1".to_string(), 0), ("a-2".to_string(), 1), ("a-3".to_string(), 0)]);
    }

    #[test]
    fn tokens_scale_multiplies_every_call_and_keeps_at_least_one() {
        let mut s = Scenario::from_toml(
            "name = \"x\"\npreset = \"ideal\"\n[[agents]]\nname = \"a\"\n[[agents.calls]]\nprompt = \"p\"\ntokens = 300\n[[agents.calls]]\nprompt = \"q\"\ntokens = 1\n",
        )
        .unwrap();
        s.scale_tokens(10.0);
        assert_eq!(s.agents[0].calls.iter().map(|c| c.tokens).collect::<Vec<_>>(), [3000, 10]);
        s.scale_tokens(0.001);
        assert_eq!(s.agents[0].calls.iter().map(|c| c.tokens).collect::<Vec<_>>(), [3, 1]);
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let e = select(&["nope".into()], None).unwrap_err().to_string();
        assert!(e.contains("scale_8"), "{e}");
    }
}
