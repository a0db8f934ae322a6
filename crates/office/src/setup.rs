//! Before the clock starts: is the target a CalDAV server at all, and each user's
//! calendar found (or made), emptied, and filled with the day's first items. None of
//! this is timed.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::driver::{strong_etag, Ctx, Failure, MULTI, WRITE_OK};
use crate::http::{Conn, Reply, Request};
use crate::listing::{self, parse};
use crate::ops::Op;
use crate::state::{TruthItem, User};
use crate::xml;
use crate::{Account, OfficeError};

/// Host header and address of an `http://host[:port]/...` URL (the engine's one URL
/// type: IPv6 literals included; https refused, the office speaks plain HTTP).
pub fn parse_url(url: &str) -> Result<(String, SocketAddr), OfficeError> {
    let bad = || OfficeError::Url(url.to_owned());
    let parsed = volley_engine::HttpUrl::parse(url).map_err(|_| bad())?;
    if parsed.tls() {
        return Err(bad());
    }
    let addr = parsed.socket_addr().map_err(|_| bad())?;
    Ok((parsed.host_header(), addr))
}

/// What the server at `addr` speaks, asked as `account` with OPTIONS on its calendar
/// (or home, or the root; [`Account::probe_path`]): `calendar-access` in the `DAV`
/// header (RFC 4791 5.1.1) is CalDAV (true); a `DAV` header without it is plain WebDAV
/// (false); no `DAV` header at all is neither, and an error.
pub fn probe(
    url: &str,
    addr: SocketAddr,
    host: &str,
    account: &Account,
) -> Result<bool, OfficeError> {
    TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|source| OfficeError::Connect { addr, source })?;
    let mut conn = Conn::new(
        addr,
        host,
        &account.name,
        &account.password,
        Duration::from_secs(10),
    )
    .with_headers(&account.headers);
    let path = account.probe_path();
    let (result, _) = conn.exchange(
        &Request::new(Op::Options, "OPTIONS", path),
        std::time::Instant::now(),
    );
    let not = |why: String| OfficeError::NotCalDav {
        url: url.to_owned(),
        why,
    };
    let reply = result.map_err(|k| not(format!("OPTIONS {path} failed ({k:?})")))?;
    if reply.status == 401 {
        return Err(not(format!(
            "OPTIONS {path} as {} answered 401 (wrong credentials?)",
            account.name
        )));
    }
    // Apache sends two DAV fields (its classes, then a property-set URI).
    let classes: Vec<&str> = reply
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("DAV"))
        .flat_map(|(_, v)| v.split(','))
        .map(str::trim)
        .collect();
    let caldav = if classes.contains(&"calendar-access") {
        true
    } else if classes.contains(&"1") {
        false
    } else if classes.is_empty() {
        return Err(not(format!(
            "OPTIONS {path} answered {} without a DAV header (nor WebDAV)",
            reply.status
        )));
    } else {
        return Err(not(format!(
            "its DAV header `{}` names neither calendar-access nor WebDAV class 1",
            classes.join(", ")
        )));
    };
    if account.headers.is_empty() {
        checks_accounts(url, addr, host, path)?;
    }
    Ok(caldav)
}

/// Refuses a server that lists `path` to a client without credentials: it checks no
/// accounts, so every user's calendar would be one more folder of a shared tree, the
/// day's checks would fail for reasons that are not the server's, and set-up would
/// write into its files. Only asked when the accounts identify themselves by Basic
/// credentials (an identity header, as Xandikos behind its proxy takes, needs none).
fn checks_accounts(url: &str, addr: SocketAddr, host: &str, path: &str) -> Result<(), OfficeError> {
    let mut conn = Conn::new(addr, host, "", "", Duration::from_secs(10)).without_credentials();
    let req = Request::new(Op::PropfindD0, "PROPFIND", path)
        .depth("0")
        .xml(xml::propfind("<D:resourcetype/>"));
    let (result, _) = conn.exchange(&req, Instant::now());
    match result {
        Ok(r) if (200..300).contains(&r.status) => Err(OfficeError::NoAccounts {
            url: url.to_owned(),
            path: path.to_owned(),
            status: r.status,
        }),
        _ => Ok(()),
    }
}

