//! PROPFIND and PROPPATCH, and the per-resource `<D:response>` builder REPORT reuses.
//!
//! Live properties are computed from the file system on every request (nothing cached,
//! so nothing goes stale); dead properties come from the sidecar files in [`store`].

use std::fs;

use roxmltree::Node;

use crate::error::DavError;
use crate::store::{self, DeadProps};
use crate::xml::{self, Name, CALDAV, CS, DAV};
use crate::{Dav, DavRequest, DavResponse, Target};

/// What a PROPFIND (or REPORT) asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PropRequest {
    /// All dead properties and the RFC 4918 live ones, plus `include`d names.
    AllProp(Vec<Name>),
    /// Names only.
    PropName,
    /// These properties.
    Props(Vec<Name>),
}

/// Live properties: (namespace, local name, listed by allprop).
const LIVE: &[(&str, &str, bool)] = &[
    (DAV, "resourcetype", true),
    (DAV, "getetag", true),
    (DAV, "getcontentlength", true),
    (DAV, "getcontenttype", true),
    (DAV, "getlastmodified", true),
    (DAV, "creationdate", true),
    (DAV, "displayname", true),
    (DAV, "supportedlock", true),
    (DAV, "lockdiscovery", true),
    (DAV, "sync-token", false),
    (DAV, "supported-report-set", false),
    (DAV, "current-user-principal", false),
    (DAV, "owner", false),
    (DAV, "principal-collection-set", false),
    (CALDAV, "calendar-user-address-set", false),
    (DAV, "principal-URL", false),
    (DAV, "current-user-privilege-set", false),
    (CALDAV, "calendar-home-set", false),
    (CALDAV, "supported-calendar-component-set", false),
    (CALDAV, "calendar-data", false),
    (CS, "getctag", false),
];

/// Whether a client may not set or remove `name` (every live property but displayname,
/// which is stored as a dead property and overrides the collection's creation name).
pub(crate) fn is_protected(name: &Name) -> bool {
    !name.is(DAV, "displayname") && LIVE.iter().any(|(ns, l, _)| name.is(ns, l))
}

/// One existing resource, with what PROPFIND needs to describe it.
pub(crate) struct Resource {
    pub target: Target,
    pub meta: fs::Metadata,
}

impl Resource {
    /// The resource at `target`, or NotFound.
    pub fn open(target: Target) -> Result<Resource, DavError> {
        match fs::metadata(&target.path) {
            Ok(meta) => Ok(Resource { target, meta }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(DavError::NotFound),
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Err(DavError::NotFound),
            Err(e) => Err(e.into()),
        }
    }

    pub fn is_dir(&self) -> bool {
        self.meta.is_dir()
    }

    pub fn href(&self) -> String {
        self.target.href(self.is_dir())
    }

    /// Members of a collection, sorted by name, internal files and symlinks that
    /// leave the root skipped.
    pub fn members(&self, dav: &Dav) -> Result<Vec<Resource>, DavError> {
        let mut out = Vec::new();
        let canon_root = dav.root().canonicalize()?;
        for entry in fs::read_dir(&self.target.path)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = std::os::unix::ffi::OsStrExt::as_bytes(name.as_os_str()).to_vec();
            if store::is_internal_name(&name)
                || (self.target.segs.is_empty() && !dav.root_member_visible(&name))
            {
                continue;
            }
            let target = self.target.child(&name);
            if entry.file_type()?.is_symlink() {
                match target.path.canonicalize() {
                    Ok(c) if c.starts_with(&canon_root) => {}
                    _ => continue,
                }
            }
            if let Ok(r) = Resource::open(target) {
                out.push(r);
            }
        }
        out.sort_by(|a, b| a.target.segs.cmp(&b.target.segs));
        Ok(out)
    }
}

/// Parses the list of property names inside a `DAV:prop` element.
pub(crate) fn prop_names(prop: Node<'_, '_>) -> Vec<Name> {
    xml::elements(prop).map(Name::of).collect()
}

