//! Before the clock starts: is the target a CalDAV server at all, and each user's
//! calendar found (or made), emptied, and filled with the day's first items. None of
//! this is timed.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::driver::{strong_etag, Ctx, MULTI, WRITE_OK};
use crate::http::{Conn, Request};
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
    if classes.contains(&"calendar-access") {
        Ok(true)
    } else if classes.contains(&"1") {
        Ok(false)
    } else if classes.is_empty() {
        Err(not(format!(
            "OPTIONS {path} answered {} without a DAV header (nor WebDAV)",
            reply.status
        )))
    } else {
        Err(not(format!(
            "its DAV header `{}` names neither calendar-access nor WebDAV class 1",
            classes.join(", ")
        )))
    }
}

/// Finds `user`'s principal and home where `account` does not give them (CalDAV
/// discovery; plain WebDAV has no principals), makes the calendar if missing
/// (MKCALENDAR, or MKCOL on plain WebDAV), deletes what a previous run left there, and
/// writes `initial_items` items.
pub fn prepare(
    ctx: Ctx<'_>,
    user: &mut User,
    account: &Account,
    initial_items: u64,
) -> Result<(), OfficeError> {
    let fail = |user: &User, why: &str| OfficeError::Setup {
        user: user.name.clone(),
        why: why.to_owned(),
    };
    let caldav = user.server.caldav;
    if caldav && account.principal.is_none() {
        let props = "<D:current-user-principal/>";
        let req = Request::new(Op::PropfindD0, "PROPFIND", "/")
            .depth("0")
            .xml(xml::propfind(props));
        let reply = retry(ctx, user, req, MULTI).ok_or_else(|| fail(user, "PROPFIND / failed"))?;
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
        let reply = retry(ctx, user, req, MULTI)
            .ok_or_else(|| fail(user, "PROPFIND of the principal failed"))?;
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
    let reply = retry(ctx, user, req, &[207, 404])
        .ok_or_else(|| fail(user, "PROPFIND of the calendar failed"))?;
    if reply.status == 404 {
        make_calendar(ctx, user).ok_or_else(|| fail(user, "making the calendar failed"))?;
    }
    let left = (0..3)
        .find_map(|_| listing::server_etags(ctx, user, 0))
        .ok_or_else(|| fail(user, "listing the calendar failed"))?;
    for name in left.keys() {
        let req = Request::new(Op::Delete, "DELETE", user.item_path(name));
        retry(ctx, user, req, &[200, 204, 404])
            .ok_or_else(|| fail(user, "deleting a previous run's item failed"))?;
    }
    for _ in 0..initial_items {
        let n = user.next_item;
        user.next_item += 1;
        let name = format!("{}-{n}.ics", user.name);
        let data = user.item_text(n, 0);
        let mut req = Request::new(Op::PutCreate, "PUT", user.item_path(&name))
            .header("Content-Type", "text/calendar; charset=utf-8");
        if caldav {
            req = req.header("If-None-Match", "*");
        }
        let req = Request {
            body: data.clone().into_bytes(),
            ..req
        };
        let reply = retry(ctx, user, req, WRITE_OK)
            .ok_or_else(|| fail(user, "writing the first items failed"))?;
        user.truth.items.insert(
            name,
            TruthItem {
                n,
                seq: 0,
                data,
                etag: strong_etag(&reply),
                old_etags: Vec::new(),
            },
        );
    }
    Ok(())
}

/// MKCALENDAR the calendar on a CalDAV server; on plain WebDAV MKCOL it, and its home
/// first when the server says the parent is missing (409).
fn make_calendar(ctx: Ctx<'_>, user: &mut User) -> Option<()> {
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
    Some(())
}

/// Set-up requests are tried up to three times: a server that answers 500 now and then
/// should still get its day (each failure is still counted as a violation).
fn retry(
    ctx: Ctx<'_>,
    user: &mut User,
    req: Request,
    expect: &[u16],
) -> Option<crate::http::Reply> {
    for _ in 0..2 {
        if let Some(r) = ctx.call(
            &mut user.devices[0],
            &mut user.violations,
            req.clone(),
            expect,
        ) {
            return Some(r);
        }
    }
    ctx.call(&mut user.devices[0], &mut user.violations, req, expect)
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
    let fail = |user: &User, why: &str| OfficeError::Setup {
        user: user.name.clone(),
        why: why.to_owned(),
    };
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
    let reply = retry(ctx, user, req, MULTI)
        .ok_or_else(|| fail(user, "PROPFIND of the calendar failed"))?;
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
    let listed = listing::server_etags(ctx, user, 0)
        .ok_or_else(|| fail(user, "listing the calendar failed"))?;
    if listed.values().any(Option::is_none) {
        lacks.push("getetag in PROPFIND".into());
    }
    let conditional = caldav || {
        let path = user.item_path(&format!("{}-probe.ics", user.name));
        let put = |extra: (&'static str, &str)| {
            Request {
                body: user.item_text(u64::MAX, 0).into_bytes(),
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
        retry(ctx, user, first, WRITE_OK).ok_or_else(|| fail(user, "the probe PUT failed"))?;
        let stale =
            retry(ctx, user, stale, any).ok_or_else(|| fail(user, "the probe PUT failed"))?;
        let again =
            retry(ctx, user, again, any).ok_or_else(|| fail(user, "the probe PUT failed"))?;
        let delete = Request::new(Op::Delete, "DELETE", path.clone());
        retry(ctx, user, delete, &[200, 204])
            .ok_or_else(|| fail(user, "deleting the probe item failed"))?;
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
