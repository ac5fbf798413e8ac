//! The agent engine. So far: approval-level resolution, shared by every adapter.

pub mod approval;
