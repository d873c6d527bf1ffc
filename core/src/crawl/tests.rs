//! The engine's behaviour: robots first, politeness, redirects, meta robots, skip codes.

use std::sync::Arc;

use super::counters::{doc_skip, uri_skip};
use super::*;
use crate::config::{CollectionConfig, SubDomain};
use crate::msg::types::uri_flags;
use crate::msg::{CrawlQueueEntry, UriStructure};
use crate::sched::node::Ready;
use crate::sched::{record, start_uri_entry};

const C: &[u8] = b"c";
const SITE: &str = "h.example:8080";

fn engine(tune: impl FnOnce(&mut CollectionConfig)) -> CrawlEngine {
    let mut cfg = CollectionConfig::defaults("c");
    cfg.delay = 0.0;
    cfg.max_site_connections = 1;
    tune(&mut cfg);
    let mut e = CrawlEngine::new(EngineOptions {
        site_linger: 1.0,
        ..EngineOptions::default()
    });
    e.set_config(C, Arc::new(cfg));
    e
}

fn ready(uri: &str) -> Ready {
    Ready {
        collection: C.to_vec(),
        site: crate::routing::crawl_site(uri.as_bytes()).unwrap(),
        ip: "127.0.0.9".into(),
        record: record(&start_uri_entry(uri.as_bytes()), false),
        seq: 7,
        conditional: Vec::new(),
    }
}

fn ok(id: u64, status: u16, ctype: &str, body: &str) -> Outcome {
    Outcome {
        id,
        result: Ok(Fetched {
            status,
            headers: vec![("content-type".into(), ctype.as_bytes().to_vec())],
            body: body.as_bytes().to_vec(),
            truncated: false,
            checksum: None,
        }),
        elapsed: 0.01,
        // A head of 100 bytes before the body; a request of 80.
        net_read: 100 + body.len() as u64,
        net_written: 80,
    }
}

/// Answers robots.txt with `txt` and returns the next requests.
fn pass_robots(e: &mut CrawlEngine, txt: &str, now: f64) -> Vec<Request> {
    let (reqs, _) = e.poll(now);
    assert_eq!(reqs.len(), 1, "robots.txt alone first");
    assert_eq!(reqs[0].url, format!("http://{SITE}/robots.txt"));
    e.complete(ok(reqs[0].id, 200, "text/plain", txt), now);
    e.poll(now).0
}

/// The entries the actions queue, in order: redirect targets and a page's links.
fn entries(actions: &[Action]) -> Vec<CrawlQueueEntry<'_>> {
    let mut out = Vec::new();
    for a in actions {
        match a {
            Action::Queue { entry, .. } => out.push((**entry).clone()),
            Action::Links {
                from,
                links,
                queue,
                key,
                refresh_cycle,
                ..
            } => out.extend(
                super::link_entries(from, links, queue, key, *refresh_cycle).map(|(e, _)| e),
            ),
            _ => {}
        }
    }
    out
}

fn queued(actions: &[Action]) -> Vec<String> {
    entries(actions)
        .iter()
        .map(|e| String::from_utf8_lossy(&e.uri.uri).into())
        .collect()
}

#[test]
fn robots_first_then_disallowed_entries_are_skipped() {
    let mut e = engine(|_| {});
    e.push(ready(&format!("http://{SITE}/private/x")));
    e.push(ready(&format!("http://{SITE}/a")));
    let reqs = pass_robots(&mut e, "User-agent: *\nDisallow: /private/\n", 0.0);
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].url, format!("http://{SITE}/a"));
    assert_eq!(reqs[0].ip, "127.0.0.9");
    assert_eq!(reqs[0].port, 8080);
    let c = e.counters(C).unwrap();
    assert_eq!(c.uri_skip.get(uri_skip::ROBOTS), Some(&1));
    assert_eq!(c.processed, 1);
    // The skipped entry is finished; the fetched one when its outcome arrives.
    assert_eq!(e.take_done(), [(C.to_vec(), 7)]);
    // A fetched document's entry is finished by the node once the document is fed: its
    // sequence number travels in the Document.
    let actions = e.complete(ok(reqs[0].id, 200, "text/html", "x"), 0.0);
    assert!(
        matches!(&actions[..], [Action::Links { .. }, Action::Document(d)] if d.seq == 7),
        "{actions:?}"
    );
    assert!(e.take_done().is_empty());
    // Any other outcome finishes the entry in the engine.
    e.push(ready(&format!("http://{SITE}/b")));
    let r = e.poll(0.0).0;
    e.complete(ok(r[0].id, 500, "text/html", "x"), 0.0);
    assert_eq!(e.take_done(), [(C.to_vec(), 7)]);
}

#[test]
fn one_request_per_site_at_a_time_and_the_delay_between_them() {
    let mut e = engine(|c| c.delay = 2.0);
    for i in 0..3 {
        e.push(ready(&format!("http://{SITE}/p{i}")));
    }
    let first = pass_robots(&mut e, "", 0.0);
    assert!(first.is_empty(), "the delay also follows robots.txt");
    let r = e.poll(2.0).0;
    assert_eq!(r.len(), 1, "max_site_connections 1");
    assert!(e.poll(3.0).0.is_empty(), "still in flight");
    e.complete(ok(r[0].id, 200, "text/html", "<p>x</p>"), 3.0);
    assert!(e.poll(4.9).0.is_empty(), "delay measured from the end");
    assert_eq!(e.poll(5.0).0.len(), 1);
}

#[test]
fn more_connections_per_site_when_configured() {
    let mut e = engine(|c| {
        c.max_site_connections = 3;
        c.robots = false;
    });
    for i in 0..5 {
        e.push(ready(&format!("http://{SITE}/p{i}")));
    }
    assert_eq!(e.poll(0.0).0.len(), 3);
}

#[test]
fn links_are_queued_with_referrer_and_rules_applied() {
    let mut e = engine(|c| {
        c.robots = false;
        c.exclude_uris = crate::config::RuleSet::parse(
            crate::config::RuleTarget::Uri,
            &["prefix:http://h.example:8080/excluded/"],
        )
        .unwrap();
    });
    e.push(ready(&format!("http://{SITE}/")));
    let r = e.poll(0.0).0;
    let html = r#"<a href="/a">a</a><a href="/excluded/x">x</a><a href="ftp://h.example/f">f</a>
        <a href="http://other.example/">o</a>"#;
    let acts = e.complete(ok(r[0].id, 200, "text/html; charset=utf-8", html), 0.1);
    assert_eq!(
        queued(&acts),
        ["http://h.example:8080/a", "http://other.example/"]
    );
    let queued_entries = entries(&acts);
    let entry = &queued_entries[0];
    assert_eq!(&entry.referrer.uri[..], b"http://h.example:8080/");
    let links = acts.iter().find_map(|a| match a {
        Action::Links { from, links, .. } => Some((from, links)),
        _ => None,
    });
    let (from, links) = links.expect("the page's links for the link store");
    assert_eq!(from, b"http://h.example:8080/");
    assert_eq!(
        links,
        &[
            PageLink {
                url: "http://h.example:8080/a".into(),
                anchor: "a".into(),
                intra: true
            },
            PageLink {
                url: "http://h.example:8080/excluded/x".into(),
                anchor: "x".into(),
                intra: true
            },
            PageLink {
                url: "ftp://h.example/f".into(),
                anchor: "f".into(),
                intra: false
            },
            PageLink {
                url: "http://other.example/".into(),
                anchor: "o".into(),
                intra: false
            }
        ]
    );
    let c = e.counters(C).unwrap();
    assert_eq!(c.uri_skip.get(uri_skip::URI), Some(&1));
    assert_eq!(c.uri_skip.get(uri_skip::SCHEME), Some(&1));
    assert_eq!((c.local, c.local_fwd), (1, 1));
    let doc = acts.iter().find_map(|a| match a {
        Action::Document(d) => Some(d),
        _ => None,
    });
    let doc = doc.expect("the page is a document");
    use md5::Digest;
    assert_eq!(doc.checksum.0, <[u8; 16]>::from(md5::Md5::digest(html)));
}

