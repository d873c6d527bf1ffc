//! A synthetic web to crawl: a deterministic generator of hosts and pages on loopback addresses,
//! what a server sends for each request ([`SyntheticWeb::respond`]), a collection configuration
//! for crawling it, and what a correct crawler must fetch and store ([`SyntheticWeb::expected`]).
//! `crawlfleet synthweb` and `crawlfleet up --synthetic-web` serve it; `write_nginx` exports it
//! as a static tree for nginx.
//!
//! ```
//! use crawlfleet_core::synthweb::{SyntheticWeb, WebSpec};
//!
//! let spec: WebSpec = "3:20".parse().unwrap();
//! let web = SyntheticWeb::generate(&spec, "127.77.0.1".parse().unwrap(), 8080);
//! assert_eq!(web.start_uris(), ["http://127.77.0.1:8080/"]);
//! let root = web.respond(web.hosts()[0], "/");
//! assert_eq!(root.status, 200);
//! let expected = web.expected();
//! assert!(expected.fetched.contains("http://127.77.0.2:8080/robots.txt"));
//! assert!(expected.never.iter().all(|u| !expected.fetched.contains(u)));
//! ```
//!
//! # What the web holds
//!
//! Host `h` listens on the `h`-th address from `base` (addresses ending in `.0` or `.255`
//! skipped), all on one port. Each host has `pages` *tree pages*: `/` and `/s{i/20}/p{i}.html`.
//! Tree page `i` links its children `4i+1 ..= 4i+4` (a spanning tree of the host), `/` (as a
//! relative `../` link), tree page `i+1` by `<link rel="next">`, and four random tree pages of
//! which about 20% lie on another host. The root of every host but 0 is linked from a tree page
//! of a lower-numbered host, so every tree page is reachable from host 0's `/`. Hrefs come in
//! every form: absolute URL, `/path`, `name.html`, `../dir/name.html`, with and without a
//! `#fragment`; the anchor text of a link is the label of its target (`page 3 of host 7`),
//! which no other page shares.
//!
//! Unless the spec is `plain` (only tree pages, every one an ordinary page), there are also:
//! - tree pages (about 3%) with `<meta name="robots" content="noindex">`: fetched, not stored,
//!   links followed; tree page 1 of host 0 is one;
//! - slow tree pages (about 1%, and tree page 2 of host 0) answered after 200-500 ms;
//! - per host and per kind below, `1 + pages/100` *extras*, each linked from one tree page:
//!   `/private/v{j}.html` (robots.txt disallows `/private/`: never fetched), `/excluded/e{j}.html`
//!   (the collection's exclude_uris rule: never fetched), `/missing/m{j}.html` (404),
//!   `<img src="/img/i{j}.png">` (image/png: fetched, not stored), `/nf/n{j}.html` (meta robots
//!   nofollow: stored, but its link to `/orphan/o{j}.html` is not followed, so the orphan is
//!   never fetched), `/r/m{j}` (301 to `/t/m{j}.html`), `/r/a{j}` (302 to `/r/b{j}`, which is
//!   301 to `/t/c{j}.html`: a chain of two hops), `/mr/f{j}.html` (meta refresh to
//!   `/t/f{j}.html`: fetched, not stored), `/dup/a{j}.html` and `/dup/b{j}.html` (byte-identical
//!   bodies) and, on hosts `2k` and `2k+1`, `/xdup/x{j}.html` (byte-identical across the two);
//! - robots.txt: `User-agent: *` and `Disallow: /private/` on every host except host 1, whose
//!   robots.txt is 404 (so its private pages are fetched and stored); host 2 adds
//!   `Crawl-delay: 1` (the collection keeps obey_robots_delay off);
//! - `/big.html` on host 0, linked from its `/`: 6,500,000 bytes of text/html, more than the
//!   default max_doc_size of 5,242,880: fetched, not stored.
//!
//! Pages are rendered from their index on each request; the generator keeps only which tree
//! page links which host's root, so generating 1000:100 takes about a millisecond.

mod crawl;
mod export;
mod page;
mod render;

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

