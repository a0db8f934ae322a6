//! TlsSession against an in-process rustls server on 127.0.0.1:0: versions, ALPN,
//! resumption, client certificates and every failure class.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use common::{body, exchange, serve, Fixture, IO_TIMEOUT, REQUEST};
use volley_tls::certs::{self, Authority, Issued};
use volley_tls::{ClientTls, ServerTls, TlsFailure, TlsVersion, VersionPolicy};

fn run_one(
    server: ServerTls,
    client: ClientTls,
    host: &str,
) -> Result<common::Outcome, TlsFailure> {
    let (addr, handle) = serve(server.server_config().unwrap(), 1);
    let result = exchange(client.client_config().unwrap(), addr, host, false, REQUEST);
    handle.join().unwrap();
    result
}

#[test]
fn tls12_and_tls13_handshakes_and_a_response() {
    let fx = Fixture::valid("versions");
    for (policy, want, name) in [
        (VersionPolicy::Tls12, TlsVersion::Tls12, "TLSv1_2"),
        (VersionPolicy::Tls13, TlsVersion::Tls13, "TLSv1_3"),
        (VersionPolicy::Any, TlsVersion::Tls13, "TLSv1_3"),
    ] {
        let client = ClientTls {
            versions: policy,
            ..fx.client()
        };
        let out = run_one(fx.server(), client, "localhost").unwrap();
        assert_eq!(out.version, Some(want), "{policy}");
        assert_eq!(out.handshake_completions, 1, "completion reported once");
        assert!(out.handshake_stamped);
        assert!(out.response.starts_with(b"HTTP/1.1 200 OK\r\n"));
        assert_eq!(body(&out.response), format!("{name} http/1.1").as_bytes());
    }
    // A 1.2-only server and a client that offers both settle on 1.2.
    let server = ServerTls {
        versions: VersionPolicy::Tls12,
        ..fx.server()
    };
    let out = run_one(server, fx.client(), "localhost").unwrap();
    assert_eq!(out.version, Some(TlsVersion::Tls12));
}

#[test]
fn version_mismatch_is_an_alert() {
    let fx = Fixture::valid("version-mismatch");
    let server = ServerTls {
        versions: VersionPolicy::Tls12,
        ..fx.server()
    };
    let client = ClientTls {
        versions: VersionPolicy::Tls13,
        ..fx.client()
    };
    let err = run_one(server, client, "localhost").unwrap_err();
    assert_eq!(err.name(), "alert", "{err}");
    assert_eq!(err.to_string(), "server sent TLS alert protocol_version");
}

#[test]
fn ip_addresses_verify_without_sni() {
    let fx = Fixture::valid("ip");
    for host in ["127.0.0.1", "localhost"] {
        let out = run_one(fx.server(), fx.client(), host).unwrap();
        assert!(out.response.starts_with(b"HTTP/1.1 200"), "{host}");
    }
}

#[test]
fn large_response_arrives_whole() {
    let fx = Fixture::valid("big");
    let (addr, handle) = serve(fx.server().server_config().unwrap(), 1);
    let request = b"GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let out = exchange(
        fx.client().client_config().unwrap(),
        addr,
        "localhost",
        false,
        request,
    )
    .unwrap();
    assert!(handle.join().unwrap().is_empty());
    let b = body(&out.response);
    assert_eq!(b.len(), 300 * 1024);
    assert!(b.iter().all(|&c| c == b'x'));
}

#[test]
fn alpn_negotiates_h2_or_http11() {
    let fx = Fixture::valid("alpn");
    for (offer, want) in [
        (vec!["h2", "http/1.1"], b"h2".as_slice()),
        (vec!["http/1.1", "h2"], b"h2".as_slice()), // the server's preference wins
        (vec!["http/1.1"], b"http/1.1".as_slice()),
    ] {
        let client = ClientTls {
            alpn: offer.iter().map(|s| s.to_string()).collect(),
            ..fx.client()
        };
        let (addr, handle) = serve(fx.server().server_config().unwrap(), 1);
        let out = exchange(
            client.client_config().unwrap(),
            addr,
            "localhost",
            true,
            b"",
        )
        .unwrap();
        handle.join().unwrap();
        assert_eq!(out.alpn.as_deref(), Some(want), "{offer:?}");
    }
}

