//! The node scheduler's crawl store and document feed: add, unchanged, update, duplicate,
//! 304, 404, delete site, reprocess, feeding suspend, refresh cycles with dbswitch, conditional
//! requests, and entries finished only after the feed is durable.

use std::borrow::Cow;

use super::collections::meta;
use super::node::{collection_dir, Dest, Fate, NodeOptions, NodeScheduler};
use crate::crawl::Document;
use crate::feed::{DocLogReader, FeedOp, DOCS_DIR};
use crate::marshal::Value;
use crate::msg::{Checksum, DeleteSite, FeedingSuspend, Message, ReprocessSite};
use tempfile::TempDir;

const C: &[u8] = b"c";

/// A node scheduler on a scratch directory, which lives as long as the guard.
fn setup(name: &str, extra: Vec<(&str, Value<'static>)>) -> (NodeScheduler, TempDir) {
    setup_on(name, extra, crate::clock::Clock::System)
}

/// [`setup`] with the node reading the time from `clock`.
fn setup_on(
    name: &str,
    extra: Vec<(&str, Value<'static>)>,
    clock: crate::clock::Clock,
) -> (NodeScheduler, TempDir) {
    let dir = TempDir::with_prefix(format!("crawlfleet-store-{name}-")).unwrap();
    let mut opts = NodeOptions::new(b"n1");
    opts.standalone = true;
    opts.clock = clock;
    let mut n = NodeScheduler::open(dir.path(), opts).unwrap();
    let mut pairs = vec![(
        "start_uris",
        Value::list(vec![Value::owned_bytes(b"http://127.0.0.9/".to_vec())]),
    )];
    pairs.extend(extra);
    n.conf_add(C, meta(pairs)).unwrap();
    n.take_output();
    (n, dir)
}

/// A standalone node scheduler on `dir` (opened again after a "kill": dropped unsynced).
fn reopen(dir: &std::path::Path) -> NodeScheduler {
    let mut opts = NodeOptions::new(b"n1");
    opts.standalone = true;
    NodeScheduler::open(dir, opts).unwrap()
}

fn doc(uri: &str, body: &str, seq: u64) -> Box<Document> {
    use md5::{Digest, Md5};
    Box::new(Document {
        collection: C.to_vec(),
        uri: uri.as_bytes().to_vec(),
        checksum: Checksum(Md5::digest(body.as_bytes()).into()),
        status: 200,
        headers: vec![
            ("etag".into(), format!("\"{}\"", body.len()).into_bytes()),
            ("content-type".into(), b"text/html".to_vec()),
        ],
        body: body.as_bytes().to_vec(),
        uri_flags: 0,
        redirected_from: Vec::new(),
        seq,
    })
}

fn fate(n: &mut NodeScheduler, d: Box<Document>) -> Fate {
    n.document(d).unwrap().expect("decided at once").fate
}

/// (op, uri) of every fed document.
fn fed(dir: &std::path::Path) -> Vec<(FeedOp, String)> {
    let docs = collection_dir(dir, C).join(DOCS_DIR);
    DocLogReader::open(&docs)
        .unwrap()
        .map(|r| {
            let (_, d) = r.unwrap();
            (d.op, String::from_utf8(d.uri).unwrap())
        })
        .collect()
}

#[test]
fn a_fed_document_carries_the_fetched_headers_and_body() {
    let (mut n, dir) = setup("fed-whole", vec![]);
    let (added, modified) = (
        doc("http://a.example/1", "one", 1),
        doc("http://a.example/1", "one v2", 2),
    );
    let want: Vec<_> = [&added, &modified]
        .iter()
        .map(|d| (d.headers.clone(), d.body.clone(), d.checksum.0, d.status))
        .collect();
    assert_eq!(fate(&mut n, added), Fate::Added);
    assert_eq!(fate(&mut n, modified), Fate::Modified);
    n.sync().unwrap();
    let docs = collection_dir(dir.path(), C).join(DOCS_DIR);
    let got: Vec<_> = DocLogReader::open(&docs)
        .unwrap()
        .map(|r| {
            let (_, d) = r.unwrap();
            (d.headers, d.body, d.checksum, d.status)
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn documents_are_added_updated_left_alone_or_deleted_as_the_store_says() {
    let (mut n, dir) = setup("fates", vec![]);
    assert_eq!(
        fate(&mut n, doc("http://a.example/1", "one", 1)),
        Fate::Added
    );
    assert_eq!(
        fate(&mut n, doc("http://a.example/1", "one", 2)),
        Fate::Unchanged
    );
    assert_eq!(
        fate(&mut n, doc("http://a.example/1", "one v2", 3)),
        Fate::Modified
    );
    // The same content under another URI: a duplicate, not fed.
    assert_eq!(
        fate(&mut n, doc("http://a.example/2", "one v2", 4)),
        Fate::Duplicate
    );
    assert_eq!(
        n.unchanged(C, b"http://a.example/1").unwrap().unwrap().fate,
        Fate::Unchanged
    );
    assert_eq!(
        n.gone(C, b"http://a.example/1").unwrap().unwrap().fate,
        Fate::Deleted
    );
    // Gone again, or never stored: nothing to delete.
    assert!(n.gone(C, b"http://a.example/1").unwrap().is_none());
    assert!(n.gone(C, b"http://a.example/9").unwrap().is_none());
    n.sync().unwrap();
    assert_eq!(
        fed(dir.path()),
        [
            (FeedOp::Add, "http://a.example/1".into()),
            (FeedOp::Update, "http://a.example/1".into()),
            (FeedOp::Delete, "http://a.example/1".into()),
        ]
    );
    // The deleted URI's content is free again: the former duplicate now owns it.
    assert_eq!(
        fate(&mut n, doc("http://a.example/2", "one v2", 5)),
        Fate::Added
    );
    // Everything survives a restart: the store still knows the document.
    drop(n);
    let mut n = reopen(dir.path());
    assert_eq!(
        fate(&mut n, doc("http://a.example/2", "one v2", 6)),
        Fate::Unchanged
    );
    assert_eq!(n.store_counts(C), (1, 0, 1));
}

#[test]
fn delete_site_and_reprocess_act_on_stored_documents() {
    let (mut n, dir) = setup("site", vec![]);
    fate(&mut n, doc("http://a.example/x/1", "a1", 1));
    fate(&mut n, doc("http://a.example/y/2", "a2", 2));
    fate(&mut n, doc("http://b.example/1", "b1", 3));
    n.handle_message(
        &Dest::Multinode,
        Message::CmdUmReprocessSite(ReprocessSite {
            collection: Cow::Borrowed(C),
            site: Cow::Borrowed(b"a.example"),
            prefix: Cow::Borrowed(b"http://a.example/x/"),
            destination: None,
            exact: false,
        }),
        0,
    )
    .unwrap();
    n.handle_message(
        &Dest::Multinode,
        Message::CmdUmDeleteSite(DeleteSite {
            collection: Cow::Borrowed(C),
            site: Cow::Borrowed(b"a.example"),
        }),
        0,
    )
    .unwrap();
    n.sync().unwrap();
    let ops = fed(dir.path());
    assert_eq!(ops.len(), 3 + 1 + 2, "{ops:?}");
    assert_eq!(ops[3], (FeedOp::Update, "http://a.example/x/1".into()));
    let deletes: Vec<_> = ops[4..].iter().map(|(o, u)| (*o, u.as_str())).collect();
    assert_eq!(
        deletes,
        [
            (FeedOp::Delete, "http://a.example/x/1"),
            (FeedOp::Delete, "http://a.example/y/2")
        ]
    );
    assert_eq!(n.store_counts(C), (1, 0, 0));
}

#[test]
fn suspended_feeding_holds_documents_until_resumed() {
    let (mut n, dir) = setup("suspend", vec![]);
    let suspend = |on: bool| {
        Message::CmdAdmConfFeedingSuspend(FeedingSuspend {
            collection: Cow::Borrowed(C),
            suspend: on,
            destinations: None,
        })
    };
    n.handle_message(&Dest::Multinode, suspend(true), 0)
        .unwrap();
    fate(&mut n, doc("http://a.example/1", "one", 1));
    n.sync().unwrap();
    assert!(fed(dir.path()).is_empty(), "held");
    n.handle_message(&Dest::Multinode, suspend(false), 0)
        .unwrap();
    n.sync().unwrap();
    assert_eq!(
        fed(dir.path()),
        [(FeedOp::Add, "http://a.example/1".into())]
    );
}

#[test]
fn a_refresh_deletes_documents_unseen_for_dbswitch_cycles_and_requests_are_conditional() {
    let (mut n, dir) = setup(
        "refresh",
        vec![
            ("dbswitch", Value::int(1)),
            ("refresh_mode", Value::owned_bytes(b"append".to_vec())),
        ],
    );
    fate(&mut n, doc("http://127.0.0.9/", "home", 1));
    fate(&mut n, doc("http://127.0.0.9/old", "old", 2));
    n.refresh(C, None, 0).unwrap();
    // Cycle 1: only the home page is seen again.
    assert_eq!(
        fate(&mut n, doc("http://127.0.0.9/", "home", 3)),
        Fate::Unchanged
    );
    n.refresh(C, None, 0).unwrap();
    n.sync().unwrap();
    let ops = fed(dir.path());
    assert_eq!(
        ops.last(),
        Some(&(FeedOp::Delete, "http://127.0.0.9/old".into()))
    );
    assert_eq!(ops.len(), 3);
    // `append` kept the queue: the start URI of each cycle is in it, and cycle 1 queued the
    // stored documents again (cycle 2 none more: home is queued already, old was deleted).
    // Home is fetched conditionally on its stored ETag, the deleted page whole.
    n.dispatch(10, 0).unwrap();
    let ready: Vec<(String, Vec<(String, String)>)> = n
        .take_ready(10)
        .into_iter()
        .map(|r| {
            let e = crate::sched::parse_record(&r.record).unwrap().0;
            (
                String::from_utf8(e.uri.uri.to_vec()).unwrap(),
                r.conditional,
            )
        })
        .collect();
    let home = |_| {
        (
            "http://127.0.0.9/".to_string(),
            vec![("If-None-Match".to_string(), "\"4\"".to_string())],
        )
    };
    let mut want: Vec<_> = (0..3).map(home).collect();
    want.insert(2, ("http://127.0.0.9/old".to_string(), Vec::new()));
    assert_eq!(ready, want);
}

#[test]
fn an_entry_is_finished_only_when_its_document_is_durable() {
    let (mut n, dir) = setup("finish", vec![]);
    n.dispatch(10, 0).unwrap();
    let ready = n.take_ready(10);
    assert_eq!(ready.len(), 1);
    let seq = ready[0].seq;
    fate(&mut n, doc("http://127.0.0.9/", "home", seq));
    // Killed before the sync: the entry comes back.
    drop(n);
    let mut n = reopen(dir.path());
    n.dispatch(10, 0).unwrap();
    let again = n.take_ready(10);
    assert_eq!(again.len(), 1, "fetched again after the restart");
    fate(&mut n, doc("http://127.0.0.9/", "home", again[0].seq));
    n.sync().unwrap();
    drop(n);
    let mut n = reopen(dir.path());
    n.dispatch(10, 0).unwrap();
    assert!(
        n.take_ready(10).is_empty(),
        "finished for good after the sync"
    );
}

/// Copies the file or directory tree `from` to `to`, replacing it.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    let _ = std::fs::remove_dir_all(to);
    let _ = std::fs::remove_file(to);
    if from.is_file() {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
        return;
    }
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        copy_dir(&e.path(), &to.join(e.file_name()));
    }
}

#[test]
fn a_kill_between_the_feed_sync_and_the_store_sync_does_not_feed_twice() {
    let (mut n, dir) = setup("gap", vec![]);
    n.dispatch(10, 0).unwrap();
    let ready = n.take_ready(10);
    assert_eq!(ready.len(), 1);
    n.sync().unwrap();
    // The store, the in-flight journal and the mark as they were before the document came.
    let cdir = collection_dir(dir.path(), C);
    let before = dir.path().with_extension("before");
    for d in ["store", "inflight"] {
        copy_dir(&cdir.join(d), &before.join(d));
    }
    let mark = std::fs::read(cdir.join("store-fed")).ok();
    fate(&mut n, doc("http://127.0.0.9/", "home", ready[0].seq));
    n.sync().unwrap();
    drop(n);
    // The state a kill leaves after the document log's sync and before the store's: the
    // document is in the log, the store and the journal do not know it.
    for d in ["store", "inflight"] {
        copy_dir(&before.join(d), &cdir.join(d));
    }
    match mark {
        Some(m) => std::fs::write(cdir.join("store-fed"), m).unwrap(),
        None => {
            let _ = std::fs::remove_file(cdir.join("store-fed"));
        }
    }
    let mut n = reopen(dir.path());
    assert_eq!(n.store_counts(C), (1, 0, 0), "recorded from the log");
    n.dispatch(10, 0).unwrap();
    let again = n.take_ready(10);
    assert_eq!(again.len(), 1, "the entry was not finished: fetched again");
    assert_eq!(
        fate(&mut n, doc("http://127.0.0.9/", "home", again[0].seq)),
        Fate::Unchanged
    );
    n.sync().unwrap();
    assert_eq!(fed(dir.path()), [(FeedOp::Add, "http://127.0.0.9/".into())]);
    let _ = std::fs::remove_dir_all(&before);
}

/// The URIs of the entries ready to fetch.
fn ready_uris(n: &mut NodeScheduler) -> Vec<String> {
    n.dispatch(100, 0).unwrap();
    uris_of(n.take_ready(100))
}

fn queue(n: &mut NodeScheduler, uri: &str) {
    assert!(n.add_uri(C, &link(uri), false).unwrap());
}

#[test]
fn refresh_only_fetches_stored_uris_and_holds_new_ones_until_switched_off() {
    use super::node::RefreshOnly;
    let (mut n, _dir) = setup("refresh-only", vec![]);
    assert_eq!(ready_uris(&mut n), ["http://127.0.0.9/"]);
    fate(&mut n, doc("http://127.0.0.9/", "home", 1));
    let mut dict = n.collection_config(C).unwrap().clone();
    let set = |d: &mut Value<'static>, on: i64| {
        if let Value::Dict(pairs) = d {
            pairs.retain(|(k, _)| k.as_bytes() != Some(b"refresh_only"));
            pairs.push((Value::owned_bytes(b"refresh_only".to_vec()), Value::int(on)));
        }
    };
    set(&mut dict, 1);
    n.conf_update(C, dict.clone()).unwrap();
    assert_eq!(n.refresh_only(C), Some(RefreshOnly::User));
    assert_eq!(RefreshOnly::User.crawl_mode(), "Refreshing(limit=user)");
    n.refresh(C, None, 0).unwrap();
    queue(&mut n, "http://127.0.0.9/new");
    // FSCADM 2.2.10.2: only what the crawl store holds is downloaded.
    assert_eq!(ready_uris(&mut n), ["http://127.0.0.9/"]);
    set(&mut dict, 0);
    n.conf_update(C, dict).unwrap();
    assert_eq!(n.refresh_only(C), None);
    assert_eq!(
        ready_uris(&mut n),
        ["http://127.0.0.9/new"],
        "held, not lost"
    );
}

#[test]
fn max_doc_stored_documents_switch_the_collection_to_refreshing_only() {
    use super::node::RefreshOnly;
    let (mut n, _dir) = setup(
        "max-doc",
        vec![("limits", meta(vec![("max_doc", Value::int(1))]))],
    );
    assert_eq!(ready_uris(&mut n), ["http://127.0.0.9/"]);
    fate(&mut n, doc("http://127.0.0.9/", "home", 1));
    assert_eq!(n.refresh_only(C), None, "counted on the timer");
    n.refresh_tick(0).unwrap();
    assert_eq!(n.refresh_only(C), Some(RefreshOnly::MaxDoc));
    assert_eq!(
        RefreshOnly::MaxDoc.crawl_mode(),
        "Refreshing(limit=max_doc)"
    );
    queue(&mut n, "http://127.0.0.9/new");
    assert!(ready_uris(&mut n).is_empty());
}

#[test]
fn too_little_free_disk_switches_the_collection_to_refreshing_only() {
    use super::node::RefreshOnly;
    // 100 percent free is never the case on a file system holding this test's files.
    let (mut n, _dir) = setup(
        "disk-free",
        vec![("limits", meta(vec![("disk_free", Value::int(100))]))],
    );
    assert_eq!(n.refresh_only(C), Some(RefreshOnly::DiskFree));
    assert_eq!(
        RefreshOnly::DiskFree.crawl_mode(),
        "Refreshing(limit=disk_free)"
    );
    assert!(ready_uris(&mut n).is_empty(), "not even the start URI");
}

#[test]
fn fed_documents_carry_the_time_of_the_nodes_clock() {
    // The node reads the time through the clock it was given: a test moves it a day ahead
    // instead of sleeping, and the delete fed then is dated a day after the add.
    let clock = crate::clock::Clock::manual(1_700_000_000);
    let (mut n, dir) = setup_on("clock", vec![], clock.clone());
    fate(&mut n, doc("http://a.example/1", "a1", 1));
    clock.advance(86_400);
    n.handle_message(
        &Dest::Multinode,
        Message::CmdUmDeleteSite(DeleteSite {
            collection: Cow::Borrowed(C),
            site: Cow::Borrowed(b"a.example"),
        }),
        0,
    )
    .unwrap();
    n.sync().unwrap();
    let docs = collection_dir(dir.path(), C).join(DOCS_DIR);
    let times: Vec<(FeedOp, u64)> = DocLogReader::open(&docs)
        .unwrap()
        .map(|r| {
            let (_, d) = r.unwrap();
            (d.op, d.time)
        })
        .collect();
    assert_eq!(
        times,
        [
            (FeedOp::Add, 1_700_000_000),
            (FeedOp::Delete, 1_700_086_400)
        ]
    );
}

#[test]
fn a_collection_is_parsed_once_per_configuration_and_shared() {
    // The scheduler parses a collection's configuration when it is added or updated; the
    // crawler and the refresh policy share that parse instead of parsing the dict again.
    let (mut n, _dir) = setup("settings", vec![("refresh", Value::Float(30.0))]);
    let a = n.collection_settings(C).unwrap();
    let b = n.collection_settings(C).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b), "parsed once");
    assert_eq!(a.refresh, 30.0);
    let mut dict = n.collection_config(C).unwrap().clone();
    if let Value::Dict(pairs) = &mut dict {
        pairs.retain(|(k, _)| k.as_bytes() != Some(b"refresh".as_slice()));
        pairs.push((Value::owned_bytes(b"refresh".to_vec()), Value::Float(5.0)));
    }
    n.conf_update(C, dict).unwrap();
    let c = n.collection_settings(C).unwrap();
    assert!(!std::sync::Arc::ptr_eq(&a, &c), "parsed again on update");
    assert_eq!(c.refresh, 5.0);
}

