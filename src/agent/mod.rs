//! Agents: the coding-agent CLIs cbrun runs in the solve sandbox.
//!
//! - [`spec`]: the declarative agent spec (JSON or TOML), strictly checked.
//! - [`render`]: a spec's command template filled in for one run.
//! - [`builtin`]: the specs shipped in the binary (`agents/*.toml`) and
//!   resolving an agent argument (shipped name, spec file, `replay:DIR`, `none`).
//! - [`instruction`]: the task instruction every agent is given.

pub mod builtin;
pub mod instruction;
pub mod render;
pub mod signals;
pub mod spec;

pub use builtin::{resolve, shipped, shipped_names, shipped_spec, AgentRef, SpecSource};
pub use instruction::{render_instruction, InstructionFacts};
pub use render::{needs_model, render_command, shell_single_quote, RenderError, RenderInputs};
pub use spec::{load, parse, AgentSpec, Format, ModelPrefix, RunAs, SpecError};
