//! One module per subcommand; each has `Args` (raw flags) and `run(Args)`.

pub mod agent;
pub mod agents;
pub mod bench;
pub mod compare;
pub mod demo;
pub mod fixtures;
pub mod hint;
pub mod history;
pub mod log;
pub mod passwd;
pub mod progress;
pub mod report;
pub mod serve;
pub mod study;
pub mod table;
pub mod targets;
