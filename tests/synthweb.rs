//! The synthetic web's server over real sockets (a plain std client), its access log, the
//! `crawlfleet synthweb` role and the nginx export.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_core::synthweb::{SyntheticWeb, WebSpec, BIG_SIZE};
use crawlfleet_shells::synthweb::{free_port, AccessRecord, SynthServer};

use crate::util::{temp_dir, Role};

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

struct Client {
    reader: BufReader<TcpStream>,
    host: SocketAddr,
}

impl Client {
    fn connect(host: SocketAddr) -> Client {
        let s = TcpStream::connect(host).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Client {
            reader: BufReader::new(s),
            host,
        }
    }

    fn send(&mut self, method: &str, path: &str) {
        let req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n\r\n", self.host);
        self.reader.get_mut().write_all(req.as_bytes()).unwrap();
    }

    /// Reads one response; `head_only` for the answer to HEAD.
    fn read(&mut self, head_only: bool) -> Response {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let mut parts = line.split(' ');
        assert_eq!(parts.next(), Some("HTTP/1.1"), "status line {line:?}");
        let status = parts.next().unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let (n, v) = l.split_once(": ").unwrap();
            headers.push((n.to_string(), v.to_string()));
        }
        let mut r = Response {
            status,
            headers,
            body: Vec::new(),
        };
        let len: usize = r.header("Content-Length").unwrap().parse().unwrap();
        if !head_only {
            r.body = vec![0; len];
            self.reader.read_exact(&mut r.body).unwrap();
        }
        r
    }

    fn get(&mut self, path: &str) -> Response {
        self.send("GET", path);
        self.read(false)
    }

    /// True when the server closed the connection (EOF).
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.reader.read(&mut b), Ok(0))
    }
}

/// The server's log once it holds `n` records: a client has its reply before the server has
/// logged the end of writing it.
fn log_of(server: &SynthServer, n: usize) -> Vec<AccessRecord> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = server.log();
        if log.len() >= n {
            return log;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n} records: {log:?}",
            log.len()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn serve(spec: &str, base: Ipv4Addr) -> (Arc<SyntheticWeb>, SynthServer) {
    SynthServer::serve(&spec.parse().unwrap(), base).unwrap()
}

