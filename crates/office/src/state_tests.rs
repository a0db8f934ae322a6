//! One copy of an item's text between the truth and the devices' mirrors (issue 26),
//! driven through the state changes a write and a read make, without a server.

use std::sync::Arc;

use crate::state::{offline_user, MirrorItem, User};
use crate::writes::{accepted, created};

const CAL: &str = "/office1/calendars/calendar/";

/// Device `d` reads `name` as the server sends it (`text`), as a multiget or GET keeps it.
fn read(u: &mut User, d: usize, name: &str, text: &str, etag: &str) {
    let data = u.truth.share(name, text);
    let copy = MirrorItem {
        etag: Some(etag.into()),
        data,
    };
    u.devices[d].mirror.insert(name.into(), copy);
}

fn data<'a>(u: &'a User, d: usize, name: &str) -> &'a Arc<str> {
    &u.devices[d].mirror[name].data
}

#[test]
fn the_truth_and_both_mirrors_hold_one_allocation_until_a_device_edits() {
    let mut u = offline_user("office1", CAL);
    let name = "office1-0.ics".to_string();
    let first = u.item_text(0, 0);
    created(&mut u, 0, name.clone(), 0, first, Some("\"e0\"".into()));
    // The other device's sync fetches what the server holds: the same bytes.
    let served = u.truth.items[&name].data.to_string();
    read(&mut u, 1, &name, &served, "\"e0\"");
    let truth = &u.truth.items[&name].data;
    assert!(Arc::ptr_eq(truth, data(&u, 0, &name)));
    assert!(Arc::ptr_eq(truth, data(&u, 1, &name)));
    assert_eq!(Arc::strong_count(truth), 3);

    // Device 0 edits: the truth and its mirror take the new text, one allocation;
    // device 1 still holds revision 0 until its next sync.
    let edited = u.item_text(0, 1);
    accepted(
        &mut u,
        0,
        &name,
        1,
        edited,
        Some("\"e0\""),
        Some("\"e1\"".into()),
    );
    let truth = &u.truth.items[&name].data;
    assert!(truth.contains("SEQUENCE:1\r\n"));
    assert!(Arc::ptr_eq(truth, data(&u, 0, &name)));
    assert!(!Arc::ptr_eq(truth, data(&u, 1, &name)));
    assert_eq!(**data(&u, 1, &name), *served);
    assert_eq!(Arc::strong_count(data(&u, 1, &name)), 1);
    assert_eq!(u.violations.total(), 0);
}

#[test]
fn a_copy_read_back_otherwise_is_the_devices_own() {
    let mut u = offline_user("office1", CAL);
    let name = "office1-3.ics".to_string();
    let text = u.item_text(3, 0);
    created(&mut u, 0, name.clone(), 3, text, Some("\"e3\"".into()));
    // A server that folds long lines (RFC 5545 3.1): the same item, other bytes.
    let folded = u.truth.items[&name]
        .data
        .replace("review the open", "review the\r\n  open");
    read(&mut u, 1, &name, &folded, "\"e3\"");
    assert!(!Arc::ptr_eq(&u.truth.items[&name].data, data(&u, 1, &name)));
    assert_eq!(**data(&u, 1, &name), *folded);
    // An item the truth does not hold (deleted elsewhere) is the device's own too.
    read(&mut u, 1, "office1-9.ics", &folded, "\"e9\"");
    assert_eq!(Arc::strong_count(data(&u, 1, "office1-9.ics")), 1);
}
