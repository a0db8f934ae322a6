//! volley-analysis: the pure statistics every later stage leans on.
//!
//! Place in the flow: summaries and the results store hand numbers in; reports and
//! studies take verdicts out. Nothing here does I/O or reads a clock, so every
//! function is unit-tested on synthetic data with known answers.
#![deny(missing_docs)]

pub mod bootstrap;
