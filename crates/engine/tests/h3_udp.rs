//! The HTTP/3 worker against UDP peers that do not speak QUIC: nothing listening, a
//! peer that answers every datagram with junk, one that never answers, and one that
//! offers only QUIC versions volley does not speak (version negotiation). Every
//! request is accounted for as a `connect` failure and the failed handshakes are
//! counted; nothing hangs. All traffic stays on loopback; each peer thread is bounded
//! in time and datagrams.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use volley_engine::volley_tls::ClientTls;
use volley_engine::{run_with, ErrorKind, HttpVersion, Live, RunOutcome, TlsTarget, Wire};

use crate::common::{all_samples, config, count, Collect};

/// A UDP peer on 127.0.0.1:0 that answers each datagram with `reply` (or not at
/// all when `None`), for at most 20 s and 10,000 datagrams.
struct Peer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// What a peer answers to one datagram, if anything.
type Answer = Box<dyn Fn(&[u8]) -> Option<Vec<u8>> + Send>;

impl Peer {
    fn start(reply: Option<Vec<u8>>) -> Peer {
        Peer::answering(Box::new(move |_| reply.clone()))
    }

    fn answering(answer: Answer) -> Peer {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let addr = sock.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut buf = [0u8; 2048];
            let mut seen = 0;
            while !flag.load(Ordering::Relaxed) && Instant::now() < deadline && seen < 10_000 {
                let Ok((got, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                seen += 1;
                if let Some(r) = answer(&buf[..got]) {
                    let _ = sock.send_to(&r, from);
                }
            }
        });
        Peer {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn h3_wire() -> Wire {
    Wire {
        tls: Some(TlsTarget {
            client: ClientTls {
                insecure: true,
                ..ClientTls::default()
            },
            server_name: "127.0.0.1".into(),
        }),
        http: HttpVersion::H3 { streams: 2 },
        ..Wire::default()
    }
}

fn go(addr: SocketAddr, n: u64, connect_timeout: Duration) -> (RunOutcome<Collect>, Duration) {
    let mut cfg = config(addr, 1, 1, n);
    cfg.connect_timeout = connect_timeout;
    cfg.stop.duration = Some(Duration::from_secs(10));
    let started = Instant::now();
    let out = run_with(&cfg, &h3_wire(), |_| Collect::default(), &Live::new()).expect("run");
    (out, started.elapsed())
}

fn all_connect_failures(out: &RunOutcome<Collect>, n: usize) {
    let samples = all_samples(&out.sinks);
    assert_eq!(samples.len(), n, "every request accounted for");
    assert_eq!(count(&samples, Some(ErrorKind::Connect)), n, "{samples:?}");
    assert!(out.h2.handshake_failures >= 1, "{:?}", out.h2);
    assert_eq!(out.h2.quic_handshakes, 0);
}

#[test]
fn nothing_on_udp_fails_the_connect_before_its_timeout() {
    // A port just released: the kernel answers with ICMP port unreachable, which
    // ends the handshake at once. (Linux rate-limits those ICMP messages per
    // destination, so later connects of a longer run may wait for the timeout: the
    // CLI probes once before the run for this reason.)
    let addr = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (out, took) = go(addr, 1, Duration::from_secs(20));
    all_connect_failures(&out, 1);
    assert!(
        took < Duration::from_secs(10),
        "took {took:?}: waited for the timeout"
    );
}

#[test]
fn junk_answers_and_silence_end_at_the_connect_timeout() {
    // Junk: a long-header packet of an unknown version and random-looking bytes.
    let mut junk = vec![0xc3, 0x0a, 0x0a, 0x0a, 0x0a];
    junk.extend((0..1200u32).map(|i| (i * 31 % 251) as u8));
    for reply in [Some(junk), None] {
        let peer = Peer::start(reply.clone());
        let (out, took) = go(peer.addr, 3, Duration::from_millis(300));
        all_connect_failures(&out, 3);
        assert!(took < Duration::from_secs(8), "{reply:?} took {took:?}");
    }
}

/// A Version Negotiation packet (RFC 9000 section 17.2.1) answering a long-header
/// `datagram`: the client's connection ids swapped, and only versions volley does
/// not speak (two reserved "greasing" ones); `None` for anything else.
fn version_negotiation(datagram: &[u8]) -> Option<Vec<u8>> {
    let (&first, rest) = datagram.split_first()?;
    if first & 0x80 == 0 || rest.len() < 5 {
        return None;
    }
    let dcid_len = usize::from(rest[4]);
    let dcid = rest.get(5..5 + dcid_len)?;
    let scid_len = usize::from(*rest.get(5 + dcid_len)?);
    let scid = rest.get(6 + dcid_len..6 + dcid_len + scid_len)?;
    let mut v = vec![0x80 | 0x2a, 0, 0, 0, 0];
    v.push(scid_len as u8);
    v.extend_from_slice(scid);
    v.push(dcid_len as u8);
    v.extend_from_slice(dcid);
    v.extend_from_slice(&[0x1a, 0x2a, 0x3a, 0x4a, 0x5a, 0x6a, 0x7a, 0x8a]);
    Some(v)
}

#[test]
fn a_peer_without_our_quic_version_fails_the_connect_at_once() {
    let peer = Peer::answering(Box::new(version_negotiation));
    let (out, took) = go(peer.addr, 2, Duration::from_secs(20));
    all_connect_failures(&out, 2);
    assert!(
        took < Duration::from_secs(10),
        "took {took:?}: waited for the connect timeout"
    );
}
