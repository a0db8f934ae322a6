//! `placement = "kubernetes"` through the real binary, without a cluster: the test
//! starts the agents the way the Indexed Job of `volley agents manifest` starts them
//! (the manifest's command and args, each with its own `JOB_COMPLETION_INDEX`, the
//! `$(VAR)` references expanded from the container's environment as the kubelet does)
//! on this host against the nats-server the manifests deploy (started here with the
//! config, certificate and key of their Secret, the agents' credentials files where the
//! pods mount theirs), then `volley study run` waits for them on that secured bus with
//! the coordinator's credentials file and runs its step, against a `volley serve` with
//! its access log on.
//!
//! The target listens on an address of a veth the test makes (its peer in a namespace
//! of the test's), because a study refuses a loopback target for agents on other hosts.
//! Every process and interface the test makes is removed on drop; every wait is bounded.

use crate::common;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Served;
use serde_json::Value;
use volley_agents::manifest::{self, Request};
use volley_agents::server::PrivateNats;
use volley_store::Store;

fn must(args: &[&str]) {
    let ok = Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "{args:?} failed");
}

/// A veth with an address here, its peer in a namespace of the test's; a temp dir.
struct Place {
    ns: String,
    veth: String,
    addr: String,
    dir: crate::common::TestDir,
}

impl Place {
    fn make() -> Place {
        let pid = std::process::id();
        let p = Place {
            ns: format!("volley-k8s-{pid}"),
            veth: format!("vk{}", pid % 1_000_000),
            addr: format!("10.217.{}.1", pid % 250),
            dir: crate::common::fresh_dir("volley-k8s"),
        };
        must(&["ip", "netns", "add", &p.ns]);
        must(&[
            "ip", "link", "add", &p.veth, "type", "veth", "peer", "name", "eth0", "netns", &p.ns,
        ]);
        must(&[
            "ip",
            "addr",
            "add",
            &format!("{}/30", p.addr),
            "dev",
            &p.veth,
        ]);
        must(&["ip", "link", "set", &p.veth, "up"]);
        must(&["ip", "-n", &p.ns, "link", "set", "eth0", "up"]);
        p
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.veth])
            .status();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

/// The agents, killed and reaped on drop (a test that fails early leaves none).
struct Pods(Vec<Child>);

