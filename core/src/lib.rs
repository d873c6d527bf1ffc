//! crawlfleet's pure data layer: the marshal codec the FAST crawler protocols are written in,
//! FSCMT framing and the FSCMT message model. No sockets and no threads live here.
//!
//! ```
//! use crawlfleet_core::frame::{self, Priority};
//! use crawlfleet_core::marshal::Limits;
//! use crawlfleet_core::msg::Message;
//!
//! let mut wire = Vec::new();
//! frame::encode_message(&Message::PpdupKeepalive, Priority::Normal, &mut wire);
//! let (body, used) = frame::split(&wire, &Limits::default()).unwrap().unwrap();
//! assert_eq!(used, wire.len());
//! let f = frame::decode_body(body, &Limits::default()).unwrap();
//! assert_eq!(Message::from_dict(&f.message).unwrap(), Message::PpdupKeepalive);
//! ```
#![deny(missing_docs)]

pub mod checksum;
pub mod clock;
pub mod config;
pub mod crawl;
pub mod datadir;
pub mod diskfull;
pub mod distributor;
pub mod dupserver;
pub mod feed;
pub mod frame;
pub mod indexnow;
pub mod links;
pub mod marshal;
pub mod md5many;
pub mod metrics;
pub mod msg;
pub mod nameserver;
pub mod percent;
mod probeset;
pub mod queue;
pub mod ratelog;
pub mod recordlog;
pub mod routing;
pub mod rup;
pub mod sched;
pub mod sitemap;
pub mod stats;
pub mod store;
pub mod synthweb;
pub mod sys;
pub mod warc;
pub mod xmlrpc;
