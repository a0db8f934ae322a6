//! The connection's datagrams: read from its UDP socket into quinn (up to
//! [`RECV_BATCH`] messages a call, each several datagrams where GRO coalesced them),
//! quinn driven (timers, events, new streams filled), and
//! quinn's datagrams sent (a burst a call where GSO is on); a socket that fails fails
//! its connection.

use super::*;

impl<S: Sink> H3Worker<'_, S> {
    /// Feeds quinn every datagram the socket holds.
    pub(super) fn read(&mut self, slot: usize) {
        let now = self.core.now_ns();
        let at = self.instant(now);
        // quinn keeps the rustls session out of reach, so whether this handshake
        // resumed is read from the certificate checks it caused on this thread.
        let checked = volley_tls::certificates_checked_on_this_thread();
        self.read_datagrams(slot, now, at);
        if volley_tls::certificates_checked_on_this_thread() != checked {
            self.conns[slot].verified = true;
        }
        self.drive(slot);
    }

    pub(super) fn read_datagrams(&mut self, slot: usize, now: u64, at: Instant) {
        loop {
            let c = &mut self.conns[slot];
            let (Some(sock), Some(q)) = (c.sock.as_mut(), c.quic.as_mut()) else {
                return;
            };
            let got = match sock.recv_batch(&mut self.rx) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // ECONNREFUSED: an ICMP port unreachable, nobody on UDP there.
                Err(_) => return self.socket_failed(slot),
            };
            c.lane.last_read_ns = now;
            self.stats.udp_reads += got as u64;
            let remote = sock.peer();
            for (message, stride) in self.rx.messages() {
                for datagram in message.chunks(stride) {
                    self.stats.udp_datagrams_read += 1;
                    let data = BytesMut::from(datagram);
                    self.tx.clear();
                    match q
                        .endpoint
                        .handle(at, remote, None, None, data, &mut self.tx)
                    {
                        Some(DatagramEvent::ConnectionEvent(_, ev)) => q.conn.handle_event(ev),
                        Some(DatagramEvent::Response(t)) => {
                            let _ = sock.write(&self.tx[..t.size]);
                        }
                        Some(DatagramEvent::NewConnection(incoming)) => q.endpoint.ignore(incoming),
                        None => {}
                    }
                }
            }
            if got < RECV_BATCH {
                // The socket is empty: a later datagram raises a new event.
                break;
            }
        }
    }

    /// The socket reported an error (an ICMP port unreachable, mostly): while
    /// handshaking that is a failed connect, later a reset.
    pub(super) fn socket_failed(&mut self, slot: usize) {
        let now = self.core.now_ns();
        let kind = if self.conns[slot].lane.state == State::Connecting {
            self.stats.handshake_failures += 1;
            ErrorKind::Connect
        } else {
            ErrorKind::Reset
        };
        self.fail_conn(slot, kind, now);
    }

    /// Handles what quinn has for `slot` until it has nothing more: application
    /// events, endpoint events, datagrams to send; then notes its next timer.
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
                if let Some(back) = q.endpoint.handle_event(q.handle, ev) {
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
            if self.transmit(slot) {
                return self.socket_failed(slot);
            }
            if idle || turns > 64 {
                break;
            }
        }
        let next = self.conns[slot]
            .quic
            .as_mut()
            .and_then(|q| q.conn.poll_timeout());
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

    /// Sends every datagram quinn has ready for `slot`, a burst of up to the socket's
    /// GSO segments a call; true when the socket reported an error (the connection
    /// must be failed).
    pub(super) fn transmit(&mut self, slot: usize) -> bool {
        let at = self.instant(self.core.now_ns());
        let c = &mut self.conns[slot];
        let (Some(q), Some(sock)) = (c.quic.as_mut(), c.sock.as_mut()) else {
            return false;
        };
        loop {
            self.tx.clear();
            let Some(t) = q.conn.poll_transmit(at, sock.max_segments(), &mut self.tx) else {
                break;
            };
            let segment = t.segment_size.unwrap_or(t.size).max(1);
            self.stats.udp_sends += 1;
            self.stats.udp_datagrams_sent += t.size.div_ceil(segment) as u64;
            match sock.send_segments(&self.tx[..t.size], t.segment_size) {
                Ok(()) => {}
                // A full send buffer drops the datagrams, as the path would:
                // quinn's loss recovery sends them again.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // GSO refused by the kernel or the device: quinn-udp has turned it
                // off for this socket; the burst is lost, as on the path.
                Err(e)
                    if t.segment_size.is_some()
                        && matches!(e.raw_os_error(), Some(libc::EIO) | Some(libc::EINVAL)) => {}
                // An ICMP error queued on the socket (port unreachable: nothing on
                // UDP there) is reported by whichever call comes first, this send
                // or a read: the connection is over either way.
                Err(_) => return true,
            }
        }
        false
    }
}
