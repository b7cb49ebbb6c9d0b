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
    /// A store holding the whole catalogue, newest first in catalogue order.
    pub(crate) fn new(registry: Arc<Vec<Arc<ModelSpec>>>, base_time: SystemTime) -> Self {
        let mut models = BTreeMap::new();
        for (i, spec) in registry.iter().enumerate() {
            if let Some(name) = Name::parse(&spec.name) {
                let modified_at = base_time - Duration::from_secs(86_400 * (i as u64 + 1));
                models.insert(name.key(), Installed { name, spec: Arc::clone(spec), modified_at });
            }
        }
        Store { models: RwLock::new(models), registry }
    }

    pub(crate) fn get(&self, name: &Name) -> Option<Installed> {
        self.models.read().unwrap_or_else(|e| e.into_inner()).get(&name.key()).cloned()
    }

    /// Installed models, newest first.
    pub(crate) fn list(&self) -> Vec<Installed> {
        let mut v: Vec<Installed> = self.models.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        v.sort_by(|a, b| b.modified_at.cmp(&a.modified_at).then_with(|| a.name.key().cmp(&b.name.key())));
        v
    }

    /// The catalogue entry a pull of `name` fetches.
    pub(crate) fn registry_entry(&self, name: &Name) -> Option<Arc<ModelSpec>> {
        self.registry.iter().find(|m| Name::parse(&m.name).is_some_and(|n| n.key() == name.key())).cloned()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_past_the_limit_are_refused_and_replacing_a_name_is_not() {
        let spec = Arc::new(crate::config::default_catalogue().remove(0));
        let store = Store::new(Arc::new(vec![Arc::clone(&spec)]), SystemTime::UNIX_EPOCH);
        let name = |i: usize| Name::parse(&format!("copy{i}:latest")).unwrap();
        for i in 1..MAX_MODELS {
            store.install(name(i), Arc::clone(&spec), SystemTime::UNIX_EPOCH).unwrap();
        }
        let e = store.install(name(MAX_MODELS), Arc::clone(&spec), SystemTime::UNIX_EPOCH).unwrap_err();
        assert!(e.contains("4096 models"), "{e}");
        store.install(name(1), spec, SystemTime::UNIX_EPOCH).expect("an installed name can be replaced");
    }
}
