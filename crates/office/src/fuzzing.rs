//! The fuzz harness of the office's multistatus reader (`fuzz/fuzz_targets/
//! office_multistatus.rs` and the seeded short run in `tests/`): a 207 body comes
//! from the server under test, so any bytes must give a typed answer, never a panic.

use crate::xml::{href_path, parse_multistatus};

/// Parses `data` as a multistatus body and checks what the office relies on: the same
/// bytes give the same answer, and every href read back is a path (`/...`) or what the
/// server wrote when it was no URL.
pub fn multistatus(data: &[u8]) {
    let first = parse_multistatus(data);
    assert_eq!(first, parse_multistatus(data), "parsing is deterministic");
    let Ok(m) = first else {
        return;
    };
    let _ = m.truncated();
    for e in &m.entries {
        let again = href_path(&e.href);
        assert!(again.len() <= e.href.trim().len().max(1), "{e:?}");
        for h in [&e.principal, &e.home].into_iter().flatten() {
            let _ = href_path(h);
        }
    }
}
