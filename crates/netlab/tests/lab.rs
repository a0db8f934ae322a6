//! The lab for real: namespaces, bridge, veths and tbf made with `ip` and `tc` (root, as
//! the test set-up runs), traffic only between the namespaces the test made.

use std::process::Command;

use volley_netlab::lab::{self, Lab, LinkSpec};
use volley_netlab::{measure, tune};

fn namespaces() -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

fn mine() -> Vec<String> {
    let prefix = format!("vl{}-", std::process::id());
    namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

// One test function: the labs of one process share its pid's names, so they are built
// one after the other.
#[test]
fn a_shaped_link_measures_its_rate_and_the_lab_leaves_nothing_behind() {
    {
        let lab = Lab::create(
            0,
            &[
                LinkSpec {
                    rate_bit: Some(10_000_000),
                    rtt_ms: 10,
                    delay_ms: None,
                },
                LinkSpec::default(),
            ],
        )
        .expect("lab (needs root)");
        assert_eq!(
            mine().len(),
            4,
            "bridge, target and two injector namespaces"
        );
        let shaped = measure::measure(&lab, 0, 4_000_000).unwrap();
        eprintln!("10 Mbit link: {shaped:?}");
        let ratio = shaped.throughput_bit / 10e6;
        assert!(
            (0.9..=1.1).contains(&ratio),
            "10 Mbit link measured {:.2} Mbit",
            shaped.throughput_bit / 1e6
        );
        assert!(shaped.rtt_ms > 0.0 && shaped.rtt_ms < 50.0, "{shaped:?}");
        let free = measure::measure(&lab, 1, 40_000_000).unwrap();
        eprintln!("unshaped link: {free:?}");
        assert!(
            free.throughput_bit > 5.0 * shaped.throughput_bit,
            "unshaped {free:?} vs shaped {shaped:?}"
        );
        // UDP (HTTP/3's datagrams) is shaped by the same tbf: what gets through is
        // the link's rate, and the excess is dropped, not pushed back on the sender.
        let (sent, got, rate_bit) = udp_through(&lab, 0);
        eprintln!("10 Mbit link, UDP: sent {sent} B, got {got} B, {rate_bit:.0} bit/s");
        let ratio = rate_bit / 10e6;
        assert!(
            (0.8..=1.1).contains(&ratio),
            "UDP through 10 Mbit: {ratio:.2}"
        );
        assert!(
            sent > 2 * got,
            "tbf dropped the excess: sent {sent}, got {got}"
        );
    }
    assert!(
        mine().is_empty(),
        "dropping the lab removes it: {:?}",
        mine()
    );

    // A dead volley's leftovers go; a live owner's stay.
    let dead = (4_000_000..4_194_303)
        .find(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
        .unwrap();
    let left = format!("vl{dead}-t");
    assert!(Command::new("ip")
        .args(["netns", "add", &left])
        .status()
        .unwrap()
        .success());
    let lab = Lab::create(0, &[LinkSpec::default()]).unwrap();
    let removed = lab::sweep().unwrap();
    assert!(removed.contains(&left), "{removed:?}");
    assert!(!namespaces().contains(&left));
    assert_eq!(mine().len(), 3, "the live lab is left alone");
    drop(lab);
    assert!(mine().is_empty());

    // Sysctls and route switches go into the target's namespace and nowhere else.
    {
        let keys = [
            "net.core.somaxconn",
            "net.ipv4.tcp_max_syn_backlog",
            "net.core.rmem_max",
            "net.core.netdev_max_backlog",
            "vm.swappiness",
            "net.ipv4.tcp_tw_reuse",
        ];
        let host = |k: &str| {
            std::fs::read_to_string(format!("/proc/sys/{}", k.replace('.', "/"))).unwrap()
        };
        let before: Vec<String> = keys.iter().map(|k| host(k)).collect();
        let routes_before = Command::new("ip").args(["route", "show"]).output().unwrap();
        let lab = Lab::create(0, &[LinkSpec::default()]).unwrap();
        let ns = lab.target_ns();
        let ask = |s: &str| s.parse::<tune::Sysctl>().unwrap();
        let applied = tune::apply_sysctls(
            &ns,
            &[
                ask("net.core.somaxconn=16"),
                ask("net.ipv4.tcp_max_syn_backlog=64"),
            ],
        )
        .unwrap();
        assert_eq!(applied[0].value, "16");
        assert_eq!(applied[0].host, before[0].trim());
        assert_eq!(applied[1].value, "64");
        // The injector's namespace reuses its TIME_WAIT ports (the generator's side);
        // the target's keeps the kernel's default, and the host its own value.
        let reuse_in = |ns: &str| {
            let out = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    ns,
                    "cat",
                    "/proc/sys/net/ipv4/tcp_tw_reuse",
                ])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        assert_eq!(reuse_in(&lab.injector_ns(0)), "1");
        assert_eq!(
            reuse_in(&ns),
            "2",
            "the target's namespace keeps the default"
        );
        assert_eq!(host("net.ipv4.tcp_tw_reuse"), before[5]);
        for (s, want) in [
            (
                "net.core.rmem_max=1048576",
                "sysctl net.core.rmem_max is global",
            ),
            (
                "net.core.netdev_max_backlog=5000",
                "sysctl net.core.netdev_max_backlog does not exist inside a network namespace",
            ),
            ("vm.swappiness=1", "sysctl vm.swappiness is global"),
            (
                "net.ipv4.tcp_max_syn_backlog=lots",
                "sysctl net.ipv4.tcp_max_syn_backlog: the kernel refused 'lots'",
            ),
        ] {
            let e = tune::apply_sysctls(&ns, &[ask(s)]).unwrap_err().to_string();
            assert!(e.starts_with(want), "{s}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let routes = tune::apply_routes(
            &ns,
            "eth0",
            tune::RouteSettings {
                quickack: Some(true),
            },
        )
        .unwrap();
        assert!(
            routes.iter().all(|r| r.contains("quickack 1")),
            "{routes:?}"
        );
        drop(lab);
        let after: Vec<String> = keys.iter().map(|k| host(k)).collect();
        assert_eq!(before, after, "the host's sysctls are unchanged");
        let routes_after = Command::new("ip").args(["route", "show"]).output().unwrap();
        assert_eq!(
            routes_before.stdout, routes_after.stdout,
            "host routes unchanged"
        );
    }

    // A link tc refuses is a typed error naming the command, and what was built so far
    // is removed.
    let e = Lab::create(
        0,
        &[LinkSpec {
            rate_bit: Some(0),
            rtt_ms: 0,
            delay_ms: None,
        }],
    )
    .unwrap_err();
    assert!(
        matches!(e, volley_netlab::NetlabError::Command { ref command, .. } if command.starts_with("tc ")),
        "{e}"
    );
    assert!(
        mine().is_empty(),
        "a failed build leaves nothing: {:?}",
        mine()
    );
}

/// Runs `f` on a new thread inside network namespace `ns`.
fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let ns = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        // SAFETY: setns on a valid namespace fd; it changes this thread only.
        assert_eq!(
            unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) },
            0
        );
        f()
    })
}

