//! What a correct crawler does with the web: a breadth-first walk of the page graph under the
//! rules of the collection `collection_xml` writes (robots.txt, exclude_uris, meta robots,
//! max_doc_size, allowed_types, redirects and meta refresh followed).

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use super::page::{label, Extra, Page, TargetOf};
use super::{Expected, LinkTag, SyntheticWeb, TreeKind};

/// What becomes of a fetched page.
enum Fate {
    /// Stored (or one of a duplicate group, keyed by the group); links followed unless nofollow.
    Document { follow: bool, dup: Option<String> },
    /// Not stored; links followed (noindex).
    Noindex,
    /// Not stored, no links (404, image/png, the big page).
    Dropped,
    /// An HTTP redirect.
    Redirect(Page, u16),
    /// A meta refresh.
    Refresh(Page),
}

impl SyntheticWeb {
    /// What a correct crawler of this web fetches, never fetches and stores (see [`Expected`]).
    pub fn expected(&self) -> Expected {
        self.walk(None)
    }

    /// The links a correct crawler extracts: from every fetched page whose links it follows
    /// (not nofollow pages, 3xx bodies or meta refresh pages), in crawl order, as absolute URLs
    /// without fragment. The anchor text is the target's label for `<a>`, empty for `<img>` and
    /// `<link>`.
    pub fn link_graph(&self) -> Vec<(String, String, String)> {
        let mut edges = Vec::new();
        self.walk(Some(&mut edges));
        edges
    }

    fn walk(&self, mut edges: Option<&mut Vec<(String, String, String)>>) -> Expected {
        let mut e = Expected::default();
        let mut seen: HashSet<(u32, Page)> = HashSet::new();
        let mut queue: VecDeque<(u32, Page)> = VecDeque::new();
        let mut hosts: BTreeSet<u32> = BTreeSet::new();
        let mut dups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        seen.insert((0, Page::Tree(0)));
        queue.push_back((0, Page::Tree(0)));
        while let Some((h, page)) = queue.pop_front() {
            let url = self.url(h, page);
            let excluded = matches!(page, Page::Extra(Extra::Excluded, _));
            let disallowed = matches!(page, Page::Extra(Extra::Private, _)) && self.has_robots(h);
            if excluded || disallowed {
                e.never.insert(url);
                continue;
            }
            if hosts.insert(h) {
                e.fetched.insert(self.url(h, Page::Robots));
                // The collection reads sitemaps: /sitemap.xml, named by robots.txt or found
                // at its default place; it lists tree pages, all reachable by links too.
                if self.exists(h, Page::Sitemap) {
                    e.fetched.insert(self.url(h, Page::Sitemap));
                }
            }
            let mut discover = |to: (u32, Page)| {
                if seen.insert(to) {
                    queue.push_back(to);
                }
            };
            match self.fate(h, page) {
                Fate::Document { follow, dup } => {
                    match dup {
                        Some(key) => dups.entry(key).or_default().push(url.clone()),
                        None => {
                            e.stored.insert(url.clone());
                        }
                    }
                    if follow {
                        self.follow(h, page, &url, &mut edges, &mut discover);
                    }
                }
                Fate::Noindex => self.follow(h, page, &url, &mut edges, &mut discover),
                Fate::Dropped => {
                    if !self.exists(h, page) {
                        e.not_found.insert(url.clone());
                    }
                }
                Fate::Redirect(to, status) => {
                    e.redirects.push((url.clone(), self.url(h, to), status));
                    discover((h, to));
                }
                Fate::Refresh(to) => {
                    e.meta_refresh.push((url.clone(), self.url(h, to)));
                    discover((h, to));
                }
            }
            if let Page::Tree(i) = page {
                if matches!(self.tree_kind(h, i), TreeKind::Slow(_)) {
                    e.slow.insert(url.clone());
                }
            }
            e.fetched.insert(url);
        }
        for (_, mut group) in dups {
            group.sort();
            if group.len() > 1 {
                e.duplicate_groups.push(group);
            } else {
                e.stored.extend(group);
            }
        }
        e
    }

    /// Queues the links of a page and records them as edges.
    fn follow(
        &self,
        h: u32,
        page: Page,
        url: &str,
        edges: &mut Option<&mut Vec<(String, String, String)>>,
        discover: &mut impl FnMut((u32, Page)),
    ) {
        for l in self.outlinks(h, page) {
            if let Some(edges) = edges.as_deref_mut() {
                let anchor = match l.tag {
                    LinkTag::A => label(l.host, l.page),
                    LinkTag::Img | LinkTag::Link => String::new(),
                };
                edges.push((url.to_string(), self.url(l.host, l.page), anchor));
            }
            discover((l.host, l.page));
        }
    }

    /// What becomes of a page a crawler fetches.
    fn fate(&self, h: u32, page: Page) -> Fate {
        if !self.exists(h, page) {
            return Fate::Dropped;
        }
        let doc = |follow| Fate::Document { follow, dup: None };
        match page {
            Page::Tree(i) => match self.tree_kind(h, i) {
                TreeKind::Noindex => Fate::Noindex,
                TreeKind::Normal | TreeKind::Slow(_) => doc(true),
            },
            Page::Extra(Extra::Nofollow, _) => doc(false),
            Page::Extra(Extra::Moved, j) => Fate::Redirect(Page::Target(TargetOf::Moved, j), 301),
            Page::Extra(Extra::Chain, j) => Fate::Redirect(Page::ChainB(j), 302),
            Page::ChainB(j) => Fate::Redirect(Page::Target(TargetOf::Chain, j), 301),
            Page::Extra(Extra::Refresh, j) => Fate::Refresh(Page::Target(TargetOf::Refresh, j)),
            Page::Extra(Extra::Dup, j) | Page::DupB(j) => Fate::Document {
                follow: true,
                dup: Some(format!("dup {h} {j}")),
            },
            Page::Extra(Extra::CrossDup, j) => Fate::Document {
                follow: true,
                dup: Some(format!("xdup {} {j}", h & !1)),
            },
            Page::Extra(Extra::Image, _) | Page::Big | Page::Robots | Page::Sitemap => {
                Fate::Dropped
            }
            Page::Extra(Extra::Private | Extra::Excluded, _)
            | Page::Orphan(_)
            | Page::Target(..) => doc(true),
            Page::Extra(Extra::Missing, _) => Fate::Dropped,
        }
    }
}
