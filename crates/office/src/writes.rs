//! Decisions as writes: creations (PUT If-None-Match: *), edits (PUT If-Match) and
//! deletions (DELETE If-Match), each checked: an edit's ETag must change, a write
//! with a stale ETag must be refused with 412, and a conflict is resolved as clients
//! do (fetch the item, write again). On plain WebDAV that does not honour those
//! preconditions the same writes go without them ([`guarded`]), the stale-write check
//! does not apply, and such writes are counted (docs/methodology.md, "The office").

use crate::check::Violation;
use crate::day::Decision;
use crate::driver::{strong_etag, Ctx, WRITE_OK};
use crate::http::Request;
use crate::item;
use crate::ops::Op;
use crate::state::{MirrorItem, Pending, Text, TruthItem, User};

const CALENDAR: &str = "text/calendar; charset=utf-8";

/// Makes decision `p` on device `d` now, or keeps it for the next sync (DAVx5).
pub fn decide(ctx: Ctx<'_>, user: &mut User, d: usize, p: Pending) {
    if user.devices[d].profile.uploads_at_sync() {
        user.devices[d].pending.push(p);
    } else {
        apply(ctx, user, d, p);
    }
}

/// DAVx5's uploads at the start of a sync: deletions, then creations, then edits.
/// `Some(true)` if anything was uploaded, `None` if a write failed.
pub fn upload_pending(ctx: Ctx<'_>, user: &mut User, d: usize) -> Option<bool> {
    let mut pending = std::mem::take(&mut user.devices[d].pending);
    let any = !pending.is_empty();
    pending.sort_by_key(|p| match p.what {
        Decision::Delete => 0,
        Decision::Create => 1,
        Decision::Edit => 2,
    });
    let mut ok = true;
    for p in pending {
        ok &= apply(ctx, user, d, p);
    }
    ok.then_some(any)
}

/// One decision; false if a request failed.
fn apply(ctx: Ctx<'_>, user: &mut User, d: usize, p: Pending) -> bool {
    let names: Vec<&String> = user.devices[d].mirror.keys().collect();
    if names.is_empty() || p.what == Decision::Create {
        return create(ctx, user, d);
    }
    let name = names[(p.pick % names.len() as u64) as usize].clone();
    match p.what {
        Decision::Edit => edit(ctx, user, d, &name, p.stale_probe),
        _ => delete(ctx, user, d, &name),
    }
}

fn create(ctx: Ctx<'_>, user: &mut User, d: usize) -> bool {
    let n = user.next_item;
    user.next_item += 1;
    let name = format!("{}-{n}.ics", user.name);
    let data = user.item_text(n, 0);
    let mut req =
        Request::new(Op::PutCreate, "PUT", user.item_path(&name)).header("Content-Type", CALENDAR);
    if user.server.conditional {
        req = req.header("If-None-Match", "*");
    } else {
        user.unguarded += 1;
    }
    let req = Request {
        body: data.as_bytes().to_vec(),
        ..req
    };
    let Some(reply) = ctx.call(&mut user.devices[d], &mut user.violations, req, WRITE_OK) else {
        return false;
    };
    created(user, d, name, n, data, strong_etag(&reply));
    true
}

/// Records device `d`'s acknowledged creation of item `n` as `name`: the truth and the
/// device's mirror hold the one `data`.
pub(crate) fn created(
    user: &mut User,
    d: usize,
    name: String,
    n: u64,
    data: Text,
    etag: Option<String>,
) {
    user.truth.items.insert(
        name.clone(),
        TruthItem {
            n,
            seq: 0,
            data: Text::clone(&data),
            etag: etag.clone(),
            old_etags: Vec::new(),
        },
    );
    let dev = &mut user.devices[d];
    dev.mirror.insert(name.clone(), MirrorItem { etag, data });
    dev.written.insert(name);
}

/// Reads item `name` into device `d`'s mirror (after a 412, or to learn its ETag).
/// `Some(false)` when the server no longer has it.
fn refresh(ctx: Ctx<'_>, user: &mut User, d: usize, name: &str) -> Option<bool> {
    let req = Request::new(Op::Get, "GET", user.item_path(name));
    let reply = ctx.call(
        &mut user.devices[d],
        &mut user.violations,
        req,
        &[200, 404, 410],
    )?;
    if reply.status != 200 {
        user.devices[d].mirror.remove(name);
        return Some(false);
    }
    let data = user
        .truth
        .share(name, &String::from_utf8_lossy(&reply.body));
    if let Some(t) = user.truth.items.get(name) {
        if !item::same(&t.data, &data) {
            user.violations.add(Violation::ReadMismatch, name, || {
                format!("GET {name} differs from what was last written")
            });
        }
    }
    let etag = strong_etag(&reply);
    user.devices[d]
        .mirror
        .insert(name.to_owned(), MirrorItem { etag, data });
    Some(true)
}

