//! Name resolution off the event loop: worker threads call the system resolver
//! (`getaddrinfo` through `ToSocketAddrs`) and hand answers back on a channel, so a slow name
//! server never stalls a scheduler (MS-FSCMT 3.2.5.4 for the multinode scheduler, and a
//! standalone node scheduler's own lookups).

use std::borrow::Cow;
use std::net::{SocketAddr, ToSocketAddrs};

use crawlfleet_core::msg::AddrInfo;
use crossbeam_channel::{unbounded, Receiver, Sender};
use log::debug;

/// An answer: the host and its addresses (None: the lookup failed).
pub type Answer = (String, Option<Vec<AddrInfo<'static>>>);

/// A pool of resolver threads.
pub struct Resolver {
    tx: Sender<String>,
    /// Answers, in completion order.
    pub answers: Receiver<Answer>,
}

/// The addrinfo entries (2.2.2.1) of resolved socket addresses: TCP stream sockets, port 0.
pub fn addrinfo(addrs: &[SocketAddr]) -> Vec<AddrInfo<'static>> {
    let mut out: Vec<AddrInfo<'static>> = Vec::new();
    for a in addrs {
        let (family, ip) = match a {
            SocketAddr::V4(v) => (2, v.ip().to_string()),
            SocketAddr::V6(v) => (10, v.ip().to_string()),
        };
        if out.iter().any(|x| x.address.as_ref() == ip.as_bytes()) {
            continue;
        }
        out.push(AddrInfo {
            family,
            socktype: 1,
            protocol: 6,
            canonname: Cow::Borrowed(b""),
            address: Cow::Owned(ip.into_bytes()),
            port: 0,
        });
    }
    out
}

impl Resolver {
    /// Starts `threads` resolver threads.
    pub fn new(threads: usize) -> Resolver {
        let (tx, rx) = unbounded::<String>();
        let (atx, answers) = unbounded::<Answer>();
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            let atx = atx.clone();
            let _ = std::thread::Builder::new()
                .name(format!("resolver-{i}"))
                .spawn(move || {
                    for host in rx {
                        let r = (host.as_str(), 0u16)
                            .to_socket_addrs()
                            .map(|it| it.collect::<Vec<_>>());
                        let answer = match r {
                            Ok(v) if !v.is_empty() => Some(addrinfo(&v)),
                            Ok(_) => None,
                            Err(e) => {
                                debug!("resolving {host}: {e}");
                                None
                            }
                        };
                        if atx.send((host, answer)).is_err() {
                            return;
                        }
                    }
                });
        }
        Resolver { tx, answers }
    }

    /// Asks for `host`; the answer arrives on [`Resolver::answers`].
    pub fn lookup(&self, host: String) {
        let _ = self.tx.send(host);
    }
}
