//! What the engine keeps of a crawl queue entry while its request is open: the parts reading
//! the response needs, taken from the entry decoded once when the request is made
//! ([`super::CrawlEngine::poll`]). The record stays with them for the two rare outcomes that
//! need the whole entry again (a redirect, whose target entry copies it, and a sitemap).

use super::{depth_of, sitemaps};
use crate::msg::CrawlQueueEntry;
use crate::sched::parse_record;

/// A fetched entry's parts, from its one decoding.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Took {
    /// Its in-flight sequence number.
    pub seq: u64,
    /// The queue record the entry was decoded from.
    pub record: Vec<u8>,
    pub uri_flags: i64,
    pub refresh_cycle: i64,
    /// [`depth_of`] the entry.
    pub depth: u32,
    /// The entry fetches a sitemap ([`sitemaps::entry_kind`] is some).
    pub sitemap: bool,
    /// The URIs that redirected to this one, oldest first.
    pub redirected_from: Vec<Vec<u8>>,
}

impl Took {
    /// The parts of the entry of queue record `record`, and its URI (lossy UTF-8); none when
    /// the record does not decode.
    pub fn decode(seq: u64, record: Vec<u8>) -> Option<(Took, String)> {
        let (entry, _) = parse_record(&record).ok()?;
        let uri = String::from_utf8_lossy(&entry.uri.uri).into_owned();
        let parts = Took {
            seq,
            uri_flags: entry.uri_flags,
            refresh_cycle: entry.refresh_cycle,
            depth: depth_of(&entry),
            sitemap: sitemaps::entry_kind(&entry).is_some(),
            redirected_from: entry.redirects.iter().map(|r| r.from.to_vec()).collect(),
            record: Vec::new(),
        };
        Some((Took { record, ..parts }, uri))
    }

    /// The whole entry again (a redirect or a sitemap); none when the record no longer
    /// decodes, which cannot happen for a record [`Took::of`] was given with its entry.
    pub fn entry(&self) -> Option<CrawlQueueEntry<'static>> {
        parse_record(&self.record).ok().map(|(e, _)| e.into_owned())
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::marshal::Value;
    use crate::msg::types::{uri_flags, Redirect};
    use crate::msg::UriStructure;
    use crate::sched::record;

    /// Entries with and without a depth, redirects and a sitemap mark, as the engine queues
    /// them.
    fn entries() -> Vec<CrawlQueueEntry<'static>> {
        let mut out = Vec::new();
        for i in 0..48u32 {
            let uri = format!("http://h{i}.test/p/{i}");
            let mut e = CrawlQueueEntry::new(UriStructure::unparsed(Cow::Owned(uri.into_bytes())));
            e.uri_flags = i64::from(i % 4) * uri_flags::URIF_STARTURI;
            e.refresh_cycle = i64::from(i % 3);
            if i % 2 == 0 {
                e.extra.push((
                    Value::bytes(super::super::DEPTH_KEY).into_owned(),
                    Value::owned_bytes(i.to_string().into_bytes()),
                ));
            }
            if i % 5 == 0 {
                e = sitemaps::entry(
                    &format!("http://h{i}.test/sitemap.xml"),
                    sitemaps::Found::File,
                    e.refresh_cycle,
                );
            }
            for r in 0..i % 3 {
                e.redirects.push(Redirect {
                    from: Cow::Owned(format!("http://h{i}.test/r{r}").into_bytes()),
                    kind: uri_flags::URIF_REDIRECT_301,
                });
            }
            out.push(e);
        }
        out
    }

    #[test]
    fn the_parts_are_what_the_decoded_entry_says() {
        for (i, e) in entries().into_iter().enumerate() {
            let rec = record(&e, i % 2 == 1);
            let (took, uri) = Took::decode(i as u64, rec.clone()).unwrap();
            assert_eq!(uri.as_bytes(), &e.uri.uri[..]);
            assert_eq!(took.seq, i as u64);
            assert_eq!(took.uri_flags, e.uri_flags);
            assert_eq!(took.refresh_cycle, e.refresh_cycle);
            assert_eq!(took.depth, depth_of(&e));
            assert_eq!(took.sitemap, sitemaps::entry_kind(&e).is_some());
            let from: Vec<Vec<u8>> = e.redirects.iter().map(|r| r.from.to_vec()).collect();
            assert_eq!(took.redirected_from, from);
            assert_eq!(took.entry().unwrap(), e);
            assert_eq!(took.record, rec);
        }
        assert!(entries().iter().any(|e| depth_of(e) > 0));
        assert!(entries().iter().any(|e| sitemaps::entry_kind(e).is_some()));
        assert!(Took::decode(1, b"\x07junk".to_vec()).is_none());
        assert!(Took::decode(1, Vec::new()).is_none());
    }
}
