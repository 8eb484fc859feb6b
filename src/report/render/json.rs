//! JSON: the whole report as data (`--table` narrows it to one table).
//! Unknown values are `null`, never 0.

use super::{RenderError, Section};
use crate::report::Report;

pub fn render(r: &Report, only: Option<Section>) -> Result<String, RenderError> {
    let v = match only {
        None => serde_json::to_value(r)?,
        Some(s) => super::csv::section_value(r, s)?,
    };
    let mut s = serde_json::to_string_pretty(&v)?;
    s.push('\n');
    Ok(s)
}
