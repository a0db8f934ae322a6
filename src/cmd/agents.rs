//! `volley agents`: deploying injectors on other machines. `volley agents manifest`
//! writes the Kubernetes manifests (`volley_agents::manifest`) the user applies with
//! `kubectl apply -f`; the agents then join the bus like local ones. With the deployed
//! bus (secured by default) it also writes the coordinator's credentials to a file of
//! mode 0600 beside the manifests, for the study's `bus_credentials`.

use crate::exit::UsageError;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use volley_agents::auth::BusCredentials;
use volley_agents::manifest::{self, Request, Security};

/// The subcommands of `volley agents`.
#[derive(clap::Subcommand)]
pub enum Args {
    /// Write Kubernetes manifests (a nats-server Deployment and Service, and an Indexed
    /// Job of N agents) for `kubectl apply -f FILE`.
    Manifest(ManifestArgs),
}

/// Flags of `volley agents manifest`.
#[derive(clap::Args)]
pub struct ManifestArgs {
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
    /// More names for the deployed bus's certificate: the address the coordinator dials
    /// (besides the Service's names, localhost and 127.0.0.1); repeatable.
    #[arg(long, value_name = "HOST")]
    tls_name: Vec<String>,
    /// Where the coordinator's credentials for the deployed bus go (mode 0600; default
    /// FILE with `.coordinator.json` for its extension, `volley-coordinator.json` with
    /// `-`).
    #[arg(long, value_name = "PATH")]
    coordinator_credentials: Option<PathBuf>,
    /// An existing bus: the credentials file (JSON) every agent uses on it, carried to
    /// the pods in a Secret.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure_bus")]
    agent_credentials: Option<PathBuf>,
    /// No TLS, no credentials, unsigned assignments: only for a cluster network where
    /// everyone who can reach the bus is trusted.
    #[arg(long)]
    insecure_bus: bool,
    /// What the agents may load (CIDR, IP[:PORT], HOST[:PORT]); repeatable. Default:
    /// loopback and the network they reach the bus on (the pods' own), which an
    /// outside target is not on.
    #[arg(long, value_name = "CIDR|HOST[:PORT]")]
    allow_target: Vec<String>,
}

/// Runs `volley agents`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args {
        Args::Manifest(a) => write_manifest(a),
    }
}

fn write_manifest(a: ManifestArgs) -> anyhow::Result<ExitCode> {
    if let Err(e) = volley_agents::allow::AllowList::parse(&a.allow_target) {
        return Err(anyhow::Error::new(UsageError(format!(
            "--allow-target {e}"
        ))));
    }
    let security = match (&a.agent_credentials, a.insecure_bus) {
        (_, true) => Security::Off,
        (Some(f), false) => Security::Given(
            BusCredentials::load(f)
                .map_err(|e| anyhow::Error::new(UsageError(format!("--agent-credentials: {e}"))))?,
        ),
        (None, false) => Security::Generate {
            tls_names: a.tls_name.clone(),
        },
    };
    let req = Request {
        injectors: a.injectors,
        bus: a.bus,
        image: a.image,
        namespace: a.namespace,
        security,
        allow_targets: a.allow_target.clone(),
    };
    let rendered = manifest::render(&req).map_err(|e| {
        if e.is_usage() {
            anyhow::Error::new(UsageError(e.to_string()))
        } else {
            anyhow::Error::new(e)
        }
    })?;
    let yaml = rendered.yaml;
    if let Some(c) = &rendered.coordinator {
        let path = a.coordinator_credentials.clone().unwrap_or_else(|| {
            if a.file.as_os_str() == "-" {
                PathBuf::from("volley-coordinator.json")
            } else {
                a.file.with_extension("coordinator.json")
            }
        });
        write_private(&path, &c.to_json())
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        eprintln!(
            "volley: the coordinator's bus credentials are in {} (mode 0600): bus_credentials = \"{}\" in the study's [injectors]",
            path.display(),
            path.display()
        );
    }
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

/// Writes `text` to a file only its owner may read (mode 0600, also when it existed).
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(text.as_bytes())
}
