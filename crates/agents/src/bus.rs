//! A small typed wrapper over the official NATS client.
//!
//! Place in the flow: under [`crate::agent`] and [`crate::coordinator`]. Every call is
//! bounded in time (a publish to a dead connection would otherwise wait for a reconnect
//! that may never come), encodes and decodes [`crate::msg`] messages, and turns the
//! client's many error types into [`AgentsError`]. Runs inside the tokio runtime its
//! caller owns; nothing here outlives it.

use crate::auth::BusCredentials;
use crate::msg::{self, Message};
use crate::AgentsError;
use async_nats::connection::State;
use async_nats::{Client, ConnectOptions, Subscriber};
use async_nats::{ConnectErrorKind, RequestErrorKind};
use futures::StreamExt;
use std::time::Duration;
use volley_tls::rustls;

/// How long one publish, subscribe or flush may take.
pub const SEND_BOUND: Duration = Duration::from_secs(2);

/// A raw message from a subscription.
pub type Incoming = async_nats::Message;

/// One connection to the bus.
#[derive(Debug, Clone)]
pub struct Bus {
    client: Client,
}

async fn bounded<T, E: std::fmt::Display>(
    action: &'static str,
    after: Duration,
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, AgentsError> {
    match tokio::time::timeout(after, f).await {
        Ok(r) => r.map_err(|e| AgentsError::bus(action, e)),
        Err(_) => Err(AgentsError::Timeout { action, after }),
    }
}

impl Bus {
    /// Connects to `url` (`nats://HOST:PORT`), within `bound`: over TLS with `auth`'s
    /// user, password and CA (see [`crate::auth`]), or in the clear when `auth` is
    /// `None` (the bus's security turned off on purpose).
    pub async fn connect(
        url: &str,
        bound: Duration,
        auth: Option<&BusCredentials>,
    ) -> Result<Bus, AgentsError> {
        // The client's own back-off reaches 4 s between attempts; a bus that was briefly
        // away must be found again well within an agent's 1 s load bound and a
        // coordinator's heartbeat bound, and a refused connect on a LAN costs nothing.
        let mut opts = ConnectOptions::new()
            .reconnect_delay_callback(|attempts| {
                Duration::from_millis((attempts as u64).saturating_mul(50).min(250))
            })
            .connection_timeout(bound)
            .request_timeout(Some(bound));
        if let Some(c) = auth {
            opts = opts
                .require_tls(true)
                .tls_client_config(c.tls_config()?)
                .user_and_password(c.user.clone(), c.password.clone())
                .custom_inbox_prefix(c.inbox_prefix());
        }
        let client = match tokio::time::timeout(bound, opts.connect(url)).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(connect_error(&e)),
            Err(_) => {
                return Err(AgentsError::Timeout {
                    action: "connect",
                    after: bound,
                })
            }
        };
        Ok(Bus { client })
    }

    /// True while the connection is up (false while the client is reconnecting).
    pub fn connected(&self) -> bool {
        self.client.connection_state() == State::Connected
    }

    /// Publishes one message.
    pub async fn publish<M: Message>(&self, subject: String, m: &M) -> Result<(), AgentsError> {
        let bytes = msg::encode(m)?;
        bounded(
            "publish",
            SEND_BOUND,
            self.client.publish(subject, bytes.into()),
        )
        .await
    }

    /// Sends a request and decodes its reply, within `bound`.
    pub async fn request<Q: Message, R: Message>(
        &self,
        subject: String,
        q: &Q,
        bound: Duration,
    ) -> Result<R, AgentsError> {
        let bytes = msg::encode(q)?;
        let asked = self.client.request(subject.clone(), bytes.into());
        let reply = match tokio::time::timeout(bound, asked).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) if e.kind() == RequestErrorKind::NoResponders => {
                return Err(AgentsError::NoResponders { subject })
            }
            Ok(Err(e)) => return Err(AgentsError::bus("request", e)),
            Err(_) => {
                return Err(AgentsError::Timeout {
                    action: "request",
                    after: bound,
                })
            }
        };
        msg::decode(&reply.payload)
    }

    /// Answers a request (does nothing for a message sent without a reply subject).
    pub async fn reply<M: Message>(&self, to: &Incoming, m: &M) -> Result<(), AgentsError> {
        match &to.reply {
            Some(r) => {
                let bytes = msg::encode(m)?;
                let publish = self.client.publish(r.clone(), bytes.into());
                bounded("reply", SEND_BOUND, publish).await
            }
            None => Ok(()),
        }
    }

    /// Subscribes to a subject (wildcards allowed).
    pub async fn subscribe(&self, subject: String) -> Result<Subscriber, AgentsError> {
        bounded("subscribe", SEND_BOUND, self.client.subscribe(subject)).await
    }

    /// Waits until the server has everything published so far, within `bound`.
    pub async fn flush(&self, bound: Duration) -> Result<(), AgentsError> {
        bounded("flush", bound, self.client.flush()).await
    }
}

/// A failed connect by kind: refused credentials and TLS failures are errors of their
/// own (one line each, see `volley agent`'s exit codes), the rest a bus error.
fn connect_error(e: &async_nats::ConnectError) -> AgentsError {
    let mut detail = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        let more = s.to_string();
        if !detail.contains(&more) {
            detail = format!("{detail}: {more}");
        }
        src = s.source();
    }
    if let Some(t) = rustls_cause(e) {
        return AgentsError::BusTls {
            detail: tls_words(t),
        };
    }
    match e.kind() {
        ConnectErrorKind::AuthorizationViolation | ConnectErrorKind::Authentication => {
            AgentsError::BusRefused { detail }
        }
        ConnectErrorKind::Tls => AgentsError::BusTls { detail },
        _ => AgentsError::bus("connect", detail),
    }
}

/// The TLS library's error under a connect error (the client wraps it in an I/O one).
fn rustls_cause(e: &async_nats::ConnectError) -> Option<&rustls::Error> {
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        if let Some(t) = s.downcast_ref::<rustls::Error>() {
            return Some(t);
        }
        if let Some(t) = s
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|i| i.downcast_ref::<rustls::Error>())
        {
            return Some(t);
        }
        src = s.source();
    }
    None
}

/// A TLS failure in the words a user acts on.
fn tls_words(e: &rustls::Error) -> String {
    use rustls::{CertificateError, Error};
    match e {
        Error::InvalidMessage(_) => {
            format!("the bus does not speak TLS (or not at once: {e})")
        }
        Error::InvalidCertificate(CertificateError::Expired)
        | Error::InvalidCertificate(CertificateError::ExpiredContext { .. }) => {
            format!("the bus's certificate has expired ({e})")
        }
        Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            format!("the bus's certificate is not signed by the CA in the credentials ({e})")
        }
        _ => e.to_string(),
    }
}

/// The next message of a subscription within `bound`: `None` when none came.
pub async fn next(sub: &mut Subscriber, bound: Duration) -> Option<Incoming> {
    tokio::time::timeout(bound, sub.next()).await.ok().flatten()
}

/// A current-thread tokio runtime: the bus needs one, the rest of volley does not.
pub fn runtime() -> Result<tokio::runtime::Runtime, AgentsError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| AgentsError::Io {
            action: "starting the bus runtime",
            source,
        })
}
