//! Kubernetes manifests for agents on a cluster: `volley agents manifest`.
//!
//! Place in the flow: before a run, on the user's side. The user applies what this writes
//! with `kubectl apply -f`; each pod of the Indexed Job runs `volley agent` and joins the
//! bus, where the coordinator waits for N agents as for local ones. Volley never talks to
//! the cluster itself (as k6-operator's manifests, the cluster's own controllers do the
//! placing, restarting is switched off).
//!
//! The objects are typed structs serialised with serde and written as YAML by
//! `serde_norway` (the maintained fork of the deprecated `serde_yaml`), never string
//! templates, so quoting and nesting are the serializer's job. Only the fields volley sets
//! are modelled; the test validates the output against a Kubernetes release's schema.
//!
//! The bus is secured by default ([`crate::auth`]): with a deployed `nats-server` the
//! manifests carry fresh keys, the server's certificate, key and config in the Secret
//! `volley-nats-tls` and each agent's credentials in the Secret `volley-agents-bus`
//! (mounted read-only, group-readable by the pods' group only), and the coordinator's
//! credentials come back to the caller for a file of its own. An existing bus takes the
//! agents' credentials the user gives; `Security::Off` is the explicit opt-out.

use crate::auth::{BusCredentials, StudyKeys};
use serde::Serialize;
use std::collections::BTreeMap;

/// The bus URL whose host is the `nats-server` these manifests deploy.
pub const DEFAULT_BUS: &str = "nats://volley-nats:4222";
/// The Service (and Deployment) name of the deployed `nats-server`: a `--bus` URL whose
/// first host label is this means "deploy it"; any other host means "use that one".
pub const NATS_NAME: &str = "volley-nats";
/// The agent image when none is given (built from `deploy/Dockerfile`).
pub const DEFAULT_IMAGE: &str = "volley:latest";
/// The `nats-server` image (official, scratch-based: the binary alone at `/nats-server`;
/// runs as any uid, needs no writable root).
pub const NATS_IMAGE: &str = "nats:2.10-scratch";
/// The env var an Indexed Job gives each pod: its completion index, 0..N.
pub const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// Agent names are this prefix and the pod's completion index.
pub const AGENT_PREFIX: &str = "agent-";
/// The Job's name (and the agents' app label).
pub const JOB_NAME: &str = "volley-agents";
/// The uid/gid pods run as: not root, and numeric so `runAsNonRoot` can be checked
/// without reading the image's `/etc/passwd`.
const RUN_AS: i64 = 65_532;
/// The Secret of the deployed server's certificate, key and config.
pub const NATS_SECRET: &str = "volley-nats-tls";
/// Where the server's pod mounts it.
pub const NATS_SECRET_DIR: &str = "/etc/nats";
/// The Secret of the agents' bus credentials (`agent-N`, or `agent` for all).
pub const AGENTS_SECRET: &str = "volley-agents-bus";
/// Where the agents' pods mount it.
pub const AGENTS_SECRET_DIR: &str = "/etc/volley-bus";
/// Secret files: read by owner and the pods' group (`fsGroup`), nobody else.
const SECRET_MODE: u32 = 0o440;

/// How the manifests secure the bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Security {
    /// Fresh keys for the deployed server (the default). `tls_names`: more names for
    /// its certificate, the address the coordinator dials besides the Service's names,
    /// `localhost` and `127.0.0.1` (a `kubectl port-forward`).
    Generate {
        /// Extra DNS names or IP addresses.
        tls_names: Vec<String>,
    },
    /// An existing bus: the credentials every agent uses on it.
    Given(BusCredentials),
    /// No TLS, no credentials: `volley agent --insecure-bus`.
    Off,
}

