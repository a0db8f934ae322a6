//! `[[variant]]` tables and the `variants` sweep axis (issue 23): each named tuning
//! resolved into typed knobs and raw text, checked against every managed target of the
//! study before anything starts (an unknown knob, a wrong value or a knob a kind cannot
//! express is one line naming variant, kind and key).

use volley_netlab::tune::{RouteSettings, Sysctl};
use volley_targets::config::knobs::{parse_assignment, Assignment};
use volley_targets::config::Tuning;
use volley_targets::TargetKind;

use super::model::{Target, Variant};
use crate::spec::{StudyFile, VariantDef, VariantsAxis};
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

/// One knob of a `[[variant]]`: its short name (`somaxconn`, `defer_accept`,
/// `quickack`, `raw.nginx`) and a copy of the table holding only that knob. A sysctl
/// goes by its last part unless another key of the table ends the same way.
fn knobs_of(def: &VariantDef) -> Vec<(String, VariantDef)> {
    let only = |f: &dyn Fn(&mut VariantDef)| {
        let mut d = VariantDef {
            server: Default::default(),
            raw: Default::default(),
            sysctl: Default::default(),
            route: Default::default(),
            ..def.clone()
        };
        f(&mut d);
        d
    };
    let mut out = Vec::new();
    for (k, v) in &def.sysctl {
        let last = k.rsplit('.').next().unwrap_or(k);
        let clash = def
            .sysctl
            .keys()
            .filter(|o| o.rsplit('.').next() == Some(last))
            .count()
            > 1;
        let short = if clash { k.clone() } else { last.to_string() };
        out.push((
            short,
            only(&|d| {
                d.sysctl.insert(k.clone(), v.clone());
            }),
        ));
    }
    for (k, v) in &def.route {
        out.push((
            k.clone(),
            only(&|d| {
                d.route.insert(k.clone(), v.clone());
            }),
        ));
    }
    for (k, v) in &def.server {
        out.push((
            k.clone(),
            only(&|d| {
                d.server.insert(k.clone(), v.clone());
            }),
        ));
    }
    for (k, v) in &def.raw {
        out.push((
            format!("raw.{k}"),
            only(&|d| {
                d.raw.insert(k.clone(), v.clone());
            }),
        ));
    }
    out
}

/// The tables a name in `sweep.variants` stands for: every `[[variant]]` of that name
/// (one per set of targets), or, for `NAME:KNOB`, that knob of each; `None` for
/// `default` without a table of its own.
fn tables_named(file: &StudyFile, name: &str) -> Result<Option<Vec<VariantDef>>, StudyError> {
    let whole: Vec<VariantDef> = file
        .variants
        .iter()
        .filter(|v| v.name == name)
        .cloned()
        .collect();
    if !whole.is_empty() {
        return Ok(Some(whole));
    }
    if name == DEFAULT {
        return Ok(None);
    }
    let Some((base, knob)) = name.split_once(':') else {
        return Err(invalid(format!(
            "no [[variant]] named '{name}' (declared: {})",
            declared(file)
        )));
    };
    let bases: Vec<&VariantDef> = file.variants.iter().filter(|v| v.name == base).collect();
    if bases.is_empty() {
        return Err(invalid(format!(
            "no [[variant]] named '{base}' (declared: {})",
            declared(file)
        )));
    }
    // (the table with that knob alone, whether its table has other knobs)
    let mut out: Vec<(VariantDef, bool)> = Vec::new();
    let mut known: Vec<String> = Vec::new();
    for def in bases {
        let knobs = knobs_of(def);
        let several = knobs.len() > 1;
        for (short, mut one) in knobs {
            let full = match (one.sysctl.keys().next(), one.raw.keys().next()) {
                (Some(k), _) => k.clone(),
                _ => short.clone(),
            };
            if short == knob || full == knob {
                one.name = name.to_string();
                out.push((one, several));
            } else if !known.contains(&short) {
                known.push(short);
            }
        }
    }
    // A table of that one knob is already its whole variant: running it again under
    // the knob's name would measure the same thing twice.
    if out.iter().any(|(_, several)| *several) {
        out.retain(|(_, several)| *several);
    }
    let out: Vec<VariantDef> = out.into_iter().map(|(d, _)| d).collect();
    if out.is_empty() {
        return Err(invalid(format!(
            "variant '{base}' has no knob '{knob}' (its knobs: {})",
            known.join(", ")
        )));
    }
    Ok(Some(out))
}

