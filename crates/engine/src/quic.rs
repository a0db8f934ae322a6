//! The transport under HTTP/3: a connected UDP socket per connection, and what a
//! worker's QUIC connections share ([`QuicConnector`]).
//!
//! Place in the flow: `worker (h3) -> quinn-proto -> **Udp** -> target`. QUIC itself
//! (handshake, packets, loss recovery, streams) is quinn-proto's, sans-IO: the HTTP/3
//! worker feeds it the datagrams [`Udp`] reads and sends the ones it produces. The
//! socket is connected, so the kernel filters other senders and reports an ICMP port
//! unreachable (no one listening on UDP) as `ECONNREFUSED` on the next read: a target
//! without HTTP/3 fails the connect at once instead of after the connect timeout.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use mio::net::UdpSocket;
use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{ClientConfig, EndpointConfig};

use crate::conn::Transport;
use crate::tls::TlsConnector;

/// What one worker's QUIC connections share: the QUIC client config over the
/// worker's rustls config (and so its session cache: later connections resume the
/// first one's TLS session), and the endpoint config.
#[derive(Clone)]
pub struct QuicConnector {
    pub(crate) client: ClientConfig,
    pub(crate) endpoint: Arc<EndpointConfig>,
    pub(crate) tls: TlsConnector,
}

impl std::fmt::Debug for QuicConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicConnector")
            .field("server_name", &self.tls.server_name())
            .finish_non_exhaustive()
    }
}

impl QuicConnector {
    /// The connector over a worker's TLS connector, whose rustls config must offer
    /// TLS 1.3 (QUIC has no other) and ALPN `h3`.
    pub(crate) fn new(tls: TlsConnector) -> io::Result<QuicConnector> {
        let crypto = QuicClientConfig::try_from(tls.rustls_config()).map_err(io::Error::other)?;
        Ok(QuicConnector {
            client: ClientConfig::new(Arc::new(crypto)),
            endpoint: Arc::new(EndpointConfig::default()),
            tls,
        })
    }
}

/// A UDP socket connected to the target.
#[derive(Debug)]
pub struct Udp {
    sock: UdpSocket,
}

impl Udp {
    /// The target's address.
    pub fn peer(&self) -> io::Result<SocketAddr> {
        self.sock.peer_addr()
    }
}

impl Transport for Udp {
    type Connector = QuicConnector;

    const SCHEME: &'static str = "https";

    fn connect(_: &QuicConnector, addr: SocketAddr, from: Option<IpAddr>) -> io::Result<Self> {
        let ip = from.unwrap_or(match addr {
            SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
            SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
        });
        let sock = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        sock.connect(addr)?;
        Ok(Udp { sock })
    }

    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.sock
    }

    /// UDP has no connect of its own: the QUIC handshake is the worker's to time.
    fn finish_connect(&mut self) -> io::Result<bool> {
        Ok(true)
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.recv(buf)
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sock.send(buf)
    }
}
