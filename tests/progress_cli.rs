//! The progress bar of `volley bench`: drawn on a terminal (a pseudo-terminal made by
//! util-linux `script`), with the run's total, rate, errors and ETA; absent when stderr
//! is a pipe, and absent on a terminal with `--quiet`.

use std::process::Command;

use volley_faultserver::{Behaviour, FaultServer};

fn server() -> FaultServer {
    FaultServer::start(Behaviour::Ok {
        body_len: 100,
        keep_alive: true,
    })
    .unwrap()
}

#[test]
fn no_bar_when_stderr_is_not_a_terminal() {
    let s = server();
    let o = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["bench", &s.url("/"), "-k", "-c", "2", "-d", "1500ms"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains('\r') && !err.contains('\x1b'), "{err:?}");
    assert!(!err.contains("ETA"), "{err}");
}

/// Runs `volley ARGS` on a pseudo-terminal; returns what the terminal received.
fn on_a_terminal(args: &str) -> String {
    let cmd = format!("{} {args} > /dev/null", env!("CARGO_BIN_EXE_volley"));
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .expect("util-linux script (scripts/install-deps.sh)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_terminal_gets_a_bar_with_total_rate_errors_and_eta_unless_quiet() {
    let s = server();
    let tty = on_a_terminal(&format!("bench {} -k -c 2 -d 1500ms", s.url("/")));
    assert!(tty.contains("load ["), "{tty:?}");
    for part in [" s of 1.5 s", "req/s", "errors", "ETA "] {
        assert!(tty.contains(part), "{part}: {tty:?}");
    }
    let tty = on_a_terminal(&format!("bench {} -k -c 2 -n 3000", s.url("/")));
    assert!(tty.contains("of 3,000 requests"), "{tty:?}");

    let quiet = on_a_terminal(&format!("bench {} -k -c 2 -d 1s -q", s.url("/")));
    assert!(!quiet.contains("load ["), "{quiet:?}");
}

/// `bench --caldav` shows its day as it goes (issue 22 item 10: it ran silent for a
/// minute): the phase, then the day's elapsed and remaining time and its actions.
#[test]
fn a_caldav_day_on_a_terminal_gets_its_bar_unless_quiet() {
    let day = "bench --caldav 2 --compress 480 --duration 2s";
    let tty = on_a_terminal(day);
    assert!(tty.contains("office ["), "{tty:?}");
    for part in ["day: ", " s of 2 s", "ETA ", " actions"] {
        assert!(tty.contains(part), "{part}: {tty:?}");
    }
    let quiet = on_a_terminal(&format!("{day} -q"));
    assert!(!quiet.contains("office ["), "{quiet:?}");
}
