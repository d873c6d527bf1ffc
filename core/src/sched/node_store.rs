//! The node scheduler's crawl store and document feed (MS-FSCADM 3.3.1, MS-FSCMT 3.1.5.14-16,
//! 3.1.5.23): what became of every fetched document, and the add / update / delete operations
//! sent to the collection's feed.
//!
//! A fetched document is compared with the crawl store's record of its URI: the same checksum
//! is **unchanged** (nothing fed), otherwise the duplicate check decides (PPDUP_ADD, or the
//! node's checksum database without duplicate servers) and the document is fed as an **add**
//! (first time) or **update** (modified), or recorded as a **duplicate** (`cs`). A 304 answer
//! is unchanged; a 404 or 410 for a stored document feeds a **delete** and PPDUP_REMOVE.
//!
//! Durability: the crawl queue entry of a document stays in the in-flight journal until the
//! document is fed. [`NodeScheduler::sync`] makes the feed durable first, then the crawl
//! store, and only then marks the finished entries done, so a node killed at any point either
//! fetches an entry again (and finds it unchanged when its document was already fed) or has
//! finished it for good.
//!
//! The one gap in that order, a kill after the feed's sync and before the store's, is closed
//! at startup: [`FED_MARK`] names the first document-log sequence number the store may not hold
//! (written after every store sync), and [`replay_feed`] records what the log holds from there
//! (and everything held by a feeding suspend) in the store. A document is therefore fed once
//! even when the node dies between the two syncs.

use std::borrow::Cow;
use std::path::Path;

use log::{info, warn};

use super::{Collection, NodeScheduler, Verdict};
use crate::crawl::{header, Document};
use crate::feed::{DocLogReader, FeedDoc, FeedError, FeedOp, FeedSink, DOCS_DIR, HELD_DIR};
use crate::msg::{Checksum, Message, PpdupChecksum};
use crate::routing::crawl_site;
use crate::sched::multinode::SchedError;
use crate::sched::show;
use crate::store::{CrawlStore, UriRecord, UriState};

/// What became of a document (the crawl counters of MS-FSCADM 2.2.4.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Fed for the first time (`Stored`, `PPAdded`).
    Added,
    /// Fed again with new content (`Stored`, `Modified`).
    Modified,
    /// The same content as the stored copy (`Unchanged`): not fed again.
    Unchanged,
    /// Another URI owns the checksum (skip code `cs`): not fed.
    Duplicate,
    /// The stored copy was deleted and a delete fed (`Deleted`).
    Deleted,
}

/// The conditional request headers for a URI whose stored copy carries validators
/// (RFC 9110 13.1.1-2: If-None-Match, If-Modified-Since).
pub(super) fn conditional_headers(store: &CrawlStore, uri: &[u8]) -> Vec<(String, String)> {
    let Some(rec) = store.get(uri) else {
        return Vec::new();
    };
    if rec.state != UriState::Stored {
        return Vec::new();
    }
    let text = |v: &Option<Vec<u8>>| {
        v.as_deref()
            .and_then(|b| std::str::from_utf8(b).ok())
            .map(str::to_string)
    };
    let mut h = Vec::new();
    if let Some(e) = text(&rec.etag) {
        h.push(("If-None-Match".to_string(), e));
    }
    if let Some(l) = text(&rec.last_modified) {
        h.push(("If-Modified-Since".to_string(), l));
    }
    h
}

/// The file in a collection's directory that holds the first document-log sequence number
/// whose document the crawl store may not hold yet ([`FedMark`]: two checked slots written in
/// place).
pub(super) const FED_MARK: &str = "store-fed";

#[path = "node_fedmark.rs"]
mod fedmark;
pub(super) use fedmark::FedMark;

