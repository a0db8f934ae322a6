//! Who a virtual user is on the server: login, where the calendar lives, and the
//! headers every request of that user's devices carries.
//!
//! Servers lay accounts out differently (Radicale and the built-in server
//! `/<name>/calendar/`, Xandikos `/<name>/calendars/calendar/`, a plain WebDAV tree
//! `/dav/<name>/calendar/`), and some authenticate through a header a proxy would set
//! (Xandikos: `X-Remote-User`). Whoever starts the server knows its layout and passes
//! it here; a path left `None` is found the way a client finds it (docs/methodology.md,
//! "The office": accounts per server).

/// One virtual user's account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Login name (HTTP Basic); also the prefix of the user's item names.
    pub name: String,
    /// Password (HTTP Basic).
    pub password: String,
    /// Principal path. `None`: the root's `current-user-principal` on a CalDAV server
    /// (else `/<name>/`); a plain WebDAV server has no principals and none is asked.
    pub principal: Option<String>,
    /// Calendar home path (ends in `/`). `None`: the principal's
    /// `calendar-home-set` on a CalDAV server (else the principal); `/<name>/` on
    /// plain WebDAV.
    pub home: Option<String>,
    /// The calendar the office writes to (ends in `/`). `None`: `calendar/` in the
    /// home, made at set-up when missing.
    pub calendar: Option<String>,
    /// Headers sent with every request of this user's devices, after `Authorization`.
    pub headers: Vec<(String, String)>,
}

impl Account {
    /// An account whose paths are discovered, with no extra headers.
    pub fn new(name: impl Into<String>, password: impl Into<String>) -> Account {
        Account {
            name: name.into(),
            password: password.into(),
            principal: None,
            home: None,
            calendar: None,
            headers: Vec::new(),
        }
    }

    /// Where the server is first asked whether it speaks CalDAV: the calendar when
    /// known (a plain WebDAV server answers DAV only inside its tree), else the home,
    /// else the root.
    pub fn probe_path(&self) -> &str {
        self.calendar
            .as_deref()
            .or(self.home.as_deref())
            .unwrap_or("/")
    }
}
