//! The loader's side of `skills.oci`: entries pulled before the folders load, their origins
//! noted, and digest-pinned grants enforced.

use super::source::{self, Cache, Network};
use crate::skills::{LoadMode, LoadProblem, Loader, Manifest, SkillSet};
use std::path::{Path, PathBuf};

impl Loader {
    /// Pulls and verifies every `skills.oci` entry (all at once); returns their folders, in
    /// the config's order. One that fails is a problem naming its reference; the others
    /// load. Under [`LoadMode::ServeReady`] only the cache is read, and an entry it lacks is
    /// left pending (until pulled, under its repository's last segment as a name).
    pub(crate) async fn pull_oci(&self, mode: LoadMode, set: &mut SkillSet) -> Vec<PathBuf> {
        let entries = &self.config.config.skills.oci;
        if entries.is_empty() {
            return Vec::new();
        }
        let Some(cache_dir) = self.sandbox.cache_dir() else {
            for entry in entries {
                set.problems.push(problem(&entry.reference, "no cache folder to pull into (sandbox.cache_dir)".into()));
            }
            return Vec::new();
        };
        let cache = Cache::new(cache_dir);
        let network = if mode == LoadMode::ServeReady { Network::CacheOnly } else { Network::Allowed };
        let pulls = entries.iter().map(|entry| source::resolve(entry, &self.config, &cache, network));
        let results = futures::future::join_all(pulls).await;
        let mut dirs = Vec::new();
        for (entry, result) in entries.iter().zip(results) {
            match result {
                Ok(pulled) => {
                    let origin = &pulled.origin;
                    tracing::info!(
                        skill = %pulled.name,
                        reference = %origin.reference,
                        digest = %origin.digest,
                        signer = %origin.signer,
                        "skill pulled and verified"
                    );
                    self.pulled.lock().insert(pulled.dir.clone(), pulled.origin);
                    dirs.push(pulled.dir);
                }
                Err(e) if source::is_not_cached(&e) => set.pending.push(pending_name(&entry.reference)),
                Err(e) => set.problems.push(problem(&entry.reference, e.to_string())),
            }
        }
        dirs
    }

    /// Notes in `set` where each skill pulled from a registry came from.
    pub(crate) fn note_origins(&self, set: &mut SkillSet) {
        let pulled = self.pulled.lock();
        for (name, skill) in &set.skills {
            if let Some(origin) = pulled.get(&skill.dir) {
                set.origins.insert(name.clone(), origin.clone());
            }
        }
    }

    /// A grant pinned to a digest (`skills.grants.<skill>.digest`) holds only for that
    /// artifact, and only for what it names: anything else is refused, named.
    pub(crate) fn check_pin(&self, name: &str, dir: &Path, manifest: &Manifest) -> Result<(), String> {
        let Some(grant) = self.config.config.skills.grants.get(name) else { return Ok(()) };
        let Some(pinned) = &grant.digest else { return Ok(()) };
        let origin = self.pulled.lock().get(dir).cloned();
        let Some(origin) = origin else {
            return Err(format!(
                "skills.grants.{name}.digest pins {pinned}, but this skill loads from {}, not that artifact: \
                 refused",
                dir.display()
            ));
        };
        if &origin.digest != pinned {
            let changes = self.asks_since(pinned, name, manifest);
            return Err(format!(
                "skills.grants.{name}.digest pins {pinned}, but {} is {}: refused until the operator re-grants it{changes}",
                origin.reference, origin.digest
            ));
        }
        let beyond = super::diff::beyond_grant(manifest, grant);
        if beyond.is_empty() {
            return Ok(());
        }
        Err(format!(
            "asks for what skills.grants.{name} (pinned to {pinned}) does not name: {}; refused until re-granted",
            beyond.join(", ")
        ))
    }

    /// What `manifest` asks for beyond the pinned artifact's manifest, when that one is in
    /// the cache (`; asks now: + ..., - ...`).
    fn asks_since(&self, pinned: &str, name: &str, manifest: &Manifest) -> String {
        let Some(cache_dir) = self.sandbox.cache_dir() else { return String::new() };
        let Ok(hex) = super::digest_hex(pinned) else { return String::new() };
        let old_dir = cache_dir.join("oci/skills").join(format!("sha256-{hex}")).join(name);
        let Ok(old) = Manifest::load(&old_dir) else { return String::new() };
        if !old_dir.is_dir() {
            return String::new();
        }
        let (old, new) = (super::diff::asked(&old, None), super::diff::asked(manifest, None));
        let mut lines: Vec<String> = new.difference(&old).map(|a| format!("+ {a}")).collect();
        lines.extend(old.difference(&new).map(|a| format!("- {a}")));
        if lines.is_empty() { String::new() } else { format!("; what it asks changed: {}", lines.join(", ")) }
    }
}

fn problem(reference: &str, message: String) -> LoadProblem {
    LoadProblem { skill: reference.to_string(), file: PathBuf::from("skills.oci"), message }
}

/// The name a pending entry is waited for under: its repository's last segment, in
/// snake_case (its real name comes with the artifact).
fn pending_name(reference: &str) -> String {
    let without_digest = reference.split('@').next().unwrap_or(reference);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    last.split(':').next().unwrap_or(last).replace('-', "_")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pending_entry_is_named_by_its_repository() {
        assert_eq!(super::pending_name("127.0.0.1:5000/team/http-checker:1.0"), "http_checker");
        assert_eq!(super::pending_name("127.0.0.1:5000/team/probe@sha256:ab"), "probe");
        assert_eq!(super::pending_name("127.0.0.1:5000/team/probe:2@sha256:ab"), "probe");
        assert_eq!(super::pending_name("localhost:5000/x"), "x");
    }
}
