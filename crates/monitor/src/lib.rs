//! volley-monitor: samples the target's CPU, memory, context switches, sockets and network on the load's clock.
#![deny(missing_docs)]
