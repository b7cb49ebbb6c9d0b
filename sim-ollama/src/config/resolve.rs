//! The resolution: defaults, then the configuration file, then the builder's or command
//! line's overrides, into the [`SimConfig`] a simulator runs with, its invariants checked.

use super::file::*;
use crate::keepalive::KeepAlive;

/// The resolved configuration a simulator runs with. Defaults:
/// seed 0, time scale 1.0, real clock, one instance on its own device, `num_parallel` 1,
/// `max_queue` 512, `max_loaded_models` 3, keep-alive 5 min, body limit 32 MiB, trace budget
/// 256 MiB, version
/// `0.33.0-rc2` (the server the captures in `reference/real-ollama` came from), 2 worker threads, the default catalogue.
#[derive(Debug, Clone)]
pub(crate) struct SimConfig {
    pub(crate) seed: u64,
    pub(crate) time_scale: f64,
    pub(crate) frozen_clock: bool,
    pub(crate) models: Vec<ModelSpec>,
    pub(crate) devices: Vec<DeviceSpec>,
    /// One per instance, with every option resolved.
    pub(crate) instances: Vec<ResolvedInstance>,
    pub(crate) keep_alive: KeepAlive,
    pub(crate) body_limit: usize,
    pub(crate) version: String,
    pub(crate) worker_threads: usize,
    pub(crate) faults: Vec<crate::faults::FaultRule>,
    pub(crate) script: Vec<crate::script::ScriptRule>,
    pub(crate) trace_budget: usize,
    pub(crate) noise: crate::noise::NoiseSpec,
    /// The catalogue name (as the catalogue spells it) of the model that answers for names
    /// the catalogue lacks.
    pub(crate) stand_in: Option<String>,
}

/// An instance with its device index and limits resolved.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedInstance {
    pub(crate) device: usize,
    pub(crate) num_parallel: usize,
    pub(crate) max_queue: usize,
    pub(crate) max_loaded_models: usize,
    /// Host prompt cache per runner, bytes (0: off).
    pub(crate) cache_ram: u64,
}

/// Builder-level inputs before resolution.
#[derive(Debug, Clone, Default)]
pub(crate) struct RawConfig {
    pub(crate) file: ConfigFile,
    pub(crate) instances: Option<usize>,
    pub(crate) seed: Option<u64>,
    pub(crate) time_scale: Option<f64>,
    pub(crate) frozen_clock: Option<bool>,
    pub(crate) num_parallel: Option<usize>,
    pub(crate) max_queue: Option<usize>,
    pub(crate) max_loaded_models: Option<usize>,
    pub(crate) cache_ram_mib: Option<u64>,
    pub(crate) keep_alive: Option<KeepAlive>,
    pub(crate) body_limit: Option<usize>,
    pub(crate) extra_models: Vec<ModelSpec>,
    pub(crate) worker_threads: Option<usize>,
    pub(crate) faults: Vec<crate::faults::FaultRule>,
    pub(crate) script: Vec<crate::script::ScriptRule>,
    pub(crate) trace_budget_mb: Option<u64>,
    pub(crate) noise: Option<crate::noise::NoiseSpec>,
    pub(crate) stand_in: Option<String>,
}