/// Sends UDP datagrams as fast as the target's namespace can for 2 s (bounded in
/// count too) to injector group `i`, which counts what arrives: (bytes sent, bytes
/// received, received rate in bit/s after the first 256 KiB, which may ride tbf's
/// burst).
fn udp_through(lab: &Lab, i: usize) -> (u64, u64, f64) {
    use std::net::UdpSocket;
    use std::time::{Duration, Instant};
    const DATAGRAM: usize = 1200;
    const SKIP: u64 = 256 * 1024;
    let (tx, rx) = std::sync::mpsc::channel();
    let at = lab.names().injector_addr(i);
    let receiver = in_ns(&lab.injector_ns(i), move || {
        let sock = UdpSocket::bind((at, 0)).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        tx.send(sock.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 2048];
        let (mut got, mut from, mut last) = (0u64, None, Instant::now());
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            let Ok(n) = sock.recv(&mut buf) else { break };
            got += n as u64;
            last = Instant::now();
            if from.is_none() && got >= SKIP {
                from = Some((last, got));
            }
        }
        let (t, at_bytes) = from.expect("too few datagrams arrived to measure a rate");
        let secs = last.duration_since(t).as_secs_f64().max(1e-9);
        (got, (got - at_bytes) as f64 * 8.0 / secs)
    });
    let to = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let from = lab.target_addr();
    let sender = in_ns(&lab.target_ns(), move || {
        let sock = UdpSocket::bind((from, 0)).unwrap();
        let payload = [7u8; DATAGRAM];
        let (mut sent, start) = (0u64, Instant::now());
        for _ in 0..2_000_000 {
            if start.elapsed() >= Duration::from_secs(2) {
                break;
            }
            // A full socket buffer (ENOBUFS) is a drop here, as on any path.
            if sock.send_to(&payload, to).is_ok() {
                sent += DATAGRAM as u64;
            }
        }
        sent
    });
    let sent = sender.join().unwrap();
    let (got, rate) = receiver.join().unwrap();
    (sent, got, rate)
}

