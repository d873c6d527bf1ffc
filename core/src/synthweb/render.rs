//! What the server sends: robots.txt, HTML pages rendered from their index, redirects, the PNG,
//! the big page and 404s.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use xxhash_rust::xxh3::xxh3_64;

use super::page::{label, mix, tag, Extra, Page, TargetOf};
use super::{Link, LinkTag, Reply, SyntheticWeb, TreeKind, BIG_SIZE};

/// A 1x1 transparent PNG.
const PNG: [u8; 67] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

/// Words the filler text is drawn from.
const WORDS: [&str; 32] = [
    "crawl", "fabric", "node", "queue", "site", "link", "anchor", "robot", "delay", "fetch",
    "store", "index", "page", "host", "route", "digest", "feed", "batch", "frame", "marshal",
    "replica", "checksum", "refresh", "schedule", "domain", "document", "session", "master",
    "backup", "policy", "limit", "trail",
];

const HTML: &str = "text/html; charset=utf-8";

impl SyntheticWeb {
    /// What the server sends for `GET path_and_query` on `host` (the address the request came
    /// in on). Unknown hosts and paths are 404.
    pub fn respond(&self, host: SocketAddr, path_and_query: &str) -> Reply {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        self.respond_at(host, path_and_query, now)
    }

    /// [`SyntheticWeb::respond`] at Unix time `now`, which matters only to a web whose pages
    /// change ([`super::ChangeSchedule`]).
    pub fn respond_at(&self, host: SocketAddr, path_and_query: &str, now: i64) -> Reply {
        let Some(h) = self.host_of(host) else {
            return not_found();
        };
        let Some(page) = Page::parse(path_and_query).filter(|p| self.exists(h, *p)) else {
            return not_found();
        };
        match page {
            Page::Robots => reply(200, "text/plain", self.robots_txt(h).into_bytes()),
            Page::Extra(Extra::Image, _) => reply(200, "image/png", PNG.to_vec()),
            // Absolute, relative and path-absolute Location values all occur (RFC 9110 10.2.2).
            Page::Extra(Extra::Moved, j) => {
                redirect(301, self.url(h, Page::Target(TargetOf::Moved, j)))
            }
            Page::Extra(Extra::Chain, j) => redirect(302, self.url(h, Page::ChainB(j))),
            Page::ChainB(j) => redirect(301, Page::Target(TargetOf::Chain, j).path()),
            Page::Big => reply(200, HTML, big_page(h)),
            Page::Sitemap => reply(
                200,
                "application/xml",
                self.sitemap_xml(h, now).into_bytes(),
            ),
            _ => {
                let mut r = reply(200, HTML, self.html(h, page).into_bytes());
                if let Page::Tree(i) = page {
                    if let TreeKind::Slow(d) = self.tree_kind(h, i) {
                        r.delay = d;
                    }
                    if self.publish.changes.is_some() {
                        self.versioned(&mut r, h, i, now);
                    }
                }
                r
            }
        }
    }

    /// robots.txt of a host that has one.
    pub(crate) fn robots_txt(&self, h: u32) -> String {
        if self.spec.plain {
            return "User-agent: *\nDisallow:\n".into();
        }
        let mut s = String::from("User-agent: *\nDisallow: /private/\n");
        if self.has_crawl_delay(h) {
            s.push_str("Crawl-delay: 1\n");
        }
        if self.publish.robots_sitemap {
            let _ = writeln!(s, "Sitemap: {}", self.url(h, Page::Sitemap));
        }
        s
    }