/// `sweep.variants = "each"`: the default, then per `[[variant]]` name each knob of
/// its tables alone (`tuned:somaxconn`, ...) and the tables whole; a table of one
/// knob is only itself.
fn each_names(file: &StudyFile) -> Vec<String> {
    let mut names = vec![DEFAULT.to_string()];
    for def in &file.variants {
        if names.contains(&def.name) {
            continue;
        }
        for d in file.variants.iter().filter(|d| d.name == def.name) {
            let knobs = knobs_of(d);
            if knobs.len() < 2 {
                continue;
            }
            for (short, _) in knobs {
                let n = format!("{}:{short}", def.name);
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        names.push(def.name.clone());
    }
    names
}

/// What a variant runs a target with: its server knobs, and the kernel settings written
/// inside the namespace volley makes for it.
#[derive(Debug, Default)]
pub struct VariantSettings {
    /// Server knobs and raw text.
    pub tuning: Tuning,
    /// Sysctls, in the file's order.
    pub sysctls: Vec<Sysctl>,
    /// Route switches.
    pub route: RouteSettings,
}

/// The variant `name` of `file` as run by a target of `kind` (`default` without a
/// table: nothing; `NAME:KNOB`: that knob alone), for `volley targets --show-config KIND
/// --variant NAME --study FILE`. Of tables sharing a name, the one whose targets
/// include one of this kind (or that names no targets).
pub fn variant_settings(
    file: &StudyFile,
    name: &str,
    kind: TargetKind,
) -> Result<VariantSettings, StudyError> {
    let Some(defs) = tables_named(file, name)? else {
        return Ok(VariantSettings::default());
    };
    let fits = |d: &VariantDef| match &d.targets {
        None => true,
        Some(names) => file.targets.iter().any(|t| {
            names.contains(&t.name) && t.kind.get_ref().parse::<TargetKind>().ok() == Some(kind)
        }),
    };
    let def = defs.iter().find(|d| fits(d)).unwrap_or(&defs[0]);
    let (sysctls, route) = kernel_of(def)?;
    Ok(VariantSettings {
        tuning: tuning_of(def)?,
        sysctls,
        route,
    })
}

fn declared(file: &StudyFile) -> String {
    let mut names: Vec<&str> = file.variants.iter().map(|v| v.name.as_str()).collect();
    names.dedup();
    if !names.contains(&DEFAULT) {
        names.insert(0, DEFAULT);
    }
    names.join(", ")
}

/// The targets (indices into `targets`) a table runs on; `None`: every one.
fn scope_of(def: &VariantDef, targets: &[Target]) -> Result<Option<Vec<usize>>, StudyError> {
    let Some(names) = &def.targets else {
        return Ok(None);
    };
    if names.is_empty() {
        return Err(invalid(format!(
            "[[variant]] '{}': targets names no target",
            def.name
        )));
    }
    let mut out = Vec::new();
    for n in names {
        match targets.iter().position(|t| &t.name == n) {
            Some(i) => out.push(i),
            None => {
                return Err(invalid(format!(
                    "[[variant]] '{}': no target named '{n}'",
                    def.name
                )))
            }
        }
    }
    Ok(Some(out))
}

/// Whether two scopes share a target.
fn overlap(a: &Option<Vec<usize>>, b: &Option<Vec<usize>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.iter().any(|i| b.contains(i)),
        _ => true,
    }
}

/// The `variants` axis, resolved and checked against every target of the plan; empty
/// when the study has none.
pub(super) fn resolve_variants(
    file: &StudyFile,
    targets: &[Target],
) -> Result<Vec<Variant>, StudyError> {
    let names: Vec<String> = match &file.sweep.variants {
        None => {
            if let Some(v) = file.variants.first() {
                return Err(invalid(format!(
                    "[[variant]] '{}' is declared but sweep.variants names no variant: add sweep.variants = [\"default\", \"{}\"] or \"each\"",
                    v.name, v.name
                )));
            }
            return Ok(Vec::new());
        }
        Some(VariantsAxis::Word(w)) if w == "each" => {
            if file.variants.is_empty() {
                return Err(invalid(
                    "sweep.variants = \"each\" needs a [[variant]] to take apart".into(),
                ));
            }
            each_names(file)
        }
        Some(VariantsAxis::Word(w)) => {
            return Err(invalid(format!(
                "sweep.variants takes a list of names or \"each\", got '{w}'"
            )))
        }
        Some(VariantsAxis::List(names)) => names.clone(),
    };
    if names.is_empty() {
        return Err(invalid("sweep.variants names no variant".into()));
    }
    let mut scopes: Vec<(&str, Option<Vec<usize>>)> = Vec::new();
    for d in &file.variants {
        let scope = scope_of(d, targets)?;
        if scopes
            .iter()
            .any(|(n, s)| *n == d.name && overlap(s, &scope))
        {
            return Err(invalid(format!(
                "two [[variant]] tables named '{}' run on the same target (give each its own targets = [...])",
                d.name
            )));
        }
        scopes.push((&d.name, scope));
        let used = names
            .iter()
            .any(|n| n == &d.name || n.split_once(':').is_some_and(|(b, _)| b == d.name));
        if !used {
            return Err(invalid(format!(
                "[[variant]] '{}' is declared but not in sweep.variants",
                d.name
            )));
        }
    }
    let mut out: Vec<Variant> = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(invalid(format!("sweep.variants names '{name}' twice")));
        }
        let defs = match tables_named(file, name)? {
            Some(defs) => defs,
            None => {
                out.push(Variant {
                    name: name.clone(),
                    tuning: Tuning::default(),
                    sysctls: Vec::new(),
                    route: RouteSettings::default(),
                    targets: None,
                });
                continue;
            }
        };
        for def in defs {
            out.push(variant_of(file, &def, name, targets)?);
        }
    }
    for (ti, t) in targets.iter().enumerate() {
        let runs = |v: &Variant| v.targets.as_ref().is_none_or(|s| s.contains(&ti));
        if t.kind != TargetKind::External && !out.iter().any(runs) {
            return Err(invalid(format!(
                "target '{}' runs none of sweep.variants (their [[variant]] tables name other targets)",
                t.name
            )));
        }
    }
    Ok(out)
}

