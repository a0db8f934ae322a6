//! Trust on the bus: TLS, per-study credentials, NATS permissions and signed
//! assignments (docs/methodology.md, "Trust on the bus").
//!
//! Place in the flow: under [`crate::bus`] (how a party connects) and
//! [`crate::server`] (how a private `nats-server` is configured). Nothing here is
//! home-made crypto: the link is NATS's own TLS (rustls, the ring provider, as
//! `volley-tls`), each party logs in with a user and password generated per study
//! (`nats-server` 2.9 `authorization { users }`), the server's permissions let each
//! party publish and subscribe only to its own subjects, and an assignment carries an
//! HMAC-SHA256 (ring) under a per-study key over its bytes, with the nonce the agent
//! announced in its hello inside: an assignment forged by another bus user, or replayed
//! from an earlier lobby, fails the check.
//!
//! [`BusCredentials`] is what one party needs (its user, password, the CA that signed
//! the bus's certificate and the study's assignment key); it travels as one line of
//! JSON: in `VOLLEY_BUS_CREDENTIALS` of a local agent's environment, over the SSH
//! channel's stdin to a remote one, in a Kubernetes Secret to a pod; never in argv.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use ring::rand::SecureRandom as _;
use serde::{Deserialize, Serialize};
use volley_tls::rustls;

use crate::msg;
use crate::AgentsError;

/// The environment variable a local or remote agent reads its credentials from (one
/// line of JSON): the environment of a process is readable by its own user only.
pub const CREDENTIALS_ENV: &str = "VOLLEY_BUS_CREDENTIALS";

/// The coordinator's user name on a private bus.
pub const COORDINATOR_USER: &str = "volley-coordinator";

/// Random bytes in a password or the assignment key (256 bits).
const SECRET_BYTES: usize = 32;

/// What one party (an agent or the coordinator) needs to join a secured bus.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusCredentials {
    /// Its NATS user.
    pub user: String,
    /// Its NATS password.
    pub password: String,
    /// The CA that signed the bus's certificate, PEM (volley's throw-away CA for a
    /// private bus); `None` with no `ca_file` either: the system's CA bundle.
    #[serde(default)]
    pub ca_pem: Option<String>,
    /// The CA as a file instead (relative to the credentials file), for `bus =
    /// "existing"` with a user's own CA; read into `ca_pem` by [`BusCredentials::load`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// The study's assignment key (base64url): the coordinator signs assignments with
    /// it, agents check them.
    pub assign_key: String,
}

impl std::fmt::Debug for BusCredentials {
    /// The user only: secrets stay out of logs and test output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BusCredentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl BusCredentials {
    /// Reads credentials from JSON text; `origin` names them in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<Self, AgentsError> {
        let c: BusCredentials =
            serde_json::from_str(text).map_err(|e| AgentsError::Credentials {
                origin: origin.to_string(),
                detail: e.to_string(),
            })?;
        c.key_bytes(origin)?;
        Ok(c)
    }

    /// Reads a credentials file (JSON), and its `ca_file` if it names one.
    pub fn load(path: &Path) -> Result<Self, AgentsError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| AgentsError::Credentials {
            origin: origin.clone(),
            detail: e.to_string(),
        })?;
        let mut c = Self::from_json(&text, &origin)?;
        if let Some(f) = c.ca_file.take() {
            let ca = path.parent().unwrap_or(Path::new(".")).join(&f);
            let pem = std::fs::read_to_string(&ca).map_err(|e| AgentsError::Credentials {
                origin: origin.clone(),
                detail: format!("ca_file {}: {e}", ca.display()),
            })?;
            c.ca_pem = Some(pem);
        }
        Ok(c)
    }

    /// One line of JSON (what travels to an agent).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("credentials are plain strings")
    }

    /// The assignment key's bytes; `origin` names where the credentials came from.
    fn key_bytes(&self, origin: &str) -> Result<Vec<u8>, AgentsError> {
        let bad = |detail: String| AgentsError::Credentials {
            origin: origin.to_string(),
            detail,
        };
        let k = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(self.assign_key.trim())
            .map_err(|e| bad(format!("assign_key is not base64url: {e}")))?;
        if k.len() < 16 {
            return Err(bad(format!(
                "assign_key holds {} bytes, at least 16 needed",
                k.len()
            )));
        }
        Ok(k)
    }

    /// The TLS client configuration: the CA in `ca_pem`, or the system's bundle.
    pub fn tls_config(&self) -> Result<rustls::ClientConfig, AgentsError> {
        let tls = |detail: String| AgentsError::BusTls { detail };
        let roots = match &self.ca_pem {
            Some(pem) => {
                let certs = volley_tls::pem::certs_from_pem(pem.as_bytes(), Path::new("ca_pem"))
                    .map_err(|e| tls(e.to_string()))?;
                let mut roots = rustls::RootCertStore::empty();
                roots.add_parsable_certificates(certs);
                roots
            }
            None => volley_tls::pem::system_roots().map_err(|e| tls(e.to_string()))?,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Ok(rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| tls(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth())
    }

    /// The inbox prefix of this user's requests: the permissions let only this user
    /// subscribe to it, so nobody else reads the replies it is sent.
    pub fn inbox_prefix(&self) -> String {
        inbox_prefix(&self.user)
    }

    /// The HMAC of `body` under the study's assignment key.
    pub fn sign(&self, body: &[u8]) -> Result<Vec<u8>, AgentsError> {
        let key = self.hmac_key()?;
        Ok(ring::hmac::sign(&key, body).as_ref().to_vec())
    }

    /// Whether `mac` is the HMAC of `body` under the study's key (constant time).
    pub fn verify(&self, body: &[u8], mac: &[u8]) -> bool {
        self.hmac_key()
            .is_ok_and(|k| ring::hmac::verify(&k, body, mac).is_ok())
    }

    fn hmac_key(&self) -> Result<ring::hmac::Key, AgentsError> {
        let k = self.key_bytes(&self.user)?;
        Ok(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &k))
    }
}