    /// `/sitemap.xml` of host `h` (sitemaps.org): every tree page, with its lastmod when the
    /// web has a publication date or changes.
    fn sitemap_xml(&self, h: u32, now: i64) -> String {
        let mut s = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n",
        );
        for i in 0..self.spec.pages as u32 {
            let _ = write!(s, "<url><loc>{}</loc>", self.url(h, Page::Tree(i)));
            let (_, changed) = self.version(h, i, now);
            if changed > 0 {
                let _ = write!(s, "<lastmod>{}</lastmod>", crate::rup::format_date(changed));
            }
            s.push_str("</url>\n");
        }
        s.push_str("</urlset>\n");
        s
    }

    /// A changing tree page's version: a comment in its body, its Last-Modified and ETag.
    fn versioned(&self, r: &mut Reply, h: u32, i: u32, now: i64) {
        let (v, changed) = self.version(h, i, now);
        if v > 0 {
            r.body
                .extend_from_slice(format!("<!-- version {v} -->\n").as_bytes());
        }
        let when = std::time::UNIX_EPOCH + Duration::from_secs(changed.max(0) as u64);
        r.headers
            .push(("Last-Modified".into(), httpdate::fmt_http_date(when)));
        r.headers.push(("ETag".into(), format!("\"{h}-{i}-{v}\"")));
    }

    /// The HTML of a page. Duplicates render from a key their twins share, so that their bytes
    /// are the same under both URLs; they have no links, whose hrefs would differ.
    fn html(&self, h: u32, page: Page) -> String {
        let title = match page {
            Page::Extra(Extra::Dup, j) | Page::DupB(j) => format!("duplicate {j} of host {h}"),
            Page::Extra(Extra::CrossDup, j) => {
                let a = h & !1;
                format!("cross-host duplicate {j} of hosts {a} and {}", a + 1)
            }
            _ => label(h, page),
        };
        let path = page.path();
        let links = self.outlinks(h, page);
        let mut s = String::with_capacity(2048);
        s.push_str("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n");
        let _ = writeln!(s, "<title>{title}</title>");
        match page {
            Page::Tree(i) if self.tree_kind(h, i) == TreeKind::Noindex => {
                s.push_str("<meta name=\"robots\" content=\"noindex\">\n")
            }
            Page::Extra(Extra::Nofollow, _) => {
                s.push_str("<meta name=\"robots\" content=\"nofollow\">\n")
            }
            Page::Extra(Extra::Refresh, j) => {
                let to = Page::Target(TargetOf::Refresh, j).path();
                let _ = writeln!(s, "<meta http-equiv=\"refresh\" content=\"0; url={to}\">");
            }
            _ => {}
        }
        for l in links.iter().filter(|l| l.tag == LinkTag::Link) {
            let _ = writeln!(s, "<link rel=\"next\" href=\"{}\">", self.href(h, &path, l));
        }
        let _ = write!(s, "</head><body>\n<h1>{title}</h1>\n<p>");
        let key = xxh3_64(title.as_bytes());
        let words = 60 + mix(self.spec.seed, tag::WORDS, key, 0) % 180;
        for w in 0..words {
            let r = mix(self.spec.seed, tag::WORDS, key, w + 1);
            s.push_str(WORDS[(r % WORDS.len() as u64) as usize]);
            s.push(if r >> 60 == 0 { '\n' } else { ' ' });
        }
        s.push_str("</p>\n<ul>\n");
        for l in &links {
            let href = self.href(h, &path, l);
            match l.tag {
                LinkTag::A => {
                    let _ = writeln!(
                        s,
                        "<li><a href=\"{href}\">{}</a></li>",
                        label(l.host, l.page)
                    );
                }
                LinkTag::Img => {
                    let _ = writeln!(
                        s,
                        "<li><img src=\"{href}\" alt=\"{}\"></li>",
                        label(l.host, l.page)
                    );
                }
                LinkTag::Link => {}
            }
        }
        s.push_str("</ul>\n</body></html>\n");
        s
    }

    /// The href of a link from the page at `from` on host `h`: an absolute URL for other hosts
    /// (sometimes with a fragment); within the host, as `l.form` picks, an absolute URL, a
    /// path, a relative reference (`p5.html`, `../s0/p3.html`, `./`), or either with a fragment.
    pub(crate) fn href(&self, h: u32, from: &str, l: &Link) -> String {
        let path = l.page.path();
        let fragment = l.form >> 40;
        if l.host != h {
            let url = self.url(l.host, l.page);
            return if fragment.is_multiple_of(3) {
                format!("{url}#sec{}", fragment % 7)
            } else {
                url
            };
        }
        match (l.tag, l.form % 5) {
            (LinkTag::Img, _) | (LinkTag::A, 1) => path,
            (LinkTag::A, 0) => self.url(h, l.page),
            (LinkTag::Link, _) | (LinkTag::A, 2) => relative(from, &path),
            (LinkTag::A, 3) => format!("{}#top", relative(from, &path)),
            (LinkTag::A, _) => format!("{path}#sec{}", fragment % 7),
        }
    }
}

/// `target` relative to the document at `base` (both absolute paths without dot segments).
fn relative(base: &str, target: &str) -> String {
    let dir = &base[..=base.rfind('/').unwrap_or(0)];
    match target.strip_prefix(dir) {
        Some("") => "./".into(),
        Some(rest) => rest.into(),
        None => {
            let up = dir.matches('/').count().saturating_sub(1);
            format!("{}{}", "../".repeat(up), target.trim_start_matches('/'))
        }
    }
}

fn reply(status: u16, content_type: &str, body: Vec<u8>) -> Reply {
    Reply {
        status,
        headers: vec![("Content-Type".into(), content_type.into())],
        body,
        delay: Duration::ZERO,
    }
}

fn redirect(status: u16, location: String) -> Reply {
    let body =
        format!("<!DOCTYPE html>\n<html><body><a href=\"{location}\">moved</a></body></html>\n");
    let mut r = reply(status, HTML, body.into_bytes());
    r.headers.push(("Location".into(), location));
    r
}

fn not_found() -> Reply {
    let body = "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\
                <body><h1>Not Found</h1></body></html>\n";
    reply(404, HTML, body.as_bytes().to_vec())
}

/// `/big.html`: exactly [`BIG_SIZE`] bytes of HTML without links.
pub(crate) fn big_page(h: u32) -> Vec<u8> {
    let footer = "</p>\n</body></html>\n";
    let mut s = String::with_capacity(BIG_SIZE);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html><head><title>{}</title></head><body>\n<p>",
        label(h, Page::Big)
    );
    let mut n = 0u32;
    while s.len() + 64 + footer.len() < BIG_SIZE {
        let _ = writeln!(s, "line {n} of the big page, which no crawler stores");
        n += 1;
    }
    while s.len() + footer.len() < BIG_SIZE {
        s.push(' ');
    }
    s.push_str(footer);
    s.into_bytes()
}
