//! `volley targets --dav-probe URL|KIND`: what a WebDAV / CalDAV server offers, asked
//! as a client would (`volley_office::capabilities::capabilities`). A URL names a
//! calendar (or any collection) on loopback; a managed kind is started with one
//! account, probed and stopped. A server that does not speak DAV is one line, exit 2.

use crate::exit::usage;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;
use volley_engine::HttpUrl;
use volley_office::capabilities::capabilities;
use volley_office::{Account, DavCapabilities, DavProbeError};
use volley_targets::{DavSettings, TargetKind, TargetSpec};

/// Each request of the probe is bounded by this.
const REQUEST_LIMIT: Duration = Duration::from_secs(10);

/// Runs the probe on `what` (a URL or a managed kind) as `user` (`NAME:PASSWORD`).
pub(super) fn run(what: &str, user: Option<&str>, json: bool) -> anyhow::Result<ExitCode> {
    if what.starts_with("http://") || what.starts_with("https://") {
        let (addr, path) = match loopback_url(what) {
            Ok(v) => v,
            Err(e) => usage!("--dav-probe {what:?}: {e}"),
        };
        let (name, password) = match user.map(|u| u.split_once(':')) {
            None => (String::new(), String::new()),
            Some(Some((n, p))) => (n.to_string(), p.to_string()),
            Some(None) => usage!("--user must be NAME:PASSWORD"),
        };
        let account = Account {
            home: Some(path.clone()),
            calendar: Some(path),
            ..Account::new(name, password)
        };
        return report(what, capabilities(addr, &account, REQUEST_LIMIT), json);
    }
    let kind: TargetKind = match what.parse() {
        Ok(k) => k,
        Err(e) => usage!("--dav-probe: {e} (or an http:// URL)"),
    };
    if user.is_some() {
        usage!("--user is for a URL: a managed kind is probed as its own user1");
    }
    if !kind.is_caldav_server() && !kind.supports_plain_dav() && kind != TargetKind::Builtin {
        usage!("{kind} cannot serve WebDAV (supported: builtin, nginx, apache-event, apache-prefork, lighttpd, radicale, xandikos)");
    }
    let mut spec = TargetSpec::new(kind);
    spec.settings.dav = Some(DavSettings {
        users: 1,
        seed_items: 0,
    });
    let target = volley_targets::start(&spec)?;
    let account = target
        .dav
        .as_ref()
        .and_then(|d| d.accounts.first())
        .ok_or_else(|| anyhow::anyhow!("{kind} started without its DAV account"))?;
    let url = format!("{}{}", target.url.trim_end_matches('/'), account.calendar);
    let result = capabilities(target.addr, &Account::from(account), REQUEST_LIMIT);
    let version = target.version.clone().unwrap_or_else(|| kind.name().into());
    target.stop();
    report(&format!("{version} at {url}"), result, json)
}

fn report(
    what: &str,
    result: Result<DavCapabilities, DavProbeError>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let caps = match result {
        Ok(c) => c,
        Err(e @ DavProbeError::NotDav { .. }) => usage!("{e}"),
        Err(e) => return Err(e.into()),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&caps)?);
        return Ok(ExitCode::SUCCESS);
    }
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    let rows = [
        ("DAV classes", caps.dav_classes.join(", ")),
        ("calendar-access", yes(caps.calendar_access)),
        ("calendar collection", yes(caps.is_calendar)),
        ("getctag", yes(caps.ctag)),
        ("sync-token", yes(caps.sync_token)),
        (
            "REPORT sync-collection",
            format!(
                "{} ({})",
                yes(caps.sync_collection),
                caps.sync_collection_status
            ),
        ),
        (
            "REPORT calendar-query",
            format!(
                "{} ({})",
                yes(caps.calendar_query),
                caps.calendar_query_status
            ),
        ),
        ("PUT status", caps.put_status.to_string()),
        ("ETag on PUT", yes(caps.put_etag)),
        ("getetag in listings", yes(caps.listing_etags)),
        ("If-Match -> 412", yes(caps.conditional_put)),
        ("If-None-Match -> 412", yes(caps.create_only_put)),
        ("GET round trip", yes(caps.get_round_trip)),
    ];
    println!("{what}");
    for (label, value) in rows {
        println!("  {label:<24}{value}");
    }
    let lacks = caps.lacks();
    if lacks.is_empty() {
        println!("lacks nothing a CalDAV client uses");
    } else {
        println!("lacks: {}", lacks.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

/// `http://127.x.y.z:PORT/path`, `http://[::1]:PORT/path` or `http://localhost:PORT/path`
/// -> address and collection path (ending in '/'). Loopback only: the probe writes and
/// deletes an item, and volley's traffic stays on this machine. https is refused (the
/// probe speaks plain HTTP).
fn loopback_url(url: &str) -> Result<(SocketAddr, String), String> {
    let parsed = HttpUrl::parse(url).map_err(|e| e.why)?;
    if parsed.tls() {
        return Err("the DAV probe speaks plain http:// only".into());
    }
    // A name is resolved only when it is localhost: anything else could be anywhere.
    let addr = match (parsed.ip(), parsed.host().as_str()) {
        (Some(ip), _) => SocketAddr::new(ip, parsed.port()),
        (None, "localhost") => SocketAddr::from(([127, 0, 0, 1], parsed.port())),
        (None, host) => return Err(format!("{host:?} is not a loopback address")),
    };
    if !addr.ip().is_loopback() {
        return Err(format!("{} is not a loopback address", addr.ip()));
    }
    let path = parsed.path().to_string();
    let path = if path.ends_with('/') {
        path
    } else {
        format!("{path}/")
    };
    Ok((addr, path))
}

#[cfg(test)]
mod tests {
    use super::loopback_url;

    #[test]
    fn only_loopback_http_urls_are_probed() {
        let (a, p) = loopback_url("http://localhost:5232/user1/calendar").unwrap();
        assert_eq!(a.to_string(), "127.0.0.1:5232");
        assert_eq!(p, "/user1/calendar/");
        assert_eq!(loopback_url("http://127.0.0.2").unwrap().1, "/");
        assert!(loopback_url("http://10.0.0.1:80/")
            .unwrap_err()
            .contains("loopback"));
        assert!(loopback_url("https://127.0.0.1/").is_err());
        assert!(loopback_url("http://example.org/").is_err());
        let (a, p) = loopback_url("http://[::1]:5232/u/c/").unwrap();
        assert_eq!(
            (a.to_string().as_str(), p.as_str()),
            ("[::1]:5232", "/u/c/")
        );
        assert!(loopback_url("http://u:p@127.0.0.1/").is_err());
    }
}
