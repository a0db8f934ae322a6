//! Unit tests of the load flags' resolution (URL forms: volley_engine::http_url's tests;
//! value syntaxes: values.rs's).

use super::*;
use clap::Parser;

/// The load flags alone, parsed as bench parses them.
#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    load: LoadArgs,
}

fn args(line: &[&str]) -> LoadArgs {
    Flags::try_parse_from(std::iter::once("bench").chain(line.iter().copied()))
        .unwrap()
        .load
}

fn headers_of(line: &[&str]) -> Vec<(String, String)> {
    let load = Load::resolve(&args(line)).unwrap();
    load.headers
        .iter()
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect()
}

#[test]
fn url_lists_parse_with_weights_and_comments() {
    let l = parse_url_list("# mix\nhttp://h/a 3\n/b\n\n/c 0.5\n").unwrap();
    assert_eq!(l.len(), 3);
    assert_eq!(l[0], ("http://h/a".to_string(), Some(3.0)));
    assert_eq!(l[1], ("/b".to_string(), None));
    assert!(parse_url_list("/a -1\n").is_err());
    assert!(parse_url_list("/a 1 2\n").is_err());
    assert!(parse_url_list("# nothing\n").is_err());
}

#[test]
fn defaults_show_as_typed_values() {
    let a = args(&["http://h/"]);
    assert_eq!((a.connections, a.threads, a.repeat, a.block), (1, 1, 1, 1));
    assert_eq!(a.timeout, Duration::from_secs(30));
    assert_eq!(a.cooldown, Duration::from_secs(2));
    assert!(Flags::try_parse_from(["bench", "http://h/", "-n", "0"]).is_err());
    assert!(Flags::try_parse_from(["bench", "http://h/", "--arrival", "x"]).is_err());
}

#[test]
fn requests_name_volley_and_a_body_its_type() {
    let ua = ("User-Agent".to_string(), USER_AGENT.to_string());
    assert_eq!(headers_of(&["http://h/"]), vec![ua.clone()]);
    assert!(USER_AGENT.starts_with("volley/"));
    let h = headers_of(&["http://h/", "--body", "x"]);
    assert!(h.contains(&("Content-Type".into(), "application/octet-stream".into())));
    let h = headers_of(&["http://h/", "--body", "x", "-T", "application/json"]);
    assert!(h.contains(&("Content-Type".into(), "application/json".into())));
    // A header given with -H wins over the defaults.
    let h = headers_of(&[
        "http://h/",
        "--body",
        "x",
        "-H",
        "content-type: text/plain",
        "-H",
        "User-Agent: other",
    ]);
    assert_eq!(h.len(), 2, "{h:?}");
    assert!(Load::resolve(&args(&["http://h/", "-T", "text/plain"])).is_err());
}

#[test]
fn concurrency_beyond_the_requests_is_refused_as_ab_does() {
    assert!(Load::resolve(&args(&["http://h/", "-c", "64"])).is_err());
    assert!(Load::resolve(&args(&["http://h/", "-c", "64", "-n", "63"])).is_err());
    assert!(Load::resolve(&args(&["http://h/", "-c", "64", "-n", "64"])).is_ok());
    assert!(Load::resolve(&args(&["http://h/", "-c", "64", "-d", "1s"])).is_ok());
    assert!(Load::resolve(&args(&["http://h/", "-c", "64", "--rate", "10"])).is_ok());
}

#[test]
fn one_load_aims_at_several_destinations() {
    let load = Load::resolve(&args(&["http://h/", "-n", "5", "--body", "b"])).unwrap();
    for url in ["http://127.0.0.1:8/a?q", "http://[::1]:9/b"] {
        let u = HttpUrl::parse(url).unwrap();
        let spec = load.at(&[(u.clone(), None)], None).unwrap();
        assert_eq!(spec.cfg.addr, u.socket_addr().unwrap());
        assert_eq!(spec.url, url);
        assert_eq!(spec.method, "POST");
        assert_eq!(spec.cfg.stop.requests, Some(5));
    }
}
