//! `--io uring`: the plain-TCP HTTP/1.1 worker's sockets driven through io_uring
//! instead of epoll and a `read`/`write` per request.
//!
//! Place in the flow: `run -> worker (shared loop + http1) -> **uring** -> TCP`. The
//! HTTP/1.1 worker stays the same state machine; only its transport ([`UringTcp`]) and
//! the loop's wait ([`Ring::wait`]) change. Per loop turn there is one
//! `io_uring_enter`: it submits every send queued since the last turn (and re-armed
//! receives, connects, cancels) and waits for completions, so a batch of N responses
//! costs one system call instead of epoll's one wait plus N reads and N writes.
//!
//! - Receive: one multishot `RECV` per connection, armed once when it connects, into
//!   buffers the worker provides through a registered buffer ring (kernel 5.19+). Each
//!   completion's bytes are copied into the slot's inbox and the buffer goes straight
//!   back to the ring, so a few buffers serve every connection; the transport's `read`
//!   then takes bytes from the inbox as it took them from the socket.
//! - Send: a request's bytes are copied into a pooled buffer the ring owns until the
//!   send completes (`MSG_WAITALL`: a stream send returns whole or failed), so the
//!   worker sees its write taken at once; a failed send shows as the connection's
//!   error on its next read.
//! - Connect: `connect(2)` as before, its completion seen by a one-shot `POLL_ADD`.
//! - Close: an async cancel of the connection's operations (a pending multishot
//!   receive holds the socket open even after its fd is closed).
//!
//! Setup flags: `SINGLE_ISSUER | DEFER_TASKRUN` (6.1+): completions are processed only
//! when the worker enters, in its own context, never by interrupting it; `TASKRUN_FLAG`
//! marks in the shared ring when there are some, so the loop's poll before sleeping
//! (the policy of [`crate::busy_wait`], as on epoll) peeks without a system call. The ring is
//! made before the worker's thread starts (so a refusal is known before the run and the
//! whole run falls back to epoll), disabled, and enabled by the worker on its first wait
//! so the worker's thread is its one submitter.
//!
//! Why `io-uring` (tokio-rs, crates.io): it is the maintained low-level binding (no
//! runtime, like mio); the buffer ring's memory and tail are the part it leaves to its
//! user, written here.

use std::alloc::{self, Layout};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use io_uring::types::{BufRingEntry, CancelBuilder, Fd, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring};

/// The buffer group of the receive buffers (one per ring).
const BGID: u16 = 0;
/// Size of one receive buffer: a typical small response in one completion; larger ones
/// take several, as they took several reads.
const RECV_BUF_BYTES: usize = 4096;
/// An operation, in the top byte of a completion's `user_data`; a completion tells
/// which one it answers only by that tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Connect = 1,
    Recv = 2,
    Send = 3,
    Cancel = 4,
}

impl Op {
    /// The operation a tag's top byte names (`None`: not a tag of ours).
    fn from_tag(byte: u64) -> Option<Op> {
        [Op::Connect, Op::Recv, Op::Send, Op::Cancel]
            .into_iter()
            .find(|op| *op as u64 == byte)
    }
}
/// Test seam: when this variable is set (to anything), [`Ring::new`] fails with
/// `EPERM`, as `io_uring_setup` does where `kernel.io_uring_disabled` is 2 or a
/// container's seccomp profile refuses it, so the fallback to epoll can be tested on a
/// machine that allows io_uring.
pub const REFUSE_ENV: &str = "VOLLEY_TEST_REFUSE_IO_URING";

/// `user_data` of one operation: op (8 bits), send-buffer index (16), generation (16),
/// slot (24).
fn tag(op: Op, buf: u16, generation: u16, slot: usize) -> u64 {
    ((op as u64) << 56)
        | (u64::from(buf) << 40)
        | (u64::from(generation) << 24)
        | (slot as u64 & 0xff_ffff)
}

fn untag(t: u64) -> (Option<Op>, u16, u16, usize) {
    (
        Op::from_tag(t >> 56),
        (t >> 40) as u16,
        (t >> 24) as u16,
        (t & 0xff_ffff) as usize,
    )
}

/// What the ring knows of one connection slot.
#[derive(Default)]
struct SlotIo {
    /// Generation of the connection now on this slot (completions of an older one are
    /// stale); 0 means none.
    generation: u16,
    fd: RawFd,
    /// The connect's completion: `None` while pending, else `POLL_ADD`'s result.
    connected: Option<i32>,
    /// Received bytes not yet read, from `inbox_at`.
    inbox: Vec<u8>,
    inbox_at: usize,
    eof: bool,
    /// The first error a receive or send completed with (a negated errno).
    error: Option<i32>,
}