/// What went wrong building manifests: every variant but [`ManifestError::Yaml`] is a
/// mistake in the request (a usage error).
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// Fewer than one injector.
    #[error("--injectors must be at least 1 (got {0})")]
    Injectors(u32),
    /// Not a DNS-1123 label.
    #[error("namespace {0:?} is not a DNS-1123 label (a-z, 0-9 and '-', at most 63, starting and ending alphanumeric)")]
    Namespace(String),
    /// Not an OCI image reference.
    #[error("image {0:?} is not an image reference ([host[:port]/]name[:tag][@sha256:digest], lowercase name)")]
    Image(String),
    /// Not a `nats://HOST[:PORT]` URL.
    #[error("bus {0:?} is not a nats://HOST[:PORT] URL")]
    Bus(String),
    /// A completion index that is not a number.
    #[error("{INDEX_ENV}={0:?} is not a completion index")]
    Index(String),
    /// A security choice that does not fit the bus (fresh keys for a server the
    /// manifests do not deploy, given credentials for one they do).
    #[error("{0}")]
    Security(String),
    /// The keys could not be made (a bug or no OS randomness, never expected).
    #[error("making the bus's keys: {0}")]
    Keys(#[source] crate::AgentsError),
    /// The serializer failed (a bug, never expected).
    #[error("writing YAML: {0}")]
    Yaml(#[from] serde_norway::Error),
}

impl ManifestError {
    /// Whether the request was at fault (exit 2) rather than volley (exit 1).
    pub fn is_usage(&self) -> bool {
        !matches!(self, ManifestError::Yaml(_) | ManifestError::Keys(_))
    }
}

/// A manifest request, as `volley agents manifest` resolves its flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// How many agents (the Job's completions and parallelism).
    pub injectors: u32,
    /// The bus URL the agents dial.
    pub bus: String,
    /// The agent image.
    pub image: String,
    /// The namespace every object goes in.
    pub namespace: String,
    /// How the bus is secured.
    pub security: Security,
    /// `--allow-target` values of every agent (empty: the agent's default, loopback and
    /// the pod network, which an outside target is not on).
    pub allow_targets: Vec<String>,
}

/// What [`render`] makes.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The multi-document YAML.
    pub yaml: String,
    /// The coordinator's credentials for the deployed bus (with [`Security::Generate`]),
    /// for the study's `bus_credentials` file.
    pub coordinator: Option<BusCredentials>,
}

impl Request {
    /// N agents on the default bus, image and namespace.
    pub fn new(injectors: u32) -> Self {
        Request {
            injectors,
            bus: DEFAULT_BUS.into(),
            image: DEFAULT_IMAGE.into(),
            namespace: "default".into(),
            security: Security::Generate {
                tls_names: Vec::new(),
            },
            allow_targets: Vec::new(),
        }
    }
}

/// The agent name of a pod whose `JOB_COMPLETION_INDEX` is `index`: what the Job's
/// `--name agent-$(JOB_COMPLETION_INDEX)` expands to, checked.
pub fn agent_name(index: &str) -> Result<String, ManifestError> {
    let n: u32 = index
        .trim()
        .parse()
        .map_err(|_| ManifestError::Index(index.into()))?;
    Ok(format!("{AGENT_PREFIX}{n}"))
}

/// The agent name from this process's `JOB_COMPLETION_INDEX`, if it has one.
pub fn agent_name_from_env() -> Option<Result<String, ManifestError>> {
    std::env::var(INDEX_ENV).ok().map(|i| agent_name(&i))
}

/// The multi-document YAML for `req`: a Namespace (unless `default`), the `nats-server`
/// Secret, Deployment and Service when the bus is ours to deploy, the agents' Secret
/// (unless the security is off) and their Indexed Job.
pub fn render(req: &Request) -> Result<Rendered, ManifestError> {
    if req.injectors < 1 {
        return Err(ManifestError::Injectors(req.injectors));
    }
    if !is_dns_label(&req.namespace) {
        return Err(ManifestError::Namespace(req.namespace.clone()));
    }
    if !is_image_ref(&req.image) {
        return Err(ManifestError::Image(req.image.clone()));
    }
    let bus = BusUrl::parse(&req.bus)?;
    let keys = match (&req.security, bus.deploys_nats()) {
        (Security::Generate { tls_names }, true) => Some(keys_for(req, &bus, tls_names)?),
        (Security::Generate { .. }, false) => {
            return Err(ManifestError::Security(format!(
                "{} is an existing bus: give the agents' credentials on it (--agent-credentials FILE), or --insecure-bus",
                req.bus
            )))
        }
        (Security::Given(_), true) => {
            return Err(ManifestError::Security(
                "the deployed bus gets fresh keys: --agent-credentials is for an existing bus"
                    .into(),
            ))
        }
        _ => None,
    };
    let mut docs = Vec::new();
    if req.namespace != "default" {
        docs.push(serde_norway::to_string(&namespace(&req.namespace))?);
    }
    if bus.deploys_nats() {
        if let Some(k) = &keys {
            docs.push(serde_norway::to_string(&nats_secret(req, k))?);
        }
        docs.push(serde_norway::to_string(&nats_deployment(req, &bus))?);
        docs.push(serde_norway::to_string(&nats_service(req, &bus))?);
    }
    let agents_secret = match (&req.security, &keys) {
        (_, Some(k)) => Some(
            k.agents
                .iter()
                .map(|(n, c)| (n.clone(), c.to_json()))
                .collect(),
        ),
        (Security::Given(c), None) => Some([("agent".to_string(), c.to_json())].into()),
        _ => None,
    };
    if let Some(data) = agents_secret {
        docs.push(serde_norway::to_string(&secret(
            req,
            AGENTS_SECRET,
            JOB_NAME,
            data,
        ))?);
    }
    docs.push(serde_norway::to_string(&agents_job(req))?);
    Ok(Rendered {
        yaml: docs.join("---\n"),
        coordinator: keys.map(|k| k.coordinator),
    })
}

