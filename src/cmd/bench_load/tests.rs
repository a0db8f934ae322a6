//! Unit tests of the load flags' parsing.

use super::*;

#[test]
fn urls_parse() {
    let t = parse_url("http://127.0.0.1:8080/a/b?x=1#frag").unwrap();
    assert_eq!(
        (t.host.as_str(), t.port, t.path.as_str()),
        ("127.0.0.1", 8080, "/a/b?x=1")
    );
    assert_eq!(t.host_header(), "127.0.0.1:8080");
    let t = parse_url("HTTP://localhost").unwrap();
    assert_eq!(
        (t.port, t.path.as_str(), t.host_header().as_str()),
        (80, "/", "localhost")
    );
    let t = parse_url("http://[::1]:9/x").unwrap();
    assert_eq!(
        (t.host.as_str(), t.port, t.host_header().as_str()),
        ("::1", 9, "[::1]:9")
    );
    let t = parse_url("https://localhost/x").unwrap();
    assert!(t.tls);
    assert_eq!((t.port, t.host_header().as_str()), (443, "localhost"));
    let t = parse_url("HTTPS://h:8443").unwrap();
    assert_eq!((t.port, t.host_header().as_str()), (8443, "h:8443"));
    assert_eq!(parse_url("http://h:443/").unwrap().host_header(), "h:443");
    for bad in [
        "ftp://x/",
        "x:80/",
        "http://",
        "http://h:0/",
        "http://h:99999/",
        "http://u@h/",
        "http://[::1/",
    ] {
        assert!(parse_url(bad).is_err(), "{bad} should be rejected");
    }
}

#[test]
fn counts_parse() {
    // Durations: volley_harness::duration's tests.
    assert_eq!(parse_count("-n", "100", 1), Ok(100));
    assert!(parse_count("-n", "0", 1)
        .unwrap_err()
        .contains("at least 1"));
    assert!(parse_count("-n", "-5", 1)
        .unwrap_err()
        .contains("at least 1"));
    assert!(parse_count("-n", "x", 1)
        .unwrap_err()
        .contains("whole number"));
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
