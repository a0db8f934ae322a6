//! Caddy: a Caddyfile with the admin API and automatic HTTPS off.

use super::{d, fill, Placement, ServerSettings, MIN_COMPRESS_BYTES};
pub(super) fn render(s: &ServerSettings, p: &Placement) -> String {
    let dir = d(&p.dir);
    // Worker threads are set with GOMAXPROCS in the environment, not here.
    let log = if s.access_log {
        format!("    log {{\n        output file {dir}/access.log\n    }}\n")
    } else {
        String::new()
    };
    // Go's net/http closes the connection after a response carrying `Connection: close`.
    let close = if s.keep_alive {
        ""
    } else {
        "    header Connection close\n"
    };
    // h3 only when asked: it adds a UDP listener a TCP load never uses.
    let protocols = match (s.http2, s.http3) {
        (_, true) => "h1 h2 h3",
        (true, false) => "h1 h2",
        (false, false) => "h1",
    };
    let (scheme, tls) = match &p.tls {
        // Our own files, no ACME: auto_https off also keeps Caddy from redirecting.
        Some(t) => ("https", format!("    tls {} {}\n", d(&t.cert), d(&t.key))),
        None => ("http", String::new()),
    };
    // Caddy 2.6 has no Brotli encoder (gzip and zstd only); `start` refuses brotli for
    // Caddy before this is rendered.
    let encode = match s.compression {
        Some(c) if c.gzip => format!(
            "    encode {{\n        gzip {}\n        minimum_length {MIN_COMPRESS_BYTES}\n    }}\n",
            c.gzip_level
        ),
        _ => String::new(),
    };
    // default_sni: clients that connect to an IP address send no SNI, and Caddy picks
    // a certificate by SNI.
    // ocsp_stapling off: a lab certificate names no OCSP responder.
    let sni = if p.tls.is_some() {
        format!("    default_sni {}\n    ocsp_stapling off\n", p.addr.ip())
    } else {
        String::new()
    };
    let mut out = fill(
        include_str!("../templates/Caddyfile"),
        &[
            ("sni", &sni),
            ("dir", &dir),
            ("protocols", protocols),
            ("scheme", scheme),
            ("addr", &p.addr.to_string()),
            ("ip", &p.addr.ip().to_string()),
            ("tls", &tls),
            ("encode", &encode),
            ("root", &d(&p.docroot)),
            ("close", close),
            ("log", &log),
        ],
    );
    if let Some(raw) = &s.raw {
        // Inside the site block, where Caddy's directives go.
        super::insert_before_last_brace(&mut out, raw);
    }
    out
}
