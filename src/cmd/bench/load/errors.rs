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
    let total = transport(&s.errors);
    if total == 0 || s.requests.ok == 0 {
        return None;
    }
    let last_ok = s.seconds.iter().rposition(|x| x.ok > 0)?;
    let after: u64 = s.seconds[last_ok + 1..]
        .iter()
        .map(|x| transport(&x.errors))
        .sum();
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
