//! `plan.toml` of a run folder, as the report reads it: the run's id, the
//! number of repeats, and the cases and configurations it means to run
//! (so that trials not started yet show as pending, and each case has its
//! language). Keys the report does not use are ignored; the ones it uses
//! are checked like record fields.

use serde::Deserialize;

use super::record::MAX_NAME;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub run_id: Option<String>,
    pub created_at: Option<String>,
    pub repeats: u32,
    pub cases: Vec<PlanCase>,
    pub configs: Vec<PlanConfig>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlanCase {
    pub id: String,
    pub language: Option<String>,
}

/// What defines a configuration; two runs whose configuration of one name
/// differ in any of these are pooled with a warning.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PlanConfig {
    pub name: String,
    pub agent: Option<String>,
    pub model: Option<String>,
    pub spec_sha256: Option<String>,
}

#[derive(Deserialize)]
struct RawPlan {
    run_id: Option<String>,
    created_at: Option<String>,
    repeats: Option<i64>,
    #[serde(default)]
    case: Vec<RawCase>,
    #[serde(default)]
    config: Vec<RawConfig>,
}

#[derive(Deserialize)]
struct RawCase {
    id: String,
    language: Option<String>,
}

#[derive(Deserialize)]
struct RawConfig {
    name: String,
    agent: Option<String>,
    model: Option<String>,
    spec_sha256: Option<String>,
}

/// The most repeats a plan may ask for (more is a broken file).
const MAX_REPEATS: i64 = 10_000;

/// Parses `plan.toml`; the error names the field.
pub fn parse(text: &str) -> Result<Plan, String> {
    let raw: RawPlan = toml::from_str(text).map_err(|e| one_line(&e.to_string()))?;
    let repeats = match raw.repeats {
        None => 1,
        Some(n) if (1..=MAX_REPEATS).contains(&n) => n as u32,
        Some(n) => return Err(format!("repeats: {n}: must be 1 to {MAX_REPEATS}")),
    };
    let mut cases = Vec::new();
    for (i, c) in raw.case.into_iter().enumerate() {
        folder_name(&c.id).map_err(|e| format!("case[{i}].id: {e}"))?;
        if cases.iter().any(|x: &PlanCase| x.id == c.id) {
            return Err(format!("case[{i}].id: {:?} is listed twice", c.id));
        }
        cases.push(PlanCase {
            id: c.id,
            language: c.language.filter(|l| !l.is_empty() && l.len() <= MAX_NAME),
        });
    }
    let mut configs = Vec::new();
    for (i, c) in raw.config.into_iter().enumerate() {
        folder_name(&c.name).map_err(|e| format!("config[{i}].name: {e}"))?;
        if configs.iter().any(|x: &PlanConfig| x.name == c.name) {
            return Err(format!("config[{i}].name: {:?} is listed twice", c.name));
        }
        configs.push(PlanConfig {
            name: c.name,
            agent: c.agent,
            model: c.model,
            spec_sha256: c.spec_sha256,
        });
    }
    Ok(Plan {
        run_id: raw.run_id,
        created_at: raw.created_at,
        repeats,
        cases,
        configs,
    })
}

/// A case id or configuration name must be usable as one folder name.
pub fn folder_name(s: &str) -> Result<(), &'static str> {
    if s.is_empty() {
        return Err("empty");
    }
    if s.len() > MAX_NAME {
        return Err("too long");
    }
    if s == "." || s == ".." || s.contains('/') || s.contains('\0') {
        return Err("not a folder name");
    }
    Ok(())
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_contract_shape() {
        let p = parse(
            r#"
run_id = "r1"
repeats = 2
[[case]]
id = "case001"
language = "Python"
sha256 = "x"
[[config]]
name = "ref"
agent = "replay:@reference"
solve_timeout = 7200.0
"#,
        )
        .unwrap();
        assert_eq!(p.run_id.as_deref(), Some("r1"));
        assert_eq!(p.repeats, 2);
        assert_eq!(p.cases[0].language.as_deref(), Some("Python"));
        assert_eq!(p.configs[0].agent.as_deref(), Some("replay:@reference"));
    }

    #[test]
    fn bad_plans_name_the_field() {
        assert!(parse("repeats = 0").unwrap_err().starts_with("repeats"));
        assert!(parse("[[case]]\nid = \"../x\"")
            .unwrap_err()
            .starts_with("case[0].id"));
        assert!(parse("[[config]]\nname = \"a\"\n[[config]]\nname = \"a\"")
            .unwrap_err()
            .contains("twice"));
        assert!(parse("repeats = \"two\"").is_err());
    }
}
