//! DAV accounts of a managed target and their set-up: who the users are, where each
//! one's calendar lives on each kind, and what is made before and after the start so a
//! client can sync right away (docs/methodology.md, "CalDAV and WebDAV targets").
//!
//! One vocabulary with the built-in server's `--users`: accounts `user1` .. `userN`,
//! each with a calendar. Passwords are known (derived from the name) because the
//! servers run on loopback for one run and the load must log in as every user.
//!
//! Per kind:
//! - Radicale: htpasswd file (plain), rights `owner_only`; the principal `/<name>/` is
//!   made by Radicale at the user's first request, the calendar `/<name>/calendar/` by
//!   a MKCALENDAR volley sends at start; or, with `seed_items`, both written into its
//!   storage before the start with the office's first items ([`seed_radicale`]).
//! - Xandikos: no password check over plain HTTP (see `config::xandikos_args`); each
//!   account sends `X-Remote-User`, and Xandikos makes the principal `/<name>/` with
//!   its default calendar `/<name>/calendars/calendar/` at the first request, which
//!   volley sends at start.
//! - builtin (`dav` set): `volley serve --users` with a generated bcrypt file (cost 4)
//!   on a private tree; the server provisions `/<name>/` and `/<name>/calendar/` at start.
//! - nginx, Apache, lighttpd (`dav = true`): plain WebDAV behind HTTP Basic (any
//!   account may reach any directory: they have no owners); `/dav/<name>/calendar/`
//!   are directories volley makes before the start.
//!
//! Every start then checks each calendar with a PROPFIND Depth 0 (207 or the start
//! fails). This module writes only what a server reads; the requests at start (the
//! MKCALENDAR, the PROPFIND) are the DAV client's, `volley_office::provision`.

use crate::config::{DavPaths, DavSettings, MAX_DAV_USERS, PLAIN_DAV_PREFIX};
use crate::kind::TargetKind;
use crate::TargetError;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;
use volley_office::provision::calendars;
use volley_office::Account;

/// One user of a DAV target, with everything a client needs to reach its calendar.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DavAccount {
    /// Login name, `userN`.
    pub name: String,
    /// Its password (known: loopback, one run).
    pub password: String,
    /// The principal URL path (`None` on plain WebDAV, which has no principals).
    pub principal: Option<String>,
    /// The calendar home: the collection holding the user's calendars.
    pub home: String,
    /// The user's calendar collection (exists when `start` returns).
    pub calendar: String,
    /// Headers to send with every request besides Basic credentials (Xandikos:
    /// `X-Remote-User`, the header its authenticating proxy would set).
    pub headers: Vec<(String, String)>,
}

/// The account as the DAV client takes it: its paths as this target lays them out
/// (Xandikos `/<name>/calendars/calendar/`, a plain WebDAV tree's
/// `/dav/<name>/calendar/` without principal) and its headers (Xandikos's
/// `X-Remote-User`) on every request.
impl From<&DavAccount> for Account {
    fn from(a: &DavAccount) -> Account {
        Account {
            name: a.name.clone(),
            password: a.password.clone(),
            principal: a.principal.clone(),
            home: Some(a.home.clone()),
            calendar: Some(a.calendar.clone()),
            headers: a.headers.clone(),
        }
    }
}

/// How a target's calendars come to exist at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CalendarSetup {
    /// volley sends MKCALENDAR for each account (Radicale).
    Mkcalendar,
    /// volley wrote each account's calendar, with items in it, into the server's
    /// storage before the start (Radicale with `seed_items`, [`seed_radicale`]).
    Seeded {
        /// Items written per calendar (the office's `<user>-<n>.ics`, n from 0).
        items: u64,
    },
    /// The server makes a default calendar at the account's first request, which volley
    /// sends (Xandikos `--defaults`).
    FirstRequest,
    /// Plain directories volley makes in the tree before the start (plain WebDAV).
    Directories,
    /// The server provisions each account's home and calendar at start from its users
    /// file (the built-in server's `--users`).
    UsersFile,
}

/// The DAV service of a started target.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DavService {
    /// The accounts, `user1` first.
    pub accounts: Vec<DavAccount>,
    /// Whether the server itself checks passwords (all but Xandikos, which over plain
    /// HTTP trusts `X-Remote-User`; the plain WebDAV trees let any account anywhere).
    pub checks_passwords: bool,
    /// How the calendars were made.
    pub calendars: CalendarSetup,
}

/// bcrypt cost of the built-in server's generated users file (see [`prepare`]).
pub const BUILTIN_BCRYPT_COST: u32 = 4;