/// A PUT of `data` over `name` with If-Match `etag` (none: unconditional); the reply
/// status, or `None`.
fn put_over(
    ctx: Ctx<'_>,
    user: &mut User,
    d: usize,
    name: &str,
    data: &str,
    etag: Option<&str>,
    expect: &[u16],
) -> Option<(u16, Option<String>)> {
    let mut req =
        Request::new(Op::PutUpdate, "PUT", user.item_path(name)).header("Content-Type", CALENDAR);
    if let Some(etag) = etag {
        req = req.header("If-Match", etag);
    }
    let req = Request {
        body: data.as_bytes().to_vec(),
        ..req
    };
    let reply = ctx.call(&mut user.devices[d], &mut user.violations, req, expect)?;
    Some((reply.status, strong_etag(&reply)))
}

/// Records an accepted edit of `name` to revision `seq` in the truth and the mirror
/// (one `data` for both; the other devices keep what they hold until they sync),
/// checking that the ETag changed with the content (`old`: the If-Match sent, if any).
pub(crate) fn accepted(
    user: &mut User,
    d: usize,
    name: &str,
    seq: u32,
    data: Text,
    old: Option<&str>,
    new: Option<String>,
) {
    if let Some(old) = old.filter(|o| new.as_deref() == Some(*o)) {
        user.violations.add(Violation::EtagUnchanged, name, || {
            format!("PUT {name} changed its content; the ETag stayed {old}")
        });
    }
    let n = user.truth.items.get(name).map_or(0, |t| t.n);
    let t = user
        .truth
        .items
        .entry(name.to_owned())
        .or_insert(TruthItem {
            n,
            seq,
            data: Text::from(""),
            etag: None,
            old_etags: Vec::new(),
        });
    if let Some(old) = old {
        if t.old_etags.len() >= crate::state::OLD_ETAGS {
            t.old_etags.remove(0);
        }
        t.old_etags.push(old.to_owned());
    }
    t.seq = seq;
    t.data = Text::clone(&data);
    t.etag = new.clone();
    user.truth.deleted.remove(name);
    let dev = &mut user.devices[d];
    dev.mirror
        .insert(name.to_owned(), MirrorItem { etag: new, data });
    dev.written.insert(name.to_owned());
}

/// Whether device `d` can write `name` conditionally: always on a CalDAV server (its
/// clients rely on it, and the day checks it); on plain WebDAV when the server honours
/// preconditions and the device holds a strong ETag (a weak one never matches an
/// If-Match, RFC 9110 13.1.1; Apache's are weak for a second after a write).
fn guarded(user: &User, d: usize, name: &str) -> bool {
    user.server.caldav
        || (user.server.conditional
            && user.devices[d]
                .mirror
                .get(name)
                .and_then(|m| m.etag.as_deref())
                .is_some_and(|e| e.starts_with('"')))
}

/// An edit without If-Match (plain WebDAV): the server takes it whatever happened to
/// the item meanwhile, so it is the new truth, even over a deletion made on another
/// device (the item is back), as it would be for a real client of such a server.
fn edit_unguarded(ctx: Ctx<'_>, user: &mut User, d: usize, name: &str) -> bool {
    let (n, seq) = match user.truth.items.get(name) {
        Some(t) => (t.n, t.seq + 1),
        None => match user.item_number(name) {
            Some(n) => {
                user.truth.items.insert(
                    name.to_owned(),
                    TruthItem {
                        n,
                        seq: 0,
                        data: Text::from(""),
                        etag: None,
                        old_etags: Vec::new(),
                    },
                );
                (n, 1)
            }
            None => return true,
        },
    };
    let data = user.item_text(n, seq);
    user.unguarded += 1;
    match put_over(ctx, user, d, name, &data, None, WRITE_OK) {
        Some((_, new)) => {
            accepted(user, d, name, seq, data, None, new);
            true
        }
        None => {
            // Refused: whatever the server holds stays the truth; a placeholder made
            // for a deleted item goes.
            if user
                .truth
                .items
                .get(name)
                .is_some_and(|t| t.data.is_empty())
            {
                user.truth.items.remove(name);
            }
            false
        }
    }
}