/// crawlmode.fwdlinks off (docs/collection-config.md): links to other sites are not followed
/// (URI skip code `do`, MS-FSCADM 2.2.3.1), links within the page's site are; the link graph
/// keeps both. A loop of path segments past max_uri_recursion is skipped as `ur`.
#[test]
fn without_fwdlinks_only_the_pages_own_site_is_followed() {
    let page = r#"<a href="/a">a</a><a href="http://other.example/">o</a>
        <a href="http://h.example:8080/b">b</a><a href="http://h.example:9090/c">c</a>
        <a href="/l/l/l/l/l/l/x">loop</a>"#;
    for follow in [true, false] {
        let mut e = engine(|c| {
            c.robots = false;
            c.forward_links = follow;
        });
        e.push(ready(&format!("http://{SITE}/")));
        let r = e.poll(0.0).0;
        let acts = e.complete(ok(r[0].id, 200, "text/html", page), 0.1);
        let mut want = vec!["http://h.example:8080/a", "http://h.example:8080/b"];
        if follow {
            want.insert(1, "http://other.example/");
            want.push("http://h.example:9090/c");
        }
        assert_eq!(queued(&acts), want, "fwdlinks {follow}");
        let links = acts.iter().find_map(|a| match a {
            Action::Links { links, .. } => Some(links.len()),
            _ => None,
        });
        assert_eq!(links, Some(5), "the link graph has every link");
        let c = e.counters(C).unwrap();
        let skipped = if follow { None } else { Some(&2) };
        assert_eq!(c.uri_skip.get(uri_skip::DOMAIN), skipped);
        assert_eq!(c.uri_skip.get(uri_skip::URI), Some(&1));
    }
}

/// A redirect to another site is followed with fwdlinks on, or with it off and fwdredirects
/// on; with both off it is skipped (`do`). A redirect within the site always is.
#[test]
fn redirects_to_other_sites_follow_fwdlinks_or_fwdredirects() {
    for (links, redirects, followed) in [
        (true, false, true),
        (false, true, true),
        (false, false, false),
    ] {
        let mut e = engine(|c| {
            c.robots = false;
            c.forward_links = links;
            c.forward_redirects = redirects;
        });
        for (path, to) in [("/away", "http://other.example/x"), ("/here", "/y")] {
            e.push(ready(&format!("http://{SITE}{path}")));
            let r = e.poll(0.0).0;
            let mut o = ok(r[0].id, 302, "text/html", "");
            if let Ok(f) = &mut o.result {
                f.headers.push(("location".into(), to.as_bytes().to_vec()));
            }
            let acts = e.complete(o, 0.0);
            let within = path == "/here";
            assert_eq!(
                queued(&acts).len(),
                usize::from(within || followed),
                "fwdlinks {links} fwdredirects {redirects}: {path}"
            );
        }
        let c = e.counters(C).unwrap();
        let skipped = (!followed).then_some(&1);
        assert_eq!(c.uri_skip.get(uri_skip::DOMAIN), skipped);
    }
}

/// variable_delay (docs/collection-config.md): the period covering the node's day and hour
/// gives the delay between requests; a period of `suspend` starts no request at all
/// (MS-FSCADM 2.2.3.3 status 8). Periods covering every hour of the week make the test
/// independent of the clock.
#[test]
fn variable_delay_periods_set_the_delay_or_suspend_the_crawl() {
    use crate::config::VariableDelay;
    let always = |delay| VariableDelay {
        first_day: 0,
        last_day: 6,
        from_hour: 0,
        to_hour: 24,
        delay,
    };
    let mut e = engine(|c| {
        c.robots = false;
        c.variable_delay = vec![always(Some(0.5))];
    });
    e.push(ready(&format!("http://{SITE}/a")));
    e.push(ready(&format!("http://{SITE}/b")));
    let r = e.poll(0.0).0;
    assert_eq!(r.len(), 1);
    e.complete(ok(r[0].id, 404, "text/html", ""), 0.1);
    assert!(
        e.poll(0.3).0.is_empty(),
        "the period's delay, not the collection's 0"
    );
    assert_eq!(e.poll(0.7).0.len(), 1);
    let mut e = engine(|c| {
        c.robots = false;
        c.variable_delay = vec![always(None)];
    });
    e.push(ready(&format!("http://{SITE}/a")));
    for t in [0.0, 1.0, 61.0, 200.0] {
        assert!(e.poll(t).0.is_empty(), "suspended at {t}");
    }
}

/// A SubDomain of the collection (docs/collection-config.md, "SubDomain"), for the URIs under
/// `prefix`, with its own delay and depth limit.
fn subdomain(prefix: &str, delay: Option<f64>, depth: Option<Option<u32>>) -> SubDomain {
    use crate::config::{RuleSet, RuleTarget};
    SubDomain {
        name: "part".into(),
        include_domains: RuleSet::empty(RuleTarget::Domain),
        exclude_domains: RuleSet::empty(RuleTarget::Domain),
        include_uris: RuleSet::parse(RuleTarget::Uri, &[&format!("prefix:{prefix}")]).unwrap(),
        exclude_uris: RuleSet::empty(RuleTarget::Uri),
        start_uris: Vec::new(),
        start_uri_files: Vec::new(),
        delay,
        refresh: None,
        max_depth: depth,
    }
}

/// A SubDomain's delay applies after a request to one of its URIs; the collection's after
/// the others.
#[test]
fn a_subdomains_delay_follows_a_request_to_its_uris() {
    let mut e = engine(|c| {
        c.robots = false;
        c.subdomains = vec![subdomain(&format!("http://{SITE}/slow/"), Some(0.5), None)];
    });
    for p in ["/slow/a", "/fast", "/next"] {
        e.push(ready(&format!("http://{SITE}{p}")));
    }
    let r = e.poll(0.0).0;
    assert!(r[0].url.ends_with("/slow/a"));
    e.complete(ok(r[0].id, 404, "text/html", ""), 0.1);
    assert!(e.poll(0.3).0.is_empty(), "the SubDomain's 0.5 s");
    let r = e.poll(0.7).0;
    assert!(r[0].url.ends_with("/fast"));
    e.complete(ok(r[0].id, 404, "text/html", ""), 0.8);
    assert_eq!(e.poll(0.8).0.len(), 1, "the collection's delay, 0");
}

