//! Agents: the coding-agent CLIs cbrun runs in the solve sandbox.
//!
//! - [`spec`]: the declarative agent spec (JSON or TOML), strictly checked.
//! - [`render`]: a spec's command template filled in for one run.
//! - [`builtin`]: the specs shipped in the binary (`agents/*.toml`) and
//!   resolving an agent argument (shipped name, spec file, `replay:DIR`, `none`).
//! - [`instruction`]: the task instruction every agent is given.
//! - [`cache`]: installed CLIs kept for later trials.
//! - [`evidence`]: what a run left: usage and cost ([`crate::usage`]),
//!   infrastructure [`signals`], [`transcripts`].

pub mod builtin;
pub mod cache;
pub mod evidence;
pub mod instruction;
pub mod render;
pub mod signals;
pub mod spec;
pub mod transcripts;

pub use builtin::{resolve, shipped, shipped_names, shipped_spec, AgentRef, SpecSource};
pub use instruction::{render_instruction, InstructionFacts};
pub use render::{needs_model, render_command, shell_single_quote, RenderError, RenderInputs};
pub use spec::{load, parse, AgentSpec, Format, ModelPrefix, RunAs, SpecError};