/// Records one fed document in the store unless the store already says the same.
fn apply_fed(store: &mut CrawlStore, doc: &FeedDoc, cycle: u32) -> Result<bool, SchedError> {
    let prev = store.get(&doc.uri);
    let stored_as =
        |cs: &[u8; 16]| prev.is_some_and(|p| p.state == UriState::Stored && p.checksum == *cs);
    let rec = match doc.op {
        FeedOp::Add | FeedOp::Update if stored_as(&doc.checksum) => return Ok(false),
        FeedOp::Add | FeedOp::Update => UriRecord {
            checksum: doc.checksum,
            first_seen: prev.map_or(doc.time, |p| p.first_seen),
            last_crawl: doc.time,
            etag: header(&doc.headers, "etag").map(<[u8]>::to_vec),
            last_modified: header(&doc.headers, "last-modified").map(<[u8]>::to_vec),
            status: doc.status,
            state: UriState::Stored,
            cycle,
            size: u32::try_from(doc.body.len()).unwrap_or(u32::MAX),
        },
        FeedOp::Delete if stored_as(&doc.checksum) => {
            let mut r = prev.cloned().expect("stored_as saw it");
            r.state = UriState::Deleted;
            r.last_crawl = doc.time;
            r
        }
        FeedOp::Delete => return Ok(false),
    };
    store.put(&doc.uri, rec.keepable())?;
    Ok(true)
}

/// Brings a collection's crawl store up to its feed after a restart: every document the
/// document log holds from the saved mark on, then every held document, is recorded unless
/// the store already has it. Returns the mark, set to the log's next sequence number.
pub(super) fn replay_feed(
    name: &[u8],
    dir: &Path,
    store: &mut CrawlStore,
    cycle: i64,
) -> Result<FedMark, SchedError> {
    let cycle = u32::try_from(cycle.max(0)).unwrap_or(u32::MAX);
    let mut mark = FedMark::read(dir);
    let from = mark.seq();
    let (mut read, mut applied, mut next) = (0u64, 0u64, from);
    let docs = dir.join(DOCS_DIR);
    if docs.exists() {
        for r in DocLogReader::open_from(&docs, from)? {
            let (seq, doc) = r?;
            read += 1;
            applied += u64::from(apply_fed(store, &doc, cycle)?);
            next = seq + 1;
        }
    }
    let held = dir.join(HELD_DIR);
    if held.exists() {
        for r in DocLogReader::open(&held)? {
            let (_, doc) = r?;
            read += 1;
            applied += u64::from(apply_fed(store, &doc, cycle)?);
        }
    }
    if applied > 0 {
        store.sync()?;
        info!(
            "collection {}: {applied} of the {read} documents fed after the last store sync recorded in the crawl store",
            show(name)
        );
    }
    mark.set(next);
    Ok(mark)
}

impl From<FeedError> for SchedError {
    fn from(e: FeedError) -> Self {
        SchedError::Feed(e)
    }
}

impl Collection {
    pub(super) fn cycle(&self) -> u32 {
        u32::try_from(self.refresh.cycle.max(0)).unwrap_or(u32::MAX)
    }

