//! The price table: list prices per million tokens, with aliases. The
//! built-in one is `data/pricing.toml`; `--pricing FILE` or
//! `CBRUN_PRICING=FILE` replaces it (same format, checked as strictly:
//! an unknown field, a negative or non-finite price, or a name claimed
//! twice is an error naming the file and field).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

/// The table shipped in the binary.
const BUILTIN: &str = include_str!("../../data/pricing.toml");
pub const BUILTIN_ORIGIN: &str = "built-in data/pricing.toml";
/// The variable naming a replacement table.
pub const ENV_PRICING: &str = "CBRUN_PRICING";
/// Largest table file read.
const MAX_FILE: u64 = 4 << 20;

/// Prices of one model, USD per million tokens.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// `vendor/name`, as the vendor names the model.
    pub id: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    pub input: f64,
    pub output: f64,
    /// Cache hits; left out: priced as `input`.
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// 5-minute cache writes; left out: priced as `input`.
    #[serde(default)]
    pub cache_write: Option<f64>,
    /// 1-hour cache writes; left out: priced as `cache_write`.
    #[serde(default)]
    pub cache_write_1h: Option<f64>,
    #[serde(default)]
    pub source: Option<String>,
}

impl ModelPrice {
    pub fn cache_read_price(&self) -> f64 {
        self.cache_read.unwrap_or(self.input)
    }
    pub fn cache_write_price(&self) -> f64 {
        self.cache_write.unwrap_or(self.input)
    }
    pub fn cache_write_1h_price(&self) -> f64 {
        self.cache_write_1h
            .unwrap_or_else(|| self.cache_write_price())
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    date: String,
    currency: String,
    #[serde(default)]
    unit: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    notes: Option<String>,
    #[serde(default)]
    model: Vec<ModelPrice>,
}

/// A checked price table.
#[derive(Debug, Clone)]
pub struct PriceTable {
    /// When the prices were read (`YYYY-MM-DD`), as the file says.
    pub date: String,
    /// Where the table came from: the built-in one or a file.
    pub origin: String,
    models: Vec<ModelPrice>,
    /// Normalized name -> index into `models`.
    names: BTreeMap<String, usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {field}{reason}")]
pub struct PricingError {
    pub origin: String,
    /// `field FIELD: `, or empty.
    field: String,
    reason: String,
}

fn perr(origin: &str, field: Option<&str>, reason: impl Into<String>) -> PricingError {
    PricingError {
        origin: origin.to_owned(),
        field: field.map(|f| format!("field {f}: ")).unwrap_or_default(),
        reason: reason.into().replace('\n', " "),
    }
}

/// How names are compared: case folded, `vendor/` prefix, `[...]` suffix
/// and a date suffix dropped, `.` as `-`.
pub fn normalize(name: &str) -> String {
    let mut n = name.trim().to_ascii_lowercase();
    if let Some((_, leaf)) = n.rsplit_once('/') {
        n = leaf.to_owned();
    }
    if let Some(open) = n.find('[') {
        if n.ends_with(']') {
            n.truncate(open);
        }
    }
    n = n.replace('.', "-");
    strip_date(&n).to_owned()
}

/// `-YYYYMMDD` or `-YYYY-MM-DD` at the end.
fn strip_date(n: &str) -> &str {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((head, tail)) = n.rsplit_once('-') {
        if tail.len() == 8 && digits(tail) {
            return head;
        }
        // -YYYY-MM-DD: the last three pieces.
        let parts: Vec<&str> = n.rsplitn(4, '-').collect();
        if parts.len() == 4
            && parts[0].len() == 2
            && parts[1].len() == 2
            && parts[2].len() == 4
            && parts[..3].iter().all(|p| digits(p))
        {
            return parts[3];
        }
    }
    n
}

/// Reasoning-effort suffixes some CLIs append to a model name.
const EFFORTS: &[&str] = &["-minimal", "-low", "-medium", "-high", "-xhigh", "-max"];

impl PriceTable {
    /// The table shipped in the binary.
    pub fn builtin() -> PriceTable {
        PriceTable::parse(BUILTIN, BUILTIN_ORIGIN)
            .unwrap_or_else(|e| panic!("the built-in price table is invalid: {e}"))
    }

    /// Reads a table file.
    pub fn load(path: &Path) -> Result<PriceTable, PricingError> {
        let origin = path.display().to_string();
        let meta = std::fs::metadata(path)
            .map_err(|e| perr(&origin, None, format!("cannot read: {e}")))?;
        if !meta.is_file() {
            return Err(perr(&origin, None, "not a regular file"));
        }
        if meta.len() > MAX_FILE {
            return Err(perr(&origin, None, format!("larger than {MAX_FILE} bytes")));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| perr(&origin, None, format!("cannot read: {e}")))?;
        PriceTable::parse(&text, &origin)
    }