/// The registered buffer ring of receive buffers: `entries` descriptors in
/// page-aligned memory the kernel reads, and the buffers themselves.
struct BufRing {
    base: *mut BufRingEntry,
    layout: Layout,
    entries: u16,
    tail: u16,
    bufs: Vec<u8>,
}

impl BufRing {
    fn new(entries: u16) -> io::Result<Self> {
        let layout = Layout::from_size_align(
            usize::from(entries) * std::mem::size_of::<BufRingEntry>(),
            4096,
        )
        .map_err(io::Error::other)?;
        // SAFETY: a non-zero size (entries >= 1); zeroed, so the tail starts at 0.
        let base = unsafe { alloc::alloc_zeroed(layout) }.cast::<BufRingEntry>();
        if base.is_null() {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        }
        let mut ring = BufRing {
            base,
            layout,
            entries,
            tail: 0,
            bufs: vec![0; usize::from(entries) * RECV_BUF_BYTES],
        };
        for bid in 0..entries {
            ring.push(bid);
        }
        ring.publish();
        Ok(ring)
    }

    /// Puts buffer `bid` at the tail (not yet visible to the kernel: [`Self::publish`]).
    fn push(&mut self, bid: u16) {
        let i = usize::from(self.tail & (self.entries - 1));
        let addr = self.bufs[usize::from(bid) * RECV_BUF_BYTES..].as_ptr() as u64;
        // SAFETY: i < entries, inside the allocation; the kernel reads only entries
        // before the published tail, and this one is past it.
        let e = unsafe { &mut *self.base.add(i) };
        e.set_addr(addr);
        e.set_len(RECV_BUF_BYTES as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes the pushed buffers visible to the kernel (a release store of the tail).
    fn publish(&self) {
        // SAFETY: `base` is the ring's first entry, page-aligned; the tail field is a
        // u16 the kernel reads atomically.
        let tail = unsafe { &*BufRingEntry::tail(self.base).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        let at = usize::from(bid) * RECV_BUF_BYTES;
        &self.bufs[at..at + len.min(RECV_BUF_BYTES)]
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { alloc::dealloc(self.base.cast(), self.layout) };
    }
}

struct Inner {
    uring: IoUring,
    bufs: BufRing,
    slots: Vec<SlotIo>,
    /// Send buffers: owned here from the send's submission to its completion.
    sends: Vec<Vec<u8>>,
    free_sends: Vec<u16>,
    enabled: bool,
    /// Receive buffers returned since the tail was last published.
    returned: bool,
}

// SAFETY: the raw pointer is the buffer ring's memory, owned by `Inner` alone and only
// touched under the `Ring`'s mutex.
unsafe impl Send for Inner {}

/// One worker's io_uring: its submission and completion queues, receive buffers, and
/// what it knows of each connection slot. Shared by the worker's loop and its
/// transports (one thread: the mutex is never contended, it only makes the sharing
/// safe).
pub(crate) struct Ring {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ring")
    }
}

impl Ring {
    /// A ring for a worker of `slots` connection slots, disabled until its first wait.
    /// Fails as the kernel refuses io_uring (`EPERM` where `kernel.io_uring_disabled`
    /// forbids it, `ENOSYS` under a seccomp filter or on a kernel without it, `EINVAL`
    /// on one older than 6.1): the run then falls back to epoll.
    pub fn new(slots: usize) -> io::Result<Self> {
        if std::env::var_os(REFUSE_ENV).is_some() {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        let sq = (slots * 2).next_power_of_two().clamp(64, 4096) as u32;
        let uring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_taskrun_flag()
            .setup_r_disabled()
            .setup_cqsize(sq * 4)
            .build(sq)?;
        // Two buffers a connection (a response and the next one's start, or a FIN),
        // 64-4096 of them: 4096 x 4 KB = 16 MB is the most a worker holds.
        let entries = (slots * 2).next_power_of_two().clamp(64, 4096) as u16;
        let bufs = BufRing::new(entries)?;
        // SAFETY: the descriptors stay valid until the ring is dropped (`Inner`
        // unregisters them first in its Drop).
        unsafe {
            uring
                .submitter()
                .register_buf_ring_with_flags(bufs.base as u64, entries, BGID, 0)?
        };
        Ok(Ring {
            inner: Mutex::new(Inner {
                uring,
                bufs,
                slots: (0..slots).map(|_| SlotIo::default()).collect(),
                sends: Vec::new(),
                free_sends: Vec::new(),
                enabled: false,
                returned: false,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere in the worker ends the run; the ring's state is still whole.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Submits what was queued and waits up to `timeout` for completions; appends each
    /// slot that has something to `ready` as (slot, readable, writable).
    ///
    /// A zero `timeout` peeks: the kernel enters only when something is queued to
    /// submit or the ring's `TASKRUN` flag says completions wait for this thread to run
    /// them, so polling for a reply ([`crate::busy_wait`]) costs no system call while
    /// nothing has arrived, and a reply that arrives meanwhile wakes nobody (with
    /// `DEFER_TASKRUN` the kernel wakes the thread only when it sleeps in the ring).
    pub fn wait(&self, timeout: Duration, ready: &mut Vec<(usize, bool, bool)>) -> io::Result<()> {
        let mut g = self.lock();
        let inner = &mut *g;
        inner.enable()?;
        let entered = if timeout.is_zero() {
            let sq = inner.uring.submission();
            let enter = !sq.is_empty() || sq.taskrun() || sq.cq_overflow();
            drop(sq);
            // With the flag set, `submit` enters with GETEVENTS and no wait: the
            // deferred completions are run and posted.
            if enter {
                inner.uring.submit().map(drop)
            } else {
                Ok(())
            }
        } else {
            let ts = Timespec::from(timeout);
            inner
                .uring
                .submitter()
                .submit_with_args(1, &SubmitArgs::new().timespec(&ts))
                .map(drop)
        };
        match entered {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) => {}
            Err(e) => return Err(e),
        }
        inner.drain(ready);
        Ok(())
    }

    /// A connection on `slot` (its socket `fd`, connecting): its new generation, with a
    /// poll for the connect's end queued.
    pub fn arm_connect(&self, slot: usize, fd: RawFd) -> io::Result<u16> {
        let mut g = self.lock();
        let s = g.slot(slot)?;
        s.generation = s.generation.wrapping_add(1).max(1);
        let generation = s.generation;
        let mut inbox = std::mem::take(&mut s.inbox);
        inbox.clear();
        *s = SlotIo {
            generation,
            fd,
            inbox,
            ..SlotIo::default()
        };
        let poll = opcode::PollAdd::new(Fd(fd), libc::POLLOUT as u32)
            .build()
            .user_data(tag(Op::Connect, 0, generation, slot));
        g.push(&poll)?;
        Ok(generation)
    }

    /// Whether the connect of `slot` has completed: `None` while pending, else the
    /// poll's result (revents, or a negated errno).
    pub fn connected(&self, slot: usize, generation: u16) -> Option<i32> {
        let mut g = self.lock();
        g.live(slot, generation).and_then(|s| s.connected)
    }

    /// Arms the multishot receive of a connected slot.
    pub fn arm_recv(&self, slot: usize, generation: u16) -> io::Result<()> {
        let mut g = self.lock();
        g.arm_recv(slot, generation)
    }

    /// Queues a send of `bytes` (copied); its failure shows on the slot's next read.
    pub fn send(&self, slot: usize, generation: u16, bytes: &[u8]) -> io::Result<usize> {
        let mut g = self.lock();
        let fd = match g.live(slot, generation) {
            Some(s) => s.fd,
            None => return Err(io::Error::from(io::ErrorKind::NotConnected)),
        };
        let i = match g.free_sends.pop() {
            Some(i) => i,
            None => {
                let i = u16::try_from(g.sends.len())
                    .map_err(|_| io::Error::from(io::ErrorKind::WouldBlock))?;
                g.sends.push(Vec::new());
                i
            }
        };
        let buf = &mut g.sends[usize::from(i)];
        buf.clear();
        buf.extend_from_slice(bytes);
        let len = u32::try_from(buf.len()).map_err(io::Error::other)?;
        let send = opcode::Send::new(Fd(fd), buf.as_ptr(), len)
            .flags(libc::MSG_WAITALL | libc::MSG_NOSIGNAL)
            .build()
            .user_data(tag(Op::Send, i, generation, slot));
        g.push(&send)?;
        Ok(bytes.len())
    }

    /// Takes received bytes of `slot` into `buf`: `WouldBlock` when none are waiting,
    /// `Ok(0)` at end of stream, the error a receive or send met.
    pub fn read(&self, slot: usize, generation: u16, buf: &mut [u8]) -> io::Result<usize> {
        let mut g = self.lock();
        let Some(s) = g.live(slot, generation) else {
            return Err(io::Error::from(io::ErrorKind::NotConnected));
        };
        let waiting = s.inbox.len() - s.inbox_at;
        if waiting > 0 {
            let n = waiting.min(buf.len());
            buf[..n].copy_from_slice(&s.inbox[s.inbox_at..s.inbox_at + n]);
            s.inbox_at += n;
            if s.inbox_at == s.inbox.len() {
                s.inbox.clear();
                s.inbox_at = 0;
            }
            return Ok(n);
        }
        match (s.error, s.eof) {
            (Some(e), _) => Err(io::Error::from_raw_os_error(-e)),
            (None, true) => Ok(0),
            (None, false) => Err(io::Error::from(io::ErrorKind::WouldBlock)),
        }
    }

    /// The connection on `slot` closes: its operations are cancelled (the fd is closed
    /// by the caller right after; the cancel goes in before any operation of a socket
    /// that reuses the fd number, since the queue is submitted in order).
    pub fn close(&self, slot: usize, generation: u16) {
        let mut g = self.lock();
        let Some(s) = g.live(slot, generation) else {
            return;
        };
        let fd = s.fd;
        let inbox = std::mem::take(&mut s.inbox);
        *s = SlotIo {
            generation,
            fd: -1,
            inbox,
            ..SlotIo::default()
        };
        s.inbox.clear();
        s.generation = generation.wrapping_add(1).max(1);
        let cancel = opcode::AsyncCancel2::new(CancelBuilder::fd(Fd(fd)).all())
            .build()
            .user_data(tag(Op::Cancel, 0, 0, 0));
        // A full queue even after submitting leaves the operations to the ring's end.
        let _ = g.push(&cancel);
    }
}

impl Inner {
    /// Enables the ring on its first use, from the worker's thread: with
    /// `SINGLE_ISSUER` that thread becomes its one submitter.
    fn enable(&mut self) -> io::Result<()> {
        if !self.enabled {
            self.uring.submitter().register_enable_rings()?;
            self.enabled = true;
        }
        Ok(())
    }

    fn slot(&mut self, slot: usize) -> io::Result<&mut SlotIo> {
        self.slots
            .get_mut(slot)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))
    }

    /// The slot's state when `generation` is the connection now on it.
    fn live(&mut self, slot: usize, generation: u16) -> Option<&mut SlotIo> {
        self.slots
            .get_mut(slot)
            .filter(|s| s.generation == generation && s.fd >= 0)
    }

    /// Queues `e`; a full submission queue is submitted first (no wait).
    fn push(&mut self, e: &squeue::Entry) -> io::Result<()> {
        for _ in 0..2 {
            // SAFETY: every buffer an entry points at (send buffers, the buffer ring)
            // is owned by `Inner` and outlives the operation: send buffers return to
            // the pool only on their completion, and Drop cancels all before freeing.
            if unsafe { self.uring.submission().push(e) }.is_ok() {
                return Ok(());
            }
            self.enable()?;
            self.uring.submit()?;
        }
        Err(io::Error::from(io::ErrorKind::WouldBlock))
    }

    fn arm_recv(&mut self, slot: usize, generation: u16) -> io::Result<()> {
        let Some(s) = self.live(slot, generation) else {
            return Ok(());
        };
        let recv = opcode::RecvMulti::new(Fd(s.fd), BGID)
            .build()
            .user_data(tag(Op::Recv, 0, generation, slot));
        self.push(&recv)
    }

    /// Takes every completion: bytes into inboxes, buffers back to the ring, sends'
    /// buffers back to the pool, and the slots that changed into `ready`.
    fn drain(&mut self, ready: &mut Vec<(usize, bool, bool)>) {
        loop {
            let Some(cqe) = self.uring.completion().next() else {
                break;
            };
            let (op, buf, generation, slot) = untag(cqe.user_data());
            let res = cqe.result();
            let flags = cqe.flags();
            match op {
                Some(Op::Send) => {
                    self.free_sends.push(buf);
                    if let Some(s) = self.live(slot, generation) {
                        if res < 0 && s.error.is_none() {
                            s.error = Some(res);
                            ready.push((slot, true, false));
                        }
                    }
                }
                Some(Op::Connect) => {
                    if let Some(s) = self.live(slot, generation) {
                        s.connected = Some(res);
                        ready.push((slot, false, true));
                    }
                }
                Some(Op::Recv) => self.received(slot, generation, res, flags, ready),
                // A cancel's own completion carries nothing the worker waits for.
                Some(Op::Cancel) | None => {}
            }
        }
        if std::mem::take(&mut self.returned) {
            self.bufs.publish();
        }
    }

    fn received(
        &mut self,
        slot: usize,
        generation: u16,
        res: i32,
        flags: u32,
        ready: &mut Vec<(usize, bool, bool)>,
    ) {
        let bid = cqueue::buffer_select(flags);
        let Inner { slots, bufs, .. } = self;
        let live = slots
            .get_mut(slot)
            .filter(|s| s.generation == generation && s.fd >= 0);
        if let Some(s) = live {
            match (res, bid) {
                (n, Some(b)) if n > 0 => s.inbox.extend_from_slice(bufs.bytes(b, n as usize)),
                (0, _) => s.eof = true,
                (e, _) if e < 0 && e != -libc::ENOBUFS => {
                    s.error.get_or_insert(e);
                }
                _ => {}
            }
            ready.push((slot, true, false));
        }
        if let Some(b) = bid {
            self.bufs.push(b);
            self.returned = true;
        }
        // A multishot receive ends after an error or EOF, and when the buffers ran
        // out (ENOBUFS): re-armed in the last case and whenever it ended with data.
        if !cqueue::more(flags) && (res > 0 || res == -libc::ENOBUFS) {
            if res == -libc::ENOBUFS && self.returned {
                self.bufs.publish();
                self.returned = false;
            }
            let _ = self.arm_recv(slot, generation);
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Nothing may still point at the send buffers or the buffer ring when they are
        // freed: cancel every operation and wait for it, then unregister the buffers.
        if self.enabled {
            let _ = self
                .uring
                .submitter()
                .register_sync_cancel(None, CancelBuilder::any());
        }
        let _ = self.uring.submitter().unregister_buf_ring(BGID);
    }
}

/// Plain TCP through a worker's [`Ring`]: connects as [`crate::conn::Tcp`] does, reads
/// and writes through the ring.
#[derive(Debug)]
pub(crate) struct UringTcp {
    stream: mio::net::TcpStream,
    ring: Arc<Ring>,
    slot: usize,
    /// 0 until registered on the ring.
    generation: u16,
}

impl crate::conn::Transport for UringTcp {
    type Connector = Arc<Ring>;

    fn connect(
        ring: &Arc<Ring>,
        addr: std::net::SocketAddr,
        from: Option<std::net::IpAddr>,
    ) -> io::Result<Self> {
        let stream = crate::conn::tcp_connect(addr, from)?;
        stream.set_nodelay(true)?;
        Ok(UringTcp {
            stream,
            ring: Arc::clone(ring),
            slot: 0,
            generation: 0,
        })
    }

    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.stream
    }

    /// Not in epoll: the ring watches the connect instead.
    fn register(&mut self, _: &mio::Registry, token: mio::Token) -> io::Result<()> {
        self.slot = token.0;
        self.generation = self.ring.arm_connect(token.0, self.stream.as_raw_fd())?;
        Ok(())
    }

    /// Connected once the ring's poll saw it and `SO_ERROR` is clear; then the
    /// multishot receive is armed.
    fn finish_connect(&mut self) -> io::Result<bool> {
        match self.ring.connected(self.slot, self.generation) {
            None => Ok(false),
            Some(e) if e < 0 => Err(io::Error::from_raw_os_error(-e)),
            Some(_) => match self.stream.take_error()? {
                Some(e) => Err(e),
                None => {
                    self.ring.arm_recv(self.slot, self.generation)?;
                    Ok(true)
                }
            },
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.ring.read(self.slot, self.generation, buf)
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.ring.send(self.slot, self.generation, buf)
    }
}

impl Drop for UringTcp {
    fn drop(&mut self) {
        if self.generation != 0 {
            self.ring.close(self.slot, self.generation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{tag, untag, Op};

    #[test]
    fn a_tag_gives_back_what_it_holds() {
        for op in [Op::Connect, Op::Recv, Op::Send, Op::Cancel] {
            let t = tag(op, 513, 65535, 0xab_cdef);
            assert_eq!(untag(t), (Some(op), 513, 65535, 0xab_cdef));
        }
        assert_eq!(untag(0).0, None, "not a tag of ours");
    }
}
