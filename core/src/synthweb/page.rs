//! The pages of one synthetic host: what each is, its path, its label (the anchor text of links
//! to it) and the deterministic hash every choice of the generator comes from.

use std::fmt::Write as _;

/// A page kind hung off a tree page of its host ("extras"; see the module doc of `synthweb`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Extra {
    /// `/private/v{j}.html`: disallowed by robots.txt (allowed on the host whose robots.txt is 404).
    Private,
    /// `/excluded/e{j}.html`: matched by the collection's exclude_uris rule.
    Excluded,
    /// `/missing/m{j}.html`: 404.
    Missing,
    /// `/img/i{j}.png`: image/png, linked with `<img src>`.
    Image,
    /// `/nf/n{j}.html`: meta robots nofollow; its only private link goes to `/orphan/o{j}.html`.
    Nofollow,
    /// `/r/m{j}`: 301 to `/t/m{j}.html`.
    Moved,
    /// `/r/a{j}`: 302 to `/r/b{j}`, which is 301 to `/t/c{j}.html`.
    Chain,
    /// `/mr/f{j}.html`: meta refresh to `/t/f{j}.html`.
    Refresh,
    /// `/dup/a{j}.html` (and `/dup/b{j}.html`, linked from the same page): identical bodies.
    Dup,
    /// `/xdup/x{j}.html`: the same body on this host and its partner host.
    CrossDup,
}

/// Every extra kind, in the order they are hung off tree pages.
pub(crate) const EXTRAS: [Extra; 10] = [
    Extra::Private,
    Extra::Excluded,
    Extra::Missing,
    Extra::Image,
    Extra::Nofollow,
    Extra::Moved,
    Extra::Chain,
    Extra::Refresh,
    Extra::Dup,
    Extra::CrossDup,
];

/// What a redirect target page is the target of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum TargetOf {
    /// `/t/m{j}.html`, target of the 301 `/r/m{j}`.
    Moved,
    /// `/t/c{j}.html`, target of the chain `/r/a{j}` -> `/r/b{j}`.
    Chain,
    /// `/t/f{j}.html`, target of the meta refresh `/mr/f{j}.html`.
    Refresh,
}

/// One page of a host, by kind and index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Page {
    /// `/robots.txt`.
    Robots,
    /// Tree page `i`: `/` for 0, `/s{i/20}/p{i}.html` otherwise.
    Tree(u32),
    /// Extra `j` of a kind.
    Extra(Extra, u32),
    /// `/r/b{j}`: the second hop of chain `j`.
    ChainB(u32),
    /// `/dup/b{j}.html`: the twin of `/dup/a{j}.html`.
    DupB(u32),
    /// `/orphan/o{j}.html`: linked only from nofollow page `j`.
    Orphan(u32),
    /// A redirect target.
    Target(TargetOf, u32),
    /// `/big.html` on host 0: larger than the default max_doc_size.
    Big,
    /// `/sitemap.xml`: the host's tree pages with their lastmod (not in plain webs).
    Sitemap,
}

/// Tree pages per directory (`/s{i/20}/`).
const PER_DIR: u32 = 20;

/// `(prefix, suffix, constructor)` of every page whose path is `prefix{n}suffix`.
type Shape = (&'static str, &'static str, fn(u32) -> Page);
const SHAPES: [Shape; 16] = [
    ("/private/v", ".html", |j| Page::Extra(Extra::Private, j)),
    ("/excluded/e", ".html", |j| Page::Extra(Extra::Excluded, j)),
    ("/missing/m", ".html", |j| Page::Extra(Extra::Missing, j)),
    ("/img/i", ".png", |j| Page::Extra(Extra::Image, j)),
    ("/nf/n", ".html", |j| Page::Extra(Extra::Nofollow, j)),
    ("/r/m", "", |j| Page::Extra(Extra::Moved, j)),
    ("/r/a", "", |j| Page::Extra(Extra::Chain, j)),
    ("/mr/f", ".html", |j| Page::Extra(Extra::Refresh, j)),
    ("/dup/a", ".html", |j| Page::Extra(Extra::Dup, j)),
    ("/xdup/x", ".html", |j| Page::Extra(Extra::CrossDup, j)),
    ("/r/b", "", Page::ChainB),
    ("/dup/b", ".html", Page::DupB),
    ("/orphan/o", ".html", Page::Orphan),
    ("/t/m", ".html", |j| Page::Target(TargetOf::Moved, j)),
    ("/t/c", ".html", |j| Page::Target(TargetOf::Chain, j)),
    ("/t/f", ".html", |j| Page::Target(TargetOf::Refresh, j)),
];

