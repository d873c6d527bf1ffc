//! `crawlfleet synthweb`: serves a [`SyntheticWeb`] on its loopback addresses, for crawl tests,
//! `crawlfleet up --synthetic-web` and benchmarks, or writes it out for nginx.
//!
//! [`SynthServer`] binds every host's address on the web's port on one of net's event loops and
//! answers from one thread (see `server`), keeping an access log in memory and, if asked, in a tab-separated file:
//! `address:port  path  status  start  end  connection`, times in Unix seconds.
//!
//! ```no_run
//! use crawlfleet_shells::synthweb::SynthServer;
//!
//! let (web, server) = SynthServer::serve(&"3:20".parse().unwrap(), "127.77.0.1".parse().unwrap())
//!     .unwrap();
//! println!("crawl from {:?}", web.start_uris());
//! // ... crawl ...
//! assert!(server.log().iter().all(|r| r.path != "/private/v0.html"));
//! server.stop();
//! ```

mod rup;
mod server;

pub use rup::{up_robot_section, RupActivity, RupOptions, CGI_PATH, UP_ROBOT};

use std::fs::OpenOptions;
use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crawlfleet_core::synthweb::{SyntheticWeb, WebSpec};
use crawlfleet_net::http::HttpFraming;
use crawlfleet_net::{BuildError, EventLoop, Handle};
use log::info;
use parking_lot::Mutex;

use crate::cli::SynthwebArgs;
use server::{Server, Shared};

/// One request the server answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessRecord {
    /// The host address the request came in on.
    pub host: SocketAddr,
    /// The request target's path (and query), as sent.
    pub path: String,
    /// The status answered.
    pub status: u16,
    /// When the request head was complete.
    pub start: Instant,
    /// When the reply was handed to the event loop, which writes it as the socket takes it.
    pub end: Instant,
    /// The connection, numbered from 0 in order of acceptance.
    pub conn: u64,
}

/// A running server of a synthetic web. Stops when dropped.
pub struct SynthServer {
    web: Arc<SyntheticWeb>,
    shared: Arc<Shared>,
    handle: Handle,
    thread: Option<JoinHandle<io::Result<()>>>,
}

/// A port that is free on `base` now (the kernel's pick for a listener bound there and closed at
/// once), or 0 when none could be bound.
pub fn free_port(base: Ipv4Addr) -> u16 {
    std::net::TcpListener::bind((base, 0))
        .and_then(|l| l.local_addr())
        .map_or(0, |a| a.port())
}

impl SynthServer {
    /// Serves `web` on every host address at the web's port.
    pub fn start(web: Arc<SyntheticWeb>) -> io::Result<SynthServer> {
        SynthServer::start_logging(web, None)
    }

    /// Serves `web`, also appending each access record to the file `access_log`.
    pub fn start_logging(
        web: Arc<SyntheticWeb>,
        access_log: Option<&Path>,
    ) -> io::Result<SynthServer> {
        SynthServer::start_with(web, access_log, None)
    }

