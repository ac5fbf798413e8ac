//! What a skill serves MCP clients beyond tools: [`Resources`] under its own URIs (and URI
//! templates), and [`Prompts`] with arguments and completions. Export them by naming
//! `resources` / `prompts` in [`export!`](crate::export):
//!
//! ```ignore
//! skill_sdk::export!(MySkill, hooks: [resources, prompts]);
//! ```

use std::collections::BTreeMap;

use crate::bindings::prompts::exports::skillhost::skill::prompts as wp;
use crate::bindings::resources::exports::skillhost::skill::resources as wr;
use crate::bindings::skillhost::skill::{blocks, types as wit};
use crate::{Block, Context, ResourceContents};

/// Resources of the skill's own, read through the sandbox like tool calls.
pub trait Resources {
    /// The resources (listed once, when the skill loads).
    fn resources() -> Vec<ResourceDef>;

    /// Families of resources under RFC 6570 URI templates (`uri` is the template, such as
    /// `test://template/{id}/data`).
    fn templates() -> Vec<ResourceDef> {
        Vec::new()
    }

    /// Reads `uri`: one [`Resources::resources`] lists, or one a template matches.
    fn read_resource(uri: &str, ctx: &Context) -> Result<Vec<Embedded>, ReadError>;
}

/// One resource (or template) the skill serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDef {
    /// Its URI (any scheme but `skill`), or its template.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// A human-readable title.
    pub title: Option<String>,
    /// What it is.
    pub description: Option<String>,
    /// Its MIME type, when known.
    pub mime_type: Option<String>,
}

impl ResourceDef {
    /// A resource at `uri` called `name`.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        ResourceDef { uri: uri.into(), name: name.into(), title: None, description: None, mime_type: None }
    }

    /// Sets what it is.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Sets its MIME type.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// Sets its title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    pub(crate) fn into_wit(self) -> wr::ResourceDef {
        let ResourceDef { uri, name, title, description, mime_type } = self;
        wr::ResourceDef { uri, name, title, description, mime_type }
    }

    pub(crate) fn into_wit_template(self) -> wr::ResourceTemplate {
        let ResourceDef { uri, name, title, description, mime_type } = self;
        wr::ResourceTemplate { uri_template: uri, name, title, description, mime_type }
    }
}

/// A resource's contents, as a read returns them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Embedded {
    /// The URI read.
    pub uri: String,
    /// Its MIME type, when known.
    pub mime_type: Option<String>,
    /// What it holds.
    pub contents: ResourceContents,
}

impl Embedded {
    /// Text at `uri`.
    pub fn text(uri: impl Into<String>, mime_type: &str, text: impl Into<String>) -> Self {
        Embedded { uri: uri.into(), mime_type: Some(mime_type.into()), contents: ResourceContents::Text(text.into()) }
    }

    /// Bytes at `uri`.
    pub fn blob(uri: impl Into<String>, mime_type: &str, data: Vec<u8>) -> Self {
        Embedded { uri: uri.into(), mime_type: Some(mime_type.into()), contents: ResourceContents::Blob(data) }
    }

    pub(crate) fn into_wit(self) -> blocks::EmbeddedResource {
        let contents = match self.contents {
            ResourceContents::Text(text) => blocks::ResourceContents::Text(text),
            ResourceContents::Blob(data) => blocks::ResourceContents::Blob(data),
        };
        blocks::EmbeddedResource { uri: self.uri, mime_type: self.mime_type, contents }
    }
}

/// Why a read has no contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The skill serves nothing at that URI.
    NotFound,
    /// Reading it failed, described.
    Failed(String),
}

/// Prompts of the skill's own, made through the sandbox like tool calls.
pub trait Prompts {
    /// The prompts (listed once, when the skill loads).
    fn prompts() -> Vec<PromptDef>;

    /// Makes prompt `name` from `arguments`; the host has checked the required ones are here.
    fn get_prompt(name: &str, arguments: &BTreeMap<String, String>, ctx: &Context) -> Result<Prompted, PromptError>;

    /// Values completing `argument` of prompt `name` whose value so far is `value`, best
    /// first (`context`: the arguments already given). None by default.
    fn complete(name: &str, argument: &str, value: &str, context: &BTreeMap<String, String>) -> Vec<String> {
        let _ = (name, argument, value, context);
        Vec::new()
    }
}