/// Whether a start of `kind` with `dav` serves accounts only: every request needs
/// credentials, so readiness is an answer to OPTIONS, not the docroot's probe file.
pub fn accounts_only(kind: TargetKind, dav: Option<DavSettings>) -> bool {
    kind.is_caldav_server() || (kind == TargetKind::Builtin && dav.is_some())
}

/// The name of account `i` (1-based).
pub fn user_name(i: u32) -> String {
    format!("user{i}")
}

/// The known password of account `name`.
pub fn password_for(name: &str) -> String {
    format!("{name}-volley")
}

/// The accounts `kind` gets for `settings` (paths as that server lays them out).
pub fn accounts(kind: TargetKind, settings: &DavSettings) -> Vec<DavAccount> {
    (1..=settings.users)
        .map(|i| {
            let name = user_name(i);
            let (principal, home, calendar, headers) = match kind {
                TargetKind::Xandikos => (
                    Some(format!("/{name}/")),
                    format!("/{name}/calendars/"),
                    format!("/{name}/calendars/calendar/"),
                    vec![("X-Remote-User".to_string(), name.clone())],
                ),
                k if k.supports_plain_dav() => (
                    None,
                    format!("{PLAIN_DAV_PREFIX}{name}/"),
                    format!("{PLAIN_DAV_PREFIX}{name}/calendar/"),
                    Vec::new(),
                ),
                // Radicale, and the built-in server's `--users` layout.
                _ => (
                    Some(format!("/{name}/")),
                    format!("/{name}/"),
                    format!("/{name}/calendar/"),
                    Vec::new(),
                ),
            };
            DavAccount {
                password: password_for(&name),
                name,
                principal,
                home,
                calendar,
                headers,
            }
        })
        .collect()
}

/// The DAV settings a start uses for `kind`, or why not: the CalDAV servers always
/// get accounts (one by default), plain WebDAV only on the kinds that have it.
pub(crate) fn settings_for(
    kind: TargetKind,
    asked: Option<DavSettings>,
) -> Result<Option<DavSettings>, TargetError> {
    let dav = match (asked, kind.is_caldav_server()) {
        (None, true) => Some(DavSettings::default()),
        (d, _) => d,
    };
    let Some(d) = dav else {
        return Ok(None);
    };
    if !kind.is_caldav_server() && !kind.supports_plain_dav() && kind != TargetKind::Builtin {
        return Err(TargetError::Unsupported {
            kind,
            what: "serve WebDAV".into(),
            fix: "dav is offered by builtin, radicale, xandikos, nginx, apache-event, apache-prefork and lighttpd".into(),
        });
    }
    if d.seed_items > 0 && kind != TargetKind::Radicale {
        return Err(TargetError::Unsupported {
            kind,
            what: "take seeded calendars".into(),
            fix: "seed_items is written into Radicale's storage only".into(),
        });
    }
    if d.users == 0 || d.users > MAX_DAV_USERS {
        return Err(TargetError::InvalidSpec(format!(
            "dav users = {} is outside 1..={MAX_DAV_USERS}",
            d.users
        )));
    }
    Ok(Some(d))
}

