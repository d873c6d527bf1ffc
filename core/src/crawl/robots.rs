//! robots.txt (RFC 9309) per crawl site, parsed by the robotxt crate and cached with an expiry.
//!
//! robotxt passes every RFC 9309 vector of robots/vectors.rs (texting_robots, used before, missed the
//! decoding of percent-encoded unreserved octets, 2.2.2), reads at most the 500 KiB that RFC
//! 9309 2.5 asks crawlers to parse, and matches the product token case-insensitively and
//! exactly (2.2.1).
//!
//! The outcome of fetching `/robots.txt` decides (RFC 9309 2.3.1): a 2xx body is parsed; 4xx
//! ("unavailable") allows everything; 5xx and network errors ("unreachable") disallow
//! everything until the entry expires, so the site is tried again later.

use std::collections::HashMap;

#[cfg(test)]
mod vectors;

use robotxt::Robots;

/// What is known of one site's robots.txt.
pub enum Rules {
    /// Everything allowed (no robots.txt, or obeying robots is off).
    AllowAll,
    /// Everything disallowed (robots.txt unreachable).
    DisallowAll,
    /// The rules of the file that apply to our product token.
    Parsed(Box<Robots>),
}

impl Rules {
    /// Reads the outcome of a robots.txt fetch: `status` (None: network error) and the body.
    pub fn from_fetch(agent: &str, status: Option<u16>, body: &[u8]) -> Rules {
        match status {
            // RFC 9309 asks for tolerance: lines that are not rules are skipped, and a file
            // with nothing usable has no rules.
            Some(200..=299) => Rules::Parsed(Box::new(Robots::parse(body, agent))),
            Some(400..=499) => Rules::AllowAll,
            _ => Rules::DisallowAll,
        }
    }

    /// True when `uri` may be fetched.
    pub fn allowed(&self, uri: &str) -> bool {
        match self {
            Rules::AllowAll => true,
            Rules::DisallowAll => false,
            // The path and query are matched (RFC 9309 2.2.2); a bare path is taken as it is.
            Rules::Parsed(r) => match url::Url::parse(uri) {
                Ok(u) => r.is_url_allowed(&u),
                Err(_) => r.is_allowed(uri),
            },
        }
    }

    /// [`Self::allowed`] for a URL already parsed (the crawl engine parses each entry's URL
    /// once, for this and for its request).
    pub fn allowed_url(&self, u: &url::Url) -> bool {
        match self {
            Rules::AllowAll => true,
            Rules::DisallowAll => false,
            Rules::Parsed(r) => r.is_url_allowed(u),
        }
    }

    /// The Crawl-delay, in seconds.
    pub fn crawl_delay(&self) -> Option<f64> {
        match self {
            Rules::Parsed(r) => r.crawl_delay().map(|d| d.as_secs_f64()),
            _ => None,
        }
    }

    /// The file's `Sitemap:` lines (absolute URLs only, as sitemaps.org asks of robots.txt).
    pub fn sitemaps(&self) -> &[url::Url] {
        match self {
            Rules::Parsed(r) => r.sitemaps(),
            _ => &[],
        }
    }

    /// True when the file names at least one sitemap.
    pub fn has_sitemap(&self) -> bool {
        matches!(self, Rules::Parsed(r) if !r.sitemaps().is_empty())
    }
}

/// Parsed robots.txt files by crawl site, each valid until its expiry.
pub struct RobotsCache {
    ttl: f64,
    max: usize,
    sites: HashMap<String, (Rules, f64)>,
}

impl RobotsCache {
    /// A cache keeping files `ttl` seconds, at most `max` sites.
    pub fn new(ttl: f64, max: usize) -> RobotsCache {
        RobotsCache {
            ttl,
            max: max.max(1),
            sites: HashMap::new(),
        }
    }

    /// The rules of `site` if known and not expired at `now`.
    pub fn get(&self, site: &str, now: f64) -> Option<&Rules> {
        self.sites
            .get(site)
            .filter(|(_, until)| *until > now)
            .map(|(r, _)| r)
    }

