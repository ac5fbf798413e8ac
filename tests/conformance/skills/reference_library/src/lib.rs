//! The reference resources and prompts of the official MCP conformance suite, served by a
//! skill through the `resources` and `prompts` exports, with the reference names and
//! behaviour:
//!
//! - resources `test://static-text`, `test://static-binary` (a PNG), `test://watched-resource`,
//!   and the template `test://template/{id}/data` (JSON naming the id);
//! - prompts `test_simple_prompt`, `test_prompt_with_arguments` (`arg1`, `arg2`, with
//!   completions of `arg1`), `test_prompt_with_embedded_resource` (`resourceUri`) and
//!   `test_prompt_with_image`.
//!
//! It has no tools. Nothing in the host knows these names.

use std::collections::BTreeMap;

use skill_sdk::{
    Block, Context, Embedded, Error, PromptDef, PromptError, Prompted, Prompts, ReadError, ResourceContents,
    ResourceDef, Resources, Skill, Tool, ToolResult, Value,
};

/// A 1x1 red PNG.
const PIXEL: [u8; 69] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef,
    0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";

/// The values `arg1` completes to.
const ARG1_VALUES: [&str; 4] = ["test", "testValue1", "paris", "park"];

struct Library;

impl Skill for Library {
    fn tools() -> Vec<Tool> {
        Vec::new()
    }

    fn handle(name: &str, _input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        Err(Error::unknown_tool(name))
    }
}

impl Resources for Library {
    fn resources() -> Vec<ResourceDef> {
        vec![
            ResourceDef::new("test://static-text", "static-text")
                .title("Static Text Resource")
                .description("A static text resource for testing")
                .mime_type("text/plain"),
            ResourceDef::new("test://static-binary", "static-binary")
                .description("A static binary resource (a PNG) for testing")
                .mime_type("image/png"),
            ResourceDef::new("test://watched-resource", "watched-resource")
                .description("A resource clients may subscribe to")
                .mime_type("text/plain"),
        ]
    }

    fn templates() -> Vec<ResourceDef> {
        vec![
            ResourceDef::new("test://template/{id}/data", "template")
                .description("Data for an id")
                .mime_type("application/json"),
        ]
    }

    fn read_resource(uri: &str, _ctx: &Context) -> Result<Vec<Embedded>, ReadError> {
        let read = match uri {
            "test://static-text" => {
                Embedded::text(uri, "text/plain", "This is the content of the static text resource.")
            }
            "test://static-binary" => Embedded::blob(uri, "image/png", PIXEL.to_vec()),
            "test://watched-resource" => Embedded::text(uri, "text/plain", "Watched resource content"),
            _ => {
                let id = uri.strip_prefix(TEMPLATE_PREFIX).and_then(|rest| rest.strip_suffix(TEMPLATE_SUFFIX));
                let id = id.filter(|id| !id.is_empty() && !id.contains('/')).ok_or(ReadError::NotFound)?;
                let data = skill_sdk::json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                Embedded::text(uri, "application/json", data.to_string())
            }
        };
        Ok(vec![read])
    }
}

impl Prompts for Library {
    fn prompts() -> Vec<PromptDef> {
        vec![
            PromptDef::new("test_simple_prompt", "A simple prompt without arguments"),
            PromptDef::new("test_prompt_with_arguments", "A prompt with two required arguments")
                .argument("arg1", "First test argument", true)
                .argument("arg2", "Second test argument", true),
            PromptDef::new("test_prompt_with_embedded_resource", "A prompt that embeds a resource").argument(
                "resourceUri",
                "The URI of the resource to embed",
                true,
            ),
            PromptDef::new("test_prompt_with_image", "A prompt with an image"),
        ]
    }

    fn get_prompt(name: &str, arguments: &BTreeMap<String, String>, _ctx: &Context) -> Result<Prompted, PromptError> {
        let argument = |name: &str| arguments.get(name).cloned().unwrap_or_default();
        let prompted = Prompted::default();
        Ok(match name {
            "test_simple_prompt" => prompted.user(Block::Text("This is a simple prompt for testing.".into())),
            "test_prompt_with_arguments" => {
                let text = format!("Prompt with arguments: arg1='{}', arg2='{}'", argument("arg1"), argument("arg2"));
                prompted.user(Block::Text(text))
            }
            "test_prompt_with_embedded_resource" => prompted
                .user(Block::Resource {
                    uri: argument("resourceUri"),
                    mime_type: Some("text/plain".into()),
                    contents: ResourceContents::Text("Embedded resource content for testing.".into()),
                })
                .user(Block::Text("Please process the embedded resource above.".into())),
            "test_prompt_with_image" => prompted
                .user(Block::Image { mime_type: "image/png".into(), data: PIXEL.to_vec() })
                .user(Block::Text("Please analyze the image above.".into())),
            _ => return Err(PromptError::NotFound),
        })
    }

    fn complete(name: &str, argument: &str, value: &str, _context: &BTreeMap<String, String>) -> Vec<String> {
        if (name, argument) != ("test_prompt_with_arguments", "arg1") {
            return Vec::new();
        }
        ARG1_VALUES.iter().filter(|v| v.starts_with(value)).map(|v| v.to_string()).collect()
    }
}

skill_sdk::export!(Library, hooks: [resources, prompts]);