/// What is made before the server starts: Radicale's password file (and with
/// `seed_items` its storage, [`seed_radicale`]), Xandikos's state directory, the plain
/// tree with one calendar directory per account.
pub(crate) fn prepare(
    kind: TargetKind,
    dir: &Path,
    accounts: &[DavAccount],
    seed_items: u64,
) -> Result<(), TargetError> {
    let paths = DavPaths::in_dir(dir);
    let mkdir = |p: &Path| {
        std::fs::create_dir_all(p).map_err(TargetError::io(format!("creating {}", p.display())))
    };
    match kind {
        TargetKind::Builtin => {
            // The built-in server's `--users` file: bcrypt at its lowest cost (4), so a
            // login costs about what Radicale's plain-text compare does and the office
            // measures calendars, not password hashing; the server caches verifications.
            let text = users_file(accounts, |a| bcrypt(a, "$2b$"))?;
            std::fs::write(&paths.users_file, text)
                .map_err(TargetError::io("writing the built-in server's users file"))?;
        }
        TargetKind::Radicale => {
            let text: String = accounts
                .iter()
                .map(|a| format!("{}:{}\n", a.name, a.password))
                .collect();
            std::fs::write(&paths.users_file, text)
                .map_err(TargetError::io("writing Radicale's users file"))?;
            if seed_items > 0 {
                seed_radicale(
                    &paths.tree,
                    accounts,
                    seed_items,
                    &volley_office::item::today(),
                )?;
            }
        }
        TargetKind::Xandikos => {
            mkdir(&paths.tree)?;
            mkdir(&paths.state)?;
        }
        _ => {
            // Every plain server checks Basic credentials on /dav/ (any account, not
            // each its own directory): nginx `{PLAIN}`, lighttpd's plain backend, Apache
            // bcrypt at cost 4 behind mod_authn_socache, the built-in server's scheme
            // and cache (Apache on Linux reads no plain passwords). World-readable:
            // Apache's children read it as www-data.
            let text = match kind {
                TargetKind::Nginx => {
                    users_file(accounts, |a| Ok(format!("{{PLAIN}}{}", a.password)))?
                }
                // APR reads bcrypt under its `$2y$` tag, the same algorithm as `$2b$`.
                TargetKind::ApacheEvent | TargetKind::ApachePrefork => {
                    users_file(accounts, |a| bcrypt(a, "$2y$"))?
                }
                _ => users_file(accounts, |a| Ok(a.password.clone()))?,
            };
            std::fs::write(&paths.users_file, text)
                .map_err(TargetError::io("writing the WebDAV users file"))?;
            // Apache's children run as www-data when volley is root: the tree and the
            // lock directory must be theirs to write. Everything is inside the private
            // directory, removed at stop.
            let open = |p: &Path| -> Result<(), TargetError> {
                use std::os::unix::fs::PermissionsExt;
                mkdir(p)?;
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777))
                    .map_err(TargetError::io(format!("opening {}", p.display())))
            };
            open(&paths.tree)?;
            open(&paths.lock_dir)?;
            for a in accounts {
                let rel = a.calendar.trim_start_matches(PLAIN_DAV_PREFIX);
                open(&paths.tree.join(a.name.as_str()))?;
                open(&paths.tree.join(rel.trim_end_matches('/')))?;
            }
        }
    }
    Ok(())
}

/// Radicale's `multifilesystem` storage under `tree` (its `filesystem_folder`) as it
/// stands after MKCALENDAR and `items` PUTs per account, written directly: Radicale
/// took 27 PUTs a second at set-up, half an hour for 2,000 people. The layout is
/// Radicale's documented one (its storage may be written by hand): every collection is
/// a folder under `collection-root/`, the principal `/<name>/` a plain folder (what
/// Radicale makes at a user's first request), the calendar a folder whose
/// `.Radicale.props` holds its properties as JSON with `"tag": "VCALENDAR"`, and each
/// item one file named by its href. Radicale builds its `.Radicale.cache` from the
/// files on first read. The items are the office's own (`<user>-<n>.ics`, dated around
/// `today`), so set-up takes each calendar as a previous day's (`keep_calendars`).
pub fn seed_radicale(
    tree: &Path,
    accounts: &[DavAccount],
    items: u64,
    today: &str,
) -> Result<(), TargetError> {
    let root = tree.join("collection-root");
    // Sorted keys, as Radicale writes them.
    let props = "{\"D:displayname\": \"calendar\", \"tag\": \"VCALENDAR\"}";
    for a in accounts {
        let cal = root.join(a.calendar.trim_matches('/'));
        std::fs::create_dir_all(&cal)
            .map_err(TargetError::io(format!("creating {}", cal.display())))?;
        let write = |name: &str, text: &str| {
            std::fs::write(cal.join(name), text)
                .map_err(TargetError::io(format!("seeding {}{name}", a.calendar)))
        };
        write(".Radicale.props", props)?;
        for n in 0..items {
            write(
                &volley_office::state::item_name(&a.name, n),
                &volley_office::state::item_text(&a.name, today, n, 0),
            )?;
        }
    }
    Ok(())
}

/// `name:SECRET` lines, SECRET as `secret` makes it from each account.
fn users_file(
    accounts: &[DavAccount],
    secret: impl Fn(&DavAccount) -> Result<String, TargetError>,
) -> Result<String, TargetError> {
    let mut text = String::new();
    for a in accounts {
        text.push_str(&format!("{}:{}\n", a.name, secret(a)?));
    }
    Ok(text)
}

/// `a`'s password in bcrypt at [`BUILTIN_BCRYPT_COST`], under the version tag `tag`.
fn bcrypt(a: &DavAccount, tag: &str) -> Result<String, TargetError> {
    let hash = volley_dav::auth::hash_password(a.password.as_bytes(), BUILTIN_BCRYPT_COST)
        .map_err(|e| TargetError::InvalidSpec(format!("hashing {}'s password: {e}", a.name)))?;
    Ok(match hash.strip_prefix("$2b$") {
        Some(rest) => format!("{tag}{rest}"),
        None => hash,
    })
}

