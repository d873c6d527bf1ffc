//! crawlfleet's network layer: a hand-rolled mio event loop that moves framed messages between
//! TCP sockets and a role's threads over crossbeam channels.
//!
//! One loop thread owns the sockets: it accepts, reads and writes (each drained until
//! `WouldBlock`), cuts messages with a [`Framing`] (FSCMT by default: a 4-byte big-endian length,
//! then a marshal `(dict, priority)` body, MS-FSCMT 2.2.1), and hands them on in per-read
//! batches ([`Event::Frames`]). The role answers through a [`Handle`]: sends go into a
//! two-priority queue per connection (priority-1 frames ahead of queued priority-0 frames) and
//! leave in coalesced `writev` calls. The loop also keeps outgoing links up (reconnect with
//! exponential backoff) and runs the role's timers. A peer that sends an oversized or
//! undecodable frame loses its own connection, with a log line naming it and the reason; no
//! other connection notices.
//!
//! ```
//! use std::io::{Read, Write};
//! use crawlfleet_core::frame::{self, Priority};
//! use crawlfleet_core::marshal::Value;
//! use crawlfleet_net::{Event, EventLoop};
//!
//! // A loop that listens on a free loopback port; the role echoes every frame.
//! let lp = EventLoop::builder().listen("127.0.0.1:0".parse().unwrap()).spawn().unwrap();
//! let mut peer = std::net::TcpStream::connect(lp.local_addrs[0]).unwrap();
//! let mut msg = Vec::new();
//! frame::encode_dict(&vec![(Value::bytes(b"cmd"), Value::int(1))], Priority::High, &mut msg);
//! peer.write_all(&msg).unwrap();
//!
//! loop {
//!     match lp.events.recv().unwrap() {
//!         Event::Frames(batch) => {
//!             for i in 0..batch.len() {
//!                 let (priority, body) = batch.get(i).unwrap();
//!                 assert_eq!(priority, Priority::High);
//!                 assert!(frame::decode_body(body, &Default::default()).is_ok());
//!                 let raw = batch.raw(i).unwrap().to_vec();
//!                 lp.handle.send(batch.conn(), priority, raw).unwrap();
//!             }
//!             break;
//!         }
//!         _ => {} // Accepted comes first.
//!     }
//! }
//! let mut echoed = vec![0; msg.len()];
//! peer.read_exact(&mut echoed).unwrap();
//! assert_eq!(echoed, msg);
//! lp.handle.shutdown().unwrap();
//! lp.join.join().unwrap().unwrap();
//! ```
//!
//! Queued frames are not kept across connections: when a connection closes, whatever was still
//! queued for it is discarded and its [`Event::Closed`] says how much ([`Unsent`]); the role
//! resends on the next connection if the protocol needs it.
//!
//! Every connection keeps the limits of [`PortLimits`]: a cap on its queued output (past it, it is
//! not read until the queue drains), a budget for bytes held in partial messages, and an idle
//! timeout for a partial message or an unfinished handshake.
//!
//! The [`http`] module frames HTTP/1.1 requests for servers on this loop (the administrative
//! XML-RPC server, the synthetic web): a request the framing refuses (431, 413, 400, ...) is
//! delivered flagged with its status ([`FrameBatch::refusal`]) so the role answers before it
//! closes.
//!
//! The [`fetch`] module is the crawl engine's HTTP/1.1 and HTTPS client. It turns on the same
//! reactor as this loop (one `mio::Poll` implementation, in `reactor.rs`), as a driver of its
//! own: a pool of outgoing keep-alive connections with TLS, answering fetch requests.
#![deny(missing_docs)]

mod backoff;
mod builder;
mod conn;
mod event;
mod event_loop;
pub mod fetch;
mod framing;
mod handle;
pub mod http;
mod ids;
mod io_util;
mod limits;
pub mod loopstats;
mod reactor;
pub mod reserve;
mod sendq;
mod timer;
mod tls;

pub use backoff::BackoffPolicy;
pub use builder::{BuildError, Builder, LoopError, Spawned, DEFAULT_EVENT_CAPACITY};
pub use crawlfleet_core::frame::Priority;
pub use event::{CloseReason, Event, FrameBatch, Frames, IoFailure, Unsent};
pub use event_loop::EventLoop;
pub use framing::{
    Framing, FramingError, FscmtFraming, FscmtLengthFraming, MessageMeta, Next, Refusal,
};
pub use handle::{Handle, LoopStopped};
pub use ids::{ConnId, LinkId, ListenerId, TimerId};
pub use limits::{
    PartialBudget, PortLimits, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_IN_ROLE,
    DEFAULT_MAX_QUEUED_OUTPUT, DEFAULT_PARTIAL_BUDGET,
};
