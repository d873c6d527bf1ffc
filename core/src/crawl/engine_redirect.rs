//! The crawl engine's helpers for a fetched entry: the `exclude_headers` rule, and the queue
//! entry of a redirect or meta refresh target with its trail.

use std::borrow::Cow;

use super::super::counted::{Count, Counted};
use super::super::counters::{doc_skip, uri_skip};
use super::{rule_skip, Fetched};
use crate::config::CollectionConfig;
use crate::msg::types::uri_flags;
use crate::msg::{CrawlQueueEntry, Redirect, UriStructure};

/// True when a response header line `Name: value` matches the collection's `exclude_headers`.
pub(super) fn excluded_header(cfg: &CollectionConfig, r: &Fetched) -> bool {
    r.headers.iter().any(|(n, v)| {
        let line = format!("{n}: {}", String::from_utf8_lossy(v));
        cfg.exclude_headers.matches(&line)
    })
}

/// The entry of a redirect (or meta refresh) target: the trail of `from` plus this hop.
pub(super) fn redirect_entry(
    cfg: &CollectionConfig,
    from: &CrawlQueueEntry<'static>,
    target: &str,
    kind: i64,
    from_url: &str,
    counters: &mut Counted,
) -> Option<CrawlQueueEntry<'static>> {
    if from.redirects.len() as u32 >= cfg.max_redirects {
        counters.skip_doc(doc_skip::NO_REDIRECT_TARGET);
        return None;
    }
    if from.uri_flags & uri_flags::URIF_IGNORE_RULES == 0 {
        if let Some(code) = rule_skip(cfg, target, from.uri_flags) {
            counters.skip_uri(code);
            return None;
        }
        // A redirect to another site is followed when crawlmode.fwdlinks or fwdredirects is on.
        if !(cfg.forward_links || cfg.forward_redirects)
            && crate::routing::crawl_site(target.as_bytes())
                != crate::routing::crawl_site(from_url.as_bytes())
        {
            counters.skip_uri(uri_skip::DOMAIN);
            return None;
        }
    }
    counters.add(Count::Redirects, 1);
    let mut e = from.clone();
    e.uri = UriStructure::unparsed(Cow::Owned(target.as_bytes().to_vec()));
    e.redirects.push(Redirect {
        from: Cow::Owned(from_url.as_bytes().to_vec()),
        kind,
    });
    e.uri_flags = (from.uri_flags
        & !(uri_flags::URIF_REDIRECT_300
            | uri_flags::URIF_REDIRECT_301
            | uri_flags::URIF_REDIRECT_302
            | uri_flags::URIF_META_REFRESH))
        | kind;
    Some(e)
}
