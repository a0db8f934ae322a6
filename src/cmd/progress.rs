//! The one live progress line on stderr, redrawn in place: `volley bench` and the study
//! runner (through its callback) format their own text and hand it here. Only drawn
//! when stderr is a terminal (the callers check).

use std::io::Write;

/// Redraws the line with `text`, or clears it (`None`, when the load ends).
pub fn draw(text: Option<String>) {
    let mut err = std::io::stderr();
    let _ = match text {
        Some(t) => write!(err, "\r\x1b[2K{t}"),
        None => write!(err, "\r\x1b[2K"),
    };
    let _ = err.flush();
}
