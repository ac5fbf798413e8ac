use super::*;
use crate::sandbox::CallContext;
use crate::skills::Skill;
use crate::skills::prompt::{Prompt, parse_skill_md};
use crate::tools::NoScope;

fn skill_md(name: &str) -> Prompt {
    parse_skill_md(&format!("---\nname: {name}\ndescription: Helps with {name}.\n---\nBODY OF {name}\n")).unwrap()
}

/// `pdf` and `git` from SKILL.md, `notes` from prompt.md.
fn set() -> SkillSet {
    let mut set = SkillSet::default();
    let skills = [("pdf", skill_md("pdf")), ("git", skill_md("git")), ("notes", Prompt::prompt_md("NOTES"))];
    for (name, prompt) in skills {
        let skill = Skill::new(name.into(), PathBuf::from(format!("/skills/{name}")), prompt, json!({}));
        set.skills.insert(name.into(), Arc::new(skill));
    }
    set
}

fn decl(name: &str) -> ToolDecl {
    ToolDecl { name: name.into(), description: String::new(), input_schema: json!({"type": "object"}).into() }
}

fn catalog(overrides: &[(&str, Loading)]) -> Arc<OnDemand> {
    let overrides: BTreeMap<String, Loading> = overrides.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let loading_of = |s: &str| overrides.get(s).copied().unwrap_or(Loading::OnDemand);
    Arc::new(OnDemand::new(&set(), loading_of, &[decl("pdf__extract"), decl("git__log")]))
}

fn ctx() -> CallContext {
    CallContext::standalone("c")
}

#[test]
fn skill_md_skills_load_on_demand_unless_overridden_and_prompt_md_never() {
    let all = catalog(&[]);
    assert_eq!(all.listed().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["git", "pdf"]);
    assert!(!all.contains("notes"), "prompt.md keeps being injected");
    assert_eq!(all.get("pdf").unwrap().tools, ["pdf__extract"]);
    assert_eq!(all.get("pdf").unwrap().description, "Helps with pdf.");
    let some = catalog(&[("git", Loading::Always)]);
    assert!(some.contains("pdf") && !some.contains("git"));
}

#[tokio::test]
async fn tools_are_withheld_until_their_skill_is_loaded() {
    let tool = LoadSkill::new(catalog(&[]), BTreeSet::new());
    assert!(tool.withholds("pdf__extract") && tool.withholds("git__log"));
    assert!(!tool.withholds("notes__x") && !tool.withholds("load_skill"));
    let refused = tool.check("pdf__extract", &json!({})).unwrap_err();
    assert_eq!(refused.error_kind.as_deref(), Some("skill_not_loaded"));
    assert!(refused.content.contains(r#"call `load_skill` with {\"skill\": \"pdf\"} first"#), "{}", refused.content);

    let (ctx, input) = (ctx(), json!({"skill": "pdf"}));
    assert!(tool.check(LOAD_SKILL, &input).is_ok());
    let call = ToolCall { id: "1", name: LOAD_SKILL, input: &input, ctx: &ctx };
    let outcome = tool.execute(call, &NoScope).await;
    assert!(!outcome.is_error, "{}", outcome.content);
    assert!(
        outcome.content.contains("BODY OF pdf") && outcome.content.contains("`pdf__extract`"),
        "{}",
        outcome.content
    );
    assert!(!tool.withholds("pdf__extract") && tool.withholds("git__log"), "only the loaded skill's tools");
    assert!(tool.check("pdf__extract", &json!({})).is_ok());
    assert_eq!(tool.loaded(), BTreeSet::from(["pdf".to_owned()]));
}

#[test]
fn unknown_skills_are_clear_errors_and_the_decl_lists_the_skills() {
    let tool = LoadSkill::new(catalog(&[]), BTreeSet::from(["gone".to_owned()]));
    assert!(tool.loaded().is_empty(), "a skill no longer on demand is dropped");
    let err = tool.check(LOAD_SKILL, &json!({"skill": "nope"})).unwrap_err();
    assert!(err.content.contains("no skill `nope` to load; skills to load: `git`, `pdf`"), "{}", err.content);
    let err = tool.check(LOAD_SKILL, &json!({})).unwrap_err();
    assert_eq!(err.error_kind.as_deref(), Some("invalid_input"));
    let decls = tool.decls();
    assert_eq!(decls[0].name, LOAD_SKILL);
    assert_eq!(decls[0].input_schema["properties"]["skill"]["enum"], json!(["git", "pdf"]));
}

#[test]
fn loads_count_from_the_messages_only_when_they_succeeded() {
    let use_ = |id: &str, skill: &str| Block::ToolUse {
        id: id.into(),
        name: LOAD_SKILL.into(),
        input: json!({"skill": skill}),
    };
    let result = |id: &str, is_error| Block::ToolResult { tool_use_id: id.into(), content: String::new(), is_error };
    let messages = vec![
        Message::assistant(vec![use_("a", "pdf"), use_("b", "git"), use_("c", "nope")]),
        Message {
            role: crate::llm::Role::User,
            content: vec![result("a", false), result("b", true), result("c", false)],
        },
    ];
    assert_eq!(catalog(&[]).loaded_in(&messages), BTreeSet::from(["pdf".to_owned()]));
}

#[test]
fn overrides_are_checked_against_the_loaded_skills() {
    let overrides = |pairs: &[(&str, Loading)]| pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    // A name no skill has is reported with the config's other names (app::names).
    check_overrides(&set(), &overrides(&[("pdf", Loading::Always), ("ghost", Loading::Always)])).unwrap();
    let err = check_overrides(&set(), &overrides(&[("notes", Loading::OnDemand)])).unwrap_err();
    assert!(err.contains("skills.loading_overrides.notes: `on_demand` needs a SKILL.md"), "{err}");
    check_overrides(&set(), &overrides(&[("notes", Loading::Always)])).unwrap();
}