/// Finds `user`'s principal and home where `account` does not give them (CalDAV
/// discovery; plain WebDAV has no principals), makes the calendar if missing
/// (MKCALENDAR, or MKCOL on plain WebDAV), deletes what a previous run left there, and
/// writes `initial_items` items. With `keep`, a calendar a previous day of the office
/// left (only this user's items) is taken as it stands instead, read back as the
/// truth ([`adopt`]), and topped up to `initial_items` items; returns whether it was.
pub fn prepare(
    ctx: Ctx<'_>,
    user: &mut User,
    account: &Account,
    initial_items: u64,
    keep: bool,
) -> Result<bool, OfficeError> {
    let caldav = user.server.caldav;
    if caldav && account.principal.is_none() {
        let props = "<D:current-user-principal/>";
        let req = Request::new(Op::PropfindD0, "PROPFIND", "/")
            .depth("0")
            .xml(xml::propfind(props));
        let reply = retry(ctx, user, req, MULTI).map_err(fail(user, "PROPFIND /"))?;
        if let Some(p) = parse(user, &reply.body, "PROPFIND /")
            .and_then(|m| m.entries.iter().find_map(|e| e.principal.clone()))
        {
            user.principal = p;
        }
    }
    if caldav && account.home.is_none() {
        let props = "<C:calendar-home-set/>";
        let req = Request::new(Op::PropfindD0, "PROPFIND", user.principal.clone())
            .depth("0")
            .xml(xml::propfind(props));
        let reply =
            retry(ctx, user, req, MULTI).map_err(fail(user, "PROPFIND of the principal"))?;
        user.home = parse(user, &reply.body, "PROPFIND principal")
            .and_then(|m| m.entries.iter().find_map(|e| e.home.clone()))
            .unwrap_or_else(|| user.principal.clone());
    }
    user.cal = account
        .calendar
        .clone()
        .unwrap_or_else(|| format!("{}calendar/", user.home));
    let req = Request::new(Op::PropfindD0, "PROPFIND", user.cal.clone())
        .depth("0")
        .xml(xml::propfind("<D:resourcetype/>"));
    let reply =
        retry(ctx, user, req, &[207, 404]).map_err(fail(user, "PROPFIND of the calendar"))?;
    if reply.status == 404 {
        make_calendar(ctx, user).map_err(fail(user, "making the calendar"))?;
    }
    let left = etags(ctx, user).map_err(fail(user, "listing the calendar"))?;
    let kept = keep && !left.is_empty() && adopt(ctx, user, &left);
    if !kept {
        for name in left.keys() {
            let req = Request::new(Op::Delete, "DELETE", user.item_path(name));
            retry(ctx, user, req, &[200, 204, 404])
                .map_err(fail(user, "deleting a previous run's item"))?;
        }
    }
    let held = user.truth.items.len() as u64;
    for _ in held..initial_items {
        let n = user.next_item;
        user.next_item += 1;
        let name = crate::state::item_name(&user.name, n);
        let data = user.item_text(n, 0);
        let mut req = Request::new(Op::PutCreate, "PUT", user.item_path(&name))
            .header("Content-Type", "text/calendar; charset=utf-8");
        if caldav {
            req = req.header("If-None-Match", "*");
        }
        let req = Request {
            body: data.as_bytes().to_vec(),
            ..req
        };
        // 412 to `If-None-Match: *`: a try that failed (a timeout) was applied after
        // all, so the item is there; it is read back to be sure it is ours.
        let reply = retry(ctx, user, req, &[200, 201, 204, 412])
            .map_err(fail(user, "writing the first items"))?;
        let etag = match reply.status {
            412 => {
                let get = Request::new(Op::Get, "GET", user.item_path(&name));
                let there = retry(ctx, user, get, &[200])
                    .map_err(fail(user, "reading back a first item"))?;
                if !crate::item::same(&data, &String::from_utf8_lossy(&there.body)) {
                    return Err(fail(user, "writing the first items")(Failure::Status {
                        status: 412,
                        expected: WRITE_OK.to_vec(),
                    }));
                }
                strong_etag(&there)
            }
            _ => strong_etag(&reply),
        };
        user.truth.items.insert(
            name,
            TruthItem {
                n,
                seq: 0,
                data,
                etag,
                old_etags: Vec::new(),
            },
        );
    }
    Ok(kept)
}

