//! What a handler returns: [`ToolResult`] and its optional [`Coverage`].

use crate::Value;
use crate::bindings::skillhost::skill::blocks;
use crate::bindings::skillhost::skill::types as wit;

/// The answer of one tool call.
///
/// Three constructors say whether the call succeeded, which matters for tools declared with
/// [`Tool::expose_result`](crate::Tool::expose_result): only [`ToolResult::ok`] results are
/// ever exposed through the API.
///
/// ```
/// # use skill_sdk::{json, ToolResult};
/// let found = ToolResult::ok(json!({ "status": 200, "healthy": true }));
/// let broken = ToolResult::failed("the service did not answer");
/// let note = ToolResult::text("nothing to report").empty(true);
/// # assert_eq!(found.succeeded(), Some(true));
/// # assert_eq!(broken.succeeded(), Some(false));
/// # assert_eq!(note.succeeded(), None);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    content: String,
    succeeded: Option<bool>,
    is_empty: Option<bool>,
    coverage: Option<Coverage>,
    blocks: Vec<Block>,
}

impl ToolResult {
    /// A call that succeeded (`succeeded: some(true)`). `content` is a JSON value (sent as
    /// compact JSON text) or a string (sent as it is).
    pub fn ok(content: impl Into<Content>) -> Self {
        Self::new(content, Some(true))
    }

    /// An ordinary application failure (`succeeded: some(false)`): the model reads the
    /// content; the API never exposes it.
    pub fn failed(content: impl Into<Content>) -> Self {
        Self::new(content, Some(false))
    }

    /// A plain result that declares neither success nor failure (`succeeded: none`).
    pub fn text(content: impl Into<Content>) -> Self {
        Self::new(content, None)
    }

    fn new(content: impl Into<Content>, succeeded: Option<bool>) -> Self {
        let content = content.into().0;
        ToolResult { content, succeeded, is_empty: None, coverage: None, blocks: Vec::new() }
    }

    /// Says whether the result is empty, for API stream consumers (otherwise the host asks
    /// [`ToolResultEmpty`](crate::ToolResultEmpty) or judges by the content).
    pub fn empty(mut self, is_empty: bool) -> Self {
        self.is_empty = Some(is_empty);
        self
    }

    /// Attaches what the call searched; the tool must be declared with
    /// [`Tool::declares_coverage`](crate::Tool::declares_coverage).
    pub fn with_coverage(mut self, coverage: Coverage) -> Self {
        self.coverage = Some(coverage);
        self
    }

    /// Adds a block of typed content after the text (see [`Block`]).
    pub fn with_block(mut self, block: Block) -> Self {
        self.blocks.push(block);
        self
    }

    /// Adds an image (`mime_type` such as `image/png`): MCP clients receive it as an image;
    /// the model reads a placeholder naming its type and size.
    pub fn with_image(self, mime_type: impl Into<String>, data: Vec<u8>) -> Self {
        self.with_block(Block::Image { mime_type: mime_type.into(), data })
    }

    /// Adds audio (`mime_type` such as `audio/wav`): MCP clients receive it as audio; the
    /// model reads a placeholder naming its type and size.
    pub fn with_audio(self, mime_type: impl Into<String>, data: Vec<u8>) -> Self {
        self.with_block(Block::Audio { mime_type: mime_type.into(), data })
    }

    /// Adds a resource embedded with its contents (`uri`, its MIME type when known).
    pub fn with_resource(self, uri: impl Into<String>, mime_type: Option<&str>, contents: ResourceContents) -> Self {
        self.with_block(Block::Resource { uri: uri.into(), mime_type: mime_type.map(str::to_owned), contents })
    }

    /// Adds a JSON value: MCP clients receive it as text and, when the tool declares an
    /// output schema ([`Tool::output`](crate::Tool::output)), as `structuredContent`.
    pub fn with_json(self, value: Value) -> Self {
        self.with_block(Block::Json(value))
    }

    /// The typed blocks after the text.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The text the model reads.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// Whether the call declared success.
    pub fn succeeded(&self) -> Option<bool> {
        self.succeeded
    }
}

/// The text of a result: a [`Value`] becomes compact JSON, a string stays as it is.
#[derive(Debug, Clone)]
pub struct Content(String);

impl From<Value> for Content {
    fn from(value: Value) -> Self {
        Content(value.to_string())
    }
}

impl From<String> for Content {
    fn from(text: String) -> Self {
        Content(text)
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Content(text.to_owned())
    }
}

impl From<&String> for Content {
    fn from(text: &String) -> Self {
        Content(text.clone())
    }
}

/// A piece of typed content a result carries after its text.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// More text.
    Text(String),
    /// A JSON value.
    Json(Value),
    /// An image: its MIME type (such as `image/png`) and bytes.
    Image {
        /// The MIME type.
        mime_type: String,
        /// The bytes.
        data: Vec<u8>,
    },
    /// A link to a resource the client may read (such as `skill://<skill>/notes.md`).
    ResourceLink {
        /// The URI.
        uri: String,
        /// The name.
        name: String,
        /// The MIME type, when known.
        mime_type: Option<String>,
        /// What it is.
        description: Option<String>,
    },
    /// Audio: its MIME type (such as `audio/wav`) and bytes.
    Audio {
        /// The MIME type.
        mime_type: String,
        /// The bytes.
        data: Vec<u8>,
    },
    /// A resource embedded with its contents (an MCP `resource` block).
    Resource {
        /// The URI.
        uri: String,
        /// The MIME type, when known.
        mime_type: Option<String>,
        /// What it holds.
        contents: ResourceContents,
    },
}

/// What an embedded resource holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceContents {
    /// Text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

