//! Crawl queue entries across a SIGKILL of the node: every entry queued before the kill is
//! queued (or journaled as taken, and queued again) after the restart. A kill is dropping the
//! scheduler without running its destructors (`mem::forget`): what the process had written
//! (the queue's mapped files, the journals' written records) stays, what it held in memory
//! goes, as with the page cache of a killed process.

use std::borrow::Cow;

use super::collections::meta;
use super::node::{Dest, NodeOptions, NodeScheduler};
use crate::marshal::Value;
use crate::msg::{ConfSpec, CrawlQueueEntry, Message, UriMsg, UriStructure};
use tempfile::TempDir;

fn open(dir: &std::path::Path) -> NodeScheduler {
    NodeScheduler::open(dir, NodeOptions::new(b"n1")).unwrap()
}

/// Adds collection `c`, without start URIs (CMD_ADM_CONF_ADD).
fn add_collection(n: &mut NodeScheduler) {
    let conf = Message::CmdAdmConfAdd(ConfSpec {
        collection: Cow::Borrowed(b"c"),
        config: meta(vec![("start_uris", Value::list(Vec::new()))]),
        epoch: None,
    });
    n.handle_message(&Dest::Multinode, conf, 0).unwrap();
}

/// Sends collection `c` the same `count` links, over seven sites, as CMD_UM_URI.
fn queue_links(n: &mut NodeScheduler, count: usize) {
    for i in 0..count {
        let u = format!("http://10.0.{}.1/p{i}.html", i % 7);
        n.handle_message(&Dest::Multinode, uri(u), 0).unwrap();
    }
}

fn uri(u: String) -> Message<'static> {
    Message::CmdUmUri(UriMsg {
        collection: Cow::Borrowed(b"c"),
        entry: CrawlQueueEntry::new(UriStructure::unparsed(Cow::Owned(u.into_bytes()))),
    })
}

/// A node with collection `c`: 40 links queued over seven sites and synced, then 25 of them
/// taken by a dispatch (waiting in memory for their sites' CMD_UM_START_CRAWL_IP), 15 queued.
fn forty_queued_twenty_five_taken(dir: &std::path::Path) -> NodeScheduler {
    let mut n = open(dir);
    add_collection(&mut n);
    queue_links(&mut n, 40);
    n.sync().unwrap();
    n.dispatch(25, 1000).unwrap();
    assert_eq!(n.queued(b"c"), Some((15, 0)));
    n
}

/// CMD_ADM_CONF_SUSPEND (state 4) of collection `c`: every site stops, its entries go back to
/// the queue (3.1.5.4).
fn suspend_c() -> Message<'static> {
    Message::CmdAdmConfSuspend(crate::msg::ConfSuspend {
        collection: Cow::Borrowed(b"c"),
        state: crate::msg::types::conf_state::SUSPENDED_USER,
    })
}

/// Entries the site manager took from the queue (sites waiting for CMD_UM_START_CRAWL_IP) and
/// the node killed before its next sync: they were in neither the queue nor the journal's
/// written records, so the restart lost them (their URIs seen, never fetched).
#[test]
fn entries_taken_from_the_queue_survive_a_kill_before_the_next_sync() {
    let dir = TempDir::with_prefix("crawlfleet-sched-kill-").unwrap();
    // Taken: 25 entries now wait in memory for their sites' permission.
    let n = forty_queued_twenty_five_taken(dir.path());
    assert_eq!(n.queued_in_memory(b"c").map(|(held, _)| held), Some(25));
    std::mem::forget(n);
    let n = open(dir.path());
    assert_eq!(
        n.queued(b"c"),
        Some((40, 0)),
        "the 25 entries taken before the kill are queued again"
    );
}

