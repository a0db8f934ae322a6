//! The gate every request passes before it is answered, for both protocols: the RFC
//! 6764 well-known redirects, then, in multi-user mode, Basic authentication through
//! [`volley_dav::auth::Auth`] and the per-account path rule of static GET/HEAD (the DAV
//! handler applies the same rule itself through `Dav::for_user`).

use crate::answer::path_of;
use std::sync::Arc;
use volley_dav::auth::{Auth, Check, Waker, CHALLENGE};

/// What to do with a request.
pub(crate) enum Gate {
    /// Answer it, as this account (None: anonymous mode).
    Pass(Option<Arc<str>>),
    /// Answer with this short status and these extra fields instead.
    Reply {
        status: u16,
        fields: Vec<(&'static str, String)>,
    },
    /// The credentials are being verified off the event loop: keep the request
    /// buffered and ask again when the worker is woken.
    Park,
}

/// RFC 6764 section 5: `/.well-known/caldav` (and carddav, which clients probe too)
/// redirect to the context path, the root, where `current-user-principal` is found.
/// With 307, one of the codes the RFC names, because clients discover with a PROPFIND
/// whose body must survive the redirect (python-requests drops it on 301/302/303).
fn well_known(path: &[u8]) -> bool {
    let p = path.strip_suffix(b"/").unwrap_or(path);
    p.eq_ignore_ascii_case(b"/.well-known/caldav")
        || p.eq_ignore_ascii_case(b"/.well-known/carddav")
}

/// Whether a static GET/HEAD of `path` stays inside `user`'s home.
fn own_path(path: &[u8], user: &str) -> bool {
    let Ok(p) = std::str::from_utf8(path) else {
        return false;
    };
    let Ok(decoded) = volley_docroot::path::decode(p) else {
        return false;
    };
    decoded
        .split(|b| *b == b'/')
        .find(|s| !s.is_empty() && *s != b".")
        .is_some_and(|first| first == user.as_bytes())
}

/// Decides a request. `waker` None means the caller cannot park (an HTTP/2 stream):
/// uncached credentials are then verified on this thread.
pub(crate) fn gate(
    auth: Option<&Auth>,
    waker: Option<&Waker>,
    method: &[u8],
    target: &[u8],
    authorization: Option<&[u8]>,
) -> Gate {
    let path = path_of(target);
    if well_known(path) {
        return Gate::Reply {
            status: 307,
            fields: vec![("Location", "/".into())],
        };
    }
    let Some(auth) = auth else {
        return Gate::Pass(None);
    };
    match auth.check(authorization, waker) {
        Check::Allowed(user) => {
            let is_static = matches!(method, b"GET" | b"HEAD");
            if is_static && !own_path(path, &user) {
                Gate::Reply {
                    status: 403,
                    fields: Vec::new(),
                }
            } else {
                Gate::Pass(Some(user))
            }
        }
        Check::Challenge => Gate::Reply {
            status: 401,
            fields: vec![("WWW-Authenticate", CHALLENGE.into())],
        },
        Check::Pending => Gate::Park,
        Check::Locked { retry_after_s } => Gate::Reply {
            status: 429,
            fields: vec![("Retry-After", retry_after_s.to_string())],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert!(well_known(b"/.well-known/caldav"));
        assert!(well_known(b"/.well-known/CalDAV/"));
        assert!(!well_known(b"/.well-known/caldavx"));
        assert!(own_path(b"/alice/calendar/x.ics", "alice"));
        assert!(own_path(b"/./alice/", "alice"));
        assert!(!own_path(b"/alicex/", "alice"));
        assert!(!own_path(b"/", "alice"));
        assert!(!own_path(b"/bob/x", "alice"));
        assert!(matches!(
            gate(None, None, b"GET", b"/.well-known/caldav", None),
            Gate::Reply { status: 307, .. }
        ));
        assert!(matches!(
            gate(None, None, b"GET", b"/x", None),
            Gate::Pass(None)
        ));
    }
}