    fn feed(&mut self, doc: &FeedDoc) -> Result<(), SchedError> {
        match self.feeding.feeder.feed(doc) {
            Ok(_) => Ok(()),
            // A document over the log's limits is refused alone; the crawl goes on.
            Err(e @ FeedError::TooLarge { .. }) => {
                warn!("{}: not fed: {e}", show(&doc.uri));
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Feeds a delete for `uri` and marks it deleted (the record stays, so that a later fetch
    /// is an add again); returns the checksum the URI owned.
    pub(super) fn delete_stored(
        &mut self,
        uri: &[u8],
        keep_record: bool,
    ) -> Result<Option<Checksum>, SchedError> {
        let Some(prev) = self.store.get(uri).cloned() else {
            return Ok(None);
        };
        if keep_record {
            let mut rec = prev.clone();
            rec.state = UriState::Deleted;
            rec.last_crawl = self.clock.now_u64();
            rec.cycle = self.cycle();
            self.store.put(uri, rec)?;
        } else {
            self.store.remove(uri)?;
        }
        if prev.state != UriState::Stored {
            return Ok(None);
        }
        self.feed(&FeedDoc {
            op: FeedOp::Delete,
            uri: uri.to_vec(),
            checksum: prev.checksum,
            time: self.clock.now_u64(),
            status: prev.status,
            headers: Vec::new(),
            body: Vec::new(),
        })?;
        let cs = Checksum(prev.checksum);
        if let Some(owners) = self.dedup.checksums.get_mut(&cs) {
            owners.remove(uri);
            if owners.is_empty() {
                self.dedup.checksums.remove(&cs);
            }
        }
        Ok(Some(cs))
    }
}

impl NodeScheduler {
    pub(super) fn send_ppdup_remove(&mut self, name: &[u8], uri: &[u8], cs: Checksum) {
        let Some(c) = self.collections.get_mut(name) else {
            return;
        };
        let servers = super::ppdup_servers(&c.dict);
        if !servers.is_empty() {
            c.dedup
                .pending_removes
                .entry(uri.to_vec())
                .or_default()
                .push_back(cs);
        }
        let m = Message::PpdupRemove(PpdupChecksum {
            collection: Cow::Owned(name.to_vec()),
            node_id: Cow::Owned(self.opts.node_id.clone()),
            uri: Cow::Owned(uri.to_vec()),
            checksum: cs,
            ppdup_id: None,
            dbname: None,
        });
        self.send_dups(&servers, crate::frame::Priority::Normal, &m);
    }

    /// A fetched document: unchanged (verdict now), or held for the duplicate check (verdict
    /// later through [`NodeScheduler::take_verdicts`], or now without duplicate servers).
    pub fn document(&mut self, doc: Box<Document>) -> Result<Option<Verdict>, SchedError> {
        let name = doc.collection.clone();
        let Some(c) = self.collections.get_mut(&name) else {
            return Ok(None);
        };
        let refeed = doc.uri_flags & crate::msg::types::uri_flags::URIF_FORCE != 0;
        if let Some(prev) = c.store.get(&doc.uri) {
            if prev.state == UriState::Stored && prev.checksum == doc.checksum.0 && !refeed {
                let mut rec = prev.clone();
                rec.last_crawl = self.opts.clock.now_u64();
                rec.cycle = c.cycle();
                rec.status = doc.status;
                c.store.put(&doc.uri, rec)?;
                c.finished.push(doc.seq);
                return Ok(Some(Verdict {
                    collection: name,
                    uri: doc.uri,
                    checksum: doc.checksum,
                    owner: Vec::new(),
                    fate: Fate::Unchanged,
                }));
            }
        }
        let (uri, checksum) = (doc.uri.clone(), doc.checksum);
        c.dedup
            .pending_docs
            .entry(uri.clone())
            .or_default()
            .push_back(doc);
        if self.ppdup_add(&name, &uri, checksum) {
            return Ok(None);
        }
        // No duplicate servers: the node's checksum database decides.
        let c = self.collections.get_mut(&name).expect("present above");
        let owner = match c.dedup.checksums.get(&checksum) {
            Some(owners) if !owners.contains(&uri) => owners
                .iter()
                .next()
                .map_or_else(|| uri.clone(), <[u8]>::to_vec),
            _ => uri.clone(),
        };
        self.resolve_document(&name, &uri, &owner)
    }

    /// The duplicate check of a held document answered: `owner` owns its checksum. Feeds it
    /// (add or update) when it is `uri` itself.
    pub(super) fn resolve_document(
        &mut self,
        name: &[u8],
        uri: &[u8],
        owner: &[u8],
    ) -> Result<Option<Verdict>, SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(None);
        };
        let Some(waiting) = c.dedup.pending_docs.get_mut(uri) else {
            return Ok(None);
        };
        let (doc, emptied) = (waiting.pop_front(), waiting.is_empty());
        if emptied {
            c.dedup.pending_docs.remove(uri);
        }
        let Some(mut doc) = doc else {
            return Ok(None);
        };
        let now = self.opts.clock.now_u64();
        let prev = c.store.get(uri).cloned();
        let was_stored = prev.as_ref().is_some_and(|p| p.state == UriState::Stored);
        let mut removed = None;
        // Read before the feed takes the headers and body (moved, not copied).
        let etag = doc.header("etag").map(<[u8]>::to_vec);
        let last_modified = doc.header("last-modified").map(<[u8]>::to_vec);
        let size = u32::try_from(doc.body.len()).unwrap_or(u32::MAX);
        let fate = if owner == uri {
            if let Some(p) = prev.as_ref().filter(|p| p.state == UriState::Stored) {
                if p.checksum != doc.checksum.0 {
                    removed = Some(Checksum(p.checksum));
                    if let Some(o) = c.dedup.checksums.get_mut(&Checksum(p.checksum)) {
                        o.remove(uri);
                    }
                }
            }
            c.dedup
                .checksums
                .entry(doc.checksum)
                .or_default()
                .insert(uri);
            c.feed(&FeedDoc {
                op: if was_stored {
                    FeedOp::Update
                } else {
                    FeedOp::Add
                },
                uri: uri.to_vec(),
                checksum: doc.checksum.0,
                time: now,
                status: doc.status,
                headers: std::mem::take(&mut doc.headers),
                body: std::mem::take(&mut doc.body),
            })?;
            if was_stored {
                Fate::Modified
            } else {
                Fate::Added
            }
        } else {
            if was_stored {
                // Its content is now another URI's: the copy fed before goes.
                removed = c.delete_stored(uri, false)?;
            }
            Fate::Duplicate
        };
        let rec = UriRecord {
            checksum: doc.checksum.0,
            first_seen: prev.as_ref().map_or(now, |p| p.first_seen),
            last_crawl: now,
            etag,
            last_modified,
            status: doc.status,
            state: if fate == Fate::Duplicate {
                UriState::Duplicate {
                    owner: Some(owner.to_vec()),
                }
            } else {
                UriState::Stored
            },
            cycle: c.cycle(),
            size,
        };
        c.store.put(uri, rec.keepable())?;
        c.finished.push(doc.seq);
        if let Some(cs) = removed {
            self.send_ppdup_remove(name, uri, cs);
        }
        Ok(Some(Verdict {
            collection: name.to_vec(),
            uri: uri.to_vec(),
            checksum: doc.checksum,
            owner: owner.to_vec(),
            fate,
        }))
    }

    /// A conditional request was answered 304: the stored copy is current.
    pub fn unchanged(&mut self, name: &[u8], uri: &[u8]) -> Result<Option<Verdict>, SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(None);
        };
        let Some(mut rec) = c.store.get(uri).cloned() else {
            return Ok(None);
        };
        rec.last_crawl = self.opts.clock.now_u64();
        rec.cycle = c.cycle();
        let checksum = Checksum(rec.checksum);
        c.store.put(uri, rec)?;
        Ok(Some(Verdict {
            collection: name.to_vec(),
            uri: uri.to_vec(),
            checksum,
            owner: Vec::new(),
            fate: Fate::Unchanged,
        }))
    }

