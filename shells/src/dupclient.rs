//! The node scheduler's connection to the duplicate server, with failover to the replica.
//!
//! The client keeps one outgoing link: to the duplicate server, or, after failover, to the
//! replica. Every PPDUP_KEEPALIVE interval it sends a keep-alive; when nothing has come back
//! from the server for `max_missed` intervals (or the link has been down that long), it drops the
//! link and connects to the replica, which then serves as duplicate server (MS-FSCMT 3.4 and
//! DESIGN.md). Checksum messages not yet answered are resent on the new connection after the
//! collection configurations, so nothing is lost: an add acknowledged by the server was
//! acknowledged by the replica first (3.3.5.4), and a resent add is answered with the same owner.
//!
//! The owner drives it from its own event loop: it passes every event of the client's link to
//! [`DupClient::on_event`] and calls [`DupClient::on_keepalive`] on its keep-alive timer.

use std::collections::VecDeque;
use std::net::SocketAddr;

use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::Limits;
use crawlfleet_core::msg::Message;
use crawlfleet_net::{ConnId, Event, Handle, LinkId, LoopStopped};
use log::{info, warn};

/// Which duplicate server the client talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The duplicate server.
    Server,
    /// The replica, after failover.
    Replica,
}

/// A duplicate-server client with failover.
pub struct DupClient {
    handle: Handle,
    server: SocketAddr,
    replica: Option<SocketAddr>,
    target: Target,
    link: LinkId,
    conn: Option<ConnId>,
    /// SET_CONFIG frames, replayed on every new connection.
    configs: Vec<Vec<u8>>,
    /// Checksum messages sent and not answered yet, oldest first.
    pending: VecDeque<Pending>,
    /// Keep-alive intervals since anything arrived from the current target.
    silent: u32,
    max_missed: u32,
}

/// A PPDUP_ADD or PPDUP_REMOVE awaiting its answer.
struct Pending {
    remove: bool,
    collection: Vec<u8>,
    uri: Vec<u8>,
    frame: Vec<u8>,
}

/// Drops the pending message an answer is for. Answers are matched by command, collection and
/// URI, not by position: a server with a replica answers a checksum's later messages only after
/// its earlier one, so answers can overtake each other (MS-FSCMT 3.3.5.4). A PPDUP_ERROR names
/// no URI: it answers the oldest.
fn settle(pending: &mut VecDeque<Pending>, m: &Message<'_>) {
    let key = match m {
        Message::PpdupAddOk(ok) => Some((false, &ok.collection[..], &ok.uri[..])),
        Message::PpdupRemoveOk(ok) => Some((true, &ok.collection[..], &ok.uri[..])),
        _ => None,
    };
    let at = key.and_then(|(remove, collection, uri)| {
        pending
            .iter()
            .position(|p| p.remove == remove && p.collection == collection && p.uri == uri)
    });
    match at {
        Some(i) => {
            pending.remove(i);
        }
        None => {
            pending.pop_front();
        }
    }
}

fn encode(m: &Message<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    frame::encode_message(m, Priority::Normal, &mut out);
    out
}

impl DupClient {
    /// Connects to `server`; fails over to `replica` after `max_missed` silent keep-alive
    /// intervals.
    pub fn new(
        handle: Handle,
        server: SocketAddr,
        replica: Option<SocketAddr>,
        max_missed: u32,
    ) -> Result<DupClient, LoopStopped> {
        let link = handle.connect(server)?;
        Ok(DupClient {
            handle,
            server,
            replica,
            target: Target::Server,
            link,
            conn: None,
            configs: Vec::new(),
            pending: VecDeque::new(),
            silent: 0,
            max_missed: max_missed.max(1),
        })
    }

    /// The server currently used.
    pub fn target(&self) -> Target {
        self.target
    }

    /// The link the client's events arrive on.
    pub fn link(&self) -> LinkId {
        self.link
    }

    /// True when `conn` is the client's current connection.
    pub fn owns(&self, conn: ConnId) -> bool {
        self.conn == Some(conn)
    }

    /// Checksum messages waiting for their answer.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Sends a message. PPDUP_SET_CONFIG is remembered and replayed after a reconnect or a
    /// failover; PPDUP_ADD and PPDUP_REMOVE are kept until answered.
    pub fn send(&mut self, m: &Message<'_>) -> Result<(), LoopStopped> {
        let bytes = encode(m);
        match m {
            Message::PpdupSetConfig(_) => self.configs.push(bytes.clone()),
            Message::PpdupAdd(c) | Message::PpdupRemove(c) => self.pending.push_back(Pending {
                remove: matches!(m, Message::PpdupRemove(_)),
                collection: c.collection.to_vec(),
                uri: c.uri.to_vec(),
                frame: bytes.clone(),
            }),
            _ => {}
        }
        match self.conn {
            Some(conn) => self.handle.send(conn, Priority::Normal, bytes),
            // Sent (with everything pending) when the link comes up.
            None => Ok(()),
        }
    }

