//! Which servers volley knows, where their binaries are and what version they report.

use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;

/// A kind of target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// volley's own server, `volley serve`, started from the current executable.
    Builtin,
    /// nginx.
    Nginx,
    /// Apache httpd with the event MPM (threads + an event loop for keep-alive).
    ApacheEvent,
    /// Apache httpd with the prefork MPM (one process per connection).
    ApachePrefork,
    /// lighttpd.
    Lighttpd,
    /// Caddy.
    Caddy,
    /// Radicale, a CalDAV/CardDAV server in Python (PyPI, in volley's venv).
    Radicale,
    /// Xandikos, a CalDAV/CardDAV server in Python on git-backed storage (PyPI, venv).
    Xandikos,
    /// A URL volley does not start or stop.
    External,
}

impl TargetKind {
    /// Every kind, in the order `volley targets` lists them: the managed ones, then
    /// external.
    pub const ALL: [TargetKind; 9] = {
        let mut all = [TargetKind::External; 9];
        let mut i = 0;
        while i < Self::MANAGED.len() {
            all[i] = Self::MANAGED[i];
            i += 1;
        }
        all
    };

    /// The kinds volley starts with a generated configuration.
    pub const MANAGED: [TargetKind; 8] = [
        TargetKind::Builtin,
        TargetKind::Nginx,
        TargetKind::ApacheEvent,
        TargetKind::ApachePrefork,
        TargetKind::Lighttpd,
        TargetKind::Caddy,
        TargetKind::Radicale,
        TargetKind::Xandikos,
    ];

    /// Name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Builtin => "builtin",
            TargetKind::Nginx => "nginx",
            TargetKind::ApacheEvent => "apache-event",
            TargetKind::ApachePrefork => "apache-prefork",
            TargetKind::Lighttpd => "lighttpd",
            TargetKind::Caddy => "caddy",
            TargetKind::Radicale => "radicale",
            TargetKind::Xandikos => "xandikos",
            TargetKind::External => "external",
        }
    }

    /// A CalDAV server that serves its own storage, not a docroot: it is probed and set
    /// up over DAV (crate::dav), and every start gets DAV accounts.
    pub fn is_caldav_server(self) -> bool {
        matches!(self, TargetKind::Radicale | TargetKind::Xandikos)
    }

    /// Whether `dav = true` can turn on a plain WebDAV tree in this kind (Apache mod_dav,
    /// lighttpd mod_webdav, nginx dav + dav-ext); the CalDAV servers always speak DAV,
    /// the built-in server with `dav` runs its multi-user mode (`serve --users`).
    pub fn supports_plain_dav(self) -> bool {
        matches!(
            self,
            TargetKind::Nginx
                | TargetKind::ApacheEvent
                | TargetKind::ApachePrefork
                | TargetKind::Lighttpd
        )
    }

    /// Whether volley can configure this kind to offer HTTP/2 (by ALPN, over TLS).
    /// Apache's mod_http2 refuses to run under the prefork MPM; an external target is
    /// whatever it is. The built-in server offers `h2` unless started `--http1-only`.
    pub fn supports_http2(self) -> bool {
        matches!(
            self,
            TargetKind::Builtin
                | TargetKind::Nginx
                | TargetKind::ApacheEvent
                | TargetKind::Lighttpd
                | TargetKind::Caddy
        )
    }

    /// Whether volley can configure this kind to offer HTTP/3 (QUIC on the same port
    /// number over UDP): Caddy and the built-in server (`volley serve --h3`); Debian's
    /// nginx 1.22, Apache and lighttpd have none.
    pub fn supports_http3(self) -> bool {
        matches!(self, TargetKind::Caddy | TargetKind::Builtin)
    }

    /// Whether volley can make this kind answer `Content-Encoding: br`. Caddy 2.6 ships
    /// gzip and zstd encoders only; nginx needs Debian's brotli modules (checked at
    /// start); the built-in server serves `.br` siblings volley writes.
    pub fn supports_brotli(self) -> bool {
        !matches!(
            self,
            TargetKind::Caddy | TargetKind::External | TargetKind::Radicale | TargetKind::Xandikos
        )
    }

    /// The program run for this kind (`None` for builtin and external).
    pub fn program(self) -> Option<&'static str> {
        match self {
            TargetKind::Nginx => Some("nginx"),
            TargetKind::ApacheEvent | TargetKind::ApachePrefork => Some("apache2"),
            TargetKind::Lighttpd => Some("lighttpd"),
            TargetKind::Caddy => Some("caddy"),
            TargetKind::Radicale => Some("radicale"),
            TargetKind::Xandikos => Some("xandikos"),
            TargetKind::Builtin | TargetKind::External => None,
        }
    }

    /// Where this kind is installed when not from Debian: the PyPI servers live in
    /// volley's venv (scripts/install-caldav.sh).
    pub fn install_hint(self) -> &'static str {
        if self.is_caldav_server() {
            "scripts/install-caldav.sh"
        } else {
            "scripts/install-servers.sh"
        }
    }
}

/// The virtual environment of the PyPI servers: `$VOLLEY_VENV` or /opt/volley-venv
/// (what scripts/install-caldav.sh creates).
pub fn venv_dir() -> PathBuf {
    std::env::var_os("VOLLEY_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/volley-venv"))
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown target name.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown target kind {0:?}; expected one of builtin, nginx, apache-event, apache-prefork, lighttpd, caddy, radicale, xandikos, external")]
pub struct UnknownKind(pub String);