impl Block {
    /// The block as `types.content-block` has it; `None` for what came later (audio,
    /// embedded resources), which travel through the `blocks` import.
    fn content_block(self) -> Option<wit::ContentBlock> {
        Some(match self {
            Block::Text(text) => wit::ContentBlock::Text(text),
            Block::Json(value) => wit::ContentBlock::Json(value.to_string()),
            Block::Image { mime_type, data } => wit::ContentBlock::Image(wit::Image { mime_type, data }),
            Block::ResourceLink { uri, name, mime_type, description } => {
                wit::ContentBlock::ResourceLink(wit::ResourceLink { uri, name, mime_type, description })
            }
            Block::Audio { .. } | Block::Resource { .. } => return None,
        })
    }

    /// The block as the `blocks` import has it.
    fn any_block(self) -> blocks::Block {
        match self {
            Block::Text(text) => blocks::Block::Text(text),
            Block::Json(value) => blocks::Block::Json(value.to_string()),
            Block::Image { mime_type, data } => blocks::Block::Image(wit::Image { mime_type, data }),
            Block::ResourceLink { uri, name, mime_type, description } => {
                blocks::Block::ResourceLink(wit::ResourceLink { uri, name, mime_type, description })
            }
            Block::Audio { mime_type, data } => blocks::Block::Audio(blocks::Audio { mime_type, data }),
            Block::Resource { uri, mime_type, contents } => {
                let contents = match contents {
                    ResourceContents::Text(text) => blocks::ResourceContents::Text(text),
                    ResourceContents::Blob(data) => blocks::ResourceContents::Blob(data),
                };
                blocks::Block::Embedded(blocks::EmbeddedResource { uri, mime_type, contents })
            }
        }
    }
}

/// Whether a search covered everything it was asked to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoverageStatus {
    /// Everything asked for was searched.
    Complete,
    /// Only part of what was asked for was searched.
    Partial,
}

/// Whether the searched scope held data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultState {
    /// The search found data.
    Data,
    /// The search found nothing.
    Empty,
}

/// A tool's own account of what it searched, for the turn's coverage summary.
///
/// ```
/// # use skill_sdk::{json, Coverage, CoverageStatus, ResultState};
/// let coverage = Coverage::new(CoverageStatus::Partial, ResultState::Data)
///     .subject("events")
///     .attempted_scope(json!({ "days": 30 }))
///     .covered_scope(json!({ "days": 7 }));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Coverage {
    subject: Option<String>,
    attempted_scope: Option<Value>,
    covered_scope: Option<Value>,
    status: CoverageStatus,
    result_state: ResultState,
}

impl Coverage {
    /// An observation with its two public facts; scopes and subject are optional.
    pub fn new(status: CoverageStatus, result_state: ResultState) -> Self {
        Coverage { subject: None, attempted_scope: None, covered_scope: None, status, result_state }
    }

    /// What was searched (for example `"events"`), at most 128 characters.
    pub fn subject(mut self, subject: impl Into<String>) -> Self {
        self.subject = Some(subject.into());
        self
    }

    /// The scope asked for, a JSON object (depth 4 and 4096 bytes at most).
    pub fn attempted_scope(mut self, scope: Value) -> Self {
        self.attempted_scope = Some(scope);
        self
    }

    /// The scope actually searched, a JSON object (same bounds).
    pub fn covered_scope(mut self, scope: Value) -> Self {
        self.covered_scope = Some(scope);
        self
    }
}

impl From<Coverage> for wit::Coverage {
    fn from(c: Coverage) -> Self {
        wit::Coverage {
            subject: c.subject,
            attempted_scope: c.attempted_scope.map(|v| v.to_string()),
            covered_scope: c.covered_scope.map(|v| v.to_string()),
            status: match c.status {
                CoverageStatus::Complete => wit::CoverageStatus::Complete,
                CoverageStatus::Partial => wit::CoverageStatus::Partial,
            },
            result_state: match c.result_state {
                ResultState::Data => wit::ResultState::Data,
                ResultState::Empty => wit::ResultState::Empty,
            },
        }
    }
}

impl ToolResult {
    /// Every block in the `blocks` import's form, when one of them needs it (audio, an
    /// embedded resource): the host then takes these instead of `types.tool-result`'s.
    pub(crate) fn later_blocks(&self) -> Option<Vec<blocks::Block>> {
        let later = self.blocks.iter().any(|b| matches!(b, Block::Audio { .. } | Block::Resource { .. }));
        later.then(|| self.blocks.iter().cloned().map(Block::any_block).collect())
    }
}

impl From<ToolResult> for wit::ToolResult {
    fn from(r: ToolResult) -> Self {
        wit::ToolResult {
            content: r.content,
            succeeded: r.succeeded,
            is_empty: r.is_empty,
            coverage: r.coverage.map(Into::into),
            blocks: r.blocks.into_iter().filter_map(Block::content_block).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    #[test]
    fn json_content_is_compact_and_text_is_verbatim() {
        assert_eq!(ToolResult::ok(json!({ "a": 1 })).content(), r#"{"a":1}"#);
        assert_eq!(ToolResult::text("a \"b\"").content(), "a \"b\"");
    }

    #[test]
    fn coverage_scopes_travel_as_json_text() {
        let result = ToolResult::ok("x")
            .empty(false)
            .with_coverage(Coverage::new(CoverageStatus::Complete, ResultState::Empty).covered_scope(json!({})));
        let wire = wit::ToolResult::from(result);
        assert_eq!(wire.is_empty, Some(false));
        let coverage = wire.coverage.unwrap();
        assert_eq!(coverage.covered_scope.as_deref(), Some("{}"));
        assert!(matches!(coverage.result_state, wit::ResultState::Empty));
    }
}
