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