    /// `--pricing FILE` when given, else `$CBRUN_PRICING`, else the
    /// built-in table.
    pub fn resolve(flag: Option<&Path>) -> Result<PriceTable, PricingError> {
        if let Some(p) = flag {
            return PriceTable::load(p);
        }
        match std::env::var_os(ENV_PRICING).filter(|v| !v.is_empty()) {
            Some(p) => PriceTable::load(Path::new(&p)).map_err(|mut e| {
                e.origin = format!("{ENV_PRICING}={}", e.origin);
                e
            }),
            None => Ok(PriceTable::builtin()),
        }
    }

    /// Parses and checks table text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<PriceTable, PricingError> {
        let file: TableFile = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            let at = line.map(|l| format!(" at line {l}")).unwrap_or_default();
            perr(
                origin,
                None,
                format!("invalid price table{at}: {}", e.message()),
            )
        })?;
        if !valid_date(&file.date) {
            return Err(perr(
                origin,
                Some("date"),
                format!("{:?} is not YYYY-MM-DD", file.date),
            ));
        }
        if file.currency != "USD" {
            return Err(perr(
                origin,
                Some("currency"),
                format!("{:?}: only USD tables are supported", file.currency),
            ));
        }
        let _ = (&file.unit, &file.source, &file.notes);
        let mut names = BTreeMap::new();
        for (i, m) in file.model.iter().enumerate() {
            let at = |f: &str| format!("model[{i}].{f}");
            if m.id.trim().is_empty() {
                return Err(perr(origin, Some(&at("id")), "must not be empty"));
            }
            for (f, v) in [
                ("input", Some(m.input)),
                ("output", Some(m.output)),
                ("cache_read", m.cache_read),
                ("cache_write", m.cache_write),
                ("cache_write_1h", m.cache_write_1h),
            ] {
                if let Some(v) = v {
                    if !v.is_finite() || v < 0.0 {
                        return Err(perr(
                            origin,
                            Some(&at(f)),
                            format!("{v} is not a price (a finite number >= 0)"),
                        ));
                    }
                }
            }
            for (j, name) in std::iter::once(&m.id).chain(m.aliases.iter()).enumerate() {
                let key = normalize(name);
                let field = if j == 0 {
                    at("id")
                } else {
                    at(&format!("aliases[{}]", j - 1))
                };
                if key.is_empty() {
                    return Err(perr(
                        origin,
                        Some(&field),
                        format!("{name:?} names no model"),
                    ));
                }
                if let Some(prev) = names.insert(key.clone(), i) {
                    if prev != i {
                        return Err(perr(
                            origin,
                            Some(&field),
                            format!("{name:?} is also model[{prev}] ({})", file.model[prev].id),
                        ));
                    }
                }
            }
        }
        Ok(PriceTable {
            date: file.date,
            origin: origin.to_owned(),
            models: file.model,
            names,
        })
    }

    /// The prices of `model`, by its name as a CLI or the user wrote it.
    pub fn lookup(&self, model: &str) -> Option<&ModelPrice> {
        let key = normalize(model);
        if let Some(i) = self.names.get(&key) {
            return Some(&self.models[*i]);
        }
        let base = EFFORTS.iter().find_map(|e| key.strip_suffix(e))?;
        self.names.get(strip_date(base)).map(|i| &self.models[*i])
    }

    pub fn models(&self) -> &[ModelPrice] {
        &self.models
    }

    /// `pricing-table:<date>`, for the record.
    pub fn source_label(&self) -> String {
        format!("pricing-table:{}", self.date)
    }
}

