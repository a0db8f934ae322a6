//! The worker's datagrams: read from its one UDP socket (up to [`RECV_BATCH`]
//! messages a call, each several datagrams where GRO coalesced them) into its quinn
//! endpoint, which hands each to its connection; the connections reached driven
//! (timers, events, new streams filled); and what they have to send gathered and
//! sent together. A socket that fails fails every connection.

use quinn_proto::{ConnectionEvent, DatagramEvent};

use super::*;

impl<S: Sink> H3Worker<'_, S> {
    /// The worker's socket, made (connected to the target, registered in the event
    /// loop) at the first connect.
    pub(super) fn socket(&mut self) -> io::Result<&Udp> {
        if self.sock.is_none() {
            let cfg = self.core.shared.cfg;
            let from = cfg.source_ip.for_lane(None);
            let mut sock = Udp::connect(self.core.connector(), cfg.addr, from)?;
            self.core.poll.registry().register(
                sock.source(),
                SOCKET_TOKEN,
                mio::Interest::READABLE,
            )?;
            self.sock = Some(sock);
        }
        self.sock
            .as_ref()
            .ok_or_else(|| io::ErrorKind::NotConnected.into())
    }

    /// Feeds the endpoint every datagram the socket holds, then drives each
    /// connection they reached, a batch of reads at a time.
    pub(super) fn read(&mut self) {
        let now = self.core.now_ns();
        let at = self.instant(now);
        loop {
            let Some(sock) = self.sock.as_ref() else {
                return;
            };
            let got = match sock.recv_batch(&mut self.rx) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // ECONNREFUSED: an ICMP port unreachable, nobody on UDP there.
                Err(_) => return self.socket_failed(),
            };
            self.stats.udp_reads += got as u64;
            let remote = sock.peer();
            for (message, stride) in self.rx.messages() {
                for datagram in message.chunks(stride) {
                    self.stats.udp_datagrams_read += 1;
                    let data = BytesMut::from(datagram);
                    self.tx.clear();
                    match self
                        .endpoint
                        .handle(at, remote, None, None, data, &mut self.tx)
                    {
                        Some(DatagramEvent::ConnectionEvent(handle, ev)) => {
                            let slot = self.slot_of.get(handle.0).copied().flatten();
                            if let Some(slot) = slot {
                                let c = &mut self.conns[slot];
                                deliver(c, ev, now);
                                if !std::mem::replace(&mut c.touched, true) {
                                    self.touched.push(slot);
                                }
                            }
                        }
                        // A stateless reset for a connection already forgotten.
                        Some(DatagramEvent::Response(t)) => {
                            let _ = sock.send_segments(&self.tx[..t.size], None);
                        }
                        Some(DatagramEvent::NewConnection(incoming)) => {
                            self.endpoint.ignore(incoming)
                        }
                        None => {}
                    }
                }
            }
            let touched = std::mem::take(&mut self.touched);
            for &slot in &touched {
                self.conns[slot].touched = false;
                self.drive(slot);
            }
            self.touched = touched;
            self.touched.clear();
            if got < RECV_BATCH {
                // The socket is empty: a later datagram raises a new event.
                break;
            }
        }
    }

    /// The socket reported an error (an ICMP port unreachable, mostly: nothing on
    /// UDP at the target, which all connections share): each connection fails,
    /// while handshaking as a failed connect, later as a reset.
    pub(super) fn socket_failed(&mut self) {
        let now = self.core.now_ns();
        for slot in 0..self.conns.len() {
            let kind = match self.conns[slot].lane.state {
                State::Closed => continue,
                State::Connecting => {
                    self.stats.handshake_failures += 1;
                    ErrorKind::Connect
                }
                State::Ready => ErrorKind::Reset,
            };
            self.fail_conn(slot, kind, now);
        }
    }

    /// Handles what quinn has for `slot` until it has nothing more: application
    /// events, endpoint events; then notes its next timer and that it may have
    /// datagrams to send ([`Self::flush`] sends them).
    pub(super) fn drive(&mut self, slot: usize) {
        let mut turns = 0;
        loop {
            turns += 1;
            let Some(q) = self.conns[slot].quic.as_mut() else {
                return;
            };
            // The worker's event buffer, taken while its events are handled.
            let mut events = std::mem::take(&mut self.events);
            while let Some(ev) = q.conn.poll() {
                events.push(ev);
            }
            while let Some(ev) = q.conn.poll_endpoint_events() {
                q.drained |= ev.is_drained();
                if let Some(back) = self.endpoint.handle_event(q.handle, ev) {
                    q.conn.handle_event(back);
                }
            }
            let idle = events.is_empty();
            let mut gone = false;
            for ev in events.drain(..) {
                self.on_quic_event(slot, ev);
                if self.conns[slot].quic.is_none() {
                    gone = true;
                    break;
                }
            }
            // (dropping the drain emptied it, handled or not)
            self.events = events;
            if gone {
                return;
            }
            self.settle_qpack(slot);
            if idle || turns > 64 {
                break;
            }
        }
        let c = &mut self.conns[slot];
        if !std::mem::replace(&mut c.to_send, true) {
            self.to_send.push(slot);
        }
        let next = c.quic.as_mut().and_then(|q| q.conn.poll_timeout());
        self.conns[slot].timer_ns = next.map(|t| self.ns(t));
        let c = &self.conns[slot];
        if c.going_away && c.lane.streams.is_empty() && c.lane.state == State::Ready {
            // Drained after a GOAWAY: replace the connection.
            let now = self.core.now_ns();
            let pending = std::mem::take(&mut self.conns[slot].lane.pending);
            self.queue.extend(pending);
            self.close_with(slot, now, ErrorCode::NoError);
            self.core.deferred.push(slot);
        }
    }

    /// Sends what every connection driven since the last call has ready: its
    /// datagrams gathered (a burst of up to the socket's GSO segments per message),
    /// then sent together ([`Udp::send_batch`]). A socket error fails every
    /// connection.
    pub(super) fn flush(&mut self) {
        if self.to_send.is_empty() {
            return;
        }
        let at = self.instant(self.core.now_ns());
        let max_segments = self.sock.as_ref().map_or(1, Udp::max_segments);
        let mut to_send = std::mem::take(&mut self.to_send);
        self.out.clear();
        for slot in to_send.drain(..) {
            let c = &mut self.conns[slot];
            c.to_send = false;
            let Some(q) = c.quic.as_mut() else {
                continue;
            };
            loop {
                self.tx.clear();
                let Some(t) = q.conn.poll_transmit(at, max_segments, &mut self.tx) else {
                    break;
                };
                let segment = t.segment_size.unwrap_or(t.size).max(1);
                self.stats.udp_sends += 1;
                self.stats.udp_datagrams_sent += t.size.div_ceil(segment) as u64;
                self.out.push(&self.tx[..t.size], t.segment_size);
            }
        }
        self.to_send = to_send;
        let sent = match self.sock.as_ref() {
            Some(sock) if !self.out.is_empty() => sock.send_batch(&self.out),
            _ => Ok(()),
        };
        if sent.is_err() {
            // An ICMP error queued on the socket (port unreachable: nothing on UDP
            // there) is reported by whichever call comes first, this send or a read.
            self.socket_failed();
        }
    }
}

/// Hands connection `c` a datagram the endpoint routed to it. quinn keeps the
/// rustls session out of reach, so whether a handshake resumed is read from the
/// certificate checks handling its datagrams caused on this thread.
fn deliver(c: &mut Conn, ev: ConnectionEvent, now: u64) {
    let Some(q) = c.quic.as_mut() else {
        return;
    };
    c.lane.last_read_ns = now;
    if c.lane.state == State::Connecting && !c.verified {
        let checked = volley_tls::certificates_checked_on_this_thread();
        q.conn.handle_event(ev);
        c.verified = volley_tls::certificates_checked_on_this_thread() != checked;
    } else {
        q.conn.handle_event(ev);
    }
}
