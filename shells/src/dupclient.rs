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
    /// Checksum frames sent and not answered yet, oldest first (replies come in order).
    pending: VecDeque<Vec<u8>>,
    /// Keep-alive intervals since anything arrived from the current target.
    silent: u32,
    max_missed: u32,
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
            Message::PpdupAdd(_) | Message::PpdupRemove(_) => self.pending.push_back(bytes.clone()),
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
                    replay.extend_from_slice(p);
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
                        | Message::PpdupError(_) => {
                            self.pending.pop_front();
                        }
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
