//! The DAV mode's faults, applied around a correct `volley_dav` handler.

use std::sync::Mutex;

use volley_dav::{Dav, DavRequest, DavResponse};

use crate::dav::{plain, DavFault, FaultState, Incoming, Pin};
use crate::lock;

/// Answers `req` through `dav`, misbehaving as `fault` says.
pub(crate) fn handle(
    fault: DavFault,
    state: &Mutex<FaultState>,
    dav: &Dav,
    req: &Incoming,
) -> DavResponse {
    let n = {
        let mut s = lock(state);
        s.requests += 1;
        s.requests
    };
    if let DavFault::Error5xx { every } = fault {
        if n % every == 0 {
            return plain(500);
        }
    }
    let path = req.target.split('?').next().unwrap_or("").to_owned();
    if let DavFault::LostPut { every } = fault {
        if req.method == "PUT" && req.header("If-None-Match") == Some("*") {
            let k = {
                let mut s = lock(state);
                s.creates += 1;
                s.creates
            };
            if k % every == 0 {
                let mut r = plain(201);
                r.headers.push(("ETag".into(), format!("\"lost-{k}\"")));
                return r;
            }
        }
    }
    // Stale ETags: the client's If-Match carries the pinned tag; the store knows the real one.
    let mut headers: Vec<(String, String)> = req.headers.clone();
    if fault == DavFault::StaleEtag {
        let s = lock(state);
        if let Some(pin) = s.pins.get(&path) {
            for (name, value) in headers.iter_mut() {
                if name.eq_ignore_ascii_case("If-Match") && *value == pin.pinned {
                    *value = pin.current.clone();
                }
            }
        }
    }
    let hs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let dreq = DavRequest {
        method: &req.method,
        target: &req.target,
        headers: &hs,
        body: &req.body,
    };
    let mut resp = match req.method.as_str() {
        "GET" | "HEAD" => get(dav, &path),
        _ => dav.handle(&dreq),
    };
    match fault {
        DavFault::BusyMorning { count } => {
            // A device's requests say its profile and number (`volley-office/davx5#1`);
            // the probe's, set-up's and the audit's do not.
            let device = req.header("User-Agent").is_some_and(|a| a.contains('#'));
            let morning = device && {
                let mut s = lock(state);
                s.morning += 1;
                s.morning <= count
            };
            if morning {
                return plain(500);
            }
        }
        DavFault::StaleEtag => pin_etags(&mut lock(state), &req.method, &path, &mut resp),
        DavFault::WrongSync { every } => {
            let body = String::from_utf8_lossy(&req.body);
            let delta = req.method == "REPORT"
                && body.contains("sync-collection")
                && !body.contains("<D:sync-token></D:sync-token>")
                && !body.contains("<D:sync-token/>");
            if delta && resp.status == 207 {
                drop_first_response(&mut lock(state), every, &mut resp);
            }
        }
        _ => {}
    }
    resp
}

/// GET of an item (the built-in server sends GET to its static path, not to
/// `volley_dav`): the file, its content ETag, 404 when absent.
fn get(dav: &Dav, path: &str) -> DavResponse {
    let Ok(file) = volley_docroot::path::resolve(dav.root(), path) else {
        return plain(404);
    };
    let owner_ok = dav
        .user()
        .is_some_and(|u| path.starts_with(&format!("/{u}/")));
    match std::fs::read(&file) {
        Ok(body) if owner_ok && file.is_file() => DavResponse {
            status: 200,
            headers: vec![
                ("ETag".into(), volley_dav::strong_etag(&body)),
                ("Content-Type".into(), "text/calendar; charset=utf-8".into()),
            ],
            body,
        },
        _ => plain(404),
    }
}

/// Every item keeps the first ETag it was given: PUT answers and GET headers say the
/// pinned tag, multistatus bodies have the real tags replaced by the pinned ones.
fn pin_etags(s: &mut FaultState, method: &str, path: &str, resp: &mut DavResponse) {
    if method == "DELETE" && resp.status < 300 {
        s.pins.remove(path);
        return;
    }
    if let Some(real) = resp.header("ETag").map(str::to_owned) {
        let pin = s.pins.entry(path.to_owned()).or_insert_with(|| Pin {
            pinned: real.clone(),
            current: real.clone(),
        });
        pin.current = real;
        let pinned = pin.pinned.clone();
        for (n, v) in resp.headers.iter_mut() {
            if n.eq_ignore_ascii_case("ETag") {
                *v = pinned.clone();
            }
        }
    }
    if resp.status == 207 {
        let mut body = String::from_utf8_lossy(&resp.body).into_owned();
        for pin in s.pins.values().filter(|p| p.pinned != p.current) {
            body = body.replace(&pin.current, &pin.pinned);
            body = body.replace(&quot(&pin.current), &quot(&pin.pinned));
        }
        resp.body = body.into_bytes();
    }
}

/// `"x"` as XML text escapes it.
fn quot(etag: &str) -> String {
    etag.replace('"', "&quot;")
}

/// Every `every`-th delta with changes loses its first `D:response`.
fn drop_first_response(s: &mut FaultState, every: u64, resp: &mut DavResponse) {
    let body = String::from_utf8_lossy(&resp.body).into_owned();
    let (Some(start), Some(end)) = (body.find("<D:response>"), body.find("</D:response>")) else {
        return;
    };
    s.syncs += 1;
    if s.syncs % every != 0 {
        return;
    }
    let end = end + "</D:response>".len();
    resp.body = format!("{}{}", &body[..start], &body[end..]).into_bytes();
}
