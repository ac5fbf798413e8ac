//! `skillhost skill push | pull | keygen | sign | diff`: skills as OCI artifacts
//! (docs/distribution.md).

use clap::Args;
use skillhost::config::{LoadedConfig, OciSkill, Verify};
use skillhost::skills::oci::artifact::{self, Manifest, Provenance};
use skillhost::skills::oci::registry::{self, Access, Registry};
use skillhost::skills::oci::source::{self, Signer};
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

/// Whose signature `skill pull` and `skill diff` require of a reference: the flags, else
/// the config's `skills.oci` entry for the same repository; nothing unsigned unless
/// `--allow-unsigned`.
#[derive(Debug, Args, Default)]
pub struct VerifyArgs {
    /// Verify a signature by this public key (SPKI PEM).
    #[arg(long, conflicts_with_all = ["identity", "allow_unsigned"])]
    key: Option<PathBuf>,
    /// Keyless: the certificate's identity (with `--issuer` and `--trusted-root`).
    #[arg(long, requires_all = ["issuer", "trusted_root"], conflicts_with = "allow_unsigned")]
    identity: Option<String>,
    /// Keyless: the OIDC issuer.
    #[arg(long, requires = "identity")]
    issuer: Option<String>,
    /// Keyless: the Sigstore trust root (`trusted_root.json`).
    #[arg(long, requires = "identity")]
    trusted_root: Option<PathBuf>,
    /// Accept an artifact without a signature.
    #[arg(long)]
    allow_unsigned: bool,
}

impl VerifyArgs {
    /// The entry `reference` is verified as: the flags (paths as given, from here), else
    /// the config's entry whose repository it is, else none (refused as unsigned).
    fn entry(&self, reference: &str, config: &LoadedConfig) -> anyhow::Result<OciSkill> {
        let here = std::env::current_dir()?;
        let verify = match (&self.key, &self.identity, &self.issuer, &self.trusted_root) {
            (Some(key), ..) => Some(Verify::Key { key: here.join(key) }),
            (None, Some(identity), Some(issuer), Some(root)) => Some(Verify::Keyless {
                identity: identity.clone(),
                issuer: issuer.clone(),
                trusted_root: here.join(root),
            }),
            _ => None,
        };
        let repository = skillhost::config::repository_of(reference);
        let configured = config.config.skills.oci.iter().find(|e| e.repository() == repository);
        Ok(match (verify, configured) {
            (Some(verify), _) => OciSkill { verify: Some(verify), ..unsigned(reference, false) },
            (None, Some(entry)) if !self.allow_unsigned => {
                eprintln!("verifying {reference} as its skills.oci entry {} does", entry.reference);
                OciSkill { reference: reference.to_owned(), ..entry.clone() }
            }
            (None, _) => unsigned(reference, self.allow_unsigned),
        })
    }

    /// Verifies `digest` of `reference` on `registry`: who signed it, or why not (saying
    /// what to give when nothing says whose signature to require).
    async fn check(
        &self,
        (text, reference, digest): (&str, &oci_client::Reference, &str),
        registry: &Registry,
        config: &LoadedConfig,
    ) -> anyhow::Result<Signer> {
        let entry = self.entry(text, config)?;
        if entry.verify.is_none() && !entry.allow_unsigned {
            anyhow::bail!(
                "{text}: refused: nothing says whose signature to require; give --key KEY, or --identity, \
                 --issuer and --trusted-root, or --allow-unsigned (or a skills.oci entry for this repository)"
            );
        }
        let signer = source::verify(&entry, config, (reference, digest), registry).await;
        let signer = signer.map_err(|e| anyhow::anyhow!("{text}: refused: {e}"))?;
        if signer == Signer::Unsigned {
            eprintln!("warning: {text} is not verified (--allow-unsigned)");
        }
        Ok(signer)
    }
}

