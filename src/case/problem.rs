//! One finding of [`check`](super::check): which file, which field, why.

use std::fmt;
use std::path::PathBuf;

/// How bad a [`Problem`] is. Errors make a case unusable; warnings do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Error,
    Warning,
}

/// One finding. Displays as one line: `<case>/<file>: <field>: <reason>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The case folder's name.
    pub case: String,
    /// The file concerned, relative to the case folder.
    pub file: PathBuf,
    /// Dotted path into the file, e.g. `runner.environment_checks[0].timeout_sec`;
    /// `-` when the problem concerns the file as a whole.
    pub field: String,
    pub reason: String,
    pub severity: Severity,
}

impl Problem {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}: {}: {}",
            self.case,
            self.file.display(),
            self.field,
            self.reason
        )
    }
}

/// Collects problems for one case.
pub(crate) struct Sink {
    case: String,
    pub problems: Vec<Problem>,
}

impl Sink {
    pub fn new(case: String) -> Self {
        Sink {
            case: one_line(&case),
            problems: Vec::new(),
        }
    }

    pub fn push(&mut self, severity: Severity, file: &str, field: &str, reason: &str) {
        let field = if field.is_empty() { "-" } else { field };
        self.problems.push(Problem {
            case: self.case.clone(),
            file: PathBuf::from(one_line(file)),
            field: one_line(field),
            reason: one_line(reason),
            severity,
        });
    }

    pub fn error(&mut self, file: &str, field: &str, reason: &str) {
        self.push(Severity::Error, file, field, reason);
    }

    pub fn warn(&mut self, file: &str, field: &str, reason: &str) {
        self.push(Severity::Warning, file, field, reason);
    }
}

/// Keeps a message on one line whatever the input (file names, JSON text).
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_one_line() {
        let mut sink = Sink::new("case001".into());
        sink.error("source/manifest.json", "runner.x", "bad\nvalue");
        sink.warn("public/Full_PRD.md", "", "hmm");
        assert_eq!(
            sink.problems[0].to_string(),
            "case001/source/manifest.json: runner.x: bad value"
        );
        assert_eq!(
            sink.problems[1].to_string(),
            "case001/public/Full_PRD.md: -: hmm"
        );
        assert!(sink.problems[0].is_error() && !sink.problems[1].is_error());
    }
}
