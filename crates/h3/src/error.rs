//! HTTP/3 error codes (RFC 9114 §8.1, RFC 9204 §6) and the typed errors of the codec.

/// An HTTP/3 or QPACK error code as carried by CONNECTION_CLOSE, RESET_STREAM and
/// STOP_SENDING. Unknown codes are kept, for reporting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 0x100: no error (graceful close).
    NoError,
    /// 0x101.
    GeneralProtocolError,
    /// 0x102.
    InternalError,
    /// 0x103: a stream the peer was not allowed to open (a second control stream).
    StreamCreationError,
    /// 0x104: a control stream closed.
    ClosedCriticalStream,
    /// 0x105: a frame not allowed where it came.
    FrameUnexpected,
    /// 0x106: a frame that does not parse.
    FrameError,
    /// 0x107: the peer asked for more than we allow.
    ExcessiveLoad,
    /// 0x108: a bad stream or push identifier.
    IdError,
    /// 0x109: a bad SETTINGS frame.
    SettingsError,
    /// 0x10a: the control stream did not start with SETTINGS.
    MissingSettings,
    /// 0x10b: the server did not process the request: safe to retry.
    RequestRejected,
    /// 0x10c: the request was cancelled.
    RequestCancelled,
    /// 0x10d: the stream ended before the request was complete.
    RequestIncomplete,
    /// 0x10e: a malformed message.
    MessageError,
    /// 0x10f.
    ConnectError,
    /// 0x110: retry over HTTP/1.1.
    VersionFallback,
    /// 0x200: a field section QPACK could not decode.
    QpackDecompressionFailed,
    /// 0x201: a bad instruction on the QPACK encoder stream.
    QpackEncoderStreamError,
    /// 0x202: a bad instruction on the QPACK decoder stream.
    QpackDecoderStreamError,
    /// Any other value (reserved codes 0x1f * N + 0x21 included).
    Unknown(u64),
}

impl ErrorCode {
    /// The known codes, in wire order (for the conversions and their test).
    const KNOWN: [(ErrorCode, u64); 20] = [
        (ErrorCode::NoError, 0x100),
        (ErrorCode::GeneralProtocolError, 0x101),
        (ErrorCode::InternalError, 0x102),
        (ErrorCode::StreamCreationError, 0x103),
        (ErrorCode::ClosedCriticalStream, 0x104),
        (ErrorCode::FrameUnexpected, 0x105),
        (ErrorCode::FrameError, 0x106),
        (ErrorCode::ExcessiveLoad, 0x107),
        (ErrorCode::IdError, 0x108),
        (ErrorCode::SettingsError, 0x109),
        (ErrorCode::MissingSettings, 0x10a),
        (ErrorCode::RequestRejected, 0x10b),
        (ErrorCode::RequestCancelled, 0x10c),
        (ErrorCode::RequestIncomplete, 0x10d),
        (ErrorCode::MessageError, 0x10e),
        (ErrorCode::ConnectError, 0x10f),
        (ErrorCode::VersionFallback, 0x110),
        (ErrorCode::QpackDecompressionFailed, 0x200),
        (ErrorCode::QpackEncoderStreamError, 0x201),
        (ErrorCode::QpackDecoderStreamError, 0x202),
    ];

    /// The wire value.
    pub fn to_u64(self) -> u64 {
        match self {
            ErrorCode::Unknown(v) => v,
            known => Self::KNOWN
                .iter()
                .find(|(c, _)| *c == known)
                .map_or(0x102, |&(_, v)| v),
        }
    }

    /// From the wire value.
    pub fn from_u64(v: u64) -> ErrorCode {
        Self::KNOWN
            .iter()
            .find(|&&(_, w)| w == v)
            .map_or(ErrorCode::Unknown(v), |&(c, _)| c)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorCode::Unknown(v) => write!(f, "UNKNOWN(0x{v:x})"),
            other => write!(f, "{other:?}(0x{:x})", other.to_u64()),
        }
    }
}

/// Why a field section could not be decoded (RFC 9204). Every QPACK error but
/// [`QpackError::FieldSectionTooLarge`] is a connection error of type
/// QPACK_DECOMPRESSION_FAILED (or QPACK_ENCODER_STREAM_ERROR on the encoder stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QpackError {
    /// A prefixed integer longer than 62 bits.
    #[error("QPACK integer overflows 62 bits")]
    IntegerOverflow,
    /// The section ends in the middle of a representation.
    #[error("QPACK field section truncated")]
    Truncated,
    /// A reference to a dynamic table entry that is not there: at or past the
    /// section's Required Insert Count, never inserted, already evicted, or any
    /// reference at all when we advertise a capacity of 0.
    #[error("QPACK reference to a dynamic table entry that is not there")]
    DynamicReference,
    /// A Required Insert Count whose encoding cannot be decoded (§4.5.1.1).
    #[error("QPACK Required Insert Count invalid")]
    RequiredInsertCount,
    /// A section that needs entries that have not arrived: it would block its
    /// stream, and we advertise SETTINGS_QPACK_BLOCKED_STREAMS = 0 (§2.1.2).
    #[error("QPACK section needs {required} inserts, {inserted} arrived, and we allow no blocked streams")]
    Blocked {
        /// The section's Required Insert Count.
        required: u64,
        /// Inserts received so far.
        inserted: u64,
    },
    /// On the encoder stream: a capacity above the one we advertise, an entry
    /// larger than the table, or an instruction longer than any that could fit.
    #[error("QPACK table capacity exceeded")]
    TableCapacity,
    /// A static index past the 99 entries of the static table.
    #[error("QPACK static index {0} out of range")]
    StaticIndexOutOfRange(u64),
    /// A Huffman string with the EOS symbol or bad padding.
    #[error("QPACK Huffman string invalid")]
    Huffman,
    /// The decoded fields exceed the SETTINGS_MAX_FIELD_SECTION_SIZE we advertised: a
    /// stream error, the connection stays usable (RFC 9114 §4.2.2).
    #[error("QPACK field section above our {0}-byte limit")]
    FieldSectionTooLarge(usize),
}

