//! Skill folders: discovery and precedence, manifests, prompts, the loaded [`Skill`] with its
//! checked tools, and building skill sources into components.

mod admit;
pub mod agent_skills;
pub mod build;
pub mod builtin;
pub mod content;
pub mod contract;
pub mod declared;
pub mod files;
pub mod init;
pub mod loader;
pub mod manifest;
pub mod native;
pub mod new;
pub mod oci;
pub mod prompt;
pub mod script;
pub mod served;
pub mod skill;

pub use loader::{FatalLoadError, LoadMode, LoadProblem, Loader, PendingPrompt, SkillSet};
pub use manifest::Manifest;
pub use native::NativeTools;
pub use script::{ScriptError, ScriptTool};
pub use skill::{HookAnswer, Skill, ToolError, ToolSpec};
