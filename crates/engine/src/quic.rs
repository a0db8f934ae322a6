//! The transport under HTTP/3: one connected UDP socket per worker, shared by all of
//! its QUIC connections, and what those connections share ([`QuicConnector`]).
//!
//! Place in the flow: `worker (h3) -> quinn-proto -> **Udp** -> target`. QUIC itself
//! (handshake, packets, loss recovery, streams) is quinn-proto's, sans-IO: the HTTP/3
//! worker feeds its one `Endpoint` the datagrams [`Udp`] reads (the endpoint routes
//! each to its connection by connection ID) and sends the ones the connections
//! produce. Why one socket and not one per connection: a server that answers each
//! request in its own datagram (Caddy) then wakes the worker once for the replies of
//! every connection, and one `recvmmsg` takes them all, where a socket per
//! connection cost an `epoll` event and a read per reply; and what the connections
//! send in one turn leaves in one `sendmmsg` ([`Udp::send_batch`]). Every connection
//! of a worker goes to the same target, so the socket stays connected: the kernel
//! filters other senders and reports an ICMP port unreachable (no one listening on
//! UDP) as `ECONNREFUSED` on the next call, and a target without HTTP/3 fails the
//! connect at once instead of after the connect timeout.
//!
//! Datagrams go through quinn-udp (quinn's own datagram layer, no runtime), as the
//! built-in server's do: where the kernel has UDP GSO (`UDP_SEGMENT`) a burst of a
//! connection's datagrams leaves in one message, and where it has GRO (`UDP_GRO`)
//! one message read takes several coalesced datagrams of one size (split again by
//! their stride). Without them it is one datagram per message; a GSO send the kernel
//! or the device refuses (EIO, EINVAL) turns GSO off for the socket and the burst
//! counts as lost (QUIC's loss recovery sends it again).
//!
//! `VOLLEY_UDP_OFFLOAD=off` in the environment turns both off for every connection
//! (one datagram per message, the kernel asked not to coalesce): a switch for
//! measuring what they save (`bench/h3.py`), not a load setting, so it is no flag.
//! `VOLLEY_QPACK_TABLE=off` is the same kind of switch for QPACK: volley then
//! advertises no dynamic table (capacity 0, as before it had one), so a server's
//! responses come static-table only, for comparing what the table saves.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use mio::net::UdpSocket;
use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{ClientConfig, EndpointConfig};
use quinn_udp::{RecvMeta, Transmit, UdpSocketState};

use volley_h3::stream::LocalSettings;

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
    /// GSO and GRO where the kernel has them (false with `VOLLEY_UDP_OFFLOAD=off`).
    offload: bool,
    /// What our HTTP/3 SETTINGS say: the QPACK table capacity is
    /// [`QPACK_TABLE_BYTES`], or 0 with `VOLLEY_QPACK_TABLE=off`.
    pub(crate) local: LocalSettings,
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
            offload: switched_on(std::env::var_os(OFFLOAD_ENV).as_deref()),
            local: LocalSettings {
                qpack_max_table_capacity: if switched_on(
                    std::env::var_os(QPACK_TABLE_ENV).as_deref(),
                ) {
                    QPACK_TABLE_BYTES
                } else {
                    0
                },
                ..LocalSettings::default()
            },
        })
    }
}

/// The environment variable that turns GSO and GRO off (`off`).
pub const OFFLOAD_ENV: &str = "VOLLEY_UDP_OFFLOAD";

/// The environment variable that turns the QPACK dynamic table off (`off`).
pub const QPACK_TABLE_ENV: &str = "VOLLEY_QPACK_TABLE";

/// The QPACK dynamic table we offer a server: 4 KiB, the size HTTP/2's HPACK table
/// starts at (RFC 9113 §6.5.2), which holds a response head's repeated fields
/// (server, content-type, cache headers, cookies) many times over.
pub const QPACK_TABLE_BYTES: usize = 4096;

/// Whether an on/off switch's value (`VOLLEY_UDP_OFFLOAD`, `VOLLEY_QPACK_TABLE`)
/// leaves its feature on: anything but `off`.
fn switched_on(value: Option<&std::ffi::OsStr>) -> bool {
    value.is_none_or(|v| !v.eq_ignore_ascii_case("off"))
}

/// Most datagrams in one GSO send, as quinn's own endpoint and the built-in server
/// do: a burst stays well under the 64 KB one send may carry.
const MAX_GSO_SEGMENTS: usize = 10;

/// A worker's UDP socket, connected to the target.
#[derive(Debug)]
pub struct Udp {
    sock: UdpSocket,
    /// quinn-udp's view of the socket: its GSO and GRO support.
    state: UdpSocketState,
    /// The target's address (asked once, not per datagram).
    peer: SocketAddr,
    /// Most datagrams one send carries: quinn-udp's GSO limit, capped; 1 with
    /// offload off.
    max_segments: usize,
    /// The kernel coalesces what this socket receives (GRO).
    coalesces: bool,
}

