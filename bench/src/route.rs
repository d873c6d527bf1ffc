//! `crawlfleet bench route`: CMD_UM_URI throughput through a multinode scheduler.
//!
//! The bench starts a multinode scheduler (a child process of this binary on a fresh data dir,
//! unless `--target` names a running one) and connects N peers that speak the node side of
//! MS-FSCMT 3.2: each registers (CMD_UM_INIT, answering CMD_UM_ASK_ROUTE with LAST_ROUTE), sends
//! its share of CMD_UM_URI frames for links to `--sites` sites (as node schedulers forward links
//! they find), and counts the CMD_UM_URI frames the multinode scheduler routes to it. The rate is
//! URIs delivered to nodes per second, from the first frame sent to the last one received: every
//! URI went through the multinode scheduler's persistent crawl queue and routing decision.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::Limits;
use crawlfleet_core::msg::{
    CollectionOnly, Command as Cmd, CrawlQueueEntry, Init, Message, UriMsg, UriStructure,
};

use crate::cli::BenchRouteArgs;
use crate::{BenchError, RoleChild};

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError(e.to_string())
}

fn start_multinode(collection: &str) -> Result<(RoleChild, SocketAddr), BenchError> {
    let dir = std::env::temp_dir().join(format!("crawlfleet-bench-route-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(err)?;
    let cfg = dir.join("bench.xml");
    std::fs::write(
        &cfg,
        format!(
            "<CrawlerConfig><DomainSpecification name=\"{collection}\">\
             <attrib name=\"delay\" type=\"real\">1.0</attrib>\
             </DomainSpecification></CrawlerConfig>"
        ),
    )
    .map_err(err)?;
    // This executable's hidden `role` runs the multinode scheduler as `crawlfleet` itself would.
    let mut child = Command::new(std::env::current_exe().map_err(err)?)
        .args(["role", "multinode", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.join("data"))
        .arg("--config")
        .arg(&cfg)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .map_err(err)?;
    let addr = crate::read_announced(&mut child, "multinode")?;
    Ok((RoleChild { child, dir }, addr))
}

/// Reads whole frames from `s` into `buf`, calling `f` on each decoded message.
fn read_frames(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    mut f: impl FnMut(Message<'_>) -> bool,
) -> Result<(), BenchError> {
    let limits = Limits::default();
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let mut used = 0;
        while let Some((body, n)) = frame::split(&buf[used..], &limits).map_err(err)? {
            let (_, m) = frame::decode_message(body, &limits).map_err(err)?;
            used += n;
            if !f(m) {
                buf.drain(..used);
                return Ok(());
            }
        }
        buf.drain(..used);
        let n = s.read(&mut chunk).map_err(err)?;
        if n == 0 {
            return Err(err("the multinode scheduler closed the connection"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// PKT_CMD of a frame body in the canonical layout (`dn` then `cm` first in its dict, as the
/// scheduler writes CMD_UM_URI), read without decoding the rest, so the load side leaves the
/// CPU to the scheduler; None for any other layout.
fn quick_command(body: &[u8]) -> Option<i32> {
    let rest = body.strip_prefix(b"(\x02\x00\x00\x00{s\x02\x00\x00\x00dns")?;
    let len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let rest = rest.get(4 + len..)?.strip_prefix(b"s\x02\x00\x00\x00cmi")?;
    Some(i32::from_le_bytes(rest.get(..4)?.try_into().ok()?))
}

/// Runs the benchmark.
pub fn run(args: &BenchRouteArgs) -> Result<(), BenchError> {
    let collection = "bench";
    let (_child, target) = match args.target {
        Some(t) => (None, t),
        None => {
            let (c, a) = start_multinode(collection)?;
            (Some(c), a)
        }
    };
    let nodes = args.nodes.max(1);
    // Register every node first, so routing decisions spread over all of them.
    let mut conns = Vec::new();
    for i in 0..nodes {
        let mut s = TcpStream::connect(target).map_err(err)?;
        s.set_nodelay(true).map_err(err)?;
        let mut out = Vec::new();
        let init = Message::CmdUmInit(Init {
            node_id: format!("bench-{i}").into_bytes().into(),
            xmlrpc_host: b"127.0.0.1".to_vec().into(),
            xmlrpc_port: 0,
        });
        frame::encode_message(&init, Priority::Normal, &mut out);
        s.write_all(&out).map_err(err)?;
        conns.push(s);
    }
    for s in conns.iter_mut() {
        let mut buf = Vec::new();
        read_frames(s, &mut buf, |m| !matches!(m, Message::CmdUmAskRoute(_)))?;
        let mut out = Vec::new();
        let last = Message::CmdUmLastRoute(CollectionOnly {
            collection: collection.as_bytes().to_vec().into(),
        });
        frame::encode_message(&last, Priority::Normal, &mut out);
        s.write_all(&out).map_err(err)?;
    }
    // Every frame encoded before the clock starts.
    let per_node = args.total / nodes as u64;
    let total = per_node * nodes as u64;
    let sites = args.sites.max(1);
    let mut payloads = Vec::new();
    for i in 0..nodes {
        let mut out = Vec::with_capacity(per_node as usize * 120);
        for k in 0..per_node {
            let n = k * nodes as u64 + i as u64;
            let uri = format!("http://www{}.site{}.com/page/{n}", n % 3, n % sites);
            let m = Message::CmdUmUri(UriMsg {
                collection: collection.as_bytes().into(),
                entry: CrawlQueueEntry::new(UriStructure::unparsed(uri.into_bytes().into())),
            });
            frame::encode_message(&m, Priority::Normal, &mut out);
        }
        payloads.push(out);
    }
    let delivered = AtomicU64::new(0);
    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.timeout);
    let finished: parking_lot::Mutex<Option<Instant>> = parking_lot::Mutex::new(None);
    std::thread::scope(|scope| -> Result<(), BenchError> {
        let mut handles = Vec::new();
        for (s, payload) in conns.iter().zip(payloads) {
            let mut w = s.try_clone().map_err(err)?;
            scope.spawn(move || w.write_all(&payload));
            let mut r = s.try_clone().map_err(err)?;
            let delivered = &delivered;
            let finished = &finished;
            handles.push(scope.spawn(move || -> Result<(), BenchError> {
                r.set_read_timeout(Some(Duration::from_millis(100)))
                    .map_err(err)?;
                let limits = Limits::default();
                let mut buf = Vec::new();
                let mut chunk = vec![0u8; 1 << 18];
                loop {
                    if delivered.load(Ordering::Relaxed) >= total || Instant::now() > deadline {
                        return Ok(());
                    }
                    let n = match r.read(&mut chunk) {
                        Ok(0) => return Err(err("the multinode scheduler closed the connection")),
                        Ok(n) => n,
                        Err(e)
                            if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                        {
                            continue
                        }
                        Err(e) => return Err(err(e)),
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    let mut used = 0;
                    let mut got = 0;
                    while let Some((body, n)) = frame::split(&buf[used..], &limits).map_err(err)? {
                        let uri = match quick_command(body) {
                            Some(c) => c == Cmd::CmdUmUri as i32,
                            None => matches!(
                                frame::decode_message(body, &limits),
                                Ok((_, Message::CmdUmUri(_)))
                            ),
                        };
                        got += u64::from(uri);
                        used += n;
                    }
                    buf.drain(..used);
                    if delivered.fetch_add(got, Ordering::Relaxed) + got >= total {
                        finished.lock().get_or_insert_with(Instant::now);
                    }
                }
            }));
        }
        for h in handles {
            h.join().map_err(|_| err("a reader thread panicked"))??;
        }
        Ok(())
    })?;
    let got = delivered.load(Ordering::Relaxed);
    let end = finished.lock().unwrap_or_else(Instant::now);
    let secs = end.duration_since(start).as_secs_f64();
    let rate = got as f64 / secs.max(1e-9);
    if got < total {
        eprintln!(
            "only {got} of {total} URIs were delivered within {} s",
            args.timeout
        );
    }
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "rate": rate,
                "uris": got,
                "sent": total,
                "nodes": nodes,
                "sites": sites,
                "seconds": secs,
            })
        );
    } else {
        println!(
            "{got} of {total} URIs routed to {nodes} nodes over {sites} sites in {secs:.2} s: {:.0} URIs/s",
            rate
        );
    }
    if got < total {
        return Err(err("not every URI was delivered"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(m: &Message<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        frame::encode_message(m, Priority::Normal, &mut out);
        out.split_off(4)
    }

    #[test]
    fn quick_command_reads_the_command_of_canonical_frames_only() {
        let uri = Message::CmdUmUri(UriMsg {
            collection: b"bench".as_slice().into(),
            entry: CrawlQueueEntry::new(UriStructure::unparsed(b"http://a.com/".as_slice().into())),
        });
        assert_eq!(quick_command(&body(&uri)), Some(Cmd::CmdUmUri as i32));
        let ask = Message::CmdUmAskRoute(CollectionOnly {
            collection: b"bench".as_slice().into(),
        });
        assert_eq!(quick_command(&body(&ask)), Some(Cmd::CmdUmAskRoute as i32));
        let init = Message::CmdUmInit(Init {
            node_id: b"n".as_slice().into(),
            xmlrpc_host: b"h".as_slice().into(),
            xmlrpc_port: 1,
        });
        assert_eq!(quick_command(&body(&init)), None);
        assert_eq!(quick_command(&body(&uri)[..20]), None);
    }
}
