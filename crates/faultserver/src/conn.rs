//! One connection's life: read requests, apply the policies, write the answers, and end
//! with a close or an RST.

use std::io::{self, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::behaviour::{build_reply, After, Answer, ConnHeader, Script};
use crate::http::{self, ReadError, RequestHead};
use crate::{lock, Shared};

/// How a connection ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Orderly close (FIN).
    Close,
    /// Abortive close (RST): SO_LINGER with a zero timeout, then close.
    Reset,
}

/// Thread body for one accepted connection.
pub(crate) fn run(shared: Arc<Shared>, id: u64, stream: TcpStream) {
    let end = serve(&shared, &stream);
    // Drop the registry's clone first: the socket closes only when its last descriptor
    // does, and the linger option must apply to that final close.
    lock(&shared.live).remove(&id);
    if end == End::Reset {
        set_linger_zero(&stream);
    }
    drop(stream);
}

/// SO_LINGER {on, 0}: close() then discards unsent data and sends RST instead of FIN.
/// std has no stable setter, hence libc.
fn set_linger_zero(stream: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the fd is open for the lifetime of `stream`, and the option value is a
    // properly sized, initialised `linger` struct.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

fn serve(shared: &Shared, stream: &TcpStream) -> End {
    let script = &shared.script;
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(shared.limits.idle_timeout));
    let _ = stream.set_write_timeout(Some(shared.limits.idle_timeout));
    let mut reader = BufReader::new(stream);
    let mut writer = stream;
    let mut served_here: u64 = 0;
    loop {
        if shared.stopped() {
            return End::Close;
        }
        let head = match http::read_head(&mut reader) {
            Ok(Some(head)) => head,
            Ok(None) | Err(ReadError::Io) => return End::Close,
            Err(ReadError::Bad(code)) => {
                let _ = writer.write_all(&http::error_response(code));
                return End::Close;
            }
        };
        if head.expect_continue && writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_err() {
            return End::Close;
        }
        match http::read_body(&mut reader, head.body) {
            Ok(()) => {}
            Err(ReadError::Io) => return End::Close,
            Err(ReadError::Bad(code)) => {
                let _ = writer.write_all(&http::error_response(code));
                return End::Close;
            }
        }
        let total = shared.requests.fetch_add(1, Ordering::SeqCst) + 1;
        served_here += 1;

        if let Some(limit) = script.dies_after {
            if total > limit {
                shared.stop();
                return End::Close;
            }
        }
        if !shared.admit() {
            return End::Close;
        }
        if let Some(delay) = script.delay {
            if !shared.wait_until(Instant::now() + delay) {
                return End::Close;
            }
        }

        let (closing, conn_header) = keep_alive(script, &head, served_here);
        let reply = build_reply(&script.answer, head.is_head, conn_header);

        if let Some((after, mid_response)) = script.reset {
            if served_here > after {
                if mid_response {
                    let body_len = reply.bytes.len().saturating_sub(reply.body_start);
                    let cut = (reply.body_start + body_len / 2).min(reply.bytes.len());
                    let _ = writer.write_all(&reply.bytes[..cut]);
                    let _ = writer.flush();
                }
                return End::Reset;
            }
        }

        if let Answer::Stall { after_bytes } = script.answer {
            let cut = after_bytes.min(reply.bytes.len());
            if writer.write_all(&reply.bytes[..cut]).is_err() {
                return End::Close;
            }
            return stall(shared, &mut reader);
        }

        if writer.write_all(&reply.bytes).is_err() {
            return End::Close;
        }
        if let Some(limit) = script.dies_after {
            if total >= limit {
                shared.stop();
                return End::Close;
            }
        }
        match reply.after {
            After::Persist if !closing => {}
            After::Stall => return stall(shared, &mut reader),
            After::Persist | After::Close => {
                // Half-close first so the peer sees the whole reply before the FIN.
                let _ = stream.shutdown(std::net::Shutdown::Write);
                return End::Close;
            }
        }
    }
}

/// The keep-alive decision for the `served_here`-th request of a connection, and the
/// Connection header that announces it (none when a close-after is silent).
fn keep_alive(script: &Script, head: &RequestHead, served_here: u64) -> (bool, ConnHeader) {
    let client_keeps = head.client_keeps_alive() || script.ignore_connection_close;
    let limit_reached = script.close_after.is_some_and(|(n, _)| served_here >= n);
    let closing = script.always_close || !client_keeps || limit_reached;
    let conn_header = if closing {
        let silent = limit_reached
            && script.close_after.is_some_and(|(_, announce)| !announce)
            && client_keeps
            && !script.always_close;
        if silent {
            ConnHeader::None
        } else {
            ConnHeader::Close
        }
    } else if !head.http11 {
        ConnHeader::KeepAlive
    } else {
        ConnHeader::None
    };
    (closing, conn_header)
}

/// Holds the connection without answering until the client closes or the server stops.
/// Incoming bytes are read and discarded so the client never blocks on a full buffer.
fn stall(shared: &Shared, reader: &mut BufReader<&TcpStream>) -> End {
    let mut scratch = [0u8; 4096];
    while !shared.stopped() {
        match reader.read(&mut scratch) {
            Ok(0) => return End::Close,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return End::Close,
        }
    }
    End::Close
}