/// Takes the calendar a previous office day left for `user` (its listing `left`) as
/// the day's first items: every item read back and made the truth
/// ([`audit::reconcile`]), numbering going on after the highest, the devices' copies
/// left empty for their first sync. Two requests instead of a delete and a write per
/// item: a users search's larger day reuses the smaller day's calendars
/// (docs/methodology.md, "The office in a study"). False, with nothing taken, when an
/// item is not one this user's devices could have written (`<user>-<n>.ics`) or the
/// calendar cannot be read back: set-up then empties and refills it.
fn adopt(ctx: Ctx<'_>, user: &mut User, left: &BTreeMap<String, Option<String>>) -> bool {
    if left.keys().any(|name| user.item_number(name).is_none()) {
        return false;
    }
    if !crate::audit::reconcile(ctx, user) {
        user.truth = Default::default();
        return false;
    }
    user.truth.deleted.clear();
    user.next_item = user
        .truth
        .items
        .values()
        .map(|t| t.n + 1)
        .max()
        .unwrap_or(0);
    for dev in &mut user.devices {
        dev.mirror.clear();
        dev.written.clear();
    }
    true
}

/// MKCALENDAR the calendar on a CalDAV server; on plain WebDAV MKCOL it, and its home
/// first when the server says the parent is missing (409).
fn make_calendar(ctx: Ctx<'_>, user: &mut User) -> Result<(), Failure> {
    if user.server.caldav {
        let req = Request::new(Op::Mkcalendar, "MKCALENDAR", user.cal.clone())
            .xml(xml::mkcalendar("Office"));
        return retry(ctx, user, req, &[201]).map(|_| ());
    }
    let req = Request::new(Op::Mkcalendar, "MKCOL", user.cal.clone());
    if retry(ctx, user, req.clone(), &[201, 409])?.status == 409 {
        let home = Request::new(Op::Mkcalendar, "MKCOL", user.home.clone());
        retry(ctx, user, home, &[201, 405])?;
        retry(ctx, user, req, &[201])?;
    }
    Ok(())
}

/// The set-up error of `user`'s step `what`, for `map_err`.
fn fail(user: &User, what: &'static str) -> impl FnOnce(Failure) -> OfficeError {
    let user = user.name.clone();
    move |cause| OfficeError::Setup { user, what, cause }
}

/// The calendar's items and ETags, listed with [`retry`]'s patience.
fn etags(ctx: Ctx<'_>, user: &mut User) -> Result<BTreeMap<String, Option<String>>, Failure> {
    let req = Request::new(Op::PropfindD1, "PROPFIND", user.cal.clone())
        .depth("1")
        .xml(xml::propfind(listing::ETAGS));
    let reply = retry(ctx, user, req, MULTI)?;
    listing::etags_of(user, &reply.body).ok_or(Failure::Unreadable)
}

/// Most time set-up waits on one request for a server that asks to come back later.
const PATIENCE: Duration = Duration::from_secs(60);

/// Set-up requests are tried up to three times: a server that answers 500 now and then
/// should still get its day (each failure is still counted as a violation). A server
/// that asks the client to come back later (429 or 503 with `Retry-After`, as the
/// built-in server's credential verifier does when hundreds of new accounts log in at
/// once) is waited for as a client does, up to [`PATIENCE`] in all, at most 10 s at a
/// time; those answers are no violation and no try. The error is the last failure.
fn retry(ctx: Ctx<'_>, user: &mut User, req: Request, expect: &[u16]) -> Result<Reply, Failure> {
    let start = Instant::now();
    let mut tries = 0;
    loop {
        let got = ctx.attempt(
            &mut user.devices[0],
            &mut user.violations,
            req.clone(),
            expect,
            true,
        );
        match got {
            Ok(r) => return Ok(r),
            Err(Failure::Busy { status, after }) => {
                let after = after.clamp(Duration::from_millis(100), Duration::from_secs(10));
                if start.elapsed() + after > PATIENCE {
                    return Err(Failure::Busy { status, after });
                }
                std::thread::sleep(after);
            }
            Err(e) => {
                tries += 1;
                if tries == 3 {
                    return Err(e);
                }
            }
        }
    }
}