/// Parses a PROPFIND body (empty means allprop). Unknown elements are ignored, as RFC
/// 4918 section 17 asks (litmus sends `<foobar/>` before `<allprop/>`).
pub(crate) fn parse_propfind(body: &[u8]) -> Result<PropRequest, DavError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(PropRequest::AllProp(Vec::new()));
    }
    let doc = xml::parse(body)?;
    let root = doc.root_element();
    if Name::of(root) != Name::new(DAV, "propfind") {
        return Err(DavError::BadXml("root element is not DAV:propfind".into()));
    }
    let mut include = Vec::new();
    let mut found = None;
    for c in xml::elements(root) {
        let n = Name::of(c);
        if n.ns != DAV {
            continue;
        }
        let this = match n.local.as_str() {
            "allprop" => PropRequest::AllProp(Vec::new()),
            "propname" => PropRequest::PropName,
            "prop" => PropRequest::Props(prop_names(c)),
            "include" => {
                include = prop_names(c);
                continue;
            }
            _ => continue,
        };
        if found.replace(this).is_some() {
            return Err(DavError::BadXml(
                "more than one of allprop, propname, prop".into(),
            ));
        }
    }
    match found {
        Some(PropRequest::AllProp(_)) => Ok(PropRequest::AllProp(include)),
        Some(r) => Ok(r),
        None => Err(DavError::BadXml(
            "propfind has none of allprop, propname, prop".into(),
        )),
    }
}

/// The PROPFIND Depth: 0 or 1; infinity (also the default when absent, RFC 4918
/// section 9.1) is refused, because listing a whole tree is a denial-of-service lever.
pub(crate) fn depth(req: &DavRequest<'_>, default_infinity: bool) -> Result<u8, DavError> {
    match req.header("Depth").map(str::trim) {
        Some("0") => Ok(0),
        Some("1") => Ok(1),
        Some(v) if v.eq_ignore_ascii_case("infinity") => Err(finite_depth()),
        None if default_infinity => Err(finite_depth()),
        None => Ok(1),
        Some(_) => Err(DavError::BadRequest(
            "Depth must be 0, 1 or infinity".into(),
        )),
    }
}

fn finite_depth() -> DavError {
    DavError::Condition {
        status: 403,
        cond: "D:propfind-finite-depth",
        reason: "Depth: infinity is not supported; use Depth 0 or 1",
    }
}

/// PROPFIND.
pub(crate) fn propfind(dav: &Dav, req: &DavRequest<'_>) -> Result<DavResponse, DavError> {
    let target = dav.locate(req.target)?;
    let res = Resource::open(target)?;
    let depth = depth(req, true)?;
    let what = parse_propfind(req.body)?;
    let mut out = String::from(xml::MULTISTATUS_OPEN);
    out.push_str(&response(dav, &res, &what)?);
    if depth == 1 && res.is_dir() {
        for m in res.members(dav)? {
            out.push_str(&response(dav, &m, &what)?);
        }
    }
    out.push_str("</D:multistatus>\n");
    Ok(DavResponse::multistatus(out))
}

/// A `<D:propstat>` block.
fn propstat(props: &str, status: &str) -> String {
    format!(
        "<D:propstat><D:prop>{props}</D:prop><D:status>HTTP/1.1 {status}</D:status></D:propstat>"
    )
}

/// A transform of calendar data on its way into `C:calendar-data` (expand,
/// limit-recurrence-set).
pub(crate) type DataFn<'a> = &'a dyn Fn(&[u8]) -> Vec<u8>;

/// The `<D:response>` for one resource.
pub(crate) fn response(dav: &Dav, res: &Resource, what: &PropRequest) -> Result<String, DavError> {
    response_with(dav, res, what, None)
}

