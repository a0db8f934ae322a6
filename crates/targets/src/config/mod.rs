//! Generated server configurations: minimal, self-contained, everything inside one
//! private directory, loopback only.
//!
//! Rendering is a pure function of [`ServerSettings`] and [`Placement`], so
//! `volley targets --show-config KIND` prints exactly what a run would use and the
//! configuration text is stored with each run's results.

mod apache;
mod caddy;
mod dav;
pub mod knobs;
mod lighttpd;
mod nginx;

pub use knobs::{Assignment, Knob, KnobError, KnobValue, Knobs, Tuning};

pub use dav::{
    xandikos_args, DavPaths, DavSettings, LIGHTTPD_WEBDAV_MODULE, MAX_DAV_USERS,
    NGINX_DAV_EXT_MODULE, PLAIN_DAV_PREFIX, RADICALE_MAX_CONNECTIONS,
};

use crate::TargetKind;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The tunables every managed server exposes in the same terms.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ServerSettings {
    /// Worker processes (nginx, Apache StartServers, lighttpd `server.max-worker`) or
    /// threads (Caddy's GOMAXPROCS). 1 keeps single-process servers single-process.
    pub workers: u32,
    /// Persistent connections on (HTTP/1.1 default) or off (close after each response,
    /// like Apache `KeepAlive Off` in seed 003).
    pub keep_alive: bool,
    /// Write an access log line per request (into the private directory), which costs
    /// the server a write per request; off by default for throughput runs.
    pub access_log: bool,
    /// Offer HTTP/2 by ALPN (`h2` before `http/1.1`). Needs TLS: h2 is negotiated in the
    /// handshake, and nginx 1.22's `listen ... http2` without `ssl` would speak h2c
    /// prior-knowledge only and turn HTTP/1.1 clients away. See
    /// [`TargetKind::supports_http2`].
    pub http2: bool,
    /// Offer HTTP/3 as well (QUIC over UDP on the same port number). Needs TLS. See
    /// [`TargetKind::supports_http3`].
    pub http3: bool,
    /// Compress responses on the fly (nginx, Apache, lighttpd, Caddy) or serve
    /// precompressed siblings (builtin). `None` serves identity bodies only.
    pub compression: Option<Compression>,
    /// WebDAV: on nginx, Apache and lighttpd a writable tree at [`PLAIN_DAV_PREFIX`]
    /// (`dav = true`); on Radicale and Xandikos, which always speak CalDAV, the accounts
    /// (`None` there means one). `None` elsewhere: no DAV.
    pub dav: Option<DavSettings>,
    /// Server knobs (issue 23); `None` fields keep volley's generated default. Set them
    /// with [`ServerSettings::apply_knobs`], which also carries `workers` and
    /// `access_log` into the fields above.
    pub knobs: Knobs,
    /// Configuration text for this kind, stored and inserted verbatim (`raw.nginx`):
    /// the escape hatch for anything the knobs do not cover. Where it goes per kind:
    /// [`knobs::takes_raw`].
    pub raw: Option<String>,
}

impl ServerSettings {
    /// Takes `knobs` (over any set before), with `workers` and `access_log` carried into
    /// the settings every generator already reads.
    pub fn apply_knobs(&mut self, knobs: &Knobs) {
        self.knobs.overlay(knobs);
        if let Some(w) = knobs.workers {
            self.workers = w;
        }
        if let Some(a) = knobs.access_log {
            self.access_log = a;
        }
    }
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            workers: 1,
            keep_alive: true,
            access_log: false,
            http2: false,
            http3: false,
            compression: None,
            dav: None,
            knobs: Knobs::default(),
            raw: None,
        }
    }
}

