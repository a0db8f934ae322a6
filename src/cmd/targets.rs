//! `volley targets`: which web servers volley can start here, their versions and paths,
//! how to install the missing ones, (`--show-config KIND`) the exact configuration a
//! run would generate, and (`--dav-probe URL|KIND`) what a DAV server offers.

mod dav_probe;

use crate::cmd::bench::target::flags;
use crate::exit::usage;
use std::path::PathBuf;
use std::process::ExitCode;
use volley_study::plan::VariantSettings;
use volley_targets::config::{
    self, Assignment, Compression, DavSettings, Placement, ServerSettings, TlsFiles,
};
use volley_targets::TargetKind;

/// Flags of `volley targets`.
#[derive(clap::Args)]
pub struct Args {
    /// Print the configuration volley would generate for KIND (nginx, apache-event,
    /// apache-prefork, lighttpd, caddy, builtin) instead of the list.
    #[arg(long, value_name = "KIND", value_parser = flags::kind)]
    show_config: Option<TargetKind>,
    /// Worker processes (threads for Caddy) in the shown configuration.
    #[arg(long, default_value = "1", requires = "show_config", value_parser = flags::workers)]
    workers: u32,
    /// Show the configuration with keep-alive off.
    #[arg(long, requires = "show_config")]
    no_keep_alive: bool,
    /// Show the configuration with the access log on.
    #[arg(long, requires = "show_config")]
    access_log: bool,
    /// Show the configuration serving HTTPS with volley's throw-away certificate.
    #[arg(long, requires = "show_config")]
    tls: bool,
    /// With --tls: offer HTTP/2 by ALPN (nginx, apache-event, lighttpd, caddy).
    #[arg(long, requires = "tls")]
    h2: bool,
    /// With --tls: offer HTTP/3 too (QUIC on the same port number; caddy, builtin).
    #[arg(long, requires = "tls")]
    h3: bool,
    /// Show the configuration with gzip (level 6) and Brotli (quality 11) on; Caddy
    /// 2.6 has no Brotli encoder and gets gzip alone.
    #[arg(long, requires = "show_config")]
    compress: bool,
    /// Show the configuration with a WebDAV tree (nginx, apache-event, apache-prefork,
    /// lighttpd) or multi-user accounts (builtin); radicale and xandikos always speak
    /// DAV.
    #[arg(long, requires = "show_config")]
    dav: bool,
    /// Docroot to show in the configuration (default: a private `DIR/www`).
    #[arg(long, value_name = "DIR", requires = "show_config")]
    docroot: Option<PathBuf>,
    /// A server knob in the shown configuration, KNOB=VALUE (repeatable; as `volley
    /// bench --target KIND --set`), or raw.KIND=TEXT.
    #[arg(
        long = "set",
        value_name = "KNOB=VALUE",
        requires = "show_config",
        value_parser = super::bench::target::parse_set
    )]
    set: Vec<Assignment>,
    /// Show the configuration of the study's [[variant]] NAME (with --study); --set
    /// applies over it.
    #[arg(long, value_name = "NAME", requires_all = ["show_config", "study"])]
    variant: Option<String>,
    /// The study file whose --variant is shown.
    #[arg(long, value_name = "FILE", requires = "variant")]
    study: Option<PathBuf>,
    /// Print the list (or the --dav-probe answers) as JSON.
    #[arg(long, conflicts_with = "show_config")]
    json: bool,
    /// Ask a WebDAV / CalDAV server what it offers (OPTIONS, PROPFIND, conditional
    /// PUTs, REPORTs on a probe item it then deletes): an http:// URL of a collection
    /// on loopback, or a kind (radicale, xandikos, nginx, apache-event, apache-prefork,
    /// lighttpd) that volley starts with one account, probes and stops.
    #[arg(long, value_name = "URL|KIND", conflicts_with = "show_config")]
    dav_probe: Option<String>,
    /// With --dav-probe URL: Basic credentials, NAME:PASSWORD.
    #[arg(long, value_name = "NAME:PASSWORD", requires = "dav_probe")]
    user: Option<String>,
}