impl Udp {
    /// The target's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// How many datagrams one [`Udp::send_segments`] may carry (1 without GSO).
    pub fn max_segments(&self) -> usize {
        self.max_segments
    }

    /// Whether the kernel coalesces received datagrams for this socket (GRO).
    pub fn coalesces(&self) -> bool {
        self.coalesces
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

    /// Sends what `batch` gathered: each run of single datagrams in one `sendmmsg`
    /// (up to [`SEND_BATCH`] a call), each GSO burst in one message through
    /// quinn-udp. A full send buffer drops what is left, as the path would (QUIC's
    /// loss recovery sends it again), as does a GSO burst the kernel refused (EIO,
    /// EINVAL: quinn-udp then turns GSO off for the socket). Other errors are the
    /// socket's own (ECONNREFUSED: nobody on UDP there), returned.
    ///
    /// quinn-udp 0.5 sends one message a call (its `sendmmsg` went with 0.4), and
    /// nix's `sendmmsg` allocates its headers per call, hence the call here.
    pub fn send_batch(&self, batch: &SendBatch) -> io::Result<()> {
        let mut i = 0;
        while i < batch.len() {
            let result = if let (contents, Some(segment)) = batch.message(i) {
                self.send_segments(contents, Some(segment)).map(|()| 1)
            } else {
                let run = (i..batch.len().min(i + SEND_BATCH))
                    .take_while(|&j| batch.message(j).1.is_none())
                    .count();
                self.send_each(batch, i, run)
            };
            match result {
                Ok(sent) => i += sent,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e)
                    if batch.message(i).1.is_some()
                        && matches!(e.raw_os_error(), Some(libc::EIO) | Some(libc::EINVAL)) =>
                {
                    i += 1
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sends the `n` (at most [`SEND_BATCH`]) single datagrams of `batch` from
    /// message `first` on in one `sendmmsg`; how many the kernel took.
    fn send_each(&self, batch: &SendBatch, first: usize, n: usize) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        let n = n.min(SEND_BATCH);
        // SAFETY: an all-zero iovec or mmsghdr is a valid value (null pointers, zero
        // lengths, no address, no control data).
        let mut iov: [libc::iovec; SEND_BATCH] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; SEND_BATCH] = unsafe { std::mem::zeroed() };
        for (k, v) in iov.iter_mut().take(n).enumerate() {
            let (datagram, _) = batch.message(first + k);
            *v = libc::iovec {
                iov_base: datagram.as_ptr().cast_mut().cast(),
                iov_len: datagram.len(),
            };
        }
        for (k, m) in msgs.iter_mut().take(n).enumerate() {
            // The socket is connected: no address per message.
            m.msg_hdr.msg_iov = iov.as_mut_ptr().wrapping_add(k);
            m.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `n` headers, each pointing at one iovec over bytes of `batch`, all
        // alive and unchanged for the call; the kernel only reads them and writes
        // each header's `msg_len`.
        let rc = unsafe {
            libc::sendmmsg(
                self.sock.as_raw_fd(),
                msgs.as_mut_ptr(),
                n as libc::c_uint,
                0,
            )
        };
        match rc {
            rc if rc < 0 => Err(io::Error::last_os_error()),
            0 => Err(io::ErrorKind::WouldBlock.into()),
            rc => Ok(rc as usize),
        }
    }

    /// Reads up to [`RECV_BATCH`] messages the socket holds into `rx` with one
    /// `recvmmsg` (each message one datagram, or several GRO coalesced); how many.
    /// Fewer than [`RECV_BATCH`] means the socket was empty: no further read is
    /// needed before the next readiness event (a datagram that arrives later raises
    /// one), which saves the call that would only fail with WouldBlock.
    pub fn recv_batch(&self, rx: &mut RecvBatch) -> io::Result<usize> {
        let mut bufs: [io::IoSliceMut; RECV_BATCH] = {
            let mut parts = rx.buf.chunks_exact_mut(RECV_MESSAGE_BYTES);
            std::array::from_fn(|_| io::IoSliceMut::new(parts.next().unwrap_or_default()))
        };
        rx.got = 0;
        rx.got = self
            .state
            .recv((&self.sock).into(), &mut bufs, &mut rx.meta)?;
        Ok(rx.got)
    }
}

/// Single datagrams one `sendmmsg` of [`Udp::send_batch`] carries at most (its
/// headers live on the stack, 5 KB).
const SEND_BATCH: usize = 64;

/// What a worker's connections have to send after one turn of its loop, gathered so
/// that it leaves in as few system calls as the kernel allows: the messages' bytes
/// back to back, and where each ends with its GSO segment size (`None`: one
/// datagram).
#[derive(Debug, Default)]
pub struct SendBatch {
    bytes: Vec<u8>,
    messages: Vec<(usize, Option<usize>)>,
}

impl SendBatch {
    /// Adds a message: one datagram, or with `segment_size` a GSO burst of datagrams
    /// of that size (the last may be shorter).
    pub fn push(&mut self, contents: &[u8], segment_size: Option<usize>) {
        self.bytes.extend_from_slice(contents);
        let burst = segment_size.filter(|&s| s < contents.len());
        self.messages.push((self.bytes.len(), burst));
    }

    /// Messages gathered.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Nothing gathered.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Forgets what was gathered (the buffers are kept).
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.messages.clear();
    }

    /// Message `i`: its bytes, and its segment size when it is a GSO burst.
    fn message(&self, i: usize) -> (&[u8], Option<usize>) {
        let start = i.checked_sub(1).map_or(0, |p| self.messages[p].0);
        let (end, segment) = self.messages[i];
        (&self.bytes[start..end], segment)
    }
}

/// Messages one [`Udp::recv_batch`] takes at most. One socket carries all of a
/// worker's connections, so a readiness event brings the replies of many (up to one
/// per stream in flight when the server answers each in its own datagram, as Caddy
/// does: 160 in bench/h3.py's 16 x 10 load); 32 a call keeps the calls few without
/// a large buffer to walk.
pub const RECV_BATCH: usize = 32;

/// Room for one message: a datagram, or a GRO bunch (the kernel coalesces up to
/// 64 KB; a smaller buffer would truncate one).
const RECV_MESSAGE_BYTES: usize = 64 * 1024;

/// A worker's buffers for [`Udp::recv_batch`], reused for every read.
pub struct RecvBatch {
    buf: Vec<u8>,
    meta: [RecvMeta; RECV_BATCH],
    got: usize,
}

impl RecvBatch {
    /// Buffers for [`RECV_BATCH`] messages (2 MB of address space, once per worker;
    /// the kernel writes only the pages a read fills).
    pub fn new() -> RecvBatch {
        RecvBatch {
            buf: vec![0; RECV_BATCH * RECV_MESSAGE_BYTES],
            meta: [RecvMeta::default(); RECV_BATCH],
            got: 0,
        }
    }

    /// The messages of the last read, each as (its bytes, the stride its datagrams
    /// are apart: one datagram when the bytes are no longer than it).
    pub fn messages(&self) -> impl Iterator<Item = (&[u8], usize)> {
        self.buf
            .chunks_exact(RECV_MESSAGE_BYTES)
            .zip(&self.meta)
            .take(self.got)
            .map(|(b, m)| (&b[..m.len.min(b.len())], m.stride.max(1)))
    }
}

impl Default for RecvBatch {
    fn default() -> Self {
        RecvBatch::new()
    }
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch").field("got", &self.got).finish()
    }
}

/// Asks the kernel not to coalesce `sock`'s datagrams (quinn-udp turned `UDP_GRO` on
/// and has no call to turn it off).
fn gro_off(sock: &UdpSocket) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    crate::conn::set_int_option(sock.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, 0)
}

