//! What skills serve MCP clients beyond tools and their files: resources under their own URIs
//! and templates (the `resources` export), and prompts with arguments and completions (the
//! `prompts` export). Reads and prompts run sandboxed, like tool calls; a prompt is named
//! `<skill>__<prompt>`, or by its own name for a `[mcp] names = "bare"` skill.

use super::content;
use crate::sandbox::CallContext;
use crate::skills::manifest::McpNames;
use crate::skills::served::{PromptDef, Role as ServedRole, ServeError};
use crate::skills::skill::{SEPARATOR, split_exposed};
use crate::skills::{Skill, SkillSet};
use rmcp::ErrorData;
use rmcp::model::{
    GetPromptResult, Prompt, PromptArgument, PromptMessage, Resource, ResourceContents, ResourceTemplate, Role,
};
use serde_json::json;

/// The skills' own resources, skills in name order.
pub(super) fn resources(skills: &SkillSet) -> Vec<Resource> {
    let all = skills.skills.values().flat_map(|s| &s.served.resources);
    all.map(|r| {
        let mut resource = Resource::new(r.uri.clone(), r.name.clone());
        (resource.title, resource.description, resource.mime_type) =
            (r.title.clone(), r.description.clone(), r.mime_type.clone());
        resource
    })
    .collect()
}

/// The skills' resource templates.
pub(super) fn templates(skills: &SkillSet) -> Vec<ResourceTemplate> {
    let all = skills.skills.values().flat_map(|s| &s.served.templates);
    all.map(|t| {
        let mut template = ResourceTemplate::new(t.uri.clone(), t.name.clone());
        (template.title, template.description, template.mime_type) =
            (t.title.clone(), t.description.clone(), t.mime_type.clone());
        template
    })
    .collect()
}

/// The skill that serves `uri`, if one does.
pub(super) fn owner<'a>(skills: &'a SkillSet, uri: &str) -> Option<&'a Skill> {
    skills.skills.values().map(|s| &**s).find(|s| s.served.serves(uri))
}

/// Reads `uri` from `skill`.
pub(super) async fn read(skill: &Skill, uri: &str, ctx: &CallContext) -> Result<Vec<ResourceContents>, ErrorData> {
    match skill.read_resource(uri, ctx).await {
        Ok(contents) if !contents.is_empty() => Ok(contents
            .iter()
            .filter_map(|c| match c {
                crate::skills::contract::Content::Resource { uri, mime_type, contents } => {
                    Some(content::embedded(uri, mime_type, contents))
                }
                _ => None,
            })
            .collect()),
        Ok(_) | Err(ServeError::NotFound) => Err(not_found(uri)),
        Err(e) => Err(ErrorData::internal_error(format!("resource `{uri}` cannot be read: {e}"), None)),
    }
}

/// The spec's error for a resource nobody serves, naming it.
pub(super) fn not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(format!("no resource `{uri}`"), Some(json!({"uri": uri})))
}

/// The name an MCP client sees for `skill`'s prompt `prompt`.
fn served_name(skill: &Skill, prompt: &PromptDef) -> String {
    match skill.mcp_names {
        McpNames::Bare => prompt.name.clone(),
        McpNames::Prefixed => format!("{}{SEPARATOR}{}", skill.name, prompt.name),
    }
}

/// The skills' own prompts, as `prompts/list` has them.
pub(super) fn prompts(skills: &SkillSet) -> Vec<Prompt> {
    let mut listed = Vec::new();
    for skill in skills.skills.values() {
        for p in &skill.served.prompts {
            let arguments = p
                .arguments
                .iter()
                .map(|a| {
                    let mut argument = PromptArgument::new(a.name.clone()).with_required(a.required);
                    argument.description = a.description.clone();
                    argument
                })
                .collect();
            let mut prompt = Prompt::new(served_name(skill, p), Some(p.description.clone()), Some(arguments));
            prompt.title = p.title.clone();
            listed.push(prompt);
        }
    }
    listed
}

/// The skill and prompt (unprefixed) a client's prompt name stands for.
pub(super) fn prompt<'a>(skills: &'a SkillSet, name: &'a str) -> Option<(&'a Skill, &'a str)> {
    let bare = skills.skills.values().map(|s| &**s).filter(|s| s.mcp_names == McpNames::Bare);
    if let Some(skill) = bare.clone().find(|s| s.served.prompt(name).is_some()) {
        return Some((skill, name));
    }
    let (skill, prompt) = split_exposed(name)?;
    let skill = skills.skills.get(skill).filter(|s| s.mcp_names == McpNames::Prefixed)?;
    skill.served.prompt(prompt).map(|_| (&**skill, prompt))
}

/// `prompts/get` of `skill`'s `prompt` with `arguments`.
pub(super) async fn get(
    skill: &Skill,
    prompt: &str,
    arguments: Vec<(String, String)>,
    ctx: &CallContext,
) -> Result<GetPromptResult, ErrorData> {
    let made = skill.get_prompt(prompt, arguments, ctx).await.map_err(|e| match e {
        ServeError::NotFound => ErrorData::invalid_params(format!("no prompt `{prompt}`"), None),
        ServeError::InvalidArguments(why) => ErrorData::invalid_params(format!("prompt `{prompt}`: {why}"), None),
        ServeError::Failed(why) => ErrorData::internal_error(format!("prompt `{prompt}` failed: {why}"), None),
    })?;
    let messages = made
        .messages
        .iter()
        .map(|(role, c)| {
            let role = match role {
                ServedRole::User => Role::User,
                ServedRole::Assistant => Role::Assistant,
            };
            PromptMessage::new(role, content::block(c))
        })
        .collect();
    let mut result = GetPromptResult::new(messages);
    result.description = made.description;
    Ok(result)
}