/// An entry for `reference` with no `verify`.
fn unsigned(reference: &str, allow_unsigned: bool) -> OciSkill {
    OciSkill {
        reference: reference.to_owned(),
        verify: None,
        allow_unsigned,
        allow_tags: true,
        insecure: false,
        name: None,
        replaces: false,
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
    #[command(flatten)]
    verify: VerifyArgs,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Fetches a skill into a folder, verified first as the config would (or as the flags
/// say), written whole or not at all; prints its digest.
pub async fn pull(args: PullArgs, config: &LoadedConfig) -> anyhow::Result<ExitCode> {
    let reference = registry::parse(&args.reference)?;
    let registry =
        Registry::new(&reference, &args.registry.access()?).max_blob_bytes(config.config.skills.oci_max_bytes);
    let (digest, skill) = fetch_manifest(&registry, &reference).await?;
    args.verify.check((&args.reference, &reference, &digest), &registry, config).await?;
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&skill.name));
    let empty = std::fs::read_dir(&dir).map(|mut d| d.next().is_none()).unwrap_or(true);
    anyhow::ensure!(empty, "{}: exists and is not empty; not overwritten", dir.display());
    // Unpacked beside it, then renamed into place: a failure leaves nothing behind.
    let parent = match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)?;
    let partial = tempfile::Builder::new().prefix(".skillhost-pull-").tempdir_in(&parent)?;
    source::fetch_into(&registry, &reference, &skill, partial.path()).await?;
    if dir.is_dir() {
        std::fs::remove_dir(&dir)?;
    }
    std::fs::rename(partial.path(), &dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    let _ = partial.keep();
    eprintln!("pulled {} into {}", skill.name, dir.display());
    println!("{digest}");
    Ok(ExitCode::SUCCESS)
}

/// The manifest `reference` names (checked against its digest when it has one, by
/// [`Registry::manifest`]), its digest and what it says.
async fn fetch_manifest(
    registry: &Registry,
    reference: &oci_client::Reference,
) -> anyhow::Result<(String, artifact::Skill)> {
    let bytes = registry.manifest(reference).await?;
    let digest = skillhost::skills::oci::digest_of(&bytes);
    Ok((digest, artifact::Skill::of(&Manifest::parse(&bytes)?)?))
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

/// `skill diff OLD NEW`: folders or references. A reference is verified as `skill pull`
/// verifies it; both sides are described in a sandbox with nothing granted (no grants, no
/// `skills.config`, no MCP servers, a throwaway state store): diffing an untrusted version is
/// what the command is for.
pub async fn diff(
    (old, new): (&str, &str),
    (verify, registry): (&VerifyArgs, &RegistryArgs),
    loader: &Loader,
) -> anyhow::Result<ExitCode> {
    let access = registry.access()?;
    let temp = tempfile::tempdir()?;
    let bare = bare(loader, temp.path());
    let old = load_either(old, &temp.path().join("old"), (&access, verify), &bare).await?;
    let new = load_either(new, &temp.path().join("new"), (&access, verify), &bare).await?;
    let lines = diff::diff((&old.0, &old.1), (&new.0, &new.1));
    if lines.is_empty() {
        println!("no change in tools, approval levels or capabilities asked");
    }
    for line in lines {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `loader` with nothing to give a skill: no grants, no skill config, no MCP servers, no
/// one to notify, its state in `scratch`.
fn bare(loader: &Loader, scratch: &Path) -> Loader {
    let mut bare = loader.clone();
    bare.config.config.skills.grants.clear();
    bare.config.config.skills.config.clear();
    bare.mcp = None;
    bare.notifier = None;
    bare.lists = None;
    bare.state = skillhost::store::StateStore::new(scratch.join("state"));
    bare
}

/// A skill from a folder, or pulled by reference (verified) into `scratch`.
async fn load_either(
    what: &str,
    scratch: &Path,
    (access, verify): (&Access, &VerifyArgs),
    loader: &Loader,
) -> anyhow::Result<(Skill, skillhost::skills::Manifest)> {
    let dir = if Path::new(what).is_dir() {
        PathBuf::from(what)
    } else {
        let reference = registry::parse(what)?;
        let registry = Registry::new(&reference, access).max_blob_bytes(loader.config.config.skills.oci_max_bytes);
        let (digest, skill) = fetch_manifest(&registry, &reference).await?;
        verify.check((what, &reference, &digest), &registry, &loader.config).await?;
        let dir = scratch.join(&skill.name);
        source::fetch_into(&registry, &reference, &skill, &dir).await?;
        dir
    };
    let skill = loader.load_one(&dir).await.map_err(|problem| anyhow::anyhow!("{what}: {problem}"))?;
    let manifest = skillhost::skills::Manifest::load(&dir).map_err(|e| anyhow::anyhow!("{what}: skill.toml: {e}"))?;
    Ok((skill, manifest))
}