impl RawConfig {
    /// Merges defaults, file, and explicit overrides (in that order) and checks invariants.
    pub(crate) fn resolve(self) -> Result<SimConfig, ConfigError> {
        let invalid = ConfigError::Invalid;
        let f = &self.file;
        let seed = self.seed.or(f.server.seed).unwrap_or(0);
        let time_scale = self.time_scale.or(f.server.time_scale).unwrap_or(1.0);
        // Bounded above so every scaled duration stays representable (a million times slower
        // than real is more than anyone simulates).
        if !(time_scale.is_finite() && (0.0..=1e6).contains(&time_scale)) {
            return Err(invalid(format!("time_scale must be a number from 0 to 1000000, got {time_scale}")));
        }
        let num_parallel = self.num_parallel.or(f.server.num_parallel).unwrap_or(1);
        let max_queue = self.max_queue.or(f.server.max_queue).unwrap_or(512);
        let max_loaded = match self.max_loaded_models.or(f.server.max_loaded_models).unwrap_or(0) {
            0 => 3,
            n => n,
        };
        let cache_ram_mib = self.cache_ram_mib.or(f.server.cache_ram_mib).unwrap_or(DEFAULT_CACHE_RAM_MIB);
        if num_parallel == 0 {
            return Err(invalid("num_parallel must be at least 1".into()));
        }
        if max_queue == 0 {
            return Err(invalid("max_queue must be at least 1".into()));
        }
        let keep_alive = match (self.keep_alive, &f.server.keep_alive) {
            (Some(k), _) => k,
            (None, Some(s)) => KeepAlive::from_env_value(s).map_err(|e| invalid(format!("server.keep_alive: {e}")))?,
            (None, None) => KeepAlive::DEFAULT,
        };

        // Models: default catalogue, then the file's, then the builder's, later names win.
        let mut models = if f.replace_catalogue { Vec::new() } else { default_catalogue() };
        for m in f.models.iter().chain(self.extra_models.iter()) {
            match models.iter_mut().find(|x| x.name == m.name) {
                Some(slot) => *slot = m.clone(),
                None => models.push(m.clone()),
            }
        }
        if models.is_empty() {
            return Err(invalid("the catalogue has no models".into()));
        }
        for m in models.iter_mut() {
            if let (Some(path), None) = (&m.profile.replay_file, &m.profile.replay) {
                let text =
                    std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: path.clone(), source })?;
                m.profile.replay =
                    Some(Replay::from_ndjson(&text).map_err(|e| invalid(format!("model {:?}: {path}: {e}", m.name)))?);
            }
        }
        for m in &models {
            m.validate().map_err(invalid)?;
        }
        let stand_in = match self.stand_in.as_ref().or(f.server.stand_in.as_ref()) {
            None => None,
            Some(asked) => {
                let key = crate::names::Name::parse(asked).map(|n| n.key());
                let found =
                    models.iter().find(|m| crate::names::Name::parse(&m.name).map(|n| n.key()) == key && key.is_some());
                match found {
                    Some(m) => Some(m.name.clone()),
                    None => {
                        let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
                        return Err(invalid(format!(
                            "stand_in {asked:?} is not in the catalogue; it names the catalogue model that answers for the names the catalogue lacks, one of: {}",
                            names.join(", ")
                        )));
                    }
                }
            }
        };

        // Devices and instances.
        let mut devices = f.devices.clone();
        for d in &devices {
            if !(d.cross_process_efficiency > 0.0 && d.cross_process_efficiency <= 2.0) {
                return Err(invalid(format!("device {:?}: cross_process_efficiency must be in (0, 2]", d.name)));
            }
            if d.cross_process_attention_efficiency.is_some_and(|e| !(e > 0.0 && e <= 16.0)) {
                return Err(invalid(format!(
                    "device {:?}: cross_process_attention_efficiency must be in (0, 16]",
                    d.name
                )));
            }
            if !(d.batch_penalty >= 0.0 && d.batch_penalty.is_finite()) {
                return Err(invalid(format!("device {:?}: batch_penalty must be >= 0", d.name)));
            }
            if d.memory_gib.is_some_and(|g| !(g.is_finite() && g > 0.0 && g <= 1e6)) {
                return Err(invalid(format!("device {:?}: memory_gib must be a number of GiB above 0", d.name)));
            }
            if !(d.vram_release_ms.is_finite() && (0.0..=600_000.0).contains(&d.vram_release_ms)) {
                return Err(invalid(format!("device {:?}: vram_release_ms must be from 0 to 600000", d.name)));
            }
            if !(d.cache_copy_gib_s.is_finite() && d.cache_copy_gib_s > 0.0) {
                return Err(invalid(format!("device {:?}: cache_copy_gib_s must be a positive number", d.name)));
            }
            if !(d.speed.is_finite() && d.speed > 0.0 && d.speed <= 1000.0) {
                return Err(invalid(format!("device {:?}: speed must be a number above 0 (1: the profile's)", d.name)));
            }
            if d.prompt_speed.is_some_and(|p| !(p.is_finite() && p > 0.0 && p <= 1000.0)) {
                return Err(invalid(format!(
                    "device {:?}: prompt_speed must be a number above 0 (absent: the device's speed)",
                    d.name
                )));
            }
        }
        let count = self.instances.unwrap_or(f.instances.len().max(1));
        if count == 0 {
            return Err(invalid("instances must be at least 1".into()));
        }
        let mut instances = Vec::with_capacity(count);
        for i in 0..count {
            let spec = f.instances.get(i).cloned().unwrap_or_default();
            let device = match &spec.device {
                Some(name) => devices
                    .iter()
                    .position(|d| &d.name == name)
                    .ok_or_else(|| invalid(format!("instance {i}: unknown device {name:?}")))?,
                None => {
                    devices.push(DeviceSpec::new(format!("device-{i}")));
                    devices.len() - 1
                }
            };
            let np = self.num_parallel.or(spec.num_parallel).unwrap_or(num_parallel);
            if np == 0 {
                return Err(invalid(format!("instance {i}: num_parallel must be at least 1")));
            }
            instances.push(ResolvedInstance {
                device,
                num_parallel: np,
                max_queue: self.max_queue.or(spec.max_queue).unwrap_or(max_queue).max(1),
                max_loaded_models: match self.max_loaded_models.or(spec.max_loaded_models).unwrap_or(max_loaded) {
                    0 => 3,
                    n => n,
                },
                cache_ram: self.cache_ram_mib.or(spec.cache_ram_mib).unwrap_or(cache_ram_mib).saturating_mul(1 << 20),
            });
        }
        let worker_threads = self.worker_threads.or(f.server.worker_threads).unwrap_or(2).max(1);
        let faults: Vec<_> = f.faults.iter().chain(self.faults.iter()).cloned().collect();
        crate::rules::check(&faults).map_err(invalid)?;
        let script: Vec<_> = f.script.iter().chain(self.script.iter()).cloned().collect();
        crate::rules::check(&script).map_err(invalid)?;
        let noise = self.noise.or_else(|| f.noise.clone()).unwrap_or_default();
        noise.validate().map_err(invalid)?;
        Ok(SimConfig {
            seed,
            time_scale,
            frozen_clock: self.frozen_clock.or(f.server.frozen_clock).unwrap_or(false),
            models,
            devices,
            instances,
            keep_alive,
            body_limit: self.body_limit.or(f.server.body_limit).unwrap_or(DEFAULT_BODY_LIMIT),
            trace_budget: (self
                .trace_budget_mb
                .or(f.server.trace_budget_mb)
                .unwrap_or(DEFAULT_TRACE_BUDGET_MB)
                .min(1 << 20) as usize)
                .saturating_mul(1 << 20),
            version: DEFAULT_VERSION.to_string(),
            worker_threads,
            faults,
            script,
            noise,
            stand_in,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_catalogue_parses_and_validates() {
        let file = ConfigFile::from_toml(DEFAULT_CATALOGUE_TOML).expect("catalogue parses");
        assert!(file.models.len() >= 3);
        let cfg = RawConfig::default().resolve().expect("defaults resolve");
        assert!(cfg.models.iter().any(|m| m.name == "gemma3:latest"));
        assert!(cfg.models.iter().any(|m| m.has("embedding")));
        assert_eq!(cfg.instances.len(), 1);
        assert_eq!(cfg.instances[0].num_parallel, 1);
        assert_eq!(cfg.instances[0].max_queue, 512);
    }

    #[test]
    fn every_preset_parses_and_resolves() {
        for (name, _) in PRESETS {
            let file = preset(name).unwrap();
            RawConfig { file, ..Default::default() }.resolve().unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(preset("nope").unwrap_err().to_string().contains("dual-one-device"));
    }

    #[test]
    fn unknown_fields_and_bad_values_are_named() {
        let e = ConfigFile::from_toml("[server]\nseeed = 3\n").unwrap_err().to_string();
        assert!(e.contains("seeed"), "{e}");
        let raw = RawConfig { time_scale: Some(-1.0), ..Default::default() };
        assert!(raw.resolve().unwrap_err().to_string().contains("time_scale"));
        let file = ConfigFile::from_toml("[[instances]]\ndevice = \"gpu9\"\n").unwrap();
        let e = RawConfig { file, ..Default::default() }.resolve().unwrap_err().to_string();
        assert!(e.contains("gpu9"), "{e}");
    }

    #[test]
    fn the_stand_in_is_a_catalogue_name_as_ollama_spells_names_and_the_option_wins_over_the_file() {
        let file = ConfigFile::from_toml("[server]\nstand_in = \"Gemma3\"\n").unwrap();
        let cfg = RawConfig { file: file.clone(), ..Default::default() }.resolve().unwrap();
        assert_eq!(cfg.stand_in.as_deref(), Some("gemma3:latest"), "the tag defaults, case is ignored");
        let raw = RawConfig { file, stand_in: Some("qwen3:0.6b".into()), ..Default::default() };
        assert_eq!(raw.resolve().unwrap().stand_in.as_deref(), Some("qwen3:0.6b"));
        let raw = RawConfig { stand_in: Some("qwen3:235b".into()), ..Default::default() };
        let e = raw.resolve().unwrap_err().to_string();
        assert!(e.contains("\"qwen3:235b\" is not in the catalogue") && e.contains("qwen3:0.6b"), "{e}");
        assert_eq!(RawConfig::default().resolve().unwrap().stand_in, None);
    }

    #[test]
    fn file_models_override_catalogue_entries_by_name() {
        let mut m = default_catalogue().remove(0);
        m.profile.decode_tokens_per_s = 10.0;
        let file = ConfigFile { models: vec![m.clone()], ..Default::default() };
        let cfg = RawConfig { file, ..Default::default() }.resolve().unwrap();
        let got = cfg.models.iter().find(|x| x.name == m.name).unwrap();
        assert_eq!(got.profile.decode_tokens_per_s, 10.0);
    }

    #[test]
    fn a_paced_model_survives_a_configuration_file() {
        // `harness bench` hands the paced model to a separate `sim-ollama` as TOML; an infinite
        // rate (no time at all) must come back as itself.
        for rate in [100.0, f64::INFINITY] {
            let mut cfg = ConfigFile::default();
            cfg.models.push(ModelSpec::paced("metronome:latest", rate, 400));
            let text = toml::to_string(&cfg).unwrap();
            assert_eq!(ConfigFile::from_toml(&text).unwrap(), cfg, "{text}");
        }
    }
}