pub use export::EXCLUDE_RULE;
use page::{mix, tag, Extra, Page, EXTRAS};

/// The size of a web: hosts, tree pages per host, the seed, and whether it is plain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WebSpec {
    /// Hosts, each on its own loopback address.
    pub hosts: usize,
    /// Tree pages per host (extras come on top unless `plain`).
    pub pages: usize,
    /// The seed every random choice derives from.
    pub seed: u64,
    /// Bench mode: only ordinary 200 text/html pages with links; no traps.
    pub plain: bool,
}

impl WebSpec {
    /// The seed of a spec parsed from text.
    pub const DEFAULT_SEED: u64 = 1;
    /// The most hosts a web may have (addresses stay within one /16 of the base).
    pub const MAX_HOSTS: usize = 65_000;
    /// The most tree pages a host may have.
    pub const MAX_PAGES: usize = 10_000_000;
}

/// Why a `HOSTS:PAGES` text is not a [`WebSpec`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebSpecError {
    /// Not two numbers separated by `:`.
    Format(String),
    /// A count of zero or above its limit.
    OutOfRange {
        /// `hosts` or `pages`.
        what: &'static str,
        /// The value given.
        value: usize,
        /// The largest allowed.
        max: usize,
    },
}

impl fmt::Display for WebSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WebSpecError::Format(s) => write!(f, "{s:?} is not HOSTS:PAGES (e.g. 20:500)"),
            WebSpecError::OutOfRange { what, value, max } => {
                write!(f, "{what} = {value}: must be between 1 and {max}")
            }
        }
    }
}

impl std::error::Error for WebSpecError {}

impl FromStr for WebSpec {
    type Err = WebSpecError;

    /// `HOSTS:PAGES`, e.g. `20:500`; the seed is [`WebSpec::DEFAULT_SEED`], not plain.
    fn from_str(s: &str) -> Result<WebSpec, WebSpecError> {
        let bad = || WebSpecError::Format(s.to_string());
        let (h, p) = s.split_once(':').ok_or_else(bad)?;
        let hosts: usize = h.trim().parse().map_err(|_| bad())?;
        let pages: usize = p.trim().parse().map_err(|_| bad())?;
        for (what, value, max) in [
            ("hosts", hosts, WebSpec::MAX_HOSTS),
            ("pages", pages, WebSpec::MAX_PAGES),
        ] {
            if value == 0 || value > max {
                return Err(WebSpecError::OutOfRange { what, value, max });
            }
        }
        Ok(WebSpec {
            hosts,
            pages,
            seed: WebSpec::DEFAULT_SEED,
            plain: false,
        })
    }
}

/// What a server sends for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// Headers besides Content-Length and Connection, which the server adds.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// How long the server waits before answering.
    pub delay: Duration,
}

impl Reply {
    /// The value of header `name` (any case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What a correct crawler does with a web, crawling it with [`SyntheticWeb::collection_xml`]
/// from [`SyntheticWeb::start_uris`]. URLs are absolute, without fragments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expected {
    /// Every URL a correct crawler requests: `/robots.txt` of every host it reaches, and every
    /// reachable page it may fetch (404s, redirect sources and targets, noindex, nofollow,
    /// meta refresh, oversized and image/png pages included).
    pub fetched: BTreeSet<String>,
    /// URLs that are linked from fetched pages but must never be requested: robots.txt
    /// disallowed and exclude_uris matches.
    pub never: BTreeSet<String>,
    /// Documents a crawler stores and feeds: 200 text/html, not noindex, not meta refresh, not
    /// larger than max_doc_size, and not in a duplicate group.
    pub stored: BTreeSet<String>,
    /// Groups of fetched URLs with byte-identical bodies (otherwise storable), each sorted:
    /// exactly one of each group is fed; none of them is in `stored`.
    pub duplicate_groups: Vec<Vec<String>>,
    /// Fetched URLs answered 404 (a robots.txt answered 404 is not among them).
    pub not_found: BTreeSet<String>,
    /// HTTP redirects met: source, target (as an absolute URL), status.
    pub redirects: Vec<(String, String, u16)>,
    /// Meta refresh pages met: source, target.
    pub meta_refresh: Vec<(String, String)>,
    /// Fetched URLs answered only after a delay.
    pub slow: BTreeSet<String>,
}

