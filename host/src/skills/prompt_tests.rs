use super::*;

#[test]
fn skill_md_frontmatter() {
    let p = parse_skill_md("---\nname: web-search\ndescription: Search the web.\nauthor: x\n---\n\n# Body\ntext\n")
        .unwrap();
    assert_eq!(p.name.as_deref(), Some("web-search"));
    assert_eq!(p.description, "Search the web.");
    assert_eq!(p.body, "# Body\ntext");
    assert_eq!(p.frontmatter["author"], "x", "other keys are kept");
    assert_eq!(slugify("web-search"), "web_search");
}

#[test]
fn skill_md_errors() {
    assert!(parse_skill_md("no frontmatter").unwrap_err().contains("---"));
    assert!(parse_skill_md("---\nname: x\n").unwrap_err().contains("not closed"));
    assert!(parse_skill_md("---\nname: x\n---\nbody").unwrap_err().contains("no `description`"));
    assert!(parse_skill_md("---\ndescription: d\n---\nbody").unwrap_err().contains("no `name`"));
    assert!(parse_skill_md("---\nname: ''\ndescription: d\n---\n").unwrap_err().contains("no `name`"));
    let err = parse_skill_md("---\nname: x\ndescription: [a\n---\n").unwrap_err();
    assert!(err.contains("not valid YAML"), "{err}");
    let err = parse_skill_md("---\nname: x\ndescription:\n  nested: map\n---\n").unwrap_err();
    assert!(err.contains("`description` must be text"), "{err}");
}

#[test]
fn yaml_descriptions_multi_line_and_quoted() {
    let folded = "---\nname: \"pdf: tools\"\ndescription: >\n  Extract text\n  from PDFs.\n---\nBody";
    let p = parse_skill_md(folded).unwrap();
    assert_eq!(p.name.as_deref(), Some("pdf: tools"));
    assert_eq!(p.description, "Extract text from PDFs.");
    let literal = "---\nname: x\ndescription: |\n  Line one.\n  Line two.\n---\nBody";
    assert_eq!(parse_skill_md(literal).unwrap().description, "Line one.\nLine two.");
    let quoted = "---\nname: x\ndescription: 'It''s: quoted, # not a comment'\n---\n";
    assert_eq!(parse_skill_md(quoted).unwrap().description, "It's: quoted, # not a comment");
}

#[test]
fn license_allowed_tools_metadata_and_nested_keys() {
    let text = "---\nname: data-tools\ndescription: Work with data.\nlicense: Apache-2.0\n\
                allowed-tools: Bash(git:*) Read\nmetadata:\n  name: not-the-name\n  version: \"1.0\"\n\
                tools:\n  add:\n    description: Adds numbers.\n    script: scripts/add.py\n---\nBody\n";
    let p = parse_skill_md(text).unwrap();
    assert_eq!(p.name.as_deref(), Some("data-tools"), "a nested `name` is not the skill's");
    assert_eq!(p.description, "Work with data.", "an indented `description:` under `tools:` is not the skill's");
    assert_eq!(p.license.as_deref(), Some("Apache-2.0"));
    assert_eq!(p.allowed_tools, ["Bash(git:*)", "Read"]);
    assert_eq!(p.frontmatter["metadata"]["version"], "1.0");
    assert_eq!(p.frontmatter["tools"]["add"]["script"], "scripts/add.py");
    let listed = parse_skill_md("---\nname: x\ndescription: d\nallowed-tools: [Read, Write]\n---\n").unwrap();
    assert_eq!(listed.allowed_tools, ["Read", "Write"]);
}

#[test]
fn an_opening_line_with_trailing_whitespace_keeps_the_body_whole() {
    let p = parse_skill_md("---  \r\nname: x\ndescription: d\n---\t\n# Title\nbody").unwrap();
    assert_eq!(p.body, "# Title\nbody");
    assert_eq!(p.description, "d");
}

#[test]
fn names_are_slugified_to_valid_skill_names() {
    assert_eq!(slugify("Web Search!"), "web_search");
    assert_eq!(slugify("--pdf--tools--"), "pdf_tools");
    assert_eq!(slugify("data_tools"), "data_tools");
}

#[test]
fn reference_files_are_listed_with_their_paths() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
    };
    std::fs::write(dir.path().join("SKILL.md"), "---\nname: x\ndescription: d\n---\nRead reference.md.").unwrap();
    for file in [
        "reference.md",
        "scripts/add.py",
        "skill.toml",
        "skill.wasm",
        ".hidden",
        "target/x",
        "scripts/__pycache__/a.pyc",
    ] {
        write(file);
    }
    let p = load(dir.path(), DEFAULT_MAX_PROMPT_BYTES).unwrap().unwrap();
    assert_eq!(p.references, ["reference.md", "scripts/add.py"]);
    let text = p.system_text(dir.path());
    assert!(text.starts_with("Read reference.md.\n\nFiles of this skill"), "{text}");
    assert!(text.contains(&format!("- {}", dir.path().join("scripts/add.py").display())), "{text}");
    assert_eq!(Prompt::prompt_md("Just text.").system_text(dir.path()), "Just text.");
}

#[test]
fn prompt_files_past_the_cap_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prompt.md"), "x".repeat(2048)).unwrap();
    let err = load(dir.path(), 1024).unwrap_err();
    assert_eq!(err.file, "prompt.md");
    assert!(err.message.contains("skills.max_prompt_bytes (1024 bytes)"), "{err}");
    assert!(load(dir.path(), 2048).unwrap().is_some(), "exactly the cap is accepted");
    std::fs::remove_file(dir.path().join("prompt.md")).unwrap();
    std::fs::write(dir.path().join("SKILL.md"), format!("---\nname: x\ndescription: d\n---\n{}", "y".repeat(2048)))
        .unwrap();
    assert_eq!(load(dir.path(), 1024).unwrap_err().file, "SKILL.md");
}