fn inbox_prefix(user: &str) -> String {
    format!("_INBOX_{user}")
}

/// `n` random bytes from the OS, base64url: passwords, keys and nonces.
pub fn random_token(n: usize) -> Result<String, AgentsError> {
    let mut b = vec![0u8; n];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| AgentsError::Server("the OS gave no random bytes".into()))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b))
}

/// A study's private bus keys: its CA, the server's certificate, and the credentials of
/// the coordinator and of each named agent.
pub struct StudyKeys {
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// The server certificate (for the bus's address) and its key.
    pub server: volley_tls::certs::Issued,
    /// The coordinator's credentials.
    pub coordinator: BusCredentials,
    /// Each agent's, by name.
    pub agents: BTreeMap<String, BusCredentials>,
}

impl std::fmt::Debug for StudyKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StudyKeys")
            .field("agents", &self.agents.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl StudyKeys {
    /// New keys for a bus reached at `hosts` (IP addresses or DNS names in its
    /// certificate) and the agents `names`: a throw-away CA, a fresh password each, one
    /// assignment key.
    pub fn generate(hosts: &[&str], names: &[String]) -> Result<Self, AgentsError> {
        let tls = |e: volley_tls::TlsConfigError| AgentsError::BusTls {
            detail: e.to_string(),
        };
        let ca = volley_tls::certs::Authority::new().map_err(tls)?;
        let server = ca.server(hosts).map_err(tls)?;
        let ca_pem = ca.cert_pem();
        let assign_key = random_token(SECRET_BYTES)?;
        let creds = |user: &str| -> Result<BusCredentials, AgentsError> {
            Ok(BusCredentials {
                user: user.to_string(),
                password: random_token(SECRET_BYTES)?,
                ca_pem: Some(ca_pem.clone()),
                ca_file: None,
                assign_key: assign_key.clone(),
            })
        };
        let mut agents = BTreeMap::new();
        for n in names {
            msg::check_token("agent name", n)?;
            if n == COORDINATOR_USER {
                return Err(AgentsError::Name(format!(
                    "agent name {n:?} is the coordinator's user"
                )));
            }
            agents.insert(n.clone(), creds(n)?);
        }
        Ok(StudyKeys {
            coordinator: creds(COORDINATOR_USER)?,
            agents,
            server,
            ca_pem,
        })
    }

    /// An agent's credentials.
    pub fn agent(&self, name: &str) -> Option<&BusCredentials> {
        self.agents.get(name)
    }

    /// A whole `nats-server` configuration: TLS with the certificate and key at these
    /// paths (as the server will see them) and [`StudyKeys::authorization`].
    pub fn server_config(&self, cert_file: &str, key_file: &str) -> String {
        format!(
            "tls {{\n  cert_file: \"{cert_file}\"\n  key_file: \"{key_file}\"\n  timeout: 2\n}}\n{}",
            self.authorization()
        )
    }

    /// The `authorization` block of a `nats-server` configuration: one user per party,
    /// each allowed only its own subjects (see [`crate::msg`]'s table).
    pub fn authorization(&self) -> String {
        let mut users = vec![user_block(
            &self.coordinator,
            &[
                "volley.v1.agent.*.probe",
                "volley.v1.agent.*.assign",
                "volley.v1.agent.*.stale",
                "volley.v1.run.*.stop",
            ],
            &[
                "volley.v1.hello.*".to_string(),
                "volley.v1.run.*.agent.*.*".to_string(),
            ],
        )];
        for (name, c) in &self.agents {
            let publish = [
                format!("volley.v1.hello.{name}"),
                format!("volley.v1.run.*.agent.{name}.*"),
            ];
            let publish: Vec<&str> = publish.iter().map(String::as_str).collect();
            users.push(user_block(
                c,
                &publish,
                &[
                    format!("volley.v1.agent.{name}.*"),
                    "volley.v1.run.*.stop".to_string(),
                ],
            ));
        }
        format!(
            "authorization {{\n  users = [\n{}\n  ]\n}}\n",
            users.join("\n")
        )
    }
}

/// One user of the `authorization` block. Requests' replies go to the user's own inbox
/// prefix (only it may subscribe there) and `allow_responses` lets it answer the
/// requests it receives without a publish right on anybody's inbox.
fn user_block(c: &BusCredentials, publish: &[&str], subscribe: &[String]) -> String {
    let list = |v: Vec<String>| {
        v.iter()
            .map(|s| format!("\"{s}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut sub = subscribe.to_vec();
    sub.push(format!("{}.>", c.inbox_prefix()));
    format!(
        "    {{ user: \"{}\", password: \"{}\", permissions: {{ publish: {{ allow: [{}] }}, subscribe: {{ allow: [{}] }}, allow_responses: true }} }}",
        c.user,
        c.password,
        list(publish.iter().map(|s| s.to_string()).collect()),
        list(sub),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_holds_only_for_its_bytes_and_its_key() {
        let k = StudyKeys::generate(&["127.0.0.1"], &["a".into()]).unwrap();
        let a = k.agent("a").unwrap();
        let mac = k.coordinator.sign(b"assignment").unwrap();
        assert!(a.verify(b"assignment", &mac));
        assert!(!a.verify(b"assignmenT", &mac));
        let other = StudyKeys::generate(&["127.0.0.1"], &["a".into()]).unwrap();
        assert!(!other.agent("a").unwrap().verify(b"assignment", &mac));
        assert!(!a.verify(b"assignment", &[]));
    }

    #[test]
    fn credentials_travel_as_one_json_line_and_hide_their_secrets() {
        let k = StudyKeys::generate(&["127.0.0.1"], &["inj1".into()]).unwrap();
        let c = k.agent("inj1").unwrap();
        let line = c.to_json();
        assert!(!line.contains('\n'));
        assert_eq!(&BusCredentials::from_json(&line, "env").unwrap(), c);
        let shown = format!("{c:?}");
        assert!(!shown.contains(&c.password) && !shown.contains(&c.assign_key));
        assert!(c.tls_config().is_ok());
        let e = BusCredentials::from_json("{\"user\":\"x\"}", "env").unwrap_err();
        assert!(e.to_string().starts_with("bus credentials env: "), "{e}");
    }

    #[test]
    fn each_user_may_use_its_own_subjects_only() {
        let k = StudyKeys::generate(&["127.0.0.1"], &["inj1".into(), "inj2".into()]).unwrap();
        let conf = k.authorization();
        assert!(conf.contains("\"volley.v1.hello.inj1\""));
        assert!(conf.contains("\"volley.v1.agent.inj2.*\""));
        assert!(conf.contains("\"_INBOX_inj1.>\""));
        assert!(!conf.contains("\"volley.v1.agent.*.*\""), "{conf}");
        assert_eq!(conf.matches("allow_responses: true").count(), 3);
        assert!(StudyKeys::generate(&["127.0.0.1"], &[COORDINATOR_USER.into()]).is_err());
        assert!(StudyKeys::generate(&["127.0.0.1"], &["a.b".into()]).is_err());
    }
}