    /// [`SynthServer::start_logging`], every host also a RUP server when `rup` is given
    /// (`/rupinfo.txt`, the CGI at [`CGI_PATH`], reports mailed: docs/rup.md).
    pub fn start_with(
        web: Arc<SyntheticWeb>,
        access_log: Option<&Path>,
        rup: Option<RupOptions>,
    ) -> io::Result<SynthServer> {
        let mut builder = EventLoop::builder()
            .framing(HttpFraming::new(server::MAX_BODY))
            .answer_half_closed(true)
            .thread_name("synthweb-loop");
        let hosts = web.hosts();
        for addr in &hosts {
            if addr.port() == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the web's port is 0: pick one with free_port first",
                ));
            }
            builder = builder.listen(*addr);
        }
        let file = match access_log {
            Some(p) => Some(BufWriter::new(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| {
                        io::Error::new(e.kind(), format!("access log {}: {e}", p.display()))
                    })?,
            )),
            None => None,
        };
        let lp = builder.spawn().map_err(|e| match e {
            BuildError::Bind(addr, e) => io::Error::new(e.kind(), format!("binding {addr}: {e}")),
            BuildError::Poll(e) | BuildError::Spawn(e) => e,
        })?;
        let shared = Arc::new(Shared {
            log: Mutex::new(Vec::new()),
            rup: Arc::new(Mutex::new(RupActivity::default())),
        });
        let rup = match rup {
            Some(opts) => {
                let r = rup::WebRup::start(web.clone(), opts, shared.rup.clone());
                let every = server::RUP_TICK_EVERY;
                let ticking = lp.handle.set_timer(server::RUP_TICK, every, Some(every));
                match (r, ticking) {
                    (Ok(r), Ok(())) => Some(r),
                    (Err(e), _) => {
                        let _ = lp.handle.shutdown();
                        return Err(e);
                    }
                    (_, Err(_)) => {
                        let _ = lp.handle.shutdown();
                        return Err(io::Error::other("the synthweb event loop stopped"));
                    }
                }
            }
            None => None,
        };
        let server = Server::new(
            lp.handle.clone(),
            hosts,
            web.clone(),
            shared.clone(),
            file,
            rup,
        );
        let (events, join) = (lp.events, lp.join);
        let thread = std::thread::Builder::new()
            .name("synthweb".into())
            .spawn(move || {
                let served = server.run(events);
                let looped = match join.join() {
                    Ok(r) => r.map_err(io::Error::other),
                    Err(_) => Err(io::Error::other("the synthweb event loop panicked")),
                };
                served.and(looped)
            })?;
        Ok(SynthServer {
            web,
            shared,
            handle: lp.handle,
            thread: Some(thread),
        })
    }

    /// Generates the web of `spec` from `base` on a free port and serves it, trying another
    /// port when one is taken on some host address meanwhile.
    pub fn serve(spec: &WebSpec, base: Ipv4Addr) -> io::Result<(Arc<SyntheticWeb>, SynthServer)> {
        let mut last = io::Error::other("no free port");
        for _ in 0..5 {
            let web = Arc::new(SyntheticWeb::generate(spec, base, free_port(base)));
            match SynthServer::start(web.clone()) {
                Ok(s) => return Ok((web, s)),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// The web served.
    pub fn web(&self) -> &Arc<SyntheticWeb> {
        &self.web
    }

    /// Every request answered so far, in order of completion.
    pub fn log(&self) -> Vec<AccessRecord> {
        self.shared.log.lock().clone()
    }

    /// What the hosts' RUP servers did so far (all zero when the web does not publish RUP).
    pub fn rup_activity(&self) -> RupActivity {
        self.shared.rup.lock().clone()
    }

    /// Blocks until the server thread ends (it ends only on an error or [`SynthServer::stop`]
    /// from elsewhere).
    pub fn wait(mut self) -> io::Result<()> {
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("the synthweb server thread panicked")),
            None => Ok(()),
        }
    }

    /// Stops serving and closes every socket.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        // A loop that has stopped already needs no telling.
        let _ = self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SynthServer {
    fn drop(&mut self) {
        self.halt();
    }
}

/// `crawlfleet synthweb`: serves the web until killed (printing `crawlfleet synthweb listening
/// on ADDRESS` of host 0, then the start URIs, one per line),
/// or writes it out for nginx with `--nginx-dir` (printing the path of nginx.conf).
pub fn run(args: &SynthwebArgs) -> io::Result<()> {
    let spec = WebSpec {
        seed: args.seed,
        plain: args.plain,
        ..args.web
    };
    let port = match args.port {
        Some(p) => p,
        None => free_port(args.base),
    };
    let started = Instant::now();
    let web = Arc::new(SyntheticWeb::generate(&spec, args.base, port));
    info!(
        "synthweb {}:{} (seed {}) generated in {:?}",
        spec.hosts,
        spec.pages,
        spec.seed,
        started.elapsed()
    );
    if let Some(path) = &args.collection {
        std::fs::write(path, web.collection_xml(&args.collection_name))?;
    }
    if let Some(dir) = &args.nginx_dir {
        let conf = web.write_nginx(dir)?;
        println!("{}", conf.display());
        return Ok(());
    }
    let server = SynthServer::start_logging(web.clone(), args.access_log.as_deref())?;
    let hosts = web.hosts();
    let ip = |a: Option<&SocketAddr>| a.map_or(IpAddr::V4(args.base), |a| a.ip());
    info!(
        "synthweb serving {} hosts ({} .. {}) on port {port}",
        spec.hosts,
        ip(hosts.first()),
        ip(hosts.last())
    );
    // The first line as every role prints it, then the start URIs. Nobody reading them is no
    // reason to stop serving, so write errors are ignored.
    let mut out = io::stdout().lock();
    if let Some(first) = hosts.first() {
        let _ = writeln!(out, "crawlfleet synthweb listening on {first}");
    }
    for uri in web.start_uris() {
        let _ = writeln!(out, "{uri}");
    }
    let _ = out.flush();
    drop(out);
    server.wait()
}
