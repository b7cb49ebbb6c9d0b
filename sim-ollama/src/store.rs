//! The models an instance has "on disk": the catalogue at start, changed by `/api/pull`,
//! `/api/copy` and `/api/delete`. Each instance has its own store, as separate servers do.

use crate::config::ModelSpec;
use crate::names::Name;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

/// Most models one instance holds (catalogue, pulls and copies together).
pub(crate) const MAX_MODELS: usize = 4096;

/// One installed model.
#[derive(Debug, Clone)]
pub(crate) struct Installed {
    pub(crate) name: Name,
    pub(crate) spec: Arc<ModelSpec>,
    pub(crate) modified_at: SystemTime,
}

#[derive(Debug)]
pub(crate) struct Store {
    models: RwLock<BTreeMap<String, Installed>>,
    /// What `/api/pull` can fetch: the configured catalogue.
    registry: Arc<Vec<Arc<ModelSpec>>>,
    /// The catalogue model that answers for names the catalogue lacks (`stand_in`), if any.
    stand_in: Option<Arc<ModelSpec>>,
    clock: crate::clock::Clock,
}

impl Installed {
    /// What the scheduler knows a runner by: its weights, as the real `schedulerModelKey`
    /// (server/sched.go v0.33.0-rc2 107-127) keys runners by the GGUF file's path. A copy
    /// (`/api/copy`) installs the same weights under another name, so the two names share one
    /// runner and its slots.
    pub(crate) fn runner_key(&self) -> String {
        format!("weights:{}", self.spec.digest())
    }
}

impl Store {
    /// A store holding the whole catalogue, newest first in catalogue order, with names it
    /// lacks answered by copies of `stand_in` (see [`Store::get`]).
    pub(crate) fn new(
        registry: Arc<Vec<Arc<ModelSpec>>>,
        base_time: SystemTime,
        stand_in: Option<Arc<ModelSpec>>,
        clock: crate::clock::Clock,
    ) -> Self {
        let mut models = BTreeMap::new();
        for (i, spec) in registry.iter().enumerate() {
            if let Some(name) = Name::parse(&spec.name) {
                let modified_at = base_time - Duration::from_secs(86_400 * (i as u64 + 1));
                models.insert(name.key(), Installed { name, spec: Arc::clone(spec), modified_at });
            }
        }
        Store { models: RwLock::new(models), registry, stand_in, clock }
    }

    /// The model installed under `name`. With a stand-in configured, a name that is not
    /// installed and not in the catalogue is installed first, as if pulled: a copy of the
    /// stand-in under that name (see [`stand_in_copy`]). A deleted catalogue model stays
    /// deleted, as on a real server, until pulled again.
    pub(crate) fn get(&self, name: &Name) -> Option<Installed> {
        if let Some(m) = self.installed(name) {
            return Some(m);
        }
        if self.in_catalogue(name) {
            return None;
        }
        let spec = self.stand_in_spec(name)?;
        let at = self.clock.now();
        // A copy that cannot be installed (the store is full) is not served either.
        self.install(name.clone(), spec, at).ok()?;
        tracing::info!(target: "sim_ollama", model = %name.display(), "serving a name the catalogue lacks as a copy of the stand-in");
        self.installed(name)
    }

    /// The model installed under `name`, stand-in or not.
    pub(crate) fn installed(&self, name: &Name) -> Option<Installed> {
        self.models.read().unwrap_or_else(|e| e.into_inner()).get(&name.key()).cloned()
    }

    fn in_catalogue(&self, name: &Name) -> bool {
        self.registry.iter().any(|m| Name::parse(&m.name).is_some_and(|n| n.key() == name.key()))
    }

    fn stand_in_spec(&self, name: &Name) -> Option<Arc<ModelSpec>> {
        self.stand_in.as_deref().map(|s| Arc::new(stand_in_copy(s, &name.display())))
    }

    /// Installed models, newest first.
    pub(crate) fn list(&self) -> Vec<Installed> {
        let mut v: Vec<Installed> = self.models.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        v.sort_by(|a, b| b.modified_at.cmp(&a.modified_at).then_with(|| a.name.key().cmp(&b.name.key())));
        v
    }

    /// The catalogue entry a pull of `name` fetches: with a stand-in configured, a name the
    /// catalogue lacks fetches a copy of the stand-in.
    pub(crate) fn registry_entry(&self, name: &Name) -> Option<Arc<ModelSpec>> {
        self.registry
            .iter()
            .find(|m| Name::parse(&m.name).is_some_and(|n| n.key() == name.key()))
            .cloned()
            .or_else(|| self.stand_in_spec(name))
    }

