//! `skill validate` checks SKILL.md against the open Agent Skills rules, through the binary:
//! each broken rule named, warnings by default, errors under `--strict`; a folder that keeps
//! the rules passes either way.

mod support;

use skillhost_tests::Workspace;

fn skill_md(ws: &Workspace, folder: &str, frontmatter: &str) {
    let dir = ws.path().join("skills").join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), format!("---\n{frontmatter}---\nDo the thing.\n")).unwrap();
}

fn workspace() -> Workspace {
    let ws = Workspace::new();
    std::fs::write(ws.path().join("config.yaml"), "skills:\n  paths: [skills]\n  builtins: []\n").unwrap();
    ws
}

#[test]
fn a_shared_folder_is_checked_against_the_agent_skills_rules() {
    let ws = workspace();
    skill_md(&ws, "pdf-tools", "name: pdf-tools\ndescription: Fills PDF forms.\nmetadata: {version: '1.0'}\n");
    let clean = support::skillhost(&ws, &["--strict", "skill", "validate"], "");
    assert_eq!(clean.code, 0, "{}{}", clean.stdout, clean.stderr);
    assert!(!clean.stderr.contains("Agent Skills"), "{}", clean.stderr);

    let long = "x".repeat(501);
    let frontmatter =
        format!("name: Pdf-Forms-\ndescription: Fills forms.\ncompatibility: {long}\nmetadata: {{pages: 3}}\n");
    skill_md(&ws, "forms", &frontmatter);
    let warned = support::skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(warned.code, 0, "warnings only: {}{}", warned.stdout, warned.stderr);
    for rule in [
        "warning: skill `pdf_forms`: SKILL.md: name `Pdf-Forms-`: only lowercase letters, digits and `-`",
        "name `Pdf-Forms-`: no leading, trailing or double `-`",
        "name `Pdf-Forms-`: must equal the folder's name (`forms`)",
        "compatibility: 501 characters; at most 500",
        "metadata: not a map of strings to strings",
    ] {
        assert!(warned.stderr.contains(rule), "{rule:?} in:\n{}", warned.stderr);
    }
    let strict = support::skillhost(&ws, &["--strict", "skill", "validate"], "");
    assert_eq!(strict.code, 1, "{}{}", strict.stdout, strict.stderr);
    assert!(strict.stderr.contains("error: skill `pdf_forms`: SKILL.md: compatibility"), "{}", strict.stderr);
    assert!(strict.stdout.contains("5 problem(s)"), "{}", strict.stdout);
}