/// Response compression asked of a target. Levels are per encoding because the scales
/// differ: gzip 1..=9, brotli 0..=11 (seed 002 ran Brotli at 11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Compression {
    /// `Content-Encoding: gzip` for clients that accept it.
    pub gzip: bool,
    /// `Content-Encoding: br` for clients that accept it.
    pub brotli: bool,
    /// gzip level, 1 (fast) ..= 9 (small).
    pub gzip_level: u32,
    /// Brotli quality, 0 ..= 11.
    pub brotli_level: u32,
}

impl Compression {
    /// gzip at level 6 (nginx's and zlib's usual default) and Brotli at 11, as seed 002.
    pub fn gzip_and_brotli() -> Compression {
        Compression {
            gzip: true,
            brotli: true,
            gzip_level: 6,
            brotli_level: 11,
        }
    }

    /// gzip only, at `level`.
    pub fn gzip_only(level: u32) -> Compression {
        Compression {
            gzip: true,
            brotli: false,
            gzip_level: level,
            brotli_level: 11,
        }
    }

    /// The `Content-Encoding` tokens this asks for, preferred first.
    pub fn encodings(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.brotli {
            v.push("br");
        }
        if self.gzip {
            v.push("gzip");
        }
        v
    }

    /// Out-of-range levels or nothing switched on, as a message; `None` when valid.
    pub fn problem(&self) -> Option<String> {
        if !self.gzip && !self.brotli {
            return Some("compression asked with neither gzip nor brotli".into());
        }
        if self.gzip && !(1..=9).contains(&self.gzip_level) {
            return Some(format!("gzip level {} is outside 1..=9", self.gzip_level));
        }
        if self.brotli && self.brotli_level > 11 {
            return Some(format!(
                "brotli level {} is outside 0..=11",
                self.brotli_level
            ));
        }
        None
    }
}

/// Certificate files a TLS target serves (PEM).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TlsFiles {
    /// The server certificate (chain).
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// The CA that issued `cert`, which the probe and the load trust. `None`: the probe
    /// does not verify the certificate (it connects by IP address, which a real
    /// certificate rarely names) and checks only the content.
    pub ca: Option<PathBuf>,
}

/// Responses smaller than this are not compressed by any managed server (each gets the
/// same threshold, so the servers compress the same files), and the probe file must be
/// at least this big for a compression check to mean anything.
pub const MIN_COMPRESS_BYTES: u64 = 256;

/// Content types compressed when compression is on (the text types of [`mime_types`];
/// images are already compressed).
pub const COMPRESSIBLE_TYPES: [&str; 6] = [
    "text/html",
    "text/plain",
    "text/css",
    "text/javascript",
    "application/json",
    "text/calendar",
];

/// True when responses of `content_type` are compressed when compression is on.
pub fn is_compressible(content_type: &str) -> bool {
    COMPRESSIBLE_TYPES.contains(&content_type)
}

/// TLS versions every TLS target offers (what rustls, and so the built-in server, can).
pub const TLS_PROTOCOLS: [&str; 2] = ["TLSv1.2", "TLSv1.3"];

/// Debian's nginx Brotli modules (libnginx-mod-http-brotli-filter / -static).
pub const NGINX_BROTLI_MODULES: [&str; 2] = [
    "/usr/share/nginx/modules/ngx_http_brotli_filter_module.so",
    "/usr/share/nginx/modules/ngx_http_brotli_static_module.so",
];

/// lighttpd's module directory (Debian) and the TLS module, packaged apart as
/// lighttpd-mod-openssl.
pub const LIGHTTPD_OPENSSL_MODULE: &str = "/usr/lib/lighttpd/mod_openssl.so";

/// lighttpd's compression module (gzip and Brotli), packaged apart as
/// lighttpd-mod-deflate.
pub const LIGHTTPD_DEFLATE_MODULE: &str = "/usr/lib/lighttpd/mod_deflate.so";