/// One prompt the skill serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptDef {
    /// Its name: `[a-z0-9_]`, as tool names.
    pub name: String,
    /// A human-readable title.
    pub title: Option<String>,
    /// What it is for.
    pub description: String,
    /// Its arguments: name, description, required.
    pub arguments: Vec<(String, Option<String>, bool)>,
}

impl PromptDef {
    /// A prompt called `name`, for `description`.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        PromptDef { name: name.into(), title: None, description: description.into(), arguments: Vec::new() }
    }

    /// Adds an argument.
    pub fn argument(mut self, name: impl Into<String>, description: impl Into<String>, required: bool) -> Self {
        self.arguments.push((name.into(), Some(description.into()), required));
        self
    }

    pub(crate) fn into_wit(self) -> wp::PromptDef {
        let arguments = self
            .arguments
            .into_iter()
            .map(|(name, description, required)| wp::PromptArgument { name, description, required })
            .collect();
        wp::PromptDef { name: self.name, title: self.title, description: self.description, arguments }
    }
}

/// A prompt made from its arguments: its messages, each a user's or the assistant's.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prompted {
    /// What it is, when the skill says.
    pub description: Option<String>,
    /// The messages: `true` for the user's, `false` for the assistant's, and what they hold
    /// (text, an image, audio or an embedded resource; JSON as text, a link as its URI).
    pub messages: Vec<(bool, Block)>,
}

impl Prompted {
    /// Adds a message of the user's.
    pub fn user(mut self, content: Block) -> Self {
        self.messages.push((true, content));
        self
    }

    /// Adds a message of the assistant's.
    pub fn assistant(mut self, content: Block) -> Self {
        self.messages.push((false, content));
        self
    }

    pub(crate) fn into_wit(self) -> wp::PromptResult {
        let messages = self
            .messages
            .into_iter()
            .map(|(user, block)| {
                let content = match block {
                    Block::Text(text) => wp::PromptContent::Text(text),
                    Block::Json(value) => wp::PromptContent::Text(value.to_string()),
                    Block::ResourceLink { uri, .. } => wp::PromptContent::Text(uri),
                    Block::Image { mime_type, data } => wp::PromptContent::Image(wit::Image { mime_type, data }),
                    Block::Audio { mime_type, data } => wp::PromptContent::Audio(blocks::Audio { mime_type, data }),
                    Block::Resource { uri, mime_type, contents } => {
                        wp::PromptContent::Embedded(Embedded { uri, mime_type, contents }.into_wit())
                    }
                };
                let role = if user { wp::Role::User } else { wp::Role::Assistant };
                wp::PromptMessage { role, content }
            })
            .collect();
        wp::PromptResult { description: self.description, messages }
    }
}

/// Why a prompt was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptError {
    /// The skill has no prompt of that name.
    NotFound,
    /// The arguments do not fit, described.
    InvalidArguments(String),
    /// Making it failed, described.
    Failed(String),
}

/// The MCP client capabilities some tools cannot run without: export it with
/// `export!(S, hooks: [client_capabilities])`. Served over MCP, a call of such a tool from a
/// client that did not declare one of them is refused before it runs (-32021).
pub trait ClientCapabilities {
    /// Each tool that needs capabilities (`"sampling"`, `"elicitation"`, `"roots"`), with them.
    fn required() -> Vec<(&'static str, &'static [&'static str])>;
}

/// How a tool runs as a task of the MCP Tasks extension (a call that goes on in the
/// background while its client polls `tasks/get`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// As a task when the client declared the extension; else answered in the call.
    Optional,
    /// Only as a task: a client without the extension is refused (-32021).
    Required,
    /// Only as a task, which begins when the tool calls [`crate::tasks::detach`]: what it
    /// asks before that travels in the call's own `input_required` results.
    Detaches,
    /// As [`Task::Detaches`] when the client declared the extension; else answered in the call
    /// (`detach` then returns `false`).
    MayDetach,
}

/// The tools that run as MCP tasks: export it with `export!(S, hooks: [task_support])`. A
/// tool not listed never does.
pub trait TaskSupport {
    /// Each tool that may run as a task, with how.
    fn tasks() -> Vec<(&'static str, Task)>;
}