/// After the server answers: makes each account's calendar where the server makes it
/// over HTTP (Radicale: MKCALENDAR, not when it was `seeded` into the storage), then
/// checks every calendar answers PROPFIND Depth 0 with 207. The requests are the DAV
/// client's ([`volley_office::provision::calendars`]).
pub(crate) fn set_up(
    kind: TargetKind,
    addr: SocketAddr,
    accounts: &[DavAccount],
    seeded: bool,
    timeout: Duration,
) -> Result<(), TargetError> {
    let clients: Vec<Account> = accounts.iter().map(Account::from).collect();
    let make = kind == TargetKind::Radicale && !seeded;
    calendars(addr, &clients, make, timeout).map_err(|e| TargetError::WrongAnswer {
        kind,
        url: format!("http://{addr}{}", e.path),
        reason: e.reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_lays_accounts_out_its_own_way() {
        let two = DavSettings {
            users: 2,
            seed_items: 0,
        };
        let r = accounts(TargetKind::Radicale, &two);
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].name, "user2");
        assert_eq!(r[1].password, "user2-volley");
        assert_eq!(r[1].calendar, "/user2/calendar/");
        assert_eq!(r[1].principal.as_deref(), Some("/user2/"));
        assert!(r[1].headers.is_empty());
        let x = accounts(TargetKind::Xandikos, &two);
        assert_eq!(x[0].calendar, "/user1/calendars/calendar/");
        assert_eq!(
            x[0].headers,
            [("X-Remote-User".to_string(), "user1".to_string())]
        );
        let n = accounts(TargetKind::Nginx, &two);
        assert_eq!(n[0].calendar, "/dav/user1/calendar/");
        assert_eq!(n[0].principal, None);
        let client = Account::from(&x[0]);
        assert_eq!(
            client.calendar.as_deref(),
            Some("/user1/calendars/calendar/")
        );
        assert_eq!(client.headers, x[0].headers);
    }

    #[test]
    fn radicales_storage_is_seeded_in_its_own_layout() {
        // A tree not made yet, in a directory removed when `tmp` drops (also on panic).
        let tmp = tempfile::Builder::new()
            .prefix("volley-seed-")
            .tempdir()
            .unwrap();
        let tree = tmp.path().join("storage");
        let two = DavSettings {
            users: 2,
            seed_items: 3,
        };
        seed_radicale(&tree, &accounts(TargetKind::Radicale, &two), 3, "20261128").unwrap();
        let cal = tree.join("collection-root/user2/calendar");
        let props: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(cal.join(".Radicale.props")).unwrap())
                .unwrap();
        assert_eq!(props["tag"], "VCALENDAR");
        let mut names: Vec<String> = std::fs::read_dir(&cal)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                ".Radicale.props",
                "user2-0.ics",
                "user2-1.ics",
                "user2-2.ics"
            ]
        );
        let item = std::fs::read_to_string(cal.join("user2-1.ics")).unwrap();
        assert_eq!(
            item,
            volley_office::state::item_text("user2", "20261128", 1, 0)
        );
        assert!(item.contains("UID:user2-1\r\n"), "{item}");
        assert!(tree.join("collection-root/user1/calendar").is_dir());
        // Only Radicale takes a seed.
        let e = settings_for(TargetKind::Xandikos, Some(two)).unwrap_err();
        assert!(e.to_string().contains("Radicale's storage only"), "{e}");
    }

    #[test]
    fn settings_are_checked_per_kind() {
        assert_eq!(
            settings_for(TargetKind::Radicale, None).unwrap(),
            Some(DavSettings {
                users: 1,
                seed_items: 0
            })
        );
        assert_eq!(settings_for(TargetKind::Nginx, None).unwrap(), None);
        let e = settings_for(
            TargetKind::Caddy,
            Some(DavSettings {
                users: 1,
                seed_items: 0,
            }),
        )
        .unwrap_err();
        assert!(e.to_string().contains("cannot serve WebDAV"), "{e}");
        let e = settings_for(
            TargetKind::Xandikos,
            Some(DavSettings {
                users: 0,
                seed_items: 0,
            }),
        )
        .unwrap_err();
        assert!(e.to_string().contains("outside 1..="), "{e}");
    }
}
