//! `kind = "replay"` workloads resolved: an access log replayed at each step's rate.
//!
//! A replay step's offered rate R is the log at speed R / (the log's mean rate), so a
//! sweep or a capacity search over rates is one over the speed factor (the log's mean
//! rate is speed 1). The log is read once here, so a bad one stops the study before
//! any target starts; each step then streams it again, looping to fill its duration.

use std::path::PathBuf;

use volley_replay::schedule::{Planner, ReplayOptions};
use volley_replay::{LogReader, ReaderOptions};

use super::model::{Load, ReplayLoad, Workload};
use super::resolve::{http_request_key, invalid, refuse};
use crate::spec::WorkloadDef;
use crate::StudyError;

/// Refuses `client_addresses` where a replayed client cannot have a loopback address
/// of its own: a target not on this host's IPv4 loopback (an external URL elsewhere,
/// or every target in a network namespace because a variant sets kernel values), or a
/// key set on a workload that replays nothing. The step checks the address it loads
/// again (`step::load`), for a name that resolves elsewhere.
pub(super) fn check_client_addresses(
    file: &crate::spec::StudyFile,
    workloads: &[Workload],
    targets: &[super::model::Target],
    variants: &[super::model::Variant],
) -> Result<(), StudyError> {
    for (def, w) in file.workloads.iter().zip(workloads) {
        if def.client_addresses.is_none() {
            continue;
        }
        let Some(r) = &w.replay else {
            return Err(refuse(
                &w.name,
                "client_addresses is a replay key (each replayed client from its own loopback address)",
            ));
        };
        if !r.client_addresses {
            continue;
        }
        let why = "client_addresses gives each replayed client a loopback address";
        if let Some(v) = variants
            .iter()
            .find(|v| !v.sysctls.is_empty() || v.route.quickack.is_some())
        {
            return Err(refuse(
                &w.name,
                format!(
                    "{why}; variant '{}' sets kernel values, so the targets run in a network namespace, not on loopback",
                    v.name
                ),
            ));
        }
        let runs_on = |i: usize| w.targets.as_ref().is_none_or(|t| t.contains(&i));
        for (_, t) in targets.iter().enumerate().filter(|(i, _)| runs_on(*i)) {
            if let Some(url) = t.url.as_deref().filter(|u| !on_ipv4_loopback(u)) {
                return Err(refuse(
                    &w.name,
                    format!(
                        "{why}; target '{}' is at {url}, not on IPv4 loopback",
                        t.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Whether a URL's host is IPv4 loopback (a literal 127.x.y.z, or `localhost`, which
/// the step checks again once resolved), read through the one URL type, `HttpUrl`.
fn on_ipv4_loopback(url: &str) -> bool {
    volley_engine::HttpUrl::parse(url).is_ok_and(|u| match u.ip() {
        Some(ip) => ip.is_ipv4() && ip.is_loopback(),
        None => u.host() == "localhost",
    })
}

/// A replay workload: its log read once for its mean rate, the study's load settings.
/// `injected`: the study has `[injectors]`, whose agents send lists of paths, not a log.
pub(super) fn replay_workload(
    w: &WorkloadDef,
    load: Load,
    injected: bool,
) -> Result<Workload, StudyError> {
    if injected {
        return Err(refuse(
            &w.name,
            "a replay runs from this host only, not with [injectors]",
        ));
    }
    if load.wire.h2_streams.is_some() {
        return Err(refuse(
            &w.name,
            "a replay keeps each client on its own HTTP/1.1 connection: drop h2",
        ));
    }
    // The log gives methods, paths and bodies; an office's users are no replay's.
    let not_replay = http_request_key(w).or(w.users.is_some().then_some("users"));
    if let Some(key) = not_replay {
        return Err(refuse(
            &w.name,
            format!("{key} is not a replay key (the log gives the requests)"),
        ));
    }
    let Some(log) = w.log.clone() else {
        return Err(refuse(&w.name, "a replay needs log = \"access.log\""));
    };
    let log = PathBuf::from(log);
    let bad = |e: String| invalid(format!("workload '{}': {}: {e}", w.name, log.display()));
    let mut reader =
        LogReader::open(&log, ReaderOptions::default()).map_err(|e| bad(e.to_string()))?;
    let mut planner = Planner::new(ReplayOptions::default());
    let mut span_us = 0;
    for r in reader.by_ref() {
        if let Some(p) = planner.plan(r.map_err(|e| bad(e.to_string()))?) {
            span_us = p.intended_us;
        }
    }
    let planned = planner.counts().planned;
    if planned < 2 || span_us == 0 {
        return Err(bad(
            "a replay needs at least two logged requests at different instants".into(),
        ));
    }
    // n requests span n - 1 gaps.
    let mean_rate = (planned - 1) as f64 / (span_us as f64 / 1e6);
    Ok(Workload {
        name: w.name.clone(),
        method: "GET".into(),
        // No paths: the targets validate their default probe file, and the log gives
        // every request.
        paths: Vec::new(),
        order: volley_engine::Order::Same,
        headers: Vec::new(),
        body: None,
        load,
        cold_start: false,
        requests: None,
        expected_rate: None,
        office: None,
        replay: Some(ReplayLoad {
            log,
            mean_rate,
            requests: planned,
            client_addresses: w.client_addresses.unwrap_or(false),
        }),
        targets: None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::plan;

    /// A study over a log of `n` requests 100 ms apart (10 req/s).
    fn study(log: &std::path::Path, extra: &str) -> String {
        format!(
            r#"
name = "r"
mode = "search"
[[target]]
name = "builtin"
kind = "builtin"
[[workload]]
name = "log"
kind = "replay"
log = "{}"
{extra}
[load]
model = "open"
[steps]
duration = "10s"
"#,
            log.display()
        )
    }

    /// A log of `n` requests in a file removed when the returned path drops (at the
    /// test's end, also when it panics).
    fn write_log(name: &str, n: u64) -> tempfile::TempPath {
        let path = tempfile::Builder::new()
            .prefix(&format!("volley-study-replay-{name}-"))
            .suffix(".log")
            .tempfile()
            .unwrap()
            .into_temp_path();
        let text: String = (0..n)
            .map(|i| {
                format!(
                    "10.0.0.{} - - [01/Jan/2026:00:00:{:02}.{:06} +0000] \"GET /{i} HTTP/1.1\" 200 5 \"-\" \"t\"\n",
                    i % 3,
                    i / 10,
                    (i % 10) * 100_000
                )
            })
            .collect();
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_replay_workload_reads_its_log_for_its_mean_rate() {
        let log = write_log("ok", 51);
        let p = plan(&study(&log, "")).unwrap();
        let r = p.workloads[0].replay.as_ref().unwrap();
        // 51 requests, 50 gaps over 5 s: speed 1 is 10 req/s.
        assert_eq!(r.requests, 51);
        assert!((r.mean_rate - 10.0).abs() < 1e-9, "{}", r.mean_rate);
        assert!(p.workloads[0].paths.is_empty());
    }

    #[test]
    fn a_replay_workload_refuses_request_keys_and_bad_logs() {
        let log = write_log("keys", 5);
        let e = plan(&study(&log, "paths = [\"/x\"]"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("paths is not a replay key"), "{e}");
        let e = plan(&study(std::path::Path::new("/nonexistent/x.log"), ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read"), "{e}");
        let e = plan(&study(&log, "").replace("log = ", "# log = "))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a replay needs log"), "{e}");
    }
    #[test]
    fn client_addresses_are_a_replay_key_for_targets_on_loopback() {
        let log = write_log("addrs", 5);
        let p = plan(&study(&log, "client_addresses = true")).unwrap();
        assert!(p.workloads[0].replay.as_ref().unwrap().client_addresses);
        assert!(
            p.describe()
                .contains("from its own loopback address (127.0.0.2 on"),
            "{}",
            p.describe()
        );
        let p = plan(&study(&log, "")).unwrap();
        assert!(!p.workloads[0].replay.as_ref().unwrap().client_addresses);
        assert!(!p.describe().contains("own loopback address"));
        // An external target on loopback is fine; one elsewhere is refused, naming it.
        let external = |url: &str| {
            study(&log, "client_addresses = true").replace(
                "kind = \"builtin\"\n",
                &format!("kind = \"builtin\"\n[[target]]\nname = \"far\"\nkind = \"external\"\nurl = \"{url}\"\n"),
            )
        };
        plan(&external("http://127.0.0.1:8080/")).unwrap();
        let e = plan(&external("http://10.1.2.3:8080/"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("workload 'log': client_addresses")
                && e.contains("target 'far' is at http://10.1.2.3:8080/, not on IPv4 loopback"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
        // Kernel settings put every target in a network namespace.
        let tuned = format!(
            "{}[[variant]]\nname = \"t\"\nsysctl = {{ \"net.core.somaxconn\" = 1024 }}\n",
            study(&log, "client_addresses = true").replace(
                "[steps]",
                "[sweep]\nvariants = [\"default\", \"t\"]\n[steps]"
            )
        );
        let e = plan(&tuned).unwrap_err().to_string();
        assert!(
            e.contains("variant 't' sets kernel values") && e.contains("not on loopback"),
            "{e}"
        );
        // On a workload that replays nothing, it is refused.
        let http = "name = \"h\"\n[[target]]\nname = \"b\"\nkind = \"builtin\"\n[[workload]]\nname = \"w\"\npaths = [\"/\"]\nclient_addresses = true\n";
        let e = plan(http).unwrap_err().to_string();
        assert!(
            e.contains("workload 'w': client_addresses is a replay key"),
            "{e}"
        );
    }

    #[test]
    fn a_target_url_is_on_ipv4_loopback_by_its_parsed_host() {
        for url in [
            "http://127.0.0.1:8080/",
            "http://127.9.9.9/x",
            "http://LOCALHOST:81/",
        ] {
            assert!(super::on_ipv4_loopback(url), "{url}");
        }
        for url in [
            "http://[::1]:8080/",
            "http://10.0.0.1/",
            "http://example.com/",
            "nonsense",
        ] {
            assert!(!super::on_ipv4_loopback(url), "{url}");
        }
    }
}
