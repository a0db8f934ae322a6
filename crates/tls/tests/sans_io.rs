//! TlsSession with no socket at all: a rustls server in the same thread, bytes moved
//! by hand in chunks of every size. What an event loop sees (a record split across
//! reads, many records in one read, a writer that takes a little then would block)
//! must not change the outcome.

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

use volley_tls::certs::{self, Authority};
use volley_tls::rustls::{ServerConfig, ServerConnection};
use volley_tls::{pem, ClientTls, TlsSession, TlsVersion, VersionPolicy};

/// Upper bound on pump rounds; a handshake needs a handful.
const MAX_ROUNDS: usize = 1000;

struct Pair {
    client: TlsSession,
    server: ServerConnection,
    completions: usize,
}

fn pair(policy: VersionPolicy) -> Pair {
    let ca = Authority::new().unwrap();
    let leaf = ca.server(&certs::LOCAL_NAMES).unwrap();
    let origin = Path::new("memory");
    let server_config = ServerConfig::builder_with_provider(volley_tls::client::provider())
        .with_protocol_versions(policy.versions())
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            pem::certs_from_pem(leaf.cert_pem.as_bytes(), origin).unwrap(),
            pem::key_from_pem(leaf.key_pem.as_bytes(), origin).unwrap(),
        )
        .unwrap();
    // A CA file is the only way ClientTls takes roots; write it next to nothing else, in
    // a directory removed when `dir` drops (also when building the config panics).
    let dir = tempfile::Builder::new()
        .prefix(&format!("volley-tls-sansio-{policy}-"))
        .tempdir()
        .unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.cert_pem()).unwrap();
    let client_config = ClientTls {
        versions: policy,
        ca_file: Some(ca_file),
        ..ClientTls::default()
    }
    .client_config()
    .unwrap();
    drop(dir);
    let mut server = ServerConnection::new(Arc::new(server_config)).unwrap();
    // The test writes 100 kB in one go; rustls's default send cap is 64 KiB.
    server.set_buffer_limit(None);
    Pair {
        client: TlsSession::new(client_config, "localhost").unwrap(),
        server,
        completions: 0,
    }
}

impl Pair {
    /// Moves bytes both ways, `chunk` bytes per delivery, until both sides are quiet.
    fn pump(&mut self, chunk: usize) {
        for _ in 0..MAX_ROUNDS {
            let mut to_server = Vec::new();
            self.client.take_tls_out(&mut to_server);
            for piece in to_server.chunks(chunk) {
                let mut input = piece;
                while !input.is_empty() {
                    self.server.read_tls(&mut input).unwrap();
                    self.server.process_new_packets().unwrap();
                }
            }
            let mut to_client = Vec::new();
            while self.server.wants_write() {
                self.server.write_tls(&mut to_client).unwrap();
            }
            for piece in to_client.chunks(chunk) {
                let progress = self.client.feed_tls(piece).unwrap();
                self.completions += usize::from(progress.handshake_completed);
            }
            if to_server.is_empty() && to_client.is_empty() {
                return;
            }
        }
        panic!("no quiet state after {MAX_ROUNDS} rounds");
    }
}

fn read_all_plain(client: &mut TlsSession) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let mut buf = [0u8; 1000];
    loop {
        match client.read_plain(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return (got, false),
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn any_split_of_the_byte_stream_gives_the_same_session() {
    let big: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    for (policy, want) in [
        (VersionPolicy::Tls12, TlsVersion::Tls12),
        (VersionPolicy::Tls13, TlsVersion::Tls13),
    ] {
        for chunk in [1, 2, 5, 64, 1500, usize::MAX] {
            let mut p = pair(policy);
            // Queued before the handshake, sent once it completes.
            p.client.write_plain(b"ping").unwrap();
            p.pump(chunk);
            assert!(!p.client.is_handshaking(), "{policy} chunk {chunk}");
            assert_eq!(p.completions, 1, "{policy} chunk {chunk}");
            assert_eq!(p.client.protocol_version(), Some(want));
            assert!(p.client.cipher_suite().is_some());

            let mut at_server = [0u8; 16];
            let n = p.server.reader().read(&mut at_server).unwrap();
            assert_eq!(&at_server[..n], b"ping", "{policy} chunk {chunk}");

            // More than rustls's own plaintext buffer, delivered before any read.
            p.server.writer().write_all(&big).unwrap();
            p.server.send_close_notify();
            p.pump(chunk);
            assert_eq!(p.client.plain_available(), big.len());
            let (got, closed) = read_all_plain(&mut p.client);
            assert!(got == big, "{policy} chunk {chunk}: payload intact");
            assert!(closed && p.client.peer_closed(), "close_notify seen");
        }
    }
}

/// A non-blocking writer with a byte budget: takes up to `budget` bytes, then
/// reports WouldBlock, like a full socket send buffer.
struct Choked {
    taken: Vec<u8>,
    budget: usize,
}

impl Write for Choked {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.budget == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = buf.len().min(self.budget);
        self.budget -= n;
        self.taken.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn partial_writes_keep_the_rest_queued() {
    let mut p = pair(VersionPolicy::Any);
    let mut w = Choked {
        taken: Vec::new(),
        budget: 10,
    };
    assert_eq!(p.client.write_tls(&mut w).unwrap(), 10);
    assert!(p.client.wants_write(), "the rest of the ClientHello waits");
    let err = p.client.write_tls(&mut w).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    w.budget = usize::MAX;
    let rest = p.client.write_tls(&mut w).unwrap();
    assert!(rest > 0 && !p.client.wants_write());
    // One whole handshake record: 5-byte header plus the length it announces.
    let record_len = usize::from(u16::from_be_bytes([w.taken[3], w.taken[4]]));
    assert_eq!(w.taken[0], 22);
    assert_eq!(w.taken.len(), 5 + record_len);

    // The server accepts the reassembled bytes and the handshake goes on from there.
    let mut input = w.taken.as_slice();
    while !input.is_empty() {
        p.server.read_tls(&mut input).unwrap();
    }
    p.server.process_new_packets().unwrap();
    p.pump(usize::MAX);
    assert!(!p.client.is_handshaking());
    assert!(p.client.handshake_done_at().is_some());
}

#[test]
fn server_alert_mid_stream_is_classified_and_final() {
    let mut p = pair(VersionPolicy::Tls13);
    p.pump(usize::MAX);
    // A tampered record: flip one ciphertext byte of the server's next message.
    p.server.writer().write_all(b"hello").unwrap();
    let mut record = Vec::new();
    while p.server.wants_write() {
        p.server.write_tls(&mut record).unwrap();
    }
    let last = record.len() - 1;
    record[last] ^= 0x01;
    let err = p.client.feed_tls(&record).unwrap_err();
    assert_eq!(err.name(), "other", "{err}");
    assert!(err.to_string().contains("decrypt"), "{err}");
    // Final: the session refuses further bytes and plaintext I/O.
    assert_eq!(p.client.feed_tls(&[23, 3, 3, 0, 1, 0]).unwrap_err(), err);
    assert!(p.client.read_plain(&mut [0u8; 8]).is_err());
    // And it queued an alert to tell the server.
    let mut out = Vec::new();
    assert!(p.client.take_tls_out(&mut out) > 0);
}
