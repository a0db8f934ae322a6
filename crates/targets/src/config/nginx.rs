//! nginx: one `http` block with a `types` map, optional gzip/Brotli filters and TLS.

use super::knobs::Knobs;
use super::{d, fill, mime_types, Compression, Placement, ServerSettings};
use super::{COMPRESSIBLE_TYPES, MIN_COMPRESS_BYTES, NGINX_BROTLI_MODULES, TLS_PROTOCOLS};

/// nginx.conf: one `http` block with one `server`, only what volley sets.
pub(super) fn render(s: &ServerSettings, p: &Placement) -> String {
    let dir = d(&p.dir);
    let types: String = mime_types()
        .map(|(e, t)| format!("        {t} {e};\n"))
        .collect();
    let user = if p.as_root { "user root root;\n" } else { "" };
    let brotli = s.compression.is_some_and(|c| c.brotli);
    // Dynamic modules must be loaded before any other block. The static module is
    // loaded as the brief of Debian's packages pairs them, but `brotli_static` stays
    // off: the run measures on-the-fly compression, as seed 002 did.
    let mut modules: String = if brotli {
        NGINX_BROTLI_MODULES
            .iter()
            .map(|m| format!("load_module {m};\n"))
            .collect()
    } else {
        String::new()
    };
    let mut dav_location = String::new();
    if s.dav.is_some() {
        modules += &format!("load_module {};\n", super::NGINX_DAV_EXT_MODULE);
        dav_location = super::dav::nginx_location(p);
    }
    let access = if s.access_log {
        format!("access_log {dir}/access.log;")
    } else {
        "access_log off;".to_string()
    };
    let k = &s.knobs;
    let (keepalive, sendfile, nodelay) = connection_lines(s.keep_alive, k);
    let listen_knobs = listen_knobs(k);
    let http_extra = s.compression.map(compression_lines).unwrap_or_default();
    // nginx 1.22 has no `http2 on;`: h2 is a flag of `listen`, and with `ssl` it is
    // offered by ALPN next to http/1.1.
    let (listen_flags, tls_lines) = match &p.tls {
        Some(t) => (
            if s.http2 { " ssl http2" } else { " ssl" },
            format!(
                "        ssl_certificate \"{}\";\n        ssl_certificate_key \"{}\";\n\
                 \x20       ssl_protocols {};\n        ssl_session_cache shared:volley_tls:10m;\n\
                 \x20       ssl_session_timeout 10m;\n",
                d(&t.cert),
                d(&t.key),
                TLS_PROTOCOLS.join(" ")
            ),
        ),
        None => ("", String::new()),
    };
    let listen_flags = format!("{listen_flags}{listen_knobs}");
    let mut out = fill(
        include_str!("../templates/nginx.conf"),
        &[
            ("modules", &modules),
            ("user", user),
            ("workers", &s.workers.max(1).to_string()),
            ("dir", &dir),
            ("types", &types),
            ("access", &access),
            ("keepalive", &keepalive),
            ("sendfile", sendfile),
            ("nodelay", nodelay),
            ("http_extra", &http_extra),
            ("addr", &p.addr.to_string()),
            ("listen_flags", &listen_flags),
            ("tls_lines", &tls_lines),
            ("root", &d(&p.docroot)),
            ("dav", &dav_location),
        ],
    );
    if let Some(raw) = &s.raw {
        // The end of the `http` block: raw directives apply to every server in it.
        super::insert_before_last_brace(&mut out, raw);
    }
    out
}

/// The gzip and Brotli filters' lines for the `http` block.
fn compression_lines(c: Compression) -> String {
    let mut http_extra = String::new();
    // text/html is always compressed by both filters; naming it again is a warning.
    let types = COMPRESSIBLE_TYPES
        .iter()
        .filter(|t| **t != "text/html")
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    if c.gzip {
        http_extra += &format!(
            "    gzip on;\n    gzip_comp_level {};\n    gzip_min_length {MIN_COMPRESS_BYTES};\n\
             \x20   gzip_types {types};\n    gzip_vary on;\n",
            c.gzip_level
        );
    }
    if c.brotli {
        http_extra += &format!(
            "    brotli on;\n    brotli_comp_level {};\n    brotli_min_length {MIN_COMPRESS_BYTES};\n\
             \x20   brotli_types {types};\n",
            c.brotli_level
        );
    }
    http_extra
}

/// `listen`'s own flags from the knobs: TCP_DEFER_ACCEPT and the backlog.
fn listen_knobs(k: &Knobs) -> String {
    // `deferred` is TCP_DEFER_ACCEPT on Linux; `backlog=` is listen(2)'s argument
    // (nginx's own default there is 511).
    let mut listen_knobs = String::new();
    if k.defer_accept == Some(true) {
        listen_knobs += " deferred";
    }
    if let Some(b) = k.backlog {
        listen_knobs += &format!(" backlog={b}");
    }
    listen_knobs
}

/// The connection lines of the `http` block: keep-alive, sendfile and TCP_NODELAY.
fn connection_lines(keep_alive: bool, k: &Knobs) -> (String, &'static str, &'static str) {
    // keepalive_timeout 0 disables persistent connections; keepalive_requests is raised
    // from 1000 so a long keep-alive run does not measure nginx's reconnect policy.
    let keepalive = if keep_alive {
        format!(
            "keepalive_timeout 65s;\n    keepalive_requests {};",
            k.keepalive_requests.unwrap_or(1_000_000)
        )
    } else {
        "keepalive_timeout 0;".to_string()
    };
    // tcp_nopush (TCP_CORK) only acts with sendfile, so it goes with it.
    let sendfile = match k.sendfile {
        Some(false) => "    sendfile off;\n",
        _ => "    sendfile on;\n    tcp_nopush on;\n",
    };
    let nodelay = match k.tcp_nodelay {
        None => "",
        Some(true) => "    tcp_nodelay on;\n",
        Some(false) => "    tcp_nodelay off;\n",
    };
    (keepalive, sendfile, nodelay)
}
