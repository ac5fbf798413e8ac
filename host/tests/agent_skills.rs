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

#[test]
fn allowed_tools_pre_approve_the_skills_own_tools_only_when_honoured() {
    let ws = workspace();
    let dir = ws.path().join("skills/hooks-all");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(skillhost_tests::guests::HOOKS_ALL, dir.join("skill.wasm")).unwrap();
    let frontmatter = "---\nname: hooks-all\ndescription: Hooks.\nallowed-tools: plain Read\n---\nUse it.\n";
    std::fs::write(dir.join("SKILL.md"), frontmatter).unwrap();
    let config = |extra: &str| {
        let yaml =
            format!("skills:\n  paths: [skills]\n  builtins: []\n{extra}state:\n  filesystem: {{path: state}}\n");
        std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    };
    // The hook asks approval for this input; there is no terminal to ask on.
    let call = |ws: &Workspace, tool: &str| support::skillhost(ws, &["call", tool, r#"{"level": "approve"}"#], "");

    config("");
    let asked = call(&ws, "hooks_all__plain");
    assert!(
        asked.code != 0 && asked.stderr.contains("needs `approve` approval"),
        "kept, not acted on: {}",
        asked.stderr
    );

    config("  honour_allowed_tools: true\n");
    let ran = call(&ws, "hooks_all__plain");
    assert_eq!(ran.code, 0, "pre-approved: {}", ran.stderr);
    let other = call(&ws, "hooks_all__dyn_tool");
    assert!(other.code != 0 && other.stderr.contains("needs `approve` approval"), "not listed: {}", other.stderr);
    let list = support::skillhost(&ws, &["skill", "list"], "");
    assert!(
        list.stdout.contains("hooks_all__plain  [approval: none, pre-approved by SKILL.md allowed-tools]"),
        "{}",
        list.stdout
    );

    config("  honour_allowed_tools: true\nhuman:\n  overrides: {hooks_all__plain: approve}\n");
    let overridden = call(&ws, "hooks_all__plain");
    assert!(
        overridden.code != 0 && overridden.stderr.contains("needs `approve` approval"),
        "the operator's word: {}",
        overridden.stderr
    );
}