/// A SubDomain's crawlmode.mode (DEPTH:n) limits the depth of the links into it, the
/// collection's mode the others.
#[test]
fn a_subdomains_depth_limits_the_links_into_it() {
    let mut e = engine(|c| {
        c.robots = false;
        c.subdomains = vec![subdomain(
            &format!("http://{SITE}/shallow/"),
            None,
            Some(Some(0)),
        )];
    });
    e.push(ready(&format!("http://{SITE}/")));
    let r = e.poll(0.0).0;
    let page = r#"<a href="/shallow/x">x</a><a href="/deep/y">y</a>"#;
    let acts = e.complete(ok(r[0].id, 200, "text/html", page), 0.1);
    assert_eq!(queued(&acts), ["http://h.example:8080/deep/y"]);
    assert_eq!(
        e.counters(C).unwrap().uri_skip.get(uri_skip::DEPTH),
        Some(&1)
    );
    // The depth is carried so the SubDomain's limit holds further down.
    let depth = entries(&acts)[0]
        .extra
        .iter()
        .find(|(k, _)| k.as_bytes() == Some(super::types::DEPTH_KEY))
        .and_then(|(_, v)| v.as_bytes().map(<[u8]>::to_vec));
    assert_eq!(depth.as_deref(), Some(&b"1"[..]));
}

/// max_inter_docs (docs/collection-config.md): a site that had that many documents gives its
/// place to a site waiting for one, and waits its turn again; with no site waiting it goes on.
#[test]
fn max_inter_docs_takes_turns_between_sites_waiting_for_room() {
    let mut cfg = CollectionConfig::defaults("c");
    (cfg.delay, cfg.robots, cfg.max_site_connections) = (0.0, false, 1);
    cfg.max_inter_docs = Some(2);
    let mut e = CrawlEngine::new(EngineOptions {
        site_linger: 1.0,
        max_in_flight: 1,
        ..EngineOptions::default()
    });
    e.set_config(C, Arc::new(cfg));
    for host in ["a.example", "b.example"] {
        for p in 0..4 {
            let mut r = ready(&format!("http://{host}/{p}"));
            r.ip = format!("127.0.2.{}", host.as_bytes()[0]);
            e.push(r);
        }
    }
    let mut order = String::new();
    let mut t = 0.0;
    while order.len() < 8 {
        let r = e.poll(t).0;
        assert!(r.len() <= 1, "one request at a time");
        for req in r {
            order.push(char::from(req.url.as_bytes()[7]));
            e.complete(ok(req.id, 404, "text/html", ""), t);
        }
        t += 0.01;
        assert!(t < 5.0, "stalled after {order}");
    }
    assert_eq!(order, "aabbaabb");
    // One site alone keeps its place past max_inter_docs.
    let mut e = engine(|c| {
        c.robots = false;
        c.max_inter_docs = Some(1);
    });
    for p in 0..3 {
        e.push(ready(&format!("http://{SITE}/{p}")));
    }
    for p in 0..3 {
        let r = e.poll(0.0).0;
        assert_eq!(r.len(), 1, "request {p}");
        e.complete(ok(r[0].id, 404, "text/html", ""), 0.0);
    }
}

/// use_http_1_1 off asks the fetcher for HTTP/1.0 requests (one a connection).
#[test]
fn use_http_1_1_off_makes_http10_requests() {
    for on in [true, false] {
        let mut e = engine(|c| {
            c.robots = false;
            c.use_http_1_1 = on;
        });
        e.push(ready(&format!("http://{SITE}/")));
        let r = e.poll(0.0).0;
        assert_eq!(r[0].http10, !on);
    }
}

#[test]
fn redirects_carry_the_trail_and_flags() {
    let mut e = engine(|c| c.robots = false);
    e.push(ready(&format!("http://{SITE}/r1")));
    let r = e.poll(0.0).0;
    let mut o = ok(r[0].id, 301, "text/html", "");
    if let Ok(f) = &mut o.result {
        f.headers.push(("location".into(), b"/r2".to_vec()));
    }
    let acts = e.complete(o, 0.0);
    assert_eq!(queued(&acts), ["http://h.example:8080/r2"]);
    let Action::Queue { entry, .. } = &acts[0] else {
        unreachable!()
    };
    assert_eq!(entry.redirects.len(), 1);
    assert_eq!(&entry.redirects[0].from[..], b"http://h.example:8080/r1");
    assert_eq!(entry.redirects[0].kind, uri_flags::URIF_REDIRECT_301);
    assert_ne!(entry.uri_flags & uri_flags::URIF_REDIRECT_301, 0);
    // Second hop: 302, the trail grows.
    e.push(Ready {
        record: record(entry, false),
        ..ready(&format!("http://{SITE}/r2"))
    });
    let r = e.poll(0.0).0;
    let mut o = ok(r[0].id, 302, "text/html", "");
    if let Ok(f) = &mut o.result {
        f.headers
            .push(("location".into(), b"http://h.example:8080/end".to_vec()));
    }
    let acts = e.complete(o, 0.0);
    let Action::Queue { entry, .. } = &acts[0] else {
        unreachable!()
    };
    assert_eq!(entry.redirects.len(), 2);
    assert_ne!(entry.uri_flags & uri_flags::URIF_REDIRECT_302, 0);
    assert_eq!(entry.uri_flags & uri_flags::URIF_REDIRECT_301, 0);
    // A redirect without Location.
    e.push(ready(&format!("http://{SITE}/r3")));
    let r = e.poll(0.0).0;
    assert!(e
        .complete(ok(r[0].id, 302, "text/html", ""), 0.0)
        .is_empty());
    let c = e.counters(C).unwrap();
    assert_eq!(c.doc_skip.get(doc_skip::NO_REDIRECT_TARGET), Some(&1));
    assert_eq!(c.http_response.get(&302), Some(&2));
}

#[test]
fn meta_robots_and_meta_refresh() {
    let mut e = engine(|c| c.robots = false);
    e.push(ready(&format!("http://{SITE}/ni")));
    let r = e.poll(0.0).0;
    let acts = e.complete(
        ok(
            r[0].id,
            200,
            "text/html",
            r#"<meta name="robots" content="noindex"><a href="/next">n</a>"#,
        ),
        0.0,
    );
    assert_eq!(queued(&acts), ["http://h.example:8080/next"]);
    assert!(!acts.iter().any(|a| matches!(a, Action::Document(_))));
    e.push(ready(&format!("http://{SITE}/nf")));
    let r = e.poll(0.0).0;
    let acts = e.complete(
        ok(
            r[0].id,
            200,
            "text/html",
            r#"<meta name="robots" content="nofollow"><meta http-equiv="refresh" content="0; url=/moved"><a href="/next">n</a>"#,
        ),
        0.0,
    );
    assert_eq!(queued(&acts), ["http://h.example:8080/moved"]);
    let Action::Queue { entry, .. } = &acts[0] else {
        unreachable!()
    };
    assert_ne!(entry.uri_flags & uri_flags::URIF_META_REFRESH, 0);
    assert!(
        !acts.iter().any(|a| matches!(a, Action::Document(_))),
        "a meta refresh page is a redirect, not a document"
    );
    e.push(ready(&format!("http://{SITE}/nf2")));
    let r = e.poll(0.0).0;
    let acts = e.complete(
        ok(
            r[0].id,
            200,
            "text/html",
            r#"<meta name="robots" content="nofollow"><a href="/next">n</a>"#,
        ),
        0.0,
    );
    let Some(Action::Document(d)) = acts.last() else {
        panic!("a nofollow page is still a document")
    };
    assert_ne!(d.uri_flags & uri_flags::URIF_META_NOFOLLOW, 0);
    let c = e.counters(C).unwrap();
    assert_eq!(c.doc_skip.get(doc_skip::NOINDEX), Some(&1));
    assert_eq!(c.uri_skip.get(uri_skip::NOFOLLOW), Some(&2));
}

