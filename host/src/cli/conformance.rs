//! `skillhost conformance-client URL` (hidden): the MCP client as the official conformance
//! suite's client scenarios drive it (`conformance client --command "skillhost
//! conformance-client"` appends the scenario's server URL). One streamable-HTTP server at URL
//! through the real `McpManager`: connect, list the tools, call each with arguments made from
//! its schema (or make the calls the scenario's context names, `toolCalls`), answer
//! elicitations (requests or `input_required` rounds) with the form's defaults, and authorize with OAuth where
//! the scenario (`MCP_CONFORMANCE_SCENARIO` `auth/...`) asks for it, fetching the
//! authorization URL itself (the suite's authorization servers approve without a person).
//! Credentials the suite hands over (`MCP_CONFORMANCE_CONTEXT`) become the `auth` config.

use clap::Args;
use serde_json::{Map, Value};
use skillhost::config::{McpAuth, McpProtocol, McpServer, ToolFilter};
use skillhost::mcp::oauth::Browser;
use skillhost::mcp::{McpManager, Status};
use skillhost::person::{Answer, Person, Question};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

/// The client ID metadata document URL the suite's CIMD scenario expects.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";
const NAME: &str = "server";
const READY_TIMEOUT: Duration = Duration::from_secs(25);

#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// The scenario's MCP server URL.
    url: String,
}

pub async fn run(args: ConformanceArgs) -> anyhow::Result<ExitCode> {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value =
        std::env::var("MCP_CONFORMANCE_CONTEXT").ok().and_then(|c| serde_json::from_str(&c).ok()).unwrap_or_default();
    let text = |key: &str| context.get(key).and_then(Value::as_str).map(str::to_owned);
    let auth = scenario.starts_with("auth/").then(|| McpAuth {
        client_id: text("client_id"),
        client_secret: text("client_secret"),
        client_metadata_url: Some(CLIENT_METADATA_URL.into()),
        ..McpAuth::default()
    });
    // The revision the suite runs the scenario at, when it names one: its lifecycle.
    let protocol = match std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").as_deref() {
        Ok("2026-07-28") => McpProtocol::Stateless,
        Ok(_) => McpProtocol::Handshake,
        Err(_) => McpProtocol::Auto,
    };
    let (headers, tools, slack_posting_tools) = (BTreeMap::new(), ToolFilter::All, Vec::new());
    let server =
        McpServer::Streamablehttp { url: args.url, headers, tools, auth, slack_posting_tools, protocol, skills: false };
    let manager = McpManager::new(&BTreeMap::from([(NAME.to_owned(), server)]));
    manager.set_people(true);
    manager.set_browser(Browser::Fetch);
    manager.start([NAME]);
    // One attempt: a scenario whose server must be refused (a mismatched resource) ends here.
    manager.wait_started(READY_TIMEOUT).await;
    if manager.status(NAME) != Some(Status::Ready) {
        anyhow::bail!("the server did not get ready: {:?}", manager.status(NAME));
    }
    if scenario.starts_with("sep-2640-client-") {
        return skills(&manager, &scenario).await;
    }
    // The calls the scenario names (`toolCalls` in its context), else each tool once.
    let calls: Vec<(String, Map<String, Value>)> = match context.get("toolCalls").and_then(Value::as_array) {
        Some(calls) => calls
            .iter()
            .filter_map(|call| {
                let name = call.get("name")?.as_str()?.to_owned();
                Some((name, call.get("arguments").and_then(Value::as_object).cloned().unwrap_or_default()))
            })
            .collect(),
        None => manager.tools(NAME).iter().map(|tool| (tool.name.to_string(), arguments(&tool.input_schema))).collect(),
    };
    for (name, arguments) in calls {
        let result = manager.asking(NAME, &Defaults, manager.call(NAME, &name, arguments)).await;
        match result {
            Ok(result) => println!("{name}: {}", skillhost::mcp::client::result_text(&result)),
            Err(e) => eprintln!("{name}: {e}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The Skills extension's client scenarios: the server's skills listed (nothing fetched);
/// then, but in `sep-2640-client-no-prefetch` (which checks exactly that nothing is fetched
/// before a skill is loaded), each skill loaded as a host loads it: its `SKILL.md` fetched and
/// verified, and only when it holds, its other files, each verified.
async fn skills(manager: &McpManager, scenario: &str) -> anyhow::Result<ExitCode> {
    use skillhost::mcp::skills;
    let (listed, refused) = skills::list(manager, NAME).await?;
    for why in refused {
        eprintln!("refused: {why}");
    }
    if scenario == "sep-2640-client-no-prefetch" {
        println!("listed {} skill(s); nothing fetched before a skill is loaded", listed.len());
        return Ok(ExitCode::SUCCESS);
    }
    for skill in &listed {
        if let Err(why) = skills::fetch(manager, NAME, skill, &skill.uri).await {
            eprintln!("not loaded: {why}");
            continue;
        }
        let rmcp::model::SkillResources::Files(files) = &skill.resources else { continue };
        for file in files.iter().filter(|f| f.uri != skill.uri) {
            match skills::fetch(manager, NAME, skill, &file.uri).await {
                Ok(bytes) => println!("{}: {} bytes, verified", file.uri, bytes.len()),
                Err(why) => eprintln!("not used: {why}"),
            }
        }
        println!("loaded {}", skill.uri);
    }
    Ok(ExitCode::SUCCESS)
}

/// Answers every question with the empty answer: each field's default.
struct Defaults;

#[async_trait::async_trait]
impl Person for Defaults {
    async fn ask(&self, _question: Question) -> Answer {
        Answer::Answered(String::new())
    }
}

/// Arguments that fit a tool's input schema: each property's default, else a plain value of
/// its type.
fn arguments(schema: &Map<String, Value>) -> Map<String, Value> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return Map::new() };
    let value = |p: &Value| match (p.get("default"), p.get("type").and_then(Value::as_str)) {
        (Some(default), _) => default.clone(),
        (_, Some("number" | "integer")) => Value::from(1),
        (_, Some("boolean")) => Value::Bool(true),
        (_, Some("array")) => Value::Array(Vec::new()),
        (_, Some("object")) => Value::Object(Map::new()),
        _ => Value::from("test"),
    };
    properties.iter().map(|(name, p)| (name.clone(), value(p))).collect()
}
