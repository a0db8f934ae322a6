//! One module per subcommand; each has `Args` (raw flags) and `run(Args)`.

pub mod agent;
pub mod agents;
pub mod bench;
pub mod bench_caldav;
pub mod bench_load;
pub mod bench_save;
pub mod bench_target;
pub mod bench_wire;
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