/// Where a rendered configuration points.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The private directory: pid file, logs, temp paths.
    pub dir: PathBuf,
    /// The directory served.
    pub docroot: PathBuf,
    /// The loopback address to listen on.
    pub addr: SocketAddr,
    /// volley runs as root: Apache then needs an unprivileged `User` for its children,
    /// and nginx is told to keep workers as root (so they can read a private docroot).
    pub as_root: bool,
    /// Serve HTTPS with these files; `None` serves plain HTTP.
    pub tls: Option<TlsFiles>,
}

/// True when volley runs as root (the `as_root` of a [`Placement`]).
pub fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Apache modules loaded from this directory (Debian's layout).
pub const APACHE_MODULES_DIR: &str = "/usr/lib/apache2/modules";

/// Extensions whose Content-Type is written into every config, so no server depends on
/// a system mime.types file and all answer the same types for the same files. The types
/// themselves come from `volley_docroot::mime`, the one table the built-in server and the
/// DAV handler use too (`.js` is `text/javascript`, RFC 9239).
pub const MIME_EXTENSIONS: [&str; 10] = [
    "html", "htm", "txt", "css", "js", "json", "png", "gif", "jpg", "ics",
];

/// `(extension, Content-Type)` for each of [`MIME_EXTENSIONS`], in that order.
pub fn mime_types() -> impl Iterator<Item = (&'static str, &'static str)> {
    MIME_EXTENSIONS
        .iter()
        .map(|e| (*e, volley_docroot::mime::essence(&format!("f.{e}"))))
}

/// Content-Type a file should be served with, by extension (the one table,
/// `volley_docroot::mime`), `application/octet-stream` when unknown.
pub fn mime_for(path: &str) -> &'static str {
    volley_docroot::mime::essence(path.rsplit('/').next().unwrap_or(path))
}

/// The file name of the generated configuration inside the private directory.
pub fn config_file_name(kind: TargetKind) -> &'static str {
    match kind {
        TargetKind::Nginx => "nginx.conf",
        TargetKind::ApacheEvent | TargetKind::ApachePrefork => "apache2.conf",
        TargetKind::Lighttpd => "lighttpd.conf",
        TargetKind::Caddy => "Caddyfile",
        TargetKind::Radicale => "radicale.conf",
        TargetKind::Builtin | TargetKind::Xandikos | TargetKind::External => "none",
    }
}

/// The arguments that start `kind` in the foreground with the configuration at `conf`
/// (Xandikos has no configuration file: [`xandikos_args`]).
pub fn command_args(kind: TargetKind, dir: &Path, conf: &Path) -> Vec<OsString> {
    let s = |x: &str| OsString::from(x);
    match kind {
        // -e: error log before the config is read (the default /var/log/nginx may not be
        // writable); -p: prefix for relative paths.
        TargetKind::Nginx => vec![
            s("-p"),
            dir.into(),
            s("-c"),
            conf.into(),
            s("-e"),
            dir.join("error.log").into(),
            s("-g"),
            s("daemon off;"),
        ],
        TargetKind::ApacheEvent | TargetKind::ApachePrefork => {
            vec![s("-d"), dir.into(), s("-f"), conf.into(), s("-DFOREGROUND")]
        }
        TargetKind::Lighttpd => vec![s("-D"), s("-f"), conf.into()],
        TargetKind::Caddy => vec![
            s("run"),
            s("--config"),
            conf.into(),
            s("--adapter"),
            s("caddyfile"),
        ],
        TargetKind::Radicale => vec![s("--config"), conf.into()],
        TargetKind::Builtin | TargetKind::Xandikos | TargetKind::External => Vec::new(),
    }
}

/// The configuration text for a managed server; `None` for builtin and external, which
/// have no configuration file.
pub fn render(kind: TargetKind, s: &ServerSettings, p: &Placement) -> Option<String> {
    match kind {
        TargetKind::Nginx => Some(nginx::render(s, p)),
        TargetKind::ApacheEvent => Some(apache::render(s, p, true)),
        TargetKind::ApachePrefork => Some(apache::render(s, p, false)),
        TargetKind::Lighttpd => Some(lighttpd::render(s, p)),
        TargetKind::Caddy => Some(caddy::render(s, p)),
        TargetKind::Radicale => Some(dav::radicale(s, p)),
        TargetKind::Builtin | TargetKind::Xandikos | TargetKind::External => None,
    }
}