    /// Records the rules of `site`; unreachable files expire sooner (a minute).
    pub fn insert(&mut self, site: &str, rules: Rules, now: f64) {
        if self.sites.len() >= self.max {
            self.sites.retain(|_, (_, until)| *until > now);
            if self.sites.len() >= self.max {
                // Still full: forget an arbitrary half rather than grow without bound.
                let drop: Vec<String> = self.sites.keys().step_by(2).cloned().collect();
                for k in drop {
                    self.sites.remove(&k);
                }
            }
        }
        let ttl = match rules {
            Rules::DisallowAll => self.ttl.min(60.0),
            _ => self.ttl,
        };
        self.sites.insert(site.to_string(), (rules, now + ttl));
    }

    /// Sites cached.
    pub fn len(&self) -> usize {
        self.sites.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TXT: &[u8] = b"User-agent: other\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\nAllow: /private/open\nCrawl-delay: 2\nSitemap: http://h/sitemap.xml\n";

    #[test]
    fn parsed_rules_follow_rfc9309_groups_and_longest_match() {
        let r = Rules::from_fetch("crawlfleet", Some(200), TXT);
        assert!(r.allowed("http://h/public/x"));
        assert!(!r.allowed("http://h/private/x"));
        assert!(r.allowed("http://h/private/open"));
        for u in [
            "http://h/public/x",
            "http://h/private/x",
            "http://h/private/open?q=1",
        ] {
            let parsed = url::Url::parse(u).unwrap();
            assert_eq!(r.allowed_url(&parsed), r.allowed(u), "{u}");
        }
        assert_eq!(r.crawl_delay(), Some(2.0));
        assert!(r.has_sitemap());
        let other = Rules::from_fetch("other", Some(200), TXT);
        assert!(!other.allowed("http://h/public/x"));
    }

    /// RFC 9309 and Google's robots.txt tests (robots/vectors.rs): every RFC vector holds; of
    /// Google's own extensions robotxt follows some (12 of 25 when this was written), which is
    /// printed, not asserted.
    #[test]
    fn rfc9309_vectors_hold() {
        let failed = vectors::failures(|txt, agent, url| {
            Rules::from_fetch(agent, Some(200), txt).allowed(url)
        });
        let rfc: Vec<&String> = failed
            .iter()
            .filter(|(s, _)| *s == vectors::Source::Rfc)
            .map(|(_, f)| f)
            .collect();
        assert!(rfc.is_empty(), "RFC 9309 vectors failed: {rfc:#?}");
        let (_, google) = vectors::counts();
        eprintln!(
            "Google-only robots.txt vectors: {} of {google} followed",
            google - failed.len()
        );
    }

    #[test]
    fn unavailable_allows_and_unreachable_disallows() {
        assert!(Rules::from_fetch("a", Some(404), b"").allowed("http://h/x"));
        assert!(!Rules::from_fetch("a", Some(503), b"").allowed("http://h/x"));
        let u = url::Url::parse("http://h/x").unwrap();
        assert!(Rules::from_fetch("a", Some(404), b"").allowed_url(&u));
        assert!(!Rules::from_fetch("a", None, b"").allowed_url(&u));
        assert!(!Rules::from_fetch("a", None, b"").allowed("http://h/x"));
        assert!(Rules::from_fetch("a", Some(200), b"\xff\xfe garbage\n\0").allowed("http://h/x"));
    }

    #[test]
    fn entries_expire_and_unreachable_sooner() {
        let mut c = RobotsCache::new(3600.0, 10);
        c.insert("a", Rules::AllowAll, 0.0);
        c.insert("b", Rules::DisallowAll, 0.0);
        assert!(c.get("a", 100.0).is_some());
        assert!(c.get("b", 100.0).is_none());
        assert!(c.get("a", 3601.0).is_none());
        for i in 0..50 {
            c.insert(&format!("s{i}"), Rules::AllowAll, 0.0);
        }
        assert!(c.len() <= 10);
    }
}
