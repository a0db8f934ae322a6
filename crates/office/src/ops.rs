//! What is timed: one histogram set per operation type and per sync session kind.

/// The request types the office times separately (docs/methodology.md, "The office").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    /// OPTIONS (Thunderbird's capability probe).
    Options,
    /// PROPFIND Depth 0: discovery, getctag, sync-token.
    PropfindD0,
    /// PROPFIND Depth 1: a calendar's ETag listing, a home's calendar listing.
    PropfindD1,
    /// REPORT sync-collection (RFC 6578).
    ReportSync,
    /// REPORT calendar-multiget.
    ReportMultiget,
    /// REPORT calendar-query (Evolution's time-range listing).
    ReportQuery,
    /// GET of one item.
    Get,
    /// PUT of a new item (If-None-Match: *).
    PutCreate,
    /// PUT of a changed item (If-Match).
    PutUpdate,
    /// DELETE (If-Match).
    Delete,
    /// MKCALENDAR, or MKCOL on plain WebDAV (set-up only: a server without the
    /// calendar yet).
    Mkcalendar,
}

impl Op {
    /// Every op, in table order.
    pub const ALL: [Op; 11] = [
        Op::Options,
        Op::PropfindD0,
        Op::PropfindD1,
        Op::ReportSync,
        Op::ReportMultiget,
        Op::ReportQuery,
        Op::Get,
        Op::PutCreate,
        Op::PutUpdate,
        Op::Delete,
        Op::Mkcalendar,
    ];

    /// The name tables, JSON and recordings use.
    pub fn name(self) -> &'static str {
        match self {
            Op::Options => "options",
            Op::PropfindD0 => "propfind-d0",
            Op::PropfindD1 => "propfind-d1",
            Op::ReportSync => "report-sync",
            Op::ReportMultiget => "report-multiget",
            Op::ReportQuery => "report-query",
            Op::Get => "get",
            Op::PutCreate => "put-create",
            Op::PutUpdate => "put-update",
            Op::Delete => "delete",
            Op::Mkcalendar => "mkcalendar",
        }
    }

    /// Index into per-op arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The two kinds of sync session a client runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SessionKind {
    /// Discovery, full listing, fetch of everything (a client's first start).
    Initial,
    /// A poll: what changed since the last one, fetched (and DAVx5's uploads).
    Poll,
}

impl SessionKind {
    /// Both, in table order.
    pub const ALL: [SessionKind; 2] = [SessionKind::Initial, SessionKind::Poll];

    /// The name tables and JSON use.
    pub fn name(self) -> &'static str {
        match self {
            SessionKind::Initial => "sync-initial",
            SessionKind::Poll => "sync-poll",
        }
    }
}
