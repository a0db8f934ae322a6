//! What failed requests say about a run, in one line: the errors by kind, and whether
//! the server went away or dropped connections along the way.

use volley_engine::ErrorKind;
use volley_metrics::Summary;

/// Transport failures: the server refusing, resetting or closing on us.
const TRANSPORT: [ErrorKind; 4] = [
    ErrorKind::Connect,
    ErrorKind::Reset,
    ErrorKind::Closed,
    ErrorKind::Timeout,
];

/// A line describing failures, e.g. "1000 connect errors, 3 reset errors".
pub fn describe_errors(s: &Summary) -> String {
    let parts: Vec<String> = s
        .errors
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(k, n)| {
            format!(
                "{n} {} error{}",
                k.replace('_', "-"),
                if *n == 1 { "" } else { "s" }
            )
        })
        .collect();
    if parts.is_empty() {
        "no requests completed".into()
    } else {
        parts.join(", ")
    }
}

/// What the server did when requests failed at the transport level (refused, reset,
/// closed, timed out) although others succeeded: either it went away (no success after
/// some second) or it dropped some connections along the way.
pub fn server_trouble(s: &Summary) -> Option<String> {
    let transport = |errors: &std::collections::BTreeMap<&'static str, u64>| {
        TRANSPORT
            .iter()
            .map(|k| errors.get(k.name()).copied().unwrap_or(0))
            .sum::<u64>()
    };
    // Connects that found no free local port never reached the server: they are the
    // generator's machine's (`no_free_port`), not refusals. Seconds do not count them
    // apart, so they are taken off the seconds after the last success too: the server
    // is said to have gone away only if more failed there than ports could explain.
    let no_port = s.headroom.map_or(0, |h| h.connects_without_port);
    let total = transport(&s.errors).saturating_sub(no_port);
    if total == 0 || s.requests.ok == 0 {
        return None;
    }
    let last_ok = s.seconds.iter().rposition(|x| x.ok > 0)?;
    let after: u64 = s.seconds[last_ok + 1..]
        .iter()
        .map(|x| transport(&x.errors))
        .sum::<u64>()
        .saturating_sub(no_port);
    Some(if after > 0 {
        format!(
            "the server stopped answering during second {}: no request succeeded after it ({})",
            last_ok + 1,
            describe_errors(s)
        )
    } else {
        format!(
            "the server refused, reset or dropped connections during the run: {total} transport error(s) ({})",
            describe_errors(s)
        )
    })
}

/// A run whose connects found no free local port (EADDRNOTAVAIL, counted by the engine):
/// the generator's machine ran out of ports (TIME_WAIT holds them), so whatever else the
/// run shows, its failures include the generator's, and it is labelled generator-bound,
/// never server-bound, with the count, the sockets held and the TIME_WAIT ones in the
/// reason and the notes (the study step's rule: `sustain::bound_label`).
pub fn no_free_port(s: &mut Summary, failed: u64) {
    if failed == 0 {
        return;
    }
    let h = s.headroom.get_or_insert_with(Default::default);
    h.connects_without_port = failed;
    let counted = h.samples > 0;
    let note = volley_analysis::sustain::no_free_port_note(
        Some(failed),
        counted.then_some((h.ports_in_use_max, h.port_range)),
        counted.then_some(h.time_wait_max),
    );
    s.generator.verdict = volley_metrics::label::Verdict {
        label: volley_metrics::label::Bound::GeneratorBound,
        reason: note.clone(),
    };
    s.notes.push(note);
}
