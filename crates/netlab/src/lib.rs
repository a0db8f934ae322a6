//! volley-netlab: injectors in network namespaces on shaped links (issue 13, item 5).
//!
//! Place in the flow: beside the targets, before a run with `placement = "netns"`. This
//! first step holds only the pure plan of a lab: names unique per volley pid (so two
//! volleys coexist and a dead one's leftovers are recognisable) and addresses from a
//! range that exists only inside the namespaces the lab makes, plus the `tc` tbf
//! parameters derived from a link's rate and delay. Building, measuring and clean-up
//! come in later steps.

pub mod exec;
pub mod plan;
