//! `volley bench --io uring|poll` through the real binary: the io_uring and ppoll
//! paths against the built-in server, and epoll taken (and said once) where the kernel
//! refuses a ring.
//! Helpers are `bench_cli`'s.

use super::bench_cli::{
    json_of, one_line_usage_error, succeeded, temp_dir, volley, Mode, TestServer,
};

/// `--io uring` and `--io poll` against the built-in server: every request answered
/// on reused connections, closed and open loop, and the JSON names the path that ran.
#[test]
fn io_uring_and_poll_run_against_the_built_in_server_and_say_so() {
    let root = temp_dir("io-uring");
    std::fs::write(root.join("a.html"), vec![b'x'; 700]).unwrap();
    let served = crate::common::Served::start(&root, &[]);
    let url = format!("{}/a.html", served.base);
    for io in ["uring", "poll"] {
        let out = succeeded(&[
            "bench", &url, "-n", "2000", "-c", "8", "-k", "--io", io, "--json", "-",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("io_uring refused"), "{stderr}");
        let r = &json_of(&out.stdout)["runs"][0];
        assert_eq!(r["wire"]["io"], io, "{}", r["wire"]);
        assert!(r["wire"].get("io_refused").is_none());
        assert_eq!(r["requests"]["ok"], 2000, "{io}");
        assert_eq!(r["bytes"]["body_total"], 2000 * 700, "{io}");
        assert_eq!(r["connections_stats"]["opened"], 8, "{io}");

        let out = succeeded(&[
            "bench", &url, "--rate", "500", "-d", "1s", "-c", "4", "-k", "--io", io, "--json", "-",
        ]);
        let r = &json_of(&out.stdout)["runs"][0];
        assert_eq!(r["wire"]["io"], io);
        let ok = r["requests"]["ok"].as_u64().unwrap();
        assert!(
            (490..=500).contains(&ok),
            "{io}: {ok} of 500 arrivals answered"
        );
    }

    // The default picks ppoll for a few connections, epoll past 64 a thread (or when
    // asked), and says which ran.
    let io_of = |extra: &[&str]| {
        let mut args = vec!["bench", &url, "-n", "200", "-k", "--json", "-"];
        args.extend_from_slice(extra);
        let out = succeeded(&args);
        let r = json_of(&out.stdout)["runs"][0].clone();
        assert_eq!(r["requests"]["ok"], 200, "{extra:?}");
        r["wire"]["io"].as_str().unwrap().to_string()
    };
    assert_eq!(io_of(&[]), "poll");
    assert_eq!(io_of(&["-c", "64", "-t", "1"]), "poll");
    assert_eq!(io_of(&["-c", "65", "-t", "1"]), "epoll");
    assert_eq!(io_of(&["-c", "100", "-t", "2"]), "poll");
    assert_eq!(io_of(&["--io", "epoll"]), "epoll");
    assert_eq!(io_of(&["--io", "auto"]), "poll");
}

/// Where the kernel refuses io_uring (`kernel.io_uring_disabled` = 2, a seccomp
/// filter), `--io uring` runs on epoll and says so once, however many runs: forced
/// here through the engine's test seam, which fails the ring's setup with EPERM as
/// such a kernel does. TLS and HTTP/2 keep epoll: asking for io_uring there is a usage
/// error.
#[test]
fn refused_io_uring_falls_back_to_epoll_and_says_so_once() {
    let srv = TestServer::start(Mode::Ok);
    let out = volley()
        .env(volley_engine::REFUSE_IO_URING_ENV, "1")
        .args([
            "bench",
            &srv.url("/"),
            "-n",
            "50",
            "-k",
            "--io",
            "uring",
            "--repeat",
            "2",
            "--cooldown",
            "0s",
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let said: Vec<_> = stderr
        .lines()
        .filter(|l| l.contains("io_uring refused"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].contains("using epoll"), "{stderr}");
    let j = json_of(&out.stdout);
    for r in j["runs"].as_array().unwrap() {
        assert_eq!(r["wire"]["io"], "epoll");
        let why = r["wire"]["io_refused"].as_str().unwrap();
        assert!(why.contains("not permitted"), "{why}");
        assert_eq!(r["requests"]["ok"], 50);
    }
    one_line_usage_error(&[&srv.url("/"), "--io", "uring", "--h2"]);
    one_line_usage_error(&["https://127.0.0.1:9/", "--io", "uring"]);
    one_line_usage_error(&[&srv.url("/"), "--io", "poll", "--h2"]);
    one_line_usage_error(&["https://127.0.0.1:9/", "--io", "poll"]);
    one_line_usage_error(&[&srv.url("/"), "--io", "kqueue"]);
}
