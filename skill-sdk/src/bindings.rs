//! The WIT bindings, generated once per world.
//!
//! World `skill` gives the imports and the required `tools` export. Each optional hook has
//! a world of its own (`hook-*` in `wit/skill.wit`) so that a skill exports exactly the
//! hooks it implements: `wit-bindgen` only puts a world's exports into the component when
//! that world's export macro is expanded in the skill crate (`pub_export_macro` moves the
//! export half of the type information into the macro). The hook worlds reuse the `types`
//! generated here through `with`, so every export sees the same Rust types.

wit_bindgen::generate!({
    path: "../wit",
    world: "skill",
    pub_export_macro: true,
    export_macro_name: "export_skill",
});

/// Generates the bindings of one hook world; `uses_types` maps its `types` onto ours
/// (`with` rejects an unused key, so only the worlds that use `types` get it).
macro_rules! hook_world {
    ($module:ident, $world:literal, $export:literal, uses_types) => {
        #[doc = concat!("Bindings of world `", $world, "`.")]
        pub mod $module {
            wit_bindgen::generate!({
                path: "../wit",
                world: $world,
                pub_export_macro: true,
                export_macro_name: $export,
                with: {
                    "skillhost:skill/types@0.1.0": crate::bindings::skillhost::skill::types,
                },
            });
        }
    };
    ($module:ident, $world:literal, $export:literal, uses_types_and_blocks) => {
        #[doc = concat!("Bindings of world `", $world, "`.")]
        pub mod $module {
            wit_bindgen::generate!({
                path: "../wit",
                world: $world,
                pub_export_macro: true,
                export_macro_name: $export,
                with: {
                    "skillhost:skill/types@0.1.0": crate::bindings::skillhost::skill::types,
                    "skillhost:skill/blocks@0.1.0": crate::bindings::skillhost::skill::blocks,
                },
            });
        }
    };
    ($module:ident, $world:literal, $export:literal) => {
        #[doc = concat!("Bindings of world `", $world, "`.")]
        pub mod $module {
            wit_bindgen::generate!({
                path: "../wit",
                world: $world,
                pub_export_macro: true,
                export_macro_name: $export,
            });
        }
    };
}

// Brace-delimited so that rustfmt keeps one hook per line.
hook_world! { resolve_human, "hook-resolve-human", "export_resolve_human", uses_types }
hook_world! { availability, "hook-availability", "export_availability" }
hook_world! { startup, "hook-startup", "export_startup" }
hook_world! { scheduled, "hook-scheduled", "export_scheduled" }
hook_world! { before_mcp_call, "hook-before-mcp-call", "export_before_mcp_call", uses_types }
hook_world! { observe_mcp_result, "hook-observe-mcp-result", "export_observe_mcp_result", uses_types }
hook_world! { tool_result_empty, "hook-tool-result-empty", "export_tool_result_empty" }
hook_world! { tool_target, "hook-tool-target", "export_tool_target", uses_types }
hook_world! { resources, "hook-resources", "export_resources", uses_types_and_blocks }
hook_world! { prompts, "hook-prompts", "export_prompts", uses_types_and_blocks }
hook_world! { client_capabilities, "hook-client-capabilities", "export_client_capabilities" }
hook_world! { task_support, "hook-task-support", "export_task_support" }