impl QpackError {
    /// Whether only the one message is lost (the connection stays usable).
    pub fn is_stream_error(self) -> bool {
        matches!(self, QpackError::FieldSectionTooLarge(_))
    }
}

/// A protocol failure seen by the codec. [`H3Error::code`] is the code to close the
/// connection (or, for [`H3Error::is_stream_error`], reset the stream) with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum H3Error {
    /// A frame where it is not allowed (DATA before HEADERS, SETTINGS on a request
    /// stream, a reserved HTTP/2 frame type).
    #[error("HTTP/3 frame unexpected: {0}")]
    FrameUnexpected(&'static str),
    /// A frame that does not parse, or a stream that ends inside one.
    #[error("HTTP/3 frame error: {0}")]
    Frame(&'static str),
    /// A frame longer than we buffer.
    #[error("HTTP/3 excessive load: {0}")]
    ExcessiveLoad(&'static str),
    /// A SETTINGS frame with a reserved or repeated identifier.
    #[error("HTTP/3 settings error: {0}")]
    Settings(&'static str),
    /// The peer's control stream did not start with SETTINGS.
    #[error("HTTP/3 control stream did not start with SETTINGS")]
    MissingSettings,
    /// A second control stream, or a push stream we never allowed.
    #[error("HTTP/3 stream creation error: {0}")]
    StreamCreation(&'static str),
    /// A push we never allowed (we send no MAX_PUSH_ID).
    #[error("HTTP/3 identifier error: {0}")]
    Id(&'static str),
    /// The peer closed its control stream.
    #[error("HTTP/3 control stream closed")]
    ClosedCriticalStream,
    /// A malformed message: no or a bad `:status`, a stream that ended before its
    /// head (stream error).
    #[error("HTTP/3 malformed message: {0}")]
    Message(&'static str),
    /// A field section or encoder-stream instruction QPACK refuses.
    #[error("{0}")]
    Qpack(#[from] QpackError),
    /// A bad instruction on the peer's QPACK encoder stream.
    #[error("QPACK encoder stream error: {0}")]
    EncoderStream(QpackError),
}

impl H3Error {
    /// The error code this failure is reported with.
    pub fn code(&self) -> ErrorCode {
        match self {
            H3Error::FrameUnexpected(_) => ErrorCode::FrameUnexpected,
            H3Error::Frame(_) => ErrorCode::FrameError,
            H3Error::ExcessiveLoad(_) => ErrorCode::ExcessiveLoad,
            H3Error::Settings(_) => ErrorCode::SettingsError,
            H3Error::MissingSettings => ErrorCode::MissingSettings,
            H3Error::StreamCreation(_) => ErrorCode::StreamCreationError,
            H3Error::Id(_) => ErrorCode::IdError,
            H3Error::ClosedCriticalStream => ErrorCode::ClosedCriticalStream,
            H3Error::Message(_) => ErrorCode::MessageError,
            H3Error::Qpack(QpackError::FieldSectionTooLarge(_)) => ErrorCode::ExcessiveLoad,
            H3Error::Qpack(_) => ErrorCode::QpackDecompressionFailed,
            H3Error::EncoderStream(_) => ErrorCode::QpackEncoderStreamError,
        }
    }

    /// Whether only one stream is lost: the connection stays usable.
    pub fn is_stream_error(&self) -> bool {
        match self {
            H3Error::Message(_) => true,
            H3Error::Qpack(q) => q.is_stream_error(),
            _ => false,
        }
    }

    /// Whether QPACK (not the framing) failed: reported apart from other protocol
    /// errors, as the engine's error kinds ask.
    pub fn is_qpack(&self) -> bool {
        matches!(self, H3Error::Qpack(_) | H3Error::EncoderStream(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for (c, v) in ErrorCode::KNOWN {
            assert_eq!(c.to_u64(), v);
            assert_eq!(ErrorCode::from_u64(v), c);
        }
        assert_eq!(ErrorCode::from_u64(0x21), ErrorCode::Unknown(0x21));
        assert_eq!(ErrorCode::Unknown(0x21).to_u64(), 0x21);
        assert_eq!(ErrorCode::FrameError.to_string(), "FrameError(0x106)");
    }

    #[test]
    fn stream_and_connection_errors() {
        assert!(H3Error::Message("x").is_stream_error());
        assert!(H3Error::Qpack(QpackError::FieldSectionTooLarge(1)).is_stream_error());
        assert!(!H3Error::Qpack(QpackError::DynamicReference).is_stream_error());
        assert!(H3Error::Qpack(QpackError::DynamicReference).is_qpack());
        assert_eq!(
            H3Error::Qpack(QpackError::Truncated).code(),
            ErrorCode::QpackDecompressionFailed
        );
    }
}
