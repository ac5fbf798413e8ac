//! skillhost: runs LLM-agent skills as sandboxed WebAssembly components.
//!
//! # Layout
//! Data flows one way, each module using only those below it (`config` and `person` are read
//! by all):
//! - [`app`]: the builder that turns a config into running agents, and serves them.
//! - [`adapters`]: the front doors: the terminal, the HTTP API, MCP serving.
//! - [`engine`]: the turn loop, the one approval path, deadlines, histories.
//! - [`tools`]: the vocabulary every tool kind shares and the `ToolSource` trait, with the
//!   skill and MCP sources.
//! - [`mcp`]: the MCP client of `mcp_servers`.
//! - [`skills`]: skill folders, manifests, prompts, loading, building; hooks as methods.
//! - [`llm`]: LLM providers (Anthropic, OpenAI Responses, Chat Completions, Bedrock).
//! - [`sandbox`]: wasmtime engine, limits, compiled cache, host imports.
//! - [`store`]: the state store and memory files.
//! - [`config`]: the typed `config.yaml`.
//! - [`person`]: the person at the other end (a question, its answer), in every layer's words.

#![warn(missing_docs)]

pub mod adapters;
pub mod app;
pub mod broker;
pub mod config;
pub mod engine;
pub mod llm;
pub mod mcp;
pub mod metrics;
pub mod person;
pub mod sandbox;
pub mod skills;
pub mod store;
pub mod tools;

/// mimalloc for every binary that links skillhost (the server, its tests and benches): a
/// turn allocates and frees many small JSON values on several threads at once, where glibc's
/// malloc spent a sixth of the API server's time under load (its arena locks and
/// consolidation). Declared here, not in `main.rs`, so tests and benches measure the
/// allocator the product runs with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
