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
                Err(e) if source::is_not_cached(&e) => set.pending.push(entry.skill_name()),
                Err(e) => set.problems.push(problem(&entry.reference, e.to_string())),
            }
        }
        dirs
    }

    /// Refuses, before any of its code runs, a pulled skill whose artifact names it otherwise
    /// than its entry does: a publisher trusted for one name cannot take another's. The
    /// problem names the entry's reference.
    pub(crate) fn check_name_claim(&self, name: &str, dir: &Path) -> Result<(), LoadProblem> {
        let Some(origin) = self.pulled.lock().get(dir).cloned() else { return Ok(()) };
        if origin.name == name {
            return Ok(());
        }
        let message = format!(
            "the artifact names its skill `{name}`, but this skills.oci entry serves `{}` \
             (`name:`, else the repository's last path segment): refused",
            origin.name
        );
        Err(problem(&origin.reference, message))
    }

    /// Refuses a pulled skill that would replace a folder or built-in of its name unless its
    /// entry says `replaces: true` (then said at start). The problem names the reference.
    pub(crate) fn check_replaces(&self, name: &str, dir: &Path, set: &SkillSet) -> Result<(), LoadProblem> {
        let Some(origin) = self.pulled.lock().get(dir).cloned() else { return Ok(()) };
        let builtin = self.config.config.skills.builtins.iter().any(|b| b.name() == name);
        let replaced = match set.skills.get(name) {
            Some(folder) => format!("the folder {}", folder.dir.display()),
            None if builtin => format!("the built-in `{name}`"),
            None => return Ok(()),
        };
        if !origin.replaces {
            let message = format!(
                "it would replace {replaced}, which serves `{name}`: refused (`replaces: true` on the entry allows it)"
            );
            return Err(problem(&origin.reference, message));
        }
        eprintln!("skillhost: skill `{name}`: {} replaces {replaced} (skills.oci replaces: true)", origin.reference);
        Ok(())
    }

    /// The operator's grant for skill `name` loaded from `dir`, when it is this skill's: a
    /// skill pulled from a registry receives `skills.grants.<name>` only when the grant names
    /// its repository (`source:`) or pins its digest (held by [`Loader::check_pin`]); a grant
    /// naming a repository is not a folder's. Otherwise none, and the log says why.
    pub(crate) fn written_grant(&self, name: &str, dir: &Path) -> Option<crate::config::Grant> {
        let grant = self.config.config.skills.grants.get(name)?;
        let origin = self.pulled.lock().get(dir).cloned();
        let withheld = match (&origin, &grant.source) {
            (Some(origin), Some(source)) => {
                let from = crate::config::repository_of(&origin.reference);
                (source != from).then(|| format!("it names source {source}, and this skill comes from {from}"))
            }
            (Some(origin), None) if grant.digest.is_none() => {
                let from = crate::config::repository_of(&origin.reference);
                Some(format!(
                    "this skill comes from {from}, which the grant does not name: add `source: {from}` \
                     (or pin `digest: {}`)",
                    origin.digest
                ))
            }
            (None, Some(source)) => {
                Some(format!("it is for the skill pulled from {source}, not the folder {}", dir.display()))
            }
            _ => None,
        };
        match withheld {
            Some(why) => {
                tracing::warn!(skill = name, "skills.grants.{name} withheld: {why}; the skill runs with no grant");
                None
            }
            None => Some(grant.clone()),
        }
    }

    /// Adds to the problem of each `skills.oci` entry that did not load which folder or
    /// built-in serves its skill's name instead, or that none does.
    pub(crate) fn say_who_serves_instead(&self, set: &mut SkillSet) {
        for entry in &self.config.config.skills.oci {
            let name = entry.skill_name();
            let instead = match set.skills.get(&name) {
                Some(skill) if self.pulled.lock().contains_key(&skill.dir) => continue,
                Some(skill) if skill.dir == crate::skills::builtin::location(&name) => {
                    format!("the built-in `{name}` serves instead")
                }
                Some(skill) => format!("the folder {} serves `{name}` instead", skill.dir.display()),
                None => format!("no skill serves `{name}`"),
            };
            let failed =
                set.problems.iter_mut().filter(|p| p.skill == entry.reference && p.file.as_os_str() == "skills.oci");
            for problem in failed {
                problem.message = format!("{}; {instead}", problem.message);
            }
        }
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
