//! The plan: a parsed study file resolved into targets, workloads, cells (one point of the
//! sweep axes on one target instance) and the ordered list of steps to run.
//!
//! Pure: no I/O, no clock. The order of steps is where noise is fought
//! (docs/methodology.md, "Repeats, intervals and noise"): by default round r runs every
//! cell once, with the target instance as the innermost axis, so A and B alternate
//! (A B A B) and a slow drift of the machine hits both alike.
//!
//! Split along its seams: [`model`] (the data), [`resolve`](mod@resolve) (study file ->
//! plan; its `[injectors]` part in `injectors`, the keys of agents on other machines in
//! `placement`), [`estimate`] (how long it takes, the ETA's [`RateBook`]) and [`describe`] (the
//! plan as printed).

mod describe;
mod estimate;
mod injectors;
pub mod model;
mod office;
#[cfg(test)]
mod office_tests;
mod placement;
mod replay;
mod resolve;
mod timing;
mod variants;

pub use describe::fmt_duration;
pub use estimate::{RateBook, RateSource, GUESS_RPS_PER_CONNECTION};
pub use model::*;
pub use office::seeded_items;
pub use placement::{check_ssh_option, Seat, SshOptionError};
pub use resolve::{resolve, schedule};
pub use timing::rate_step_length;
pub use variants::{variant_settings, VariantSettings, DEFAULT as DEFAULT_VARIANT};

#[cfg(test)]
mod tests;