#[test]
fn pages_robots_and_redirects_over_keep_alive() {
    let (web, server) = serve("20:50", Ipv4Addr::new(127, 78, 0, 1));
    let hosts = web.hosts();
    let mut c = Client::connect(hosts[0]);
    let root = c.get("/");
    assert_eq!(root.status, 200);
    assert_eq!(
        root.header("Content-Type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(root.header("Connection"), Some("keep-alive"));
    assert_eq!(root.body, web.respond(hosts[0], "/").body);
    // The same connection, robots.txt.
    let robots = c.get("/robots.txt");
    assert_eq!(robots.status, 200);
    assert_eq!(robots.body, b"User-agent: *\nDisallow: /private/\n");
    assert_eq!(Client::connect(hosts[1]).get("/robots.txt").status, 404);
    // Redirects: absolute and path-absolute Location values.
    let mut c6 = Client::connect(hosts[6]);
    let moved = c6.get("/r/m0");
    assert_eq!(moved.status, 301);
    assert_eq!(
        moved.header("Location"),
        Some(format!("http://{}/t/m0.html", hosts[6]).as_str())
    );
    let hop = c6.get("/r/a0");
    assert_eq!(hop.status, 302);
    assert_eq!(
        hop.header("Location"),
        Some(format!("http://{}/r/b0", hosts[6]).as_str())
    );
    assert_eq!(c6.get("/r/b0").header("Location"), Some("/t/c0.html"));
    assert_eq!(
        c6.get("/img/i0.png").header("Content-Type"),
        Some("image/png")
    );
    assert_eq!(c6.get("/missing/m0.html").status, 404);
    // Two pipelined requests in one write, answered in order.
    c6.reader
        .get_mut()
        .write_all(b"GET /t/m0.html HTTP/1.1\r\n\r\nGET /s0/p3.html HTTP/1.1\r\n\r\n")
        .unwrap();
    let (a, b) = (c6.read(false), c6.read(false));
    assert_eq!(a.body, web.respond(hosts[6], "/t/m0.html").body);
    assert_eq!(b.body, web.respond(hosts[6], "/s0/p3.html").body);
    server.stop();
}

#[test]
fn the_access_log_records_every_request_with_its_connection() {
    let dir = temp_dir("synthweb-log");
    let file = dir.path().join("access.log");
    let spec: WebSpec = "3:20".parse().unwrap();
    let base = Ipv4Addr::new(127, 78, 1, 1);
    let web = Arc::new(SyntheticWeb::generate(&spec, base, free_port(base)));
    let server = SynthServer::start_logging(web.clone(), Some(&file)).unwrap();
    let hosts = web.hosts();
    let mut a = Client::connect(hosts[0]);
    a.get("/");
    a.get("/nope");
    let mut b = Client::connect(hosts[2]);
    b.get("/robots.txt");
    let log = log_of(&server, 3);
    let got: Vec<(SocketAddr, &str, u16)> = log
        .iter()
        .map(|r| (r.host, r.path.as_str(), r.status))
        .collect();
    assert_eq!(
        got,
        [
            (hosts[0], "/", 200),
            (hosts[0], "/nope", 404),
            (hosts[2], "/robots.txt", 200)
        ]
    );
    assert_eq!(log[0].conn, log[1].conn);
    assert_ne!(log[1].conn, log[2].conn);
    assert!(log.iter().all(|r| r.end >= r.start));
    server.stop(); // flushes the file
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(
        lines[1][..3],
        [hosts[0].to_string().as_str(), "/nope", "404"]
    );
    assert!(lines.iter().all(|l| l.len() == 6));
    let start: f64 = lines[0][3].parse().unwrap();
    let end: f64 = lines[0][4].parse().unwrap();
    assert!(start > 1.6e9 && end >= start, "{text}");
}

#[test]
fn slow_pages_wait_on_a_timer_and_the_big_page_streams() {
    let (web, server) = serve("3:20", Ipv4Addr::new(127, 78, 2, 1));
    let hosts = web.hosts();
    let delay = web.respond(hosts[0], "/s0/p2.html").delay;
    assert!(!delay.is_zero());
    let mut slow = Client::connect(hosts[0]);
    slow.send("GET", "/s0/p2.html");
    // Another connection is served while the slow reply waits.
    let mut fast = Client::connect(hosts[0]);
    assert_eq!(fast.get("/big.html").body.len(), BIG_SIZE);
    let page = slow.read(false);
    assert_eq!(page.body, web.respond(hosts[0], "/s0/p2.html").body);
    let log = log_of(&server, 2);
    let rec = log.iter().find(|r| r.path == "/s0/p2.html").unwrap();
    // The server answers no earlier than the page's delay (its own clock, not a benchmark).
    assert!(rec.end - rec.start >= delay);
    server.stop();
}

#[test]
fn a_client_that_resets_during_an_answer_is_still_in_the_access_log() {
    // A crawler reads the head of a page over its size limit and closes with the rest unread:
    // the server sees a reset on a read or on a write, whichever comes first. Either way the
    // request was answered and is logged.
    let (web, server) = serve("1:5", Ipv4Addr::new(127, 78, 5, 1));
    let host = web.hosts()[0];
    const CLIENTS: usize = 20;
    for _ in 0..CLIENTS {
        let mut s = TcpStream::connect(host).unwrap();
        s.write_all(b"GET /big.html HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut head = [0u8; 1024];
        let n = s.read(&mut head).unwrap();
        assert!(n > 0 && head.starts_with(b"HTTP/1.1 200"));
        // SO_LINGER 0: the close sends a reset, as it does with unread data.
        rustix::net::sockopt::set_socket_linger(&s, Some(Duration::ZERO)).unwrap();
    }
    let log = log_of(&server, CLIENTS);
    assert_eq!(
        log.iter().filter(|r| r.path == "/big.html").count(),
        CLIENTS
    );
    server.stop();
}

#[test]
fn bad_requests_are_refused_and_head_has_no_body() {
    let (web, server) = serve("2:5", Ipv4Addr::new(127, 78, 3, 1));
    let host = web.hosts()[0];
    let mut c = Client::connect(host);
    c.send("HEAD", "/");
    let head = c.read(true);
    assert_eq!(head.status, 200);
    let len: usize = head.header("Content-Length").unwrap().parse().unwrap();
    assert_eq!(len, web.respond(host, "/").body.len());
    assert_eq!(c.get("/robots.txt").status, 200); // nothing of the HEAD body in between
    c.send("POST", "/");
    let refused = c.read(false);
    assert_eq!(
        (refused.status, refused.header("Connection")),
        (405, Some("close"))
    );
    assert!(c.closed());
    let mut g = Client::connect(host);
    g.reader
        .get_mut()
        .write_all(b"\x01\x02 garbage\r\n\r\n")
        .unwrap();
    assert_eq!(g.read(false).status, 400);
    assert!(g.closed());
    let mut old = Client::connect(host);
    old.reader
        .get_mut()
        .write_all(b"GET / HTTP/1.0\r\n\r\n")
        .unwrap();
    assert_eq!(old.read(false).header("Connection"), Some("close"));
    assert!(old.closed());
    server.stop();
}

/// The soft and hard limits on open descriptors of a running process (`/proc/<pid>/limits`).
fn open_files_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let mut f = line["Max open files".len()..].split_whitespace();
    (f.next().unwrap().into(), f.next().unwrap().into())
}

#[test]
fn a_role_lifts_its_soft_descriptor_limit_to_the_hard_one() {
    // A login shell's soft limit is often 1,024 where the hard one is far higher; a synthetic
    // web of more hosts than the soft limit (a listener each) failed to bind with "Too many
    // open files". 600 hosts under a soft limit of 256.
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -Sn 256 && exec \"$0\" synthweb --web 600:600 --base 127.97.0.1")
        .arg(env!("CARGO_BIN_EXE_crawlfleet"))
        .env("RUST_LOG", "warn");
    let role = Role::spawn(cmd);
    let (soft, hard) = open_files_limits(role.child.id());
    assert_eq!(soft, hard, "the soft limit is lifted to the hard one");
    // The last host's listener is up and answers.
    let web = SyntheticWeb::generate(
        &"600:600".parse().unwrap(),
        Ipv4Addr::new(127, 97, 0, 1),
        role.addr().port(),
    );
    let last = *web.hosts().last().unwrap();
    let page = Client::connect(last).get("/robots.txt");
    assert_eq!(page.status, web.respond(last, "/robots.txt").status);
    assert_eq!(page.body, web.respond(last, "/robots.txt").body);
    role.kill();
}

#[test]
fn the_role_serves_until_killed() {
    let dir = temp_dir("synthweb-role");
    let log = dir.path().join("access.log");
    let collection = dir.path().join("collection.xml");
    let role = Role::start(&[
        "synthweb",
        "--web",
        "3:20",
        "--base",
        "127.78.4.1",
        "--access-log",
        log.to_str().unwrap(),
        "--collection",
        collection.to_str().unwrap(),
        "--collection-name",
        "web3",
    ]);
    let host = role.addr();
    assert_eq!(host.ip().to_string(), "127.78.4.1");
    let web = SyntheticWeb::generate(
        &"3:20".parse().unwrap(),
        Ipv4Addr::new(127, 78, 4, 1),
        host.port(),
    );
    let xml = std::fs::read_to_string(&collection).unwrap();
    assert_eq!(xml, web.collection_xml("web3"));
    let specs = crawlfleet_core::config::parse_xml(&xml).unwrap();
    assert_eq!(specs[0].0, "web3");
    let page = Client::connect(host).get("/s0/p7.html");
    assert_eq!(page.body, web.respond(host, "/s0/p7.html").body);
    // The file is flushed once per loop turn; wait for the line rather than for a time.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("/s0/p7.html\t200")
    {
        assert!(
            Instant::now() < deadline,
            "no access log line in {}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    role.kill();
}

/// Checks the nginx export: one server per host listening on its address, redirects as
/// `return`, files with the bytes `respond` sends, balanced braces; and `nginx -t` when nginx
/// is installed.
fn check_nginx_tree(web: &SyntheticWeb, dir: &Path, conf: &Path) {
    let text = std::fs::read_to_string(conf).unwrap();
    let opens = text.matches('{').count();
    assert_eq!(opens, text.matches('}').count(), "{text}");
    assert_eq!(text.matches("    server {").count(), web.hosts().len());
    for h in web.hosts() {
        assert!(text.contains(&format!("listen {h};")), "no listen {h}");
    }
    let hosts = web.hosts();
    let t = format!("return 301 http://{}/t/m0.html;", hosts[1]);
    assert!(text.contains(&t) && text.contains("return 302 ") && text.contains("location = /r/b0"));
    let www = dir.join("www");
    let root = std::fs::read(www.join(hosts[0].ip().to_string()).join("index.html")).unwrap();
    assert_eq!(root, web.respond(hosts[0], "/").body);
    let page = std::fs::read(www.join(hosts[1].ip().to_string()).join("s0/p3.html")).unwrap();
    assert_eq!(page, web.respond(hosts[1], "/s0/p3.html").body);
    assert!(!www
        .join(hosts[1].ip().to_string())
        .join("robots.txt")
        .exists());
    let big = www.join(hosts[0].ip().to_string()).join("big.html");
    assert_eq!(std::fs::metadata(big).unwrap().len(), BIG_SIZE as u64);
    match Command::new("nginx").arg("-v").output() {
        Ok(_) => {
            let out = Command::new("nginx")
                .args(["-t", "-c"])
                .arg(conf)
                .arg("-p")
                .arg(dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Err(_) => eprintln!(
            "nginx is not installed: skipping `nginx -t` of {}",
            conf.display()
        ),
    }
}

#[test]
fn the_nginx_export_serves_the_same_bytes() {
    let dir = temp_dir("synthweb-nginx");
    let web = SyntheticWeb::generate(
        &"3:20".parse().unwrap(),
        Ipv4Addr::new(127, 78, 5, 1),
        18080,
    );
    let conf = web.write_nginx(dir.path()).unwrap();
    check_nginx_tree(&web, dir.path(), &conf);
    // The role's --nginx-dir writes the same tree and prints the conf's path.
    let role_dir = temp_dir("synthweb-nginx-role");
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args([
            "synthweb",
            "--web",
            "3:20",
            "--base",
            "127.78.5.1",
            "--port",
            "18080",
        ])
        .arg("--nginx-dir")
        .arg(role_dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    let role_conf = Path::new(printed.trim());
    assert_eq!(role_conf.file_name().unwrap(), "nginx.conf");
    check_nginx_tree(&web, role_dir.path(), role_conf);
}