/// A generated web. Cheap to share: it holds only the host addresses and which tree pages link
/// which hosts' roots; pages are rendered on request.
#[derive(Clone, Debug)]
pub struct SyntheticWeb {
    spec: WebSpec,
    port: u16,
    addrs: Vec<Ipv4Addr>,
    index: HashMap<Ipv4Addr, u32>,
    /// (host, tree page) -> hosts whose `/` that page links.
    roots_from: HashMap<(u32, u32), Vec<u32>>,
    /// Extras of each kind per host.
    extras: u32,
    /// Distance between the tree pages that carry consecutive extras of one kind.
    step: u32,
    /// What the web publishes besides its pages ([`SyntheticWeb::publishing`]).
    publish: Publish,
}

/// What a web publishes for change-driven crawling (sitemaps.org, draft-cosmo): `/sitemap.xml`
/// on every host is always served (unless plain); these add to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Publish {
    /// robots.txt names the sitemap (`Sitemap:` line); without it a crawler finds the sitemap
    /// at its default place.
    pub robots_sitemap: bool,
    /// When the web was published (Unix seconds): the lastmod of a page that never changed.
    /// 0: sitemaps carry no lastmod unless pages change.
    pub since: i64,
    /// Tree pages change over time.
    pub changes: Option<ChangeSchedule>,
}

/// A seeded schedule of changes: every `every` seconds from `Publish::since`, each tree page
/// (the root aside) changes with probability `per_mille` / 1000, the same pages for the same
/// seed. A changed page has a new body (a version comment), Last-Modified and ETag; the
/// sitemap's lastmod follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChangeSchedule {
    /// Seconds between two rounds of changes (at least 1).
    pub every: u64,
    /// Pages changed per round, per thousand.
    pub per_mille: u32,
}

impl FromStr for ChangeSchedule {
    type Err = String;

    /// `PERCENT%/SECONDS` (or `FRACTION/SECONDS`): `1%/10` changes 1% of the tree pages every
    /// 10 seconds.
    fn from_str(s: &str) -> Result<ChangeSchedule, String> {
        let bad = || format!("{s:?} is not PERCENT%/SECONDS (e.g. 1%/10)");
        let (share, every) = s.split_once('/').ok_or_else(bad)?;
        let share = share.trim();
        let fraction: f64 = match share.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map_err(|_| bad())? / 100.0,
            None => share.parse().map_err(|_| bad())?,
        };
        let every: u64 = every
            .trim()
            .trim_end_matches('s')
            .parse()
            .map_err(|_| bad())?;
        if !(0.0..=1.0).contains(&fraction) || every == 0 {
            return Err(bad());
        }
        Ok(ChangeSchedule {
            every,
            per_mille: (fraction * 1000.0).round() as u32,
        })
    }
}

/// Rounds of changes looked back over (a page's version counts at most these).
const MAX_ROUNDS: u64 = 100_000;

/// Tree page children per page.
const FANOUT: u32 = 4;
/// Random links per tree page.
const RANDOM_LINKS: u64 = 4;
/// The host whose robots.txt is 404.
const ROBOTS_MISSING: u32 = 1;
/// The host whose robots.txt has a Crawl-delay.
const CRAWL_DELAY_HOST: u32 = 2;
/// The size of `/big.html`.
pub const BIG_SIZE: usize = 6_500_000;

/// How a tree page behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TreeKind {
    Normal,
    Noindex,
    Slow(Duration),
}

/// The tag a link is written with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkTag {
    /// `<a href>`, with the target's label as anchor text.
    A,
    /// `<img src>`.
    Img,
    /// `<link rel="next" href>`.
    Link,
}

/// One outgoing link of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Link {
    pub host: u32,
    pub page: Page,
    pub tag: LinkTag,
    /// Which href form to write (see `render::href`).
    pub form: u64,
}

