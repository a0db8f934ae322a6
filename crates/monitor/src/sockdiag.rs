//! Sockets towards one address, counted by the kernel's socket-diagnostics netlink
//! (`NETLINK_SOCK_DIAG`, what `ss` uses) with the address filter run in the kernel.
//!
//! Why not `/proc/net/tcp`: the kernel formats a 150-byte line for every TCP socket of
//! the machine and volley parses them all to keep the few towards its target. After a
//! connection-per-request load the machine holds tens of thousands of TIME_WAIT
//! sockets; here one read cost ~5 us of kernel time per socket (0.1-0.3 s per scan,
//! twice per run, on the generator's core), a tenth of volley's CPU in a 4 s run. A
//! netlink dump with a destination filter (`INET_DIAG_BC_D_COND`) walks the same table
//! in the kernel but copies out only the matching sockets, as binary records.
//!
//! Why hand-written: the maintained netlink crates build `inet_diag_req_v2` but not the
//! filter bytecode, and without it every socket of the machine comes back. The request
//! is 4 fixed structures (`linux/netlink.h`, `linux/inet_diag.h`) and the reply is read
//! for two bytes per record, so the encoding here is small and table-tested; the
//! caller falls back to `/proc/net/tcp` on any error (no netlink, a kernel without
//! `inet_diag`, a seccomp profile).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::headroom::TargetSockets;

const NLMSG_HDR: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const INET_DIAG_REQ_BYTECODE: u16 = 1;
const INET_DIAG_BC_D_COND: u8 = 8;
const TCP_TIME_WAIT: u8 = 6;
const TCP_LISTEN: u32 = 10;
/// `inet_diag_req_v2`: family, protocol, ext, pad, states, then the 48-byte socket id.
const REQ_V2: usize = 56;

/// The sockets of the machine whose remote end is `target`, in any state but LISTEN
/// (a listener has no remote end), as `/proc/net/tcp{,6}` would count them: an IPv4
/// target also matches dual-stack IPv6 sockets that reach it as `::ffff:a.b.c.d`.
pub fn count_target_sockets(target: SocketAddr) -> io::Result<TargetSockets> {
    let ip = match target.ip() {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    let families: &[u8] = match ip {
        // The kernel's D_COND matches a v4 condition against v4-mapped v6 entries too.
        IpAddr::V4(_) => &[libc::AF_INET as u8, libc::AF_INET6 as u8],
        IpAddr::V6(_) => &[libc::AF_INET6 as u8],
    };
    let sock = open()?;
    let mut out = TargetSockets::default();
    for (seq, &family) in families.iter().enumerate() {
        let req = request(family, ip, target.port(), seq as u32 + 1);
        send(&sock, &req)?;
        let got = dump(&sock)?;
        out.in_use += got.in_use;
        out.time_wait += got.time_wait;
    }
    Ok(out)
}

fn open() -> io::Result<OwnedFd> {
    // SAFETY: socket() takes no pointers; a non-negative result is a new fd we own.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn send(sock: &OwnedFd, req: &[u8]) -> io::Result<()> {
    // SAFETY: an all-zero sockaddr_nl is valid (pid 0: the kernel).
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: req and kernel are live for the call; lengths are theirs.
    let n = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    match n {
        n if n < 0 => Err(io::Error::last_os_error()),
        n if n as usize != req.len() => Err(io::Error::other("short netlink send")),
        _ => Ok(()),
    }
}

/// Reads the dump's replies until NLMSG_DONE, counting its records.
fn dump(sock: &OwnedFd) -> io::Result<TargetSockets> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = TargetSockets::default();
    loop {
        // SAFETY: buf is live and writable for its whole length.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "netlink dump ended early",
            ));
        }
        if parse(&buf[..n as usize], &mut out)? {
            return Ok(out);
        }
    }
}

/// The dump request for `family`: every state but LISTEN, only sockets whose remote
/// end is `ip`:`port` (one D_COND op whose "yes" jumps to the end, accepting, and whose
/// "no" jumps past it, rejecting, as `ss` encodes a filter).
pub(crate) fn request(family: u8, ip: IpAddr, port: u16, seq: u32) -> Vec<u8> {
    let (cond_family, addr): (u8, Vec<u8>) = match ip {
        IpAddr::V4(v4) => (libc::AF_INET as u8, v4.octets().to_vec()),
        IpAddr::V6(v6) => (libc::AF_INET6 as u8, v6.octets().to_vec()),
    };
    // inet_diag_bc_op (code, yes, no) + inet_diag_hostcond (family, prefix_len, pad,
    // port as a host-order int) + the address in network order.
    let bc_len = 4 + 8 + addr.len();
    let mut bc = Vec::with_capacity(bc_len);
    bc.push(INET_DIAG_BC_D_COND);
    bc.push(bc_len as u8);
    bc.extend_from_slice(&(bc_len as u16 + 4).to_ne_bytes());
    bc.push(cond_family);
    bc.push((addr.len() * 8) as u8);
    bc.extend_from_slice(&[0, 0]);
    bc.extend_from_slice(&i32::from(port).to_ne_bytes());
    bc.extend_from_slice(&addr);

    let total = NLMSG_HDR + REQ_V2 + 4 + bc.len();
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.push(family);
    m.push(libc::IPPROTO_TCP as u8);
    m.push(0); // no extensions
    m.push(0);
    let states = 0x0fff_u32 & !(1 << TCP_LISTEN) & !1; // TCP states 1..11, not LISTEN
    m.extend_from_slice(&(states | (1 << 12)).to_ne_bytes()); // and NEW_SYN_RECV
    m.extend_from_slice(&[0; 48]); // socket id: unused in a dump
    m.extend_from_slice(&((4 + bc.len()) as u16).to_ne_bytes());
    m.extend_from_slice(&INET_DIAG_REQ_BYTECODE.to_ne_bytes());
    m.extend_from_slice(&bc);
    debug_assert_eq!(m.len(), total);
    m
}

