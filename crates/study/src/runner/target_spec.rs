//! The target spec of each instance a study starts: its kind, settings, limits, TLS,
//! compression and DAV accounts, and the fresh target of a cold step.

use std::path::Path;

use volley_targets::{
    Compression, CpuQuota, ExternalTarget, NetnsPlace, ResourceLimits, TargetKind, TargetSpec,
    TlsSource,
};

use crate::plan::{Plan, Workload};

/// The target spec of instance `inst`.
pub(super) fn spec_for(
    plan: &Plan,
    inst: usize,
    docroot: Option<&Path>,
    exe: Option<&Path>,
    netns: Option<&NetnsPlace>,
) -> TargetSpec {
    let i = &plan.instances[inst];
    let t = &plan.targets[i.target];
    if t.kind == TargetKind::External {
        return TargetSpec::external(ExternalTarget {
            url: t.url.clone().unwrap_or_default(),
            pid: t.pid,
            cgroup_procs: None,
        });
    }
    let mut spec = TargetSpec::new(t.kind);
    spec.settings.workers = t.workers;
    spec.settings.keep_alive = t.keepalive;
    if let Some(d) = docroot {
        spec.docroot = Some(d.to_path_buf());
        // Validate with the first path the study will load (docs/methodology.md, "Validation
        // before measurement"): a fast wrong answer must not become a result.
        if let Some(p) = plan.workloads.first().and_then(|w| w.paths.first()) {
            spec.probe_path = p.split('?').next().unwrap_or(p).to_string();
        }
    }
    spec.limits = ResourceLimits {
        cpus: i.cores.map(|c| (0..c as usize).collect()),
        cpu_quota: i.cpu_quota.map(CpuQuota::of_one_cpu),
        memory_max_bytes: t.memory_max,
    };
    spec.volley_exe = exe.map(Path::to_path_buf);
    spec.netns = netns.cloned();
    if let Some(users) = plan.dav_users(i.target) {
        // Radicale's calendars and the office's first items are written into its
        // storage before the start; the office steps' set-up (`keep_calendars`) takes
        // them as a previous day's, so thousands of users are ready in seconds.
        spec.settings.dav = Some(volley_targets::DavSettings {
            users,
            seed_items: crate::plan::seeded_items(t.kind),
        });
    }
    let serve = plan.serve;
    if serve.tls {
        spec.tls = Some(TlsSource::Generate);
        spec.settings.http2 = serve.http2 && t.kind.supports_http2();
        spec.settings.http3 = serve.http3 && t.kind.supports_http3();
    }
    if serve.brotli || serve.gzip {
        // Brotli only where the server has it (seed 002: "where the target supports it");
        // gzip stays on beside it so a client asking gzip is served too.
        let brotli = serve.brotli && t.kind.supports_brotli();
        spec.settings.compression = Some(Compression {
            brotli,
            gzip: serve.gzip || !brotli,
            ..Compression::gzip_and_brotli()
        });
    }
    if let Some(v) = i.variant {
        // The variant's knobs (over the target's own workers) and its raw text.
        plan.variants[v].tuning.apply(t.kind, &mut spec.settings);
    }
    spec
}

/// The spec of a fresh target for a cold step: `cold_path` is the workload's first path,
/// which the start-up probe must not touch, so the probe asks another file.
pub(super) fn cold_spec(
    plan: &Plan,
    inst: usize,
    w: &Workload,
    docroot: Option<&Path>,
    exe: Option<&Path>,
    netns: Option<&NetnsPlace>,
) -> TargetSpec {
    let mut spec = spec_for(plan, inst, docroot, exe, netns);
    let cold = w.paths[0].split('?').next().unwrap_or("/").to_string();
    if spec.probe_path == cold {
        spec.probe_path = plan
            .workloads
            .iter()
            .flat_map(|w| w.paths.iter())
            .map(|p| p.split('?').next().unwrap_or(p).to_string())
            .find(|p| *p != cold)
            .unwrap_or_else(|| "/index.html".to_string());
    }
    spec.cold_path = Some(cold);
    spec
}