/// A tuning lab is one namespace: the target's address sits on its own `lo`, so a load
/// entered into it reaches the target over loopback (no veth, no bridge), `quickack`
/// goes on the loopback routes both ends use, the generator's `tcp_tw_reuse` is set
/// there, and dropping the lab removes it.
#[test]
fn a_tuning_lab_is_one_namespace_whose_loopback_carries_the_load() {
    let lab = Lab::create_tuning(201).unwrap();
    let ns = lab.target_ns();
    // The other test builds its labs (other slots) at the same time.
    let this_lab = format!("vl{}-201", std::process::id());
    let made: Vec<String> = mine()
        .into_iter()
        .filter(|n| n.starts_with(&this_lab))
        .collect();
    assert_eq!(made, vec![ns.clone()], "one namespace only");
    let ip = |args: &[&str]| {
        let out = Command::new("ip")
            .arg("-n")
            .arg(&ns)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "ip {args:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let links = ip(&["-o", "link", "show"]);
    assert_eq!(links.lines().count(), 1, "only lo: {links}");
    let addr = lab.target_addr();
    assert!(ip(&["-o", "addr", "show", "dev", "lo"]).contains(&format!("{addr}/32")));
    let reuse = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns,
            "sysctl",
            "-n",
            "net.ipv4.tcp_tw_reuse",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&reuse.stdout).trim(), "1");

    let routes = tune::apply_routes(
        &ns,
        "lo",
        tune::RouteSettings {
            quickack: Some(true),
        },
    )
    .unwrap();
    assert!(
        routes
            .iter()
            .any(|r| r.starts_with(&format!("local {addr} "))),
        "{routes:?}"
    );
    assert!(
        routes.iter().all(|r| r.contains("quickack 1")),
        "{routes:?}"
    );

    // A request and its answer inside the namespace travel over its lo.
    let lo_packets = |ip: &dyn Fn(&[&str]) -> String| -> u64 {
        let s = ip(&["-s", "-o", "link", "show", "lo"]);
        let rx = s.split("RX:").nth(1).unwrap();
        // "bytes packets errors dropped missed mcast \ BYTES PACKETS ...".
        rx.split_whitespace().nth(8).unwrap().parse().unwrap()
    };
    let before = lo_packets(&ip);
    let echoed = in_ns(&ns, move || {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind((addr, 0)).unwrap();
        let to = l.local_addr().unwrap();
        let mut c = std::net::TcpStream::connect(to).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(b"ping").unwrap();
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).unwrap();
        buf
    })
    .join()
    .unwrap();
    assert_eq!(&echoed, b"ping");
    assert!(lo_packets(&ip) >= before + 4, "the exchange crossed lo");
    drop(lab);
    assert!(!namespaces().contains(&ns), "the lab is removed");
}