#[test]
fn failures_and_refused_documents_get_their_codes() {
    let mut e = engine(|c| {
        c.robots = false;
        c.max_site_connections = 10;
    });
    for p in ["big", "png", "empty", "refused", "slow", "cto", "garbage"] {
        e.push(ready(&format!("http://{SITE}/{p}")));
    }
    let r = e.poll(0.0).0;
    assert_eq!(r.len(), 7);
    let mut big = ok(r[0].id, 200, "text/html", "x");
    if let Ok(f) = &mut big.result {
        f.truncated = true;
    }
    e.complete(big, 0.0);
    e.complete(ok(r[1].id, 200, "image/png", "\u{89}PNG"), 0.0);
    e.complete(ok(r[2].id, 200, "text/html", ""), 0.0);
    for (i, f) in [
        (3, Failure::Refused),
        (4, Failure::Timeout),
        (5, Failure::ConnectTimeout),
        (6, Failure::Protocol("bad status line".into())),
    ] {
        let acts = e.complete(
            Outcome {
                id: r[i].id,
                result: Err(f),
                elapsed: 1.0,
                net_read: 0,
                net_written: 50,
            },
            0.0,
        );
        assert!(acts.is_empty());
    }
    let c = e.counters(C).unwrap();
    for code in [
        doc_skip::TOO_LARGE,
        doc_skip::MIME,
        doc_skip::EMPTY,
        doc_skip::CONNECT,
        doc_skip::TIMEOUT,
        doc_skip::CONNECT_TIMEOUT,
        doc_skip::HEADER,
    ] {
        assert_eq!(c.doc_skip.get(code), Some(&1), "{code}");
    }
    assert_eq!(c.errors(), 4);
    assert_eq!(c.downloaded, 3);
}

#[test]
fn idle_sites_are_released_after_the_linger() {
    let mut e = engine(|c| c.robots = false);
    e.push(ready(&format!("http://{SITE}/")));
    let r = e.poll(0.0).0;
    e.complete(ok(r[0].id, 404, "text/html", "gone"), 0.5);
    assert!(e.poll(0.6).1.is_empty());
    let (_, done) = e.poll(1.7);
    assert_eq!(
        done,
        [Action::SiteDone {
            collection: C.to_vec(),
            site: SITE.into()
        }]
    );
    assert!(e.is_idle());
}

/// A site lingering after its last request does no more work: the engine is quiet (what `up`
/// waits for to end a crawl) before it is idle (the site released).
#[test]
fn a_lingering_site_is_quiet_before_it_is_released() {
    let mut e = engine(|c| c.robots = false);
    e.push(ready(&format!("http://{SITE}/")));
    assert!(!e.is_quiet(), "an entry held");
    let r = e.poll(0.0).0;
    assert!(!e.is_quiet(), "a request open");
    e.complete(ok(r[0].id, 404, "text/html", "gone"), 0.5);
    assert!(!e.is_quiet(), "the entry's end not taken by the node yet");
    assert_eq!(e.take_done().len(), 1);
    assert!(e.is_quiet());
    assert!(!e.is_idle(), "the site lingers");
    assert!(e.poll(0.6).1.is_empty());
    assert!(e.is_quiet());
    e.push(ready(&format!("http://{SITE}/again")));
    assert!(!e.is_quiet(), "a lingering site given an entry");
    let r = e.poll(0.7).0;
    e.complete(ok(r[0].id, 404, "text/html", "gone"), 0.8);
    e.take_done();
    assert!(e.poll(0.9).1.is_empty());
    let (_, done) = e.poll(2.0);
    assert_eq!(done.len(), 1);
    assert!(e.is_quiet() && e.is_idle());
}