#[test]
fn alpn_mismatch_both_ways() {
    let fx = Fixture::valid("alpn-mismatch");
    // The client offers only a protocol the server lacks: the server refuses.
    let client = ClientTls {
        alpn: vec!["spdy/3".into()],
        ..fx.client()
    };
    let (addr, handle) = serve(fx.server().server_config().unwrap(), 1);
    let err = exchange(
        client.client_config().unwrap(),
        addr,
        "localhost",
        false,
        b"",
    )
    .unwrap_err();
    let server_errors = handle.join().unwrap();
    assert_eq!(err.name(), "alpn_mismatch", "{err}");
    assert_eq!(server_errors.len(), 1, "the server failed too");

    // The server speaks no ALPN and the client requires a protocol.
    let server = ServerTls {
        alpn: Vec::new(),
        ..fx.server()
    };
    let client = ClientTls {
        alpn: vec!["h2".into()],
        ..fx.client()
    };
    let (addr, handle) = serve(server.server_config().unwrap(), 1);
    let err = exchange(
        client.client_config().unwrap(),
        addr,
        "localhost",
        true,
        b"",
    )
    .unwrap_err();
    handle.join().unwrap();
    assert_eq!(err.name(), "alpn_mismatch", "{err}");

    // Without the requirement the same pair just has no ALPN.
    let (addr, handle) = serve(server.server_config().unwrap(), 1);
    let out = exchange(
        client.client_config().unwrap(),
        addr,
        "localhost",
        false,
        b"",
    )
    .unwrap();
    handle.join().unwrap();
    assert_eq!(out.alpn, None);
}

#[test]
fn resumption_on_resumes_the_second_connection() {
    let fx = Fixture::valid("resume-on");
    for policy in [VersionPolicy::Tls12, VersionPolicy::Tls13] {
        let client = ClientTls {
            versions: policy,
            resumption: true,
            ..fx.client()
        };
        // One config for both connections: the cache lives in it, as in a worker.
        let config = client.client_config().unwrap();
        let (addr, handle) = serve(fx.server().server_config().unwrap(), 3);
        let first = exchange(config.clone(), addr, "localhost", false, REQUEST).unwrap();
        let second = exchange(config.clone(), addr, "localhost", false, REQUEST).unwrap();
        let third = exchange(config, addr, "localhost", false, REQUEST).unwrap();
        assert!(handle.join().unwrap().is_empty());
        assert!(
            !first.resumed,
            "{policy}: the first connection is a full handshake"
        );
        assert!(second.resumed, "{policy}: the second resumes");
        assert!(third.resumed, "{policy}: and so does the third");
        assert!(body(&second.response).starts_with(b"TLSv1_"));
    }
}

#[test]
fn resumption_off_pays_full_handshakes() {
    let fx = Fixture::valid("resume-off");
    for policy in [VersionPolicy::Tls12, VersionPolicy::Tls13] {
        let client = ClientTls {
            versions: policy,
            resumption: false,
            ..fx.client()
        };
        let config = client.client_config().unwrap();
        let (addr, handle) = serve(fx.server().server_config().unwrap(), 2);
        let first = exchange(config.clone(), addr, "localhost", false, REQUEST).unwrap();
        let second = exchange(config, addr, "localhost", false, REQUEST).unwrap();
        assert!(handle.join().unwrap().is_empty());
        assert!(!first.resumed && !second.resumed, "{policy}");
    }
}

#[test]
fn separate_configs_do_not_share_sessions() {
    let fx = Fixture::valid("resume-separate");
    let (addr, handle) = serve(fx.server().server_config().unwrap(), 2);
    let a = exchange(
        fx.client().client_config().unwrap(),
        addr,
        "localhost",
        false,
        REQUEST,
    );
    let b = exchange(
        fx.client().client_config().unwrap(),
        addr,
        "localhost",
        false,
        REQUEST,
    );
    handle.join().unwrap();
    assert!(!a.unwrap().resumed);
    assert!(
        !b.unwrap().resumed,
        "a new worker config starts with an empty cache"
    );
}

fn failure_with(tag: &str, make: impl FnOnce(&Authority) -> Issued) -> TlsFailure {
    let ca = Authority::new().unwrap();
    let server = make(&ca);
    let fx = Fixture::new(tag, &ca, &server);
    let (addr, handle) = serve(fx.server().server_config().unwrap(), 1);
    let result = exchange(
        fx.client().client_config().unwrap(),
        addr,
        "localhost",
        false,
        REQUEST,
    );
    let server_errors = handle.join().unwrap();
    let err = result.unwrap_err();
    assert_eq!(
        server_errors.len(),
        1,
        "{tag}: the server saw the client's alert"
    );
    err
}

