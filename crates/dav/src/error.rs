//! Typed failures of the handler and the one place they become HTTP statuses.
//!
//! Every method returns `Result<DavResponse, DavError>`; [`DavError::response`] turns the
//! error side into a short plain-text reason or, for RFC 4918 section 16 preconditions, a
//! `DAV:error` body naming the failed condition (clients such as python-caldav read it).

use std::io;

use crate::DavResponse;
use volley_docroot::path::PathError;

/// A failed precondition or postcondition: the qualified element name that goes inside
/// `<D:error>`, with the `D:` (DAV:) or `C:` (CalDAV) prefix the error body declares.
pub type Condition = &'static str;

/// Why a request could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum DavError {
    /// The request target is not a path we accept (bad escape, NUL, ...).
    #[error("bad request target")]
    BadTarget,
    /// The target would leave the root or names an internal `.volley-*` file.
    #[error("target refused")]
    Refused,
    /// No resource at the target.
    #[error("not found")]
    NotFound,
    /// Malformed request (header or body) other than bad XML.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The XML body is not well-formed or not what the method expects.
    #[error("bad XML body: {0}")]
    BadXml(String),
    /// The method is not allowed on this resource.
    #[error("method not allowed: {0}")]
    MethodNotAllowed(&'static str),
    /// The resource state conflicts with the request (e.g. missing parent).
    #[error("conflict: {0}")]
    Conflict(&'static str),
    /// If-Match / If-None-Match / Overwrite did not hold.
    #[error("precondition failed: {0}")]
    PreconditionFailed(&'static str),
    /// A body where none is understood (MKCOL with a body).
    #[error("unsupported media type: {0}")]
    UnsupportedMediaType(&'static str),
    /// A named DAV/CalDAV precondition failed; answered with a `DAV:error` body.
    #[error("{status}: precondition {cond} failed: {reason}")]
    Condition {
        /// 403 or 409, as the defining RFC says.
        status: u16,
        /// Qualified element name (`D:...` or `C:...`).
        cond: Condition,
        /// Human-readable explanation, sent as an XML comment-free text node.
        reason: &'static str,
    },
    /// PUT of a calendar object whose UID another resource of the calendar holds
    /// (RFC 4791 `C:no-uid-conflict`): the href of that resource.
    #[error("403: precondition C:no-uid-conflict failed: {0} holds this UID")]
    UidConflict(String),
    /// A method this crate deliberately does not implement (locking).
    #[error("not implemented: {0}")]
    NotImplemented(&'static str),
    /// The file system failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
}

impl From<PathError> for DavError {
    fn from(e: PathError) -> Self {
        match e {
            PathError::BadTarget => DavError::BadTarget,
            PathError::Escapes => DavError::Refused,
        }
    }
}

impl DavError {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> u16 {
        match self {
            DavError::BadTarget | DavError::BadRequest(_) | DavError::BadXml(_) => 400,
            DavError::Refused => 403,
            DavError::NotFound => 404,
            DavError::MethodNotAllowed(_) => 405,
            DavError::Conflict(_) => 409,
            DavError::PreconditionFailed(_) => 412,
            DavError::UnsupportedMediaType(_) => 415,
            DavError::Condition { status, .. } => *status,
            DavError::UidConflict(_) => 403,
            DavError::NotImplemented(_) => 501,
            DavError::Io(e) => match e.kind() {
                io::ErrorKind::NotFound => 404,
                io::ErrorKind::PermissionDenied => 403,
                io::ErrorKind::AlreadyExists => 405,
                io::ErrorKind::StorageFull => 507,
                io::ErrorKind::NotADirectory => 409,
                _ => 500,
            },
        }
    }

    /// The complete response for this error.
    pub fn response(&self) -> DavResponse {
        let status = self.status();
        match self {
            DavError::Condition { cond, reason, .. } => error_body(
                status,
                &format!(
                    "<{cond}/><D:responsedescription>{}</D:responsedescription>",
                    crate::xml::escape(reason)
                ),
            ),
            DavError::UidConflict(href) => error_body(
                status,
                &format!(
                    "<C:no-uid-conflict><D:href>{}</D:href></C:no-uid-conflict>",
                    crate::xml::escape(href)
                ),
            ),
            _ => {
                let mut headers = vec![("Content-Type".into(), "text/plain; charset=utf-8".into())];
                if status == 405 {
                    headers.push(("Allow".into(), crate::ALLOW.into()));
                }
                DavResponse {
                    status,
                    headers,
                    body: format!("{self}\n").into_bytes(),
                }
            }
        }
    }
}

/// A `DAV:error` body (RFC 4918 section 16) holding `inner`, the precondition element
/// and what explains it.
fn error_body(status: u16, inner: &str) -> DavResponse {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:error xmlns:D=\"DAV:\" \
         xmlns:C=\"urn:ietf:params:xml:ns:caldav\">{inner}</D:error>\n"
    );
    DavResponse {
        status,
        headers: vec![(
            "Content-Type".into(),
            "application/xml; charset=utf-8".into(),
        )],
        body: body.into_bytes(),
    }
}
