//! Typed content and tool hints in the host's own types (the WIT `content-block` and
//! `tool-hints`), and the text the model reads for content that is not text.

use crate::sandbox::bindings::skillhost::skill::blocks::{Block as ResultBlock, ResourceContents as WitContents};
use crate::sandbox::bindings::types as wit;

/// A piece of typed content a tool returned beside its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// More text.
    Text(String),
    /// A JSON value, as JSON text (checked when it is served).
    Json(String),
    /// An image.
    Image {
        /// Its MIME type.
        mime_type: String,
        /// Its bytes.
        data: Vec<u8>,
    },
    /// A link to a resource.
    ResourceLink {
        /// Its URI.
        uri: String,
        /// Its name.
        name: String,
        /// Its MIME type, when known.
        mime_type: Option<String>,
        /// What it is.
        description: Option<String>,
    },
    /// Audio.
    Audio {
        /// Its MIME type.
        mime_type: String,
        /// Its bytes.
        data: Vec<u8>,
    },
    /// A resource embedded with its contents.
    Resource {
        /// Its URI.
        uri: String,
        /// Its MIME type, when known.
        mime_type: Option<String>,
        /// Its contents.
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

impl Content {
    /// What the model reads for this block: text and JSON as they are, an image as a
    /// placeholder naming its type and size (models here read text only), a link by name
    /// and URI.
    pub fn for_model(&self) -> String {
        match self {
            Content::Text(text) | Content::Json(text) => text.clone(),
            Content::Image { mime_type, data } => format!("[image: {mime_type}, {} bytes]", data.len()),
            Content::ResourceLink { uri, name, .. } => format!("[resource: {name} <{uri}>]"),
            Content::Audio { mime_type, data } => format!("[audio: {mime_type}, {} bytes]", data.len()),
            Content::Resource { uri, contents: ResourceContents::Text(text), .. } => {
                format!("[resource <{uri}>]\n{text}")
            }
            Content::Resource { uri, mime_type, contents: ResourceContents::Blob(data) } => {
                let kind = mime_type.as_deref().unwrap_or("bytes");
                format!("[resource <{uri}>: {kind}, {} bytes]", data.len())
            }
        }
    }
}

/// The text the model reads for a result: `content`, then each block's rendering, a line
/// apart (`content` alone when there are no blocks).
pub fn model_text(content: &str, blocks: &[Content]) -> String {
    let mut text = content.to_owned();
    for block in blocks {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&block.for_model());
    }
    text
}

/// Hints about a tool's behaviour (MCP tool annotations); `None` leaves a hint out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolHints {
    /// A human-readable title.
    pub title: Option<String>,
    /// It does not change its environment.
    pub read_only: Option<bool>,
    /// It may destroy or overwrite data.
    pub destructive: Option<bool>,
    /// Calling it again with the same input has no further effect.
    pub idempotent: Option<bool>,
    /// It reaches an open world of external entities.
    pub open_world: Option<bool>,
}

impl From<wit::ContentBlock> for Content {
    fn from(b: wit::ContentBlock) -> Self {
        match b {
            wit::ContentBlock::Text(text) => Content::Text(text),
            wit::ContentBlock::Json(json) => Content::Json(json),
            wit::ContentBlock::Image(i) => Content::Image { mime_type: i.mime_type, data: i.data },
            wit::ContentBlock::ResourceLink(l) => {
                Content::ResourceLink { uri: l.uri, name: l.name, mime_type: l.mime_type, description: l.description }
            }
        }
    }
}

impl From<ResultBlock> for Content {
    fn from(b: ResultBlock) -> Self {
        match b {
            ResultBlock::Text(text) => Content::Text(text),
            ResultBlock::Json(json) => Content::Json(json),
            ResultBlock::Image(i) => Content::Image { mime_type: i.mime_type, data: i.data },
            ResultBlock::ResourceLink(l) => {
                Content::ResourceLink { uri: l.uri, name: l.name, mime_type: l.mime_type, description: l.description }
            }
            ResultBlock::Audio(a) => Content::Audio { mime_type: a.mime_type, data: a.data },
            ResultBlock::Embedded(r) => Content::Resource {
                uri: r.uri,
                mime_type: r.mime_type,
                contents: match r.contents {
                    WitContents::Text(text) => ResourceContents::Text(text),
                    WitContents::Blob(data) => ResourceContents::Blob(data),
                },
            },
        }
    }
}

impl From<wit::ToolHints> for ToolHints {
    fn from(h: wit::ToolHints) -> Self {
        ToolHints {
            title: h.title,
            read_only: h.read_only,
            destructive: h.destructive,
            idempotent: h.idempotent,
            open_world: h.open_world,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_reads_placeholders_for_what_is_not_text() {
        let blocks = [
            Content::Json("{\"a\":1}".into()),
            Content::Image { mime_type: "image/png".into(), data: vec![0; 67] },
            Content::ResourceLink {
                uri: "skill://s/a.md".into(),
                name: "a.md".into(),
                mime_type: None,
                description: None,
            },
        ];
        assert_eq!(model_text("", &[]), "");
        assert_eq!(
            model_text("done", &blocks),
            "done\n{\"a\":1}\n[image: image/png, 67 bytes]\n[resource: a.md <skill://s/a.md>]"
        );
        assert_eq!(model_text("", &blocks[1..2]), "[image: image/png, 67 bytes]");
    }
}
