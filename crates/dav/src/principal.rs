//! The principal reports of RFC 3744 section 9 that calendar clients send when a user
//! searches for attendees: answered, over the one principal an account may see (its
//! own, or the per-path principal in anonymous mode), so that a search never fails
//! with a bare 403 or 500 and never discloses other accounts.

use roxmltree::Node;

use crate::error::DavError;
use crate::props::{self, PropRequest, Resource};
use crate::report::requested_props;
use crate::xml::{self, Name, DAV};
use crate::{Dav, DavResponse};

/// The principal this handler's caller is: its home in multi-user mode, else the
/// principal of the root.
fn own_principal(dav: &Dav) -> Result<Resource, DavError> {
    let root = dav.locate("/")?;
    let href = dav.principal_href(&root, true);
    Resource::open(dav.locate(&href)?)
}

/// Whether `value` satisfies one `DAV:property-search` (case-insensitive substring,
/// the RFC's "caseless substring" match).
fn property_matches(search: Node<'_, '_>, candidates: &[String]) -> Result<bool, DavError> {
    let needle = xml::child(search, DAV, "match")
        .map(|m| xml::text(m).to_lowercase())
        .ok_or_else(|| DavError::BadXml("property-search without DAV:match".into()))?;
    Ok(candidates
        .iter()
        .any(|c| c.to_lowercase().contains(&needle)))
}

/// principal-property-search: the caller's own principal when it matches.
pub(crate) fn search(
    dav: &Dav,
    root: Node<'_, '_>,
    what: &PropRequest,
    out: &mut String,
) -> Result<(), DavError> {
    let principal = own_principal(dav)?;
    let mut names = vec![principal.href()];
    if let Some(u) = dav.user() {
        names.push(u.to_owned());
    }
    if let Some(d) = crate::store::read_meta(&principal.target.path).displayname {
        names.push(d);
    }
    let any_of = root.attribute("test") == Some("anyof");
    let mut results = Vec::new();
    for s in xml::elements(root).filter(|n| Name::of(*n).is(DAV, "property-search")) {
        results.push(property_matches(s, &names)?);
    }
    let hit = if any_of {
        results.iter().any(|r| *r)
    } else {
        results.iter().all(|r| *r)
    };
    if hit {
        let what = match what {
            PropRequest::Props(p) if !p.is_empty() => what.clone(),
            _ => requested_props(root),
        };
        out.push_str(&props::response(dav, &principal, &what)?);
    }
    Ok(())
}

/// principal-search-property-set: display names can be searched.
pub(crate) fn search_property_set() -> DavResponse {
    DavResponse {
        status: 200,
        headers: vec![(
            "Content-Type".into(),
            "application/xml; charset=utf-8".into(),
        )],
        body: b"<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:principal-search-property-set xmlns:D=\"DAV:\"><D:principal-search-property><D:prop><D:displayname/></D:prop><D:description xml:lang=\"en\">Name</D:description></D:principal-search-property></D:principal-search-property-set>\n".to_vec(),
    }
}