/// Puts `raw` before the last closing brace of `conf` (the end of nginx's `http` block,
/// of Caddy's site block), verbatim, on lines of its own.
fn insert_before_last_brace(conf: &mut String, raw: &str) {
    let at = conf.rfind('}').unwrap_or(conf.len());
    let mut text = format!("# raw (verbatim from the study or --set)\n{raw}");
    if !text.ends_with('\n') {
        text.push('\n');
    }
    conf.insert_str(at, &text);
}

/// Appends `raw` at the end of `conf`, verbatim, on lines of its own.
fn append_raw(conf: &mut String, raw: &str) {
    conf.push_str("# raw (verbatim from the study or --set)\n");
    conf.push_str(raw);
    if !raw.ends_with('\n') {
        conf.push('\n');
    }
}

fn d(p: &Path) -> String {
    p.display().to_string()
}

/// Fills a template from `templates/`: each `@name@` becomes its value. Every
/// placeholder must be given (checked in debug builds and by the tests), so a renamed
/// one cannot silently reach a server's config.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (name, value) in values {
        out = out.replace(&format!("@{name}@"), value);
    }
    debug_assert!(!out.contains("@"), "unfilled placeholder in:\n{out}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kinds with a configuration file.
    const CONFIGURED: [TargetKind; 5] = [
        TargetKind::Nginx,
        TargetKind::ApacheEvent,
        TargetKind::ApachePrefork,
        TargetKind::Lighttpd,
        TargetKind::Caddy,
    ];

    fn place() -> Placement {
        Placement {
            dir: PathBuf::from("/tmp/v"),
            docroot: PathBuf::from("/srv/www"),
            addr: "127.0.0.1:8123".parse().unwrap(),
            as_root: false,
            tls: None,
        }
    }

    #[test]
    fn every_managed_config_listens_on_loopback_and_stays_in_its_dir() {
        let s = ServerSettings::default();
        for k in CONFIGURED {
            let c = render(k, &s, &place()).unwrap();
            assert!(c.contains("127.0.0.1"), "{k}: {c}");
            assert!(c.contains("8123"), "{k}");
            assert!(c.contains("/srv/www"), "{k}");
            assert!(c.contains("/tmp/v/error.log"), "{k}");
            assert!(!c.contains("/var/log"), "{k}");
        }
        assert_eq!(render(TargetKind::Builtin, &s, &place()), None);
    }

    #[test]
    fn keep_alive_and_access_log_switches() {
        let on = ServerSettings {
            workers: 4,
            keep_alive: true,
            access_log: true,
            ..ServerSettings::default()
        };
        let off = ServerSettings {
            workers: 1,
            keep_alive: false,
            access_log: false,
            ..ServerSettings::default()
        };
        let p = place();
        let n_on = render(TargetKind::Nginx, &on, &p).unwrap();
        let n_off = render(TargetKind::Nginx, &off, &p).unwrap();
        assert!(n_on.contains("worker_processes 4;") && n_on.contains("/tmp/v/access.log"));
        assert!(n_off.contains("keepalive_timeout 0;") && n_off.contains("access_log off;"));
        let a = render(TargetKind::ApachePrefork, &off, &p).unwrap();
        assert!(a.contains("KeepAlive Off") && a.contains("mod_mpm_prefork.so"));
        assert!(!a.contains("CustomLog"));
        let e = render(TargetKind::ApacheEvent, &on, &p).unwrap();
        assert!(e.contains("mod_mpm_event.so") && e.contains("StartServers 4"));
        assert!(e.contains("CustomLog \"/tmp/v/access.log\""));
        let l = render(TargetKind::Lighttpd, &off, &p).unwrap();
        assert!(l.contains("server.max-keep-alive-requests = 0") && !l.contains("max-worker"));
        let c = render(TargetKind::Caddy, &off, &p).unwrap();
        assert!(c.contains("admin off") && c.contains("auto_https off"));
        assert!(c.contains("header Connection close"));
    }

    fn tuned() -> ServerSettings {
        let mut s = ServerSettings::default();
        s.apply_knobs(&Knobs {
            sendfile: Some(false),
            defer_accept: Some(true),
            backlog: Some(16),
            workers: Some(4),
            keepalive_requests: Some(100),
            tcp_nodelay: Some(true),
            access_log: Some(true),
        });
        s
    }

    #[test]
    fn nginx_renders_every_knob_in_its_own_syntax() {
        let n = render(TargetKind::Nginx, &tuned(), &place()).unwrap();
        assert!(
            n.contains("listen 127.0.0.1:8123 deferred backlog=16;"),
            "{n}"
        );
        assert!(n.contains("    sendfile off;\n") && !n.contains("tcp_nopush"));
        assert!(n.contains("tcp_nodelay on;") && n.contains("keepalive_requests 100;"));
        assert!(n.contains("worker_processes 4;") && n.contains("/tmp/v/access.log"));
        let d = render(TargetKind::Nginx, &ServerSettings::default(), &place()).unwrap();
        assert!(d.contains("listen 127.0.0.1:8123;") && d.contains("sendfile on;"));
        assert!(!d.contains("tcp_nodelay") && d.contains("keepalive_requests 1000000;"));
    }

    #[test]
    fn apache_renders_every_knob_in_its_own_syntax() {
        for k in [TargetKind::ApacheEvent, TargetKind::ApachePrefork] {
            let a = render(k, &tuned(), &place()).unwrap();
            assert!(
                a.contains("ListenBacklog 16\nAcceptFilter http data\n"),
                "{a}"
            );
            assert!(a.contains("EnableSendfile Off") && a.contains("MaxKeepAliveRequests 100"));
            assert!(a.contains("StartServers 4") && a.contains("CustomLog"));
            let d = render(k, &ServerSettings::default(), &place()).unwrap();
            assert!(!d.contains("ListenBacklog") && !d.contains("AcceptFilter"));
            assert!(d.contains("EnableSendfile On") && d.contains("MaxKeepAliveRequests 0"));
        }
        let mut off = ServerSettings::default();
        off.knobs.defer_accept = Some(false);
        let a = render(TargetKind::ApacheEvent, &off, &tls_place()).unwrap();
        assert!(a.contains("AcceptFilter https none"), "{a}");
    }

    #[test]
    fn apache_prefork_keeps_as_many_resident_processes_as_asked() {
        let mut s = ServerSettings::default();
        s.apply_knobs(&Knobs {
            workers: Some(512),
            ..Knobs::default()
        });
        let a = render(TargetKind::ApachePrefork, &s, &place()).unwrap();
        for line in [
            "StartServers 512",
            "MinSpareServers 512",
            "MaxSpareServers 512",
            "ServerLimit 512",
            "MaxRequestWorkers 512",
        ] {
            assert!(a.contains(line), "{line}: {a}");
        }
        let d = render(
            TargetKind::ApachePrefork,
            &ServerSettings::default(),
            &place(),
        )
        .unwrap();
        assert!(d.contains("ServerLimit 150\nMaxRequestWorkers 150"));
    }

    #[test]
    fn lighttpd_renders_its_knobs() {
        let mut s = tuned();
        s.knobs.tcp_nodelay = None;
        let l = render(TargetKind::Lighttpd, &s, &place()).unwrap();
        for line in [
            "server.defer-accept = 1\n",
            "server.listen-backlog = 16\n",
            "server.network-backend = \"writev\"\n",
            "server.max-keep-alive-requests = 100\n",
            "server.max-worker = 4\n",
        ] {
            assert!(l.contains(line), "{line}: {l}");
        }
        let d = render(TargetKind::Lighttpd, &ServerSettings::default(), &place()).unwrap();
        assert!(!d.contains("defer-accept") && !d.contains("network-backend"));
    }

    #[test]
    fn raw_text_goes_in_verbatim_where_each_kind_reads_it() {
        let raw = "open_file_cache max=1000;   # @odd@ {kept}";
        let s = ServerSettings {
            raw: Some(raw.into()),
            ..ServerSettings::default()
        };
        let n = render(TargetKind::Nginx, &s, &place()).unwrap();
        let at = n.find(raw).expect("raw text in nginx.conf");
        assert!(
            at > n.find("    server {").unwrap(),
            "after the server block"
        );
        assert!(n[at..].trim_end().ends_with('}'), "inside http: {n}");
        for k in [TargetKind::ApachePrefork, TargetKind::Lighttpd] {
            let c = render(k, &s, &place()).unwrap();
            assert!(c.ends_with(&format!("{raw}\n")), "{k}: {c}");
        }
        let c = render(TargetKind::Caddy, &s, &place()).unwrap();
        assert!(c.contains(&format!("{raw}\n}}")), "{c}");
    }

    #[test]
    fn root_changes_the_user_lines() {
        let mut p = place();
        p.as_root = true;
        let s = ServerSettings::default();
        assert!(render(TargetKind::ApacheEvent, &s, &p)
            .unwrap()
            .contains("User www-data"));
        assert!(render(TargetKind::Nginx, &s, &p)
            .unwrap()
            .starts_with("# generated by volley\nuser root root;"));
    }

    #[test]
    fn mime_by_extension() {
        assert_eq!(mime_for("/index.html"), "text/html");
        assert_eq!(mime_for("/a/b.PNG"), "image/png");
        assert_eq!(mime_for("/noext"), "application/octet-stream");
    }

    fn tls_place() -> Placement {
        Placement {
            tls: Some(TlsFiles {
                cert: PathBuf::from("/tmp/v/tls/server.pem"),
                key: PathBuf::from("/tmp/v/tls/server.key"),
                ca: Some(PathBuf::from("/tmp/v/tls/ca.pem")),
            }),
            ..place()
        }
    }

    fn secure(http2: bool, compression: Option<Compression>) -> ServerSettings {
        ServerSettings {
            http2,
            compression,
            ..ServerSettings::default()
        }
    }

    #[test]
    fn tls_lines_name_the_certificate_on_every_server() {
        let s = secure(false, None);
        for k in CONFIGURED {
            let c = render(k, &s, &tls_place()).unwrap();
            assert!(c.contains("/tmp/v/tls/server.pem"), "{k}: {c}");
            assert!(c.contains("/tmp/v/tls/server.key"), "{k}: {c}");
            let plain = render(k, &s, &place()).unwrap();
            assert!(!plain.contains("server.pem"), "{k}");
        }
        let n = render(TargetKind::Nginx, &s, &tls_place()).unwrap();
        assert!(n.contains("listen 127.0.0.1:8123 ssl;"));
        assert!(n.contains("ssl_protocols TLSv1.2 TLSv1.3;"));
        assert!(n.contains("ssl_session_cache shared:"));
        let a = render(TargetKind::ApacheEvent, &s, &tls_place()).unwrap();
        assert!(a.contains("Listen 127.0.0.1:8123 https\n") && a.contains("mod_ssl.so"));
        assert!(a.contains("SSLSessionCache \"shmcb:/tmp/v/") && !a.contains("Protocols"));
        let l = render(TargetKind::Lighttpd, &s, &tls_place()).unwrap();
        assert!(l.contains("ssl.engine = \"enable\"") && l.contains("\"mod_openssl\""));
        assert!(l.contains("\"server.h2proto\" => \"disable\""));
        let c = render(TargetKind::Caddy, &s, &tls_place()).unwrap();
        assert!(c.contains("https://127.0.0.1:8123 {") && c.contains("protocols h1\n"));
        assert!(c.contains("auto_https off") && c.contains("default_sni 127.0.0.1"));
    }

    #[test]
    fn http2_switch() {
        let s = secure(true, None);
        let p = tls_place();
        assert!(render(TargetKind::Nginx, &s, &p)
            .unwrap()
            .contains("listen 127.0.0.1:8123 ssl http2;"));
        let a = render(TargetKind::ApacheEvent, &s, &p).unwrap();
        assert!(a.contains("mod_http2.so\nProtocols h2 http/1.1\n"));
        assert!(render(TargetKind::Lighttpd, &s, &p)
            .unwrap()
            .contains("\"server.h2proto\" => \"enable\""));
        assert!(render(TargetKind::Caddy, &s, &p)
            .unwrap()
            .contains("protocols h1 h2\n"));
    }

    #[test]
    fn compression_levels_reach_each_server() {
        let both = Compression {
            gzip_level: 4,
            ..Compression::gzip_and_brotli()
        };
        let s = secure(false, Some(both));
        let p = place();
        let n = render(TargetKind::Nginx, &s, &p).unwrap();
        assert!(n.starts_with("# generated by volley\nload_module /usr/share/nginx/modules/ngx_http_brotli_filter_module.so;"));
        assert!(n.contains("gzip_comp_level 4;") && n.contains("brotli_comp_level 11;"));
        assert!(n.contains("gzip_min_length 256;"));
        // text/html is implicit in both filters; listing it again makes nginx warn.
        assert!(!n.contains("gzip_types text/html"));
        let a = render(TargetKind::ApacheEvent, &s, &p).unwrap();
        assert!(
            a.contains("BrotliCompressionQuality 11") && a.contains("DeflateCompressionLevel 4")
        );
        assert!(a.contains("AddOutputFilterByType BROTLI_COMPRESS;DEFLATE text/html"));
        let l = render(TargetKind::Lighttpd, &s, &p).unwrap();
        assert!(l.contains("deflate.allowed-encodings = ( \"br\", \"gzip\" )"));
        assert!(l.contains("deflate.compression-level = 4"));
        assert!(l.contains("\"BROTLI_PARAM_QUALITY\" => \"11\""));
        let c = render(
            TargetKind::Caddy,
            &secure(false, Some(Compression::gzip_only(4))),
            &p,
        )
        .unwrap();
        assert!(c.contains("gzip 4") && c.contains("minimum_length 256"));
        let g = render(
            TargetKind::Nginx,
            &secure(false, Some(Compression::gzip_only(6))),
            &p,
        )
        .unwrap();
        assert!(!g.contains("brotli") && !g.contains("load_module"));
        let a = render(
            TargetKind::ApacheEvent,
            &secure(false, Some(Compression::gzip_only(6))),
            &p,
        )
        .unwrap();
        assert!(a.contains("AddOutputFilterByType DEFLATE text/html") && !a.contains("brotli"));
    }

    #[test]
    fn compression_validity() {
        assert_eq!(Compression::gzip_and_brotli().problem(), None);
        assert_eq!(Compression::gzip_and_brotli().encodings(), ["br", "gzip"]);
        assert!(Compression::gzip_only(0).problem().is_some());
        assert!(Compression::gzip_only(10).problem().is_some());
        let mut c = Compression::gzip_and_brotli();
        c.brotli_level = 12;
        assert!(c.problem().is_some());
        c.brotli = false;
        assert_eq!(
            c.problem(),
            None,
            "the brotli level is ignored when brotli is off"
        );
        c.gzip = false;
        assert!(c.problem().is_some());
    }
}
