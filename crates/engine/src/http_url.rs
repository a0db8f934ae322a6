//! The one parsed form of an `http://` or `https://` URL that volley loads, probes or
//! drives a CalDAV office against.
//!
//! Why here: the engine is the lowest crate that every user of a URL reaches (the
//! binary's `bench` and `targets --dav-probe`, the office workload), so one type here
//! replaces the parsers each of them wrote and that disagreed (`[::1]` accepted by one,
//! refused by another). The parsing itself is the `url` crate's (WHATWG rules: IPv6
//! literals, default ports, case, percent-encoding), already in the build through the
//! NATS client; this type adds only what a load generator refuses on top of it.
//!
//! Refused, each with a one-line reason: a scheme other than http/https, a missing
//! `://`, an empty host, port 0, user info (credentials belong in a header, and a URL
//! that silently dropped them would measure 401s), and whitespace or control characters
//! anywhere (WHATWG would strip or encode them; a mistyped URL should be said, not
//! rewritten). The fragment is dropped: it never goes on the wire.

use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::str::FromStr;

/// Why a string is not a URL volley can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid URL '{url}': {why}")]
pub struct UrlError {
    /// The string as given.
    pub url: String,
    /// What is wrong with it, in a few words.
    pub why: String,
}

/// Why a URL's host gives no address to connect to.
#[derive(Debug, thiserror::Error)]
#[error("cannot resolve host '{host}'")]
pub struct ResolveError {
    /// The host as written in the URL (IPv6 literals without brackets).
    pub host: String,
    /// The resolver's error; `None` when it answered with no address at all.
    #[source]
    pub source: Option<std::io::Error>,
}

/// A parsed `http[s]://host[:port][/path][?query]` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    url: url::Url,
}

impl HttpUrl {
    /// Parses and checks `s` (see the module's list of what is refused).
    pub fn parse(s: &str) -> Result<HttpUrl, UrlError> {
        let bad = |why: &str| UrlError {
            url: s.to_string(),
            why: why.to_string(),
        };
        if s.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(bad("whitespace or control characters in it"));
        }
        let scheme_ok = s
            .split_once("://")
            .is_some_and(|(scheme, _)| ["http", "https"].contains(&&*scheme.to_ascii_lowercase()));
        if !scheme_ok {
            return Err(bad("expected http[s]://host[:port]/path"));
        }
        let url = url::Url::parse(s).map_err(|e| bad(&e.to_string()))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad(
                "user info is not supported: send credentials in a header (-H 'Authorization: ...')",
            ));
        }
        if url.host().is_none() {
            return Err(bad("missing host"));
        }
        if url.port() == Some(0) {
            return Err(bad("port 0 is not a port to connect to"));
        }
        let mut url = url;
        url.set_fragment(None);
        Ok(HttpUrl { url })
    }

    /// `https://`.
    pub fn tls(&self) -> bool {
        self.url.scheme() == "https"
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &str {
        self.url.scheme()
    }

    /// The host: a name (lower-cased), an IPv4 address, or an IPv6 address without its
    /// brackets (what a resolver and a TLS server name take).
    pub fn host(&self) -> String {
        match self.url.host() {
            Some(url::Host::Ipv6(a)) => a.to_string(),
            Some(h) => h.to_string(),
            None => String::new(),
        }
    }

    /// The host as an IP address, when it is a literal one.
    pub fn ip(&self) -> Option<IpAddr> {
        match self.url.host()? {
            url::Host::Ipv4(a) => Some(IpAddr::V4(a)),
            url::Host::Ipv6(a) => Some(IpAddr::V6(a)),
            url::Host::Domain(_) => None,
        }
    }

    /// The port, the scheme's default (80, 443) when none is written.
    pub fn port(&self) -> u16 {
        // Both schemes have a known default, so this is never the fallback.
        self.url.port_or_known_default().unwrap_or(80)
    }

    /// 80 for http, 443 for https.
    pub fn default_port(&self) -> u16 {
        if self.tls() {
            443
        } else {
            80
        }
    }

    /// Path and query as they go on the request line: always starting with '/'.
    pub fn path_and_query(&self) -> String {
        match self.url.query() {
            Some(q) => format!("{}?{q}", self.url.path()),
            None => self.url.path().to_string(),
        }
    }

    /// The path alone (no query), always starting with '/'.
    pub fn path(&self) -> &str {
        self.url.path()
    }

    /// The `Host` header value (RFC 9110 7.2): the host, bracketed when IPv6, plus the
    /// port when it is not the scheme's default.
    pub fn host_header(&self) -> String {
        let host = match self.url.host() {
            Some(url::Host::Ipv6(a)) => format!("[{a}]"),
            _ => self.host(),
        };
        if self.port() == self.default_port() {
            host
        } else {
            format!("{host}:{}", self.port())
        }
    }

    /// The same scheme, host and port with another path (and query).
    pub fn with_path(&self, path_and_query: &str) -> HttpUrl {
        let mut url = self.url.clone();
        let (path, query) = match path_and_query.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path_and_query, None),
        };
        url.set_path(path);
        url.set_query(query);
        HttpUrl { url }
    }

    /// The first address the host resolves to, at the URL's port.
    pub fn socket_addr(&self) -> Result<SocketAddr, ResolveError> {
        if let Some(ip) = self.ip() {
            return Ok(SocketAddr::new(ip, self.port()));
        }
        let host = self.host();
        let err = |source| ResolveError {
            host: host.clone(),
            source,
        };
        (host.as_str(), self.port())
            .to_socket_addrs()
            .map_err(|e| err(Some(e)))?
            .next()
            .ok_or_else(|| err(None))
    }

    /// The whole URL, normalised (lower-case scheme and host, default port left out).
    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }
}

