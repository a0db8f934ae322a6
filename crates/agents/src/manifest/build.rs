//! The Kubernetes objects of a manifest built from a [`Request`]: the bus's Deployment,
//! Service and Secret, the agents' indexed Job and their Secret, each locked down.

use super::*;

pub(super) fn secret(
    req: &Request,
    name: &str,
    app: &str,
    data: BTreeMap<String, String>,
) -> Secret {
    Secret {
        api_version: "v1",
        kind: "Secret",
        metadata: meta(name, &req.namespace, app),
        kind_of: "Opaque",
        string_data: data,
    }
}

/// The deployed server's certificate, key and config (paths as its pod mounts them).
pub(super) fn nats_secret(req: &Request, k: &StudyKeys) -> Secret {
    let conf = k.server_config(
        &format!("{NATS_SECRET_DIR}/server.pem"),
        &format!("{NATS_SECRET_DIR}/server.key"),
    );
    let data = [
        ("nats.conf".to_string(), conf),
        ("server.pem".to_string(), k.server.cert_pem.clone()),
        ("server.key".to_string(), k.server.key_pem.clone()),
    ];
    secret(req, NATS_SECRET, NATS_NAME, data.into())
}

/// A Secret mounted read-only at `dir`.
pub(super) fn mount_secret(
    spec: &mut PodSpec,
    name: &'static str,
    secret_name: &'static str,
    dir: &'static str,
) {
    spec.volumes.push(Volume {
        name,
        empty_dir: None,
        secret: Some(SecretVolume {
            secret_name,
            default_mode: SECRET_MODE,
        }),
    });
    for c in &mut spec.containers {
        c.volume_mounts.push(VolumeMount {
            name,
            mount_path: dir,
            read_only: true,
        });
    }
}

pub(super) fn meta(name: &str, ns: &str, app: &str) -> Meta {
    Meta {
        name: name.into(),
        namespace: Some(ns.into()),
        labels: labels(app),
    }
}

pub(super) fn namespace(ns: &str) -> Object<()> {
    Object {
        api_version: "v1",
        kind: "Namespace",
        metadata: Meta {
            name: ns.into(),
            namespace: None,
            labels: labels("volley"),
        },
        spec: None,
    }
}

/// No privileges: non-root, no escalation, read-only root, no capabilities, the
/// runtime's default seccomp profile; a private `/tmp` is the only writable place.
pub(super) fn locked_down(
    name: &'static str,
    image: String,
    command: Vec<String>,
    resources: Resources,
) -> Container {
    Container {
        name,
        image,
        command,
        args: Vec::new(),
        ports: Vec::new(),
        resources,
        security_context: ContainerSecurity {
            allow_privilege_escalation: false,
            privileged: false,
            read_only_root_filesystem: true,
            run_as_non_root: true,
            capabilities: Capabilities { drop: vec!["ALL"] },
        },
        volume_mounts: vec![VolumeMount {
            name: "tmp",
            mount_path: "/tmp",
            read_only: false,
        }],
    }
}

pub(super) fn pod_spec(
    restart: Option<&'static str>,
    spread: Vec<Spread>,
    c: Container,
) -> PodSpec {
    PodSpec {
        restart_policy: restart,
        automount_service_account_token: false,
        security_context: PodSecurity {
            run_as_non_root: true,
            run_as_user: RUN_AS,
            run_as_group: RUN_AS,
            fs_group: RUN_AS,
            seccomp_profile: Seccomp {
                kind: "RuntimeDefault",
            },
        },
        topology_spread_constraints: spread,
        containers: vec![c],
        volumes: vec![Volume {
            name: "tmp",
            empty_dir: Some(EmptyDir { size_limit: "64Mi" }),
            secret: None,
        }],
    }
}

