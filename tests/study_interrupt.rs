//! Ctrl-C during `volley study run`: the targets the study started are stopped, the
//! finished steps stay in the store and the run is marked incomplete (exit 130).

use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use volley_store::{Status, Store};

#[test]
fn sigint_stops_the_targets_and_leaves_the_run_incomplete() {
    let dir = std::env::temp_dir().join(format!("volley-study-test-int-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let study = dir.join("int.toml");
    // A managed built-in target, many 1 s closed-loop steps: interrupted after the first.
    std::fs::write(
        &study,
        "name = \"int\"\n[[target]]\nname = \"builtin\"\nkind = \"builtin\"\n[[workload]]\nname = \"w\"\npaths = [\"/index.html\"]\n[load]\nmodel = \"closed\"\n[sweep]\nconcurrency = [1, 2, 3, 4, 5, 6, 7, 8]\n[steps]\nduration = \"1s\"\nwarmup = \"100ms\"\ncooldown = \"100ms\"\n",
    )
    .unwrap();
    let db = dir.join("v.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["study", "run"])
        .arg(&study)
        .arg("--db")
        .arg(&db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let addr: SocketAddr = loop {
        std::thread::sleep(Duration::from_millis(200));
        let found = Store::open(&db).ok().and_then(|s| {
            let run = s.list_runs().ok()?.into_iter().next()?;
            if s.steps(run.id).ok()?.is_empty() {
                return None;
            }
            let url = run.environment["instances"][0]["url"].as_str()?.to_string();
            let host = url
                .strip_prefix("http://")?
                .trim_end_matches('/')
                .to_string();
            host.parse().ok()
        });
        if let Some(a) = found {
            break a;
        }
        assert!(Instant::now() < deadline, "no step stored in 30 s");
        assert!(child.try_wait().unwrap().is_none(), "study ended early");
    };
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok());
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "study did not stop within 20 s of SIGINT"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(130));
    // The built-in server the study started no longer listens.
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
        "target {addr} still answers after Ctrl-C"
    );
    let store = Store::open(&db).unwrap();
    let run = &store.list_runs().unwrap()[0];
    assert_eq!(run.status, Status::Incomplete);
    let steps = store.steps(run.id).unwrap().len();
    assert!((1..8).contains(&steps), "{steps} steps stored");
    let _ = std::fs::remove_dir_all(&dir);
}
