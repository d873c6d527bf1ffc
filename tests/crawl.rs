//! Crawls of the synthetic web by a whole cluster (`crawlfleet up`: a multinode scheduler, two
//! node schedulers, a duplicate server and its replica, each on its own sockets), checked
//! against what the generator knows and the server's access log.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::process::Command;

use crawlfleet_core::links::Operation;
use crawlfleet_core::synthweb::{SyntheticWeb, WebSpec};

use crate::util::{temp_dir, up_summary};

/// One line of the server's access log.
#[derive(Debug)]
struct Access {
    url: String,
    status: u16,
    start: f64,
    end: f64,
}

/// The crawl's requests in the access log: the RUP robot's registration with each host
/// (`/rupinfo.txt` and the CGI, docs/rup.md "The synthetic web"; see [`rup_requests`]) is not
/// the crawl's, and is left out.
fn read_log(path: &Path) -> Vec<Access> {
    let text = std::fs::read_to_string(path).expect("access log");
    text.lines()
        .filter(|l| !is_rup(l))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 6, "access log line {l:?}");
            Access {
                url: format!("http://{}{}", f[0], f[1]),
                status: f[2].parse().unwrap(),
                start: f[3].parse().unwrap(),
                end: f[4].parse().unwrap(),
            }
        })
        .collect()
}

fn is_rup(line: &str) -> bool {
    let path = line.split('\t').nth(1).unwrap_or("");
    path == "/rupinfo.txt" || path == "/rup-cgi"
}

/// How many RUP requests each host of the access log got.
fn rup_requests(path: &Path) -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(path).expect("access log");
    let mut n = BTreeMap::new();
    for l in text.lines().filter(|l| is_rup(l)) {
        *n.entry(l.split('\t').next().unwrap_or("").to_string())
            .or_default() += 1;
    }
    n
}

