//! Apache (event or prefork MPM): modules loaded from Debian's directory, nothing from
//! the system configuration.

use super::knobs::Knobs;
use super::{d, fill, mime_types, Compression, Placement, ServerSettings, TlsFiles};
use super::{APACHE_MODULES_DIR, COMPRESSIBLE_TYPES, TLS_PROTOCOLS};

/// httpd.conf for the event or prefork MPM: only what volley loads and sets.
pub(super) fn render(s: &ServerSettings, p: &Placement, event: bool) -> String {
    let dir = d(&p.dir);
    let root = d(&p.docroot);
    let m = APACHE_MODULES_DIR;
    let w = s.workers.max(1);
    let (mpm_mod, mpm) = mpm_section(w, event);
    let (mpm_name, mpm_file) = mpm_mod.split_once(' ').unwrap_or((mpm_mod, ""));
    let user = if p.as_root {
        // Apache refuses to serve as root; its children switch to this user.
        "User www-data\nGroup www-data\n"
    } else {
        ""
    };
    let types: String = mime_types()
        .map(|(e, t)| format!("AddType {t} .{e}\n"))
        .collect();
    let access = if s.access_log {
        format!("LogFormat \"%h %l %u %t \\\"%r\\\" %>s %b\" common\nCustomLog \"{dir}/access.log\" common\n")
    } else {
        String::new()
    };
    let mut extra = String::new();
    if let Some(t) = &p.tls {
        extra += &tls_section(t, s.http2, &dir);
    }
    if let Some(c) = s.compression {
        extra += &compression_section(c);
    }
    if s.dav.is_some() {
        extra += &super::dav::apache_section(p, m);
    }
    let k = &s.knobs;
    let listen_knobs = listen_knobs(k, p.tls.is_some());
    // MaxKeepAliveRequests 0 is unlimited (volley's default, so a long keep-alive run
    // does not measure reconnects).
    let max_requests = k.keepalive_requests.unwrap_or(0).to_string();
    // mod_ssl warns (AH01909) when the ServerName is not a DNS name of the
    // certificate; volley's names localhost (and 127.0.0.1 only as an IP SAN).
    let name = if p.tls.is_some() {
        "localhost"
    } else {
        "127.0.0.1"
    };
    let mut out = fill(
        include_str!("../templates/apache2.conf"),
        &[
            ("dir", &dir),
            ("name", name),
            ("addr", &p.addr.to_string()),
            ("https", if p.tls.is_some() { " https" } else { "" }),
            ("mpm_name", mpm_name),
            ("modules", m),
            ("mpm_file", mpm_file),
            ("user", user),
            ("mpm", &mpm),
            ("access", &access),
            ("keep_alive", if s.keep_alive { "On" } else { "Off" }),
            ("max_requests", &max_requests),
            (
                "sendfile",
                if k.sendfile == Some(false) {
                    "Off"
                } else {
                    "On"
                },
            ),
            ("listen_knobs", &listen_knobs),
            ("types", &types),
            ("extra", &extra),
            ("root", &root),
        ],
    );
    if let Some(raw) = &s.raw {
        super::append_raw(&mut out, raw);
    }
    out
}

/// The MPM module (`name file`) and its settings for `w` workers.
fn mpm_section(w: u32, event: bool) -> (&'static str, String) {
    if event {
        // Exactly `w` processes of 64 threads: ServerLimit caps the processes so the
        // worker count is what the study asked for.
        (
            "mpm_event_module mod_mpm_event.so",
            format!(
                "StartServers {w}\nServerLimit {w}\nThreadsPerChild 64\nThreadLimit 64\n\
                 MaxRequestWorkers {t}\nMinSpareThreads 64\nMaxSpareThreads {t}\n\
                 MaxConnectionsPerChild 0\n",
                t = w * 64
            ),
        )
    } else {
        // Seed 003's Apache: StartServers then up to 150 children, one per connection.
        // More workers than that (seed 001's 512 resident processes) raise the limit
        // with them, so `w` children really are started and kept.
        (
            "mpm_prefork_module mod_mpm_prefork.so",
            format!(
                "StartServers {w}\nMinSpareServers {w}\nMaxSpareServers {max}\n\
                 ServerLimit {limit}\nMaxRequestWorkers {limit}\nMaxConnectionsPerChild 0\n",
                max = w.max(10),
                limit = w.max(150)
            ),
        )
    }
}

/// mod_ssl with volley's certificate, protocols and session cache (and mod_http2 when
/// HTTP/2 is asked).
fn tls_section(t: &TlsFiles, http2: bool, dir: &str) -> String {
    let m = APACHE_MODULES_DIR;
    let mut extra = String::new();
    // mod_ssl reads the key in the parent (as root) before children switch user.
    extra += &format!(
        "LoadModule socache_shmcb_module {m}/mod_socache_shmcb.so\n\
         LoadModule ssl_module {m}/mod_ssl.so\n\
         SSLEngine on\nSSLCertificateFile \"{}\"\nSSLCertificateKeyFile \"{}\"\n\
         SSLProtocol -all {}\nSSLSessionCache \"shmcb:{dir}/ssl_scache(512000)\"\n\
         SSLSessionCacheTimeout 600\n",
        d(&t.cert),
        d(&t.key),
        TLS_PROTOCOLS
            .iter()
            .map(|v| format!("+{v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    if http2 {
        extra += &format!("LoadModule http2_module {m}/mod_http2.so\nProtocols h2 http/1.1\n");
    }
    extra
}

/// mod_filter with the Brotli and gzip encoders asked, over the compressible types.
fn compression_section(c: Compression) -> String {
    let m = APACHE_MODULES_DIR;
    let mut extra = String::new();
    let mut filters = Vec::new();
    extra += &format!("LoadModule filter_module {m}/mod_filter.so\n");
    // Brotli first: each filter checks Accept-Encoding, and DEFLATE leaves a body
    // BROTLI_COMPRESS already encoded alone, so a client accepting both gets br.
    if c.brotli {
        extra += &format!(
            "LoadModule brotli_module {m}/mod_brotli.so\nBrotliCompressionQuality {}\n",
            c.brotli_level
        );
        filters.push("BROTLI_COMPRESS");
    }
    if c.gzip {
        extra += &format!(
            "LoadModule deflate_module {m}/mod_deflate.so\nDeflateCompressionLevel {}\n",
            c.gzip_level
        );
        filters.push("DEFLATE");
    }
    extra += &format!(
        "AddOutputFilterByType {} {}\n",
        filters.join(";"),
        COMPRESSIBLE_TYPES.join(" ")
    );
    extra
}

/// The listener's knobs: backlog and TCP_DEFER_ACCEPT.
fn listen_knobs(k: &Knobs, tls: bool) -> String {
    let mut listen_knobs = String::new();
    if let Some(b) = k.backlog {
        listen_knobs += &format!("ListenBacklog {b}\n");
    }
    // On Linux `data` is TCP_DEFER_ACCEPT and is httpd's own default, so only an
    // explicit choice is written; `none` turns it off.
    if let Some(on) = k.defer_accept {
        let f = if on { "data" } else { "none" };
        let proto = if tls { "https" } else { "http" };
        listen_knobs += &format!("AcceptFilter {proto} {f}\n");
    }
    listen_knobs
}