impl Page {
    /// The index of a page of the SHAPES table.
    fn index(self) -> Option<u32> {
        match self {
            Page::Robots | Page::Big | Page::Sitemap | Page::Tree(_) => None,
            Page::Extra(_, j)
            | Page::ChainB(j)
            | Page::DupB(j)
            | Page::Orphan(j)
            | Page::Target(_, j) => Some(j),
        }
    }

    /// The path (absolute, without scheme and authority).
    pub(crate) fn path(self) -> String {
        let mut s = String::with_capacity(24);
        match self {
            Page::Robots => s.push_str("/robots.txt"),
            Page::Big => s.push_str("/big.html"),
            Page::Sitemap => s.push_str("/sitemap.xml"),
            Page::Tree(0) => s.push('/'),
            Page::Tree(i) => {
                let _ = write!(s, "/s{}/p{i}.html", i / PER_DIR);
            }
            _ => {
                // Every other page has exactly one shape (the table covers each constructor).
                let j = self.index().unwrap_or(0);
                if let Some((prefix, suffix, _)) =
                    SHAPES.iter().find(|(_, _, make)| make(j) == self)
                {
                    let _ = write!(s, "{prefix}{j}{suffix}");
                }
            }
        }
        s
    }

    /// The page a path names, if any has that exact path (no leading zeros, no query). Whether
    /// the page exists on a given host is [`super::SyntheticWeb`]'s business.
    pub(crate) fn parse(path: &str) -> Option<Page> {
        let candidate = match path {
            "/" => Page::Tree(0),
            "/robots.txt" => Page::Robots,
            "/big.html" => Page::Big,
            "/sitemap.xml" => Page::Sitemap,
            _ => match path.strip_prefix("/s") {
                Some(rest) => {
                    let (_, file) = rest.split_once("/p")?;
                    Page::Tree(number(file.strip_suffix(".html")?)?)
                }
                None => SHAPES.iter().find_map(|(prefix, suffix, make)| {
                    let n = path.strip_prefix(prefix)?.strip_suffix(suffix)?;
                    Some(make(number(n)?))
                })?,
            },
        };
        // Reject leading zeros, `/s9/p1.html` for page 1 and the like: one path per page.
        (candidate.path() == path).then_some(candidate)
    }
}

/// A decimal `u32` of digits only.
fn number(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The label of a page of host `h`: its title and the anchor text of every link to it, distinct
/// across the whole web.
pub(crate) fn label(h: u32, page: Page) -> String {
    match page {
        Page::Robots => format!("robots.txt of host {h}"),
        Page::Sitemap => format!("sitemap of host {h}"),
        Page::Tree(i) => format!("page {i} of host {h}"),
        Page::Extra(kind, j) => {
            let what = match kind {
                Extra::Private => "private page",
                Extra::Excluded => "excluded page",
                Extra::Missing => "missing page",
                Extra::Image => "image",
                Extra::Nofollow => "nofollow page",
                Extra::Moved => "moved page",
                Extra::Chain => "redirect chain",
                Extra::Refresh => "meta refresh page",
                Extra::Dup => "duplicate a",
                Extra::CrossDup => "cross-host duplicate",
            };
            format!("{what} {j} of host {h}")
        }
        Page::ChainB(j) => format!("redirect chain hop {j} of host {h}"),
        Page::DupB(j) => format!("duplicate b {j} of host {h}"),
        Page::Orphan(j) => format!("orphan page {j} of host {h}"),
        Page::Target(of, j) => {
            let what = match of {
                TargetOf::Moved => "moved",
                TargetOf::Chain => "chain",
                TargetOf::Refresh => "refresh",
            };
            format!("{what} target {j} of host {h}")
        }
        Page::Big => format!("big page of host {h}"),
    }
}

/// Tags of [`mix`] calls, one per kind of choice, so that choices do not correlate.
pub(crate) mod tag {
    pub const HOST_PARENT: u64 = 1;
    pub const HOST_SLOT: u64 = 2;
    pub const KIND: u64 = 3;
    pub const DELAY: u64 = 4;
    pub const RANDOM: u64 = 5;
    pub const FORM: u64 = 6;
    pub const EXTRA: u64 = 7;
    pub const WORDS: u64 = 8;
    pub const CHANGE: u64 = 9;
}

/// splitmix64's finaliser.
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The deterministic hash every random choice of the generator is drawn from.
pub(crate) fn mix(seed: u64, tag: u64, a: u64, b: u64) -> u64 {
    splitmix(splitmix(splitmix(seed ^ tag.rotate_left(56)) ^ a) ^ b)
}
