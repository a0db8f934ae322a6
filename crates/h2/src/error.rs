//! Error codes (RFC 9113 §7) and the typed errors of the connection.

use crate::hpack::HpackError;

/// An HTTP/2 error code as carried by RST_STREAM and GOAWAY. Unknown codes are kept
/// (RFC 9113 §7: they must not trigger special behaviour, but are worth reporting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 0x0: graceful shutdown.
    NoError,
    /// 0x1.
    ProtocolError,
    /// 0x2.
    InternalError,
    /// 0x3.
    FlowControlError,
    /// 0x4.
    SettingsTimeout,
    /// 0x5.
    StreamClosed,
    /// 0x6.
    FrameSizeError,
    /// 0x7: the server did not process the stream; safe to retry.
    RefusedStream,
    /// 0x8.
    Cancel,
    /// 0x9.
    CompressionError,
    /// 0xa.
    ConnectError,
    /// 0xb.
    EnhanceYourCalm,
    /// 0xc.
    InadequateSecurity,
    /// 0xd.
    Http11Required,
    /// Any other value.
    Unknown(u32),
}

impl ErrorCode {
    /// The wire value.
    pub fn to_u32(self) -> u32 {
        match self {
            ErrorCode::NoError => 0x0,
            ErrorCode::ProtocolError => 0x1,
            ErrorCode::InternalError => 0x2,
            ErrorCode::FlowControlError => 0x3,
            ErrorCode::SettingsTimeout => 0x4,
            ErrorCode::StreamClosed => 0x5,
            ErrorCode::FrameSizeError => 0x6,
            ErrorCode::RefusedStream => 0x7,
            ErrorCode::Cancel => 0x8,
            ErrorCode::CompressionError => 0x9,
            ErrorCode::ConnectError => 0xa,
            ErrorCode::EnhanceYourCalm => 0xb,
            ErrorCode::InadequateSecurity => 0xc,
            ErrorCode::Http11Required => 0xd,
            ErrorCode::Unknown(v) => v,
        }
    }

    /// From the wire value.
    pub fn from_u32(v: u32) -> ErrorCode {
        match v {
            0x0 => ErrorCode::NoError,
            0x1 => ErrorCode::ProtocolError,
            0x2 => ErrorCode::InternalError,
            0x3 => ErrorCode::FlowControlError,
            0x4 => ErrorCode::SettingsTimeout,
            0x5 => ErrorCode::StreamClosed,
            0x6 => ErrorCode::FrameSizeError,
            0x7 => ErrorCode::RefusedStream,
            0x8 => ErrorCode::Cancel,
            0x9 => ErrorCode::CompressionError,
            0xa => ErrorCode::ConnectError,
            0xb => ErrorCode::EnhanceYourCalm,
            0xc => ErrorCode::InadequateSecurity,
            0xd => ErrorCode::Http11Required,
            other => ErrorCode::Unknown(other),
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorCode::Unknown(v) => write!(f, "UNKNOWN(0x{v:x})"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// A connection-level failure: the connection cannot be used any more. When the
/// failure is the peer's fault a GOAWAY with [`ConnError::code`] has been queued in
/// the output, so writing it before closing tells the server why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnError {
    /// The peer broke a protocol rule (PROTOCOL_ERROR); the reason names the rule.
    #[error("HTTP/2 protocol error: {0}")]
    Protocol(&'static str),
    /// A frame of a wrong or too large size (FRAME_SIZE_ERROR).
    #[error("HTTP/2 frame size error: {0}")]
    FrameSize(&'static str),
    /// The peer exceeded a flow-control window (FLOW_CONTROL_ERROR).
    #[error("HTTP/2 flow control error: {0}")]
    FlowControl(&'static str),
    /// A header block we could not decode (COMPRESSION_ERROR).
    #[error("HTTP/2 header compression error: {0}")]
    Compression(#[from] HpackError),
    /// The peer closed the connection with an error code in GOAWAY.
    #[error("HTTP/2 peer sent GOAWAY {code} (last stream {last_stream})")]
    GoAway {
        /// The peer's error code.
        code: ErrorCode,
        /// Highest stream the peer may have processed.
        last_stream: u32,
    },
    /// The peer made us queue more output than `Settings::max_pending_output_bytes`
    /// (for instance a PING flood while nobody writes): ENHANCE_YOUR_CALM.
    #[error("HTTP/2 output buffer over its {0}-byte limit")]
    OutputOverflow(usize),
}

impl ConnError {
    /// The RFC 9113 error code this failure corresponds to.
    pub fn code(&self) -> ErrorCode {
        match self {
            ConnError::Protocol(_) => ErrorCode::ProtocolError,
            ConnError::FrameSize(_) => ErrorCode::FrameSizeError,
            ConnError::FlowControl(_) => ErrorCode::FlowControlError,
            ConnError::Compression(_) => ErrorCode::CompressionError,
            ConnError::GoAway { code, .. } => *code,
            ConnError::OutputOverflow(_) => ErrorCode::EnhanceYourCalm,
        }
    }
}

/// Why a request could not be submitted. None of these harm the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS is reached: queue and retry when a
    /// stream finishes.
    #[error("peer's concurrent stream limit reached")]
    TooManyStreams,
    /// The peer sent GOAWAY, or the connection failed: open a new connection.
    #[error("connection is closing")]
    Closing,
    /// All 2^30 client stream identifiers are used: open a new connection.
    #[error("stream identifiers exhausted")]
    StreamIdsExhausted,
    /// A header name that is empty or contains bytes not allowed in HTTP/2 field
    /// names (upper case is lowered instead).
    #[error("invalid header name")]
    InvalidHeaderName,
    /// A field value containing CR, LF or NUL, or an empty method or path.
    #[error("invalid header value")]
    InvalidHeaderValue,
}
