//! The node scheduler's timers (MS-FSCMT 3.1.6 "Timer Events": the Multinode Scheduler and
//! Duplicate Server Keep-Alive timeouts, the Quarantine and Statistics timeouts), CMD_UM_LOG
//! lines, and the shell's sync timer.

use super::diskfull::Target;
use super::*;

impl NodeScheduler {
    /// Multinode Scheduler Keep-Alive timer (3.1.6).
    pub fn multinode_keepalive_tick(&mut self) {
        if self.opts.standalone || !self.multinode_connected {
            return;
        }
        if self.multinode_keepalive_pending {
            warn!("the multinode scheduler did not answer the last CMD_UM_KEEPALIVE");
        }
        self.multinode_keepalive_pending = true;
        self.send_multinode(Priority::Normal, &Message::CmdUmKeepalive);
    }

    /// Duplicate Server Keep-Alive timer (3.1.6).
    pub fn dup_keepalive_tick(&mut self) {
        let addrs: Vec<String> = self
            .dups
            .iter()
            .filter(|(_, d)| d.connected)
            .map(|(a, _)| a.clone())
            .collect();
        for a in addrs {
            let d = self.dups.get_mut(&a).expect("listed above");
            if d.keepalive_pending {
                warn!("duplicate server {a} did not answer the last PPDUP_KEEPALIVE");
            }
            d.keepalive_pending = true;
            self.out
                .send(Dest::Dup(a), Priority::Normal, &Message::PpdupKeepalive);
        }
    }

    /// Quarantine timer (3.1.6): ends expired quarantines and blocks; the set-aside entries of
    /// freed sites return to the front of the crawl queue.
    pub fn quarantine_tick(&mut self, now: i64) -> Result<(), SchedError> {
        for (name, c) in self.collections.iter_mut() {
            if c.is_disk_full() {
                // The entries stay where they are durable until room returns (a move the crawl
                // queue refused would wait in memory); the next tick after that moves them.
                continue;
            }
            let before = c.sites.quarantine.len() + c.sites.blocked.len();
            c.sites.quarantine.retain(|_, &mut t| t > now);
            c.sites.blocked.retain(|_, &mut t| t > now);
            let expired = before != c.sites.quarantine.len() + c.sites.blocked.len();
            if !expired || c.quarantine_queue.is_empty() {
                continue;
            }
            let n = c.quarantine_queue.len();
            // The pops are published (by the pushes back into the quarantine queue, or at the
            // end) only once every entry is in the queue it goes to: a kill in between leaves
            // them in the quarantine queue, not in memory alone.
            let mut free = Vec::new();
            let mut held = Vec::new();
            for _ in 0..n {
                let Some(rec) = c.quarantine_queue.pop_front_unpublished()? else {
                    break;
                };
                let site = parse_record(&rec)
                    .ok()
                    .and_then(|(e, _)| crawl_site(&e.uri.uri))
                    .unwrap_or_default();
                if c.sites.quarantine.contains_key(&site) || c.sites.blocked.contains_key(&site) {
                    held.push(rec);
                } else {
                    free.push(rec);
                }
            }
            for r in free.iter().rev() {
                c.enqueue(Target::Queue, true, r, None)?;
            }
            for r in &held {
                c.enqueue(Target::Quarantine, false, r, None)?;
            }
            c.quarantine_queue.publish()?;
            debug!(
                "collection {}: {} entries back from quarantine",
                show(name),
                free.len()
            );
        }
        Ok(())
    }

    /// Statistics timer (3.1.6): CMD_UM_STAT with the delta since the last one.
    pub fn stats_tick(&mut self) {
        let mut msgs = Vec::new();
        for (name, c) in self.collections.iter_mut() {
            let cur = c.counters;
            let s = c.sent;
            let delta = NodeCounters {
                uris_queued: cur.uris_queued - s.uris_queued,
                uris_forwarded: cur.uris_forwarded - s.uris_forwarded,
                uris_quarantined: cur.uris_quarantined - s.uris_quarantined,
                uris_dropped: cur.uris_dropped - s.uris_dropped,
                sites_started: cur.sites_started - s.sites_started,
                sites_blocked: cur.sites_blocked - s.sites_blocked,
                uris_seen: cur.uris_seen - s.uris_seen,
                uris_held_refresh_only: cur.uris_held_refresh_only - s.uris_held_refresh_only,
                indexnow_queued: cur.indexnow_queued - s.indexnow_queued,
            };
            c.sent = cur;
            // One CMD_UM_STAT per refresh cycle reported; the node's own counters go with
            // the last (the current cycle's).
            let mut reports = std::mem::take(&mut c.stat_reports);
            if reports.is_empty() {
                reports.push(Value::Dict(Vec::new()));
            }
            if let Some(Value::Dict(last)) = reports.last_mut() {
                if let Value::Dict(own) = delta.to_value() {
                    last.extend(own);
                }
            }
            for stats in reports {
                msgs.push(Message::CmdUmStat(Stat {
                    collection: owned(name),
                    stats,
                }));
            }
        }
        for m in msgs {
            self.send_multinode(Priority::Normal, &m);
        }
    }

    /// Sends a line to one of the collection's log files at the multinode scheduler
    /// (CMD_UM_LOG: "si", "ur", "sc" or "dk").
    pub fn log(&mut self, name: &[u8], logfile: &[u8], message: &[u8]) {
        let m = Message::CmdUmLog(Log {
            collection: owned(name),
            logfile: owned(logfile),
            message: owned(message),
        });
        self.send_multinode(Priority::Normal, &m);
    }
}