fn edit(ctx: Ctx<'_>, user: &mut User, d: usize, name: &str, stale_probe: bool) -> bool {
    if !guarded(user, d, name) {
        return edit_unguarded(ctx, user, d, name);
    }
    if user.devices[d]
        .mirror
        .get(name)
        .and_then(|m| m.etag.as_ref())
        .is_none()
    {
        match refresh(ctx, user, d, name) {
            None => return false,
            Some(false) => return true,
            Some(true) => {}
        }
    }
    let Some(mine) = user.devices[d]
        .mirror
        .get(name)
        .and_then(|m| m.etag.clone())
    else {
        // The server gives no ETag: the item cannot be changed safely.
        return true;
    };
    let Some(t) = user.truth.items.get(name).cloned() else {
        // Deleted on another device since this one's last sync: the write must fail.
        let text = user.item_text(0, 0);
        let r = put_over(ctx, user, d, name, &text, Some(&mine), &[412, 404]);
        user.devices[d].mirror.remove(name);
        return r.is_some();
    };
    let seq = t.seq + 1;
    let data = user.item_text(t.n, seq);
    if stale_probe {
        if let Some(old) = t.old_etags.last().filter(|o| t.etag.as_ref() != Some(*o)) {
            let old = old.clone();
            match put_over(ctx, user, d, name, &data, Some(&old), &[412, 200, 201, 204]) {
                None => return false,
                Some((412, _)) => {}
                Some((_, new)) => {
                    user.violations
                        .add(Violation::StaleWriteAccepted, name, || {
                            format!("PUT {name} with the stale If-Match {old} was accepted")
                        });
                    accepted(user, d, name, seq, data, Some(&old), new);
                    return true;
                }
            }
        }
    }
    let current = t.etag.as_deref() == Some(mine.as_str());
    let expect: &[u16] = if t.etag.is_none() {
        &[200, 201, 204, 412]
    } else if current {
        WRITE_OK
    } else {
        &[412]
    };
    match put_over(ctx, user, d, name, &data, Some(&mine), expect) {
        None => false,
        Some((412, _)) => {
            // A conflict: fetch the item as it is now and write again.
            match refresh(ctx, user, d, name) {
                None => false,
                Some(false) => true,
                Some(true) => {
                    let Some(fresh) = user.devices[d]
                        .mirror
                        .get(name)
                        .and_then(|m| m.etag.clone())
                    else {
                        return true;
                    };
                    match put_over(ctx, user, d, name, &data, Some(&fresh), WRITE_OK) {
                        None => false,
                        Some((_, new)) => {
                            accepted(user, d, name, seq, data, Some(&fresh), new);
                            true
                        }
                    }
                }
            }
        }
        Some((_, new)) => {
            accepted(user, d, name, seq, data, Some(&mine), new);
            true
        }
    }
}

fn delete(ctx: Ctx<'_>, user: &mut User, d: usize, name: &str) -> bool {
    let guarded = guarded(user, d, name);
    let mine = user.devices[d]
        .mirror
        .get(name)
        .and_then(|m| m.etag.clone())
        .filter(|_| guarded);
    if !guarded {
        user.unguarded += 1;
    }
    let truth_etag = user.truth.items.get(name).map(|t| t.etag.clone());
    let expect: &[u16] = match (&mine, &truth_etag) {
        // Deleted elsewhere already.
        (_, None) if !guarded => &[404],
        (_, None) => &[404, 412],
        (Some(m), Some(Some(t))) if m != t => &[412],
        // The server gave no ETag for the last write: the device's may be stale.
        (Some(_), Some(None)) => &[200, 204, 412],
        _ => WRITE_OK,
    };
    let mut req = Request::new(Op::Delete, "DELETE", user.item_path(name));
    if let Some(m) = &mine {
        req = req.header("If-Match", m.clone());
    }
    let Some(reply) = ctx.call(&mut user.devices[d], &mut user.violations, req, expect) else {
        return false;
    };
    if reply.status == 412 {
        // Changed elsewhere: show the new version; the user decides again later.
        return refresh(ctx, user, d, name).is_some();
    }
    user.devices[d].mirror.remove(name);
    if truth_etag.is_some() {
        user.truth.items.remove(name);
        user.truth.deleted.insert(name.to_owned());
        user.devices[d].written.insert(name.to_owned());
    }
    true
}