#[test]
fn a_dispatch_takes_up_to_its_capacity_when_sites_start_at_once_or_wait() {
    // Standalone, an address needs no lookup and the grant is the node's own: each new site
    // starts within the dispatch, so its entry is ready, not waiting.
    let (mut n, _dir) = setup("capacity", vec![]);
    for i in 1..=11 {
        queue(&mut n, &format!("http://10.0.1.{i}/"));
    }
    n.dispatch(5, 0).unwrap();
    assert_eq!(n.take_ready(100).len(), 5);
    assert_eq!(n.queued(C), Some((7, 0)));
    assert_eq!(n.queued_in_memory(C).unwrap().0, 5);
    n.dispatch(100, 0).unwrap();
    assert_eq!(n.take_ready(100).len(), 7);
    assert_eq!(n.queued(C), Some((0, 0)));
}

/// The URIs of entries handed to the crawl engine.
fn uris_of(ready: Vec<super::node::Ready>) -> Vec<String> {
    ready
        .into_iter()
        .map(|r| {
            let e = crate::sched::parse_record(&r.record).unwrap().0;
            String::from_utf8(e.uri.uri.to_vec()).unwrap()
        })
        .collect()
}

fn link(uri: &str) -> crate::msg::CrawlQueueEntry<'static> {
    crate::msg::CrawlQueueEntry::new(crate::msg::UriStructure::unparsed(Cow::Owned(
        uri.as_bytes().to_vec(),
    )))
}