#[test]
fn expired_certificate() {
    let err = failure_with("expired", |ca| {
        ca.expired_server(&certs::LOCAL_NAMES).unwrap()
    });
    assert_eq!(err.name(), "cert_expired", "{err}");
    assert!(
        err.to_string().starts_with("server certificate expired"),
        "{err}"
    );
}

#[test]
fn wrong_host_certificate() {
    let err = failure_with("wrong-host", |ca| ca.wrong_host_server().unwrap());
    assert_eq!(err.name(), "wrong_host", "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("localhost") && msg.contains(certs::WRONG_HOST),
        "{msg}"
    );
}

#[test]
fn self_signed_certificate_without_its_ca() {
    let err = failure_with("self-signed", |_| {
        certs::self_signed_server(&certs::LOCAL_NAMES).unwrap()
    });
    assert_eq!(err, TlsFailure::SelfSigned);
}

#[test]
fn certificate_from_another_ca_is_unknown_issuer() {
    let err = failure_with("unknown-issuer", |_| {
        let other = Authority::new().unwrap();
        other.server(&certs::LOCAL_NAMES).unwrap()
    });
    assert_eq!(err, TlsFailure::UnknownIssuer);
}

#[test]
fn insecure_accepts_bad_certificates_but_still_handshakes() {
    let ca = Authority::new().unwrap();
    for (tag, server) in [
        (
            "insecure-self",
            certs::self_signed_server(&["localhost"]).unwrap(),
        ),
        (
            "insecure-expired",
            ca.expired_server(&["localhost"]).unwrap(),
        ),
        ("insecure-wrong", ca.wrong_host_server().unwrap()),
    ] {
        let fx = Fixture::new(tag, &ca, &server);
        let client = ClientTls {
            insecure: true,
            ..ClientTls::default()
        };
        let out = run_one(fx.server(), client, "localhost").unwrap();
        assert!(out.response.starts_with(b"HTTP/1.1 200"), "{tag}");
    }
}

#[test]
fn plain_http_server_is_not_tls() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let (mut tcp, _) = listener.accept().unwrap();
        tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut buf = [0u8; 1024];
        let _ = tcp.read(&mut buf); // the ClientHello, read as a garbled request
        let _ = tcp.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    });
    let config = ClientTls {
        insecure: true,
        ..ClientTls::default()
    }
    .client_config()
    .unwrap();
    let err = exchange(config, addr, "localhost", false, REQUEST).unwrap_err();
    handle.join().unwrap();
    assert_eq!(err.name(), "not_tls", "{err}");
    assert!(err.to_string().contains("HTTP/1.1 400"), "{err}");
}

#[test]
fn server_hanging_up_mid_handshake_is_other() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        drop(tcp);
    });
    let config = ClientTls {
        insecure: true,
        ..ClientTls::default()
    }
    .client_config()
    .unwrap();
    let err = exchange(config, addr, "localhost", false, REQUEST).unwrap_err();
    handle.join().unwrap();
    // Either the EOF (classified) or a reset while writing, depending on timing of the
    // close; both are failures, never a success.
    assert!(matches!(err, TlsFailure::Other(_)), "{err}");
}

fn client_cert_fixture(dir: &Path, ca: &Authority) -> (PathBuf, PathBuf) {
    ca.client("volley-client")
        .unwrap()
        .write(dir, "client")
        .unwrap()
}

#[test]
fn client_certificates_required_and_presented() {
    let fx = Fixture::valid("client-cert");
    // The server trusts client certificates from a CA of its own.
    let client_ca = Authority::new().unwrap();
    let client_ca_file = fx.dir.join("client-ca.pem");
    std::fs::write(&client_ca_file, client_ca.cert_pem()).unwrap();
    let server = ServerTls {
        client_ca_file: Some(client_ca_file),
        ..fx.server()
    };
    let (cert, key) = client_cert_fixture(&fx.dir, &client_ca);

    let with_cert = ClientTls {
        client_cert: Some((cert, key)),
        ..fx.client()
    };
    let out = run_one(server.clone(), with_cert, "localhost").unwrap();
    assert!(out.response.starts_with(b"HTTP/1.1 200"));

    for policy in [VersionPolicy::Tls12, VersionPolicy::Tls13] {
        let without = ClientTls {
            versions: policy,
            ..fx.client()
        };
        let err = run_one(server.clone(), without, "localhost").unwrap_err();
        assert_eq!(err.name(), "alert", "{policy}: {err}");
    }
}
