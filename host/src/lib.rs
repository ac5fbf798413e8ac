//! skillhost: runs LLM-agent skills as sandboxed WebAssembly components.
//!
//! # Layout
//! Data flows one way: adapters -> engine -> tools -> sandbox -> store.
//! - [`config`]: the typed `config.yaml`.
//! - [`skills`]: skill folders, manifests, prompts, loading, building.
//! - [`engine`]: approval resolution (the turn loop comes next).
//! - [`llm`]: LLM providers (Anthropic, OpenAI Responses, Chat Completions), streamed.
//! - [`sandbox`]: wasmtime engine, limits, compiled cache, host imports.
//! - [`store`]: the state store and memory files.

pub mod config;
pub mod engine;
pub mod llm;
pub mod sandbox;
pub mod skills;
pub mod store;