impl Transport for Udp {
    type Connector = QuicConnector;

    const SCHEME: &'static str = "https";

    fn connect(c: &QuicConnector, addr: SocketAddr, from: Option<IpAddr>) -> io::Result<Self> {
        let ip = from.unwrap_or(match addr {
            SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
            SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
        });
        let sock = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        sock.connect(addr)?;
        // Turns GRO on where the kernel has it and probes GSO.
        let state = UdpSocketState::new((&sock).into())?;
        let mut coalesces = state.gro_segments() > 1;
        if coalesces && !c.offload {
            gro_off(&sock)?;
            coalesces = false;
        }
        let max_segments = if c.offload {
            state.max_gso_segments().clamp(1, MAX_GSO_SEGMENTS)
        } else {
            1
        };
        Ok(Udp {
            sock,
            state,
            peer: addr,
            max_segments,
            coalesces,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_batch_keeps_each_message_and_says_which_are_bursts() {
        let mut b = SendBatch::default();
        b.push(b"one", None);
        b.push(&[7; 250], Some(100));
        // A "burst" no longer than its segment is one datagram.
        b.push(b"three", Some(1200));
        assert_eq!(b.len(), 3);
        assert_eq!(b.message(0), (&b"one"[..], None));
        assert_eq!(b.message(1), (&[7u8; 250][..], Some(100)));
        assert_eq!(b.message(2), (&b"three"[..], None));
        b.clear();
        assert!(b.is_empty());
        b.push(b"again", None);
        assert_eq!(b.message(0), (&b"again"[..], None));
    }

    #[test]
    fn only_off_turns_offload_off() {
        use std::ffi::OsStr;
        assert!(switched_on(None));
        assert!(switched_on(Some(OsStr::new("on"))));
        assert!(switched_on(Some(OsStr::new(""))));
        assert!(!switched_on(Some(OsStr::new("off"))));
        assert!(!switched_on(Some(OsStr::new("OFF"))));
    }
}
