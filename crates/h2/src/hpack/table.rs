//! The HPACK static table (RFC 7541 Appendix A) and the decoder's dynamic table (§2.3).

use std::collections::VecDeque;

/// The 61 static entries; index 1 is `STATIC[0]`.
pub const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Per-entry overhead counted in a table's size (RFC 7541 §4.1).
pub const ENTRY_OVERHEAD: usize = 32;

/// The 1-based static index whose name is `name`, if any (first match).
pub fn static_name_index(name: &[u8]) -> Option<usize> {
    STATIC
        .iter()
        .position(|(n, _)| n.as_bytes() == name)
        .map(|i| i + 1)
}

/// The 1-based static index whose name and value both match, if any.
pub fn static_full_index(name: &[u8], value: &[u8]) -> Option<usize> {
    STATIC
        .iter()
        .position(|(n, v)| n.as_bytes() == name && v.as_bytes() == value)
        .map(|i| i + 1)
}

/// One dynamic entry; name and value share one allocation (`name_len` splits them).
#[derive(Debug, Clone)]
struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
}

/// The dynamic table: newest entry first, evicted from the back (RFC 7541 §2.3.2).
#[derive(Debug, Clone)]
pub struct DynamicTable {
    entries: VecDeque<Entry>,
    /// Sum of name + value + 32 over entries.
    size: usize,
    /// Current maximum, changed by dynamic table size updates.
    max_size: usize,
}

impl DynamicTable {
    /// An empty table whose maximum size is `max_size` bytes.
    pub fn new(max_size: usize) -> Self {
        DynamicTable {
            entries: VecDeque::new(),
            size: 0,
            max_size,
        }
    }

    /// Current size in RFC 7541 §4.1 terms.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Sets the maximum size, evicting as needed (§4.3).
    pub fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict_to(max_size);
    }

    fn evict_to(&mut self, limit: usize) {
        while self.size > limit {
            match self.entries.pop_back() {
                Some(e) => self.size -= e.bytes.len() + ENTRY_OVERHEAD,
                None => break,
            }
        }
    }

    /// Inserts a field (§4.4): evicts until it fits; a field larger than the whole
    /// table empties the table and is not inserted (not an error).
    pub fn insert(&mut self, name: &[u8], value: &[u8]) {
        let need = name.len() + value.len() + ENTRY_OVERHEAD;
        if need > self.max_size {
            self.entries.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max_size - need);
        let mut bytes = Vec::with_capacity(name.len() + value.len());
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        self.entries.push_front(Entry {
            bytes: bytes.into_boxed_slice(),
            name_len: name.len(),
        });
        self.size += need;
    }

    /// Entry `i` counted from 0 = newest, as (name, value).
    pub fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.entries.get(i).map(|e| e.bytes.split_at(e.name_len))
    }
}

/// Looks up a 1-based HPACK index across static and dynamic tables (§2.3.3).
pub fn lookup(dynamic: &DynamicTable, index: usize) -> Option<(&[u8], &[u8])> {
    match index {
        0 => None,
        1..=61 => {
            let (n, v) = STATIC[index - 1];
            Some((n.as_bytes(), v.as_bytes()))
        }
        _ => dynamic.get(index - 62),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_indexes() {
        assert_eq!(static_name_index(b":status"), Some(8));
        assert_eq!(static_full_index(b":method", b"POST"), Some(3));
        assert_eq!(static_name_index(b"www-authenticate"), Some(61));
        assert_eq!(static_name_index(b"x-nope"), None);
    }

    #[test]
    fn eviction_and_oversized_insert() {
        let mut t = DynamicTable::new(100);
        t.insert(b"aaaa", b"bbbb"); // 40
        t.insert(b"cccc", b"dddd"); // 80
        assert_eq!((t.len(), t.size()), (2, 80));
        t.insert(b"eeee", b"ffff"); // evicts the oldest
        assert_eq!((t.len(), t.size()), (2, 80));
        assert_eq!(t.get(0), Some((&b"eeee"[..], &b"ffff"[..])));
        assert_eq!(t.get(1), Some((&b"cccc"[..], &b"dddd"[..])));
        assert!(lookup(&t, 64).is_none());
        assert_eq!(lookup(&t, 62), t.get(0));
        t.insert(&[b'x'; 80], b""); // 112 > 100: table emptied
        assert_eq!((t.len(), t.size()), (0, 0));
        t.insert(b"a", b"b");
        t.set_max_size(0);
        assert_eq!(t.len(), 0);
    }
}
