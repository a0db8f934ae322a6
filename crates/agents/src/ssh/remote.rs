//! Starting volley on a host (with the watcher of its connection) and stopping it.

use std::io::{Read, Write};
use std::process::{Child, ExitStatus, Stdio};
use std::time::Duration;

use super::run::{classify, last_line, reader, wait_bounded, wait_bounded_alive, Ran};
use super::{prepare, quote, Deployment, Host, Prepared, SshConfig, SshError};
use crate::auth::CREDENTIALS_ENV;

impl Deployment {
    /// Starts `volley ARGS` on host `i` (e.g. `agent --bus URL --name NAME`). The
    /// returned handle holds the ssh connection and the remote pid.
    ///
    /// The remote side watches the connection: a shell beside the process reads the
    /// connection's stdin. A `stop` line (what [`RemoteProcess::stop`] sends) ends the
    /// process; the end of input without it means the connection is gone (this volley
    /// killed, the host's sshd killed, the network cut), and then the process is killed
    /// and the binary removed if volley copied it, so nothing of volley stays on a host
    /// volley can no longer reach. The local `ssh` dies with this volley
    /// (`PR_SET_PDEATHSIG`), which closes the connection the same way.
    ///
    /// # Panics
    /// If `i` is not an index of [`Deployment::hosts`].
    ///
    /// A binary volley copied there and a lost connection removed since (see above) is
    /// copied again first, so a host that comes back serves the next step.
    ///
    /// `secret` (one line, e.g. an agent's bus credentials) goes over the connection
    /// itself: the remote shell reads it from its stdin into `VOLLEY_BUS_CREDENTIALS`
    /// of the process's environment, so it is in no argv (`ps`) and no file.
    pub fn start(
        &self,
        i: usize,
        args: &[&str],
        secret: Option<&str>,
    ) -> Result<RemoteProcess, SshError> {
        let p = self.lock()[i].clone();
        match self.start_on(&p, args, secret) {
            Err(SshError::Missing { .. }) => {
                let again = prepare(&self.cfg, &p.host, &self.local_version)?;
                let copied = p.copied || again.copied;
                self.lock()[i] = Prepared { copied, ..again };
                self.start_on(&self.lock()[i].clone(), args, secret)
            }
            r => r,
        }
    }

    fn start_on(
        &self,
        p: &Prepared,
        args: &[&str],
        secret: Option<&str>,
    ) -> Result<RemoteProcess, SshError> {
        if secret.is_some_and(|s| s.contains(['\n', '\r', '\0'])) {
            return Err(SshError::Io {
                action: "handing over the secret",
                source: std::io::Error::other("a secret must be one line"),
            });
        }
        let script = self.start_script(p.copied, args, secret.is_some());
        let mut cmd = self.cfg.ssh(&p.host, &script);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        volley_proc::die_with_parent(&mut cmd);
        let mut child = cmd.spawn().map_err(|source| SshError::Io {
            action: "running ssh",
            source,
        })?;
        let mut stdin = child.stdin.take();
        if let (Some(s), Some(w)) = (secret, stdin.as_mut()) {
            // Read by the remote shell before it starts volley (see `start_script`); a
            // failed write shows as the start failing below.
            let _ = w
                .write_all(format!("{s}\n").as_bytes())
                .and_then(|()| w.flush());
        }
        let mut out = child.stdout.take();
        let (tx, rx) = std::sync::mpsc::channel();
        let out_reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            let mut byte = [0u8; 1];
            let mut sent = false;
            if let Some(o) = out.as_mut() {
                while let Ok(1) = o.read(&mut byte) {
                    all.push(byte[0]);
                    if !sent && byte[0] == b'\n' {
                        let _ = tx.send(String::from_utf8_lossy(&all).trim().to_string());
                        all.clear();
                        sent = true;
                    }
                }
            }
            String::from_utf8_lossy(&all).into_owned()
        });
        let err = reader(child.stderr.take());
        let pid = rx
            .recv_timeout(self.cfg.bound)
            .ok()
            .and_then(|l| l.parse::<u32>().ok());
        let Some(pid) = pid else {
            drop(stdin);
            let status = wait_bounded(&mut child, Duration::from_secs(1));
            let ran = Ran {
                status: status.unwrap_or_default(),
                stdout: String::new(),
                stderr: err.join().unwrap_or_default(),
            };
            if ran.status.code() == Some(127) && ran.stderr.contains("volley is not at") {
                return Err(SshError::Missing {
                    host: p.host.to_string(),
                    detail: last_line(&ran.stderr),
                });
            }
            return Err(classify(&p.host, "starting volley", &ran));
        };
        Ok(RemoteProcess {
            cfg: self.cfg.clone(),
            host: p.host.clone(),
            pid,
            child: Some(child),
            stdin,
            output: Some(out_reader),
        })
    }

    /// The remote script of [`Deployment::start`]: the pid first (printed by the
    /// process's own shell before it execs volley, so no output of volley can come
    /// before it), then the watcher of the connection (see `start`). `copied` decides
    /// whether a lost connection also removes the binary; `secret`: the first line of
    /// the connection is a secret for the process's environment.
    fn start_script(&self, copied: bool, args: &[&str], secret: bool) -> String {
        let bin = quote(&self.cfg.remote_bin());
        let argv: Vec<String> = args.iter().map(|a| quote(a)).collect();
        let forget = if copied {
            format!(
                "rm -f {bin}; rmdir {} 2>/dev/null; ",
                quote(&self.cfg.remote_dir)
            )
        } else {
            String::new()
        };
        // An asynchronous list reads /dev/null unless redirected explicitly, so the
        // watcher reads the connection through fd 3. On `stop`: SIGTERM, SIGKILL after
        // 5 s. On end of input: the binary goes first, then the process, so the main
        // shell, woken by the death, cannot end the watcher before it has cleaned up.
        // `read` takes one line (a shell reads a pipe byte by byte), leaving the rest of
        // the connection to the watcher.
        let take_secret = if secret {
            format!("IFS= read -r {CREDENTIALS_ENV} <&3 || exit 126; export {CREDENTIALS_ENV}; ")
        } else {
            String::new()
        };
        format!(
            "exec 3<&0; [ -x {bin} ] || {{ echo \"volley is not at {rb}\" >&2; exit 127; }}; \
             {take_secret}sh -c {inner} {bin} {args} 3<&- & a=$!; \
             ( if read -r l && [ \"$l\" = stop ]; then kill $a 2>/dev/null; i=0; \
             while kill -0 $a 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; \
             kill -9 $a 2>/dev/null; else {forget}kill -9 $a 2>/dev/null; fi ) <&3 3<&- & w=$!; \
             exec 3<&-; wait $a; s=$?; kill $w 2>/dev/null; exit $s",
            rb = self
                .cfg
                .remote_bin()
                .replace(['"', '\'', '$', '`', '\\'], "_"),
            inner = quote("echo $$; exec \"$0\" \"$@\" 2>&1"),
            args = argv.join(" "),
        )
    }
}

