//! Sitemaps end to end (sitemaps.org; docs/sitemaps.md): a standalone node scheduler crawls a
//! loopback site whose robots.txt names a sitemap index (one gzip sitemap, one plain), then a
//! refresh cycle fetches the sitemaps and exactly the pages whose `<lastmod>` moved, the page
//! listed without a lastmod and the page no sitemap lists (those two conditionally, as
//! before), and nothing else.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::util::{temp_dir, wait_until, Role};

/// What the test site answers for one path.
#[derive(Clone, Debug)]
pub struct Resource {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// Sent as ETag; an If-None-Match naming it is answered 304.
    pub etag: Option<String>,
}

impl Resource {
    pub fn ok(content_type: &'static str, body: impl Into<Vec<u8>>) -> Resource {
        Resource {
            status: 200,
            content_type,
            body: body.into(),
            etag: None,
        }
    }
}

/// One request the site answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    pub path: String,
    pub status: u16,
    /// It carried If-None-Match or If-Modified-Since.
    pub conditional: bool,
}

type Pages = Arc<Mutex<HashMap<String, Resource>>>;

/// A small HTTP/1.1 site on a loopback address (keep-alive, GET only), logging every request.
pub struct TestSite {
    pub addr: SocketAddr,
    pages: Pages,
    hits: Arc<Mutex<Vec<Hit>>>,
    stop: Arc<AtomicBool>,
}

impl TestSite {
    pub fn start(ip: Ipv4Addr) -> TestSite {
        let listener = TcpListener::bind((ip, 0)).expect("a loopback port");
        let addr = listener.local_addr().unwrap();
        let pages: Pages = Arc::default();
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (p, h, s) = (pages.clone(), hits.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Acquire) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (p, h, s) = (p.clone(), h.clone(), s.clone());
                std::thread::spawn(move || serve(conn, &p, &h, &s));
            }
        });
        TestSite {
            addr,
            pages,
            hits,
            stop,
        }
    }

    pub fn put(&self, path: &str, r: Resource) {
        self.pages.lock().unwrap().insert(path.to_string(), r);
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for TestSite {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

fn serve(conn: TcpStream, pages: &Pages, hits: &Mutex<Vec<Hit>>, stop: &AtomicBool) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let mut out = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 || stop.load(Ordering::Acquire) {
            return;
        }
        let path = line.split(' ').nth(1).unwrap_or("/").to_string();
        let mut inm = None;
        let mut conditional = false;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (name, value) = h.split_once(':').unwrap_or((h, ""));
            let name = name.to_ascii_lowercase();
            if name == "if-none-match" {
                inm = Some(value.trim().to_string());
            }
            conditional |= name == "if-none-match" || name == "if-modified-since";
        }
        let res = pages.lock().unwrap().get(&path).cloned();
        let res = res.unwrap_or(Resource {
            status: 404,
            content_type: "text/plain",
            body: b"not found\n".to_vec(),
            etag: None,
        });
        let not_modified = res.etag.is_some() && inm.as_deref() == res.etag.as_deref();
        let status = if not_modified { 304 } else { res.status };
        hits.lock().unwrap().push(Hit {
            path,
            status,
            conditional,
        });
        let body: &[u8] = if not_modified { b"" } else { &res.body };
        let mut head = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
            res.content_type,
            body.len()
        );
        if let Some(e) = &res.etag {
            head.push_str(&format!("ETag: {e}\r\n"));
        }
        head.push_str("\r\n");
        if out.write_all(head.as_bytes()).is_err() || out.write_all(body).is_err() {
            return;
        }
    }
}

/// Starts a standalone node scheduler crawling the collection in `config`.
pub fn standalone_node(data: &Path, config: &Path, admin: &str) -> Role {
    Role::start(&[
        "node",
        "--standalone",
        "--sync-ms",
        "20",
        "--quarantine-interval",
        "1",
        "--admin",
        admin,
        "--config",
        config.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ])
}

/// A collection of the site at `host` (include_domains its address), delay 0, no refresh
/// timer, sitemaps on.
pub fn collection_xml(name: &str, host: SocketAddr, start: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<CrawlerConfig>\n\
         <DomainSpecification name=\"{name}\">\n\
         <attrib name=\"start_uris\" type=\"list-string\"><member>{start}</member></attrib>\n\
         <attrib name=\"include_domains\" type=\"list-string\"><member>{}</member></attrib>\n\
         <attrib name=\"delay\" type=\"real\">0</attrib>\n\
         <attrib name=\"refresh\" type=\"real\">0</attrib>\n\
         <attrib name=\"sitemaps\" type=\"boolean\">yes</attrib>\n\
         </DomainSpecification>\n</CrawlerConfig>\n",
        host.ip()
    )
}

pub fn free_admin() -> String {
    let p = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{p}")
}

fn page(n: u32, version: u32, links: &[&str]) -> Resource {
    let mut body = format!("<html><head><title>page {n}</title></head><body>version {version}");
    for l in links {
        body.push_str(&format!(" <a href=\"{l}\">{l}</a>"));
    }
    body.push_str("</body></html>\n");
    Resource {
        etag: Some(format!("\"p{n}-v{version}\"")),
        ..Resource::ok("text/html", body)
    }
}

