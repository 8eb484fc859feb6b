//! What an agent's run cost: the token counts its CLI reported, and their
//! price.
//!
//! - [`tokens`]: the counts ([`Tokens`]) and what one run's logs add up to
//!   ([`Usage`]).
//! - [`format`]: which output format a CLI prints ([`UsageFormat`], named by
//!   the spec's `usage_format`) and the parser for each, one file per
//!   format: [`claude`], [`codex`], [`opencode`], [`cursor`].
//! - [`pricing`]: the price table (`data/pricing.toml`, built in; a user
//!   file replaces it).
//! - [`cost`]: counts times prices, with the models that have no price.
//!
//! The counts follow Anthropic's convention whatever the CLI: `input` is
//! uncached input only (`input + cache_read + cache_write` is the whole
//! prompt), `output` is billed output (reasoning included), and
//! `reasoning` is the part of `output` that was reasoning, when the CLI
//! says. Everything here reads what the agent's sandbox printed, so it is
//! the agent's own word: parsers skip what does not fit and never fail.

pub mod claude;
pub mod codex;
pub mod cost;
pub mod cursor;
pub mod format;
pub mod opencode;
pub mod pricing;
pub mod tokens;

pub use cost::{price, Cost};
pub use format::UsageFormat;
pub use pricing::{PriceTable, PricingError};
pub use tokens::{Tokens, Usage};