/// A link of a page to the page's own site, found while the site is crawled, joins the site's
/// visit (`add_link_on_visit`): handed to the crawl engine at the next take even when the
/// engine asks for no entry of the crawl queue, recorded as seen like any queued URI, and
/// journaled in flight, so that a kill before it is fetched finds it queued again. A link
/// that finds no room left, or whose site is not active here, goes to the back of the crawl
/// queue as before.
#[test]
fn a_link_to_the_site_being_crawled_joins_its_visit() {
    let (mut n, dir) = setup("visit", vec![]);
    assert_eq!(ready_uris(&mut n), ["http://127.0.0.9/"]);
    let site = "127.0.0.9";
    let mut room = 2;
    for u in ["/a", "/b", "/c"] {
        let u = format!("http://{site}{u}");
        assert!(n.add_link_on_visit(C, &link(&u), site, &mut room).unwrap());
    }
    assert_eq!(room, 0);
    assert_eq!(n.queued(C), Some((1, 0)), "/c found no room: queued");
    assert_eq!(
        uris_of(n.take_ready(0)),
        ["http://127.0.0.9/a", "http://127.0.0.9/b"],
        "the visit's entries come to a full engine, in their order"
    );
    // Seen: a second link to /a queues nothing and takes no room.
    let mut room = 5;
    n.add_link_on_visit(C, &link("http://127.0.0.9/a"), site, &mut room)
        .unwrap();
    assert_eq!(room, 5);
    assert!(n.take_ready(0).is_empty());
    assert_eq!(n.queued(C), Some((1, 0)));
    // A site that is not active here: to the crawl queue.
    n.add_link_on_visit(C, &link("http://127.0.0.8/x"), "127.0.0.8", &mut room)
        .unwrap();
    assert_eq!((room, n.queued(C)), (5, Some((2, 0))));
    // Taken into the visit and not handed on: in memory, journaled in flight...
    n.add_link_on_visit(C, &link("http://127.0.0.9/d"), site, &mut room)
        .unwrap();
    assert_eq!(room, 4);
    let (held, _) = n.queued_in_memory(C).unwrap();
    assert_eq!(held, 4, "/, /a, /b and /d");
    // ... so a kill (no destructor, nothing more written) loses none of it: the restart
    // queues every entry taken and not finished again, ahead of the queue.
    std::mem::forget(n);
    let mut n = reopen(dir.path());
    assert_eq!(n.queued(C), Some((6, 0)));
    let mut got = ready_uris(&mut n);
    got.sort();
    assert_eq!(
        got,
        [
            "http://127.0.0.8/x",
            "http://127.0.0.9/",
            "http://127.0.0.9/a",
            "http://127.0.0.9/b",
            "http://127.0.0.9/c",
            "http://127.0.0.9/d",
        ]
    );
}

