//! Finding a manifest's `sensitive_terms` in text the agent will read, as
//! the published release check does: case-insensitively, and only at
//! identifier boundaries, so the term `ada` matches "ada" and "Ada." but
//! not "metadata" or "ada_url". Punctuation inside a term (`.`, `/`, `-`,
//! `@`, `:`) is matched literally.

/// Whether `c` is a word character in the sense of a Unicode regex `\w`.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// One character folded for a case-insensitive comparison: its lowercase
/// form when that is a single character (as a regex engine compares), else
/// the character itself.
fn fold(c: char) -> char {
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(l), None) => l,
        _ => c,
    }
}

/// Text prepared for searching many terms.
pub(crate) struct Haystack {
    folded: Vec<char>,
    original: Vec<char>,
}

impl Haystack {
    pub fn new(text: &str) -> Haystack {
        let original: Vec<char> = text.chars().collect();
        let folded = original.iter().map(|&c| fold(c)).collect();
        Haystack { folded, original }
    }

    /// How often `term` occurs with no word character right before or right
    /// after it. An empty (or all-blank) term never matches.
    pub fn count(&self, term: &str) -> usize {
        let needle: Vec<char> = term.chars().map(fold).collect();
        if term.trim().is_empty() || needle.len() > self.folded.len() {
            return 0;
        }
        let mut n = 0;
        let mut i = 0;
        while i + needle.len() <= self.folded.len() {
            if self.folded[i..i + needle.len()] == needle[..] {
                let before = i.checked_sub(1).map(|j| self.original[j]);
                let after = self.original.get(i + needle.len()).copied();
                if !before.is_some_and(is_word) && !after.is_some_and(is_word) {
                    n += 1;
                    // Matches do not overlap.
                    i += needle.len();
                    continue;
                }
            }
            i += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(text: &str, term: &str) -> usize {
        Haystack::new(text).count(term)
    }

    #[test]
    fn boundaries() {
        assert_eq!(count("Ada is here. ADA! (ada)", "ada"), 3);
        assert_eq!(count("metadata adapter ada_url ada2 _ada", "ada"), 0);
        // A hyphen or slash is a boundary, an underscore is not.
        assert_eq!(count("ada-url ada/x x.ada", "ada"), 3);
        assert_eq!(count("", "ada"), 0);
        assert_eq!(count("anything", ""), 0);
        assert_eq!(count("anything", "  "), 0);
    }

    #[test]
    fn punctuation_inside_terms_is_literal() {
        let t = "see github.com/acme/tool or github.com/acme/toolbox";
        assert_eq!(count(t, "github.com/acme/tool"), 1);
        assert_eq!(count("githubXcom", "github.com"), 0);
        // A term that starts with punctuation still needs a boundary before it.
        assert_eq!(count("file.blr and x .blr", ".blr"), 1);
        assert_eq!(count("Git LFS and git  lfs", "git lfs"), 1);
        assert_eq!(count("mail dev@acme.example now", "dev@acme.example"), 1);
    }

    #[test]
    fn unicode_case_and_words() {
        assert_eq!(count("Straße STRASSE", "straße"), 1);
        assert_eq!(count("ÄRGER ärger", "ärger"), 2);
        // Non-ASCII letters are word characters.
        assert_eq!(count("éada adaé", "ada"), 0);
        assert_eq!(count("İstanbul", "i̇stanbul"), 0);
    }

    #[test]
    fn matches_do_not_overlap() {
        assert_eq!(count("aa aa", "aa"), 2);
        assert_eq!(count("a-a-a", "a-a"), 1);
    }
}
