//! `[[variant]]` tables and the `variants` sweep axis (issue 23): each named tuning
//! resolved into typed knobs and raw text, checked against every managed target of the
//! study before anything starts (an unknown knob, a wrong value or a knob a kind cannot
//! express is one line naming variant, kind and key).

use volley_netlab::tune::{RouteSettings, Sysctl};
use volley_targets::config::knobs::{parse_assignment, Assignment};
use volley_targets::config::Tuning;
use volley_targets::TargetKind;

use super::model::{Target, Variant};
use crate::spec::{StudyFile, VariantDef};
use crate::StudyError;

/// The name that needs no table: volley's generated configuration.
pub const DEFAULT: &str = "default";

fn invalid(msg: String) -> StudyError {
    StudyError::Invalid(msg)
}

/// A TOML value as `--set` would write it (`true`, `1024`, `"text"`).
fn as_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One `[[variant]]` table as a tuning.
fn tuning_of(def: &VariantDef) -> Result<Tuning, StudyError> {
    let name = &def.name;
    let mut tuning = Tuning::default();
    for (k, v) in &def.server {
        let a = parse_assignment(&format!("{k}={}", as_text(v)))
            .map_err(|e| invalid(format!("variant '{name}': {e}")))?;
        if matches!(a, Assignment::Raw(..)) {
            return Err(invalid(format!(
                "variant '{name}': server.{k}: raw text goes in raw.KIND, not server"
            )));
        }
        tuning.assign(&a);
    }
    for (kind, text) in &def.raw {
        let kind: TargetKind = kind
            .parse()
            .map_err(|e| invalid(format!("variant '{name}': raw.{kind}: {e}")))?;
        tuning.assign(&Assignment::Raw(kind, text.clone()));
    }
    Ok(tuning)
}

/// A variant's kernel settings: sysctls and route switches, parsed (their checks
/// against the kernel happen in the lab, before any target starts).
fn kernel_of(def: &VariantDef) -> Result<(Vec<Sysctl>, RouteSettings), StudyError> {
    let name = &def.name;
    let mut sysctls = Vec::new();
    for (k, v) in &def.sysctl {
        let s = Sysctl::new(k, &as_text(v)).ok_or_else(|| {
            invalid(format!(
                "variant '{name}': sysctl {k}: not a sysctl name with a value"
            ))
        })?;
        sysctls.push(s);
    }
    let mut route = RouteSettings::default();
    for (k, v) in &def.route {
        match (k.as_str(), v) {
            ("quickack", toml::Value::Boolean(b)) => route.quickack = Some(*b),
            ("quickack", _) => {
                return Err(invalid(format!(
                    "variant '{name}': route quickack takes true or false"
                )))
            }
            _ => {
                return Err(invalid(format!(
                    "variant '{name}': unknown route setting '{k}' (known: quickack)"
                )))
            }
        }
    }
    Ok((sysctls, route))
}

/// The variant `name` of `file` as a tuning (`default` without a table: none), for
/// `volley targets --show-config KIND --variant NAME --study FILE`.
pub fn variant_tuning(file: &StudyFile, name: &str) -> Result<Tuning, StudyError> {
    match file.variants.iter().find(|v| v.name == name) {
        Some(def) => tuning_of(def),
        None if name == DEFAULT => Ok(Tuning::default()),
        None => Err(invalid(format!(
            "no [[variant]] named '{name}' (declared: {})",
            declared(file)
        ))),
    }
}

fn declared(file: &StudyFile) -> String {
    let mut names: Vec<&str> = file.variants.iter().map(|v| v.name.as_str()).collect();
    if !names.contains(&DEFAULT) {
        names.insert(0, DEFAULT);
    }
    names.join(", ")
}

