//! The crawl engine's side of sitemaps (sitemaps.org): which sitemaps a site's robots.txt
//! names, the crawl queue entries that fetch them, and what a fetched one says.
//!
//! A sitemap is fetched as an ordinary crawl queue entry of its site, so robots.txt and the
//! collection's politeness (delay, connections per site and per address) apply to it as to a
//! page; its entry carries [`ENTRY_KEY`] in its extra metadata, with the scope it was found
//! under. The node scheduler decides what to queue from it (`sched::node_sitemap`).

use std::borrow::Cow;

use url::Url;

use super::robots::Rules;
use super::types::{Action, Failure, Fetched};
use crate::config::CollectionConfig;
use crate::marshal::Value;
use crate::msg::{CrawlQueueEntry, UriStructure};
use crate::sitemap::{self, Scope, Sitemap};

/// Key of an entry's extra metadata marking it as a sitemap to read, not a page.
pub const ENTRY_KEY: &[u8] = b"sitemap";

/// Where a sitemap was found, which sets the URLs it may list ("Sitemap file location").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// Named in robots.txt (or an index named there): its whole host.
    Robots,
    /// At /sitemap.xml, or in an index found there: its own directory.
    File,
}

impl Found {
    fn mark(self) -> &'static [u8] {
        match self {
            Found::Robots => b"robots",
            Found::File => b"file",
        }
    }

    /// The scope of a sitemap found so at `url`.
    pub fn scope(self, url: &Url) -> Scope {
        match self {
            Found::Robots => Scope::of_host(url),
            Found::File => Scope::of_file(url),
        }
    }
}

/// How the engine fetches a sitemap entry, if `e` is one.
pub fn entry_kind(e: &CrawlQueueEntry<'_>) -> Option<Found> {
    let v = e
        .extra
        .iter()
        .find(|(k, _)| k.as_bytes() == Some(ENTRY_KEY))?
        .1
        .as_bytes()?;
    match v {
        b"robots" => Some(Found::Robots),
        b"file" => Some(Found::File),
        _ => None,
    }
}

/// The crawl queue entry that fetches the sitemap at `url`.
pub fn entry(url: &str, found: Found, refresh_cycle: i64) -> CrawlQueueEntry<'static> {
    let mut e = CrawlQueueEntry::new(UriStructure::unparsed(Cow::Owned(url.as_bytes().to_vec())));
    e.refresh_cycle = refresh_cycle;
    e.extra.push((
        Value::bytes(ENTRY_KEY).into_owned(),
        Value::bytes(found.mark()).into_owned(),
    ));
    e
}

/// The sitemaps a site offers, once its robots.txt is read (`robots_url`): the `Sitemap:`
/// lines on the site's own host that robots.txt lets us fetch, or else /sitemap.xml when
/// allowed. Sitemaps on other hosts are not followed (their scope would be another site).
pub(super) fn offered(
    cfg: &CollectionConfig,
    rules: &Rules,
    collection: &[u8],
    site: &str,
    robots_url: &str,
) -> Option<Action> {
    if !cfg.sitemaps {
        return None;
    }
    let base = Url::parse(robots_url).ok()?;
    let host = Scope::of_host(&base);
    let allowed = |u: &Url| !cfg.robots || rules.allowed(u.as_str());
    let mut urls: Vec<(String, Found)> = rules
        .sitemaps()
        .iter()
        .filter(|u| host.same_host(u) && allowed(u))
        .map(|u| (u.to_string(), Found::Robots))
        .collect();
    urls.dedup();
    if urls.is_empty() && !rules.has_sitemap() {
        let default = base.join("/sitemap.xml").ok()?;
        if allowed(&default) {
            urls.push((default.into(), Found::File));
        }
    }
    (!urls.is_empty()).then(|| Action::Sitemaps {
        collection: collection.to_vec(),
        site: site.to_string(),
        urls,
    })
}

/// The action of a fetched entry of `key` (collection, site) at `url` when it is a sitemap
/// entry: what the sitemap lists, or why it lists nothing; `None` for any other entry.
pub(super) fn outcome(
    key: &(Vec<u8>, String),
    url: &str,
    entry: &CrawlQueueEntry<'_>,
    result: Result<&Fetched, &Failure>,
) -> Option<Action> {
    let found = entry_kind(entry)?;
    Some(Action::Sitemap {
        collection: key.0.clone(),
        site: key.1.clone(),
        url: url.to_string(),
        found,
        result: read(url, found, result).map(Box::new),
    })
}

