//! skillhost: runs LLM-agent skills as sandboxed WebAssembly components.
//!
//! # Layout
//! Data flows one way: adapters -> engine -> tools -> sandbox -> store.
//! - [`api`]: the HTTP API adapter (trigger modes, the approval-v1 stream, decisions).
//! - [`config`]: the typed `config.yaml`.
//! - [`skills`]: skill folders, manifests, prompts, loading, building.
//! - [`engine`]: the turn loop, tool routing, approvals, history.
//! - [`mcp`]: MCP both ways: the client of `mcp_servers`, and skills served over MCP.
//! - [`llm`]: LLM providers (Anthropic, OpenAI Responses, Chat Completions), streamed.
//! - [`sandbox`]: wasmtime engine, limits, compiled cache, host imports.
//! - [`store`]: the state store and memory files.

pub mod api;
pub mod config;
pub mod engine;
pub mod llm;
pub mod mcp;
pub mod sandbox;
pub mod skills;
pub mod store;
