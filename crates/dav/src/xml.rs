//! XML in and out: request bodies are parsed with `roxmltree` (which refuses DTDs, so no
//! entity expansion attacks), responses are written as strings with every text and
//! attribute value escaped here, in one place.

use roxmltree::{Document, Node, ParsingOptions};

use crate::error::DavError;

/// The WebDAV namespace (RFC 4918).
pub const DAV: &str = "DAV:";
/// The CalDAV namespace (RFC 4791).
pub const CALDAV: &str = "urn:ietf:params:xml:ns:caldav";
/// The calendarserver.org namespace (getctag).
pub const CS: &str = "http://calendarserver.org/ns/";

/// The opening of every multistatus body, declaring the three prefixes output uses.
pub const MULTISTATUS_OPEN: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:multistatus \
     xmlns:D=\"DAV:\" xmlns:C=\"urn:ietf:params:xml:ns:caldav\" \
     xmlns:CS=\"http://calendarserver.org/ns/\">";

/// Bound on parsed nodes: request bodies are small; a huge one is refused, not parsed.
const NODES_LIMIT: u32 = 200_000;

/// A property (or element) name: namespace URI and local name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name {
    /// Namespace URI ("" for none).
    pub ns: String,
    /// Local name.
    pub local: String,
}

impl Name {
    /// A name from its parts.
    pub fn new(ns: &str, local: &str) -> Self {
        Name {
            ns: ns.to_owned(),
            local: local.to_owned(),
        }
    }

    /// The name of an element node.
    pub fn of(node: Node<'_, '_>) -> Self {
        let t = node.tag_name();
        Name::new(t.namespace().unwrap_or(""), t.name())
    }

    /// Whether this is `{ns}local`.
    pub fn is(&self, ns: &str, local: &str) -> bool {
        self.ns == ns && self.local == local
    }

    /// An empty element of this name, valid inside a multistatus body.
    pub fn empty_element(&self) -> String {
        let (open, _) = self.tags();
        format!("{}/>", &open[..open.len() - 1])
    }

    /// Opening and closing tags of this name, valid inside a multistatus body.
    pub fn tags(&self) -> (String, String) {
        let prefix = match self.ns.as_str() {
            DAV => Some("D"),
            CALDAV => Some("C"),
            CS => Some("CS"),
            _ => None,
        };
        match prefix {
            Some(p) => (
                format!("<{p}:{}>", self.local),
                format!("</{p}:{}>", self.local),
            ),
            None if self.ns.is_empty() => (
                format!("<{} xmlns=\"\">", self.local),
                format!("</{}>", self.local),
            ),
            None => (
                format!("<X:{} xmlns:X=\"{}\">", self.local, escape(&self.ns)),
                format!("</X:{}>", self.local),
            ),
        }
    }
}

/// Parses a request body. Refuses non-UTF-8, DTDs, and namespace declarations that bind
/// a prefix to the empty string (illegal in Namespaces in XML 1.0; litmus checks it).
pub fn parse(body: &[u8]) -> Result<Document<'_>, DavError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| DavError::BadXml(format!("body is not UTF-8: {e}")))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let opts = ParsingOptions {
        allow_dtd: false,
        nodes_limit: NODES_LIMIT,
    };
    let doc =
        Document::parse_with_options(text, opts).map_err(|e| DavError::BadXml(e.to_string()))?;
    for node in doc.descendants().filter(Node::is_element) {
        for ns in node.namespaces() {
            if ns.name().is_some() && ns.uri().is_empty() {
                return Err(DavError::BadXml(format!(
                    "prefix '{}' bound to an empty namespace",
                    ns.name().unwrap_or("")
                )));
            }
        }
    }
    Ok(doc)
}

/// Element children of `node`.
pub fn elements<'a, 'i>(node: Node<'a, 'i>) -> impl Iterator<Item = Node<'a, 'i>> {
    node.children().filter(Node::is_element)
}

/// The first element child of `node` named `{ns}local`.
pub fn child<'a, 'i>(node: Node<'a, 'i>, ns: &str, local: &str) -> Option<Node<'a, 'i>> {
    elements(node).find(|n| n.tag_name().name() == local && n.tag_name().namespace() == Some(ns))
}

