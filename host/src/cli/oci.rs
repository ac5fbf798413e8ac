//! `skillhost skill push | pull | keygen | sign | diff`: skills as OCI artifacts
//! (docs/distribution.md).

use clap::Args;
use skillhost::skills::oci::artifact::{self, Manifest, Provenance};
use skillhost::skills::oci::registry::{self, Access, Registry};
use skillhost::skills::oci::{diff, sign};
use skillhost::skills::{Loader, Skill};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How to reach the registry.
#[derive(Debug, Args)]
pub struct RegistryArgs {
    /// The registry user (with `--password-stdin`); else Docker's config.json credentials.
    #[arg(long, requires = "password_stdin")]
    username: Option<String>,
    /// Read the password from the first line of stdin.
    #[arg(long, requires = "username")]
    password_stdin: bool,
    /// Plain HTTP to a registry that is not on loopback (loopback always may).
    #[arg(long)]
    insecure: bool,
}

impl RegistryArgs {
    fn access(&self) -> anyhow::Result<Access> {
        let credentials = match &self.username {
            Some(user) => {
                let mut line = String::new();
                std::io::stdin().read_line(&mut line)?;
                let password = line.trim_end_matches(['\n', '\r']).to_string();
                anyhow::ensure!(!password.is_empty(), "--password-stdin: stdin held no password");
                Some((user.clone(), password))
            }
            None => None,
        };
        Ok(Access { insecure: self.insecure, credentials })
    }
}

/// `skill push`'s provenance flags.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The skill folder (built).
    pub dir: PathBuf,
    /// Where to publish it: `registry/repository:tag`.
    pub reference: String,
    /// `org.opencontainers.image.source`: where its sources are.
    #[arg(long)]
    source: Option<String>,
    /// `org.opencontainers.image.revision` (default: the folder's git commit, if any).
    #[arg(long)]
    revision: Option<String>,
    /// `org.opencontainers.image.version` (default: the reference's tag).
    #[arg(long = "artifact-version")]
    version: Option<String>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Publishes a built skill folder; prints the manifest's digest.
pub async fn push(args: PushArgs, loader: &Loader) -> anyhow::Result<ExitCode> {
    let reference = registry::parse(&args.reference)?;
    anyhow::ensure!(reference.digest().is_none(), "{}: push to a tag, not a digest", args.reference);
    let dir = args.dir.canonicalize().map_err(|e| anyhow::anyhow!("{}: {e}", args.dir.display()))?;
    let skill = loader.load_one(&dir).await.map_err(|problem| anyhow::anyhow!("not pushed: {problem}"))?;
    let provenance = Provenance {
        source: args.source,
        revision: args.revision.or_else(|| git_commit(&dir)),
        version: args.version.or_else(|| reference.tag().map(str::to_owned)),
        created: Provenance::created_now()?,
    };
    let packed = artifact::pack(&dir, &skill.name, &provenance)?;
    let registry = Registry::new(&reference, &args.registry.access()?);
    for (descriptor, bytes) in &packed.blobs {
        registry.push_blob(&reference, descriptor, bytes).await?;
    }
    registry.push_manifest(&reference, &packed.manifest).await?;
    eprintln!("pushed {} as {}@{}", skill.name, args.reference, packed.digest);
    println!("{}", packed.digest);
    Ok(ExitCode::SUCCESS)
}

/// The commit `dir` is at, when it is in a git work tree.
fn git_commit(dir: &Path) -> Option<String> {
    let out = std::process::Command::new("git").arg("-C").arg(dir).args(["rev-parse", "HEAD"]).output().ok()?;
    let commit = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !commit.is_empty()).then_some(commit)
}

/// `skill pull`'s arguments.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// `registry/repository:tag` or `...@sha256:<hex>`.
    pub reference: String,
    /// The folder to write (default: the skill's name, here). Must not exist, or be empty.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Verify a signature by this public key first (SPKI PEM).
    #[arg(long)]
    key: Option<PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Fetches a skill into a folder; prints its digest.
