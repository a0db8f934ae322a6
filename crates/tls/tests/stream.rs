//! TlsStream over std sockets, blocking and non-blocking, against the in-process server.

use crate::common;

use std::io::{self, Read, Write};
use std::net::TcpStream;

use common::{body, serve, Fixture, IO_TIMEOUT, REQUEST};
use volley_tls::certs::{self, Authority};
use volley_tls::{TlsFailure, TlsSession, TlsStream, TlsVersion};

/// Bound on non-blocking polling rounds (each sleeps 1 ms when nothing is ready).
const MAX_POLLS: usize = 5000;

fn connect(fx: &Fixture, addr: std::net::SocketAddr) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    tcp.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    let session = TlsSession::new(fx.client().client_config().unwrap(), "localhost").unwrap();
    TlsStream::new(session, tcp)
}

#[test]
fn blocking_request_and_response() {
    let fx = Fixture::valid("stream-blocking");
    let (addr, handle) = serve(fx.server().server_config().unwrap(), 1);
    let mut stream = connect(&fx, addr);
    stream.write_all(REQUEST).unwrap();
    stream.flush().unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    assert!(handle.join().unwrap().is_empty());
    assert_eq!(body(&response), b"TLSv1_3 http/1.1");
    assert_eq!(stream.session().protocol_version(), Some(TlsVersion::Tls13));
    assert!(stream.session().peer_closed());
}

/// Retries `op` while it would block, sleeping between polls.
fn poll<T>(mut op: impl FnMut() -> io::Result<Option<T>>) -> io::Result<T> {
    for _ in 0..MAX_POLLS {
        match op() {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    panic!("no progress after {MAX_POLLS} polls");
}

#[test]
fn non_blocking_handshake_request_and_response() {
    let fx = Fixture::valid("stream-nonblocking");
    let (addr, handle) = serve(fx.server().server_config().unwrap(), 1);
    let mut stream = connect(&fx, addr);
    stream.get_mut().set_nonblocking(true).unwrap();

    poll(|| Ok(stream.handshake()?.then_some(()))).unwrap();
    assert!(stream.session().handshake_done_at().is_some());

    let mut sent = 0;
    while sent < REQUEST.len() {
        sent += poll(|| stream.write(&REQUEST[sent..]).map(Some)).unwrap();
    }
    poll(|| Ok(stream.flush_tls()?.then_some(()))).unwrap();

    let mut response = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        let n = poll(|| stream.read(&mut buf).map(Some)).unwrap();
        if n == 0 {
            break;
        }
        response.extend_from_slice(&buf[..n]);
    }
    assert!(handle.join().unwrap().is_empty());
    assert_eq!(body(&response), b"TLSv1_3 http/1.1");
}

#[test]
fn failures_come_back_inside_io_errors() {
    let ca = Authority::new().unwrap();
    let expired = ca.expired_server(&certs::LOCAL_NAMES).unwrap();
    let fx = Fixture::new("stream-expired", &ca, &expired);
    let (addr, handle) = serve(fx.server().server_config().unwrap(), 1);
    let mut stream = connect(&fx, addr);
    let err = stream.handshake().unwrap_err();
    let failure = TlsFailure::in_io(&err).expect("a TLS failure inside");
    assert_eq!(failure.name(), "cert_expired");
    // Later calls give the same failure, never a success.
    let again = stream.read(&mut [0u8; 16]).unwrap_err();
    assert_eq!(TlsFailure::in_io(&again), Some(failure));
    drop(stream);
    handle.join().unwrap();
    // A plain I/O error carries no TLS failure.
    assert_eq!(TlsFailure::in_io(&io::Error::other("x")), None);
}
