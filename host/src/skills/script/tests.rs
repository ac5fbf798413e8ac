use super::*;
use crate::skills::prompt::parse_skill_md;
use serde_json::json;

fn decls(tools: &str) -> Result<Vec<ScriptDecl>, String> {
    let md = format!("---\nname: calc\ndescription: Arithmetic helpers.\ntools:\n{tools}---\nbody\n");
    let prompt = parse_skill_md(&md)?;
    declarations(prompt.tools.as_ref())
}

const ADD: &str = "  add:\n    description: Sum two integers.\n    script: scripts/add.py\n    args:\n      \
                   b:\n        type: string\n        description: Second int\n      a:\n        type: integer\n";

#[test]
fn the_specs_example_keeps_argument_order_and_the_skills_description() {
    let md = format!("---\nname: calc\ndescription: Arithmetic helpers.\ntools:\n{ADD}---\nbody\n");
    let prompt = parse_skill_md(&md).unwrap();
    assert_eq!(prompt.description, "Arithmetic helpers.", "a tool's description is not the skill's");
    let decls = declarations(prompt.tools.as_ref()).unwrap();
    let add = &decls[0];
    assert_eq!(
        (add.name.as_str(), add.script.as_str(), add.description.as_str()),
        ("add", "scripts/add.py", "Sum two integers.")
    );
    let names: Vec<&str> = add.args.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["b", "a"], "declared order, not sorted");
    assert_eq!(add.args[0].description, "Second int");
    assert_eq!(add.argv(&json!({"a": 2, "b": "x y"})), ["scripts/add.py", "x y", "2"]);
    assert_eq!(
        add.schema(),
        json!({
            "type": "object",
            "properties": {"b": {"type": "string", "description": "Second int"}, "a": {"type": "integer", "description": ""}},
            "required": ["b", "a"],
            "additionalProperties": false,
        })
    );
}

#[test]
fn arguments_render_as_argv_strings() {
    let decl = &decls(
        "  t:\n    description: T.\n    script: t.wasm\n    args:\n      f: {type: number}\n      b: {type: boolean}\n",
    )
    .unwrap()[0];
    assert_eq!(decl.argv(&json!({"f": 1.5, "b": true})), ["t.wasm", "1.5", "true"]);
    assert_eq!(decl.kind(), Ok(ScriptKind::Wasm));
    assert_eq!(decl.artifact(Path::new("/s")), Path::new("/s/t.wasm"));
    let py = &decls(ADD).unwrap()[0];
    assert_eq!(py.artifact(Path::new("/s")), Path::new("/s/.build/scripts/add.py.wasm"));
}

#[test]
fn a_tool_without_args_takes_an_empty_object() {
    let decl = &decls("  now:\n    description: Now.\n    script: now.js\n").unwrap()[0];
    assert_eq!(decl.schema()["required"], json!([]));
    assert_eq!(decl.argv(&json!({})), ["now.js"]);
}

#[test]
fn mistakes_are_named() {
    let cases = [
        ("  add: 1\n", "`tools.add` must be a mapping"),
        ("  add:\n    script: a.py\n", "`tools.add` has no `description`"),
        ("  add:\n    description: D.\n", "`tools.add` has no `script`"),
        ("  add:\n    description: D.\n    script: a.py\n    arg: {}\n", "unknown key `arg`"),
        ("  add:\n    description: D.\n    script: ../a.py\n", "inside the skill folder"),
        ("  add:\n    description: D.\n    script: /bin/a.py\n", "inside the skill folder"),
        ("  add:\n    description: D.\n    script: a.py\n    args:\n      x: {type: list}\n", "`list` is not one of"),
        ("  add:\n    description: D.\n    script: a.py\n    args: [x]\n", "args must be a mapping"),
        ("  add:\n    description: D.\n    script: a.py\n    args:\n      x: {kind: string}\n", "unknown key `kind`"),
    ];
    for (tools, expected) in cases {
        let err = decls(tools).unwrap_err();
        assert!(err.contains(expected), "{tools:?}: {err}");
    }
    let err = declarations(Some(&Yaml::String("x".into()))).unwrap_err();
    assert!(err.contains("`tools` must be a mapping"), "{err}");
}

#[test]
fn only_sandboxable_scripts_are_accepted() {
    assert_eq!(ScriptKind::of("a.py"), Ok(ScriptKind::Python));
    assert_eq!(ScriptKind::of("a.js"), Ok(ScriptKind::JavaScript));
    for refused in ["run.sh", "x.rb", "bin/tool"] {
        let err = ScriptKind::of(refused).unwrap_err();
        assert!(err.contains(&format!("`{refused}`")) && err.contains("runs no host processes"), "{err}");
        assert!(err.contains("(.py)") && err.contains("(.js)") && err.contains("(.wasm"), "what to do instead: {err}");
    }
}

#[test]
fn skills_without_a_tools_block_declare_nothing() {
    let prompt = parse_skill_md("---\nname: a\ndescription: b\n---\nbody\n").unwrap();
    assert_eq!(prompt.tools, None);
    assert!(declarations(prompt.tools.as_ref()).unwrap().is_empty());
}