impl FromStr for HttpUrl {
    type Err = UrlError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HttpUrl::parse(s)
    }
}

impl fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.url.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(s: &str) -> (String, u16, String, String) {
        let u = HttpUrl::parse(s).unwrap();
        (u.host(), u.port(), u.path_and_query(), u.host_header())
    }

    #[test]
    fn hosts_ports_and_paths() {
        let p = |h: &str, port, path: &str, hh: &str| (h.into(), port, path.into(), hh.into());
        assert_eq!(
            parts("http://127.0.0.1:8080/a/b?x=1#frag"),
            p("127.0.0.1", 8080, "/a/b?x=1", "127.0.0.1:8080")
        );
        assert_eq!(
            parts("HTTP://LocalHost"),
            p("localhost", 80, "/", "localhost")
        );
        assert_eq!(parts("http://h?q"), p("h", 80, "/?q", "h"));
        assert_eq!(parts("https://h/x"), p("h", 443, "/x", "h"));
        assert_eq!(parts("HTTPS://h:8443"), p("h", 8443, "/", "h:8443"));
        // A port that is the other scheme's default is still written.
        assert_eq!(parts("http://h:443/"), p("h", 443, "/", "h:443"));
        assert_eq!(parts("http://h:80/"), p("h", 80, "/", "h"));
        assert!(HttpUrl::parse("https://h/").unwrap().tls());
        assert!(!HttpUrl::parse("http://h/").unwrap().tls());
    }

    #[test]
    fn ipv6_literals() {
        assert_eq!(
            parts("http://[::1]:9/x"),
            ("::1".into(), 9, "/x".into(), "[::1]:9".into())
        );
        assert_eq!(
            parts("http://[::1]/"),
            ("::1".into(), 80, "/".into(), "[::1]".into())
        );
        let u = HttpUrl::parse("http://[::1]:5232/a").unwrap();
        assert_eq!(u.socket_addr().unwrap().to_string(), "[::1]:5232");
        assert!(u.ip().unwrap().is_loopback());
    }

    #[test]
    fn refused_forms_say_why() {
        for (bad, why) in [
            ("ftp://x/", "expected http"),
            ("x:80/", "expected http"),
            ("http:/h/", "expected http"),
            ("http://", "empty host"),
            ("http://h:0/", "port 0"),
            ("http://h:99999/", "invalid port"),
            ("http://u@h/", "user info"),
            ("http://u:p@h/", "user info"),
            ("http://[::1/", "invalid IPv6"),
            ("http://h/a b", "whitespace"),
            ("http://h/a\tb", "whitespace"),
        ] {
            let e = HttpUrl::parse(bad).expect_err(bad).to_string();
            assert!(e.to_lowercase().contains(&why.to_lowercase()), "{bad}: {e}");
        }
    }

    #[test]
    fn another_path_keeps_the_origin() {
        let u = HttpUrl::parse("http://[::1]:9/a?b").unwrap();
        let v = u.with_path("/c/d?e=1");
        assert_eq!(v.as_str(), "http://[::1]:9/c/d?e=1");
        assert_eq!(u.with_path("/x").path_and_query(), "/x");
    }
}