    /// The server answered 404 or 410: a stored copy is deleted (a delete fed, PPDUP_REMOVE).
    pub fn gone(&mut self, name: &[u8], uri: &[u8]) -> Result<Option<Verdict>, SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(None);
        };
        let was_stored = c
            .store
            .get(uri)
            .is_some_and(|r| r.state == UriState::Stored);
        let removed = c.delete_stored(uri, true)?;
        if let Some(cs) = removed {
            self.send_ppdup_remove(name, uri, cs);
        }
        Ok(was_stored.then(|| Verdict {
            collection: name.to_vec(),
            uri: uri.to_vec(),
            checksum: removed.unwrap_or(Checksum([0; 16])),
            owner: Vec::new(),
            fate: Fate::Deleted,
        }))
    }

    /// Deletes the stored documents `hit` selects (delete site / delete URIs, FSCMT 3.1.5.15-16):
    /// a delete is fed for each document fed before, its checksum released (PPDUP_REMOVE), and
    /// its record removed. Returns how many documents were deleted.
    pub(super) fn delete_stored_matching(
        &mut self,
        name: &[u8],
        hit: &dyn Fn(&str, &[u8]) -> bool,
    ) -> Result<u64, SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(0);
        };
        let uris: Vec<Vec<u8>> = c
            .store
            .iter()
            .filter(|(u, _)| hit(&crawl_site(u).unwrap_or_default(), u))
            .map(|(u, _)| u.to_vec())
            .collect();
        let mut deleted = 0;
        let mut removes = Vec::new();
        for u in uris {
            if let Some(cs) = c.delete_stored(&u, false)? {
                deleted += 1;
                removes.push((u, cs));
            }
        }
        for (u, cs) in removes {
            self.send_ppdup_remove(name, &u, cs);
            // Counted as deleted (MS-FSCADM 2.2.4.9 Deleted, and so DocumentStore).
            self.verdicts.push(Verdict {
                collection: name.to_vec(),
                uri: u,
                checksum: cs,
                owner: Vec::new(),
                fate: Fate::Deleted,
            });
        }
        Ok(deleted)
    }

    /// CMD_UM_REPROCESS_SITE (FSCMT 3.1.5.14, 2.2.3.15): feeds the stored documents of `site`
    /// whose URI starts with `prefix` (is `prefix`, when `exact`) again, as updates, from the
    /// document log (the newest copy of each). Returns how many were fed.
    pub fn reprocess(
        &mut self,
        name: &[u8],
        site: &str,
        prefix: &[u8],
        exact: bool,
    ) -> Result<u64, SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(0);
        };
        let wanted: std::collections::HashSet<Vec<u8>> = c
            .store
            .uris_of_site(site)
            .into_iter()
            .filter(|u| {
                if exact {
                    u == prefix
                } else {
                    u.starts_with(prefix)
                }
            })
            .filter(|u| c.store.get(u).is_some_and(|r| r.state == UriState::Stored))
            .collect();
        if wanted.is_empty() {
            return Ok(0);
        }
        c.feeding.feeder.sync()?;
        let mut newest: std::collections::HashMap<Vec<u8>, FeedDoc> = Default::default();
        for r in DocLogReader::open(c.feeding.feeder.log().dir())? {
            let (_, d) = r?;
            if wanted.contains(&d.uri) {
                if d.op == FeedOp::Delete {
                    newest.remove(&d.uri);
                } else {
                    newest.insert(d.uri.clone(), d);
                }
            }
        }
        let mut fed = 0;
        let mut docs: Vec<FeedDoc> = newest.into_values().collect();
        docs.sort_by(|a, b| a.uri.cmp(&b.uri));
        for mut d in docs {
            d.op = FeedOp::Update;
            d.time = self.opts.clock.now_u64();
            c.feed(&d)?;
            fed += 1;
        }
        info!(
            "collection {}: reprocess site {site} prefix {}: {fed} documents fed again",
            show(name),
            show(prefix)
        );
        Ok(fed)
    }

    /// Holds (or resumes) feeding of a collection's documents (CMD_ADM_CONF_FEEDING_SUSPEND):
    /// held documents wait durably and are fed in order on resume.
    pub(super) fn set_feeding(&mut self, name: &[u8], suspend: bool) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(());
        };
        if suspend {
            c.feeding.feeder.suspend()?;
        } else if c.feeding.feeder.is_suspended() {
            let n = c.feeding.feeder.resume()?;
            info!(
                "collection {}: feeding resumed, {n} held documents fed",
                show(name)
            );
        }
        Ok(())
    }

    /// Documents in a collection's crawl store by state: (stored, duplicates, deleted).
    pub fn store_counts(&self, name: &[u8]) -> (u64, u64, u64) {
        let mut n = (0, 0, 0);
        if let Some(c) = self.collections.get(name) {
            for (_, r) in c.store.iter() {
                match r.state {
                    UriState::Stored => n.0 += 1,
                    UriState::Duplicate { .. } => n.1 += 1,
                    UriState::Deleted => n.2 += 1,
                    UriState::Error => {}
                }
            }
        }
        n
    }

    /// Once a collection's feed and crawl store are durable (`Collection::sync_all`): the
    /// feed's mark moves on and the entries whose documents they hold are finished (the order
    /// that loses nothing, see the module doc).
    pub(super) fn finish_stored(c: &mut Collection) -> Result<(), SchedError> {
        let next = c.feeding.feeder.log().next_seq();
        let mark = &mut c.feeding.fed_mark;
        if next != mark.seq() {
            if let Err(e) = mark.save(next) {
                // Only a longer replay at the next start.
                warn!("{}: {e}", mark.path().display());
            }
        }
        for seq in c.finished.drain(..) {
            c.inflight.done(seq)?;
        }
        Ok(())
    }
}