impl SyntheticWeb {
    /// Generates the web of `spec` on addresses from `base`, all on `port`. Deterministic for
    /// `(spec, base, port)`. Counts beyond [`WebSpec::MAX_HOSTS`] / [`WebSpec::MAX_PAGES`] are
    /// cut to those limits, and zero counts raised to 1.
    pub fn generate(spec: &WebSpec, base: Ipv4Addr, port: u16) -> SyntheticWeb {
        let mut spec = *spec;
        spec.hosts = spec.hosts.clamp(1, WebSpec::MAX_HOSTS);
        spec.pages = spec.pages.clamp(1, WebSpec::MAX_PAGES);
        let mut addrs = Vec::with_capacity(spec.hosts);
        let mut next = u32::from(base);
        while addrs.len() < spec.hosts {
            if !matches!(next & 0xff, 0 | 255) {
                addrs.push(Ipv4Addr::from(next));
            }
            next = next.wrapping_add(1);
        }
        let index = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| (*a, i as u32))
            .collect();
        let pages = spec.pages as u64;
        let mut roots_from: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
        for c in 1..spec.hosts as u64 {
            let parent = mix(spec.seed, tag::HOST_PARENT, c, 0) % c;
            let slot = mix(spec.seed, tag::HOST_SLOT, c, 0) % pages;
            roots_from
                .entry((parent as u32, slot as u32))
                .or_default()
                .push(c as u32);
        }
        let extras = 1 + spec.pages as u32 / 100;
        SyntheticWeb {
            spec,
            port,
            addrs,
            index,
            roots_from,
            extras,
            step: (spec.pages as u32 / extras).max(1),
            publish: Publish::default(),
        }
    }

    /// The web with `publish`'s sitemap line, lastmod and changes.
    pub fn publishing(mut self, publish: Publish) -> SyntheticWeb {
        self.publish = publish;
        self
    }

    /// What the web publishes.
    pub fn published(&self) -> &Publish {
        &self.publish
    }

    /// The version of tree page `i` of host `h` at `now` (0: never changed) and when it last
    /// changed (`Publish::since` if never).
    pub(crate) fn version(&self, h: u32, i: u32, now: i64) -> (u64, i64) {
        let since = self.publish.since;
        let Some(c) = self.publish.changes.filter(|_| i != 0 && now > since) else {
            return (0, since);
        };
        let every = c.every.max(1);
        let rounds = ((now - since) as u64 / every).min(MAX_ROUNDS);
        let key = (u64::from(h) << 32) | u64::from(i);
        let mut v = 0;
        let mut last = since;
        for r in 1..=rounds {
            if mix(self.spec.seed, tag::CHANGE, key, r) % 1000 < u64::from(c.per_mille) {
                v += 1;
                last = since + (r * every) as i64;
            }
        }
        (v, last)
    }

    /// The index of the host at `addr` (0 for host 0), if it is one of the web's.
    pub fn host_index(&self, addr: SocketAddr) -> Option<u32> {
        self.host_of(addr)
    }

    /// `http://address:port` of host `h` (the port left out when it is 80), if `h` is a host
    /// of the web.
    pub fn origin_of(&self, h: u32) -> Option<String> {
        ((h as usize) < self.addrs.len()).then(|| self.origin(h))
    }

    /// The last round of changes at `now` (0: none yet, or the web does not change): round
    /// `r` happens at `Publish::since + r * every`.
    pub fn round_at(&self, now: i64) -> u64 {
        match self.publish.changes {
            Some(c) if now > self.publish.since => {
                ((now - self.publish.since) as u64 / c.every.max(1)).min(MAX_ROUNDS)
            }
            _ => 0,
        }
    }

    /// When round `r` of changes happens (Unix seconds).
    pub fn round_time(&self, r: u64) -> i64 {
        let every = self.publish.changes.map_or(1, |c| c.every.max(1));
        self.publish.since + (r * every) as i64
    }

    /// The paths (`/s0/p3.html`) of the tree pages of host `h` that change in round `r` (from
    /// 1), as [`SyntheticWeb::respond`] serves them: what a modification log of the web logs.
    pub fn changed_in_round(&self, h: u32, r: u64) -> Vec<String> {
        let Some(c) = self
            .publish
            .changes
            .filter(|_| (1..=MAX_ROUNDS).contains(&r))
        else {
            return Vec::new();
        };
        (1..self.spec.pages as u32)
            .filter(|&i| {
                let key = (u64::from(h) << 32) | u64::from(i);
                mix(self.spec.seed, tag::CHANGE, key, r) % 1000 < u64::from(c.per_mille)
            })
            .map(|i| Page::Tree(i).path())
            .collect()
    }

    /// The spec the web was generated from.
    pub fn spec(&self) -> &WebSpec {
        &self.spec
    }

    /// Every host's address, host 0 first.
    pub fn hosts(&self) -> Vec<SocketAddr> {
        self.addrs
            .iter()
            .map(|a| SocketAddr::new(IpAddr::V4(*a), self.port))
            .collect()
    }

    /// Where a crawl starts: host 0's `/`.
    pub fn start_uris(&self) -> Vec<String> {
        vec![self.url(0, Page::Tree(0))]
    }

    /// The absolute URL of a page.
    pub(crate) fn url(&self, host: u32, page: Page) -> String {
        format!("{}{}", self.origin(host), page.path())
    }

    /// `http://address:port` of a host, without the port when it is 80 (the normal form URL
    /// parsers give).
    pub(crate) fn origin(&self, host: u32) -> String {
        // Host indices come from `outlinks` and `host_of`, which only name hosts of the web.
        let addr = self.addrs[host as usize];
        match self.port {
            80 => format!("http://{addr}"),
            port => format!("http://{addr}:{port}"),
        }
    }

    /// The host index of an address.
    pub(crate) fn host_of(&self, addr: SocketAddr) -> Option<u32> {
        match addr.ip() {
            IpAddr::V4(ip) => self.index.get(&ip).copied(),
            IpAddr::V6(_) => None,
        }
    }

    /// True when robots.txt of `host` disallows `/private/` (every host but one answers it).
    pub(crate) fn has_robots(&self, host: u32) -> bool {
        self.spec.plain || host != ROBOTS_MISSING
    }

    /// True when `host`'s robots.txt has `Crawl-delay: 1`.
    pub(crate) fn has_crawl_delay(&self, host: u32) -> bool {
        !self.spec.plain && host == CRAWL_DELAY_HOST
    }

    /// The host that serves the same `/xdup/` pages as `host`, if any.
    pub(crate) fn partner(&self, host: u32) -> Option<u32> {
        let p = host ^ 1;
        ((p as usize) < self.spec.hosts).then_some(p)
    }

    /// True when `page` exists on `host` (is answered with something other than 404).
    pub(crate) fn exists(&self, host: u32, page: Page) -> bool {
        let pages = self.spec.pages as u32;
        match page {
            Page::Tree(i) => i < pages,
            Page::Robots => self.has_robots(host),
            _ if self.spec.plain => false,
            Page::Sitemap => true,
            Page::Big => host == 0,
            Page::Extra(Extra::Missing, _) => false,
            Page::Extra(Extra::CrossDup, j) => j < self.extras && self.partner(host).is_some(),
            Page::Extra(_, j)
            | Page::ChainB(j)
            | Page::DupB(j)
            | Page::Orphan(j)
            | Page::Target(_, j) => j < self.extras,
        }
    }

    /// How tree page `i` of `host` behaves.
    pub(crate) fn tree_kind(&self, host: u32, i: u32) -> TreeKind {
        let slow = || {
            let ms = 200 + mix(self.spec.seed, tag::DELAY, host.into(), i.into()) % 301;
            TreeKind::Slow(Duration::from_millis(ms))
        };
        match (host, i) {
            _ if self.spec.plain || i == 0 => TreeKind::Normal,
            (0, 1) => TreeKind::Noindex,
            (0, 2) => slow(),
            _ => match mix(self.spec.seed, tag::KIND, host.into(), i.into()) % 100 {
                0..=2 => TreeKind::Noindex,
                3 => slow(),
                _ => TreeKind::Normal,
            },
        }
    }

    /// The tree page of `host` that links extra `j` of `kind`: `(j * step + offset) mod pages`,
    /// distinct for distinct `j` because `step * extras <= pages`.
    fn extra_offset(&self, host: u32, kind: Extra) -> u64 {
        mix(self.spec.seed, tag::EXTRA, host.into(), kind as u64) % self.spec.pages as u64
    }

    /// The extras tree page `i` of `host` links (the inverse of `extra_offset`'s placement).
    fn extras_at(&self, host: u32, i: u32) -> impl Iterator<Item = (Extra, u32)> + '_ {
        let pages = self.spec.pages as u64;
        let plain = self.spec.plain;
        EXTRAS.into_iter().filter_map(move |kind| {
            if plain {
                return None;
            }
            let d = (u64::from(i) + pages - self.extra_offset(host, kind)) % pages;
            let step = u64::from(self.step);
            let j = d / step;
            (d.is_multiple_of(step) && j < u64::from(self.extras)).then_some((kind, j as u32))
        })
    }

    /// The links of a page, in document order (the `<link>` in the head first). Pages that do
    /// not exist or are not HTML have none.
    pub(crate) fn outlinks(&self, host: u32, page: Page) -> Vec<Link> {
        let seed = self.spec.seed;
        let key = (u64::from(host) << 32)
            | u64::from(match page {
                Page::Tree(i) => i,
                _ => u32::MAX,
            });
        let mut out: Vec<Link> = Vec::new();
        let mut push = |host: u32, page: Page, link_tag: LinkTag| {
            if !out
                .iter()
                .any(|l| l.host == host && l.page == page && l.tag == link_tag)
            {
                let form = mix(seed, tag::FORM, key, out.len() as u64);
                out.push(Link {
                    host,
                    page,
                    tag: link_tag,
                    form,
                });
            }
        };
        let root = Page::Tree(0);
        match page {
            Page::Tree(i) => {
                let pages = self.spec.pages as u32;
                if i + 1 < pages {
                    push(host, Page::Tree(i + 1), LinkTag::Link);
                }
                let first = u64::from(i) * u64::from(FANOUT) + 1;
                for c in first..(first + u64::from(FANOUT)).min(u64::from(pages)) {
                    push(host, Page::Tree(c as u32), LinkTag::A);
                }
                for k in 0..RANDOM_LINKS {
                    let r = mix(seed, tag::RANDOM, key, k);
                    let to = if r.is_multiple_of(5) && self.spec.hosts > 1 {
                        let others = self.spec.hosts as u64 - 1;
                        (u64::from(host) + 1 + (r >> 8) % others) % self.spec.hosts as u64
                    } else {
                        u64::from(host)
                    };
                    let slot = (r >> 32) % u64::from(pages);
                    if (to as u32, slot as u32) != (host, i) {
                        push(to as u32, Page::Tree(slot as u32), LinkTag::A);
                    }
                }
                for c in self.roots_from.get(&(host, i)).into_iter().flatten() {
                    push(*c, root, LinkTag::A);
                }
                for (kind, j) in self.extras_at(host, i) {
                    match kind {
                        Extra::Image => push(host, Page::Extra(kind, j), LinkTag::Img),
                        Extra::CrossDup if self.partner(host).is_none() => {}
                        Extra::Dup => {
                            push(host, Page::Extra(kind, j), LinkTag::A);
                            push(host, Page::DupB(j), LinkTag::A);
                        }
                        _ => push(host, Page::Extra(kind, j), LinkTag::A),
                    }
                }
                if host == 0 && i == 0 && !self.spec.plain {
                    push(host, Page::Big, LinkTag::A);
                }
                if i != 0 {
                    push(host, root, LinkTag::A);
                }
            }
            Page::Extra(Extra::Nofollow, j) => {
                push(host, Page::Orphan(j), LinkTag::A);
                push(host, root, LinkTag::A);
            }
            Page::Extra(Extra::Private, _) | Page::Orphan(_) | Page::Target(..) => {
                push(host, root, LinkTag::A)
            }
            _ => {}
        }
        out
    }
}