/// [`response`] with calendar data passed through `data`.
pub(crate) fn response_with(
    dav: &Dav,
    res: &Resource,
    what: &PropRequest,
    data: Option<DataFn<'_>>,
) -> Result<String, DavError> {
    let dead = store::read_props(&res.target.path, res.is_dir());
    let mut ok = String::new();
    let mut missing = String::new();
    let mut content: Option<Vec<u8>> = None;
    match what {
        PropRequest::PropName => {
            for (ns, local, _) in LIVE {
                let n = Name::new(ns, local);
                if live_value(dav, res, &n, &mut content, data)?.is_some() && !dead.contains_key(&n)
                {
                    ok.push_str(&n.empty_element());
                }
            }
            for n in dead.keys() {
                ok.push_str(&n.empty_element());
            }
        }
        PropRequest::AllProp(include) => {
            for (ns, local, all) in LIVE {
                let n = Name::new(ns, local);
                if (*all || include.contains(&n)) && !dead.contains_key(&n) {
                    if let Some(v) = live_value(dav, res, &n, &mut content, data)? {
                        let (o, c) = n.tags();
                        ok.push_str(&format!("{o}{v}{c}"));
                    }
                }
            }
            for v in dead.values() {
                ok.push_str(v);
            }
        }
        PropRequest::Props(names) => {
            for n in names {
                if let Some(v) = value(dav, res, &dead, n, &mut content, data)? {
                    ok.push_str(&v);
                } else {
                    missing.push_str(&n.empty_element());
                }
            }
        }
    }
    let mut s = format!("<D:response><D:href>{}</D:href>", xml::escape(&res.href()));
    if !ok.is_empty() || missing.is_empty() {
        s.push_str(&propstat(&ok, "200 OK"));
    }
    if !missing.is_empty() {
        s.push_str(&propstat(&missing, "404 Not Found"));
    }
    s.push_str("</D:response>");
    Ok(s)
}

/// The full element of property `n` on `res`, or None when it has none.
fn value(
    dav: &Dav,
    res: &Resource,
    dead: &DeadProps,
    n: &Name,
    content: &mut Option<Vec<u8>>,
    data: Option<DataFn<'_>>,
) -> Result<Option<String>, DavError> {
    if let Some(v) = dead.get(n) {
        return Ok(Some(v.clone()));
    }
    Ok(live_value(dav, res, n, content, data)?.map(|v| {
        let (o, c) = n.tags();
        format!("{o}{v}{c}")
    }))
}