/// All text inside `node`, concatenated.
pub fn text(node: Node<'_, '_>) -> String {
    node.descendants()
        .filter(Node::is_text)
        .filter_map(|n| n.text())
        .collect()
}

/// Escapes text for element content or a double-quoted attribute value. Carriage returns
/// are escaped too, so that a value survives a round trip through an XML parser.
pub fn escape(s: &str) -> String {
    let e = quick_xml::escape::escape(s);
    // A literal CR would be normalised away by the reader (XML 1.0 §2.11); calendar data
    // keeps its CRLF only as a character reference.
    if e.contains('\r') {
        e.replace('\r', "&#13;")
    } else {
        e.into_owned()
    }
}

/// Serializes an element and its subtree as a self-contained fragment: every element
/// declares the namespace it uses, so the fragment means the same thing wherever it is
/// pasted (dead property values are stored and replayed this way).
pub fn serialize(node: Node<'_, '_>) -> String {
    let mut out = String::new();
    write_node(node, &mut out);
    out
}

fn write_node(node: Node<'_, '_>, out: &mut String) {
    if node.is_text() {
        out.push_str(&escape(node.text().unwrap_or("")));
        return;
    }
    if !node.is_element() {
        return;
    }
    let tag = node.tag_name();
    let qname = match tag.namespace() {
        Some(ns) if !ns.is_empty() => {
            out.push_str(&format!("<e:{} xmlns:e=\"{}\"", tag.name(), escape(ns)));
            format!("e:{}", tag.name())
        }
        _ => {
            out.push_str(&format!("<{} xmlns=\"\"", tag.name()));
            tag.name().to_owned()
        }
    };
    for (i, a) in node.attributes().enumerate() {
        match a.namespace() {
            Some("http://www.w3.org/XML/1998/namespace") => {
                out.push_str(&format!(" xml:{}=\"{}\"", a.name(), escape(a.value())))
            }
            Some(ns) => out.push_str(&format!(
                " xmlns:a{i}=\"{}\" a{i}:{}=\"{}\"",
                escape(ns),
                a.name(),
                escape(a.value())
            )),
            None => out.push_str(&format!(" {}=\"{}\"", a.name(), escape(a.value()))),
        }
    }
    if node.has_children() {
        out.push('>');
        for c in node.children() {
            write_node(c, out);
        }
        out.push_str(&format!("</{qname}>"));
    } else {
        out.push_str("/>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_prefix_binding_is_refused() {
        let body =
            br#"<D:propfind xmlns:D="DAV:"><D:prop><bar:foo xmlns:bar=""/></D:prop></D:propfind>"#;
        assert!(matches!(parse(body), Err(DavError::BadXml(_))));
        assert!(parse(b"<foo>").is_err());
        assert!(parse(b"\xff\xfe").is_err());
        assert!(parse(br#"<!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>"#).is_err());
    }

    #[test]
    fn serialized_fragment_reparses_to_the_same_names_and_text() {
        let src = r#"<p xmlns:t="urn:t"><t:v xml:lang="en" t:k="1&amp;">a&lt;b<foo xmlns="http://bar"/><n xmlns="">x&#13;</n></t:v></p>"#;
        let doc = parse(src.as_bytes()).unwrap();
        let v = elements(doc.root_element()).next().unwrap();
        let s = serialize(v);
        let again = parse(s.as_bytes()).unwrap();
        let r = again.root_element();
        assert_eq!(Name::of(r), Name::new("urn:t", "v"));
        assert_eq!(
            r.attribute(("http://www.w3.org/XML/1998/namespace", "lang")),
            Some("en")
        );
        assert_eq!(r.attribute(("urn:t", "k")), Some("1&"));
        let kids: Vec<Name> = elements(r).map(Name::of).collect();
        assert_eq!(
            kids,
            vec![Name::new("http://bar", "foo"), Name::new("", "n")]
        );
        assert_eq!(text(r), "a<bx\r");
    }

    #[test]
    fn tags_use_declared_prefixes_or_local_declarations() {
        assert_eq!(Name::new(DAV, "getetag").empty_element(), "<D:getetag/>");
        assert_eq!(Name::new("", "x").empty_element(), "<x xmlns=\"\"/>");
        assert_eq!(
            Name::new("urn:a\"", "y").tags().0,
            "<X:y xmlns:X=\"urn:a&quot;\">"
        );
    }
}
