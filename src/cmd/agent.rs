//! `volley agent --bus URL [--name NAME]`: one injector. It joins the bus, waits for
//! its assignment, runs its share through the harness (`volley_agents::load`), streams
//! each second, and exits when the run is over: 0 done or stopped by the coordinator,
//! 1 when the bus was lost (its load stopped first), the coordinator declared it lost
//! and told it to stop, the coordinator was gone (nobody took its records), the load
//! failed, the bus refused its credentials or failed TLS (no TLS, an expired or
//! untrusted certificate), or it refused its assignment (the target outside its
//! allow-list; nothing loaded); 2 on usage (no credentials and no `--insecure-bus`, an
//! unreadable credentials file, a bad `--allow-target`).
//!
//! The bus is secured by default (docs/methodology.md, "Trust on the bus"): the
//! credentials come from `--credentials FILE` or, as a study hands them to the agents it
//! starts, from `VOLLEY_BUS_CREDENTIALS`; never from argv, which `ps` shows anyone.

use std::process::ExitCode;
use std::time::Duration;

use volley_agents::agent::{self, AgentConfig, AgentEvent};
use volley_agents::allow::AllowList;
use volley_agents::auth::{BusCredentials, CREDENTIALS_ENV};
use volley_agents::AgentsError;

use crate::cmd::bench::load::values::positive_duration;

use crate::exit::{usage, Failed};

/// Flags of `volley agent`.
#[derive(clap::Args)]
pub struct Args {
    /// The bus, `nats://HOST:PORT`.
    #[arg(long)]
    bus: String,
    /// Its name on the bus (default `HOST-PID`); unique among the agents of a run.
    #[arg(long)]
    name: Option<String>,
    /// How long to wait for an assignment.
    #[arg(long, default_value = "1h", value_parser = positive_duration)]
    wait: Duration,
    /// Print nothing but errors.
    #[arg(long, short)]
    quiet: bool,
    /// The bus credentials (JSON: user, password, CA, the study's assignment key), as
    /// `volley agents manifest` or a study writes them; default: the
    /// `VOLLEY_BUS_CREDENTIALS` environment variable.
    #[arg(long, value_name = "FILE")]
    credentials: Option<std::path::PathBuf>,
    /// Join a bus without TLS or credentials and take unsigned assignments: only on a
    /// network where everyone who can reach the bus is trusted.
    #[arg(long, conflicts_with = "credentials")]
    insecure_bus: bool,
    /// What this agent may load: CIDR, IP, IP:PORT, HOST or HOST:PORT; repeatable.
    /// Default: loopback and the network this host reaches the bus on. An assignment
    /// outside is refused and nothing is loaded.
    #[arg(long, value_name = "CIDR|HOST[:PORT]")]
    allow_target: Vec<String>,
    /// Connect to the target from this address of this host (default: the kernel's
    /// choice). Agents on one host each given their own (127.0.0.2, 127.0.0.3, ... for a
    /// loopback target) are told apart in the server's log, as `volley log phases` needs.
    #[arg(long, value_name = "IP")]
    source_ip: Option<std::net::IpAddr>,
}

fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().replace(['.', '*', '>', ' '], "-"))
        .unwrap_or_default();
    let host = if host.is_empty() {
        "agent".into()
    } else {
        host
    };
    format!("{host}-{}", std::process::id())
}

/// Runs `volley agent`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !args.bus.starts_with("nats://") {
        usage!("--bus must be a nats://HOST:PORT URL, got '{}'", args.bus);
    }
    let name = args.name.clone().unwrap_or_else(default_name);
    if let Err(e) = volley_agents::msg::check_token("agent name", &name) {
        usage!("--name: {e}");
    }
    let mut cfg = AgentConfig::new(&args.bus, &name);
    cfg.assign_bound = args.wait;
    cfg.auth = credentials(&args)?;
    if !args.allow_target.is_empty() {
        cfg.allow = match AllowList::parse(&args.allow_target) {
            Ok(a) => a,
            Err(e) => usage!("--allow-target {e}"),
        };
    }
    cfg.source_ip = args.source_ip;
    let quiet = args.quiet;
    let mut say = |e: AgentEvent| {
        if quiet {
            return;
        }
        match e {
            AgentEvent::Joined => eprintln!("volley agent {name}: on the bus {}", args.bus),
            AgentEvent::Refused(why) => {
                eprintln!("volley agent {name}: refused {why}; still waiting")
            }
            AgentEvent::Assigned { run, late_ms } if late_ms > 0 => {
                eprintln!("volley agent {name}: run {run}, starting {late_ms} ms late")
            }
            AgentEvent::Assigned { run, .. } => eprintln!("volley agent {name}: run {run}"),
            AgentEvent::Stopped(why) => eprintln!("volley agent {name}: stopped ({why})"),
            AgentEvent::BusLost => eprintln!("volley agent {name}: bus lost, load stopped"),
            // Said once, as the exit line.
            AgentEvent::Stale(_) | AgentEvent::CoordinatorGone | AgentEvent::RefusedTarget(_) => {}
        }
    };
    match agent::run(&cfg, volley_agents::load::run_share, &mut say) {
        Ok(o) => {
            if !quiet {
                eprintln!(
                    "volley agent {name}: run {} over ({:?}), {} seconds sent",
                    o.run, o.ending, o.records_sent
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(AgentsError::BusLost) => Err(Failed(format!(
            "volley agent {name}: the bus was lost; the load was stopped"
        ))
        .into()),
        Err(AgentsError::CoordinatorGone { run, after }) => Err(Failed(format!(
            "volley agent {name}: run {run}: nobody has taken its records for {after:?}, the coordinator is gone; load stopped"
        ))
        .into()),
        Err(AgentsError::Stale { run, reason }) => Err(Failed(format!(
            "volley agent {name}: out of run {run}, load stopped: {reason}"
        ))
        .into()),
        Err(AgentsError::RefusedHere { run, reason }) => Err(Failed(format!(
            "volley agent {name}: refused run {run}: {reason}; nothing loaded"
        ))
        .into()),
        Err(e @ (AgentsError::BusRefused { .. } | AgentsError::BusTls { .. })) => {
            Err(Failed(format!("volley agent {name}: bus {}: {e}", args.bus)).into())
        }
        Err(e) => Err(e.into()),
    }
}

/// The agent's credentials: `--credentials FILE`, else `VOLLEY_BUS_CREDENTIALS`, else
/// none with `--insecure-bus`; neither is a usage error (the bus is secured by default).
fn credentials(args: &Args) -> anyhow::Result<Option<BusCredentials>> {
    if args.insecure_bus {
        return Ok(None);
    }
    let c = match (&args.credentials, std::env::var(CREDENTIALS_ENV)) {
        (Some(f), _) => BusCredentials::load(f),
        (None, Ok(j)) => BusCredentials::from_json(&j, CREDENTIALS_ENV),
        (None, Err(_)) => usage!(
            "the bus is secured by default: give --credentials FILE (or {CREDENTIALS_ENV}), or --insecure-bus for a bus on a network where everyone is trusted"
        ),
    };
    match c {
        Ok(c) => Ok(Some(c)),
        Err(e) => usage!("{e}"),
    }
}