/// The inner XML of live property `n` on `res`, or None when not defined for it.
/// `content` caches the file's bytes between getetag and calendar-data.
fn live_value(
    dav: &Dav,
    res: &Resource,
    n: &Name,
    content: &mut Option<Vec<u8>>,
    data: Option<DataFn<'_>>,
) -> Result<Option<String>, DavError> {
    let dir = res.is_dir();
    let mut bytes = || -> Result<Vec<u8>, DavError> {
        if content.is_none() {
            *content = Some(fs::read(&res.target.path)?);
        }
        Ok(content.clone().unwrap_or_default())
    };
    let calendar = dir && crate::is_calendar_collection(&res.target.path);
    let principal = || {
        format!(
            "<D:href>{}</D:href>",
            xml::escape(&dav.principal_href(&res.target, dir))
        )
    };
    let v = match (n.ns.as_str(), n.local.as_str()) {
        (DAV, "resourcetype") => Some(match (dir, calendar) {
            (true, true) => "<D:collection/><C:calendar/>".to_owned(),
            // An account's home is its principal (multi-user mode).
            (true, false) if dav.user().is_some() && res.target.segs.len() == 1 => {
                "<D:collection/><D:principal/>".to_owned()
            }
            (true, false) => "<D:collection/>".to_owned(),
            _ => String::new(),
        }),
        (DAV, "getetag") if !dir => {
            let known = dav.items().etag(&res.meta);
            Some(xml::escape(&match known {
                Some(tag) => tag,
                None => {
                    let b = bytes()?;
                    let h = crate::fnv1a(&b);
                    dav.items().set_fnv(&res.meta, h);
                    crate::etag_of(h, b.len() as u64)
                }
            }))
        }
        (DAV, "getcontentlength") if !dir => Some(res.meta.len().to_string()),
        (DAV, "getcontenttype") if !dir => Some(
            volley_docroot::mime::content_type(&res.target.path.to_string_lossy()).into_owned(),
        ),
        (DAV, "getlastmodified") => res.meta.modified().ok().map(store::http_date),
        (DAV, "creationdate") => res
            .meta
            .created()
            .or_else(|_| res.meta.modified())
            .ok()
            .map(store::rfc3339),
        (DAV, "displayname") if dir => store::read_meta(&res.target.path)
            .displayname
            .map(|d| xml::escape(&d)),
        (DAV, "supportedlock") | (DAV, "lockdiscovery") => Some(String::new()),
        (DAV, "sync-token") | (CS, "getctag") if dir => Some(xml::escape(
            &store::journal_state(&res.target.path)?.token(),
        )),
        (DAV, "supported-report-set") if dir => Some(supported_reports(calendar)),
        (DAV, "current-user-principal")
        | (DAV, "principal-URL")
        | (DAV, "owner")
        | (CALDAV, "calendar-home-set")
        | (CALDAV, "calendar-user-address-set") => Some(principal()),
        // Where principals live (RFC 3744 section 5.8): clients search under it.
        (DAV, "principal-collection-set") => Some("<D:href>/</D:href>".to_owned()),
        (DAV, "current-user-privilege-set") => Some(privilege_set()),
        (CALDAV, "supported-calendar-component-set") if calendar => Some(
            store::read_meta(&res.target.path)
                .accepted_components()
                .iter()
                .map(|c| format!("<C:comp name=\"{}\"/>", xml::escape(c)))
                .collect(),
        ),
        (CALDAV, "calendar-data") if !dir => {
            let raw = bytes()?;
            let shown = match data {
                Some(f) => f(&raw),
                None => raw,
            };
            Some(xml::escape(&String::from_utf8_lossy(&shown)))
        }
        _ => None,
    };
    Ok(v)
}

/// `DAV:supported-report-set` (RFC 3253 section 3.1.5): the CalDAV reports on a
/// calendar, sync-collection on every collection.
fn supported_reports(calendar: bool) -> String {
    let reports: &[&str] = if calendar {
        &[
            "C:calendar-multiget",
            "C:calendar-query",
            "C:free-busy-query",
            "D:sync-collection",
        ]
    } else {
        &["D:sync-collection"]
    };
    reports
        .iter()
        .map(|r| format!("<D:supported-report><D:report><{r}/></D:report></D:supported-report>"))
        .collect()
}

/// `DAV:current-user-privilege-set` (RFC 3744 section 5.4): every privilege, since an
/// account owns all it can reach.
fn privilege_set() -> String {
    [
        "read",
        "write",
        "write-properties",
        "write-content",
        "bind",
        "unbind",
        "all",
    ]
    .iter()
    .map(|p| format!("<D:privilege><D:{p}/></D:privilege>"))
    .collect()
}

/// One instruction of a PROPPATCH, in document order.
enum Update {
    Set(Name, String),
    Remove(Name),
}

/// Parses the `set` / `remove` instructions of a `DAV:propertyupdate` (or of the
/// `set` part of a MKCALENDAR body, whose root is passed in the same way).
fn parse_updates(root: Node<'_, '_>) -> Result<Vec<Update>, DavError> {
    let mut out = Vec::new();
    for op in xml::elements(root) {
        let kind = Name::of(op);
        let set = kind.is(DAV, "set");
        if !set && !kind.is(DAV, "remove") {
            continue;
        }
        let prop = xml::child(op, DAV, "prop")
            .ok_or_else(|| DavError::BadXml(format!("{} without DAV:prop", kind.local)))?;
        for p in xml::elements(prop) {
            out.push(if set {
                Update::Set(Name::of(p), xml::serialize(p))
            } else {
                Update::Remove(Name::of(p))
            });
        }
    }
    Ok(out)
}