/// A link that joined its site's visit is in the in-flight journal's file before its URI is
/// recorded as seen: a kill after the seen set wrote its records (every 64 KiB of them, here
/// made to come by queuing 9,000 more URIs) and before the next sync finds the entry queued
/// again, not its URI seen and the entry nowhere.
#[test]
fn a_visit_entry_is_journaled_before_its_uri_is_seen() {
    let (mut n, dir) = setup("visit-kill", vec![]);
    assert_eq!(ready_uris(&mut n), ["http://127.0.0.9/"]);
    let mut room = 1;
    n.add_link_on_visit(C, &link("http://127.0.0.9/v"), "127.0.0.9", &mut room)
        .unwrap();
    assert_eq!(room, 0);
    for i in 0..9000 {
        queue(&mut n, &format!("http://127.0.0.8/{i}"));
    }
    std::mem::forget(n);
    let n = reopen(dir.path());
    assert_eq!(
        n.queued(C),
        Some((9002, 0)),
        "/ and /v taken and not finished, and the 9,000 queued"
    );
}

/// The site's entries the crawl engine was not yet given (here a visit's; ready entries left
/// for a later step, or any of them while the collection waits for disk room, alike) go back to
/// the front of the crawl queue when the engine finishes the site: handed out after the release, they would be fetched at an IP address no
/// longer granted (MS-FSCMT 3.1.5.21). The next dispatch asks for the site again.
#[test]
fn a_site_done_puts_back_the_entries_its_visit_did_not_hand_out() {
    let (mut n, dir) = with_visit("visit-done");
    assert_eq!(n.queued(C), Some((1, 0)));
    n.site_done(C, "127.0.0.9").unwrap();
    assert!(n.active_sites(C).is_empty());
    assert!(
        n.take_ready(100).is_empty(),
        "nothing handed out for a released site"
    );
    assert_eq!(n.queued(C), Some((3, 0)), "back at the front, ahead of /q");
    let (held, _) = n.queued_in_memory(C).unwrap();
    assert_eq!(held, 1, "only / (the engine's) is still taken");
    assert_eq!(
        ready_uris(&mut n),
        [
            "http://127.0.0.9/a",
            "http://127.0.0.9/b",
            "http://127.0.0.8/q"
        ]
    );
    // A kill now: each entry comes back once (/ was taken and never finished).
    std::mem::forget(n);
    let mut n = reopen(dir.path());
    let mut got = ready_uris(&mut n);
    got.sort();
    assert_eq!(
        got,
        [
            "http://127.0.0.8/q",
            "http://127.0.0.9/",
            "http://127.0.0.9/a",
            "http://127.0.0.9/b"
        ]
    );
}