/// A pop not yet published is still queued after a kill; once published it is gone.
#[test]
fn a_pop_outlives_a_kill_only_once_published() {
    use crate::queue::{CrawlQueue, QueueOptions};
    let dir = TempDir::with_prefix("crawlfleet-queue-kill-").unwrap();
    let path = dir.path().join("q");
    let mut q = CrawlQueue::open(&path, QueueOptions::default()).unwrap();
    for r in [&b"a"[..], b"b", b"c"] {
        q.push_back(r).unwrap();
    }
    assert_eq!(
        q.pop_front_unpublished().unwrap().as_deref(),
        Some(&b"a"[..])
    );
    assert!(q.has_unpublished());
    std::mem::forget(q);
    let mut q = CrawlQueue::open(&path, QueueOptions::default()).unwrap();
    assert_eq!(q.len(), 3, "the unpublished pop is undone by the kill");
    assert_eq!(
        q.pop_front_unpublished().unwrap().as_deref(),
        Some(&b"a"[..])
    );
    q.publish().unwrap();
    assert!(!q.has_unpublished());
    std::mem::forget(q);
    let q = CrawlQueue::open(&path, QueueOptions::default()).unwrap();
    assert_eq!(q.len(), 2, "the published pop outlives the kill");
}

/// A push made without publishing is gone after a kill; once published it outlives one
/// (what `put_back` relies on to write the journal's `-` records only after its pushes).
#[test]
fn a_push_outlives_a_kill_only_once_published() {
    use crate::queue::{CrawlQueue, QueueOptions};
    let dir = TempDir::with_prefix("crawlfleet-queue-kill-push-").unwrap();
    let path = dir.path().join("q");
    let mut q = CrawlQueue::open(&path, QueueOptions::default()).unwrap();
    q.push_back(b"a").unwrap();
    q.push_unpublished(b"front", true).unwrap();
    q.push_unpublished(b"back", false).unwrap();
    assert_eq!(q.len(), 3);
    assert!(q.has_unpublished());
    std::mem::forget(q);
    let mut q = CrawlQueue::open(&path, QueueOptions::default()).unwrap();
    assert_eq!(q.len(), 1, "the unpublished pushes are undone by the kill");
    q.push_unpublished(b"front", true).unwrap();
    q.push_unpublished(b"back", false).unwrap();
    q.publish().unwrap();
    std::mem::forget(q);
    let mut q = CrawlQueue::open(&path, QueueOptions::default()).unwrap();
    let mut all = Vec::new();
    while let Some(r) = q.pop_front().unwrap() {
        all.push(r);
    }
    assert_eq!(
        all,
        [&b"front"[..], b"a", b"back"],
        "published pushes outlive the kill"
    );
}

/// Entries taken from the queue and put back in it (the collection suspended, 3.1.5.4: its
/// sites stopped) are finished in the journal in the same turn: a kill right after must not
/// find them both queued and journaled as taken, which crawled each of them twice after the
/// restart (the queue's push outlives the kill at once, the journal's `-` waited in memory
/// for the next sync).
#[test]
fn entries_put_back_in_the_queue_are_not_queued_twice_after_a_kill() {
    let dir = TempDir::with_prefix("crawlfleet-sched-kill-back-").unwrap();
    let mut n = forty_queued_twenty_five_taken(dir.path());
    n.handle_message(&Dest::Multinode, suspend_c(), 0).unwrap();
    assert_eq!(n.queued(b"c"), Some((40, 0)));
    std::mem::forget(n);
    let n = open(dir.path());
    assert_eq!(
        n.queued(b"c"),
        Some((40, 0)),
        "each entry queued once after the kill, not again from the journal"
    );
}