/// One table as a variant named `name`, checked against every target it runs on.
fn variant_of(
    file: &StudyFile,
    def: &VariantDef,
    name: &str,
    targets: &[Target],
) -> Result<Variant, StudyError> {
    let tuning = tuning_of(def)?;
    let scope = scope_of(def, targets)?;
    for (ti, t) in targets.iter().enumerate() {
        if scope.as_ref().is_some_and(|s| !s.contains(&ti)) {
            continue;
        }
        if t.kind == TargetKind::External && tuning.is_empty() {
            continue;
        }
        tuning
            .check(t.kind)
            .map_err(|e| invalid(format!("variant '{name}', target '{}': {e}", t.name)))?;
    }
    let (sysctls, route) = kernel_of(def)?;
    if (!sysctls.is_empty() || route.quickack.is_some()) && file.injectors.is_some() {
        return Err(invalid(format!(
            "variant '{name}': kernel settings with [injectors] are not supported yet (the variant's own lab would need the injectors in it)"
        )));
    }
    Ok(Variant {
        name: name.to_string(),
        tuning,
        sysctls,
        route,
        targets: scope,
    })
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

    const EACH: &str = r#"
[sweep]
variants = "each"
[[variant]]
name = "tuned"
sysctl = { "net.core.somaxconn" = 1024 }
route = { quickack = true }
server = { defer_accept = true, backlog = 1024 }
"#;

    fn names(p: &Plan) -> Vec<String> {
        p.steps
            .iter()
            .filter(|s| s.repeat == 0)
            .map(|s| p.instance_label(p.cells[s.cell].instance))
            .collect()
    }

    #[test]
    fn each_runs_the_default_every_knob_alone_and_all_together_interleaved() {
        let p = plan(EACH).unwrap();
        let v: Vec<&str> = p.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            v,
            [
                "default",
                "tuned:somaxconn",
                "tuned:quickack",
                "tuned:backlog",
                "tuned:defer_accept",
                "tuned",
            ]
        );
        // Each derived variant holds its one knob and nothing else.
        let one = |n: &str| p.variants.iter().find(|v| v.name == n).unwrap();
        assert_eq!(one("tuned:somaxconn").sysctls.len(), 1);
        assert!(one("tuned:somaxconn").tuning.is_empty());
        assert_eq!(one("tuned:quickack").route.quickack, Some(true));
        assert!(one("tuned:quickack").sysctls.is_empty());
        assert_eq!(one("tuned:backlog").tuning.knobs.backlog, Some(1024));
        assert_eq!(one("tuned:backlog").tuning.knobs.defer_accept, None);
        let all = one("tuned");
        assert_eq!((all.sysctls.len(), all.route.quickack), (1, Some(true)));
        assert_eq!(all.tuning.knobs.set_knobs().len(), 2);
        // Six instances of one target, interleaved at every point of every repeat.
        assert_eq!(p.instances.len(), 6);
        let order = names(&p);
        assert_eq!(order.len(), 6);
        assert_eq!(order[0], "web variant=default");
        assert_eq!(order[5], "web variant=tuned");
        assert_eq!(p.steps.len(), 12, "two repeats of six");
        // The dry run lists them.
        let d = p.describe();
        assert!(d.contains("tuned:defer_accept"), "{d}");
    }

    #[test]
    fn a_list_may_name_one_knob_of_a_variant() {
        let list = EACH.replace(
            "variants = \"each\"",
            "variants = [\"default\", \"tuned:net.core.somaxconn\", \"tuned\"]",
        );
        let p = plan(&list).unwrap();
        let v: Vec<&str> = p.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(v, ["default", "tuned:net.core.somaxconn", "tuned"]);
        assert_eq!(p.variants[1].sysctls.len(), 1);
        let bad = EACH.replace(
            "variants = \"each\"",
            "variants = [\"default\", \"tuned:nope\"]",
        );
        let e = plan(&bad).unwrap_err().to_string();
        assert_eq!(
            e,
            "variant 'tuned' has no knob 'nope' (its knobs: somaxconn, quickack, backlog, defer_accept)"
        );
        let word = EACH.replace("variants = \"each\"", "variants = \"every\"");
        let e = plan(&word).unwrap_err().to_string();
        assert_eq!(
            e,
            "sweep.variants takes a list of names or \"each\", got 'every'"
        );
    }

    #[test]
    fn one_name_may_tune_each_target_its_own_way() {
        let text = r#"
name = "v"
[[target]]
name = "web"
kind = "nginx"
[[target]]
name = "own"
kind = "builtin"
[[workload]]
name = "w"
paths = ["/x"]
[steps]
duration = "3s"
[sweep]
variants = "each"
[[variant]]
name = "tuned"
targets = ["web"]
sysctl = { "net.core.somaxconn" = 1024 }
server = { sendfile = true }
[[variant]]
name = "tuned"
targets = ["own"]
sysctl = { "net.core.somaxconn" = 1024 }
"#;
        let p = resolve(&crate::spec::parse(text).unwrap(), text, 1.0).unwrap();
        let labels: Vec<String> = (0..p.instances.len())
            .map(|i| p.instance_label(i))
            .collect();
        assert_eq!(
            labels,
            [
                "web variant=default",
                "web variant=tuned:somaxconn",
                "web variant=tuned:sendfile",
                "web variant=tuned",
                "own variant=default",
                "own variant=tuned",
            ]
        );
        // Without its own table, the built-in server would be asked for sendfile.
        let shared = text.replace("targets = [\"own\"]\n", "");
        let e = resolve(&crate::spec::parse(&shared).unwrap(), &shared, 1.0)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "two [[variant]] tables named 'tuned' run on the same target (give each its own targets = [...])"
        );
        let unscoped = text.replace("targets = [\"web\"]\n", "").replace(
            "[[variant]]\nname = \"tuned\"\ntargets = [\"own\"]\nsysctl = { \"net.core.somaxconn\" = 1024 }\n",
            "",
        );
        let e = resolve(&crate::spec::parse(&unscoped).unwrap(), &unscoped, 1.0)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("variant 'tuned:sendfile', target 'own': builtin cannot express server knob sendfile"),
            "{e}"
        );
    }
}
