//! Reports a hostile server cannot script: `bench --save` against the faultserver's
//! `hostile` mode (`<script>`, `</style>`, `javascript:` links and terminal escapes in
//! its reason phrase, headers and body; a 1 MB reason phrase), with a label of the
//! same, then `volley report` as HTML opened in headless Chromium (no script runs, no
//! request leaves) and as Markdown on stdout, and `volley history` (no ESC or BEL byte
//! reaches the terminal). A control page holding the payload raw proves the Chromium
//! checks can fail.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use volley_faultserver::{Behaviour, FaultServer, HOSTILE_PAYLOAD};

const CHROMIUM: &str = "/usr/bin/chromium";
/// Each Chromium run is killed after this.
const CHROMIUM_LIMIT: Duration = Duration::from_secs(40);

fn volley(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(args)
        .env_remove("COLUMNS")
        .output()
        .unwrap()
}

/// Opens `page` in headless Chromium with a network log; returns the DOM after its
/// scripts ran (`--dump-dom`, 3 s of virtual time for timers) and every URL the page
/// asked for beyond itself and `data:`.
fn open_in_chromium(page: &Path) -> (String, Vec<String>) {
    let netlog = page.with_extension("netlog.json");
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-features=SpellCheck,OptimizationHints,Translate",
            "--no-first-run",
            "--dump-dom",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg(format!("file://{}", page.display()))
        // Chromium's own scratch (a profile per run) beside the page, so it goes with the
        // test's directory, also when a run is killed.
        .env("TMPDIR", page.parent().expect("the page's directory"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium must be installed at /usr/bin/chromium");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > CHROMIUM_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {CHROMIUM_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let dom = reader.join().unwrap();
    // Page requests carry a priority other than IDLE (the browser's own traffic).
    let log = std::fs::read_to_string(&netlog).unwrap_or_default();
    let own = format!("file://{}", page.display());
    let mut urls = Vec::new();
    for (at, _) in log.match_indices("\"url\":\"") {
        let object = &log[log[..at].rfind('{').unwrap_or(0)..at];
        let Some(p) = object.find("\"priority\":\"") else {
            continue;
        };
        if object[p..].starts_with("\"priority\":\"IDLE\"") {
            continue;
        }
        let url = log[at + 7..].split('"').next().unwrap_or("");
        if !url.starts_with(&own) && !url.starts_with("data:") {
            urls.push(url.to_string());
        }
    }
    (dom, urls)
}

/// The text of the DOM's `<title>`.
fn title(dom: &str) -> &str {
    dom.split("<title>")
        .nth(1)
        .and_then(|t| t.split("</title>").next())
        .unwrap_or("")
}

#[test]
fn a_hostile_server_and_label_cannot_script_the_report_or_the_terminal() {
    if !Path::new(CHROMIUM).exists() {
        eprintln!("skipping: {CHROMIUM} not installed");
        return;
    }
    // The test's pages, store and Chromium's scratch, removed when it ends.
    let dir = crate::common::fresh_dir("volley-report-hostile");
    // The control: the payload as it is, in a page, runs and leaks.
    let control = dir.join("control.html");
    std::fs::write(
        &control,
        format!("<!DOCTYPE html><html><head><title>t</title></head><body>{HOSTILE_PAYLOAD}</body></html>"),
    )
    .unwrap();
    let (dom, urls) = open_in_chromium(&control);
    assert_eq!(title(&dom), "pwned", "the control's script must run: {dom}");
    assert!(
        urls.iter().any(|u| u.starts_with("http://127.0.0.1:9/")),
        "the control's request must show: {urls:?}"
    );

    let db = dir.join("v.db");
    let db_s = db.to_str().unwrap();
    // 100 KB: one argument may not exceed 128 KB (the 1 MB string is the server's).
    let label = format!("{HOSTILE_PAYLOAD}{}", "L".repeat(100_000));
    for huge in [false, true] {
        let server = FaultServer::start(Behaviour::Hostile { huge_reason: huge }).unwrap();
        let url = server.url("/");
        let mut args = vec![
            "bench", &url, "-c", "2", "-n", "200", "-q", "--save", "--db", db_s,
        ];
        if !huge {
            args.extend(["--label", &label]);
        }
        let out = volley(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        // Every answer fails (a 500, or a head too large to read): stored, exit 1.
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("saved as run"), "{err}");
        assert!(
            !out.stderr.contains(&0x1b) && !out.stdout.contains(&0x1b),
            "{err}"
        );
    }

    for run in ["1", "2"] {
        let page = dir.join(format!("run{run}.html"));
        let out = volley(&[
            "report",
            run,
            "--db",
            db_s,
            "--html",
            page.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(
            !html.contains("<script>document"),
            "raw payload in run {run}'s page"
        );
        let (dom, urls) = open_in_chromium(&page);
        assert!(dom.contains("volley report"), "run {run}: {dom:.300}");
        assert!(
            title(&dom).starts_with("volley report: "),
            "run {run}: a script changed the title to {:?}",
            title(&dom)
        );
        assert!(!dom.contains("pwned</title>"), "run {run}");
        assert!(
            urls.is_empty(),
            "run {run}: requests left the page: {urls:?}"
        );

        let md = volley(&["report", run, "--db", db_s]);
        assert!(md.status.success());
        for byte in [0x1b, 0x07, 0x9b] {
            assert!(
                !md.stdout.contains(&byte),
                "byte {byte:#x} in run {run}'s Markdown"
            );
        }
        let text = String::from_utf8_lossy(&md.stdout);
        // Outside code spans (shown literally), no markup opens and no link forms.
        let prose: String = text.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let unescaped = |pat: &str| {
            prose
                .match_indices(pat)
                .any(|(i, _)| !prose[..i].ends_with('\\'))
        };
        assert!(
            !unescaped("<") && !unescaped("](javascript:"),
            "{prose:.2000}"
        );
        assert!(
            text.len() < 50_000,
            "a long label must be cut: {} bytes",
            text.len()
        );
    }
    let history = volley(&["history", "--db", db_s]);
    assert!(history.status.success());
    assert!(!history.stdout.contains(&0x1b) && !history.stdout.contains(&0x07));
    assert!(
        history.stdout.len() < 10_000,
        "{} bytes",
        history.stdout.len()
    );
}
