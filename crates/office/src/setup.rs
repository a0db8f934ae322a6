//! Before the clock starts: is the target a CalDAV server at all, and each user's
//! calendar found (or made), emptied, and filled with the day's first items. None of
//! this is timed.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::driver::{strong_etag, Ctx, MULTI, WRITE_OK};
use crate::http::{Conn, Request};
use crate::listing::{self, parse};
use crate::ops::Op;
use crate::state::{TruthItem, User};
use crate::xml;
use crate::OfficeError;

/// Host and address of an `http://host[:port]/...` URL.
pub fn parse_url(url: &str) -> Result<(String, SocketAddr), OfficeError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| OfficeError::Url(url.to_owned()))?;
    let authority = rest.split('/').next().unwrap_or("");
    if authority.is_empty() {
        return Err(OfficeError::Url(url.to_owned()));
    }
    let with_port = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| OfficeError::Url(url.to_owned()))?;
    Ok((authority.to_owned(), addr))
}

/// Whether the server at `addr` is a CalDAV server: OPTIONS must name
/// `calendar-access` in its DAV header (RFC 4791 5.1.1), for `user`.
pub fn probe(
    url: &str,
    addr: SocketAddr,
    host: &str,
    user: &str,
    password: &str,
    remote_user: bool,
) -> Result<(), OfficeError> {
    TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|source| OfficeError::Connect { addr, source })?;
    let mut conn = Conn::new(addr, host, user, password, Duration::from_secs(10));
    if remote_user {
        conn.add_header("X-Remote-User", user);
    }
    let (result, _) = conn.exchange(
        &Request::new(Op::Options, "OPTIONS", "/"),
        std::time::Instant::now(),
    );
    let not = |why: String| OfficeError::NotCalDav {
        url: url.to_owned(),
        why,
    };
    let reply = result.map_err(|k| not(format!("OPTIONS / failed ({k:?})")))?;
    if reply.status == 401 {
        return Err(not(format!(
            "OPTIONS / as {user} answered 401 (wrong credentials?)"
        )));
    }
    match reply.header("DAV") {
        Some(dav) if dav.split(',').any(|c| c.trim() == "calendar-access") => Ok(()),
        Some(dav) => Err(not(format!("its DAV header `{dav}` lacks calendar-access"))),
        None => Err(not(format!(
            "OPTIONS / answered {} without a DAV header",
            reply.status
        ))),
    }
}

/// Finds `user`'s principal and home, makes the calendar `calendar/` in it if missing,
/// deletes what a previous run left there, and writes `initial_items` items.
pub fn prepare(ctx: Ctx<'_>, user: &mut User, initial_items: u64) -> Result<(), OfficeError> {
    let fail = |user: &User, why: &str| OfficeError::Setup {
        user: user.name.clone(),
        why: why.to_owned(),
    };
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
    let props = "<C:calendar-home-set/>";
    let req = Request::new(Op::PropfindD0, "PROPFIND", user.principal.clone())
        .depth("0")
        .xml(xml::propfind(props));
    let reply = retry(ctx, user, req, MULTI)
        .ok_or_else(|| fail(user, "PROPFIND of the principal failed"))?;
    user.home = parse(user, &reply.body, "PROPFIND principal")
        .and_then(|m| m.entries.iter().find_map(|e| e.home.clone()))
        .unwrap_or_else(|| user.principal.clone());
    user.cal = format!("{}calendar/", user.home);
    let req = Request::new(Op::PropfindD0, "PROPFIND", user.cal.clone())
        .depth("0")
        .xml(xml::propfind("<D:resourcetype/>"));
    let reply = retry(ctx, user, req, &[207, 404])
        .ok_or_else(|| fail(user, "PROPFIND of the calendar failed"))?;
    if reply.status == 404 {
        let req = Request::new(Op::Mkcalendar, "MKCALENDAR", user.cal.clone())
            .xml(xml::mkcalendar("Office"));
        retry(ctx, user, req, &[201]).ok_or_else(|| fail(user, "MKCALENDAR failed"))?;
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
        let req = Request {
            body: data.clone().into_bytes(),
            ..Request::new(Op::PutCreate, "PUT", user.item_path(&name))
                .header("Content-Type", "text/calendar; charset=utf-8")
                .header("If-None-Match", "*")
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