#[test]
fn depth_limit_counts_levels_from_the_start_uri() {
    let mut e = engine(|c| {
        c.robots = false;
        c.max_depth = Some(1);
    });
    e.push(ready(&format!("http://{SITE}/")));
    let r = e.poll(0.0).0;
    let acts = e.complete(ok(r[0].id, 200, "text/html", r#"<a href="/d1">"#), 0.0);
    let queued_entries = entries(&acts);
    let entry = &queued_entries[0];
    e.push(Ready {
        record: record(entry, false),
        ..ready(&format!("http://{SITE}/d1"))
    });
    let r = e.poll(0.0).0;
    let acts = e.complete(ok(r[0].id, 200, "text/html", r#"<a href="/d2">"#), 0.0);
    assert!(queued(&acts).is_empty());
    assert_eq!(
        e.counters(C).unwrap().uri_skip.get(uri_skip::DEPTH),
        Some(&1)
    );
}

#[test]
fn sites_of_one_address_share_its_connection_limit() {
    let mut e = engine(|c| {
        c.robots = false;
        c.max_site_connections = 2;
        c.max_ip_connections = 3;
    });
    // Two virtual hosts on one address, two entries each.
    for host in ["a.example", "b.example"] {
        for i in 0..2 {
            e.push(ready(&format!("http://{host}/p{i}")));
        }
    }
    let first = e.poll(0.0).0;
    assert_eq!(first.len(), 3, "3 open to 127.0.0.9 at most");
    assert!(e.poll(0.5).0.is_empty());
    // One ends: the site waiting for the address gets its turn.
    e.complete(ok(first[0].id, 200, "text/html", "x"), 1.0);
    let next = e.poll(1.0).0;
    assert_eq!(next.len(), 1);
    let mut urls: Vec<_> = first.iter().chain(&next).map(|r| r.url.clone()).collect();
    urls.sort();
    urls.dedup();
    assert_eq!(urls.len(), 4, "every entry fetched once");
}

#[test]
fn an_excluded_header_line_skips_the_document_with_hx() {
    let mut e = engine(|c| {
        c.robots = false;
        c.exclude_headers = crate::config::RuleSet::parse(
            crate::config::RuleTarget::Header,
            &[
                "x-robots-tag: noarchive",
                "regexp:content-type: application/x-.*",
            ],
        )
        .unwrap();
    });
    e.push(ready(&format!("http://{SITE}/a")));
    e.push(ready(&format!("http://{SITE}/b")));
    let r = e.poll(0.0).0;
    let mut hit = ok(r[0].id, 200, "text/html", "<p>a</p>");
    if let Ok(f) = &mut hit.result {
        f.headers
            .push(("x-robots-tag".into(), b"NoArchive, nosnippet".to_vec()));
    }
    let actions = e.complete(hit, 0.0);
    assert!(!actions.iter().any(|a| matches!(a, Action::Document(_))));
    let r = e.poll(0.0).0;
    let actions = e.complete(ok(r[0].id, 200, "text/html", "<p>b</p>"), 0.0);
    assert!(actions.iter().any(|a| matches!(a, Action::Document(_))));
    let c = e.counters(C).unwrap();
    assert_eq!(c.doc_skip.get(doc_skip::HEADER_EXCLUDED), Some(&1));
}

#[test]
fn ignore_netloc_bypasses_host_rules_but_not_uri_rules() {
    let mut e = engine(|c| {
        c.robots = false;
        c.max_site_connections = 3;
        c.exclude_domains =
            crate::config::RuleSet::parse(crate::config::RuleTarget::Domain, &["h.example"])
                .unwrap();
        c.exclude_uris = crate::config::RuleSet::parse(
            crate::config::RuleTarget::Uri,
            &[format!("http://{SITE}/no")],
        )
        .unwrap();
    });
    let flagged = |uri: &str| {
        let mut entry = start_uri_entry(uri.as_bytes());
        entry.uri_flags |= uri_flags::URIF_IGNORE_NETLOC;
        Ready {
            record: record(&entry, false),
            ..ready(uri)
        }
    };
    e.push(ready(&format!("http://{SITE}/plain")));
    e.push(flagged(&format!("http://{SITE}/yes")));
    e.push(flagged(&format!("http://{SITE}/no")));
    let r = e.poll(0.0).0;
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].url, format!("http://{SITE}/yes"));
    let c = e.counters(C).unwrap();
    assert_eq!(c.uri_skip.get(uri_skip::DOMAIN), Some(&1));
    assert_eq!(c.uri_skip.get(uri_skip::URI), Some(&1));
}

/// MS-FSCADM 2.2.4.9 / 2.2.5: ReadNet and WriteNet count every byte the fetches read and wrote
/// (robots.txt and failures included), DocSize and DLTime one sample per document / download.
#[test]
fn network_bytes_and_per_document_samples() {
    let mut e = engine(|_| {});
    e.push(ready(&format!("http://{SITE}/a")));
    e.push(ready(&format!("http://{SITE}/b")));
    let reqs = pass_robots(&mut e, "", 0.0);
    e.complete(ok(reqs[0].id, 200, "text/plain", "12345"), 0.0);
    let r = e.poll(10.0).0;
    e.complete(ok(r[0].id, 200, "text/plain", "1234567890"), 10.0);
    let c = e.counters_mut(C);
    // robots.txt (empty body), then two documents: heads of 100 bytes, requests of 80.
    assert_eq!(c.read_net, 100 + 105 + 110);
    assert_eq!(c.write_net, 3 * 80);
    assert_eq!((c.doc_size, c.docs, c.doc_size_max), (15, 2, 10));
    assert_eq!(c.downloads, 3);
    let x = c.take_extremes();
    assert_eq!(x.doc_size, Some((5, 10)));
    assert!(c.take_extremes().doc_size.is_none());
    // A collection's counters come at its first use and stay (looked up by the borrowed name).
    assert!(e.counters(b"other").is_none());
    e.counters_mut(b"other").add(Count::Processed, 2);
    e.counters_mut(b"other").add(Count::Processed, 3);
    assert_eq!(e.counters(b"other").map(|c| c.processed), Some(5));
    assert_eq!(e.counters(C).map(|c| c.downloads), Some(3));
}

#[test]
fn sites_beyond_the_engines_room_wait_parked_until_one_is_released() {
    // Room for 4 requests, 2 per site: two sites crawl at once, the third waits.
    let mut cfg = CollectionConfig::defaults("c");
    (cfg.delay, cfg.robots, cfg.max_site_connections) = (0.0, false, 2);
    let mut e = CrawlEngine::new(EngineOptions {
        site_linger: 1.0,
        max_in_flight: 4,
        ..EngineOptions::default()
    });
    e.set_config(C, Arc::new(cfg));
    for host in ["a.example", "b.example", "c.example"] {
        let mut r = ready(&format!("http://{host}/"));
        r.ip = format!("127.0.0.{}", host.len() + host.as_bytes()[0] as usize % 7);
        e.push(r);
    }
    let first = e.poll(0.0).0;
    let hosts = |reqs: &[Request]| -> Vec<String> {
        let mut h: Vec<_> = reqs.iter().map(|r| r.url[7..16].to_string()).collect();
        h.sort();
        h
    };
    assert_eq!(hosts(&first), ["a.example", "b.example"]);
    for r in &first {
        e.complete(ok(r.id, 404, "text/html", "gone"), 0.1);
    }
    // Idle, the two sites linger without their room: c.example, parked, starts at 0.5 s
    // (woken when they were seen idle, run at the next poll), not after their 1 s linger.
    let mut started = e.poll(0.5).0;
    started.extend(e.poll(0.5).0);
    assert_eq!(hosts(&started), ["c.example"]);
    // The two lingering sites are released after their linger, as before.
    let (_, done) = e.poll(2.0);
    assert_eq!(done.len(), 2);
}

/// `max_sites` (docs/collection-config.md: the sites one node scheduler crawls at once) caps
/// the sites of a collection started together, whatever the engine's room; another
/// collection's sites are not held back by it.
#[test]
fn a_collection_crawls_at_most_max_sites_sites_at_once() {
    let mut capped = CollectionConfig::defaults("c");
    (capped.delay, capped.robots, capped.max_site_connections) = (0.0, false, 1);
    capped.max_sites = 2;
    let mut other = capped.clone();
    other.max_sites = 128;
    let mut e = CrawlEngine::new(EngineOptions {
        site_linger: 1.0,
        max_in_flight: 512,
        ..EngineOptions::default()
    });
    e.set_config(C, Arc::new(capped));
    e.set_config(b"d", Arc::new(other));
    let push = |e: &mut CrawlEngine, collection: &[u8], host: &str, n: u8| {
        let mut r = ready(&format!("http://{host}/"));
        r.collection = collection.to_vec();
        r.ip = format!("127.0.1.{n}");
        e.push(r);
    };
    for (n, host) in ["a.example", "b.example", "c.example", "d.example"]
        .iter()
        .enumerate()
    {
        push(&mut e, C, host, n as u8);
    }
    for (n, host) in ["x.example", "y.example", "z.example"].iter().enumerate() {
        push(&mut e, b"d", host, 10 + n as u8);
    }
    let hosts = |reqs: &[Request]| -> Vec<String> {
        let mut h: Vec<_> = reqs.iter().map(|r| r.url[7..16].to_string()).collect();
        h.sort();
        h
    };
    let first = e.poll(0.0).0;
    assert_eq!(
        hosts(&first),
        [
            "a.example",
            "b.example",
            "x.example",
            "y.example",
            "z.example"
        ],
        "two sites of the capped collection, every site of the other"
    );
    assert_eq!(e.sites_started(C), 2);
    // A capped site done and idle frees its place: one parked site of the collection starts.
    let a = first.iter().find(|r| r.url.contains("a.example")).unwrap();
    e.complete(ok(a.id, 404, "text/html", "gone"), 0.1);
    let mut next = e.poll(0.2).0;
    next.extend(e.poll(0.2).0);
    assert_eq!(hosts(&next), ["c.example"]);
    assert_eq!(e.sites_started(C), 2);
    // The rest, one place at a time; every site of the collection is crawled in the end.
    let b = first.iter().find(|r| r.url.contains("b.example")).unwrap();
    e.complete(ok(b.id, 404, "text/html", "gone"), 0.3);
    let mut last = e.poll(0.4).0;
    last.extend(e.poll(0.4).0);
    assert_eq!(hosts(&last), ["d.example"]);
}

/// A link to the page's own site is queued with its crawl site (the node scheduler routes it
/// without finding the site again); a link elsewhere and a redirect target without.
#[test]
fn links_to_the_pages_own_site_carry_it() {
    let mut e = engine(|_| {});
    e.push(ready(&format!("http://{SITE}/a")));
    let reqs = pass_robots(&mut e, "", 0.0);
    let page = "<a href=\"/b\">b</a><a href=\"http://H.example:8080/c\">c</a>\
                <a href=\"http://other.example/d\">d</a>";
    let actions = e.complete(ok(reqs[0].id, 200, "text/html", page), 0.0);
    let mut sites: Vec<(String, Option<String>)> = Vec::new();
    for a in &actions {
        if let Action::Links {
            from,
            links,
            queue,
            key,
            refresh_cycle,
            ..
        } = a
        {
            for (entry, site) in super::link_entries(from, links, queue, key, *refresh_cycle) {
                sites.push((
                    String::from_utf8_lossy(&entry.uri.uri).into_owned(),
                    site.map(|k| k.1.clone()),
                ));
            }
        }
    }
    let own = Some(SITE.to_string());
    assert_eq!(
        sites,
        [
            (format!("http://{SITE}/b"), own.clone()),
            (format!("http://{SITE}/c"), own),
            ("http://other.example/d".to_string(), None),
        ]
    );
    for (uri, site) in &sites {
        if let Some(s) = site {
            assert_eq!(crate::routing::crawl_site(uri.as_bytes()).as_ref(), Some(s));
        }
    }
}

/// A page's links are queued as entries borrowing the action's URLs; their queue records are
/// byte for byte those of the owned entries the engine built before (URI, referrer, refresh
/// cycle, and the depth when the collection limits it).
#[test]
fn link_entries_are_the_entries_built_owned() {
    for max_depth in [None, Some(5)] {
        let mut e = engine(|c| {
            c.robots = false;
            c.max_depth = max_depth;
        });
        e.push(ready(&format!("http://{SITE}/")));
        let r = e.poll(0.0).0;
        let page = r#"<a href="/a">a</a><a href="/b?q=1#f">b</a><a href="http://o.example/">o</a>
            <a href="/a">again</a>"#;
        let acts = e.complete(ok(r[0].id, 200, "text/html", page), 0.0);
        let got = entries(&acts);
        assert_eq!(got.len(), 3, "{acts:?}");
        let Some(Action::Links {
            links,
            refresh_cycle,
            ..
        }) = acts.iter().find(|a| matches!(a, Action::Links { .. }))
        else {
            unreachable!()
        };
        for (entry, link) in got.iter().zip(links) {
            let mut owned = CrawlQueueEntry::new(UriStructure::unparsed(std::borrow::Cow::Owned(
                link.url.as_bytes().to_vec(),
            )));
            owned.referrer = UriStructure::unparsed(std::borrow::Cow::Owned(
                format!("http://{SITE}/").into_bytes(),
            ));
            owned.refresh_cycle = *refresh_cycle;
            if max_depth.is_some() {
                owned.extra.push((
                    crate::marshal::Value::bytes(b"depth").into_owned(),
                    crate::marshal::Value::owned_bytes(b"1".to_vec()),
                ));
            }
            assert_eq!(record(entry, false), record(&owned, false), "{}", link.url);
        }
    }
}

/// The MIME type is the content type's first part, trimmed and lower-cased (read in place when
/// it is already lower case): upper-case HTML is still HTML, counted as `text/html`; a missing
/// content type is `application/octet-stream`; a type that is not UTF-8 is read lossily.
#[test]
fn the_mime_type_is_read_in_place_or_lower_cased() {
    let mut e = engine(|c| c.robots = false);
    let cases: [(&[u8], &str, usize); 4] = [
        (b"text/html; charset=utf-8", "text/html", 1),
        (b" Text/HTML ;charset=UTF-8", "text/html", 1),
        (b"", "", 0),
        (b"text/h\xfftml", "text/h\u{fffd}tml", 0),
    ];
    for (i, (ctype, want, links)) in cases.into_iter().enumerate() {
        e.push(ready(&format!("http://{SITE}/m{i}")));
        let r = e.poll(0.0).0;
        let mut o = ok(r[0].id, 200, "", r#"<a href="/x">x</a>"#);
        if let Ok(f) = &mut o.result {
            f.headers = vec![("content-type".into(), ctype.to_vec())];
        }
        let acts = e.complete(o, 0.0);
        assert_eq!(entries(&acts).len(), links, "{want}");
        let counted = e.counters(C).unwrap().mime_type.get(want).copied();
        assert!(
            counted.is_some(),
            "{want}: {:?}",
            e.counters(C).unwrap().mime_type
        );
    }
    // No content type at all.
    e.push(ready(&format!("http://{SITE}/none")));
    let r = e.poll(0.0).0;
    let mut o = ok(r[0].id, 200, "", "<a href=\"/x\">x</a>");
    if let Ok(f) = &mut o.result {
        f.headers.clear();
    }
    e.complete(o, 0.0);
    let c = e.counters(C).unwrap();
    assert_eq!(c.mime_type.get("application/octet-stream"), Some(&1));
    assert_eq!(c.mime_type.get("text/html"), Some(&2));
}

/// Parked sites are never left waiting while room and places are free: the cases a review
/// found (a yield to a site since withdrawn, a woken site withdrawn before it ran, a
/// collection's withdrawal waking its own sites, a suspended site, a raised max_sites,
/// duplicate parks).
mod parking {
    use super::*;

    /// Collections `c` (tuned) and `d` (max_sites 128, no max_inter_docs), one request a site,
    /// `delay` between requests, sites released after `linger`.
    pub(super) fn eng_with(
        max_in_flight: usize,
        delay: f64,
        linger: f64,
        tune: impl Fn(&mut CollectionConfig),
    ) -> CrawlEngine {
        let mut cfg = CollectionConfig::defaults("c");
        (cfg.delay, cfg.robots, cfg.max_site_connections) = (delay, false, 1);
        tune(&mut cfg);
        let mut e = CrawlEngine::new(EngineOptions {
            site_linger: linger,
            max_in_flight,
            ..EngineOptions::default()
        });
        e.set_config(C, Arc::new(cfg.clone()));
        let mut d = cfg;
        d.max_sites = 128;
        d.max_inter_docs = None;
        e.set_config(b"d", Arc::new(d));
        e
    }
    fn eng(max_in_flight: usize, tune: impl Fn(&mut CollectionConfig)) -> CrawlEngine {
        eng_with(max_in_flight, 0.0, 1.0, tune)
    }
    /// Pushes `http://host/path` of collection `coll`, the host at 127.0.3.n.
    pub(super) fn p(e: &mut CrawlEngine, coll: &[u8], host: &str, path: &str, n: u8) {
        let mut r = ready(&format!("http://{host}/{path}"));
        r.collection = coll.to_vec();
        r.ip = format!("127.0.3.{n}");
        e.push(r);
    }
    /// One poll at `t`, every request answered 404; the hosts requested.
    pub(super) fn step(e: &mut CrawlEngine, t: f64) -> Vec<String> {
        let r = e.poll(t).0;
        let mut got = Vec::new();
        for req in r {
            got.push(req.url[7..16].to_string());
            e.complete(ok(req.id, 404, "text/html", ""), t);
        }
        got
    }
    /// Polls every 50 ms from `from` to `to`; the hosts requested.
    pub(super) fn drive(e: &mut CrawlEngine, from: f64, to: f64) -> Vec<String> {
        let mut got = Vec::new();
        let mut t = from;
        while t < to {
            got.extend(step(e, t));
            t += 0.05;
        }
        got
    }

    // 1. yield_turn to a withdrawn (stale) key in slots.1: the yielding site parks forever.
    #[test]
    fn a_yield_to_a_withdrawn_site_waiting_for_room_does_not_park_for_good() {
        let mut e = eng(1, |c| c.max_inter_docs = Some(1));
        for i in 0..3 {
            p(&mut e, C, "a.example", &i.to_string(), 1);
        }
        let r = e.poll(0.0).0;
        assert_eq!(r.len(), 1);
        p(&mut e, b"d", "t.example", "x", 2); // parks in slots.1 (room full)
        e.poll(0.0);
        let back = e.withdraw(b"d", Some(&["t.example".to_string()]));
        assert_eq!(back.len(), 1);
        e.complete(ok(r[0].id, 404, "text/html", ""), 0.0);
        let got = drive(&mut e, 0.0, 300.0);
        assert_eq!(got.len(), 2, "a.example has 2 entries left");
    }

    // 2. same with capped: max_sites=1, stale capped key.
    #[test]
    fn a_yield_to_a_withdrawn_site_waiting_for_a_place_does_not_park_for_good() {
        let mut e = eng(100, |c| {
            c.max_inter_docs = Some(1);
            c.max_sites = 1;
        });
        for i in 0..3 {
            p(&mut e, C, "a.example", &i.to_string(), 1);
        }
        let r = e.poll(0.0).0;
        assert_eq!(r.len(), 1);
        p(&mut e, C, "t.example", "x", 2); // capped
        e.poll(0.0);
        e.withdraw(C, Some(&["t.example".to_string()]));
        e.complete(ok(r[0].id, 404, "text/html", ""), 0.0);
        let got = drive(&mut e, 0.0, 300.0);
        assert_eq!(got.len(), 2);
    }

    // 3. woken counted in free_room, moved to capped; woken withdrawn -> capped site stuck.
    #[test]
    fn a_site_moved_to_its_collections_queue_starts_when_the_woken_one_is_withdrawn() {
        let mut e = eng(2, |c| c.max_sites = 1);
        // fill room with two d sites
        p(&mut e, b"d", "x.example", "1", 10);
        p(&mut e, b"d", "y.example", "1", 11);
        let r = e.poll(0.0).0;
        assert_eq!(r.len(), 2);
        p(&mut e, C, "a.example", "1", 1);
        p(&mut e, C, "b.example", "1", 2);
        e.poll(0.0); // both park for room
                     // free both d slots at once: withdraw x then y
        e.withdraw(b"d", None);
        // a or b woken, the other moved to capped; withdraw the woken one before it runs
        // (we don't know which; withdraw a, then check b, and vice versa in r3b)
        e.withdraw(C, Some(&["a.example".to_string()]));
        for q in &r {
            e.complete(ok(q.id, 404, "text/html", ""), 0.0);
        }
        let got = drive(&mut e, 0.0, 300.0);
        assert_eq!(got, ["b.example"]);
    }

    // 4. withdraw(collection) waking its own doomed sites uses up room: other collection stuck.
    #[test]
    fn withdrawing_a_collection_leaves_room_for_the_others() {
        let mut stuck = 0;
        for _ in 0..40 {
            let mut e = eng(1, |_| {});
            p(&mut e, C, "a.example", "1", 1);
            let r = e.poll(0.0).0;
            assert_eq!(r.len(), 1);
            p(&mut e, C, "b.example", "1", 2);
            e.poll(0.0);
            p(&mut e, b"d", "x.example", "1", 3);
            e.poll(0.0);
            e.withdraw(C, None);
            e.complete(ok(r[0].id, 404, "text/html", ""), 0.0);
            let got = drive(&mut e, 0.0, 10.0);
            if got.is_empty() {
                stuck += 1;
            }
        }
        assert_eq!(stuck, 0);
    }

    // 5. duplicate keys in slots.1 overcount woken: a site moved to capped while a place is free.
    #[test]
    fn a_site_pushed_to_while_parked_is_counted_once() {
        let mut e = eng(3, |c| c.max_sites = 2);
        // fill room with 3 d sites
        for (i, h) in ["x.example", "y.example", "z.example"].iter().enumerate() {
            p(&mut e, b"d", h, "1", 10 + i as u8);
        }
        let rd = e.poll(0.0).0;
        assert_eq!(rd.len(), 3);
        // t gets 3 entries while parked -> 3 keys in slots.1; u after.
        for i in 0..3 {
            p(&mut e, C, "t.example", &i.to_string(), 1);
            e.poll(0.0);
        }
        for i in 0..3 {
            p(&mut e, C, "u.example", &i.to_string(), 2);
        }
        e.poll(0.0);
        e.withdraw(b"d", None); // frees room 1,2,3 -> one free_room each
        for q in &rd {
            e.complete(ok(q.id, 404, "text/html", ""), 0.0);
        }
        e.poll(0.1);
        assert_eq!(
            e.sites_started(C),
            2,
            "two places, room 3, both t and u have work"
        );
    }

    // 6. suspended (config switched to suspend) site keeps its slot; others starve.
    #[test]
    fn a_suspended_site_gives_up_its_room() {
        use crate::config::VariableDelay;
        let mut e = eng(1, |_| {});
        for i in 0..3 {
            p(&mut e, C, "a.example", &i.to_string(), 1);
        }
        let r = e.poll(0.0).0;
        let mut cfg = (**e.config(C).unwrap()).clone();
        cfg.variable_delay = vec![VariableDelay {
            first_day: 0,
            last_day: 6,
            from_hour: 0,
            to_hour: 24,
            delay: None,
        }];
        e.set_config(C, Arc::new(cfg));
        e.complete(ok(r[0].id, 404, "text/html", ""), 0.0);
        p(&mut e, b"d", "x.example", "1", 3);
        let got = drive(&mut e, 0.0, 600.0);
        assert_eq!(got, ["x.example"]);
    }

    // 7. raising max_sites doesn't wake capped sites.
    #[test]
    fn raising_max_sites_wakes_parked_sites() {
        let mut e = eng(100, |c| c.max_sites = 1);
        for i in 0..50 {
            p(&mut e, C, "a.example", &i.to_string(), 1);
        }
        for h in ["b.example", "c.example", "e.example"] {
            p(&mut e, C, h, "1", 2);
        }
        let r = e.poll(0.0).0;
        assert_eq!(r.len(), 1);
        let mut cfg = (**e.config(C).unwrap()).clone();
        cfg.max_sites = 10;
        e.set_config(C, Arc::new(cfg));
        e.complete(ok(r[0].id, 404, "text/html", ""), 0.0);
        let r = e.poll(0.1).0;
        assert!(r.len() >= 4);
    }
}

/// The same with delays between requests and a longer linger.
mod parking_with_delays {
    use super::parking::{drive, eng_with, p, step};
    use super::*;
    fn eng(max_in_flight: usize, tune: impl Fn(&mut CollectionConfig)) -> CrawlEngine {
        eng_with(max_in_flight, 1.0, 3.0, tune)
    }

    #[test]
    fn a_yield_to_a_withdrawn_waiter_with_delays() {
        let mut e = eng(1, |c| c.max_inter_docs = Some(1));
        for i in 0..3 {
            p(&mut e, C, "a.example", &i.to_string(), 1);
        }
        assert_eq!(step(&mut e, 0.0), ["a.example"]); // holds slot, next_at 1.0
        p(&mut e, b"d", "t.example", "x", 2);
        assert!(step(&mut e, 0.1).is_empty()); // t parks in slots.1
        e.withdraw(b"d", Some(&["t.example".to_string()]));
        let got = drive(&mut e, 0.2, 300.0);
        assert_eq!(got.len(), 2, "a.example has 2 entries left");
    }

    #[test]
    fn a_moved_site_starts_with_delays() {
        let mut e = eng(2, |c| c.max_sites = 1);
        p(&mut e, b"d", "x.example", "1", 10);
        p(&mut e, b"d", "y.example", "1", 11);
        assert_eq!(step(&mut e, 0.0).len(), 2); // x, y hold room (idle, lingering 3 s)
        p(&mut e, C, "a.example", "1", 1);
        p(&mut e, C, "b.example", "1", 2);
        // x, y idle -> lend_room happens only on run_site; make sure a,b park first
        let _ = e.poll(0.01);
        e.withdraw(b"d", None);
        e.withdraw(C, Some(&["a.example".to_string()]));
        let got = drive(&mut e, 0.1, 300.0);
        assert!(got.contains(&"b.example".to_string()));
    }

    #[test]
    fn withdrawing_a_collection_with_delays() {
        let mut stuck = 0;
        for _ in 0..40 {
            let mut e = eng(1, |_| {});
            for i in 0..2 {
                p(&mut e, C, "a.example", &i.to_string(), 1);
            }
            assert_eq!(step(&mut e, 0.0).len(), 1);
            p(&mut e, C, "b.example", "1", 2);
            assert!(step(&mut e, 0.1).is_empty());
            p(&mut e, b"d", "x.example", "1", 3);
            assert!(step(&mut e, 0.2).is_empty());
            e.withdraw(C, None);
            let got = drive(&mut e, 0.3, 10.0);
            if got.is_empty() {
                stuck += 1;
            }
        }
        assert_eq!(stuck, 0);
    }
}

/// A site moved to its collection's queue when another of it was woken, that one withdrawn.
mod parking_woken_withdrawn {
    use super::*;
    #[test]
    fn the_moved_site_is_fetched() {
        let mut cfg = CollectionConfig::defaults("c");
        (cfg.delay, cfg.robots, cfg.max_site_connections) = (1.0, false, 1);
        cfg.max_sites = 1;
        let mut e = CrawlEngine::new(EngineOptions {
            site_linger: 3.0,
            max_in_flight: 2,
            ..EngineOptions::default()
        });
        e.set_config(C, Arc::new(cfg.clone()));
        let mut d = cfg;
        d.max_sites = 128;
        d.max_site_connections = 2;
        e.set_config(b"d", Arc::new(d));
        let p = |e: &mut CrawlEngine, coll: &[u8], host: &str, n: u8| {
            let mut r = ready(&format!("http://{host}/"));
            r.collection = coll.to_vec();
            r.ip = format!("127.0.3.{n}");
            e.push(r);
        };
        p(&mut e, b"d", "x.example", 10);
        let r = e.poll(0.0).0;
        assert_eq!(r.len(), 1);
        p(&mut e, C, "a.example", 1);
        p(&mut e, C, "b.example", 2);
        assert!(e.poll(0.0).0.is_empty());
        e.withdraw(b"d", None); // one free_room of 2: a woken, b moved to capped
        e.withdraw(C, Some(&["a.example".to_string()]));
        e.complete(ok(r[0].id, 404, "text/html", ""), 0.0);
        let mut got = Vec::new();
        let mut t = 0.1;
        while t < 300.0 {
            for q in e.poll(t).0 {
                got.push(q.url.clone());
                e.complete(ok(q.id, 404, "text/html", ""), t);
            }
            t += 0.5;
        }
        assert_eq!(got.len(), 1);
    }
}

/// An engine of `max_queued` entries, for collection [`C`] without robots.txt.
fn visit_engine(max_queued: usize) -> CrawlEngine {
    let mut e = CrawlEngine::new(EngineOptions {
        max_queued,
        ..EngineOptions::default()
    });
    let mut cfg = CollectionConfig::defaults("c");
    cfg.robots = false;
    e.set_config(C, Arc::new(cfg));
    e
}

/// A site the engine crawls has room for [`VISIT_HELD_MAX`] entries of its visit, less those it
/// holds; a site it does not crawl has none, and neither has any site once the engine holds
/// twice its `max_queued` (visits' entries come even to a full window).
#[test]
fn a_site_being_crawled_has_room_for_its_visit() {
    let mut e = visit_engine(32);
    let key: SiteKey = Arc::new((C.to_vec(), SITE.to_string()));
    assert_eq!(e.visit_room(&key), 0, "not crawled here");
    e.push(ready(&format!("http://{SITE}/")));
    assert_eq!(e.visit_room(&key), VISIT_HELD_MAX - 1);
    for i in 0..10 {
        e.push(ready(&format!("http://{SITE}/{i}")));
    }
    assert_eq!(e.visit_room(&key), VISIT_HELD_MAX - 11);
    // Another site's entries fill the window: the visit still has its room...
    for i in 0..21 {
        e.push(ready(&format!("http://127.0.0.2/{i}")));
    }
    assert_eq!(e.wants(), 0);
    assert_eq!(e.visit_room(&key), VISIT_HELD_MAX - 11);
    // ... up to twice max_queued held in all.
    for i in 21..43 {
        e.push(ready(&format!("http://127.0.0.2/{i}")));
    }
    assert_eq!(e.visit_room(&key), 10, "54 held: 10 left of 64");
    for i in 43..53 {
        e.push(ready(&format!("http://127.0.0.2/{i}")));
    }
    assert_eq!(e.visit_room(&key), 0, "64 held: twice max_queued");
}

/// Entries of a visit promised and not yet handed over count against the site's room and the
/// engine's: two pages of a site finished in the same step do not both take the whole room.
#[test]
fn a_visits_promised_entries_count_until_they_are_handed_over() {
    let mut e = visit_engine(40);
    let key: SiteKey = Arc::new((C.to_vec(), SITE.to_string()));
    let other: SiteKey = Arc::new((C.to_vec(), "127.0.0.2".to_string()));
    e.push(ready(&format!("http://{SITE}/")));
    e.push(ready("http://127.0.0.2/"));
    assert_eq!(e.visit_room(&key), VISIT_HELD_MAX - 1);
    e.promise_visit(&key, 20);
    assert_eq!(
        e.visit_room(&key),
        VISIT_HELD_MAX - 21,
        "the site's own room"
    );
    e.promise_visit(&key, VISIT_HELD_MAX - 21);
    assert_eq!(e.visit_room(&key), 0);
    // The engine's room is twice max_queued, 80: 2 held and 31 promised.
    assert_eq!(e.visit_room(&other), VISIT_HELD_MAX - 1);
    e.promise_visit(&other, 25);
    for i in 0..20 {
        e.push(ready(&format!("http://127.0.0.3/{i}")));
    }
    // 22 held and 56 promised: 2 left in all, though the other site has 6 of its own.
    assert_eq!(e.visit_room(&other), 2);
    assert_eq!(e.visit_room(&key), 0);
    // Handed over (pushed): held, not promised.
    e.visits_handed();
    for i in 0..20 {
        e.push(ready(&format!("http://{SITE}/{i}")));
    }
    assert_eq!(e.visit_room(&key), VISIT_HELD_MAX - 21);
    assert_eq!(e.visit_room(&other), VISIT_HELD_MAX - 1);
}
