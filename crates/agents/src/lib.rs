//! volley-agents: several injectors driven over a NATS bus.
//!
//! Place in the flow: beside the engine. A coordinator splits a study's load into exact
//! [`share`]s, measures each injector's [`clock`] offset, sends every agent its share and
//! one start instant T0 over the [`bus`]; each agent runs its share with a load function
//! the caller gives (the harness's measured run, or a synthetic load in tests) and
//! streams one record per second ([`msg`]). The coordinator [`merge`]s the per-second
//! HDR histograms exactly (added, never averaged) and cuts the run into [`phase`]s by
//! the set of active injectors. [`server::PrivateNats`] starts a private `nats-server`
//! on loopback for local runs; [`auth`] secures the bus (TLS, per-study credentials,
//! permissions, signed assignments) and [`allow`] bounds what an agent may load.
//!
//! The pure parts (shares, clock, merge, phases, subjects) need no bus and are
//! table-tested; tokio lives only inside [`bus`], [`agent`] and [`coordinator`], whose
//! public functions block.
#![deny(missing_docs)]

pub mod agent;
pub mod allow;
pub mod auth;
pub mod bus;
pub mod clock;
mod collect;
pub mod coordinator;
mod error;
pub mod fold;
#[doc(hidden)]
pub mod fuzzing;
pub mod load;
pub mod local;
pub mod manifest;
pub mod merge;
pub mod msg;
pub mod outbox;
pub mod phase;
pub mod server;
pub mod share;
pub mod ssh;
mod streaming;
pub mod whole;

pub use error::AgentsError;