/// Counts the records of one datagram of replies into `out`; `Ok(true)` once the dump
/// is done. An NLMSG_ERROR is the kernel refusing the request (e.g. no inet_diag).
pub(crate) fn parse(mut buf: &[u8], out: &mut TargetSockets) -> io::Result<bool> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed netlink reply");
    while buf.len() >= NLMSG_HDR {
        let len = u32::from_ne_bytes(buf[0..4].try_into().map_err(|_| bad())?) as usize;
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if len < NLMSG_HDR || len > buf.len() {
            return Err(bad());
        }
        let body = &buf[NLMSG_HDR..len];
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let code = body
                    .get(0..4)
                    .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    .ok_or_else(bad)?;
                return Err(io::Error::from_raw_os_error(-code));
            }
            SOCK_DIAG_BY_FAMILY => {
                // inet_diag_msg: family, state, ...
                let state = *body.get(1).ok_or_else(bad)?;
                out.in_use += 1;
                if state == TCP_TIME_WAIT {
                    out.time_wait += 1;
                }
            }
            _ => {}
        }
        let step = (len + 3) & !3;
        buf = buf.get(step..).unwrap_or(&[]);
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr, TcpListener, TcpStream};

    #[test]
    fn a_v4_request_carries_one_destination_condition() {
        let m = request(
            libc::AF_INET as u8,
            IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
            8080,
            7,
        );
        assert_eq!(m.len(), 16 + 56 + 4 + 16);
        assert_eq!(
            u32::from_ne_bytes(m[0..4].try_into().unwrap()),
            m.len() as u32
        );
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), 20);
        assert_eq!(u32::from_ne_bytes(m[8..12].try_into().unwrap()), 7);
        assert_eq!(
            (m[16], m[17]),
            (libc::AF_INET as u8, libc::IPPROTO_TCP as u8)
        );
        let states = u32::from_ne_bytes(m[20..24].try_into().unwrap());
        assert_eq!(states & (1 << 10), 0, "no listeners");
        assert_ne!(states & (1 << 6), 0, "TIME_WAIT included");
        let bc = &m[16 + 56 + 4..];
        // op: D_COND, yes = to the end (accept), no = past it (reject)
        assert_eq!((bc[0], bc[1]), (8, 16));
        assert_eq!(u16::from_ne_bytes([bc[2], bc[3]]), 20);
        assert_eq!((bc[4], bc[5]), (libc::AF_INET as u8, 32));
        assert_eq!(i32::from_ne_bytes(bc[8..12].try_into().unwrap()), 8080);
        assert_eq!(&bc[12..16], &[127, 0, 0, 1]);
    }

    #[test]
    fn a_v6_condition_has_the_full_prefix() {
        let m = request(
            libc::AF_INET6 as u8,
            IpAddr::V6(Ipv6Addr::LOCALHOST),
            443,
            1,
        );
        let bc = &m[16 + 56 + 4..];
        assert_eq!(bc.len(), 28);
        assert_eq!((bc[1], bc[4], bc[5]), (28, libc::AF_INET6 as u8, 128));
    }

    fn msg(kind: u16, body: &[u8]) -> Vec<u8> {
        let len = 16 + body.len();
        let mut m = (len as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(body);
        m.resize((len + 3) & !3, 0);
        m
    }

    #[test]
    fn replies_are_counted_by_state_until_done() {
        let mut buf = msg(20, &[2, 1, 0, 0, 0, 0, 0]); // established
        buf.extend(msg(20, &[2, 6, 0, 0])); // time-wait
        let mut out = TargetSockets::default();
        assert!(!parse(&buf, &mut out).unwrap());
        assert_eq!((out.in_use, out.time_wait), (2, 1));
        assert!(parse(&msg(3, &[0, 0, 0, 0]), &mut out).unwrap());
        let err = parse(&msg(2, &(-libc::ENOENT).to_ne_bytes()), &mut out).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        assert!(parse(
            &[40, 0, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            &mut out
        )
        .is_err());
    }

    /// Real sockets: the kernel's count equals `/proc/net/tcp`'s for the same target.
    #[test]
    fn the_kernel_filter_counts_what_proc_counts() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = l.local_addr().unwrap();
        let mut clients: Vec<_> = (0..3)
            .map(|_| TcpStream::connect(target).unwrap())
            .collect();
        let mut accepted: Vec<_> = (0..3).map(|_| l.accept().unwrap().0).collect();
        // One client closes first, then its server side: the client's socket goes to
        // TIME_WAIT (loopback runs the FIN exchange inside the close calls).
        drop(clients.pop());
        drop(accepted.pop());
        let proc_text = std::fs::read_to_string("/proc/net/tcp").unwrap();
        let from_proc = crate::headroom::count_target_sockets(&proc_text, target);
        let got = count_target_sockets(target).expect("sock_diag on this Linux");
        assert_eq!(got, from_proc);
        assert_eq!((got.in_use, got.time_wait), (3, 1));
        drop(clients);
    }
}
