//! One module per subcommand; each has `Args` (raw flags) and `run(Args)`.

pub mod bench;
pub mod demo;
pub mod fixtures;
pub mod serve;
pub mod targets;
