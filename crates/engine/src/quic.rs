//! The transport under HTTP/3: a connected UDP socket per connection, and what a
//! worker's QUIC connections share ([`QuicConnector`]).
//!
//! Place in the flow: `worker (h3) -> quinn-proto -> **Udp** -> target`. QUIC itself
//! (handshake, packets, loss recovery, streams) is quinn-proto's, sans-IO: the HTTP/3
//! worker feeds it the datagrams [`Udp`] reads and sends the ones it produces. The
//! socket is connected, so the kernel filters other senders and reports an ICMP port
//! unreachable (no one listening on UDP) as `ECONNREFUSED` on the next read: a target
//! without HTTP/3 fails the connect at once instead of after the connect timeout.
//!
//! Datagrams go through quinn-udp (quinn's own datagram layer, no runtime), as the
//! built-in server's do: where the kernel has UDP GSO (`UDP_SEGMENT`) a burst of a
//! connection's datagrams leaves in one `sendmsg`, and where it has GRO (`UDP_GRO`)
//! one `recvmsg` takes several coalesced datagrams of one size (split again by their
//! stride). Without them it is one datagram per call; a GSO send the kernel or the
//! device refuses (EIO, EINVAL) turns GSO off for the socket and the burst counts as
//! lost (QUIC's loss recovery sends it again).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use mio::net::UdpSocket;
use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{ClientConfig, EndpointConfig};
use quinn_udp::{RecvMeta, Transmit, UdpSocketState};

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

/// Most datagrams in one GSO send, as quinn's own endpoint and the built-in server
/// do: a burst stays well under the 64 KB one send may carry.
const MAX_GSO_SEGMENTS: usize = 10;

/// A UDP socket connected to the target.
#[derive(Debug)]
pub struct Udp {
    sock: UdpSocket,
    /// quinn-udp's view of the socket: its GSO and GRO support.
    state: UdpSocketState,
    /// The target's address (asked once, not per datagram).
    peer: SocketAddr,
}

impl Udp {
    /// The target's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// How many datagrams one [`Udp::send_segments`] may carry (1 without GSO).
    pub fn max_segments(&self) -> usize {
        self.state.max_gso_segments().clamp(1, MAX_GSO_SEGMENTS)
    }

    /// Whether the kernel coalesces received datagrams for this socket (GRO).
    pub fn coalesces(&self) -> bool {
        self.state.gro_segments() > 1
    }

    /// Sends `contents`, datagrams of `segment_size` bytes each (the last may be
    /// shorter) in one call where GSO is on, or one datagram when `segment_size` is
    /// `None`. Errors are the socket's own (WouldBlock, ECONNREFUSED...), not
    /// swallowed, so a target with nothing on UDP fails the connection.
    pub fn send_segments(&self, contents: &[u8], segment_size: Option<usize>) -> io::Result<()> {
        let t = Transmit {
            destination: self.peer,
            ecn: None,
            contents,
            segment_size,
            src_ip: None,
        };
        self.state.try_send((&self.sock).into(), &t)
    }

    /// Reads what the socket holds into `buf`: `(len, stride)`, the datagrams being
    /// `stride` bytes apart (one datagram when `len <= stride`).
    pub fn recv_coalesced(&self, buf: &mut [u8]) -> io::Result<(usize, usize)> {
        let mut meta = [RecvMeta::default()];
        let mut bufs = [io::IoSliceMut::new(buf)];
        self.state.recv((&self.sock).into(), &mut bufs, &mut meta)?;
        Ok((meta[0].len, meta[0].stride.max(1)))
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
        // Turns GRO on where the kernel has it and probes GSO.
        let state = UdpSocketState::new((&sock).into())?;
        Ok(Udp {
            sock,
            state,
            peer: addr,
        })
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
