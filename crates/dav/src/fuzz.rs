//! Seeded fuzz-style test: thousands of mutated XML bodies and targets thrown at every
//! body-parsing method. The handler must never panic, must answer a status from the
//! expected set, and must answer 400 to bodies that are not XML at all.

use crate::tests::{call, TempDir};
use crate::Dav;

/// xorshift64*: deterministic, dependency-free randomness for a reproducible corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const SEEDS: &[&str] = &[
    r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:getetag/><D:resourcetype/><X:y xmlns:X="urn:x"/></D:prop></D:propfind>"#,
    r#"<propfind xmlns="DAV:"><allprop/><include><sync-token/></include></propfind>"#,
    r#"<propertyupdate xmlns="DAV:"><set><prop><t:a xmlns:t="urn:t" xml:lang="en">v<b/></t:a></prop></set><remove><prop><t:c xmlns:t="urn:t"/></prop></remove></propertyupdate>"#,
    r#"<C:calendar-query xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><C:calendar-data/></D:prop><C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT"><C:time-range start="20240101T000000Z" end="20250101T000000Z"/><C:prop-filter name="SUMMARY"><C:text-match negate-condition="yes">x</C:text-match><C:param-filter name="LANGUAGE"><C:is-not-defined/></C:param-filter></C:prop-filter></C:comp-filter></C:comp-filter></C:filter></C:calendar-query>"#,
    r#"<C:calendar-multiget xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><D:getetag/></D:prop><D:href>/cal/a.ics</D:href><D:href>http://h/cal/%2e%2e/x</D:href></C:calendar-multiget>"#,
    r#"<D:sync-collection xmlns:D="DAV:"><D:sync-token>urn:volley:sync:0:0</D:sync-token><D:sync-level>1</D:sync-level><D:prop><D:getetag/></D:prop></D:sync-collection>"#,
    r#"<C:mkcalendar xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:set><D:prop><D:displayname>x</D:displayname></D:prop></D:set></C:mkcalendar>"#,
];

const FRAGMENTS: &[&str] = &[
    "<",
    ">",
    "/>",
    "</",
    "&amp;",
    "&#0;",
    "&#x10FFFF;",
    "&bogus;",
    "xmlns:p=\"\"",
    "xmlns=\"\"",
    "<![CDATA[",
    "]]>",
    "<!DOCTYPE x>",
    "<?pi?>",
    "\u{10348}",
    "\"",
    "'",
    "=",
    "D:",
    ":",
    "<D:prop>",
    "</D:prop>",
    "<C:comp-filter name=\"VTODO\">",
    "<C:time-range start=\"x\"/>",
    "<D:href>/../../etc/passwd</D:href>",
    "<D:sync-token>urn:volley:sync:zz:9</D:sync-token>",
];

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(6) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            1 => b.truncate(at),
            2 => {
                let f = FRAGMENTS[rng.below(FRAGMENTS.len())].as_bytes();
                b.splice(at..at, f.iter().copied());
            }
            3 if !b.is_empty() => {
                let end = (at + rng.below(16)).min(b.len());
                b.drain(at..end);
            }
            4 => {
                let end = (at + rng.below(64)).min(b.len());
                let dup = b[at..end].to_vec();
                b.splice(at..at, dup);
            }
            _ => {
                let junk: Vec<u8> = (0..rng.below(8)).map(|_| rng.next() as u8).collect();
                b.splice(at..at, junk);
            }
        }
    }
    b
}

#[test]
fn mutated_bodies_never_panic_and_garbage_is_400() {
    let d = TempDir::new("fuzz");
    crate::make_calendar(&d.path().join("cal"), "Cal").unwrap();
    let dav = Dav::new(d.path());
    let ev = b"BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:a\r\nDTSTART:20240110T100000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
    assert_eq!(call(&dav, "PUT", "/cal/a.ics", &[], ev).status, 201);
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let methods = ["PROPFIND", "REPORT", "PROPPATCH"];
    let targets = ["/cal/", "/cal/a.ics", "/", "/cal/none.ics"];
    let allowed = [207, 400, 403, 404, 409, 412, 415];
    for i in 0..4000 {
        let seed = SEEDS[rng.below(SEEDS.len())].as_bytes();
        let body = mutate(&mut rng, seed);
        let method = methods[i % methods.len()];
        let target = targets[rng.below(targets.len())];
        let r = call(&dav, method, target, &[("Depth", "1")], &body);
        assert!(
            allowed.contains(&r.status),
            "{method} {target} -> {} for {:?}",
            r.status,
            String::from_utf8_lossy(&body)
        );
        if r.status == 207 {
            // Whatever we answer must itself be well-formed XML.
            assert!(
                crate::xml::parse(&r.body).is_ok(),
                "{}",
                String::from_utf8_lossy(&r.body)
            );
        }
    }
    // Pure garbage (never starts with '<') is always a 400 with a reason.
    for _ in 0..1000 {
        let mut junk: Vec<u8> = (0..1 + rng.below(200)).map(|_| rng.next() as u8).collect();
        if junk[0] == b'<' || junk[0].is_ascii_whitespace() {
            junk[0] = b'x';
        }
        let method = methods[rng.below(2)];
        let r = call(&dav, method, "/cal/", &[("Depth", "1")], &junk);
        assert_eq!(r.status, 400, "{method} {junk:?}");
        assert!(!r.body.is_empty());
    }
    // Mutated targets: never a panic, never a 5xx.
    for _ in 0..1000 {
        let t = mutate(&mut rng, b"/cal/a.ics");
        let t = String::from_utf8_lossy(&t).into_owned();
        let r = call(&dav, "PROPFIND", &t, &[("Depth", "0")], b"");
        assert!(r.status < 500, "{t:?} -> {}", r.status);
    }
}
