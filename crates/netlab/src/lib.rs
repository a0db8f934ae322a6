//! volley-netlab: injectors in network namespaces on shaped links (issue 13, item 5).
//!
//! Place in the flow: beside the targets, before a run with `placement = "netns"`.
//! [`plan`] holds the pure part (names unique per volley pid, so two volleys coexist and a
//! dead one's leftovers are recognisable; addresses from a range that exists only inside
//! the lab's namespaces; tbf parameters from a link's rate and delay); [`lab`] builds and
//! removes the namespaces, bridge, veths and qdiscs with `ip` and `tc`, and sweeps what a
//! killed volley left; [`measure`] measures each link's round trip and throughput before
//! a run; [`proxy`] adds delay through Toxiproxy where the kernel has no netem.
#![deny(missing_docs)]

mod error;
pub mod exec;
pub mod lab;
pub mod measure;
pub mod plan;
pub mod proxy;

pub use error::NetlabError;