/// Runs `crawlfleet up` on a web of `spec` until idle; returns the web, its JSON summary and
/// the access log.
fn crawl(
    name: &str,
    spec: &str,
    base: Ipv4Addr,
    extra: &[&str],
) -> (SyntheticWeb, serde_json::Value, Vec<Access>, Links, Sprel) {
    let dir = temp_dir(name);
    let port = TcpListener::bind((base, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = dir.path().join("access.log");
    let port_s = port.to_string();
    let base_s = base.to_string();
    let log_s = log.display().to_string();
    let data_s = dir.path().join("data").display().to_string();
    let mut args = vec![
        "up",
        "--synthetic-web",
        spec,
        "--web-base",
        &base_s,
        "--web-port",
        &port_s,
        "--access-log",
        &log_s,
        "--data-dir",
        &data_s,
        "--nodes",
        "2",
        "--until-idle",
        "--json",
        "--timeout",
        "240",
    ];
    args.extend_from_slice(extra);
    // The summary is the last line (the start record comes first).
    let summary = up_summary(Command::new(env!("CARGO_BIN_EXE_crawlfleet")).args(&args));
    let spec: WebSpec = spec.parse().unwrap();
    let web = SyntheticWeb::generate(&spec, base, port);
    let accesses = read_log(&log);
    // The robot reads each host's rupinfo.txt and registers once, outside the crawl.
    for (host, n) in rup_requests(&log) {
        assert!(n <= 2, "{host}: {n} RUP requests");
    }
    let pages: Vec<String> = accesses.iter().map(|a| a.url.clone()).collect();
    let (links, sprel) = stored_links(&dir.path().join("data").join("linkstore"), &pages);
    let _ = std::fs::remove_dir_all(&dir);
    (web, summary, accesses, links, sprel)
}

/// (from, to) -> anchor text, as the link store has them.
type Links = BTreeMap<(String, String), String>;

/// What the link store's SPRel data says: URL -> its newest operation, and every
/// URLSCHCHANGE line (as text).
#[derive(Debug, Default)]
struct Sprel {
    ops: BTreeMap<String, Operation>,
    schchange_lines: Vec<String>,
    /// The site each page's `sitemap` line gave (MS-FSWASDR 2.2.1.3.1.7).
    sites: BTreeMap<String, String>,
}

/// The hyperlinks of `pages` the embedded link store received, read back through its index,
/// and the SPRel state of those pages.
fn stored_links(dir: &Path, pages: &[String]) -> (Links, Sprel) {
    use crawlfleet_core::links::{read_log, stored_logs, LinkIndex};
    let mut b = LinkIndex::builder();
    let mut sprel = Sprel::default();
    for (_, _, path) in stored_logs(dir).expect("link store logs") {
        b.add_log(&path).expect("readable link log");
        read_log(&path, |payload| {
            for line in payload.split(|&c| c == b'\n') {
                let line = String::from_utf8_lossy(line);
                if line.contains(" URLSCHCHANGE ") {
                    sprel.schchange_lines.push(line.into_owned());
                }
            }
        })
        .expect("readable link log");
    }
    let ix = b.finish();
    for p in pages {
        if let Some(op) = ix.sprel(p.as_bytes()).and_then(|e| e.op) {
            sprel.ops.insert(p.clone(), op);
        }
        if let Some(site) = ix.site_of(p.as_bytes()) {
            let site = String::from_utf8_lossy(site).into_owned();
            sprel.sites.insert(p.clone(), site);
        }
    }
    let mut out = Links::new();
    for from in pages {
        for l in ix.outlinks(from.as_bytes()) {
            let to = l.to_url.map(|u| String::from_utf8_lossy(u).into_owned());
            out.insert(
                (
                    from.clone(),
                    to.unwrap_or_else(|| l.to.as_str().to_string()),
                ),
                String::from_utf8_lossy(l.anchor).into_owned(),
            );
        }
    }
    (out, sprel)
}

fn count(v: &serde_json::Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

#[test]
fn a_cluster_crawls_exactly_the_allowed_reachable_web() {
    let (web, summary, log, links, sprel) =
        crawl("exact", "6:60", Ipv4Addr::new(127, 78, 0, 1), &[]);
    let exp = web.expected();
    // Every request the server saw, as a set and with no URL fetched twice (the nodes share
    // the work through the multinode scheduler's routing; nobody fetches another's site).
    let mut per_url: BTreeMap<&str, usize> = BTreeMap::new();
    for a in &log {
        *per_url.entry(a.url.as_str()).or_default() += 1;
    }
    let twice: Vec<_> = per_url.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "fetched more than once: {twice:?}");
    let fetched: BTreeSet<String> = per_url.keys().map(|u| u.to_string()).collect();
    let missing: Vec<_> = exp.fetched.difference(&fetched).collect();
    let extra: Vec<_> = fetched.difference(&exp.fetched).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}\nunexpected {extra:?}"
    );
    let forbidden: Vec<_> = exp.never.intersection(&fetched).collect();
    assert!(
        forbidden.is_empty(),
        "robots/excluded fetched: {forbidden:?}"
    );
    // Statuses as the generator says.
    for a in &log {
        if exp.not_found.contains(&a.url) {
            assert_eq!(a.status, 404, "{}", a.url);
        }
    }
    let c = &summary["collections"]["synthetic"];
    let robots = log
        .iter()
        .filter(|a| a.url.ends_with("/robots.txt"))
        .count() as u64;
    assert_eq!(count(c, "pages_fetched"), log.len() as u64 - robots);
    // Stored: every storable document, and one of each group of identical documents.
    let groups = exp.duplicate_groups.len() as u64;
    let dups: u64 = exp
        .duplicate_groups
        .iter()
        .map(|g| g.len() as u64 - 1)
        .sum();
    assert!(!exp.duplicate_groups.is_empty());
    assert_eq!(
        count(c, "documents_stored"),
        exp.stored.len() as u64 + groups
    );
    assert_eq!(count(c, "duplicates"), dups);
    assert_eq!(count(c, "errors"), 0);
    // Skip codes and the HTTP histogram.
    let codes = &c["skip_codes"];
    let img = exp.fetched.iter().filter(|u| u.ends_with(".png")).count() as u64;
    assert_eq!(count(codes, "mi"), img, "wrong MIME type: the png images");
    assert_eq!(count(codes, "tl"), 1, "the oversized page");
    // Every 404 the server sent: the missing pages and one host's robots.txt.
    let robots_404 = log
        .iter()
        .filter(|a| a.status == 404 && a.url.ends_with("/robots.txt"))
        .count() as u64;
    assert_eq!(
        count(&c["http_response"], "404"),
        exp.not_found.len() as u64 + robots_404
    );
    assert_eq!(
        count(c, "redirects"),
        (exp.redirects.len() + exp.meta_refresh.len()) as u64
    );
    assert!(count(codes, "ni") > 0 && count(codes, "nf") > 0);
    assert!(count(codes, "ro") > 0 && count(codes, "ur") > 0);
    // The link store holds the web's link graph: every link of every page whose links a
    // crawler follows, with its anchor text (MS-FSWASDR links lines, read back by CIDHASH).
    let mut graph = Links::new();
    for (from, to, anchor) in web.link_graph() {
        // A page linking one target twice (`<link>` and `<a>`) gives one link, with the anchor
        // text there is.
        let slot = graph.entry((from, to)).or_default();
        if slot.is_empty() {
            *slot = anchor;
        }
    }
    let missing: Vec<_> = graph
        .iter()
        .filter(|(k, _)| !links.contains_key(*k))
        .collect();
    let extra: Vec<_> = links.keys().filter(|k| !graph.contains_key(*k)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "link store vs the generator's graph: missing {missing:?}\nunexpected {extra:?}"
    );
    for (k, anchor) in &graph {
        assert_eq!(&links[k], anchor, "anchor of {k:?}");
    }
    // Each page whose links were stored has its site line: `http://host:port/`.
    for (from, _) in graph.keys() {
        let end = from
            .match_indices('/')
            .nth(2)
            .map_or(from.len(), |(i, _)| i);
        assert_eq!(
            sprel.sites.get(from),
            Some(&from[..=end].to_string()),
            "{from}"
        );
    }
    // SPRel (2.2.1.3.2.1): an ADD line for every fed document and for nothing else; the fed one
    // of each group of identical documents gets a URLSCHCHANGE line for each other member
    // (its equivalence class grew), unless that line came in the same second as its ADD.
    for u in &exp.stored {
        assert_eq!(sprel.ops.get(u), Some(&Operation::Add), "SPRel of {u}");
    }
    let mut fed = exp.stored.len();
    for g in &exp.duplicate_groups {
        let with: Vec<_> = g.iter().filter(|u| sprel.ops.contains_key(*u)).collect();
        assert_eq!(with.len(), 1, "SPRel lines for the group {g:?}: {with:?}");
        fed += 1;
        let owner = with[0];
        for m in g.iter().filter(|m| *m != owner) {
            let line = sprel
                .schchange_lines
                .iter()
                .find(|l| l.ends_with(&format!(" URLSCHCHANGE {m}")));
            assert!(
                line.is_some_and(|l| l.contains(&format!("{owner} "))),
                "URLSCHCHANGE of {owner} for its duplicate {m}: {:?}",
                sprel.schchange_lines
            );
        }
    }
    assert_eq!(sprel.ops.len(), fed, "SPRel entries: {:?}", sprel.ops);
}

