//! The transport under a connection: connect, read, write, close.
//!
//! wrk swaps a small table of socket functions for TLS; [`Transport`] is the same idea
//! as a trait, so a rustls transport (and later HTTP/2 framing over it) can slot in
//! without touching the worker's event loop. Plain non-blocking TCP is the only
//! implementation today.

use std::io::{self, Read, Write};
use std::net::SocketAddr;

use mio::net::TcpStream;

/// A non-blocking byte stream the worker's event loop drives. Every call returns at
/// once: `WouldBlock` means "wait for the next readiness event".
pub trait Transport: Sized {
    /// Starts connecting to `addr`; completion is signalled by writability.
    fn connect(addr: SocketAddr) -> io::Result<Self>;

    /// The registration handle for the event loop.
    fn source(&mut self) -> &mut dyn mio::event::Source;

    /// After a writable event on a connecting transport: `Ok(true)` once connected,
    /// `Ok(false)` while still in progress, `Err` when the connect failed.
    fn finish_connect(&mut self) -> io::Result<bool>;

    /// Reads into `buf`; `Ok(0)` is end of stream.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize>;

    /// Writes from `buf`, returning how much was taken.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize>;
}

/// Plain TCP with Nagle off (a request is one small write that must leave now).
#[derive(Debug)]
pub struct Tcp {
    stream: TcpStream,
}

impl Transport for Tcp {
    fn connect(addr: SocketAddr) -> io::Result<Self> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(Tcp { stream })
    }

    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.stream
    }

    fn finish_connect(&mut self) -> io::Result<bool> {
        // mio's recipe: a pending socket error means failure; otherwise peer_addr
        // succeeds once connected and reports NotConnected while still in progress.
        if let Some(e) = self.stream.take_error()? {
            return Err(e);
        }
        match self.stream.peer_addr() {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.read(buf)
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }
}