pub(super) fn nats_deployment(req: &Request, bus: &BusUrl) -> Object<DeploymentSpec> {
    let mut c = locked_down(
        "nats-server",
        NATS_IMAGE.into(),
        vec!["/nats-server".into()],
        // The bus carries one record per agent-second: small.
        Resources {
            requests: [("cpu", "100m"), ("memory", "64Mi")].into(),
            limits: [("cpu", "1"), ("memory", "256Mi")].into(),
        },
    );
    c.args = vec!["--port".into(), bus.port.to_string()];
    let secured = matches!(req.security, Security::Generate { .. });
    if secured {
        // Flags after the file override it: the port stays the Service's.
        c.args.splice(
            0..0,
            [
                "--config".to_string(),
                format!("{NATS_SECRET_DIR}/nats.conf"),
            ],
        );
    }
    c.ports = vec![ContainerPort {
        name: "client",
        container_port: bus.port,
        protocol: "TCP",
    }];
    let mut spec = pod_spec(None, Vec::new(), c);
    if secured {
        mount_secret(&mut spec, "tls", NATS_SECRET, NATS_SECRET_DIR);
    }
    Object {
        api_version: "apps/v1",
        kind: "Deployment",
        metadata: meta(NATS_NAME, &req.namespace, NATS_NAME),
        spec: Some(DeploymentSpec {
            replicas: 1,
            selector: Selector {
                match_labels: labels(NATS_NAME),
            },
            template: PodTemplate {
                metadata: TemplateMeta {
                    labels: labels(NATS_NAME),
                },
                spec,
            },
        }),
    }
}

pub(super) fn nats_service(req: &Request, bus: &BusUrl) -> Object<ServiceSpec> {
    Object {
        api_version: "v1",
        kind: "Service",
        metadata: meta(NATS_NAME, &req.namespace, NATS_NAME),
        spec: Some(ServiceSpec {
            selector: labels(NATS_NAME),
            ports: vec![ServicePort {
                name: "client",
                port: bus.port,
                target_port: bus.port,
                protocol: "TCP",
            }],
        }),
    }
}

/// The agent's command line inside a pod: the name comes from the pod's completion
/// index, the credentials from the mounted Secret (never from argv).
pub fn agent_args(req: &Request) -> Vec<String> {
    let mut v = vec![
        "agent".into(),
        "--bus".into(),
        req.bus.clone(),
        "--name".into(),
        format!("{AGENT_PREFIX}$({INDEX_ENV})"),
    ];
    match req.security {
        Security::Generate { .. } => v.extend([
            "--credentials".into(),
            format!("{AGENTS_SECRET_DIR}/{AGENT_PREFIX}$({INDEX_ENV})"),
        ]),
        Security::Given(_) => {
            v.extend(["--credentials".into(), format!("{AGENTS_SECRET_DIR}/agent")])
        }
        Security::Off => v.push("--insecure-bus".into()),
    }
    for a in &req.allow_targets {
        v.extend(["--allow-target".into(), a.clone()]);
    }
    v
}

pub(super) fn agents_job(req: &Request) -> Object<JobSpec> {
    let mut c = locked_down(
        "agent",
        req.image.clone(),
        vec!["volley".into()],
        // An injector wants a core of its own; the limit keeps it from starving a
        // neighbour (and the generator's self-check says when it was the bottleneck).
        Resources {
            requests: [("cpu", "1"), ("memory", "256Mi")].into(),
            limits: [("cpu", "2"), ("memory", "1Gi")].into(),
        },
    );
    c.args = agent_args(req);
    // One agent per node where the nodes allow: two injectors on one node measure the
    // node, not the server.
    let spread = vec![Spread {
        max_skew: 1,
        topology_key: "kubernetes.io/hostname",
        when_unsatisfiable: "DoNotSchedule",
        node_taints_policy: "Honor",
        label_selector: Selector {
            match_labels: labels(JOB_NAME),
        },
    }];
    let mut spec = pod_spec(Some("Never"), spread, c);
    if req.security != Security::Off {
        mount_secret(&mut spec, "bus", AGENTS_SECRET, AGENTS_SECRET_DIR);
    }
    Object {
        api_version: "batch/v1",
        kind: "Job",
        metadata: meta(JOB_NAME, &req.namespace, JOB_NAME),
        spec: Some(JobSpec {
            completion_mode: "Indexed",
            completions: req.injectors,
            parallelism: req.injectors,
            backoff_limit: 0,
            template: PodTemplate {
                metadata: TemplateMeta {
                    labels: labels(JOB_NAME),
                },
                spec,
            },
        }),
    }
}
