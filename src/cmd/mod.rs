//! One module per subcommand; each has `Args` (raw flags, or its subcommands) and
//! `run(Args)`.

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

/// Removes what a killed volley left before a command starts targets of its own: the
/// targets' processes, and the network labs (a study's, a `bench --sysctl` run's: their
/// namespaces carry its pid). Without `ip` or root volley made no namespace, so an error
/// there says nothing.
pub fn sweep_leftovers() {
    volley_targets::sweep_orphans()
        .iter()
        .for_each(|r| eprintln!("volley: {r}"));
    if let Ok(removed) = volley_netlab::lab::sweep() {
        for ns in removed {
            eprintln!("volley: removed network namespace {ns} left by a volley that was killed");
        }
    }
}