pub async fn pull(args: PullArgs) -> anyhow::Result<ExitCode> {
    let reference = registry::parse(&args.reference)?;
    let registry = Registry::new(&reference, &args.registry.access()?);
    let (digest, skill) = fetch_manifest(&registry, &reference).await?;
    if let Some(key) = &args.key {
        let signatures = sign::fetch_all(&registry, &reference, &digest).await?;
        sign::verify(&signatures, &digest, &sign::verifying_key(key)?, &key.display().to_string())?;
    }
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&skill.name));
    let empty = std::fs::read_dir(&dir).map(|mut d| d.next().is_none()).unwrap_or(true);
    anyhow::ensure!(empty, "{}: exists and is not empty; not overwritten", dir.display());
    fetch_into(&registry, &reference, &skill, &dir).await?;
    eprintln!("pulled {} into {}", skill.name, dir.display());
    println!("{digest}");
    Ok(ExitCode::SUCCESS)
}

/// The manifest `reference` names, checked against its digest when it has one.
async fn fetch_manifest(
    registry: &Registry,
    reference: &oci_client::Reference,
) -> anyhow::Result<(String, artifact::Skill)> {
    let bytes = registry.manifest(reference).await?;
    let digest = skillhost::skills::oci::digest_of(&bytes);
    if let Some(pinned) = reference.digest() {
        anyhow::ensure!(
            pinned == digest,
            "digest mismatch: the manifest should be {pinned}, the registry sent {digest}"
        );
    }
    Ok((digest, artifact::Skill::of(&Manifest::parse(&bytes)?)?))
}

async fn fetch_into(
    registry: &Registry,
    reference: &oci_client::Reference,
    skill: &artifact::Skill,
    dir: &Path,
) -> anyhow::Result<()> {
    let wasm = match &skill.wasm {
        Some(layer) => Some(registry.blob(reference, layer).await?),
        None => None,
    };
    let tar = registry.blob(reference, &skill.files).await?;
    artifact::unpack(skill, wasm.as_deref(), &tar, dir)?;
    Ok(())
}

/// Writes a key pair.
pub fn keygen(out: &Path) -> anyhow::Result<ExitCode> {
    let (private, public) = sign::keygen(out)?;
    println!("wrote {} (private, 0600) and {} (public)", private.display(), public.display());
    Ok(ExitCode::SUCCESS)
}

/// `skill sign`'s arguments.
#[derive(Debug, Args)]
pub struct SignArgs {
    /// The artifact: `registry/repository:tag` or `...@sha256:<hex>`.
    pub reference: String,
    /// The private key (PKCS#8 or SEC1 PEM, P-256).
    #[arg(long)]
    key: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Signs an artifact (cosign's layout); prints the digest signed.
pub async fn sign_ref(args: SignArgs) -> anyhow::Result<ExitCode> {
    let key = sign::signing_key(&args.key)?;
    let reference = registry::parse(&args.reference)?;
    let registry = Registry::new(&reference, &args.registry.access()?);
    let (digest, _) = fetch_manifest(&registry, &reference).await?;
    sign::sign(&registry, &reference, &digest, &key).await?;
    eprintln!("signed {digest} ({})", sign::signature_tag(&digest)?);
    println!("{digest}");
    Ok(ExitCode::SUCCESS)
}

/// `skill diff OLD NEW`: folders or references.
pub async fn diff(old: &str, new: &str, registry: &RegistryArgs, loader: &Loader) -> anyhow::Result<ExitCode> {
    let access = registry.access()?;
    let temp = tempfile::tempdir()?;
    let old = load_either(old, &temp.path().join("old"), &access, loader).await?;
    let new = load_either(new, &temp.path().join("new"), &access, loader).await?;
    let lines = diff::diff((&old.0, &old.1), (&new.0, &new.1));
    if lines.is_empty() {
        println!("no change in tools, approval levels or capabilities asked");
    }
    for line in lines {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A skill from a folder, or pulled by reference into `scratch`.
async fn load_either(
    what: &str,
    scratch: &Path,
    access: &Access,
    loader: &Loader,
) -> anyhow::Result<(Skill, skillhost::skills::Manifest)> {
    let dir = if Path::new(what).is_dir() {
        PathBuf::from(what)
    } else {
        let reference = registry::parse(what)?;
        let registry = Registry::new(&reference, access);
        let (_, skill) = fetch_manifest(&registry, &reference).await?;
        let dir = scratch.join(&skill.name);
        fetch_into(&registry, &reference, &skill, &dir).await?;
        dir
    };
    let skill = loader.load_one(&dir).await.map_err(|problem| anyhow::anyhow!("{what}: {problem}"))?;
    let manifest = skillhost::skills::Manifest::load(&dir).map_err(|e| anyhow::anyhow!("{what}: skill.toml: {e}"))?;
    Ok((skill, manifest))
}