fn gzip(b: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn urlset(entries: &[(String, Option<&str>)]) -> Vec<u8> {
    let mut s = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n",
    );
    for (loc, lastmod) in entries {
        s.push_str(&format!("<url><loc>{loc}</loc>"));
        if let Some(l) = lastmod {
            s.push_str(&format!("<lastmod>{l}</lastmod>"));
        }
        s.push_str("</url>\n");
    }
    s.push_str("</urlset>\n");
    s.into_bytes()
}

/// The two sitemaps under the index: `a.xml.gz` lists `/` and pages 1-4, `b.xml` pages 5-9
/// (9 without a lastmod), a disallowed page and a page of another host. `lastmod` gives each
/// page's date (W3C Datetime).
fn publish_sitemaps(site: &TestSite, lastmod: &BTreeMap<u32, String>) {
    let d = |n: u32| Some(lastmod[&n].as_str());
    let mut a = vec![(site.url("/"), d(0))];
    a.extend((1..=4).map(|n| (site.url(&format!("/p{n}.html")), d(n))));
    site.put(
        "/maps/a.xml.gz",
        Resource::ok("application/gzip", gzip(&urlset(&a))),
    );
    let mut b: Vec<(String, Option<&str>)> = (5..=8)
        .map(|n| (site.url(&format!("/p{n}.html")), d(n)))
        .collect();
    b.push((site.url("/p9.html"), None));
    b.push((site.url("/private/x.html"), Some("2020-01-01")));
    b.push(("http://127.0.0.1:9/elsewhere.html".to_string(), None));
    site.put("/maps/b.xml", Resource::ok("application/xml", urlset(&b)));
}

fn refetch(admin: &str, collection: &str) {
    use crawlfleet_core::xmlrpc::Value;
    let params = [
        Value::String(collection.into()),
        Value::String(String::new()),
    ];
    let r = crawlfleet_shells::admin::client::call(admin, "CollectionRefetch", &params);
    assert!(matches!(r, Ok(Ok(_))), "CollectionRefetch: {r:?}");
}

/// Waits until the site has answered nothing new for a second, returning what it answered.
fn quiet(site: &TestSite, at_least: usize) -> Vec<Hit> {
    let mut last = (0, std::time::Instant::now());
    wait_until("the crawl goes quiet", || {
        let n = site.hits().len();
        if n != last.0 {
            last = (n, std::time::Instant::now());
        }
        n >= at_least && last.1.elapsed() >= Duration::from_secs(1)
    });
    site.hits()
}

fn paths(hits: &[Hit]) -> BTreeSet<String> {
    hits.iter().map(|h| h.path.clone()).collect()
}

fn each_once(hits: &[Hit]) {
    let mut n: BTreeMap<&str, u32> = BTreeMap::new();
    for h in hits {
        *n.entry(h.path.as_str()).or_default() += 1;
    }
    let twice: Vec<_> = n.iter().filter(|(_, c)| **c > 1).collect();
    assert!(twice.is_empty(), "requested more than once: {twice:?}");
}