/// PROPPATCH: all instructions apply or none do (RFC 4918 section 9.2); the result is
/// written atomically.
pub(crate) fn proppatch(dav: &Dav, req: &DavRequest<'_>) -> Result<DavResponse, DavError> {
    let target = dav.locate(req.target)?;
    if target.segs.is_empty() && dav.user().is_some() {
        return Err(DavError::Condition {
            status: 403,
            cond: "D:need-privileges",
            reason: "the root is shared by every account and cannot be changed",
        });
    }
    let res = Resource::open(target)?;
    let doc = xml::parse(req.body)?;
    let root = doc.root_element();
    if Name::of(root) != Name::new(DAV, "propertyupdate") {
        return Err(DavError::BadXml(
            "root element is not DAV:propertyupdate".into(),
        ));
    }
    let updates = parse_updates(root)?;
    let body = apply_updates(&res, updates)?;
    Ok(DavResponse::multistatus(body))
}

/// Applies updates to the dead properties of `res` and renders the multistatus.
fn apply_updates(res: &Resource, updates: Vec<Update>) -> Result<String, DavError> {
    let mut props = store::read_props(&res.target.path, res.is_dir());
    let mut names: Vec<Name> = Vec::new();
    let mut refused: Vec<Name> = Vec::new();
    for u in updates {
        let name = match u {
            Update::Set(n, v) => {
                if !is_protected(&n) {
                    props.insert(n.clone(), v);
                }
                n
            }
            Update::Remove(n) => {
                if !is_protected(&n) {
                    props.remove(&n);
                }
                n
            }
        };
        if is_protected(&name) {
            refused.push(name.clone());
        }
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let mut s = format!(
        "{}<D:response><D:href>{}</D:href>",
        xml::MULTISTATUS_OPEN,
        xml::escape(&res.href())
    );
    if refused.is_empty() {
        store::write_props(&res.target.path, res.is_dir(), &props)?;
        let all: String = names.iter().map(Name::empty_element).collect();
        s.push_str(&propstat(&all, "200 OK"));
    } else {
        let bad: String = refused.iter().map(Name::empty_element).collect();
        let dep: String = names
            .iter()
            .filter(|n| !refused.contains(n))
            .map(Name::empty_element)
            .collect();
        s.push_str(&format!(
            "<D:propstat><D:prop>{bad}</D:prop><D:status>HTTP/1.1 403 Forbidden</D:status>\
             <D:error><D:cannot-modify-protected-property/></D:error></D:propstat>"
        ));
        if !dep.is_empty() {
            s.push_str(&propstat(&dep, "424 Failed Dependency"));
        }
    }
    s.push_str("</D:response></D:multistatus>\n");
    Ok(s)
}

/// Applies the `DAV:set` part of a MKCALENDAR / extended MKCOL body to a new
/// collection. Returns the display name it set, if any (stored in the marker too).
pub(crate) fn apply_creation_props(
    res: &Resource,
    root: Node<'_, '_>,
) -> Result<Option<String>, DavError> {
    let updates = parse_updates(root)?;
    let mut displayname = None;
    let mut dead = Vec::new();
    for u in updates {
        if let Update::Set(n, v) = u {
            if n.is(DAV, "displayname") {
                if let Ok(doc) = xml::parse(v.as_bytes()) {
                    displayname = Some(xml::text(doc.root_element()));
                }
            } else if !is_protected(&n) && !n.is(CALDAV, "supported-calendar-component-set") {
                dead.push(Update::Set(n, v));
            }
        }
    }
    if !dead.is_empty() {
        apply_updates(res, dead)?;
    }
    Ok(displayname)
}

#[cfg(test)]
mod tests {
    use crate::tests::{body, call, TempDir};
    use crate::Dav;

    const D0: &[(&str, &str)] = &[("Depth", "0")];
    const D1: &[(&str, &str)] = &[("Depth", "1")];

    fn setup() -> (TempDir, Dav) {
        let d = TempDir::new("props");
        std::fs::create_dir(d.path().join("coll")).unwrap();
        std::fs::write(d.path().join("coll/a.txt"), b"hello").unwrap();
        std::fs::write(d.path().join("coll/.volley-sync"), b"volley-sync 1 e\n").unwrap();
        let dav = Dav::new(d.path());
        (d, dav)
    }

    /// The body of a Depth 0 PROPFIND on `/coll/a.txt`.
    fn propfind_a(dav: &Dav, q: &[u8]) -> String {
        body(&call(dav, "PROPFIND", "/coll/a.txt", D0, q))
    }

    #[test]
    fn propfind_depth_rules() {
        let (_d, dav) = setup();
        let r = call(&dav, "PROPFIND", "/coll/", &[("Depth", "infinity")], b"");
        assert_eq!(r.status, 403);
        assert!(body(&r).contains("propfind-finite-depth"));
        assert_eq!(call(&dav, "PROPFIND", "/coll/", &[], b"").status, 403);
        assert_eq!(
            call(&dav, "PROPFIND", "/coll/", &[("Depth", "2")], b"").status,
            400
        );
        assert_eq!(call(&dav, "PROPFIND", "/nope", D0, b"").status, 404);
        let r = call(&dav, "PROPFIND", "/coll", D1, b"");
        assert_eq!(r.status, 207);
        let b = body(&r);
        assert!(b.contains("<D:href>/coll/</D:href>"), "{b}");
        assert!(b.contains("<D:href>/coll/a.txt</D:href>"));
        assert!(!b.contains("volley-sync"), "internal file listed: {b}");
        assert!(b.contains(&format!(
            "<D:getetag>{}</D:getetag>",
            crate::xml::escape(&crate::strong_etag(b"hello"))
        )));
        assert!(b.contains("<D:getcontentlength>5</D:getcontentlength>"));
        let r = call(&dav, "PROPFIND", "/coll/", D0, b"");
        assert!(!body(&r).contains("a.txt"));
    }

    #[test]
    fn propfind_prop_and_propname_and_unknown() {
        let (_d, dav) = setup();
        let req = br#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:Z="urn:z"><D:prop><D:resourcetype/><D:sync-token/><Z:nope/><D:current-user-principal/></D:prop></D:propfind>"#;
        let b = body(&call(&dav, "PROPFIND", "/coll/", D0, req));
        assert!(
            b.contains("<D:resourcetype><D:collection/></D:resourcetype>"),
            "{b}"
        );
        assert!(
            b.contains("<D:sync-token>urn:volley:sync:e:0</D:sync-token>"),
            "{b}"
        );
        assert!(
            b.contains(
                "<D:current-user-principal><D:href>/coll/</D:href></D:current-user-principal>"
            ),
            "{b}"
        );
        assert!(
            b.contains("<X:nope xmlns:X=\"urn:z\"/></D:prop><D:status>HTTP/1.1 404 Not Found"),
            "{b}"
        );
        let b = propfind_a(&dav, br#"<propfind xmlns="DAV:"><propname/></propfind>"#);
        assert!(b.contains("<D:getetag/>") && !b.contains("hello"), "{b}");
        let ext = br#"<?xml version="1.0" encoding="utf-8" ?><propfind xmlns="DAV:"><foobar/><allprop/></propfind>"#;
        assert_eq!(call(&dav, "PROPFIND", "/coll/", D0, ext).status, 207);
    }

    #[test]
    fn propfind_bad_bodies_are_400_with_reason() {
        let (_d, dav) = setup();
        for b in [
            &b"<foo>"[..],
            b"<D:propfind xmlns:D=\"DAV:\"><D:prop><bar:foo xmlns:bar=\"\"/></D:prop></D:propfind>",
            b"<x/>",
            b"<propfind xmlns=\"DAV:\"/>",
            b"\xff",
        ] {
            let r = call(&dav, "PROPFIND", "/coll/", D0, b);
            assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(b));
            assert!(body(&r).starts_with("bad XML body: "));
        }
    }

    #[test]
    fn proppatch_set_remove_persist_and_protected() {
        let (_d, dav) = setup();
        let set = "<?xml version=\"1.0\"?><propertyupdate xmlns='DAV:'><set><prop><t:hi xmlns:t='urn:t'>\u{10348}&amp;<x xmlns='http://bar'/></t:hi><n xmlns=''>v</n><displayname>Mine</displayname></prop></set></propertyupdate>";
        let r = call(&dav, "PROPPATCH", "/coll/a.txt", &[], set.as_bytes());
        assert_eq!(r.status, 207);
        assert!(body(&r).contains("200 OK"));
        // A fresh handler (a restart) still sees them.
        let dav2 = Dav::new(dav.root());
        let q = br#"<propfind xmlns="DAV:"><prop><hi xmlns="urn:t"/><n xmlns=""/><displayname/></prop></propfind>"#;
        let b = body(&call(&dav2, "PROPFIND", "/coll/a.txt", D0, q));
        assert!(
            b.contains(
                "<e:hi xmlns:e=\"urn:t\">\u{10348}&amp;<e:x xmlns:e=\"http://bar\"/></e:hi>"
            ),
            "{b}"
        );
        assert!(b.contains("<n xmlns=\"\">v</n>"), "{b}");
        assert!(b.contains(">Mine</e:displayname>"), "{b}");
        assert!(!b.contains("404"));
        let rm = br#"<propertyupdate xmlns='DAV:'><remove><prop><hi xmlns='urn:t'/></prop></remove></propertyupdate>"#;
        assert_eq!(call(&dav, "PROPPATCH", "/coll/a.txt", &[], rm).status, 207);
        let b = body(&call(&dav, "PROPFIND", "/coll/a.txt", D0, q));
        assert!(
            b.contains("404 Not Found") && b.contains("<X:hi xmlns:X=\"urn:t\"/>"),
            "{b}"
        );
        // Protected property: nothing applies, 403 + 424.
        let bad = br#"<propertyupdate xmlns='DAV:'><set><prop><getetag>x</getetag><q xmlns='urn:q'>1</q></prop></set></propertyupdate>"#;
        let b = body(&call(&dav, "PROPPATCH", "/coll/a.txt", &[], bad));
        assert!(
            b.contains("403 Forbidden") && b.contains("424 Failed Dependency"),
            "{b}"
        );
        let b = propfind_a(
            &dav,
            br#"<propfind xmlns="DAV:"><prop><q xmlns="urn:q"/></prop></propfind>"#,
        );
        assert!(b.contains("404 Not Found"));
        // Set then remove in one request: removed. Remove then set: set (document order).
        let sr = br#"<propertyupdate xmlns='DAV:'><set><prop><r xmlns='urn:r'>x</r></prop></set><remove><prop><r xmlns='urn:r'/></prop></remove></propertyupdate>"#;
        call(&dav, "PROPPATCH", "/coll/", &[], sr);
        let pq = br#"<propfind xmlns="DAV:"><prop><r xmlns="urn:r"/></prop></propfind>"#;
        assert!(body(&call(&dav, "PROPFIND", "/coll/", D0, pq)).contains("404"));
        assert_eq!(call(&dav, "PROPPATCH", "/nope", &[], sr).status, 404);
        assert_eq!(call(&dav, "PROPPATCH", "/coll/", &[], b"<x").status, 400);
    }
}