/// Runs `volley targets`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(kind) = args.show_config {
        return show_config(kind, &args);
    }
    if let Some(what) = &args.dav_probe {
        return dav_probe::run(what, args.user.as_deref(), args.json);
    }
    let found = volley_targets::discover();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&found)?);
        return Ok(ExitCode::SUCCESS);
    }
    // The protocols volley can make each kind offer (HTTP/2 and HTTP/3 with --tls).
    let offers = |k: TargetKind| {
        let mut p = vec!["h1"];
        if k.supports_http2() {
            p.push("h2");
        }
        if k.supports_http3() {
            p.push("h3");
        }
        p.join(" ")
    };
    let mut t = super::table::new(["target", "version", "offers", "path"]);
    super::table::keep_whole(&mut t, 0);
    let mut missing = Vec::new();
    for s in &found {
        match &s.path {
            Some(p) => t.add_row([
                s.kind.name().to_string(),
                s.version
                    .clone()
                    .unwrap_or_else(|| "(version unknown)".to_string()),
                offers(s.kind),
                p.display().to_string(),
            ]),
            None => {
                missing.push(s.kind);
                t.add_row([
                    s.kind.name().to_string(),
                    "not installed".to_string(),
                    offers(s.kind),
                    "-".to_string(),
                ])
            }
        };
    }
    t.add_row([
        "external",
        "-",
        "h1 h2 h3",
        "any http:// URL on loopback (volley does not start it)",
    ]);
    print!("{}", super::table::render(&t));
    let (pypi, debian): (Vec<TargetKind>, Vec<TargetKind>) =
        missing.iter().partition(|k| k.is_caldav_server());
    let names = |v: &[TargetKind]| v.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ");
    if !debian.is_empty() {
        println!(
            "\nmissing: {}; install them with scripts/install-servers.sh (Debian packages, no daemons left running)",
            names(&debian)
        );
    }
    if !pypi.is_empty() {
        println!(
            "\nmissing: {}; install them with scripts/install-caldav.sh (pinned PyPI releases in {})",
            names(&pypi),
            volley_targets::kind::venv_dir().display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn show_config(kind: TargetKind, args: &Args) -> anyhow::Result<ExitCode> {
    let dir = PathBuf::from("DIR");
    let placement = Placement {
        docroot: args.docroot.clone().unwrap_or_else(|| dir.join("www")),
        dir,
        addr: ([127, 0, 0, 1], 0).into(),
        as_root: config::running_as_root(),
        tls: args.tls.then(|| TlsFiles {
            cert: PathBuf::from("DIR/tls/server.pem"),
            key: PathBuf::from("DIR/tls/server.key"),
            ca: Some(PathBuf::from("DIR/tls/ca.pem")),
        }),
    };
    if args.h2 && !kind.supports_http2() {
        usage!(
            "{kind} cannot offer HTTP/2 (supported: builtin, nginx, apache-event, lighttpd, caddy)"
        );
    }
    if args.h3 && !kind.supports_http3() {
        usage!("{kind} cannot offer HTTP/3 (supported: caddy, builtin)");
    }
    let settings = ServerSettings {
        workers: args.workers,
        http3: args.h3,
        keep_alive: !args.no_keep_alive,
        access_log: args.access_log,
        http2: args.h2,
        compression: args.compress.then(|| {
            let mut c = Compression::gzip_and_brotli();
            c.brotli = kind.supports_brotli();
            c
        }),
        dav: (args.dav || kind.is_caldav_server()).then(DavSettings::default),
        ..ServerSettings::default()
    };
    let shown = shown_variant(kind, args)?;
    let mut settings = settings;
    shown.tuning.apply(kind, &mut settings);
    if kind.is_caldav_server()
        && (args.workers > 1 || args.no_keep_alive || args.access_log || args.tls || args.compress)
    {
        usage!("{kind} runs as one process over plain HTTP as shipped: --workers, --no-keep-alive, --access-log, --tls and --compress do not apply");
    }
    if args.dav
        && !kind.supports_plain_dav()
        && !kind.is_caldav_server()
        && kind != TargetKind::Builtin
    {
        usage!("{kind} cannot serve WebDAV (supported: builtin, nginx, apache-event, apache-prefork, lighttpd, radicale, xandikos)");
    }
    print_config(kind, args, &settings, &placement)?;
    print_kernel(&shown);
    Ok(ExitCode::SUCCESS)
}

/// The variant's kernel settings, as comment lines after the configuration: they are
/// part of what the target runs with, written in its namespace, not in its files.
fn print_kernel(shown: &VariantSettings) {
    if shown.sysctls.is_empty() && shown.route.quickack.is_none() {
        return;
    }
    println!("# kernel settings, written and read back inside the network namespace volley makes for this variant (never on the host):");
    for s in &shown.sysctls {
        println!("#   sysctl {} = {}", s.key, s.value);
    }
    if let Some(on) = shown.route.quickack {
        println!(
            "#   route quickack {} (the namespace's loopback routes)",
            u8::from(on)
        );
    }
}

/// What the shown configuration carries: the study file's variant (`--variant` with
/// `--study`) with the `--set` assignments on top, kept to `kind`'s raw text and checked.
fn shown_variant(kind: TargetKind, args: &Args) -> anyhow::Result<VariantSettings> {
    let mut shown = match (&args.variant, &args.study) {
        (Some(name), Some(file)) => {
            let text = match std::fs::read_to_string(file) {
                Ok(t) => t,
                Err(e) => usage!("cannot read {}: {e}", file.display()),
            };
            let parsed = volley_study::parse(&text)
                .and_then(|f| volley_study::plan::variant_settings(&f, name, kind));
            match parsed {
                Ok(t) => t,
                Err(e) => usage!("{}: {e}", file.display()),
            }
        }
        _ => VariantSettings::default(),
    };
    let tuning = &mut shown.tuning;
    for a in &args.set {
        if let Assignment::Raw(other, _) = a {
            if *other != kind {
                usage!("--set raw.{other}: the configuration shown is {kind}'s");
            }
        }
        tuning.assign(a);
    }
    // A variant's raw text for other kinds is theirs: it goes into their configs only.
    tuning.raw.retain(|(k, _)| *k == kind);
    if let Err(e) = tuning.check(kind) {
        usage!("{e}");
    }
    Ok(shown)
}

/// Prints what volley runs for `kind`: the built-in server's and Xandikos' command lines
/// (they take no file), or the rendered configuration file and the command that reads it.
fn print_config(
    kind: TargetKind,
    args: &Args,
    settings: &ServerSettings,
    placement: &Placement,
) -> anyhow::Result<()> {
    match kind {
        TargetKind::External => {
            usage!("an external target has no configuration: volley does not start it")
        }
        TargetKind::Builtin => {
            let tls = match &placement.tls {
                Some(t) => format!(
                    " --tls-cert {} --tls-key {}",
                    t.cert.display(),
                    t.key.display()
                ),
                None => String::new(),
            };
            // As `launch_builtin` runs it: h2 only when asked for.
            let h1 = if args.h2 { "" } else { " --http1-only" };
            let h3 = if args.h3 { " --h3" } else { "" };
            // With accounts its root is a private tree, as `launch_builtin` runs it.
            let paths = config::DavPaths::in_dir(&placement.dir);
            let (root, users) = if args.dav {
                (
                    paths.tree,
                    format!(" --users {}", paths.users_file.display()),
                )
            } else {
                (placement.docroot.clone(), String::new())
            };
            println!(
                "# the built-in server takes no configuration file; volley runs:\n\
                 volley serve --root {} --listen 127.0.0.1:0{users}{}{h1}{h3}{tls}",
                root.display(),
                super::bench::target::builtin_flags(settings)
            );
            if args.compress {
                println!(
                    "# compression: volley writes NAME.gz (level 6) and NAME.br (quality 11) \
                     beside each text file of at least {} bytes before the start, and \
                     removes them at stop",
                    config::MIN_COMPRESS_BYTES
                );
            }
        }
        TargetKind::Xandikos => {
            println!(
                "# xandikos takes no configuration file; at each start volley runs, with DIR a \
                 private temp directory and port 0 a free loopback port:\nxandikos {}",
                config::xandikos_args(&placement.dir, placement.addr).join(" ")
            );
        }
        _ => {
            println!(
                "# {kind}: at each start volley replaces DIR with a private temp directory \
                 and port 0 with a free loopback port"
            );
            print!(
                "{}",
                config::render(kind, settings, placement).unwrap_or_default()
            );
            let conf = placement.dir.join(config::config_file_name(kind));
            let argv: Vec<String> = config::command_args(kind, &placement.dir, &conf)
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            println!(
                "# command: {} {}",
                kind.program().unwrap_or("?"),
                argv.join(" ")
            );
        }
    }
    Ok(())
}