#[test]
fn a_refresh_fetches_exactly_the_pages_whose_lastmod_moved() {
    let dir = temp_dir("sitemaps");
    let site = TestSite::start(Ipv4Addr::new(127, 93, 0, 1));
    site.put(
        "/robots.txt",
        Resource::ok(
            "text/plain",
            format!(
                "User-agent: *\nDisallow: /private/\nSitemap: {}\n",
                site.url("/maps/index.xml")
            ),
        ),
    );
    site.put(
        "/maps/index.xml",
        Resource::ok(
            "application/xml",
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
                 <sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n\
                 <sitemap><loc>{}</loc></sitemap>\n<sitemap><loc>{}</loc></sitemap>\n\
                 <sitemap><loc>http://127.0.0.1:9/other.xml</loc></sitemap>\n\
                 </sitemapindex>\n",
                site.url("/maps/a.xml.gz"),
                site.url("/maps/b.xml")
            ),
        ),
    );
    // `/` links page 1 and page 10 (which no sitemap lists); page 3 links page 4.
    site.put("/", page(0, 0, &["/p1.html", "/p10.html"]));
    for n in 1..=10 {
        let links: &[&str] = if n == 3 { &["/p4.html"] } else { &[] };
        site.put(&format!("/p{n}.html"), page(n, 0, links));
    }
    site.put("/private/x.html", page(99, 0, &[]));
    let mut lastmod: BTreeMap<u32, String> = (0..=9).map(|n| (n, "2020-01-01".into())).collect();
    publish_sitemaps(&site, &lastmod);

    let config = dir.path().join("maps.xml");
    std::fs::write(&config, collection_xml("maps", site.addr, &site.url("/"))).unwrap();
    let admin = free_admin();
    let _node = standalone_node(&dir.path().join("node"), &config, &admin);

    // The first crawl: robots.txt, the index, both sitemaps, and every page they list or a
    // page links, each once; never the disallowed page or another host's.
    let first = quiet(&site, 15);
    each_once(&first);
    let mut want: BTreeSet<String> = [
        "/robots.txt",
        "/maps/index.xml",
        "/maps/a.xml.gz",
        "/maps/b.xml",
        "/",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    want.extend((1..=10).map(|n| format!("/p{n}.html")));
    assert_eq!(paths(&first), want, "the first crawl");

    // Pages 3 and 7 change, their lastmod after their fetch; page 9 has none.
    let later = crawlfleet_core::rup::format_date(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            + 3600,
    );
    for n in [3, 7] {
        let links: &[&str] = if n == 3 { &["/p4.html"] } else { &[] };
        site.put(&format!("/p{n}.html"), page(n, 1, links));
        lastmod.insert(n, later.clone());
    }
    publish_sitemaps(&site, &lastmod);
    refetch(&admin, "maps");
    let all = quiet(&site, first.len() + 7);
    let cycle = &all[first.len()..];
    each_once(cycle);
    let got: BTreeMap<String, (u16, bool)> = cycle
        .iter()
        .map(|h| (h.path.clone(), (h.status, h.conditional)))
        .collect();
    let want: BTreeMap<String, (u16, bool)> = [
        ("/maps/index.xml", (200, false)),
        ("/maps/a.xml.gz", (200, false)),
        ("/maps/b.xml", (200, false)),
        // Newer lastmod: fetched (conditionally, as every stored page), and changed.
        ("/p3.html", (200, true)),
        ("/p7.html", (200, true)),
        // No lastmod, and in no sitemap: refreshed as before, 304.
        ("/p9.html", (304, true)),
        ("/p10.html", (304, true)),
    ]
    .into_iter()
    .map(|(p, s)| (p.to_string(), s))
    .collect();
    assert_eq!(got, want, "the refresh cycle's requests");
}

/// What the node learned of a site's sitemaps survives a SIGKILL: after a restart, a refresh
/// cycle reads the sitemap again and fetches only the page whose `<lastmod>` moved, not every
/// stored page (docs/sitemaps.md, "Across a restart").
#[test]
fn sitemap_knowledge_survives_a_sigkill_of_the_node() {
    let dir = temp_dir("sitemaps-kill");
    let site = TestSite::start(Ipv4Addr::new(127, 93, 0, 2));
    site.put(
        "/robots.txt",
        Resource::ok(
            "text/plain",
            format!("User-agent: *\nSitemap: {}\n", site.url("/sitemap.xml")),
        ),
    );
    let pages: Vec<String> = (1..=6).map(|n| format!("/p{n}.html")).collect();
    let links: Vec<&str> = pages.iter().map(String::as_str).collect();
    site.put("/", page(0, 0, &links));
    for n in 1..=6 {
        site.put(&format!("/p{n}.html"), page(n, 0, &[]));
    }
    let publish = |lastmod: &BTreeMap<u32, String>| {
        let mut e = vec![(site.url("/"), Some(lastmod[&0].as_str()))];
        e.extend((1..=6).map(|n| (site.url(&format!("/p{n}.html")), Some(lastmod[&n].as_str()))));
        site.put("/sitemap.xml", Resource::ok("application/xml", urlset(&e)));
    };
    let mut lastmod: BTreeMap<u32, String> = (0..=6).map(|n| (n, "2020-01-01".into())).collect();
    publish(&lastmod);
    let config = dir.path().join("maps.xml");
    std::fs::write(&config, collection_xml("maps", site.addr, &site.url("/"))).unwrap();
    let admin = free_admin();
    let data = dir.path().join("node");
    let node = standalone_node(&data, &config, &admin);
    let first = quiet(&site, 9);
    each_once(&first);
    assert!(paths(&first).contains("/sitemap.xml"), "{first:?}");
    // Killed without a chance to write anything more (the crawl store is synced every 20 ms
    // and the crawl was quiet for a second).
    node.kill();

    // Page 4 changes, its lastmod after its fetch.
    let later = crawlfleet_core::rup::format_date(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            + 3600,
    );
    site.put("/p4.html", page(4, 1, &[]));
    lastmod.insert(4, later);
    publish(&lastmod);
    let _node = standalone_node(&data, &config, &admin);
    let before = site.hits().len();
    refetch(&admin, "maps");
    let all = quiet(&site, before + 2);
    let cycle = &all[before..];
    each_once(cycle);
    // robots.txt may be read again (its cache is the run's); no stored page but the changed
    // one is requested.
    let got: BTreeMap<String, (u16, bool)> = cycle
        .iter()
        .filter(|h| h.path != "/robots.txt")
        .map(|h| (h.path.clone(), (h.status, h.conditional)))
        .collect();
    let want: BTreeMap<String, (u16, bool)> = [
        ("/sitemap.xml".to_string(), (200, false)),
        ("/p4.html".to_string(), (200, true)),
    ]
    .into_iter()
    .collect();
    assert_eq!(got, want, "the refresh cycle after the restart");
}