fn valid_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_table_loads_and_is_dated() {
        let t = PriceTable::builtin();
        assert_eq!(t.date, "2026-12-01");
        assert_eq!(t.source_label(), "pricing-table:2026-12-01");
        assert!(t.models().len() > 10);
        for m in t.models() {
            assert!(
                m.source
                    .as_deref()
                    .is_some_and(|s| s.starts_with("https://")),
                "{}",
                m.id
            );
        }
    }

    #[test]
    fn names_fold_vendor_case_dates_dots_and_brackets() {
        assert_eq!(normalize("anthropic/Claude-Opus-5.5"), "claude-opus-5-5");
        assert_eq!(normalize("claude-sonnet-4-20250514"), "claude-sonnet-4");
        assert_eq!(normalize("gpt-5-2025-08-07"), "gpt-5");
        assert_eq!(normalize("claude-opus-5-5[1m]"), "claude-opus-5-5");
        assert_eq!(normalize("openrouter/openai/gpt-6.1-sol"), "gpt-6-1-sol");
        assert_eq!(normalize("gpt-4-1"), "gpt-4-1", "a short number is no date");
        let t = PriceTable::builtin();
        for (name, id) in [
            ("claude-sonnet-5-5", "anthropic/claude-sonnet-5-5"),
            ("anthropic/claude-sonnet-5.5", "anthropic/claude-sonnet-5-5"),
            ("claude-opus-4-5-20251101", "anthropic/claude-opus-5"),
            ("claude-3-5-haiku-20241022", "anthropic/claude-haiku-3-5"),
            ("GPT-5.5", "openai/gpt-5-5"),
            ("gpt-6-sol-high", "openai/gpt-6-sol"),
            ("gpt-5-codex", "openai/gpt-5"),
        ] {
            assert_eq!(t.lookup(name).map(|m| m.id.as_str()), Some(id), "{name}");
        }
        assert!(t.lookup("my-local-model").is_none());
        assert!(t.lookup("").is_none());
        // An effort suffix is dropped only when the full name is unknown.
        assert_eq!(
            t.lookup("gpt-5-mini").map(|m| m.id.as_str()),
            Some("openai/gpt-5-mini")
        );
    }

    #[test]
    fn missing_cache_prices_fall_back() {
        let t = PriceTable::parse(
            "date = \"2026-01-02\"\ncurrency = \"USD\"\n[[model]]\nid = \"v/m\"\ninput = 2.0\noutput = 8.0\n",
            "t.toml",
        )
        .unwrap();
        let m = t.lookup("m").unwrap();
        assert_eq!(m.cache_read_price(), 2.0);
        assert_eq!(m.cache_write_price(), 2.0);
        assert_eq!(m.cache_write_1h_price(), 2.0);
        let sonnet = PriceTable::builtin();
        let s = sonnet.lookup("claude-sonnet-5-5").unwrap();
        assert_eq!(s.cache_write_1h_price(), 4.0);
        let gpt = sonnet.lookup("gpt-6-sol").unwrap();
        assert_eq!(gpt.cache_write_price(), 2.0, "OpenAI: writes cost input");
    }

    #[test]
    fn bad_tables_name_file_and_field() {
        let head = "date = \"2026-01-02\"\ncurrency = \"USD\"\n";
        for (body, want) in [
            ("[[model]]\nid = \"a\"\ninput = -1.0\noutput = 1.0\n", "t.toml: field model[0].input: -1"),
            ("[[model]]\nid = \"a\"\ninput = 1.0\noutput = nan\n", "t.toml: field model[0].output: NaN"),
            ("[[model]]\nid = \"a\"\ninput = 1.0\noutput = 1.0\nprice = 3\n", "unknown field `price`"),
            ("[[model]]\nid = \"a\"\ninput = 1.0\n", "missing field `output`"),
            (
                "[[model]]\nid = \"v/a.1\"\ninput = 1.0\noutput = 1.0\n[[model]]\nid = \"b\"\naliases = [\"A-1\"]\ninput = 1.0\noutput = 1.0\n",
                "t.toml: field model[1].aliases[0]: \"A-1\" is also model[0] (v/a.1)",
            ),
            ("[[model]]\nid = \" \"\ninput = 1.0\noutput = 1.0\n", "model[0].id: must not be empty"),
        ] {
            let e = PriceTable::parse(&format!("{head}{body}"), "t.toml").unwrap_err().to_string();
            assert!(e.contains(want), "{body:?}: {e}");
            assert!(e.starts_with("t.toml: "), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let e = PriceTable::parse("date = \"Dec 1\"\ncurrency = \"USD\"\n", "t.toml").unwrap_err();
        assert!(e.to_string().contains("field date"), "{e}");
        let e =
            PriceTable::parse("date = \"2026-01-02\"\ncurrency = \"CNY\"\n", "t.toml").unwrap_err();
        assert!(e.to_string().contains("only USD"), "{e}");
        let e = PriceTable::parse("date = \n", "t.toml").unwrap_err();
        assert!(e.to_string().contains("at line 1"), "{e}");
    }

    #[test]
    fn a_file_replaces_the_builtin_table() {
        let dir = std::env::temp_dir().join(format!("cbrun-pricing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("prices.toml");
        std::fs::write(
            &p,
            "date = \"2027-03-04\"\ncurrency = \"USD\"\n[[model]]\nid = \"mine/m1\"\ninput = 1.0\noutput = 2.0\n",
        )
        .unwrap();
        let t = PriceTable::resolve(Some(&p)).unwrap();
        assert_eq!(t.date, "2027-03-04");
        assert!(t.lookup("m1").is_some());
        assert!(
            t.lookup("claude-sonnet-5-5").is_none(),
            "replaced, not merged"
        );
        let e = PriceTable::resolve(Some(&dir.join("nope.toml"))).unwrap_err();
        assert!(e.to_string().contains("nope.toml: cannot read"), "{e}");
        let e = PriceTable::resolve(Some(&dir)).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