    /// Handles an event of the client's link; returns the messages that arrived (answers,
    /// PPDUP_PROMOTE_REQ, errors), keep-alives already answered.
    pub fn on_event(&mut self, ev: Event) -> Result<Vec<Message<'static>>, LoopStopped> {
        let mut out = Vec::new();
        match ev {
            Event::Connected { conn, link, peer } if link == self.link => {
                info!("duplicate server {peer} connected ({:?})", self.target);
                self.conn = Some(conn);
                self.silent = 0;
                // Configurations first, then every unanswered checksum message, in order.
                let mut replay = Vec::new();
                for c in &self.configs {
                    replay.extend_from_slice(c);
                }
                for p in &self.pending {
                    replay.extend_from_slice(&p.frame);
                }
                if !replay.is_empty() {
                    self.handle.send(conn, Priority::Normal, replay)?;
                }
            }
            Event::Closed { conn, .. } if Some(conn) == self.conn => {
                warn!("duplicate server connection lost ({:?})", self.target);
                self.conn = None;
            }
            Event::Frames(batch) if Some(batch.conn()) == self.conn => {
                self.silent = 0;
                let limits = Limits::default();
                for (_, body) in batch.iter() {
                    let m = match frame::decode_message(body, &limits) {
                        Ok((_, m)) => m.into_owned(),
                        Err(e) => {
                            warn!("duplicate server sent a bad message: {e}");
                            continue;
                        }
                    };
                    match &m {
                        Message::PpdupKeepalive => {
                            if let Some(conn) = self.conn {
                                self.handle.send(
                                    conn,
                                    Priority::Normal,
                                    encode(&Message::PpdupKeepaliveAck),
                                )?;
                            }
                            continue;
                        }
                        Message::PpdupKeepaliveAck | Message::PpdupConfigAck(_) => continue,
                        Message::PpdupAddOk(_)
                        | Message::PpdupRemoveOk(_)
                        | Message::PpdupError(_) => settle(&mut self.pending, &m),
                        _ => {}
                    }
                    out.push(m);
                }
            }
            _ => {}
        }
        Ok(out)
    }

    /// The keep-alive timer: send a keep-alive, count silence, fail over when it lasts.
    pub fn on_keepalive(&mut self) -> Result<(), LoopStopped> {
        self.silent += 1;
        if self.silent > self.max_missed && self.target == Target::Server {
            if let Some(replica) = self.replica {
                warn!(
                    "duplicate server {} silent for {} keep-alive intervals: failing over to the replica {replica}",
                    self.server, self.max_missed
                );
                self.handle.disconnect(self.link)?;
                self.conn = None;
                self.target = Target::Replica;
                self.link = self.handle.connect(replica)?;
                self.silent = 0;
                return Ok(());
            }
        }
        if let Some(conn) = self.conn {
            self.handle
                .send(conn, Priority::Normal, encode(&Message::PpdupKeepalive))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crawlfleet_core::msg::{PpdupAddOk, PpdupRemoveOk};

    fn pending(remove: bool, uri: &str) -> Pending {
        Pending {
            remove,
            collection: b"c".to_vec(),
            uri: uri.as_bytes().to_vec(),
            frame: uri.as_bytes().to_vec(),
        }
    }

    fn left(q: &VecDeque<Pending>) -> Vec<&[u8]> {
        q.iter().map(|p| &p.frame[..]).collect()
    }

    #[test]
    fn answers_that_overtake_each_other_settle_the_message_they_answer() {
        let mut q: VecDeque<Pending> = [
            pending(false, "http://a/"),
            pending(false, "http://b/"),
            pending(true, "http://b/"),
        ]
        .into_iter()
        .collect();
        // The REMOVE of b is answered first, then the ADD of b: a stays unanswered, and is what
        // a failover would send again.
        settle(
            &mut q,
            &Message::PpdupRemoveOk(PpdupRemoveOk {
                collection: b"c".as_slice().into(),
                uri: b"http://b/".as_slice().into(),
                node_id: None,
                ppdup_id: None,
                dbname: None,
            }),
        );
        let ok = |uri: &'static str| {
            Message::PpdupAddOk(PpdupAddOk {
                collection: b"c".as_slice().into(),
                node_id: b"n".as_slice().into(),
                uri: uri.as_bytes().into(),
                owner_uri: None,
                ppdup_id: None,
                dbname: None,
            })
        };
        settle(&mut q, &ok("http://b/"));
        assert_eq!(left(&q), vec![&b"http://a/"[..]]);
        // An answer for nothing pending (or an error) settles the oldest.
        let mut q: VecDeque<Pending> = [pending(false, "http://a/"), pending(false, "http://b/")]
            .into_iter()
            .collect();
        settle(&mut q, &ok("http://z/"));
        assert_eq!(left(&q), vec![&b"http://b/"[..]]);
    }
}