impl FromStr for TargetKind {
    type Err = UnknownKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let k = match s.to_ascii_lowercase().as_str() {
            "builtin" | "volley" => TargetKind::Builtin,
            "nginx" => TargetKind::Nginx,
            "apache" | "apache-event" | "apache2" => TargetKind::ApacheEvent,
            "apache-prefork" => TargetKind::ApachePrefork,
            "lighttpd" => TargetKind::Lighttpd,
            "caddy" => TargetKind::Caddy,
            "radicale" => TargetKind::Radicale,
            "xandikos" => TargetKind::Xandikos,
            "external" => TargetKind::External,
            _ => return Err(UnknownKind(s.to_string())),
        };
        Ok(k)
    }
}

/// A server found (or not) on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Installed {
    /// Which server.
    pub kind: TargetKind,
    /// Where its binary is; `None` when missing.
    pub path: Option<PathBuf>,
    /// Its version line, e.g. `nginx/1.22.1`; `None` when missing or silent.
    pub version: Option<String>,
}

/// Looks `program` up in volley's venv (the PyPI servers, pinned there first so a
/// different copy on `$PATH` is not measured by accident), `$PATH`, plus the sbin
/// directories a non-root `$PATH` often lacks (Debian installs nginx and apache2 in
/// /usr/sbin).
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::iter::once(venv_dir().join("bin"))
        .filter(|_| matches!(program, "radicale" | "xandikos"))
        .chain(std::env::split_paths(&path))
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Runs the server's version command and extracts the version from its output.
pub fn version_of(kind: TargetKind, program: &Path) -> Option<String> {
    let args: &[&str] = match kind {
        TargetKind::Nginx | TargetKind::ApacheEvent | TargetKind::ApachePrefork => &["-v"],
        TargetKind::Lighttpd => &["-v"],
        TargetKind::Caddy => &["version"],
        TargetKind::Builtin | TargetKind::Radicale | TargetKind::Xandikos => &["--version"],
        TargetKind::External => return None,
    };
    let out = Command::new(program).args(args).output().ok()?;
    // nginx prints its version on stderr, the others on stdout.
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    parse_version(kind, &text)
}

/// Picks the version out of a version command's output (pure, tested on captured text).
pub fn parse_version(kind: TargetKind, text: &str) -> Option<String> {
    let line = |needle: &str| text.lines().find(|l| l.contains(needle)).map(str::trim);
    let v = match kind {
        // "nginx version: nginx/1.22.1"
        TargetKind::Nginx => line("nginx/")?.rsplit(' ').next()?.to_string(),
        // "Server version: Apache/2.4.71 (Debian)"
        TargetKind::ApacheEvent | TargetKind::ApachePrefork => line("Apache/")?
            .split_once("Apache/")
            .map(|(_, v)| format!("Apache/{v}"))?,
        // "lighttpd/1.4.69 (ssl) - a light and fast webserver"
        TargetKind::Lighttpd => line("lighttpd/")?.split(' ').next()?.to_string(),
        // "v2.6.2 h1:..." or "2.6.2"
        TargetKind::Caddy => format!(
            "caddy {}",
            text.split_whitespace().next()?.trim_start_matches('v')
        ),
        // "volley 0.1.0"
        TargetKind::Builtin => line("volley")?.to_string(),
        // "3.9.0" alone on the first line (log lines may follow on stderr)
        TargetKind::Radicale => format!("radicale {}", first_word(text.lines().next()?)?),
        // "xandikos 0.4.10"
        TargetKind::Xandikos => format!(
            "xandikos {}",
            first_word(line("xandikos ")?.split_once(' ')?.1)?
        ),
        TargetKind::External => return None,
    };
    Some(v)
}

fn first_word(s: &str) -> Option<&str> {
    s.split_whitespace().next()
}

/// Where each managed server is and its version (builtin: the current executable).
pub fn discover() -> Vec<Installed> {
    TargetKind::MANAGED
        .iter()
        .map(|&kind| {
            let path = match kind.program() {
                Some(p) => find_program(p),
                None => std::env::current_exe().ok(),
            };
            let version = path.as_deref().and_then(|p| version_of(kind, p));
            Installed {
                kind,
                path,
                version,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_from_captured_output() {
        assert_eq!(
            parse_version(TargetKind::Nginx, "nginx version: nginx/1.22.1\n").as_deref(),
            Some("nginx/1.22.1")
        );
        assert_eq!(
            parse_version(
                TargetKind::ApachePrefork,
                "Server version: Apache/2.4.71 (Debian)\nServer built:   2026-11-12T08:58:41\n"
            )
            .as_deref(),
            Some("Apache/2.4.71 (Debian)")
        );
        assert_eq!(
            parse_version(
                TargetKind::Lighttpd,
                "lighttpd/1.4.69 (ssl) - a light and fast webserver\n"
            )
            .as_deref(),
            Some("lighttpd/1.4.69")
        );
        assert_eq!(
            parse_version(TargetKind::Caddy, "v2.6.2 h1:abc=\n").as_deref(),
            Some("caddy 2.6.2")
        );
        assert_eq!(
            parse_version(TargetKind::Radicale, "3.9.0\n[2026] [1] [INFO] Logging\n").as_deref(),
            Some("radicale 3.9.0")
        );
        assert_eq!(
            parse_version(TargetKind::Xandikos, "xandikos 0.4.10").as_deref(),
            Some("xandikos 0.4.10")
        );
        assert_eq!(parse_version(TargetKind::Nginx, "garbage"), None);
        assert_eq!(parse_version(TargetKind::Caddy, ""), None);
    }

    #[test]
    fn kinds_round_trip_through_their_names() {
        for k in TargetKind::ALL {
            assert_eq!(k.name().parse::<TargetKind>().unwrap(), k);
        }
        assert_eq!(
            "apache".parse::<TargetKind>().unwrap(),
            TargetKind::ApacheEvent
        );
        assert!("iis".parse::<TargetKind>().is_err());
    }
}