/// A volley process running on a host. Dropping it stops it (best effort).
#[derive(Debug)]
pub struct RemoteProcess {
    cfg: SshConfig,
    host: Host,
    pid: u32,
    child: Option<Child>,
    /// The connection's stdin: the remote watcher takes its end as the connection's.
    stdin: Option<std::process::ChildStdin>,
    output: Option<std::thread::JoinHandle<String>>,
}

impl RemoteProcess {
    /// Its pid on the host.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits for it to end by itself within `bound`: its exit status and output.
    pub fn wait(mut self, bound: Duration) -> Result<(ExitStatus, String), SshError> {
        let child = self
            .child
            .as_mut()
            .expect("a running process has its child");
        // Past the bound the handle is dropped with its child: `Drop` stops it.
        let status = wait_bounded_alive(child, bound).ok_or_else(|| SshError::Timeout {
            host: self.host.to_string(),
            action: "waiting for volley",
            after: bound,
        })?;
        self.child = None;
        let out = self.output.take().map(|h| h.join().unwrap_or_default());
        Ok((status, out.unwrap_or_default()))
    }

    /// Whether it has ended (the connection closed: volley exited, or the host or the
    /// network went away).
    pub fn ended(&mut self) -> bool {
        self.child
            .as_mut()
            .is_none_or(|c| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// Stops it: a `stop` line to the remote watcher (SIGTERM, SIGKILL after 5 s); if
    /// the connection does not end within 10 s, SIGTERM by pid over a new connection,
    /// SIGKILL after 5 s, and the local `ssh` is killed.
    pub fn stop(mut self) -> Result<(), SshError> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<(), SshError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if let Some(mut w) = self.stdin.take() {
            // Fails when the remote has already ended: nothing left to stop.
            let _ = w.write_all(b"stop\n").and_then(|()| w.flush());
        }
        if wait_bounded(&mut child, Duration::from_secs(10)).is_some() {
            if let Some(h) = self.output.take() {
                let _ = h.join();
            }
            return Ok(());
        }
        let pid = self.pid;
        let script = format!(
            "kill {pid} 2>/dev/null; i=0; while kill -0 {pid} 2>/dev/null; do \
             i=$((i+1)); [ $i -ge 50 ] && {{ kill -9 {pid}; break; }}; sleep 0.1; done; true"
        );
        let r = self
            .cfg
            .run_ok(&self.host, &script, None, "stopping volley");
        // The connection ends with the process; closing it is bounded either way.
        if wait_bounded(&mut child, Duration::from_secs(5)).is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(h) = self.output.take() {
            let _ = h.join();
        }
        r.map(|_| ())
    }
}

impl Drop for RemoteProcess {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}
