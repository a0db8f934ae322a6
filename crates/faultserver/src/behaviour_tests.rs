use super::*;

#[test]
fn composition_keeps_one_answer_and_all_policies() {
    let b = Behaviour::Status(503)
        .and(Behaviour::Slow {
            delay: Duration::from_millis(5),
        })
        .and(Behaviour::CloseAfter {
            requests: 2,
            announce: true,
        });
    let s = Script::resolve(&b).unwrap();
    assert_eq!(s.answer, Answer::Status(503));
    assert_eq!(s.delay, Some(Duration::from_millis(5)));
    assert_eq!(s.close_after, Some((2, true)));
    let two = Behaviour::NoContent.and(Behaviour::Status(200));
    assert_eq!(
        Script::resolve(&two),
        Err(BehaviourError::TwoAnswers("no-content", "status"))
    );
}

#[test]
fn invalid_values_are_typed_errors() {
    for b in [
        Behaviour::Status(99),
        Behaviour::Status(600),
        Behaviour::Interim(vec![101]),
        Behaviour::Interim(vec![200]),
        Behaviour::Chunked {
            chunk_lens: vec![3, 0],
            extensions: false,
            trailers: false,
        },
        Behaviour::TokenBucket {
            rate_per_s: 0.0,
            burst: 1,
        },
        Behaviour::TokenBucket {
            rate_per_s: f64::NAN,
            burst: 1,
        },
        Behaviour::CloseAfter {
            requests: 0,
            announce: true,
        },
    ] {
        assert!(
            matches!(Script::resolve(&b), Err(BehaviourError::OutOfRange(_))),
            "{b:?}"
        );
    }
}

#[test]
fn text_form_parses() {
    assert_eq!(
        "ok:10+slow:20".parse::<Behaviour>().unwrap(),
        Behaviour::All(vec![
            Behaviour::Ok {
                body_len: 10,
                keep_alive: true
            },
            Behaviour::Slow {
                delay: Duration::from_millis(20)
            }
        ])
    );
    assert_eq!(
        "malformed:bad-chunk-size".parse::<Behaviour>().unwrap(),
        Behaviour::Malformed(MalformedKind::BadChunkSize)
    );
    assert_eq!(
        "bucket:250.5:4".parse::<Behaviour>().unwrap(),
        Behaviour::TokenBucket {
            rate_per_s: 250.5,
            burst: 4
        }
    );
    for bad in [
        "",
        "nope",
        "ok:x",
        "status:1000",
        "bucket",
        "malformed:x",
        "ok+status:200",
    ] {
        assert!(bad.parse::<Behaviour>().is_err(), "{bad}");
    }
}

#[test]
fn head_replies_have_no_body_in_every_mode() {
    let answers = [
        Answer::Ok { body_len: 100 },
        Answer::Status(404),
        Answer::Interim(vec![100]),
        Answer::Chunked {
            chunk_lens: vec![5],
            extensions: true,
            trailers: true,
        },
        Answer::CloseDelimited { body_len: 100 },
        Answer::CloseMidBody,
        Answer::Malformed(MalformedKind::BadChunkSize),
    ];
    for a in answers {
        let get = build_reply(&a, false, ConnHeader::None);
        let head = build_reply(&a, true, ConnHeader::None);
        assert_eq!(head.bytes.len(), head.body_start, "{a:?}");
        assert_eq!(&get.bytes[..get.body_start], &head.bytes[..], "{a:?}");
        assert!(get.bytes.len() > get.body_start, "{a:?}");
    }
}

#[test]
fn chunked_reply_bytes() {
    let r = build_reply(
        &Answer::Chunked {
            chunk_lens: vec![3, 12],
            extensions: true,
            trailers: true,
        },
        false,
        ConnHeader::None,
    );
    let body = String::from_utf8(r.bytes[r.body_start..].to_vec()).unwrap();
    assert_eq!(
        body,
        "3;chunk=0\r\nabc\r\nC;note=\"a;b\"\r\ndefghijklmno\r\n0;last\r\nX-Body-Len: 15\r\nX-Checksum: fault\r\n\r\n"
    );
}
