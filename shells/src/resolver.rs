//! Name resolution off the event loop: worker threads call the system resolver
//! (`getaddrinfo` through `ToSocketAddrs`) and hand answers back on a channel, so a slow name
//! server never stalls a scheduler (MS-FSCMT 3.2.5.4 for the multinode scheduler, and a
//! standalone node scheduler's own lookups).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Instant;

use crawlfleet_core::msg::AddrInfo;
use crawlfleet_core::stats::Stats;
use crossbeam_channel::{unbounded, Receiver, Sender};
use log::debug;
use parking_lot::Mutex;

/// What the resolver did since the statistics last took it (FSCADM 2.2.4.8 global DNS
/// attributes). The system resolver hides the wire, so DNSWrite / DNSRead (bytes) and
/// DNSRetries (its own retries) are not known and stay 0.
#[derive(Debug, Default)]
struct DnsCounters {
    requests: u64,
    responses: u64,
    /// RCODE (RFC 1035 4.1.1) -> answers.
    rcodes: BTreeMap<u16, u64>,
    /// The second being counted (since the resolver started) and its requests.
    second: (u64, u64),
    /// The most requests sent in one second.
    peak: u64,
}

/// The RCODE an answer of the system resolver stands for: 0 (NOERROR) for addresses or an
/// empty answer, 3 (NXDOMAIN) for a name that does not exist, 2 (SERVFAIL) otherwise.
fn rcode(r: &std::io::Result<Vec<SocketAddr>>) -> u16 {
    match r {
        Ok(_) => 0,
        Err(e) => {
            let text = e.to_string();
            if text.contains("not known") || text.contains("No address associated") {
                3
            } else {
                2
            }
        }
    }
}

/// An answer: the host and its addresses (None: the lookup failed).
pub type Answer = (String, Option<Vec<AddrInfo<'static>>>);

/// A pool of resolver threads.
pub struct Resolver {
    tx: Sender<String>,
    counters: Arc<Mutex<DnsCounters>>,
    started: Instant,
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
        let counters = Arc::new(Mutex::new(DnsCounters::default()));
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            let atx = atx.clone();
            let counters = counters.clone();
            let _ = std::thread::Builder::new()
                .name(format!("resolver-{i}"))
                .spawn(move || {
                    for host in rx {
                        let r = (host.as_str(), 0u16)
                            .to_socket_addrs()
                            .map(|it| it.collect::<Vec<_>>());
                        {
                            let mut c = counters.lock();
                            c.responses += 1;
                            *c.rcodes.entry(rcode(&r)).or_default() += 1;
                        }
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
        Resolver {
            tx,
            counters,
            started: Instant::now(),
            answers,
        }
    }

    /// Asks for `host`; the answer arrives on [`Resolver::answers`].
    pub fn lookup(&self, host: String) {
        {
            let mut c = self.counters.lock();
            c.requests += 1;
            let sec = self.started.elapsed().as_secs();
            if c.second.0 == sec {
                c.second.1 += 1;
            } else {
                c.second = (sec, 1);
            }
            c.peak = c.peak.max(c.second.1);
        }
        let _ = self.tx.send(host);
    }

    /// Adds what happened since the last call to the global statistics: DNSRequests,
    /// DNSResponses, the DNSResponse histogram by RCODE, and DNSRateLimit as the most requests
    /// sent in one second so far (the resolver has no configured limit).
    pub fn feed_stats(&self, stats: &mut Stats) {
        let mut c = self.counters.lock();
        if c.requests > 0 {
            stats.global_add("DNSRequests", c.requests as f64);
        }
        if c.responses > 0 {
            stats.global_add("DNSResponses", c.responses as f64);
        }
        for (code, n) in std::mem::take(&mut c.rcodes) {
            stats.global_hist("DNSResponse", &code.to_string(), n as f64);
        }
        if c.peak > 0 {
            stats.global_set("DNSRateLimit", c.peak as f64);
        }
        c.requests = 0;
        c.responses = 0;
    }
}