/// What a fetched sitemap says: its entries, or why it gave none (a failed fetch, a status
/// other than 2xx, a body over the limits, bad XML). A body cut at the fetch limit is over
/// [`sitemap::MAX_BYTES`]: refused, never read in part.
fn read(url: &str, found: Found, result: Result<&Fetched, &Failure>) -> Result<Sitemap, String> {
    let r = result.map_err(|e| format!("fetch failed: {e:?}"))?;
    if !(200..=299).contains(&r.status) {
        return Err(format!("answered {}", r.status));
    }
    if r.truncated {
        return Err(sitemap::SitemapError::TooLarge {
            limit: sitemap::MAX_BYTES,
        }
        .to_string());
    }
    let u = Url::parse(url).map_err(|e| e.to_string())?;
    sitemap::read(&r.body, &found.scope(&u)).map_err(|e| e.to_string())
}

/// The body limit of a sitemap fetch: one byte past the protocol's, so that a larger file
/// shows as cut and is refused.
pub(super) const MAX_BODY: usize = sitemap::MAX_BYTES + 1;

#[cfg(test)]
mod tests {
    use super::*;

    fn offered_of(txt: &str, robots_allowed: bool) -> Vec<(String, Found)> {
        let mut cfg = CollectionConfig::defaults("c");
        cfg.robots = robots_allowed;
        cfg.sitemaps = true;
        let rules = Rules::from_fetch("crawlfleet", Some(200), txt.as_bytes());
        match offered(&cfg, &rules, b"c", "h:80", "http://h/robots.txt") {
            Some(Action::Sitemaps { urls, .. }) => urls,
            None => Vec::new(),
            Some(a) => panic!("{a:?}"),
        }
    }

    #[test]
    fn robots_txt_sitemap_lines_on_the_site_or_else_sitemap_xml() {
        let txt = "User-agent: *\nDisallow: /private/\n\nSitemap: http://h/s1.xml\n\
                   Sitemap: http://h/s2.xml.gz\nSitemap: /relative.xml\n\
                   Sitemap: http://other/s3.xml\nSitemap: http://h/private/s4.xml\n";
        assert_eq!(
            offered_of(txt, true),
            vec![
                ("http://h/s1.xml".to_string(), Found::Robots),
                ("http://h/s2.xml.gz".to_string(), Found::Robots)
            ]
        );
        // robots off: the disallowed one too.
        assert_eq!(offered_of(txt, false).len(), 3);
        assert_eq!(
            offered_of("User-agent: *\nDisallow:\n", true),
            vec![("http://h/sitemap.xml".to_string(), Found::File)]
        );
        assert_eq!(offered_of("User-agent: *\nDisallow: /\n", true), vec![]);
        // Only sitemaps elsewhere: none is fetched, and /sitemap.xml is not guessed.
        assert_eq!(offered_of("Sitemap: http://other/s.xml\n", true), vec![]);
        // Sitemaps off (the default): nothing.
        let rules = Rules::from_fetch("crawlfleet", Some(200), b"Sitemap: http://h/s.xml\n");
        let cfg = CollectionConfig::defaults("c");
        assert!(offered(&cfg, &rules, b"c", "h:80", "http://h/robots.txt").is_none());
    }

    #[test]
    fn a_sitemap_entry_is_marked_with_its_scope() {
        let e = entry("http://h/sitemap.xml", Found::File, 3);
        assert_eq!(entry_kind(&e), Some(Found::File));
        assert_eq!(e.refresh_cycle, 3);
        assert_eq!(
            entry_kind(&entry("http://h/s", Found::Robots, 0)),
            Some(Found::Robots)
        );
        let page = CrawlQueueEntry::new(UriStructure::unparsed(Cow::Borrowed(b"http://h/")));
        assert_eq!(entry_kind(&page), None);
    }

    #[test]
    fn a_fetched_sitemap_is_read_or_refused_with_a_reason() {
        let ok = |body: &[u8], status| Fetched {
            status,
            body: body.to_vec(),
            ..Fetched::default()
        };
        let xml =
            b"<urlset><url><loc>http://h/a</loc></url><url><loc>http://h/d/b</loc></url></urlset>";
        let m = read("http://h/d/s.xml", Found::File, Ok(&ok(xml, 200))).unwrap();
        assert_eq!((m.entries.len(), m.out_of_scope), (1, 1));
        let m = read("http://h/d/s.xml", Found::Robots, Ok(&ok(xml, 200))).unwrap();
        assert_eq!(m.entries.len(), 2);
        assert_eq!(
            read("http://h/s.xml", Found::File, Ok(&ok(b"", 404))),
            Err("answered 404".into())
        );
        let cut = Fetched {
            status: 200,
            truncated: true,
            ..Fetched::default()
        };
        assert!(read("http://h/s.xml", Found::File, Ok(&cut))
            .unwrap_err()
            .contains("52428800 bytes"));
        assert!(read("http://h/s.xml", Found::File, Err(&Failure::Refused)).is_err());
    }
}