/// The `variants` axis, resolved and checked against every target of the plan; empty
/// when the study has none.
pub(super) fn resolve_variants(
    file: &StudyFile,
    targets: &[Target],
) -> Result<Vec<Variant>, StudyError> {
    let Some(names) = &file.sweep.variants else {
        if let Some(v) = file.variants.first() {
            return Err(invalid(format!(
                "[[variant]] '{}' is declared but sweep.variants names no variant: add sweep.variants = [\"default\", \"{}\"]",
                v.name, v.name
            )));
        }
        return Ok(Vec::new());
    };
    if names.is_empty() {
        return Err(invalid("sweep.variants names no variant".into()));
    }
    for (i, d) in file.variants.iter().enumerate() {
        if file.variants[..i].iter().any(|e| e.name == d.name) {
            return Err(invalid(format!(
                "two [[variant]] tables are named '{}'",
                d.name
            )));
        }
        if !names.contains(&d.name) {
            return Err(invalid(format!(
                "[[variant]] '{}' is declared but not in sweep.variants",
                d.name
            )));
        }
    }
    let mut out: Vec<Variant> = Vec::new();
    for name in names {
        if out.iter().any(|v| &v.name == name) {
            return Err(invalid(format!("sweep.variants names '{name}' twice")));
        }
        let tuning = variant_tuning(file, name)?;
        for t in targets {
            if t.kind == TargetKind::External && tuning.is_empty() {
                continue;
            }
            tuning
                .check(t.kind)
                .map_err(|e| invalid(format!("variant '{name}', target '{}': {e}", t.name)))?;
        }
        let (sysctls, route) = match file.variants.iter().find(|v| &v.name == name) {
            Some(def) => kernel_of(def)?,
            None => (Vec::new(), RouteSettings::default()),
        };
        if (!sysctls.is_empty() || route.quickack.is_some()) && file.injectors.is_some() {
            return Err(invalid(format!(
                "variant '{name}': kernel settings with [injectors] are not supported yet (the variant's own lab would need the injectors in it)"
            )));
        }
        out.push(Variant {
            name: name.clone(),
            tuning,
            sysctls,
            route,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::plan::{resolve, Plan};
    use crate::StudyError;

    fn plan(extra: &str) -> Result<Plan, StudyError> {
        let text = format!(
            r#"
name = "v"
[[target]]
name = "web"
kind = "nginx"
[[workload]]
name = "w"
paths = ["/x"]
[load]
model = "closed"
concurrency = 2
[steps]
duration = "2s"
repeats = 2
{extra}"#
        );
        resolve(&crate::spec::parse(&text)?, &text, 1.0)
    }

    const TUNED: &str = r#"
[sweep]
concurrency = [1, 4]
variants = ["default", "tuned"]
[[variant]]
name = "tuned"
server = { sendfile = false, defer_accept = true, backlog = 1024, workers = 2 }
raw.nginx = "open_file_cache max=100;"
"#;

    #[test]
    fn variants_are_an_instance_axis_interleaved_at_every_point() {
        let p = plan(TUNED).unwrap();
        assert_eq!(p.variants.len(), 2);
        assert!(p.variants[0].tuning.is_empty());
        let t = &p.variants[1].tuning;
        assert_eq!(t.knobs.backlog, Some(1024));
        assert_eq!(t.knobs.sendfile, Some(false));
        assert_eq!(
            t.raw_for(volley_targets::TargetKind::Nginx),
            Some("open_file_cache max=100;")
        );
        assert_eq!(p.axis, "concurrency");
        let order: Vec<String> = p
            .steps
            .iter()
            .map(|s| {
                let c = &p.cells[s.cell];
                format!("{}:{}", p.instance_label(c.instance), c.concurrency)
            })
            .collect();
        assert_eq!(
            order,
            [
                "web variant=default:1",
                "web variant=tuned:1",
                "web variant=default:4",
                "web variant=tuned:4",
                "web variant=default:1",
                "web variant=tuned:1",
                "web variant=default:4",
                "web variant=tuned:4",
            ]
        );
    }

    #[test]
    fn bad_variants_are_one_line_naming_the_key() {
        let cases = [
            (
                "[sweep]\nvariants = [\"default\", \"t\"]\n[[variant]]\nname = \"t\"\nserver = { backlgo = 1 }\n",
                "variant 't': unknown server knob 'backlgo'",
            ),
            (
                "[sweep]\nvariants = [\"default\", \"t\"]\n[[variant]]\nname = \"t\"\nserver = { backlog = \"many\" }\n",
                "variant 't': server knob backlog: 'many' is not a whole number",
            ),
            (
                "[sweep]\nvariants = [\"default\", \"nope\"]\n",
                "no [[variant]] named 'nope'",
            ),
            (
                "[[variant]]\nname = \"t\"\nserver = { backlog = 16 }\n",
                "[[variant]] 't' is declared but sweep.variants names no variant",
            ),
            (
                "[sweep]\nvariants = [\"t\"]\n[[variant]]\nname = \"t\"\nroute = { quickack = 1 }\n",
                "variant 't': route quickack takes true or false",
            ),
        ];
        for (extra, want) in cases {
            let e = plan(extra).unwrap_err().to_string();
            assert!(e.contains(want), "{extra}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let caddy = r#"
name = "v"
[[target]]
name = "c"
kind = "caddy"
[[workload]]
name = "w"
paths = ["/x"]
[sweep]
variants = ["default", "t"]
[[variant]]
name = "t"
server = { backlog = 16 }
"#;
        let e = resolve(&crate::spec::parse(caddy).unwrap(), caddy, 1.0)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("variant 't', target 'c': caddy cannot express server knob backlog"),
            "{e}"
        );
    }
}