/// Fresh keys for the deployed server: its certificate names the Service (short and
/// qualified), `localhost`, `127.0.0.1` and `tls_names`.
fn keys_for(req: &Request, bus: &BusUrl, tls_names: &[String]) -> Result<StudyKeys, ManifestError> {
    let ns = &req.namespace;
    let all = [
        NATS_NAME.into(),
        format!("{NATS_NAME}.{ns}"),
        format!("{NATS_NAME}.{ns}.svc"),
        format!("{NATS_NAME}.{ns}.svc.cluster.local"),
        bus.host.clone(),
        "localhost".into(),
        "127.0.0.1".into(),
    ];
    let mut hosts: Vec<String> = Vec::new();
    for h in all.into_iter().chain(tls_names.iter().cloned()) {
        if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let names: Vec<String> = (0..req.injectors)
        .map(|i| format!("{AGENT_PREFIX}{i}"))
        .collect();
    StudyKeys::generate(&hosts, &names).map_err(ManifestError::Keys)
}

/// A parsed `nats://HOST[:PORT]`.
#[derive(Debug, PartialEq, Eq)]
struct BusUrl {
    host: String,
    port: u16,
}

impl BusUrl {
    fn parse(url: &str) -> Result<Self, ManifestError> {
        let bad = || ManifestError::Bus(url.into());
        let rest = url.strip_prefix("nats://").ok_or_else(bad)?;
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<u16>().map_err(|_| bad())?),
            None => (rest, 4222),
        };
        let host_ok = !host.is_empty()
            && host.split('.').all(|l| {
                !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        if !host_ok || port == 0 {
            return Err(bad());
        }
        Ok(BusUrl {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// Ours to deploy: `volley-nats`, or `volley-nats.NS[.svc[.cluster.local]]`.
    fn deploys_nats(&self) -> bool {
        self.host.split('.').next() == Some(NATS_NAME)
    }
}

/// RFC 1123 label, as Kubernetes checks namespaces.
fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// The distribution spec's reference grammar, simplified to what a pod's `image` takes:
/// `[host[:port]/]path[:tag][@algo:hex]`, path components lowercase alphanumerics joined
/// by `.`, `_`, `__` or `-`.
fn is_image_ref(s: &str) -> bool {
    let (name_tag, digest) = match s.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (s, None),
    };
    if let Some(d) = digest {
        let Some((algo, hex)) = d.split_once(':') else {
            return false;
        };
        let algo_ok = !algo.is_empty()
            && algo
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"+._-".contains(&c));
        if !algo_ok || hex.len() < 32 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return false;
        }
    }
    // A tag follows the last ':' that comes after the last '/'.
    let slash = name_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_tag[slash..].rfind(':') {
        Some(i) => (&name_tag[..slash + i], Some(&name_tag[slash + i + 1..])),
        None => (name_tag, None),
    };
    if let Some(t) = tag {
        let ok = (1..=128).contains(&t.len())
            && !t.starts_with(['.', '-'])
            && t.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c));
        if !ok {
            return false;
        }
    }
    let mut parts: Vec<&str> = name.split('/').collect();
    // The first part is a registry host when it has a '.', a ':' or is localhost.
    if parts.len() > 1 && (parts[0].contains(['.', ':']) || parts[0] == "localhost") {
        let host = parts.remove(0);
        let (h, p) = host.split_once(':').unwrap_or((host, "0"));
        let host_ok = !h.is_empty()
            && h.split('.').all(|l| {
                !l.is_empty() && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
            });
        if !host_ok || p.parse::<u16>().is_err() {
            return false;
        }
    }
    !name.is_empty() && name.len() <= 255 && parts.iter().all(|p| is_path_component(p))
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn is_path_component(p: &str) -> bool {
    let b = p.as_bytes();
    if b.is_empty() || !b[0].is_ascii_alphanumeric() || !b[b.len() - 1].is_ascii_alphanumeric() {
        return false;
    }
    let sep = |c: u8| b"._-".contains(&c);
    b.iter()
        .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || sep(c))
        && !p.contains("..")
        && !p.contains("___")
        && !p.contains("._")
        && !p.contains("_.")
        && !p.contains(".-")
        && !p.contains("-.")
        && !p.contains("_-")
        && !p.contains("-_")
}

