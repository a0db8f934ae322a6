use super::*;
use rand::{Rng, SeedableRng};

fn one(f: &LogFormat, line: &str) -> Result<Parsed, SkipCause> {
    LineParser::new(f.clone()).parse(line.as_bytes(), 7)
}

const COMBINED_LINE: &str = r#"203.0.113.9 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif?a=1 HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)""#;

#[test]
fn combined_and_common_lines() {
    let p = one(&LogFormat::combined(), COMBINED_LINE).unwrap();
    assert!(p.whole_second);
    let r = p.rec;
    assert_eq!(r.line, 7);
    assert_eq!(r.client, "203.0.113.9");
    assert_eq!(r.at_us, 971_211_336_000_000);
    assert_eq!(
        (r.method.as_str(), r.target.as_str()),
        ("GET", "/apache_pb.gif?a=1")
    );
    assert_eq!(r.protocol.as_deref(), Some("HTTP/1.0"));
    assert_eq!((r.status, r.bytes), (Some(200), Some(2326)));
    assert_eq!(
        r.referer.as_deref(),
        Some("http://www.example.com/start.html")
    );
    assert_eq!(
        r.user_agent.as_deref(),
        Some("Mozilla/4.08 [en] (Win98; I ;Nav)")
    );
    let common = &COMBINED_LINE[..COMBINED_LINE.find(" \"http").unwrap()];
    let r = one(&LogFormat::common(), common).unwrap().rec;
    assert_eq!((r.bytes, r.user_agent), (Some(2326), None));
    // A common line is not a combined one, and the reverse.
    assert_eq!(
        one(&LogFormat::combined(), common).err(),
        Some(SkipCause::Layout)
    );
    assert_eq!(
        one(&LogFormat::common(), COMBINED_LINE).err(),
        Some(SkipCause::Layout)
    );
}

#[test]
fn volley_servers_own_lines_have_microseconds_and_escapes() {
    let line = r#"127.0.0.2 - - [27/Nov/2026:15:00:01.000250 +0000] "GET /a\"b\x7f HTTP/1.1" 404 - "-" "volley""#;
    let p = one(&LogFormat::combined(), line).unwrap();
    assert!(!p.whole_second);
    assert_eq!(p.rec.at_us % 1_000_000, 250);
    assert_eq!(p.rec.target, "/a\"b\u{7f}");
    assert_eq!(
        (p.rec.status, p.rec.bytes, p.rec.referer),
        (Some(404), Some(0), None)
    );
}

#[test]
fn bad_lines_name_their_cause() {
    let f = LogFormat::combined();
    let cases = [
        ("garbage", SkipCause::Layout),
        (
            r#"1.2.3.4 - - [10/Oct/2000:13:55:99 -0700] "GET / HTTP/1.1" 200 1 "-" "-""#,
            SkipCause::Time,
        ),
        (
            r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "\x16\x03\x01" 400 1 "-" "-""#,
            SkipCause::Request,
        ),
        (
            r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 2000 1 "-" "-""#,
            SkipCause::Status,
        ),
        (
            r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 x "-" "-""#,
            SkipCause::Number,
        ),
        (
            r#"1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 1 "-" "unterminated"#,
            SkipCause::Layout,
        ),
    ];
    for (line, cause) in cases {
        assert_eq!(one(&f, line).err(), Some(cause), "{line}");
    }
}

#[test]
fn a_custom_nginx_format_with_msec_and_request_time() {
    let f = LogFormat::parse(
        r#"$remote_addr [$msec] "$request_method $request_uri" $status $body_bytes_sent $request_time "$http_host" $upstream_addr"#,
    )
    .unwrap();
    assert!(f.stamp_is_end());
    let r = one(
        &f,
        r#"::1 [1700000000.250] "POST /api?x=1" 201 17 0.050 "shop.example" 10.0.0.1:80"#,
    )
    .unwrap();
    assert!(!r.whole_second);
    let r = r.rec;
    assert_eq!((r.client.as_str(), r.at_us), ("::1", 1_700_000_000_250_000));
    assert_eq!((r.method.as_str(), r.target.as_str()), ("POST", "/api?x=1"));
    assert_eq!(
        (r.request_time_us, r.host.as_deref()),
        (Some(50_000), Some("shop.example"))
    );
    assert_eq!(r.protocol, None);
    // `${name}` is the same variable.
    assert!(LogFormat::parse("${remote_addr} $time_iso8601 $request").is_ok());
}

