//! `volley targets`: the list, `--show-config`, and usage errors, through the real binary.

use crate::common;

use common::volley;

#[test]
fn lists_every_managed_kind_with_builtin_first() {
    let (code, out, err) = volley(&["targets"]);
    assert_eq!(code, 0, "{err}");
    // The header, then its rule, then one row per kind.
    let kinds: Vec<&str> = out
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        kinds,
        [
            "builtin",
            "nginx",
            "apache-event",
            "apache-prefork",
            "lighttpd",
            "caddy",
            "radicale",
            "xandikos",
            "external"
        ]
    );
    assert!(out.lines().nth(2).unwrap().contains("volley "), "{out}");
    // Which protocols volley can make each kind offer.
    let row = |kind: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(kind))
            .unwrap_or_else(|| panic!("no {kind} row: {out}"))
            .to_owned()
    };
    for kind in ["builtin", "caddy"] {
        assert!(row(kind).contains(" h1 h2 h3 "), "{}", row(kind));
    }
    assert!(row("nginx").contains(" h1 h2 "), "{}", row("nginx"));
    assert!(!row("nginx").contains("h3"), "{}", row("nginx"));
    assert!(!row("radicale").contains("h2"), "{}", row("radicale"));
}

#[test]
fn json_list_names_paths_and_versions() {
    let (code, out, _) = volley(&["targets", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 8);
    assert_eq!(arr[0]["kind"], "builtin");
    assert!(arr[0]["path"].is_string());
}

#[test]
fn show_config_prints_the_generated_config() {
    let (code, out, err) = volley(&[
        "targets",
        "--show-config",
        "nginx",
        "--workers",
        "4",
        "--no-keep-alive",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("worker_processes 4;"), "{out}");
    assert!(out.contains("keepalive_timeout 0;"), "{out}");
    assert!(out.contains("listen 127.0.0.1:0;"), "{out}");
    assert!(out.contains("# command: nginx -p DIR"), "{out}");
    let (code, out, _) = volley(&["targets", "--show-config", "apache-prefork"]);
    assert_eq!(code, 0);
    assert!(out.contains("mod_mpm_prefork.so"));
}

#[test]
fn unknown_kind_is_a_usage_error() {
    let (code, _, err) = volley(&["targets", "--show-config", "iis"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown target kind \"iis\""), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let (code, _, _) = volley(&["targets", "--show-config", "external"]);
    assert_eq!(code, 2);
}

#[test]
fn show_config_with_tls_h2_and_compression() {
    let (code, out, err) = volley(&[
        "targets",
        "--show-config",
        "nginx",
        "--tls",
        "--h2",
        "--compress",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("listen 127.0.0.1:0 ssl http2;"), "{out}");
    assert!(
        out.contains("ssl_certificate \"DIR/tls/server.pem\";"),
        "{out}"
    );
    assert!(out.contains("gzip_comp_level 6;"), "{out}");
    let (code, out, _) = volley(&["targets", "--show-config", "caddy", "--tls", "--compress"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("tls DIR/tls/server.pem DIR/tls/server.key"),
        "{out}"
    );
    assert!(out.contains("gzip 6") && !out.contains("br"), "{out}");
    let (code, out, _) = volley(&["targets", "--show-config", "builtin", "--tls", "--compress"]);
    assert_eq!(code, 0);
    assert!(out.contains("--tls-cert DIR/tls/server.pem"), "{out}");
    assert!(out.contains("NAME.br"), "{out}");
    assert!(out.contains("--http1-only"), "no h2 unless asked: {out}");
    let (code, out, _) = volley(&["targets", "--show-config", "builtin", "--tls", "--h2"]);
    assert_eq!(code, 0);
    assert!(!out.contains("--http1-only"), "{out}");
    // HTTP/2 needs TLS, and Apache's prefork MPM has none to offer.
    let (code, _, _) = volley(&["targets", "--show-config", "nginx", "--h2"]);
    assert_eq!(code, 2);
    let (code, _, err) = volley(&[
        "targets",
        "--show-config",
        "apache-prefork",
        "--tls",
        "--h2",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot offer HTTP/2"), "{err}");
}

#[test]
fn show_config_renders_server_knobs_and_raw_text() {
    let (code, out, err) = volley(&[
        "targets",
        "--show-config",
        "nginx",
        "--set",
        "backlog=1024",
        "--set",
        "defer_accept=true",
        "--set",
        "sendfile=false",
        "--set",
        "raw.nginx=open_file_cache max=100;",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(" deferred backlog=1024;"), "{out}");
    assert!(out.contains("sendfile off;") && out.contains("open_file_cache max=100;"));
    let (code, out, err) = volley(&[
        "targets",
        "--show-config",
        "apache-prefork",
        "--set",
        "workers=512",
        "--set",
        "backlog=1024",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ListenBacklog 1024") && out.contains("MaxRequestWorkers 512"));
    let (code, _, err) = volley(&[
        "targets",
        "--show-config",
        "lighttpd",
        "--set",
        "tcp_nodelay=true",
    ]);
    assert_eq!(code, 2);
    assert_eq!(
        err.trim(),
        "volley: lighttpd cannot express server knob tcp_nodelay: lighttpd has no directive for TCP_NODELAY"
    );
}