    /// Installs (or replaces) a model. Refused past [`MAX_MODELS`] distinct names, so a
    /// client copying models in a loop cannot grow a long-running simulator without bound.
    pub(crate) fn install(&self, name: Name, spec: Arc<ModelSpec>, at: SystemTime) -> Result<(), String> {
        let mut models = self.models.write().unwrap_or_else(|e| e.into_inner());
        if models.len() >= MAX_MODELS && !models.contains_key(&name.key()) {
            return Err(format!(
                "sim-ollama: cannot install {}: {MAX_MODELS} models are installed, the simulator's limit (delete some first)",
                name.display()
            ));
        }
        models.insert(name.key(), Installed { name, spec, modified_at: at });
        Ok(())
    }

    pub(crate) fn remove(&self, name: &Name) -> bool {
        self.models.write().unwrap_or_else(|e| e.into_inner()).remove(&name.key()).is_some()
    }
}

/// The stand-in's copy under the name a client asked for: its own weights (a digest of its own
/// name, so each name is its own runner, loaded, kept and evicted as a different model is),
/// the stand-in's metadata and latency profile, and the `embedding` capability added to what
/// the stand-in has: the simulator cannot know whether the name is a chat or an embedding
/// model, so the copy answers both (`/api/embed` vectors as wide as the stand-in's
/// `embedding_length`).
pub(crate) fn stand_in_copy(stand_in: &ModelSpec, name: &str) -> ModelSpec {
    let mut spec = stand_in.clone();
    spec.name = name.to_string();
    spec.digest = None;
    if !spec.has("embedding") {
        spec.capabilities.push("embedding".into());
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_past_the_limit_are_refused_and_replacing_a_name_is_not() {
        let spec = Arc::new(crate::config::default_catalogue().remove(0));
        let store = Store::new(Arc::new(vec![Arc::clone(&spec)]), SystemTime::UNIX_EPOCH, None, clock());
        let name = |i: usize| Name::parse(&format!("copy{i}:latest")).unwrap();
        for i in 1..MAX_MODELS {
            store.install(name(i), Arc::clone(&spec), SystemTime::UNIX_EPOCH).unwrap();
        }
        let e = store.install(name(MAX_MODELS), Arc::clone(&spec), SystemTime::UNIX_EPOCH).unwrap_err();
        assert!(e.contains("4096 models"), "{e}");
        store.install(name(1), spec, SystemTime::UNIX_EPOCH).expect("an installed name can be replaced");
    }

    fn clock() -> crate::clock::Clock {
        crate::clock::Clock::new(true)
    }

    fn catalogue() -> Arc<Vec<Arc<ModelSpec>>> {
        Arc::new(crate::config::default_catalogue().into_iter().map(Arc::new).collect())
    }

    fn key(s: &str) -> Name {
        Name::parse(s).unwrap()
    }

    #[test]
    fn without_a_stand_in_a_name_the_catalogue_lacks_is_not_found() {
        let store = Store::new(catalogue(), SystemTime::UNIX_EPOCH, None, clock());
        assert!(store.get(&key("mistral:7b")).is_none());
        assert!(store.registry_entry(&key("mistral:7b")).is_none());
        assert!(store.get(&key("llama3.2:1b")).is_some());
    }

    #[test]
    fn a_stand_in_answers_for_names_the_catalogue_lacks_as_their_own_models() {
        let reg = catalogue();
        let stand_in = reg.iter().find(|m| m.name == "llama3.2:1b").cloned();
        let store = Store::new(Arc::clone(&reg), SystemTime::UNIX_EPOCH, stand_in.clone(), clock());
        let before = store.list().len();
        let m = store.get(&key("mistral")).expect("served by the stand-in");
        assert_eq!(m.name.display(), "mistral:latest");
        assert_eq!(m.spec.name, "mistral:latest");
        let s = stand_in.unwrap();
        assert_eq!((m.spec.context_length, m.spec.family.as_str()), (s.context_length, s.family.as_str()));
        assert!(
            m.spec.has("completion") && m.spec.has("tools") && m.spec.has("embedding"),
            "{:?}",
            m.spec.capabilities
        );
        // Its own weights: another runner than the stand-in's and than another copy's.
        let other = store.get(&key("phi4")).unwrap();
        assert_ne!(m.runner_key(), other.runner_key());
        assert_ne!(m.runner_key(), format!("weights:{}", s.digest()));
        // Installed as a pull installs, so listed from then on, and the same copy next time.
        assert_eq!(store.list().len(), before + 2);
        assert_eq!(store.get(&key("MISTRAL:latest")).unwrap().runner_key(), m.runner_key());
        // A deleted catalogue model stays deleted; a name the catalogue has is its own model.
        assert!(store.remove(&key("gemma3")));
        assert!(store.get(&key("gemma3")).is_none());
        assert_eq!(store.get(&key("qwen3:0.6b")).unwrap().spec.capabilities, ["completion", "tools", "thinking"]);
        assert!(store.registry_entry(&key("deepseek-r1:8b")).is_some_and(|e| e.name == "deepseek-r1:8b"));
    }
}
