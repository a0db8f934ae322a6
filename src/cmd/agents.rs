//! `volley agents`: deploying injectors on other machines. `volley agents manifest`
//! writes the Kubernetes manifests (`volley_agents::manifest`) the user applies with
//! `kubectl apply -f`; the agents then join the bus like local ones.

use crate::exit::UsageError;
use std::path::PathBuf;
use std::process::ExitCode;
use volley_agents::manifest::{self, Request};

/// Flags of `volley agents`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Write Kubernetes manifests (a nats-server Deployment and Service, and an Indexed
    /// Job of N agents) for `kubectl apply -f FILE`.
    Manifest(ManifestArgs),
}

/// Flags of `volley agents manifest`.
#[derive(clap::Args)]
struct ManifestArgs {
    /// Where to write the multi-document YAML (`-` for stdout).
    file: PathBuf,
    /// How many agents: the Job's completions and parallelism (at least 1).
    #[arg(long)]
    injectors: u32,
    /// The bus the agents dial. A host named `volley-nats` (the default, or
    /// `volley-nats.NS.svc...`) means "deploy it": the file gets a nats-server Deployment
    /// and Service of that name on that port. Any other host is an existing server the
    /// file leaves alone.
    #[arg(long, default_value = manifest::DEFAULT_BUS)]
    bus: String,
    /// The agent image (see deploy/Dockerfile).
    #[arg(long, default_value = manifest::DEFAULT_IMAGE)]
    image: String,
    /// The namespace of every object (a Namespace object is written unless `default`).
    #[arg(long, default_value = "default")]
    namespace: String,
}

/// Runs `volley agents`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::Manifest(a) => write_manifest(a),
    }
}

fn write_manifest(a: ManifestArgs) -> anyhow::Result<ExitCode> {
    let req = Request {
        injectors: a.injectors,
        bus: a.bus,
        image: a.image,
        namespace: a.namespace,
    };
    let yaml = manifest::render(&req).map_err(|e| {
        if e.is_usage() {
            anyhow::Error::new(UsageError(e.to_string()))
        } else {
            anyhow::Error::new(e)
        }
    })?;
    if a.file.as_os_str() == "-" {
        print!("{yaml}");
    } else {
        std::fs::write(&a.file, yaml)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", a.file.display()))?;
        eprintln!(
            "volley: wrote {} ({} agents); apply with: kubectl apply -f {}",
            a.file.display(),
            req.injectors,
            a.file.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
