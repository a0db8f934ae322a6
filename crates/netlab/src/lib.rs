//! volley-netlab: injectors in network namespaces on shaped links (issue 13, item 5).
//!
//! Place in the flow: beside the targets, before a run with `placement = "netns"`.
//! [`plan`] holds the pure part (names unique per volley pid, so two volleys coexist and a
//! dead one's leftovers are recognisable; addresses from a range that exists only inside
//! the lab's namespaces; tbf parameters from a link's rate and delay); [`lab`] builds and
//! removes the namespaces, bridge, veths and qdiscs with `ip` and `tc`, and sweeps what a
//! killed volley left; [`measure`] measures each link's round trip and throughput before
//! a run; [`proxy`] adds delay through Toxiproxy where the kernel has no netem;
//! [`tune`] writes sysctls and route switches inside the target's namespace only, and
//! proves the host's values did not move; [`enter`] moves a thread (and the threads it
//! starts) into a namespace, so a load runs inside the lab too.
#![deny(missing_docs)]

pub mod enter;
mod error;
pub mod exec;
pub mod lab;
pub mod measure;
pub mod plan;
pub mod proxy;
pub mod tune;

pub use error::NetlabError;