#[test]
fn politeness_one_connection_per_site_and_the_delay_between_requests() {
    let delay = 0.15;
    let (web, _, log, _, _) = crawl(
        "polite",
        "3:12",
        Ipv4Addr::new(127, 79, 0, 1),
        &["--web-delay", "0.15", "--web-connections", "1"],
    );
    let mut by_host: BTreeMap<String, Vec<&Access>> = BTreeMap::new();
    for a in &log {
        let host = a.url.split('/').nth(2).unwrap().to_string();
        by_host.entry(host).or_default().push(a);
    }
    assert_eq!(by_host.len(), web.hosts().len());
    for (host, mut reqs) in by_host {
        reqs.sort_by(|a, b| a.start.total_cmp(&b.start));
        for w in reqs.windows(2) {
            // Never two at once; the next starts a delay after the previous one ended (with 20
            // ms of slack for clocks read on different threads).
            assert!(
                w[1].start >= w[0].end - 0.001,
                "{host}: overlapping requests {w:?}"
            );
            assert!(
                w[1].start - w[0].end >= delay - 0.02,
                "{host}: {} s between {} and {}",
                w[1].start - w[0].end,
                w[0].url,
                w[1].url
            );
        }
    }
}

#[test]
fn a_node_crawls_at_most_max_sites_sites_at_once() {
    // docs/collection-config.md: max_sites is the sites one node scheduler crawls at once; the
    // others wait parked, their entries held, and start as sites finish. Two nodes, one site
    // each at a time, one request a site: never more than two hosts with a request open (the
    // web's slow pages keep some open for 200-500 ms), and every page of the web in the end.
    let (web, _, log, _, _) = crawl(
        "max-sites",
        "8:40",
        Ipv4Addr::new(127, 79, 8, 1),
        &["--web-max-sites", "1", "--web-connections", "1"],
    );
    let exp = web.expected();
    let fetched: BTreeSet<String> = log.iter().map(|a| a.url.clone()).collect();
    let missing: Vec<_> = exp.fetched.difference(&fetched).collect();
    assert!(
        missing.is_empty(),
        "parked sites never crawled: {missing:?}"
    );
    let host = |a: &Access| a.url.split('/').nth(2).unwrap().to_string();
    for a in &log {
        let open: BTreeSet<String> = log
            .iter()
            .filter(|b| b.start <= a.start && a.start < b.end)
            .map(host)
            .collect();
        assert!(open.len() <= 2, "at {}: requests open to {open:?}", a.start);
    }
}

#[test]
fn refused_and_timed_out_fetches_are_counted_with_their_codes() {
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // Accepted by the kernel, never answered.
    let hang = TcpListener::bind("127.0.0.2:0").unwrap();
    let hang_addr = hang.local_addr().unwrap();
    let dir = temp_dir("failures");
    let cfg = dir.path().join("dead.xml");
    std::fs::write(
        &cfg,
        format!(
            r#"<CrawlerConfig><DomainSpecification name="dead">
  <attrib name="start_uris" type="list-string"><member>http://{dead}/</member><member>http://{hang_addr}/x.html</member></attrib>
  <attrib name="robots" type="boolean">no</attrib>
  <attrib name="fetch_timeout" type="real">1</attrib>
  <attrib name="delay" type="real">0</attrib>
</DomainSpecification></CrawlerConfig>"#
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let v = up_summary(
        Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
            .args(["up", "--config"])
            .arg(&cfg)
            .arg("--data-dir")
            .arg(&data)
            .args(["--until-idle", "--json", "--timeout", "120"]),
    );
    let c = &v["collections"]["dead"];
    assert_eq!(count(c, "pages_fetched"), 2, "{v}");
    assert_eq!(count(&c["skip_codes"], "co"), 1, "{v}");
    assert_eq!(count(&c["skip_codes"], "ti"), 1, "{v}");
    assert_eq!(count(c, "errors"), 2);
    assert_eq!(count(c, "documents_stored"), 0);
    drop(hang);
    let _ = std::fs::remove_dir_all(&dir);
}
