//! A started server's calendars made and checked before anyone uses them: what a
//! managed target asks of the DAV client at start (`volley_targets`, `dav/`), untimed.

use std::net::SocketAddr;
use std::time::Duration;

use crate::http::{request, Reply};
use crate::{xml, Account};

/// A calendar that is not ready for its account: where, and what was answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct CalendarNotReady {
    /// The calendar's path.
    pub path: String,
    /// The request, the account and the answer (or the transport failure).
    pub reason: String,
}

/// For each account: MKCALENDAR its calendar when `make` (a server that makes
/// calendars only when asked, as Radicale), then PROPFIND Depth 0 on it, which must
/// answer 207. Each request is bounded by `timeout`.
pub fn calendars(
    addr: SocketAddr,
    accounts: &[Account],
    make: bool,
    timeout: Duration,
) -> Result<(), CalendarNotReady> {
    for a in accounts {
        let path = a.probe_path();
        let not_ready = |reason: String| CalendarNotReady {
            path: path.to_owned(),
            reason,
        };
        let call = |method: &'static str, extra: &[(&'static str, &str)], body: String| {
            request(addr, Some(a), method, path, extra, body.as_bytes(), timeout).map_err(|e| {
                not_ready(format!(
                    "{method} as {}: no answer ({})",
                    a.name,
                    e.kind.name()
                ))
            })
        };
        if make {
            let r: Reply = call("MKCALENDAR", &[], xml::mkcalendar("calendar"))?;
            if r.status != 201 {
                return Err(not_ready(format!(
                    "MKCALENDAR as {} answered {}",
                    a.name, r.status
                )));
            }
        }
        let r = call(
            "PROPFIND",
            &[("Depth", "0")],
            xml::propfind("<D:resourcetype/>"),
        )?;
        if r.status != 207 {
            return Err(not_ready(format!(
                "PROPFIND Depth 0 as {} answered {}, expected 207",
                a.name, r.status
            )));
        }
    }
    Ok(())
}
