//! Skills from an OCI registry, through the binary, against a real registry: Debian's
//! `docker-registry` (the CNCF distribution), started here on a free loopback port with its
//! own config and storage, and stopped at the end. Push, pull by tag and by digest, load by
//! reference from the config, start without the registry from the cache; each refusal with
//! its message while the other skills serve; signatures by `skill sign` and by an
//! independent implementation of cosign's layout (`support/cosign.py`, Python's
//! `cryptography`) verified both ways; keyless signatures from a throwaway Sigstore checked
//! offline against its trust root.

mod support;

use skillhost_tests::{Workspace, guests};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::Finished;

/// A `docker-registry` process serving plain HTTP on 127.0.0.1.
struct Registry {
    child: Child,
    /// `127.0.0.1:<port>`.
    addr: String,
    storage: PathBuf,
    _dir: tempfile::TempDir,
}

impl Registry {
    fn start() -> Registry {
        Registry::start_with(None)
    }

    /// A registry asking for `user`'s `password` (HTTP basic, an htpasswd file of bcrypt
    /// hashes), or open.
    fn start_with(credentials: Option<(&str, &str)>) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let storage = dir.path().join("storage");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    \
             rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            storage.display()
        );
        if let Some((user, password)) = credentials {
            let mut hash = Command::new("python3");
            let script = "import crypt, sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH)))";
            hash.args(["-W", "ignore", "-c", script, password]);
            let hashed = support::run_bounded(hash, "");
            assert_eq!(hashed.code, 0, "{}", hashed.stderr);
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("{user}:{}\n", hashed.stdout.trim())).unwrap();
            config.push_str(&format!("auth:\n  htpasswd:\n    realm: test\n    path: {}\n", htpasswd.display()));
        }
        std::fs::write(dir.path().join("config.yml"), config).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(dir.path().join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("docker-registry (Debian's docker-registry package; .ci/run installs it)");
        let registry = Registry { child, addr: format!("127.0.0.1:{port}"), storage, _dir: dir };
        registry.wait_until_up();
        registry
    }

    fn wait_until_up(&self) {
        let started = Instant::now();
        loop {
            let answered = std::net::TcpStream::connect(&self.addr).and_then(|mut stream| {
                write!(stream, "GET /v2/ HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\r\n", self.addr)?;
                let mut head = [0u8; 12];
                stream.read_exact(&mut head)?;
                Ok(head.ends_with(b"200"))
            });
            // 401: up, asking for credentials.
            if answered.is_ok_and(|up| up) || self.asks_credentials() {
                return;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "the registry never answered /v2/");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn asks_credentials(&self) -> bool {
        let answered = std::net::TcpStream::connect(&self.addr).and_then(|mut stream| {
            write!(stream, "GET /v2/ HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\r\n", self.addr)?;
            let mut head = [0u8; 12];
            stream.read_exact(&mut head)?;
            Ok(head.ends_with(b"401"))
        });
        answered.is_ok_and(|asks| asks)
    }

    /// The file the registry keeps the blob `digest` in.
    fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.storage.join("docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `skillhost ARGS` in the workspace, with `env` set.
fn skillhost(ws: &Workspace, args: &[&str], env: &[(&str, &str)]) -> Finished {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command.current_dir(ws.path()).args(args).envs(env.iter().copied());
    support::run_bounded(command, "")
}

/// Like [`skillhost`], failing the test unless it exits 0; its stdout.
fn ok(ws: &Workspace, args: &[&str]) -> String {
    let out = skillhost(ws, args, &[]);
    assert_eq!(out.code, 0, "skillhost {args:?}:\n{}\n{}", out.stdout, out.stderr);
    out.stdout
}

/// The probe's own manifest: it asks for memory and HTTP to 127.0.0.1.
fn probe_manifest() -> String {
    std::fs::read_to_string(support::repo().join("tests/guests/probe/skill.toml")).unwrap()
}

/// A built skill folder `src/<name>` (the probe component) with a data file and a source
/// file beside it.
fn skill_folder(ws: &Workspace, name: &str) -> String {
    let dir = ws.add_skill("src", name, guests::PROBE, &probe_manifest());
    std::fs::write(dir.join("data.csv"), format!("skill,{name}\n")).unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/lib.rs"), "// its source: never published\n").unwrap();
    format!("src/{name}")
}

/// Writes `config.yaml`: the folder skill `local` in `skills/`, the OCI entries `oci` (YAML
/// list items), grants `grants` (YAML under `skills.grants`), the cache in `cache/`.
fn write_config(ws: &Workspace, oci: &[String], grants: &str) {
    if !ws.path().join("skills/local").exists() {
        ws.add_skill("skills", "local", guests::PROBE, &probe_manifest());
    }
    let mut yaml = String::from("skills:\n  paths: [skills]\n  builtins: []\n");
    if !oci.is_empty() {
        yaml.push_str("  oci:\n");
        oci.iter().for_each(|entry| yaml.push_str(&format!("    - {entry}\n")));
    }
    if !grants.is_empty() {
        yaml.push_str(&format!("  grants:\n{grants}"));
    }
    yaml.push_str("state:\n  filesystem: {path: state}\nsandbox:\n  cache_dir: cache\n");
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
}

/// Pushes `src/<name>` to `<registry>/team/<name>:1.0`; its digest.
fn push(ws: &Workspace, registry: &Registry, name: &str) -> String {
    let folder = skill_folder(ws, name);
    let reference = format!("{}/team/{name}:1.0", registry.addr);
    let digest = ok(ws, &["skill", "push", &folder, &reference]).trim().to_string();
    assert!(digest.starts_with("sha256:") && digest.len() == 71, "{digest}");
    digest
}

fn sign(ws: &Workspace, reference: &str, key: &str) {
    ok(ws, &["skill", "sign", reference, "--key", key]);
}

/// `support/cosign.py ARGS`: the independent cosign-layout implementation.
fn cosign_py(args: &[&str]) -> Finished {
    let mut command = Command::new("python3");
    command.arg(support::repo().join("host/tests/support/cosign.py")).args(args);
    support::run_bounded(command, "")
}

/// The names of the files under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn push_pull_sign_load_by_reference_and_start_without_the_registry() {
    let mut registry = Registry::start();
    let ws = Workspace::new();
    write_config(&ws, &[], "");
    let folder = skill_folder(&ws, "alpha");
    // The skill's name travels in the artifact, whatever the repository is called.
    let repository = format!("{}/team/published-elsewhere", registry.addr);
    let epoch = [("SOURCE_DATE_EPOCH", "1700000000")];
    let first = skillhost(&ws, &["skill", "push", &folder, &format!("{repository}:1.0")], &epoch);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let digest = first.stdout.trim().to_string();
    assert!(digest.starts_with("sha256:") && digest.len() == 71, "{digest}");
    let again = skillhost(&ws, &["skill", "push", &folder, &format!("{repository}:1.0")], &epoch);
    assert_eq!(again.stdout.trim(), digest, "the same folder packs to the same digest: {}", again.stderr);

    // Nothing unverified is pulled unless asked for, and a refused pull writes nothing.
    let refused = skillhost(&ws, &["skill", "pull", &format!("{repository}:1.0"), "--dir", "by_tag"], &[]);
    assert!(refused.code != 0 && refused.stderr.contains("--allow-unsigned"), "{}", refused.stderr);
    assert!(!ws.path().join("by_tag").exists(), "nothing written");
    // By tag and by digest: the distributable files, never the sources.
    let pull = |reference: String, dir: &str| ok(&ws, &["skill", "pull", &reference, "--dir", dir, "--allow-unsigned"]);
    assert_eq!(pull(format!("{repository}:1.0"), "by_tag").trim(), digest);
    assert_eq!(pull(format!("{repository}@{digest}"), "by_digest").trim(), digest);
    for dir in ["by_tag", "by_digest"] {
        assert_eq!(files(&ws.path().join(dir)), ["data.csv", "prompt.md", "skill.toml", "skill.wasm"], "{dir}");
        let wasm = std::fs::read(ws.path().join(dir).join("skill.wasm")).unwrap();
        assert!(wasm == std::fs::read(guests::PROBE).unwrap(), "{dir}: the component, byte for byte");
    }
    let again =
        skillhost(&ws, &["skill", "pull", &format!("{repository}:1.0"), "--dir", "by_tag", "--allow-unsigned"], &[]);
    assert!(again.code != 0 && again.stderr.contains("exists and is not empty; not overwritten"), "{}", again.stderr);
    let to_digest = skillhost(&ws, &["skill", "push", &folder, &format!("{repository}@{digest}")], &[]);
    assert!(to_digest.code != 0 && to_digest.stderr.contains("push to a tag"), "{}", to_digest.stderr);
    let malformed = skillhost(&ws, &["skill", "pull", "Not A Reference!"], &[]);
    assert!(malformed.code != 0 && malformed.stderr.contains("is not a reference"), "{}", malformed.stderr);
    let absent = format!("{repository}@sha256:{}", "0".repeat(64));
    let missing = skillhost(&ws, &["skill", "pull", &absent, "--dir", "absent", "--allow-unsigned"], &[]);
    assert_ne!(missing.code, 0, "a digest the registry does not have: {}", missing.stdout);
    assert!(missing.stderr.contains("not found"), "{}", missing.stderr);

    // What a new version asks for, against the published one.
    let newer = ws.add_skill(
        "src",
        "alpha_next",
        guests::PROBE,
        "[capabilities]\nhttp_hosts = [\"127.0.0.1\", \"api.example.com\"]\nenv = [\"TOKEN\"]\n",
    );
    let old = format!("{repository}@{digest}");
    let diff = ok(&ws, &["skill", "diff", &old, &newer.display().to_string(), "--allow-unsigned"]);
    let lines: Vec<&str> = diff.lines().collect();
    assert_eq!(
        lines,
        ["+ asks: environment variable TOKEN", "+ asks: http host api.example.com", "- asks: memory"],
        "{diff}"
    );
    let unverified = skillhost(&ws, &["skill", "diff", &folder, &format!("{repository}:1.0")], &[]);
    assert!(unverified.code != 0 && unverified.stderr.contains("refused"), "{}", unverified.stderr);
    let same = ok(&ws, &["skill", "diff", &folder, &format!("{repository}:1.0"), "--allow-unsigned"]);
    assert_eq!(same.trim(), "no change in tools, approval levels or capabilities asked");

    // Signed by `skill sign`, loaded from the config by digest.
    ok(&ws, &["skill", "keygen", "--out", "keys/team"]);
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(ws.path().join("keys/team.key")).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let twice = skillhost(&ws, &["skill", "keygen", "--out", "keys/team"], &[]);
    assert!(twice.code != 0 && twice.stderr.contains("exists already; not overwritten"), "{}", twice.stderr);
    let unsigned_yet = skillhost(&ws, &["skill", "pull", &old, "--dir", "keyed", "--key", "keys/team.pub"], &[]);
    assert!(unsigned_yet.code != 0 && unsigned_yet.stderr.contains("no signature"), "{}", unsigned_yet.stderr);
    assert!(!ws.path().join("keyed").exists(), "a refused pull writes nothing");
    sign(&ws, &format!("{repository}@{digest}"), "keys/team.key");
    assert_eq!(ok(&ws, &["skill", "pull", &old, "--dir", "keyed", "--key", "keys/team.pub"]).trim(), digest);
    let verified = cosign_py(&[
        "verify",
        &registry.addr,
        "team/published-elsewhere",
        &digest,
        &ws.path().join("keys/team.pub").display().to_string(),
    ]);
    assert_eq!(verified.code, 0, "cosign's layout, checked independently: {}{}", verified.stdout, verified.stderr);
    // The operator names the skill: an artifact that names itself otherwise is refused,
    // naming both, before any of its code runs.
    let entry = format!("{{ref: '{repository}@{digest}', verify: {{key: keys/team.pub}}}}");
    write_config(&ws, &[entry], "");
    let list = skillhost(&ws, &["skill", "list"], &[]);
    assert!(!list.stdout.contains("alpha  ("), "{}", list.stdout);
    assert!(
        list.stderr.contains("names its skill `alpha`, but this skills.oci entry serves `published_elsewhere`"),
        "{}",
        list.stderr
    );
    let entry = format!("{{ref: '{repository}@{digest}', name: alpha, verify: {{key: keys/team.pub}}}}");
    write_config(&ws, &[entry], "");
    // Without flags, `pull` verifies as the config's entry for the repository does.
    let by_entry = skillhost(&ws, &["skill", "pull", &old, "--dir", "by_entry"], &[]);
    assert_eq!(by_entry.code, 0, "{}", by_entry.stderr);
    assert!(by_entry.stderr.contains("as its skills.oci entry"), "{}", by_entry.stderr);
    let source = format!("source: {repository}@{digest} ({digest}; signed, key keys/team.pub)");
    // The unpacked cache is checked at every load against what was verified: a changed
    // component or file is pulled again (and, the registry away, refused, never "signed").
    ok(&ws, &["skill", "list"]);
    let cached =
        ws.path().join("cache/oci/skills").join(format!("sha256-{}", &digest["sha256:".len()..])).join("alpha");
    std::fs::write(cached.join("skill.wasm"), std::fs::read(guests::HOOKS_ALL).unwrap()).unwrap();
    let list = skillhost(&ws, &["skill", "list"], &[]);
    assert!(
        list.stderr.contains("changed since it was verified (skill.wasm is not the verified component)"),
        "{}",
        list.stderr
    );
    assert!(list.stdout.contains("alpha  (") && list.stdout.contains(&source), "pulled again: {}", list.stdout);
    assert!(std::fs::read(cached.join("skill.wasm")).unwrap() == std::fs::read(guests::PROBE).unwrap(), "restored");
    for online in [true, false] {
        if !online {
            registry.stop();
        }
        let list = ok(&ws, &["skill", "list"]);
        assert!(list.contains("alpha  (") && list.contains(&source), "online {online}: {list}");
        assert!(list.contains("local  ("), "the folder skill loads beside it: {list}");
        let echoed = ok(&ws, &["call", "alpha__echo", r#"{"word": "pulled"}"#]);
        assert!(echoed.contains("pulled"), "online {online}: {echoed}");
    }
    std::fs::write(cached.join("data.csv"), "skill,tampered\n").unwrap();
    let list = skillhost(&ws, &["skill", "list"], &[]);
    assert!(list.stderr.contains("data.csv differs"), "{}", list.stderr);
    assert!(!list.stdout.contains("alpha  (") && !list.stdout.contains(&source), "refused offline: {}", list.stdout);
}

#[test]
fn each_refusal_names_its_reference_while_the_other_skills_serve() {
    let mut registry = Registry::start();
    let ws = Workspace::new();
    write_config(&ws, &[], "");
    ok(&ws, &["skill", "keygen", "--out", "keys/team"]);
    ok(&ws, &["skill", "keygen", "--out", "keys/other"]);
    let names = [
        "good",
        "tagged",
        "unsigned",
        "otherkey",
        "flipped",
        "repointed",
        "tagonly",
        "pinned",
        "moved",
        "pysigned",
        "sealed",
    ];
    let digests: std::collections::BTreeMap<&str, String> =
        names.iter().map(|n| (*n, push(&ws, &registry, n))).collect();
    let at = |name: &str| format!("{}/team/{name}@{}", registry.addr, digests[name]);
    for name in names.iter().filter(|n| !["unsigned", "otherkey", "pysigned", "tagged", "sealed"].contains(n)) {
        sign(&ws, &at(name), "keys/team.key");
    }
    sign(&ws, &at("otherkey"), "keys/other.key");
    // cosign's layout by another implementation (its own key, SEC1), then ours appended: the
    // loader verifies its layer with its key, it verifies ours with ours.
    let (py_key, py_pub) = (ws.path().join("keys/py.key"), ws.path().join("keys/py.pub"));
    let made = cosign_py(&[
        "sign",
        &registry.addr,
        "team/pysigned",
        &digests["pysigned"],
        &py_key.display().to_string(),
        &py_pub.display().to_string(),
    ]);
    assert_eq!(made.code, 0, "{}{}", made.stdout, made.stderr);
    sign(&ws, &at("pysigned"), "keys/team.key");
    let team_pub = ws.path().join("keys/team.pub").display().to_string();
    let ours = cosign_py(&["verify", &registry.addr, "team/pysigned", &digests["pysigned"], &team_pub]);
    assert_eq!(ours.code, 0, "our layer appended after theirs: {}{}", ours.stdout, ours.stderr);
    let theirs_only =
        cosign_py(&["verify", &registry.addr, "team/good", &digests["good"], &py_pub.display().to_string()]);
    assert_ne!(theirs_only.code, 0, "their key verifies nothing of ours: {}", theirs_only.stdout);
    // A SEC1 key (theirs) used by `skill sign`.
    sign(&ws, &at("tagged"), "keys/py.key");
    // A key encrypted as `cosign generate-key-pair` writes it, opened with COSIGN_PASSWORD.
    let (sealed_key, sealed_pub) = (ws.path().join("keys/sealed.key"), ws.path().join("keys/sealed.pub"));
    let made = cosign_py(&[
        "encrypted-key",
        &sealed_key.display().to_string(),
        &sealed_pub.display().to_string(),
        "correct horse",
    ]);
    assert_eq!(made.code, 0, "{}{}", made.stdout, made.stderr);
    let sealed = at("sealed");
    let sign_sealed = ["skill", "sign", sealed.as_str(), "--key", "keys/sealed.key"];
    let wrong = skillhost(&ws, &sign_sealed, &[("COSIGN_PASSWORD", "wrong")]);
    assert!(wrong.code != 0 && wrong.stderr.contains("a wrong COSIGN_PASSWORD"), "{}", wrong.stderr);
    let unset = skillhost(&ws, &sign_sealed, &[]);
    assert!(unset.code != 0 && unset.stderr.contains("set COSIGN_PASSWORD"), "{}", unset.stderr);
    let right = skillhost(&ws, &sign_sealed, &[("COSIGN_PASSWORD", "correct horse")]);
    assert_eq!(right.code, 0, "{}", right.stderr);

    // The registry's storage tampered with: a byte of a layer, a manifest's content.
    let manifest = |name: &str| std::fs::read(registry.blob_file(&digests[name])).unwrap();
    let layers: serde_json::Value = serde_json::from_slice(&manifest("flipped")).unwrap();
    let files_layer = layers["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["mediaType"] == "application/vnd.skillhost.skill.files.v1.tar")
        .unwrap();
    let blob = registry.blob_file(files_layer["digest"].as_str().unwrap());
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[700] ^= 0x01;
    std::fs::write(&blob, bytes).unwrap();
    std::fs::write(registry.blob_file(&digests["repointed"]), manifest("good")).unwrap();
    // A component built against another contract version, said in the annotation or not.
    let relayer = |wit: &str, tag: &str| {
        let mut command = Command::new("python3");
        let script = support::repo().join("host/tests/support/relayer.py");
        command.arg(script).args([&registry.addr, "team/good", "1.0", guests::WRONG_VERSION, wit, tag]);
        let out = support::run_bounded(command, "");
        assert_eq!(out.code, 0, "{}", out.stderr);
        format!("{}/team/good@{}", registry.addr, out.stdout.trim())
    };
    let (said, unsaid) = (relayer("0.0.9", "said"), relayer("0.1.0", "unsaid"));

    let key = "verify: {key: keys/team.pub}";
    let entry = |name: &str, extra: &str| format!("{{ref: '{}', {extra}}}", at(name));
    let entries = vec![
        entry("good", key),
        format!("{{ref: '{}/team/tagged:1.0', allow_tags: true, verify: {{key: keys/py.pub}}}}", registry.addr),
        entry("unsigned", key),
        entry("otherkey", key),
        entry("flipped", key),
        entry("repointed", key),
        format!("{{ref: '{}/team/tagonly:1.0', {key}}}", registry.addr),
        entry("pinned", key),
        entry("moved", key),
        entry("pysigned", "verify: {key: keys/py.pub}"),
        entry("sealed", "verify: {key: keys/sealed.pub}"),
    ];
    let grants = format!(
        "    pinned: {{digest: '{}', http_hosts: ['127.0.0.1']}}\n    moved: {{digest: '{}', memory: true, http_hosts: ['127.0.0.1']}}\n",
        digests["pinned"], digests["good"]
    );
    write_config(&ws, &entries, &grants);
    let list = skillhost(&ws, &["skill", "list"], &[]);
    assert_eq!(list.code, 0, "{}{}", list.stdout, list.stderr);
    for serving in ["good", "tagged", "pysigned", "sealed", "local"] {
        assert!(list.stdout.contains(&format!("{serving}  (")), "{serving} serves:\n{}\n{}", list.stdout, list.stderr);
    }
    let refused = |reference: &str, reason: &str| {
        let line = list.stderr.lines().find(|l| l.contains(&format!("skill `{reference}`")));
        let line = line.unwrap_or_else(|| panic!("no refusal of {reference}:\n{}", list.stderr));
        assert!(line.contains(reason), "{reference}: {reason:?} not in: {line}");
    };
    refused(&at("unsigned"), "unsigned: no signature");
    refused(&at("otherkey"), "verifies with keys/team.pub (signed by another key");
    refused(&at("flipped"), "digest mismatch");
    refused(&at("repointed"), "digest mismatch: the manifest should be");
    refused(&format!("{}/team/tagonly:1.0", registry.addr), "a tag without a digest");
    refused("pinned", "does not name: memory; refused until re-granted");
    // A failed entry says what serves its name instead: here nothing.
    refused(&at("unsigned"), "no skill serves `unsigned`");
    refused("moved", &format!("pins {}, but {} is {}", digests["good"], at("moved"), digests["moved"]));
    for name in ["unsigned", "otherkey", "flipped", "repointed", "tagonly", "pinned", "moved"] {
        assert!(!list.stdout.contains(&format!("{name}  (")), "{name} must not load:\n{}", list.stdout);
    }
    assert!(list.stderr.contains(&digests["tagged"]), "the digest a tag resolved to is logged: {}", list.stderr);
    let echoed = ok(&ws, &["call", "good__echo", r#"{"word": "still serving"}"#]);
    assert!(echoed.contains("still serving"), "{echoed}");

    // A component built against another contract version, said in the annotation or only
    // in the component (each alone: both are named `good`).
    for (reference, said) in [(&said, true), (&unsaid, false)] {
        write_config(&ws, &[format!("{{ref: '{reference}', allow_unsigned: true}}")], "");
        let list = skillhost(&ws, &["skill", "list"], &[]);
        let needle = if said { format!("skill `{reference}`") } else { "skill `good`".to_owned() };
        let line = list.stderr.lines().find(|l| l.contains(&needle) && l.contains("0.0.9"));
        assert!(line.is_some_and(|l| l.contains("rebuild it")), "refused ({said}): {}", list.stderr);
    }

    // Re-granted to the new digest, with what it asks: it loads.
    let grants = format!("    pinned: {{digest: '{}', memory: true, http_hosts: ['127.0.0.1']}}\n", digests["pinned"]);
    write_config(&ws, &[entry("pinned", key)], &grants);
    assert!(ok(&ws, &["skill", "list"]).contains("pinned  ("));

    // The tag moved to an artifact that does not verify: refused, and the cache keeps the
    // last good digest and its signatures (written only after verification), so a start
    // without the registry still serves the verified one.
    let tagged =
        format!("{{ref: '{}/team/tagged:1.0', allow_tags: true, verify: {{key: keys/py.pub}}}}", registry.addr);
    write_config(&ws, std::slice::from_ref(&tagged), "");
    assert!(ok(&ws, &["skill", "list"]).contains(&digests["tagged"]));
    let moved = ws.add_skill("elsewhere", "tagged", guests::PROBE, &probe_manifest());
    ok(&ws, &["skill", "push", &moved.display().to_string(), &format!("{}/team/tagged:1.0", registry.addr)]);
    let list = skillhost(&ws, &["skill", "list"], &[]);
    assert!(list.stderr.contains("unsigned: no signature"), "{}", list.stderr);
    registry.stop();
    let list = skillhost(&ws, &["skill", "list"], &[]);
    assert!(
        list.stdout.contains("tagged  (") && list.stdout.contains(&digests["tagged"]),
        "{}{}",
        list.stdout,
        list.stderr
    );
}

/// `skill diff` of an unverified artifact (allowed with `--allow-unsigned`) runs its code with
/// nothing granted: a skill that names a tool after a granted secret while listing its tools
/// (the probe, `PROBE_EXTRA_TOOL`) shows no such tool, although the config grants the variable
/// to a skill of its name and `skill list` of the same folder does show it.
#[test]
fn diff_describes_an_untrusted_artifact_with_nothing_granted() {
    let registry = Registry::start();
    let ws = Workspace::new();
    let asks = format!("{}env = [\"PROBE_EXTRA_TOOL\"]\n", probe_manifest());
    let leaky = ws.add_skill("src", "leaky", guests::PROBE, &asks);
    let plain = ws.add_skill("src2", "leaky", guests::PROBE, &probe_manifest());
    let reference = format!("{}/team/leaky:1.0", registry.addr);
    ok(&ws, &["skill", "push", &leaky.display().to_string(), &reference]);
    write_config(&ws, &[], "    leaky: {env: [PROBE_EXTRA_TOOL]}\n");
    std::fs::create_dir_all(ws.path().join("skills")).unwrap();
    let secret = [("PROBE_EXTRA_TOOL", "secret_value_seen")];
    // The same folder, loaded as a skill: the grant reaches it (the tool shows).
    let copy = ws.path().join("skills/leaky");
    std::fs::create_dir_all(&copy).unwrap();
    for file in ["skill.wasm", "skill.toml", "prompt.md"] {
        std::fs::copy(leaky.join(file), copy.join(file)).unwrap();
    }
    let listed = skillhost(&ws, &["skill", "list"], &secret);
    assert!(listed.stdout.contains("secret_value_seen"), "granted when loaded: {}{}", listed.stdout, listed.stderr);

    let diffed =
        skillhost(&ws, &["skill", "diff", &reference, &plain.display().to_string(), "--allow-unsigned"], &secret);
    assert_eq!(diffed.code, 0, "{}", diffed.stderr);
    assert!(
        !diffed.stdout.contains("secret_value_seen") && !diffed.stderr.contains("secret_value_seen"),
        "{}",
        diffed.stdout
    );
    assert!(diffed.stdout.contains("- asks: environment variable PROBE_EXTRA_TOOL"), "{}", diffed.stdout);
    assert!(diffed.stderr.contains("is not verified (--allow-unsigned)"), "{}", diffed.stderr);
}

/// Copies manifest `tag` (and the blobs it names) from repository `from` to `to` of the
/// registry at `addr`, as anyone who can push there could: blobs mounted across repositories,
/// the manifest put under the same tag.
fn copy_manifest(addr: &str, (from, to): (&str, &str), tag: &str) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        let accept = "application/vnd.oci.image.manifest.v1+json";
        let got = client.get(format!("http://{addr}/v2/{from}/manifests/{tag}")).header("accept", accept);
        let bytes = got.send().await.unwrap().bytes().await.unwrap();
        let manifest: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let layers = manifest["layers"].as_array().cloned().unwrap_or_default();
        for blob in layers.iter().chain([&manifest["config"]]) {
            let digest = blob["digest"].as_str().unwrap();
            let mount = format!("http://{addr}/v2/{to}/blobs/uploads/?mount={digest}&from={from}");
            assert_eq!(client.post(mount).send().await.unwrap().status().as_u16(), 201, "{digest}");
        }
        let put = client.put(format!("http://{addr}/v2/{to}/manifests/{tag}")).header("content-type", accept);
        assert_eq!(put.body(bytes.to_vec()).send().await.unwrap().status().as_u16(), 201);
    });
}

/// A signature names the repository it was made for (`docker-reference`): the same
/// artifact, copied with its signature into another repository, is refused there, while it
/// verifies where it was signed.
#[test]
fn a_signature_copied_to_another_repository_verifies_nothing_there() {
    let registry = Registry::start();
    let ws = Workspace::new();
    write_config(&ws, &[], "");
    ok(&ws, &["skill", "keygen", "--out", "keys/team"]);
    let folder = skill_folder(&ws, "weather");
    let epoch = [("SOURCE_DATE_EPOCH", "1700000000")];
    let mut digests = Vec::new();
    for repository in ["vendor/weather", "team/weather"] {
        let pushed =
            skillhost(&ws, &["skill", "push", &folder, &format!("{}/{repository}:1.0", registry.addr)], &epoch);
        assert_eq!(pushed.code, 0, "{}", pushed.stderr);
        digests.push(pushed.stdout.trim().to_owned());
    }
    assert_eq!(digests[0], digests[1], "one artifact in two repositories");
    let digest = &digests[0];
    sign(&ws, &format!("{}/vendor/weather@{digest}", registry.addr), "keys/team.key");
    let tag = format!("sha256-{}.sig", &digest["sha256:".len()..]);
    copy_manifest(&registry.addr, ("vendor/weather", "team/weather"), &tag);
    let entry = |repository: &str| {
        format!("{{ref: '{}/{repository}@{digest}', verify: {{key: keys/team.pub}}}}", registry.addr)
    };
    write_config(&ws, &[entry("team/weather")], "");
    let list = skillhost(&ws, &["skill", "list"], &[]);
    let wanted = format!("a signature for {}/vendor/weather, another repository", registry.addr);
    assert!(list.stderr.contains(&wanted), "{}", list.stderr);
    assert!(!list.stdout.contains("weather  ("), "{}", list.stdout);
    write_config(&ws, &[entry("vendor/weather")], "");
    let list = skillhost(&ws, &["skill", "list"], &[]);
    assert!(list.stdout.contains("weather  ("), "where it was signed: {}{}", list.stdout, list.stderr);
}

/// A publisher gets its own name and nothing more: a signed artifact cannot replace the
/// folder skill of its name unless the operator's entry says `replaces: true` (and start-up
/// says so); a grant that names neither its repository (`source:`) nor its digest is withheld
/// from a pulled skill (said why), and one that names it is given; when the entry fails
/// verification, `skill list` says which folder serves its name instead.
#[test]
fn a_publisher_gets_its_own_name_and_only_the_grants_that_name_its_source() {
    let registry = Registry::start();
    let ws = Workspace::new();
    write_config(&ws, &[], "");
    ok(&ws, &["skill", "keygen", "--out", "keys/team"]);
    // `local` is the folder skill `write_config` adds: the publisher ships one of that name.
    let digest = push(&ws, &registry, "local");
    let at = format!("{}/team/local@{digest}", registry.addr);
    sign(&ws, &at, "keys/team.key");
    let entry = |extra: &str| format!("{{ref: '{at}', verify: {{key: keys/team.pub}}{extra}}}");
    write_config(&ws, &[entry("")], "");
    let list = skillhost(&ws, &["skill", "list"], &[]);
    assert!(list.stderr.contains("would replace the folder"), "{}", list.stderr);
    assert!(list.stdout.contains("local  (") && !list.stdout.contains(&digest), "the folder serves: {}", list.stdout);
    write_config(&ws, &[entry(", replaces: true")], "");
    let list = skillhost(&ws, &["skill", "list"], &[]);
    assert!(list.stderr.contains(&format!("{at} replaces the folder")), "said at start: {}", list.stderr);
    assert!(list.stdout.contains(&digest), "the artifact serves: {}", list.stdout);

    // Grants follow the source: unnamed, withheld and said why; named, given.
    let write = r#"{"path": "granted.txt", "content": "yes"}"#;
    write_config(&ws, &[entry(", replaces: true")], "    local: {memory: true}\n");
    let withheld = skillhost(&ws, &["call", "local__memory_write", write], &[]);
    let repository = format!("{}/team/local", registry.addr);
    assert!(
        withheld.stderr.contains("skills.grants.local withheld")
            && withheld.stderr.contains(&format!("source: {repository}")),
        "{}",
        withheld.stderr
    );
    assert!(!ws.path().join("memory/granted.txt").exists(), "no memory without the grant: {}", withheld.stdout);
    let named = format!("    local: {{memory: true, source: '{repository}'}}\n");
    write_config(&ws, &[entry(", replaces: true")], &named);
    let given = skillhost(&ws, &["call", "local__memory_write", write], &[]);
    assert_eq!(given.code, 0, "{}{}", given.stdout, given.stderr);
    assert_eq!(std::fs::read_to_string(ws.path().join("memory/granted.txt")).unwrap(), "yes");
    // A grant naming a repository is not the folder's.
    write_config(&ws, &[], &named);
    let folder = skillhost(&ws, &["call", "local__memory_write", write], &[]);
    assert!(folder.stderr.contains("not the folder"), "{}", folder.stderr);

    // An entry that fails verification says what serves its name instead.
    write_config(&ws, &[format!("{{ref: '{at}', verify: {{key: keys/other.pub}}}}")], "");
    ok(&ws, &["skill", "keygen", "--out", "keys/other"]);
    let list = skillhost(&ws, &["skill", "list"], &[]);
    let line = list.stderr.lines().find(|l| l.contains(&format!("skill `{at}`"))).unwrap_or_default();
    assert!(line.contains("the folder") && line.contains("serves `local` instead"), "{}", list.stderr);
}

/// Keyless signatures made by a throwaway Sigstore (`cosign.py keyless`: a Fulcio CA, a CT
/// log, a Rekor log, and the `trusted_root.json` naming them), in cosign 2's layout (`.sig`
/// annotations) and cosign 3's (a bundle referring to the artifact, found through the
/// referrers tag): by the identity and issuer the config names, each verifies offline, from
/// the registry and then from the cache, as does a cosign 3 bundle signed with a key; another
/// identity, another issuer, a CA the trust root does not name, an entry timestamp the log did
/// not sign, an inclusion proof that leads elsewhere, a trust root that is not there: each
/// refused with its reason while the others serve.
#[test]
fn keyless_signatures_verify_offline_against_the_trust_root_and_refuse_the_rest() {
    let mut registry = Registry::start();
    let addr = registry.addr.clone();
    let ws = Workspace::new();
    write_config(&ws, &[], "");
    // The bypass shapes (cosign's 2026 advisories), each a mode of `support/cosign.py keyless`,
    // and the refusal each must meet. An expired certificate with its log entry's time moved
    // into its validity: under the signed entry timestamp (which no longer verifies), and
    // under an inclusion proof alone (which signs no time; this one loaded before the fix).
    let bypasses = [
        ("movedtime", "moved-time", "a signed entry timestamp the transparency log did not sign"),
        ("bundlemoved", "bundle-moved-time", "nothing signs its integratedTime"),
        // A bare public key where the certificate goes: no chain, no identity.
        ("barekey", "bare-key", "a certificate field that holds no PEM certificate"),
        ("bundlebarekey", "bundle-bare-key", "certificate(s) are malformed"),
        // A genuine log entry of another artifact digest, signature or key.
        ("logdigest", "log-other-digest", "signature transparency materials are inconsistent"),
        ("logsig", "log-other-signature", "signature transparency materials are inconsistent"),
        ("logkey", "log-other-key", "signature transparency materials are inconsistent"),
        // Signed and logged, but not a payload: fails, never passes.
        ("badpayload", "bad-payload", "a payload that is not JSON"),
    ];
    let mut names = vec![
        "keyless",
        "bundled",
        "keybundle",
        "otherid",
        "otherissuer",
        "otherroot",
        "forgedlog",
        "badproof",
        "noroot",
    ];
    names.extend(bypasses.iter().map(|(name, ..)| *name));
    let digests: std::collections::BTreeMap<&str, String> =
        names.iter().map(|n| (*n, push(&ws, &registry, n))).collect();
    let (identity, issuer) = ("dev@team.example", "https://issuer.team.example");
    let sigstore = |name: &str, dir: &str, identity: &str, issuer: &str, mode: &str| {
        let dir = ws.path().join(dir).display().to_string();
        let repository = format!("team/{name}");
        let made = cosign_py(&["keyless", &dir, &addr, &repository, &digests[name], identity, issuer, mode]);
        assert_eq!(made.code, 0, "{name}: {}{}", made.stdout, made.stderr);
    };
    sigstore("keyless", "sigstore", identity, issuer, "");
    sigstore("bundled", "sigstore", identity, issuer, "bundle");
    sigstore("badproof", "sigstore", identity, issuer, "bundle-bad-proof");
    let (kb_key, kb_pub) = (ws.path().join("keys/kb.key"), ws.path().join("keys/kb.pub"));
    std::fs::create_dir_all(ws.path().join("keys")).unwrap();
    let made = cosign_py(&[
        "bundle-key",
        &addr,
        "team/keybundle",
        &digests["keybundle"],
        &kb_key.display().to_string(),
        &kb_pub.display().to_string(),
    ]);
    assert_eq!(made.code, 0, "{}{}", made.stdout, made.stderr);
    sigstore("otherid", "sigstore", "mallory@team.example", issuer, "");
    sigstore("otherissuer", "sigstore", identity, "https://accounts.elsewhere.example", "");
    sigstore("otherroot", "elsewhere", identity, issuer, "");
    sigstore("forgedlog", "sigstore", identity, issuer, "forged-log");
    sigstore("noroot", "sigstore", identity, issuer, "");
    for (name, mode, _) in bypasses {
        sigstore(name, "sigstore", identity, issuer, mode);
    }
    let at = |name: &str| format!("{}/team/{name}@{}", addr, digests[name]);
    let verify = |root: &str| format!("verify: {{identity: '{identity}', issuer: '{issuer}', trusted_root: {root}}}");
    let entries: Vec<String> = names
        .iter()
        .map(|name| {
            let root = if *name == "noroot" { "sigstore/nowhere.json" } else { "sigstore/trusted_root.json" };
            let verify = if *name == "keybundle" { "verify: {key: keys/kb.pub}".to_string() } else { verify(root) };
            format!("{{ref: '{}', {verify}}}", at(name))
        })
        .collect();
    // `skill pull` verifies keyless by the flags, and refuses another identity.
    let root = ws.path().join("sigstore/trusted_root.json").display().to_string();
    let keyless = |name: &str, dir: &str| {
        let reference = at(name);
        let args = [
            "skill",
            "pull",
            &reference,
            "--dir",
            dir,
            "--identity",
            identity,
            "--issuer",
            issuer,
            "--trusted-root",
            &root,
        ];
        skillhost(&ws, &args, &[])
    };
    let pulled = keyless("bundled", "pulled_keyless");
    assert_eq!((pulled.code, pulled.stdout.trim()), (0, digests["bundled"].as_str()), "{}", pulled.stderr);
    let refused = keyless("otherid", "pulled_otherid");
    assert!(refused.code != 0 && refused.stderr.contains("SubjectAltName does not match"), "{}", refused.stderr);
    assert!(!ws.path().join("pulled_otherid").exists(), "a refused pull writes nothing");
    write_config(&ws, &entries, "");
    let source = format!("signed keyless by {identity} ({issuer})");
    for online in [true, false] {
        if !online {
            registry.stop();
        }
        let list = skillhost(&ws, &["skill", "list"], &[]);
        assert_eq!(list.code, 0, "{}{}", list.stdout, list.stderr);
        for serving in ["keyless", "bundled", "keybundle", "local"] {
            let shown = list.stdout.contains(&format!("{serving}  ("));
            assert!(shown, "online {online}: {serving} serves:\n{}\n{}", list.stdout, list.stderr);
        }
        assert!(list.stdout.contains(&source), "{}", list.stdout);
        // Offline, what was refused was never cached: refused still, for that.
        let refused = |name: &str, reason: &str| {
            let line = list.stderr.lines().find(|l| l.contains(&format!("skill `{}`", at(name))));
            let line = line.unwrap_or_else(|| panic!("online {online}: no refusal of {name}:\n{}", list.stderr));
            let reason = if online { reason } else { "no cached copy" };
            assert!(line.contains(reason), "{name}: {reason:?} not in: {line}");
            assert!(!list.stdout.contains(&format!("{name}  (")), "{name} must not load:\n{}", list.stdout);
        };
        refused("otherid", "SubjectAltName does not match (got mallory@team.example, expected dev@team.example)");
        refused("otherissuer", "OIDCIssuer does not match (got https://accounts.elsewhere.example");
        refused("otherroot", "certificate verification failed");
        refused("forgedlog", "a signed entry timestamp the transparency log did not sign");
        refused("badproof", "an inclusion proof that does not lead to its root");
        refused("noroot", "sigstore/nowhere.json");
        for (name, _, reason) in bypasses {
            refused(name, reason);
        }
        let echoed = ok(&ws, &["call", "keyless__echo", r#"{"word": "keyless"}"#]);
        assert!(echoed.contains("keyless"), "online {online}: {echoed}");
    }
}

/// A server on 127.0.0.1 holding every request until released, then answering 200 `held`.
struct Held {
    port: u16,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    release: tokio::sync::watch::Sender<bool>,
}

async fn held_server() -> Held {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (release, released) = tokio::sync::watch::channel(false);
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut released = released.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(n @ 1..) => request.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = released.wait_for(|r| *r).await;
                let _ =
                    socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\nconnection: close\r\n\r\nheld").await;
            });
        }
    });
    Held { port, accepted, release }
}

/// The text of a turn's user message and its last tool result, if any.
fn conversation(body: &serde_json::Value) -> (String, Option<String>) {
    let messages = body["messages"].as_array().unwrap();
    let asked = messages[0]["content"].to_string();
    let last = &messages.last().unwrap()["content"];
    let result = last.as_array().into_iter().flatten().find(|b| b["type"] == "tool_result");
    (asked, result.map(|r| r["content"].to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_under_load_lets_calls_in_flight_and_approvals_finish_on_the_old_version() {
    use skillhost_tests::llm_server::{Answer, LlmServer, Reply};
    use support::api::{ApiProcess, TOKEN};
    let registry = Registry::start();
    let held = held_server().await;
    let url = format!("http://127.0.0.1:{}/slow", held.port);
    let llm = LlmServer::responding(Box::new(move |body: &serde_json::Value| {
        let answer = match conversation(body) {
            (_, Some(result)) => Answer::text(&[&format!("result: {result}")]),
            (asked, None) if asked.contains("hold") => {
                Answer::default().call("h", "probe__http_get", serde_json::json!({"url": url}))
            }
            _ => Answer::default().call("v", "probe__read_file", serde_json::json!({"path": "/skill/version.txt"})),
        };
        Reply::from(answer)
    }))
    .await;
    let ws = Workspace::new();
    let manifest = format!("{}files = \"self\"\n", probe_manifest());
    let mut digests = Vec::new();
    for version in ["v1", "v2"] {
        let dir = ws.add_skill(version, "probe", guests::PROBE, &manifest);
        std::fs::write(dir.join("version.txt"), version).unwrap();
        let reference = format!("{}/team/probe:{version}", registry.addr);
        digests.push(ok(&ws, &["skill", "push", &format!("{version}/probe"), &reference]).trim().to_string());
    }
    ws.add_skill("skills", "hooks_all", guests::HOOKS_ALL, "");
    let config = |digest: &str| {
        let llm = format!(
            "llm: {{provider: anthropic, model: test-model, max_tokens: 500, anthropic: {{api_key: test, base_url: '{}'}}}}\n",
            llm.url()
        );
        // An entry refused from the start (a tag without a digest) does not stop a reload.
        let oci = format!(
            "  oci:\n    - {{ref: '{0}/team/probe@{digest}', allow_unsigned: true}}\n    - {{ref: '{0}/team/broken:1.0', allow_unsigned: true}}\n",
            registry.addr
        );
        let grants = format!(
            "  grants:\n    probe: {{source: '{}/team/probe', http_hosts: ['127.0.0.1'], memory: true}}\n",
            registry.addr
        );
        let rest = "human:\n  overrides: {probe__read_file: approve}\nstate:\n  filesystem: {path: state}\nsandbox:\n  cache_dir: cache\n";
        let yaml =
            format!("{llm}adapter: {{type: api}}\nskills:\n  paths: [skills]\n  builtins: []\n{oci}{grants}{rest}");
        std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    };
    config(&digests[0]);
    let api = ApiProcess::start_with(&ws, &[("RUST_LOG", "skillhost=info")]).await;
    assert_eq!(api.stderr().matches("skill `hooks_all`: startup ran").count(), 1, "{}", api.stderr());
    let pending = api.stderr().lines().find(|l| l.contains("in the background:")).unwrap_or_default().to_owned();
    assert!(pending.contains("probe"), "pulled while the server answered, like a compile: {}", api.stderr());

    // 20 calls in flight (each held by the server) and an approval waiting.
    let mut in_flight = Vec::new();
    for i in 0..20 {
        let request = api.trigger("wait=1", "hold", &format!("hold-{i}"));
        in_flight.push(tokio::spawn(async move { request.send().await.unwrap() }));
    }
    let started = Instant::now();
    while held.accepted.load(std::sync::atomic::Ordering::SeqCst) < 20 {
        assert!(started.elapsed() < support::PROCESS_LIMIT, "calls in flight: {}", api.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut waiting = api.stream("version", "before").await;
    let asked = waiting.until("approval_requested").await.last().unwrap().data.clone();

    // The new version swapped in.
    config(&digests[1]);
    let client = reqwest::Client::new();
    let reload = client.post(format!("{}/api/skills/reload", api.base())).bearer_auth(TOKEN);
    let answered = reload.send().await.unwrap();
    let status = answered.status().as_u16();
    let body: serde_json::Value = answered.json().await.unwrap();
    assert_eq!(status, 200, "{body}\n{}", api.stderr());
    assert!(body.to_string().contains(&digests[1]), "{body}");
    let unauthorised = client.post(format!("{}/api/skills/reload", api.base())).send().await.unwrap();
    assert!(api.stderr().contains("skill pulled and verified"), "{}", api.stderr());
    assert_eq!(unauthorised.status().as_u16(), 401, "behind the token");

    // Everything in flight finishes, on the version it began with.
    held.release.send(true).unwrap();
    for call in in_flight {
        let response = call.await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert!(status == 200 && text.contains("held"), "{status}: {text}");
    }
    let decided = api.decide(asked["approval_id"].as_str().unwrap(), &serde_json::json!({"approved": true}));
    assert_eq!(decided.send().await.unwrap().status(), 200);
    let done = waiting.rest().await;
    let completed = done.iter().find(|e| e.kind == "run_completed").unwrap_or_else(|| panic!("{done:#?}"));
    assert!(completed.data["text"].to_string().contains("v1"), "the approved call ran the old version: {completed:?}");

    // The next call runs the new one; the unchanged skill was not started again.
    let mut next = api.stream("version", "after").await;
    let asked = next.until("approval_requested").await.last().unwrap().data.clone();
    let decided = api.decide(asked["approval_id"].as_str().unwrap(), &serde_json::json!({"approved": true}));
    assert_eq!(decided.send().await.unwrap().status(), 200);
    let done = next.rest().await;
    let completed = done.iter().find(|e| e.kind == "run_completed").unwrap_or_else(|| panic!("{done:#?}"));
    assert!(completed.data["text"].to_string().contains("v2"), "{completed:?}");
    assert_eq!(api.stderr().matches("skill `hooks_all`: startup ran").count(), 1, "{}", api.stderr());

    // A reload that fails (an entry refused) leaves the set serving, and says why.
    config(&format!("sha256:{}", "0".repeat(64)));
    let answered = client.post(format!("{}/api/skills/reload", api.base())).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(answered.status().as_u16(), 409);
    let body: serde_json::Value = answered.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("still serve"), "{body}");
    let skills: serde_json::Value =
        client.get(format!("{}/api/skills", api.base())).bearer_auth(TOKEN).send().await.unwrap().json().await.unwrap();
    assert!(skills.to_string().contains(&digests[1]), "the old set serves: {skills}");

    // SIGHUP does the same.
    config(&digests[0]);
    std::process::Command::new("kill").args(["-HUP", &api.pid().to_string()]).status().unwrap();
    let started = Instant::now();
    while !api.stderr().contains("skills reloaded (SIGHUP)") {
        assert!(started.elapsed() < support::PROCESS_LIMIT, "{}", api.stderr());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let skills: serde_json::Value =
        client.get(format!("{}/api/skills", api.base())).bearer_auth(TOKEN).send().await.unwrap().json().await.unwrap();
    assert!(skills.to_string().contains(&digests[0]), "{skills}");
}

#[test]
fn credentials_come_from_the_command_line_or_dockers_config() {
    let registry = Registry::start_with(Some(("ada", "s3cret")));
    let ws = Workspace::new();
    write_config(&ws, &[], "");
    let folder = skill_folder(&ws, "guarded");
    let reference = format!("{}/team/guarded:1.0", registry.addr);
    let refused = skillhost(&ws, &["skill", "push", &folder, &reference], &[("DOCKER_CONFIG", "/nonexistent")]);
    assert_ne!(refused.code, 0, "no credentials: {}", refused.stdout);
    assert!(refused.stderr.to_lowercase().contains("unauthorized"), "{}", refused.stderr);

    let mut push = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    push.current_dir(ws.path()).args(["skill", "push", &folder, &reference, "--username", "ada", "--password-stdin"]);
    push.env("DOCKER_CONFIG", "/nonexistent");
    let pushed = support::run_bounded(push, "s3cret\n");
    assert_eq!(pushed.code, 0, "{}", pushed.stderr);
    let digest = pushed.stdout.trim().to_string();

    // Docker's config.json, as `docker login` writes it.
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode("ada:s3cret");
    let docker = ws.path().join("docker");
    std::fs::create_dir_all(&docker).unwrap();
    let json = serde_json::json!({"auths": {registry.addr.clone(): {"auth": auth}}});
    std::fs::write(docker.join("config.json"), json.to_string()).unwrap();
    let env = [("DOCKER_CONFIG", docker.to_str().unwrap())];
    let pulled = skillhost(&ws, &["skill", "pull", &reference, "--dir", "pulled", "--allow-unsigned"], &env);
    assert_eq!((pulled.code, pulled.stdout.trim()), (0, digest.as_str()), "{}", pulled.stderr);
    let entry = format!("{{ref: '{}/team/guarded@{digest}', allow_unsigned: true}}", registry.addr);
    write_config(&ws, &[entry], "");
    let list = skillhost(&ws, &["skill", "list"], &env);
    assert!(list.stdout.contains("guarded  ("), "{}{}", list.stdout, list.stderr);
    let _ = std::fs::remove_dir_all(ws.path().join("cache/oci"));
    let list = skillhost(&ws, &["skill", "list"], &[("DOCKER_CONFIG", "/nonexistent")]);
    assert!(!list.stdout.contains("guarded  ("), "without credentials: {}", list.stdout);
    assert!(list.stderr.contains("skills.oci: the registry refused"), "{}", list.stderr);
}

/// A registry that lies about sizes, on a free loopback port (its own runtime): every
/// manifest declares a files layer of 512 bytes, and every answer it can make long is 1 GiB,
/// sent as it is pulled. `sent` counts what it produced.
struct Liar {
    addr: String,
    sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
    _runtime: tokio::runtime::Runtime,
}

/// What the liar sends where it can send anything: 1 GiB.
const GIB: u64 = 1 << 30;

impl Liar {
    fn start() -> Liar {
        use axum::extract::{Path as Route, State};
        use axum::http::{StatusCode, header};
        use axum::response::{IntoResponse, Response};
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU64, Ordering};

        fn endless(sent: Arc<AtomicU64>) -> axum::body::Body {
            let chunk = bytes::Bytes::from(vec![b' '; 64 << 10]);
            let chunks = futures::stream::iter(0..GIB / (64 << 10)).map(move |_| {
                sent.fetch_add(64 << 10, Ordering::Relaxed);
                Ok::<_, std::io::Error>(chunk.clone())
            });
            axum::body::Body::from_stream(chunks)
        }
        async fn answer(State(sent): State<Arc<AtomicU64>>, Route(path): Route<String>) -> Response {
            let Some((repository, rest)) = path
                .split_once("/manifests/")
                .or_else(|| path.split_once("/blobs/"))
                .or_else(|| path.split_once("/referrers/"))
            else {
                return StatusCode::NOT_FOUND.into_response();
            };
            let kind = &path[repository.len() + 1..path.len() - rest.len() - 1];
            match (repository, kind) {
                ("liar/manifest", "manifests") | (_, "blobs") | (_, "referrers") => endless(sent).into_response(),
                // The signature tag: none.
                (_, "manifests") if rest.ends_with(".sig") => {
                    let body = r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#;
                    (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "application/json")], body).into_response()
                }
                (_, "manifests") => {
                    let manifest = Liar::manifest(repository);
                    let media = "application/vnd.oci.image.manifest.v1+json";
                    ([(header::CONTENT_TYPE, media)], manifest).into_response()
                }
                _ => StatusCode::NOT_FOUND.into_response(),
            }
        }
        use futures::StreamExt as _;
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let sent = Arc::new(AtomicU64::new(0));
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let app = axum::Router::new()
            .route("/v2/", axum::routing::get(|| async { "{}" }))
            .route("/v2/{*path}", axum::routing::get(answer))
            .with_state(sent.clone());
        runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
        Liar { addr, sent, _runtime: runtime }
    }

    /// The manifest the liar serves for `repository`: a skill whose files layer declares
    /// 512 bytes (`liar/declared`: a terabyte).
    fn manifest(repository: &str) -> String {
        let size: u64 = if repository == "liar/declared" { 1 << 40 } else { 512 };
        let zeros = format!("sha256:{}", "0".repeat(64));
        serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": zeros, "size": 2},
            "layers": [{"mediaType": "application/vnd.skillhost.skill.files.v1.tar", "digest": zeros, "size": size}],
            "annotations": {"dev.skillhost.skill.name": "blob"},
        })
        .to_string()
    }

    /// The bytes produced since the last call.
    fn take_sent(&self) -> u64 {
        self.sent.swap(0, std::sync::atomic::Ordering::Relaxed)
    }
}

/// `skill pull REF --dir pulled` plus `extra`, refused: its stderr and peak memory (KiB);
/// nothing is left behind.
fn refused_pull(ws: &Workspace, reference: &str, extra: &[&str]) -> (String, i64) {
    let mut args = vec!["skill", "pull", reference, "--dir", "pulled"];
    args.extend_from_slice(extra);
    let out = skillhost(ws, &args, &[]);
    assert_ne!(out.code, 0, "{}", out.stdout);
    let left: Vec<_> = std::fs::read_dir(ws.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(!left.iter().any(|name| name.to_string_lossy().contains("pull")), "left behind: {left:?}");
    (out.stderr, out.peak_kib)
}

#[test]
fn a_registry_that_streams_more_than_it_declares_is_stopped_at_the_bound_in_flat_memory() {
    let liar = Liar::start();
    let ws = Workspace::new();
    let bound = |bytes: u64| {
        let yaml =
            format!("skills:\n  paths: []\n  builtins: []\n  oci_max_bytes: {bytes}\nsandbox:\n  cache_dir: cache\n");
        std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    };
    let blob = format!("{}/liar/blob:1", liar.addr);

    // The files layer declares 512 bytes and streams 1 GiB: stopped at skills.oci_max_bytes,
    // counted on what arrived.
    bound(8 << 20);
    let (small, small_peak) = refused_pull(&ws, &blob, &["--allow-unsigned"]);
    assert!(small.contains("is over 8388608 bytes"), "{small}");
    assert!(liar.take_sent() < GIB / 2, "the pull stopped");
    bound(128 << 20);
    let (large, large_peak) = refused_pull(&ws, &blob, &["--allow-unsigned"]);
    assert!(large.contains("is over 134217728 bytes"), "{large}");
    let sent = liar.take_sent();
    assert!((128 << 20..GIB / 2).contains(&sent), "received to the bound, then stopped: {sent}");
    // Streamed to disk: 120 MiB more received, the same memory (the old buffered pull held
    // the whole blob).
    assert!(large_peak - small_peak < 32 << 10, "peak {small_peak} KiB at 8 MiB, {large_peak} KiB at 128 MiB");

    // A declared size over the bound is refused before anything is fetched.
    let (declared, _) = refused_pull(&ws, &format!("{}/liar/declared:1", liar.addr), &["--allow-unsigned"]);
    assert!(declared.contains("(declared 1099511627776 bytes) is over 134217728 bytes"), "{declared}");
    assert_eq!(liar.take_sent(), 0);

    // A 1 GiB manifest, and a 1 GiB referrers answer while verifying: stopped at 4 MiB.
    let (manifest, manifest_peak) = refused_pull(&ws, &format!("{}/liar/manifest:1", liar.addr), &["--allow-unsigned"]);
    assert!(manifest.contains("the manifest is over 4194304 bytes"), "{manifest}");
    assert!(manifest_peak - small_peak < 32 << 10, "peak {manifest_peak} KiB");
    assert!(liar.take_sent() < GIB / 2);
    ok(&ws, &["skill", "keygen", "--out", "k"]);
    let (referrers, referrers_peak) =
        refused_pull(&ws, &format!("{}/liar/referrers:1", liar.addr), &["--key", "k.pub"]);
    assert!(referrers.contains("the referrers index is over 4194304 bytes"), "{referrers}");
    assert!(referrers_peak - small_peak < 32 << 10, "peak {referrers_peak} KiB");
    assert!(liar.take_sent() < GIB / 2);

    // A `skills.oci` entry loads through the same bound; the cache keeps nothing of it.
    let digest = format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(Liar::manifest("liar/blob"))));
    let yaml = format!(
        "skills:\n  paths: []\n  builtins: []\n  oci_max_bytes: 1048576\n  oci:\n    - {{ref: '{}/liar/blob@{digest}', \
         allow_unsigned: true}}\nstate:\n  filesystem: {{path: state}}\nsandbox:\n  cache_dir: cache\n",
        liar.addr
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let list = skillhost(&ws, &["skill", "list"], &[]);
    assert!(list.stderr.contains("is over 1048576 bytes"), "{}\n{}", list.stdout, list.stderr);
    assert!(
        files(&ws.path().join("cache/oci")).iter().all(|f| !f.contains("skills/")),
        "{:?}",
        files(&ws.path().join("cache/oci"))
    );
}