mod build;
pub use build::agent_args;
use build::*;

// ---- the objects: only the fields volley sets ----

type Labels = BTreeMap<String, String>;

fn labels(app: &str) -> Labels {
    [
        ("app.kubernetes.io/name".to_string(), app.to_string()),
        (
            "app.kubernetes.io/part-of".to_string(),
            "volley".to_string(),
        ),
    ]
    .into()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Object<S: Serialize> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Meta,
    #[serde(skip_serializing_if = "Option::is_none")]
    spec: Option<S>,
}

#[derive(Serialize)]
struct Meta {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    labels: Labels,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Selector {
    match_labels: Labels,
}

#[derive(Serialize)]
struct TemplateMeta {
    labels: Labels,
}

#[derive(Serialize)]
struct PodTemplate {
    metadata: TemplateMeta,
    spec: PodSpec,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeploymentSpec {
    replicas: u32,
    selector: Selector,
    template: PodTemplate,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JobSpec {
    completion_mode: &'static str,
    completions: u32,
    parallelism: u32,
    /// 0: a lost agent is never restarted into a running measurement.
    backoff_limit: u32,
    template: PodTemplate,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ServiceSpec {
    selector: Labels,
    ports: Vec<ServicePort>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ServicePort {
    name: &'static str,
    port: u16,
    target_port: u16,
    protocol: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PodSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    restart_policy: Option<&'static str>,
    automount_service_account_token: bool,
    security_context: PodSecurity,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    topology_spread_constraints: Vec<Spread>,
    containers: Vec<Container>,
    volumes: Vec<Volume>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PodSecurity {
    run_as_non_root: bool,
    run_as_user: i64,
    run_as_group: i64,
    /// The group of mounted Secret files, so the non-root process can read them.
    fs_group: i64,
    seccomp_profile: Seccomp,
}

#[derive(Serialize)]
struct Seccomp {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Spread {
    max_skew: u32,
    topology_key: &'static str,
    when_unsatisfiable: &'static str,
    /// Honor: a tainted node (a control plane) the pods cannot land on is not a domain
    /// whose emptiness would hold the others back.
    node_taints_policy: &'static str,
    label_selector: Selector,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Container {
    name: &'static str,
    image: String,
    command: Vec<String>,
    args: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ports: Vec<ContainerPort>,
    resources: Resources,
    security_context: ContainerSecurity,
    volume_mounts: Vec<VolumeMount>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ContainerPort {
    name: &'static str,
    container_port: u16,
    protocol: &'static str,
}

#[derive(Serialize)]
struct Resources {
    requests: BTreeMap<&'static str, &'static str>,
    limits: BTreeMap<&'static str, &'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ContainerSecurity {
    allow_privilege_escalation: bool,
    privileged: bool,
    read_only_root_filesystem: bool,
    run_as_non_root: bool,
    capabilities: Capabilities,
}

#[derive(Serialize)]
struct Capabilities {
    drop: Vec<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VolumeMount {
    name: &'static str,
    mount_path: &'static str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    read_only: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Volume {
    name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    empty_dir: Option<EmptyDir>,
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<SecretVolume>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SecretVolume {
    secret_name: &'static str,
    default_mode: u32,
}

/// A Secret: not an [`Object`], it has data where the others have a spec.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Secret {
    api_version: &'static str,
    kind: &'static str,
    metadata: Meta,
    #[serde(rename = "type")]
    kind_of: &'static str,
    string_data: BTreeMap<String, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EmptyDir {
    size_limit: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::StudyKeys;

    #[test]
    fn names_from_completion_indexes() {
        assert_eq!(agent_name("0").unwrap(), "agent-0");
        assert_eq!(agent_name("12\n").unwrap(), "agent-12");
        for bad in ["", "-1", "x", "1.5"] {
            assert!(
                matches!(agent_name(bad), Err(ManifestError::Index(_))),
                "{bad}"
            );
        }
        // The Job's argument expands to the same name.
        let arg = agent_args(&Request::new(1))[4].clone();
        assert_eq!(
            arg.replace("$(JOB_COMPLETION_INDEX)", "7"),
            agent_name("7").unwrap()
        );
    }

    #[test]
    fn namespaces() {
        for ok in ["default", "a", "load-test-1", &"a".repeat(63)] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a.b", "a_b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }

    #[test]
    fn image_references() {
        let digest = format!("volley@sha256:{}", "a".repeat(64));
        for ok in [
            "volley",
            "volley:latest",
            "volley:1.2.3-rc_1",
            "ghcr.io/org/volley:v1",
            "localhost:5000/volley",
            "registry.example:443/a/b.c/d__e:tag",
            &digest,
        ] {
            assert!(is_image_ref(ok), "{ok}");
        }
        for bad in [
            "",
            "Volley",
            "volley:",
            "volley:-x",
            "/volley",
            "volley/",
            "a..b",
            "volley@sha256:xyz",
            "volley latest",
            "host:99999/volley",
        ] {
            assert!(!is_image_ref(bad), "{bad}");
        }
    }

    #[test]
    fn bus_rule() {
        assert!(BusUrl::parse(DEFAULT_BUS).unwrap().deploys_nats());
        let b = BusUrl::parse("nats://volley-nats.load.svc.cluster.local").unwrap();
        assert!(b.deploys_nats());
        assert_eq!(b.port, 4222);
        assert!(!BusUrl::parse("nats://nats.infra:4222")
            .unwrap()
            .deploys_nats());
        for bad in [
            "volley-nats:4222",
            "nats://",
            "nats://h:0",
            "nats://h:x",
            "nats://a b",
        ] {
            assert!(BusUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn usage_errors_are_typed() {
        let mut r = Request::new(0);
        assert!(matches!(render(&r), Err(ManifestError::Injectors(0))));
        r.injectors = 2;
        r.namespace = "Bad_NS".into();
        let e = render(&r).unwrap_err();
        assert!(e.is_usage() && matches!(e, ManifestError::Namespace(_)));
        r.namespace = "ok".into();
        r.image = "UPPER".into();
        assert!(matches!(render(&r), Err(ManifestError::Image(_))));
    }

    #[test]
    fn an_existing_bus_gets_no_nats_objects_and_needs_its_credentials() {
        let mut r = Request::new(2);
        r.bus = "nats://nats.infra:4222".into();
        let e = render(&r).unwrap_err();
        assert!(
            e.is_usage() && e.to_string().contains("--agent-credentials"),
            "{e}"
        );
        r.security = Security::Off;
        let y = render(&r).unwrap();
        assert!(!y.yaml.contains("kind: Deployment") && y.yaml.contains("kind: Job"));
        assert!(!y.yaml.contains("kind: Secret") && y.yaml.contains("--insecure-bus"));
        assert!(y.coordinator.is_none());
        let k = StudyKeys::generate(&["nats.infra"], &["x".into()]).unwrap();
        r.security = Security::Given(k.agent("x").unwrap().clone());
        let y = render(&r).unwrap();
        assert!(y.yaml.contains(AGENTS_SECRET) && !y.yaml.contains(NATS_SECRET));
        assert!(y.yaml.contains("/etc/volley-bus/agent\n"), "{}", y.yaml);
        let mut deployed = Request::new(2);
        deployed.security = Security::Given(k.agent("x").unwrap().clone());
        assert!(matches!(render(&deployed), Err(ManifestError::Security(_))));
    }

    #[test]
    fn the_deployed_bus_gets_its_keys_in_secrets_and_the_coordinator_its_own() {
        let y = render(&Request::new(2)).unwrap();
        assert!(y.yaml.contains("kind: Deployment") && y.yaml.contains(NATS_SECRET));
        assert!(y.yaml.contains("--config") && y.yaml.contains("/etc/nats/nats.conf"));
        assert!(y.yaml.contains("agent-$(JOB_COMPLETION_INDEX)"));
        assert!(y
            .yaml
            .contains("/etc/volley-bus/agent-$(JOB_COMPLETION_INDEX)"));
        assert!(y.yaml.contains("defaultMode: 288") && y.yaml.contains("fsGroup: 65532"));
        let c = y.coordinator.expect("the coordinator's credentials");
        assert_eq!(c.user, crate::auth::COORDINATOR_USER);
        // The agents' Secret (what their pods read) holds no coordinator password.
        let agents_secret = y
            .yaml
            .split("---\n")
            .find(|d| d.contains(&format!("name: {AGENTS_SECRET}")))
            .unwrap();
        assert!(agents_secret.contains(&c.assign_key) && !agents_secret.contains(&c.password));
    }
}