impl Drop for Pods {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `$(NAME)` references in `arg` replaced from `env`, as the kubelet expands a
/// container's args; an unknown name stays as written (the kubelet's rule too).
fn expand(arg: &str, env: &BTreeMap<&str, String>) -> String {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(start) = rest.find("$(") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find(')') {
            Some(end) if env.contains_key(&after[..end]) => {
                out.push_str(&env[&after[..end]]);
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str("$(");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The `stringData` of each Secret in a multi-document manifest, by the Secret's name.
fn secrets(yaml: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    use serde::Deserialize;
    let mut out = BTreeMap::new();
    for doc in serde_norway::Deserializer::from_str(yaml) {
        let v = serde_norway::Value::deserialize(doc).unwrap();
        if v["kind"].as_str() != Some("Secret") {
            continue;
        }
        let name = v["metadata"]["name"].as_str().unwrap().to_string();
        let data: BTreeMap<String, String> =
            serde_norway::from_value(v["stringData"].clone()).unwrap();
        out.insert(name, data);
    }
    out
}

/// Writes a Secret's files into `dir` (mode 0600), as a pod's volume mount shows them.
fn mount(data: &BTreeMap<String, String>, dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    for (k, v) in data {
        let p = dir.join(k);
        std::fs::write(&p, v).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}

#[test]
fn agents_started_as_the_indexed_job_starts_them_run_the_study_step() {
    let place = Place::make();
    // The manifests the user would apply: three pods, the deployed (secured) bus, the
    // agents allowed to load the test's target address.
    let mut req = Request::new(3);
    req.allow_targets = vec![place.addr.clone()];
    let rendered = manifest::render(&req).unwrap();
    let yaml = &rendered.yaml;
    let secrets = secrets(yaml);
    // The cluster's side, here: the server with its Secret's config on loopback (its
    // certificate names 127.0.0.1 for a port-forward), each pod's mount a directory.
    let tls = place.dir.join("nats-tls");
    let mut nats_files = secrets[manifest::NATS_SECRET].clone();
    let conf = nats_files["nats.conf"].replace(manifest::NATS_SECRET_DIR, tls.to_str().unwrap());
    nats_files.insert("nats.conf".into(), conf);
    mount(&nats_files, &tls);
    let nats =
        PrivateNats::start_with_config(&tls.join("nats.conf"), "127.0.0.1:0".parse().unwrap())
            .expect("nats-server (scripts/install-deps.sh installs it)");
    let bus = nats.url();
    let creds = place.dir.join("volley-bus");
    mount(&secrets[manifest::AGENTS_SECRET], &creds);
    assert_eq!(
        secrets[manifest::AGENTS_SECRET].len(),
        3,
        "one credentials file per pod"
    );
    let coordinator = place.dir.join("coordinator.json");
    std::fs::write(&coordinator, rendered.coordinator.unwrap().to_json()).unwrap();
    let args = manifest::agent_args(&req);
    for a in &args {
        assert!(yaml.contains(a.as_str()), "{a} not in the Job:\n{yaml}");
    }
    assert!(yaml.contains("completionMode: Indexed"), "{yaml}");
    let pods = Pods(
        (0..3)
            .map(|i| {
                let env = BTreeMap::from([(manifest::INDEX_ENV, i.to_string())]);
                // The Service's name as the cluster's DNS resolves it, the Secret where
                // the pod mounts it.
                let argv: Vec<String> = args
                    .iter()
                    .map(|a| {
                        expand(a, &env)
                            .replace(manifest::DEFAULT_BUS, &bus)
                            .replace(manifest::AGENTS_SECRET_DIR, creds.to_str().unwrap())
                    })
                    .collect();
                Command::new(env!("CARGO_BIN_EXE_volley"))
                    .args(&argv)
                    .env(manifest::INDEX_ENV, i.to_string())
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect(),
    );
    let log = place.dir.join("access.log");
    let root = place.dir.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.html"), "<p>volley</p>\n".repeat(20)).unwrap();
    let listen = format!("{}:0", place.addr);
    let mut server = Served::start(
        &root,
        &["--listen", &listen, "--access-log", log.to_str().unwrap()],
    );
    let file = place.dir.join("s.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"inj-k8s\"\n[[target]]\nname = \"served\"\nkind = \"external\"\nurl = \"{}/a.html\"\n\
             [[workload]]\nname = \"w\"\npaths = [\"/a.html\"]\n\
             [load]\nmodel = \"open\"\nrate = 30\nconcurrency = 2\n\
             [injectors]\ncount = 3\nshare = \"each\"\nplacement = \"kubernetes\"\n\
             bus_url = \"{bus}\"\nbus_credentials = \"{}\"\nready_timeout = \"30s\"\n\
             [steps]\nduration = \"3s\"\nwarmup = \"0s\"\ncooldown = \"0s\"\n",
            server.base,
            coordinator.display()
        ),
    )
    .unwrap();
    let db = place.dir.join("v.db");
    let out = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["study", "run"])
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.stop();
    // Each pod ends by itself once its run is over (the Job counts a completion).
    let mut pods = pods;
    let until = Instant::now() + Duration::from_secs(20);
    for c in &mut pods.0 {
        let status = loop {
            if let Some(s) = c.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < until, "an agent did not end");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "agent exit {status}");
    }
    let store = Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    let steps = store.steps(runs[0].id).unwrap();
    assert_eq!(steps.len(), 1);
    let s = &steps[0].summary;
    let inj = s["injectors"].as_array().unwrap();
    let names: Vec<&str> = inj.iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["agent-0", "agent-1", "agent-2"]);
    let completed = |v: &Value| v["requests"]["completed"].as_u64().unwrap();
    for i in inj {
        let n = completed(&i["summary"]);
        // 3 s at 30 req/s, one request of slack for the schedule's boundary.
        assert!((89..=91).contains(&n), "{}: {n}", i["name"]);
    }
    let sum: u64 = inj.iter().map(|i| completed(&i["summary"])).sum();
    let lines = common::load_lines(&log);
    assert_eq!(completed(s), sum, "merged == sum of the agents'");
    // The server logs every request it answered; a request still in flight when its
    // agent's run ended (censored there, possible on a busy machine) may have been
    // answered and logged after it. So the log holds the completed ones, plus at most
    // the in-flight ones, never fewer and never others.
    let in_flight = s["requests"]["in_flight"].as_u64().unwrap();
    assert!(
        (completed(s)..=completed(s) + in_flight).contains(&lines),
        "the server's access log lines ({lines}) = merged completed ({}) + at most {in_flight} in flight",
        completed(s)
    );
}