/// What the server offers a CalDAV client and what it lacks, learned on `user`'s
/// calendar once it is set up (untimed): the collection's getctag, sync-token and
/// supported reports, getetag in a listing, an ETag on PUT (from the first items'
/// answers), and on plain WebDAV whether preconditions are honoured (a probe item put
/// with `If-None-Match: *`, then again with a stale `If-Match` and with
/// `If-None-Match: *`: both must get 412; then deleted). Returns whether conditional
/// writes are honoured (always assumed on CalDAV, where the day checks them) and the
/// lacks, in words (docs/methodology.md, "The office": plain WebDAV).
pub fn survey(ctx: Ctx<'_>, user: &mut User) -> Result<(bool, Vec<String>), OfficeError> {
    let caldav = user.server.caldav;
    let mut lacks: Vec<String> = Vec::new();
    if !caldav {
        for what in [
            "calendar-access",
            "principals",
            "REPORT calendar-multiget",
            "REPORT calendar-query",
        ] {
            lacks.push(what.into());
        }
    }
    let props = "<D:resourcetype/><CS:getctag/><D:sync-token/><D:supported-report-set/>";
    let req = Request::new(Op::PropfindD0, "PROPFIND", user.cal.clone())
        .depth("0")
        .xml(xml::propfind(props));
    let reply = retry(ctx, user, req, MULTI).map_err(fail(user, "PROPFIND of the calendar"))?;
    let cal = user.cal.clone();
    let entry = parse(user, &reply.body, "PROPFIND calendar")
        .and_then(|m| m.entries.into_iter().find(|e| e.href == cal))
        .unwrap_or_default();
    if !entry.sync_report {
        lacks.push("REPORT sync-collection".into());
    }
    if entry.ctag.is_none() {
        lacks.push("getctag".into());
    }
    if entry.sync_token.is_none() {
        lacks.push("sync-token".into());
    }
    if user.truth.items.values().any(|t| t.etag.is_none()) {
        lacks.push("ETag on PUT".into());
    }
    let listed = etags(ctx, user).map_err(fail(user, "listing the calendar"))?;
    if listed.values().any(Option::is_none) {
        lacks.push("getetag in PROPFIND".into());
    }
    let conditional = caldav || {
        let path = user.item_path(&format!("{}-probe.ics", user.name));
        let put = |extra: (&'static str, &str)| {
            Request {
                body: user.item_text(u64::MAX, 0).as_bytes().to_vec(),
                ..Request::new(Op::PutCreate, "PUT", path.clone())
                    .header("Content-Type", "text/calendar; charset=utf-8")
            }
            .header(extra.0, extra.1)
        };
        let (first, stale, again) = (
            put(("If-None-Match", "*")),
            put(("If-Match", "\"volley-stale-etag\"")),
            put(("If-None-Match", "*")),
        );
        let any: &[u16] = &[200, 201, 204, 412];
        retry(ctx, user, first, WRITE_OK).map_err(fail(user, "the probe PUT"))?;
        let stale = retry(ctx, user, stale, any).map_err(fail(user, "the probe PUT"))?;
        let again = retry(ctx, user, again, any).map_err(fail(user, "the probe PUT"))?;
        let delete = Request::new(Op::Delete, "DELETE", path.clone());
        retry(ctx, user, delete, &[200, 204]).map_err(fail(user, "deleting the probe item"))?;
        stale.status == 412 && again.status == 412
    };
    if !conditional {
        lacks.push("conditional PUT (412 on a stale If-Match or If-None-Match: *)".into());
    }
    Ok((conditional, lacks))
}

#[cfg(test)]
mod tests {
    use super::parse_url;

    #[test]
    fn urls_take_ipv6_literals_and_refuse_https() {
        let (host, addr) = parse_url("http://[::1]:5232/user1/").unwrap();
        assert_eq!(
            (host.as_str(), addr.to_string().as_str()),
            ("[::1]:5232", "[::1]:5232")
        );
        let (host, addr) = parse_url("http://127.0.0.1/").unwrap();
        assert_eq!((host.as_str(), addr.port()), ("127.0.0.1", 80));
        for bad in [
            "https://127.0.0.1/",
            "127.0.0.1:80",
            "http://u@h/",
            "http://[::1/",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }
}