/// A URI queued in a turn is recorded as seen once the turn ends (`end_turn`, which the node's
/// shell calls after each turn): the queue's push outlives a kill at once, and the same link
/// found again after the restart (on a page fetched again) must not queue it a second time.
#[test]
fn a_uri_queued_before_a_kill_is_not_queued_again_by_the_same_link() {
    let dir = TempDir::with_prefix("crawlfleet-sched-kill-seen-").unwrap();
    let mut n = open(dir.path());
    add_collection(&mut n);
    n.sync().unwrap();
    queue_links(&mut n, 30);
    n.end_turn().unwrap();
    assert_eq!(n.queued(b"c"), Some((30, 0)));
    std::mem::forget(n);
    let mut n = open(dir.path());
    assert_eq!(n.queued(b"c"), Some((30, 0)));
    queue_links(&mut n, 30);
    assert_eq!(
        n.queued(b"c"),
        Some((30, 0)),
        "the URIs queued before the kill are seen after it"
    );
}

/// The put-back's journal record is written before its pushes are published (MS-FSCMT 3.1.5.4:
/// a suspended collection's sites stop, their entries go back to the queue): a kill after the
/// record's write and before the publication, or one that cuts the record's write, leaves the
/// entries in the journal only, each queued once after the restart. Written after the
/// publication, a cut write left the rest of the batch queued and outstanding, crawled twice
/// (docs/performance.md, "The third window, narrowed").
#[test]
fn a_put_back_killed_before_its_publication_or_in_its_write_queues_each_entry_once() {
    for cut in [0u64, 5, 100] {
        let dir = TempDir::with_prefix("crawlfleet-sched-kill-putback-").unwrap();
        let mut n = forty_queued_twenty_five_taken(dir.path());
        super::node::KILL_BEFORE_PUT_BACK_PUBLISHED.set(true);
        let r = n.handle_message(&Dest::Multinode, suspend_c(), 0);
        super::node::KILL_BEFORE_PUT_BACK_PUBLISHED.set(false);
        r.unwrap();
        std::mem::forget(n);
        // The record of the 25 entries is the journal's last: cut `cut` bytes off its end, as
        // a SIGKILL in the middle of its write does.
        let journal = find_file(dir.path(), "inflight");
        let len = std::fs::metadata(&journal).unwrap().len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&journal)
            .unwrap();
        f.set_len(len - cut).unwrap();
        drop(f);
        let n = open(dir.path());
        assert_eq!(
            n.queued(b"c"),
            Some((40, 0)),
            "cut {cut}: each entry queued once after the kill, from the journal"
        );
    }
}

/// A dispatch that takes many entries publishes its pops every 128 entries, once their journal
/// records are written: a kill inside a dispatch of 1,000 (the journal written up to the kill,
/// the pops since the last publication not published) leaves at most 128 entries both queued
/// and journaled, none in neither. Published only at the end, the 600 taken before the kill
/// were queued twice after the restart.
#[test]
fn a_kill_inside_a_long_dispatch_queues_few_entries_twice() {
    let dir = TempDir::with_prefix("crawlfleet-sched-kill-dispatch-").unwrap();
    let mut n = open(dir.path());
    add_collection(&mut n);
    queue_links(&mut n, 1000);
    n.sync().unwrap();
    super::node::KILL_IN_DISPATCH_AT.set(600);
    let r = n.dispatch(1000, 1000);
    super::node::KILL_IN_DISPATCH_AT.set(0);
    assert!(
        super::node::KILLED_IN_DISPATCH.replace(false),
        "killed at the 600th"
    );
    r.unwrap();
    std::mem::forget(n);
    let n = open(dir.path());
    let (queued, _) = n.queued(b"c").unwrap();
    assert!(
        (1000..=1000 + 128).contains(&queued),
        "{queued} queued after the kill: 1,000 entries, at most 128 of them twice"
    );
}

/// The file named `name` under `dir`.
fn find_file(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    fn find(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
        for e in std::fs::read_dir(dir).ok()? {
            let p = e.ok()?.path();
            if p.is_dir() {
                if let Some(f) = find(&p, name) {
                    return Some(f);
                }
            } else if p.file_name().is_some_and(|f| f == name) {
                return Some(p);
            }
        }
        None
    }
    find(dir, name).unwrap_or_else(|| panic!("no {name} under {}", dir.display()))
}