#[test]
fn a_custom_apache_format_with_usec_and_duration() {
    let f = LogFormat::parse(r#"%a %{usec}t \"%m %U%q %H\" %>s %B %D \"%{User-agent}i\""#).unwrap();
    assert!(!f.stamp_is_end());
    let r = one(
        &f,
        r#"10.1.1.1 1700000000000123 "GET /x?y=2 HTTP/1.1" 200 5 1500 "curl""#,
    )
    .unwrap()
    .rec;
    assert_eq!(
        (r.at_us, r.target.as_str()),
        (1_700_000_000_000_123, "/x?y=2")
    );
    assert_eq!(
        (r.request_time_us, r.user_agent.as_deref()),
        (Some(1_500), Some("curl"))
    );
    let r = one(
        &f,
        r#"10.1.1.1 1700000000000123 "GET /x HTTP/1.1" 200 5 1500 "curl""#,
    )
    .unwrap()
    .rec;
    assert_eq!(r.target, "/x");
    let end = LogFormat::parse(r#"%h %{end:msec}t "%r""#).unwrap();
    assert!(end.stamp_is_end());
}

#[test]
fn formats_that_cannot_describe_a_log_are_refused() {
    for bad in [
        "nonsense",
        "$remote_addr $request",    // no time
        "$remote_addr $time_local", // no request
        "$time_local$request",      // no separator
        "%h %{%d/%b}t \"%r\"",      // strftime times
        "%h %t \"%r\" %",           // lone %
    ] {
        assert!(
            matches!(LogFormat::parse(bad), Err(LogError::Format(_))),
            "{bad}"
        );
    }
}

#[test]
fn json_lines_by_nginx_variable_names() {
    let f = LogFormat::json();
    let r = one(&f, r#"{"remote_addr":"1.2.3.4","time_iso8601":"2023-11-14T22:13:20+00:00","request":"GET /j HTTP/2.0","status":"304","body_bytes_sent":0,"request_time":"0.002","extra":[1]}"#)
        .unwrap()
        .rec;
    assert_eq!((r.at_us, r.target.as_str()), (1_700_000_000_000_000, "/j"));
    assert_eq!((r.status, r.request_time_us), (Some(304), Some(2_000)));
    let r = one(
        &f,
        r#"{"msec":1700000000.5,"request_method":"PUT","request_uri":"/k","status":201}"#,
    )
    .unwrap()
    .rec;
    assert_eq!(
        (r.at_us, r.method.as_str(), r.client.as_str()),
        (1_700_000_000_500_000, "PUT", "-")
    );
    assert_eq!(one(&f, "[1]").err(), Some(SkipCause::Json));
    assert_eq!(one(&f, r#"{"status":200}"#).err(), Some(SkipCause::Json));
}

#[test]
fn detection_picks_the_layout_most_lines_have() {
    let lines = |s: &str| vec![s.as_bytes().to_vec(); 3];
    assert_eq!(
        LogFormat::detect(&lines(COMBINED_LINE)).unwrap().name(),
        "combined"
    );
    let common = &COMBINED_LINE[..COMBINED_LINE.find(" \"http").unwrap()];
    assert_eq!(LogFormat::detect(&lines(common)).unwrap().name(), "common");
    let json = r#"{"msec":"1.5","request":"GET / HTTP/1.1"}"#;
    assert_eq!(LogFormat::detect(&lines(json)).unwrap().name(), "json");
    assert_eq!(LogFormat::detect(&lines("hello world")), None);
}

/// A short seeded fuzz: mutated valid lines never panic any parser, and whatever
/// parses has a request target and a method that are tokens.
#[test]
fn seeded_mutations_never_panic_the_parsers() {
    let formats = [
        LogFormat::combined(),
        LogFormat::common(),
        LogFormat::json(),
        LogFormat::parse(r#"$remote_addr [$msec] "$request" $status $request_time"#).unwrap(),
        LogFormat::parse(r#"%h %{usec}t "%r" %>s %D"#).unwrap(),
    ];
    let seeds: [&[u8]; 4] = [
        COMBINED_LINE.as_bytes(),
        br#"1.2.3.4 [1700000000.250] "GET /a\"\x41 HTTP/1.1" 200 0.5"#,
        br#"{"remote_addr":"1.2.3.4","msec":"1700000000.1","request":"GET / HTTP/1.1"}"#,
        br#"1.2.3.4 1700000000000123 "GET / HTTP/1.1" 200 15"#,
    ];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(25);
    let mut parsers: Vec<LineParser> = formats.into_iter().map(LineParser::new).collect();
    for _ in 0..20_000 {
        let mut line = seeds[rng.random_range(0..seeds.len())].to_vec();
        for _ in 0..rng.random_range(1..6) {
            let at = rng.random_range(0..=line.len());
            match rng.random_range(0..4) {
                0 if at < line.len() => line[at] = rng.random(),
                1 if at < line.len() => {
                    line.remove(at);
                }
                2 => line.insert(at, *b"\"\\[] -.:0x9".get(rng.random_range(0..11)).unwrap()),
                _ => line.truncate(at),
            }
        }
        for p in &mut parsers {
            if let Ok(parsed) = p.parse(&line, 1) {
                assert!(valid_method(&parsed.rec.method), "{line:?}");
                assert!(!parsed.rec.target.is_empty(), "{line:?}");
            }
        }
    }
}
