//! volley-analysis: the pure statistics every later stage leans on.
//!
//! Place in the flow: summaries and the results store hand numbers in; reports and
//! studies take verdicts out. Nothing here does I/O or reads a clock, so every
//! function is unit-tested on synthetic data with known answers.
//!
//! - [`bootstrap`]: median and its bootstrap CI over per-run values;
//! - [`ratio`]: bootstrap CI of an A/B ratio of medians (`volley compare`, A/A tests);
//! - [`sustain`]: the sustainability rule for one rate step and the bound label;
//! - [`link`]: whether a step measured the link volley shaped (the link-bound label);
//! - [`knee`]: capacity from a sweep, and the capacity search state machine;
//! - [`little`]: Little's law consistency check per step;
//! - [`usl`]: Universal Scalability Law fit for concurrency sweeps;
//! - [`phase`]: intervals of a run with the same set of active members (injectors,
//!   or a log's client addresses).
#![deny(missing_docs)]

pub mod bootstrap;
pub mod knee;
pub mod link;
pub mod little;
mod nonfinite;
pub mod phase;
pub mod ratio;
pub mod sustain;
pub mod usl;
pub mod words;
