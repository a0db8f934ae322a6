//! lighttpd: one server block with optional TLS, h2 flag and mod_deflate.

use super::{d, fill, mime_types, Placement, ServerSettings};
use super::{COMPRESSIBLE_TYPES, MIN_COMPRESS_BYTES};
pub(super) fn render(s: &ServerSettings, p: &Placement) -> String {
    let dir = d(&p.dir);
    let types: Vec<String> = mime_types()
        .map(|(e, t)| format!("\".{e}\" => \"{t}\""))
        .collect();
    let mut out = fill(
        include_str!("../templates/lighttpd.conf"),
        &[
            ("root", &d(&p.docroot)),
            ("ip", &p.addr.ip().to_string()),
            ("port", &p.addr.port().to_string()),
            ("dir", &dir),
            ("types", &types.join(", ")),
        ],
    );
    if s.workers > 1 {
        out += &format!("server.max-worker = {}\n", s.workers);
    }
    let k = &s.knobs;
    // 0 requests per connection turns keep-alive off.
    out += &if s.keep_alive {
        format!(
            "server.max-keep-alive-requests = {}\nserver.max-keep-alive-idle = 65\n",
            k.keepalive_requests.unwrap_or(1_000_000)
        )
    } else {
        "server.max-keep-alive-requests = 0\n".to_string()
    };
    // TCP_DEFER_ACCEPT's argument is seconds to wait for data; 1 is as short as nginx's.
    if let Some(on) = k.defer_accept {
        out += &format!("server.defer-accept = {}\n", u8::from(on));
    }
    if let Some(b) = k.backlog {
        out += &format!("server.listen-backlog = {b}\n");
    }
    // lighttpd's Linux default backend is sendfile; writev copies through user space.
    if let Some(on) = k.sendfile {
        let backend = if on { "sendfile" } else { "writev" };
        out += &format!("server.network-backend = \"{backend}\"\n");
    }
    if s.access_log {
        out += &format!(
            "server.modules += ( \"mod_accesslog\" )\naccesslog.filename = \"{dir}/access.log\"\n"
        );
    }
    if let Some(t) = &p.tls {
        out += &format!(
            "server.modules += ( \"mod_openssl\" )\nssl.engine = \"enable\"\n\
             ssl.pemfile = \"{}\"\nssl.privkey = \"{}\"\n\
             ssl.openssl.ssl-conf-cmd = ( \"MinProtocol\" => \"TLSv1.2\" )\n",
            d(&t.cert),
            d(&t.key)
        );
    }
    // lighttpd 1.4.69 offers h2 by default (ALPN over TLS, Upgrade: h2c in clear):
    // say it either way so the configuration shows what the run measured.
    out += &format!(
        "server.feature-flags = ( \"server.h2proto\" => \"{}\" )\n",
        if s.http2 { "enable" } else { "disable" }
    );
    if s.dav.is_some() {
        out += &super::dav::lighttpd_section(p);
    }
    if let Some(c) = s.compression {
        let encodings: Vec<String> = c.encodings().iter().map(|e| format!("\"{e}\"")).collect();
        let types: Vec<String> = COMPRESSIBLE_TYPES
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect();
        // No deflate.cache-dir: every response is compressed on the fly, as on the
        // other servers. compression-level is gzip's; Brotli's quality is a param.
        out += &format!(
            "server.modules += ( \"mod_deflate\" )\ndeflate.allowed-encodings = ( {} )\n\
             deflate.mimetypes = ( {} )\ndeflate.min-compress-size = {MIN_COMPRESS_BYTES}\n\
             deflate.compression-level = {}\ndeflate.params = ( \"BROTLI_PARAM_QUALITY\" => \"{}\" )\n",
            encodings.join(", "),
            types.join(", "),
            c.gzip_level,
            c.brotli_level
        );
    }
    if let Some(raw) = &s.raw {
        super::append_raw(&mut out, raw);
    }
    out
}
