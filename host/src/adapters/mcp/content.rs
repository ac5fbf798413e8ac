//! How tools look to an MCP client: `tools/list` entries with `outputSchema` and
//! `annotations`, and `tools/call` results as typed content blocks with
//! `structuredContent`.
//!
//! Annotations: a skill's own hints (WIT `tool-hints`), and for a tool that asks a person
//! (its level after the operator's `human.overrides`: approve, confirm, or `dynamic`) a title
//! that says so and `destructiveHint: true` unless the skill hinted otherwise or marked it
//! read-only: a client that trusts the hints then warns before calling it, as the host asks.

use crate::config::OverrideLevel;
use crate::llm::ToolDecl;
use crate::skills::content::ResourceContents;
use crate::skills::contract::{Content, Human};
use crate::skills::skill::split_exposed;
use crate::skills::{SkillSet, ToolSpec};
use crate::tools::ToolOutcome;
use base64::Engine as _;
use rmcp::model::{
    CallToolResult, ContentBlock, Resource, ResourceContents as ResourceContents_, Tool, ToolAnnotations,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The `tools/list` entry of `decl`.
pub(super) fn tool(decl: ToolDecl, skills: &SkillSet, overrides: &BTreeMap<String, Option<OverrideLevel>>) -> Tool {
    let schema = match &*decl.input_schema {
        Value::Object(map) => map.clone(),
        _ => Default::default(),
    };
    let spec = spec_of(skills, &decl.name);
    let annotations = spec.and_then(|spec| annotations(spec, overrides.get(&decl.name)));
    let mut tool = Tool::new(decl.name, decl.description, Arc::new(schema));
    if let Some((Value::Object(schema), _)) = spec.and_then(|s| s.output_schema.as_ref()) {
        tool = tool.with_raw_output_schema(Arc::new(schema.clone()));
    }
    if let Some(annotations) = annotations {
        if let Some(title) = &annotations.title {
            tool = tool.with_title(title.clone());
        }
        tool = tool.with_annotations(annotations);
    }
    tool
}

/// The checked tool behind an exposed name: a component's or native tool, or a script tool.
pub(super) fn spec_of<'a>(skills: &'a SkillSet, name: &str) -> Option<&'a ToolSpec> {
    let (skill, tool) = split_exposed(name)?;
    let skill = skills.skills.get(skill)?;
    skill.tool(tool).or_else(|| skill.script(tool).map(|s| &s.spec))
}

/// The tool's annotations; `None` when it has no hint and asks nobody.
fn annotations(spec: &ToolSpec, overridden: Option<&Option<OverrideLevel>>) -> Option<ToolAnnotations> {
    let hints = &spec.hints;
    let asks = match overridden {
        Some(None) => None,
        Some(Some(OverrideLevel::Approve)) => Some("asks a person to approve each call"),
        Some(Some(OverrideLevel::Confirm)) => Some("asks a person to confirm each call"),
        None => match spec.human {
            Human::None => None,
            Human::Approve => Some("asks a person to approve each call"),
            Human::Confirm => Some("asks a person to confirm each call"),
            Human::Dynamic => Some("may ask a person to approve a call"),
        },
    };
    let title = match (&hints.title, asks) {
        (Some(title), Some(asks)) => Some(format!("{title} ({asks})")),
        (None, Some(asks)) => Some(format!("{} ({asks})", spec.name)),
        (title, None) => title.clone(),
    };
    let destructive = hints.destructive.or((asks.is_some() && hints.read_only != Some(true)).then_some(true));
    let annotations =
        ToolAnnotations::from_raw(title, hints.read_only, destructive, hints.idempotent, hints.open_world);
    (annotations != ToolAnnotations::default()).then_some(annotations)
}

/// The `tools/call` result of `outcome`: its typed blocks (or its text alone), with
/// `structuredContent` when the tool declares an output schema. A successful result whose
/// JSON does not match that schema becomes an error result saying so (clients reject
/// structured content that breaks the declared schema).
pub(super) fn result(outcome: &ToolOutcome, spec: Option<&ToolSpec>) -> CallToolResult {
    let content: Vec<ContentBlock> = if outcome.blocks.is_empty() {
        vec![ContentBlock::text(outcome.content.clone())]
    } else {
        outcome.blocks.iter().map(block).collect()
    };
    if outcome.is_error {
        return CallToolResult::error(content);
    }
    let Some((_, validator)) = spec.and_then(|s| s.output_schema.as_ref()) else {
        return CallToolResult::success(content);
    };
    match structured(outcome) {
        Some(value) if validator.is_valid(&value) => {
            let mut result = CallToolResult::success(content);
            result.structured_content = Some(value);
            result
        }
        _ => CallToolResult::error(vec![ContentBlock::text(
            "the tool's result does not match its declared output schema (a JSON object that conforms to it)",
        )]),
    }
}

/// The result's structured value: its first JSON block, else its text when that is JSON.
fn structured(outcome: &ToolOutcome) -> Option<Value> {
    let json = outcome.blocks.iter().find_map(|b| match b {
        Content::Json(text) => Some(text.as_str()),
        _ => None,
    });
    let text = json.or(outcome.blocks.is_empty().then_some(outcome.content.as_str()))?;
    serde_json::from_str(text).ok()
}

/// The contents of an embedded resource as MCP carries them (bytes base64-encoded).
pub(super) fn embedded(uri: &str, mime_type: &Option<String>, contents: &ResourceContents) -> ResourceContents_ {
    match contents {
        ResourceContents::Text(text) => ResourceContents_::TextResourceContents {
            uri: uri.to_owned(),
            mime_type: mime_type.clone(),
            text: text.clone(),
            meta: None,
        },
        ResourceContents::Blob(data) => ResourceContents_::BlobResourceContents {
            uri: uri.to_owned(),
            mime_type: mime_type.clone(),
            blob: base64::engine::general_purpose::STANDARD.encode(data),
            meta: None,
        },
    }
}

pub(super) fn block(content: &Content) -> ContentBlock {
    match content {
        Content::Text(text) | Content::Json(text) => ContentBlock::text(text.clone()),
        Content::Image { mime_type, data } => {
            ContentBlock::image(base64::engine::general_purpose::STANDARD.encode(data), mime_type.clone())
        }
        Content::ResourceLink { uri, name, mime_type, description } => {
            let mut resource = Resource::new(uri.clone(), name.clone());
            resource.mime_type = mime_type.clone();
            resource.description = description.clone();
            ContentBlock::resource_link(resource)
        }
        Content::Audio { mime_type, data } => {
            ContentBlock::audio(base64::engine::general_purpose::STANDARD.encode(data), mime_type.clone())
        }
        Content::Resource { uri, mime_type, contents } => ContentBlock::resource(embedded(uri, mime_type, contents)),
    }
}
