//! volley-units: the one syntax for durations (`30s`, `500ms`) and sizes (`256M`, `1G`)
//! that the command line, the study files and the agents all read, so a value means the
//! same wherever it is written.
//!
//! Place in the flow: at the very start, where raw text (a flag, a study key) becomes a
//! typed value. No I/O, no other volley crate.
#![deny(missing_docs)]

pub mod duration;
pub mod size;

pub use duration::{parse_duration, DurationError};
pub use size::{parse_size, SizeError};
