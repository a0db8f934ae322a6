//! The transport under a connection: connect, read, write, close.
//!
//! wrk swaps a small table of socket functions for TLS; [`Transport`] is the same idea
//! as a trait, so a rustls transport slots in without touching a worker's event loop:
//! both workers (HTTP/1.1 and HTTP/2) are generic over it, monomorphised once per
//! transport. Plain non-blocking TCP is here; TLS over it is
//! [`crate::tls::TlsTransport`].

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};

use mio::net::TcpStream;

use crate::ErrorKind;

/// A non-blocking byte stream the worker's event loop drives. Every call returns at
/// once: `WouldBlock` means "wait for the next readiness event".
pub trait Transport: Sized {
    /// What all connections of one worker share, built once per worker: nothing for
    /// TCP, the TLS client config (whose session cache lets later connections resume)
    /// for TLS.
    type Connector: Send;

    /// The URL scheme of HTTP over this transport (HTTP/2's `:scheme`).
    const SCHEME: &'static str = "http";

    /// Starts connecting to `addr`, from source address `from` when given (else the
    /// kernel's choice); completion is signalled by writability.
    fn connect(
        connector: &Self::Connector,
        addr: SocketAddr,
        from: Option<IpAddr>,
    ) -> io::Result<Self>;

    /// The registration handle for the event loop.
    fn source(&mut self) -> &mut dyn mio::event::Source;

    /// Registers the new connection as `token` for read and write readiness
    /// (edge-triggered, once for its life); a transport that is not driven by epoll
    /// (io_uring) arms its own watch instead.
    fn register(&mut self, registry: &mio::Registry, token: mio::Token) -> io::Result<()> {
        registry.register(
            self.source(),
            token,
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        )
    }

    /// After a writable event on a connecting transport: `Ok(true)` once connected,
    /// `Ok(false)` while still in progress, `Err` when the connect failed.
    fn finish_connect(&mut self) -> io::Result<bool>;

    /// Reads into `buf`; `Ok(0)` is end of stream.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize>;

    /// Writes from `buf`, returning how much was taken.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize>;

    /// Pushes out what the transport still buffers after a `write` that would block
    /// (TLS records); plain TCP buffers nothing.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// After `finish_connect` returned `Ok(true)`: the part of the connect spent in a
    /// TLS handshake, in ns (0 without TLS).
    fn handshake_ns(&self) -> u64 {
        0
    }

    /// The error kind of a failed connect, read or write: `default` (Connect or
    /// Reset) unless the transport knows better (a TLS failure is `Tls`).
    fn error_kind(_err: &io::Error, default: ErrorKind) -> ErrorKind {
        default
    }

    /// An idle connection became readable: whether it is still usable. Plain TCP has
    /// nothing legitimate to read when idle (it is a close or stray bytes); TLS 1.3
    /// servers send session tickets after the handshake, which are no reason to close.
    fn idle_readable(&mut self) -> bool {
        false
    }

    /// The socket to watch under `--io poll` ([`crate::IoPath::Poll`]); `None` for a
    /// transport that path does not drive.
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
}

/// Plain TCP with Nagle off (a request is one small write that must leave now).
#[derive(Debug)]
pub struct Tcp {
    stream: TcpStream,
}

impl Transport for Tcp {
    type Connector = ();

    fn connect(_: &(), addr: SocketAddr, from: Option<IpAddr>) -> io::Result<Self> {
        let stream = tcp_connect(addr, from)?;
        stream.set_nodelay(true)?;
        Ok(Tcp { stream })
    }

    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.stream
    }

    /// One `getsockopt(SO_ERROR)` per connect instead of [`tcp_connected`]'s two calls
    /// (one syscall less per request without keep-alive). The worker asks only after a
    /// readiness event, and Linux reports none for a socket still in SYN_SENT except an
    /// error, which `SO_ERROR` carries; were a spurious event ever seen, the request's
    /// `write` would meet `EAGAIN` (a non-blocking send waits for the handshake) and
    /// the worker would wait for writability, so nothing is lost.
    fn finish_connect(&mut self) -> io::Result<bool> {
        match self.stream.take_error()? {
            Some(e) => Err(e),
            None => Ok(true),
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.read(buf)
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }

    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(&self.stream))
    }
}

/// Sets the `int` socket option `level`/`name` of `fd` to `value` (options socket2
/// has no call for).
pub(crate) fn set_int_option(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the caller's descriptor and a c_int option of its stated size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            std::ptr::addr_of!(value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Starts a non-blocking TCP connect to `addr`, from source address `from` when given:
/// a client may pick its address, as injectors on one host do so that the server's log
/// tells them apart (127.0.0.2, 127.0.0.3, ... all reach a loopback target).
///
/// The bound socket asks for `IP_BIND_ADDRESS_NO_PORT` (Linux 4.2+): the local port is
/// then chosen at connect time by the whole 4-tuple, not reserved at bind, so a source
/// address offers as many connections as the kernel's own choice would.
pub(crate) fn tcp_connect(addr: SocketAddr, from: Option<IpAddr>) -> io::Result<TcpStream> {
    use socket2::{Domain, Protocol, SockAddr, Socket, Type};
    use std::os::fd::AsRawFd;
    let Some(ip) = from else {
        return TcpStream::connect(addr);
    };
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_nonblocking(true)?;
    if ip.is_ipv4() {
        // Best effort: an older kernel reserves the port at bind instead, which still
        // works.
        let _ = set_int_option(
            sock.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            1,
        );
    }
    sock.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
    match sock.connect(&SockAddr::from(addr)) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(TcpStream::from_std(sock.into()))
}

/// Whether a non-blocking connect finished: `Ok(true)` connected, `Ok(false)` still in
/// progress. mio's recipe: a pending socket error means failure; otherwise `peer_addr`
/// succeeds once connected and reports NotConnected while still in progress.
pub(crate) fn tcp_connected(stream: &TcpStream) -> io::Result<bool> {
    if let Some(e) = stream.take_error()? {
        return Err(e);
    }
    match stream.peer_addr() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(false),
        Err(e) => Err(e),
    }
}