/// A node scheduler with the start page's site active and `/a`, `/b` in its visit, not yet
/// handed to the engine, and `http://127.0.0.8/q` in the crawl queue.
fn with_visit(name: &str) -> (NodeScheduler, TempDir) {
    let (mut n, dir) = setup(name, vec![]);
    assert_eq!(ready_uris(&mut n), ["http://127.0.0.9/"]);
    let mut room = 5;
    for u in ["/a", "/b"] {
        n.add_link_on_visit(
            C,
            &link(&format!("http://127.0.0.9{u}")),
            "127.0.0.9",
            &mut room,
        )
        .unwrap();
    }
    assert_eq!(room, 3);
    queue(&mut n, "http://127.0.0.8/q");
    (n, dir)
}

/// Every path that goes through the waiting entries takes the visit's too (MS-FSCMT):
/// quarantine (3.1.5.17) puts them at the front of the crawl queue and then the quarantine
/// queue; CMD_UM_DELETE_SITE (3.1.5.15) drops them; a lost multinode scheduler (its grants gone,
/// 3.2.1) keeps them waiting for the site's address to be granted again; a refresh cycle that
/// truncates and restarts (3.1.5.9, options of 2.2.3.10) finishes them. None is handed out afterwards, none is
/// left outstanding in the in-flight journal.
#[test]
fn visit_entries_go_through_quarantine_delete_lost_grants_and_restart() {
    use crate::msg::Quarantine;
    // Quarantine: the site's entries wait in the quarantine queue, /q stays queued.
    let (mut n, _dir) = with_visit("visit-quarantine");
    n.handle_message(
        &Dest::Multinode,
        Message::CmdUmQuarantineSite(Quarantine {
            collection: Cow::Borrowed(C),
            site: Cow::Borrowed(b"127.0.0.9"),
            seconds: 60,
        }),
        0,
    )
    .unwrap();
    assert!(n.take_ready(0).is_empty());
    assert_eq!(n.queued(C), Some((3, 0)), "/a and /b at the front, then /q");
    assert_eq!(ready_uris(&mut n), ["http://127.0.0.8/q"]);
    assert_eq!(
        n.queued(C),
        Some((0, 2)),
        "/a and /b in the quarantine queue"
    );
    assert_eq!(
        n.queued_in_memory(C).unwrap().0,
        2,
        "/ (the engine's) and /q"
    );

    // Delete site: /a and /b are dropped and finished in the journal.
    let (mut n, _dir) = with_visit("visit-delete");
    n.handle_message(
        &Dest::Multinode,
        Message::CmdUmDeleteSite(DeleteSite {
            collection: Cow::Borrowed(C),
            site: Cow::Borrowed(b"127.0.0.9"),
        }),
        0,
    )
    .unwrap();
    assert!(n.take_ready(100).is_empty());
    assert_eq!(n.queued(C), Some((1, 0)), "/q only");
    assert_eq!(n.queued_in_memory(C).unwrap().0, 1, "/ (the engine's)");

    // The multinode scheduler lost: the site waits for its address, with /a and /b.
    let (mut n, _dir) = with_visit("visit-claims");
    n.drop_claims();
    assert!(n.active_sites(C).is_empty());
    assert!(n.take_ready(0).is_empty());
    assert_eq!(n.queued_in_memory(C).unwrap().0, 3, "/, /a and /b");
    assert_eq!(
        n.queued(C),
        Some((1, 0)),
        "/q only: /a and /b wait with their site"
    );

    // Refresh, truncate and restart: /a and /b finished, the cycle starts from /.
    let (mut n, dir) = with_visit("visit-refresh");
    n.refresh(
        C,
        None,
        crate::msg::types::refresh_options::TRUNCATE_AND_RESTART,
    )
    .unwrap();
    assert!(n.take_ready(0).is_empty());
    assert_eq!(n.queued_in_memory(C).unwrap().0, 1, "/ (the engine's)");
    // Synced, then a kill: only / comes back from the journal, beside the new cycle's start
    // page.
    n.sync().unwrap();
    std::mem::forget(n);
    let n = reopen(dir.path());
    assert_eq!(n.queued(C), Some((2, 0)));
}

/// A collection paused for a full disk hands nothing out, and a visit's entries waiting then
/// join its ready entries: when the pause ends they come at most `max` at a time like them,
/// no longer ahead of the engine's window.
#[test]
fn a_pause_for_a_full_disk_folds_the_visit_into_the_ready_entries() {
    let (mut n, dir) = with_visit("visit-pause");
    let full = super::collections::io_err(dir.path())(std::io::Error::from(
        std::io::ErrorKind::StorageFull,
    ));
    n.disk_full(&full.into());
    assert!(n.disk_full_reason(C).is_some());
    assert!(n.take_ready(100).is_empty(), "paused: nothing handed out");
    // The next sync past the retry time writes everything: the pause ends.
    n.sync_at(std::time::Instant::now() + std::time::Duration::from_secs(3600))
        .unwrap();
    assert!(n.disk_full_reason(C).is_none());
    assert!(n.take_ready(0).is_empty(), "ready entries now, held to max");
    assert_eq!(
        uris_of(n.take_ready(1)),
        ["http://127.0.0.9/a"],
        "in their order"
    );
    assert_eq!(uris_of(n.take_ready(1)), ["http://127.0.0.9/b"]);
}
