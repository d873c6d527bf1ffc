//! The administrative interface (MS-FSCADM) over real HTTP against real roles: a session with
//! Python's unmodified `xmlrpc.client.ServerProxy` (tests/admin_session.py) against a standalone
//! node scheduler (then restarted: configuration and state persist, 3.3) and a multinode setup;
//! protocol errors over raw sockets; and `crawlfleet admin`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::util::{checkout_path, temp_dir, Role};

/// A port free at the time of asking.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn session(args: &[&str]) {
    let script = checkout_path("tests/admin_session.py");
    let out = Command::new("python3")
        .arg(&script)
        .args(args)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python3 {} {args:?} failed ({})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        script.display(),
        out.status
    );
}

fn standalone(data: &Path, admin: &str) -> Role {
    Role::start(&[
        "node",
        "--standalone",
        "--admin",
        admin,
        "--data-dir",
        data.to_str().unwrap(),
        "--sync-ms",
        "20",
    ])
}

#[test]
fn standalone_node_session_with_python_xmlrpc_and_restart() {
    let dir = temp_dir("admin-node");
    let admin = format!("127.0.0.1:{}", free_port());
    let node = standalone(&dir.path().join("data"), &admin);
    session(&["node", &admin, dir.path().to_str().unwrap()]);
    node.kill();
    let node = standalone(&dir.path().join("data"), &admin);
    session(&["restart", &admin]);
    drop(node);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn multinode_session_with_python_xmlrpc() {
    let dir = temp_dir("admin-mn");
    let admin = format!("127.0.0.1:{}", free_port());
    let mn = Role::start(&[
        "multinode",
        "--listen",
        "127.0.0.1:0",
        "--admin",
        &admin,
        "--data-dir",
        dir.path().join("mn").to_str().unwrap(),
        "--sync-ms",
        "20",
    ]);
    let _node = Role::start(&[
        "node",
        "--node-id",
        "n1",
        "--multinode",
        &mn.addr().to_string(),
        "--admin",
        "127.0.0.1:0",
        "--data-dir",
        dir.path().join("n1").to_str().unwrap(),
        "--sync-ms",
        "20",
        "--stats-interval",
        "0.5",
    ]);
    session(&["multinode", &admin]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// One raw HTTP exchange on `s`: the status line and the body.
fn exchange(s: &mut TcpStream, request: &[u8]) -> (String, String) {
    s.write_all(request).unwrap();
    read_response(s)
}

fn read_response(s: &mut TcpStream) -> (String, String) {
    read_buffered(s, &mut Vec::new())
}

/// Reads one response from `s` into `buf`, which keeps what arrived beyond it: pipelined
/// answers may reach the client in one read.
fn read_buffered(s: &mut TcpStream, buf: &mut Vec<u8>) -> (String, String) {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .expect("a Content-Length");
            while buf.len() < end + 4 + len {
                let mut chunk = [0u8; 4096];
                let n = s.read(&mut chunk).unwrap();
                assert!(n > 0, "connection closed mid-body");
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).to_string();
            let status = head.lines().next().unwrap_or("").to_string();
            buf.drain(..end + 4 + len);
            return (status, body);
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "connection closed before a response: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn post(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

const LIST: &str =
    "<?xml version='1.0'?><methodCall><methodName>CollectionGetList</methodName><params></params></methodCall>";

#[test]
fn protocol_errors_get_faults_or_http_errors_and_the_connection_lives_on() {
    let dir = temp_dir("admin-proto");
    let admin = format!("127.0.0.1:{}", free_port());
    let _node = standalone(&dir.path().join("data"), &admin);
    let mut s = TcpStream::connect(&admin).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let fault =
        |body: &str| body.contains("<name>faultCode</name>") && body.contains("<int>1</int>");
    // Malformed XML, a wrong type, nil, deep nesting: HTTP 200 with a fault (2.2.7), same
    // connection each time (keep-alive).
    let bad = [
        "<methodCall><methodName>CollectionGetList</methodName><params>",
        "<methodCall><methodName>CollectionGetStatus</methodName><params><param><value><int>1</int></value></param></params></methodCall>",
        "<methodCall><methodName>CollectionGetStatus</methodName><params><param><value><nil/></value></param></params></methodCall>",
        &format!(
            "<methodCall><methodName>AddURIs</methodName><params><param>{}</param></params></methodCall>",
            "<value><array><data>".repeat(200)
        ),
        "not xml at all",
    ];
    for body in bad {
        let (status, reply) = exchange(&mut s, &post("/RPC2", body));
        assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
        assert!(fault(&reply), "{body} -> {reply}");
    }
    let (status, reply) = exchange(&mut s, &post("/RPC2", LIST));
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(reply.contains("<array><data>") && !fault(&reply), "{reply}");
    // Two pipelined requests in one write: two answers, in order.
    let mut two = post("/RPC2", LIST);
    two.extend(post(
        "/RPC2",
        "<methodCall><methodName>IsDistributed</methodName></methodCall>",
    ));
    s.write_all(&two).unwrap();
    let mut buf = Vec::new();
    let (_, first) = read_buffered(&mut s, &mut buf);
    let (_, second) = read_buffered(&mut s, &mut buf);
    assert!(buf.is_empty(), "nothing beyond the two answers");
    assert!(first.contains("<array>"), "{first}");
    assert!(second.contains("<int>0</int>"), "{second}");
    // Other paths and methods.
    let (status, _) = exchange(&mut s, &post("/other", LIST));
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, _) = exchange(&mut s, b"GET /RPC2 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    let (status, reply) = exchange(&mut s, &post("/RPC2", LIST));
    assert_eq!(status, "HTTP/1.1 200 OK", "still alive: {reply}");
    // A body over the cap is refused before it is read (and the connection closed).
    let mut big = TcpStream::connect(&admin).unwrap();
    big.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let (status, _) = exchange(
        &mut big,
        b"POST /RPC2 HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 413 Payload Too Large");
    // Garbage instead of HTTP.
    let mut junk = TcpStream::connect(&admin).unwrap();
    junk.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (status, _) = exchange(&mut junk, b"\x00\x01\x02 garbage\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 400 Bad Request");
    // The server still answers new connections.
    let mut again = TcpStream::connect(&admin).unwrap();
    again
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (status, _) = exchange(&mut again, &post("/RPC2", LIST));
    assert_eq!(status, "HTTP/1.1 200 OK");
    let _ = std::fs::remove_dir_all(&dir);
}

fn admin_cli(server: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .arg("admin")
        .arg("--server")
        .arg(server)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A collection whose variable_delay suspends it now (a period covering the whole week) reads
/// as suspended (MS-FSCADM 2.2.3.4) and "Variable delay suspended" (2.2.5) on a standalone node
/// and on a multinode scheduler.
#[test]
fn a_collection_suspended_by_its_variable_delay_reads_so_on_both_roles() {
    let dir = temp_dir("admin-vdelay");
    let conf = dir.path().join("night.xml");
    std::fs::write(
        &conf,
        r#"<CrawlerConfig><DomainSpecification name="night">
  <section name="variable_delay"><attrib name="Mon-Sun:0-24" type="string">suspend</attrib></section>
</DomainSpecification></CrawlerConfig>"#,
    )
    .unwrap();
    let node_admin = format!("127.0.0.1:{}", free_port());
    let _node = standalone(&dir.path().join("node"), &node_admin);
    let mn_admin = format!("127.0.0.1:{}", free_port());
    let _mn = Role::start(&[
        "multinode",
        "--listen",
        "127.0.0.1:0",
        "--admin",
        &mn_admin,
        "--data-dir",
        dir.path().join("mn").to_str().unwrap(),
    ]);
    for admin in [&node_admin, &mn_admin] {
        let (ok, out, err) = admin_cli(
            admin,
            &["collection-add", &format!("@{}", conf.display()), "0"],
        );
        assert!(ok, "{out}{err}");
        let (ok, out, err) = admin_cli(admin, &["collection-get-status", "night"]);
        assert!(ok, "{err}");
        assert!(out.contains("suspended"), "{admin}: {out}");
        let (ok, out, _) = admin_cli(admin, &["collection-get-statistics2", "night"]);
        assert!(ok);
        assert!(out.contains("Variable delay suspended"), "{admin}: {out}");
    }
}

#[test]
fn crawlfleet_admin_cli() {
    let dir = temp_dir("admin-cli");
    let admin = format!("127.0.0.1:{}", free_port());
    let _node = standalone(&dir.path().join("data"), &admin);
    let conf = dir.path().join("web.xml");
    std::fs::write(
        &conf,
        r#"<CrawlerConfig><DomainSpecification name="web"><attrib name="delay" type="real">1.5</attrib></DomainSpecification></CrawlerConfig>"#,
    )
    .unwrap();
    let (ok, out, err) = admin_cli(
        &admin,
        &["collection-add", &format!("@{}", conf.display()), "0"],
    );
    assert!(ok, "{out}{err}");
    assert_eq!(out.trim(), "Collection web added");
    let (ok, out, _) = admin_cli(&admin, &["CollectionGetList"]);
    assert!(ok);
    assert_eq!(out, "web\n");
    let (ok, out, _) = admin_cli(&admin, &["--json", "collection-get-list"]);
    assert!(ok);
    assert_eq!(out.trim(), r#"["web"]"#);
    let (ok, out, err) = admin_cli(
        &admin,
        &[
            "add-uris",
            "web",
            "1",
            "http://a.example/",
            "http://b.example/",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "Queued collection web with 2 URIs");
    let (ok, out, _) = admin_cli(&admin, &["collection-get-statistics2", "web"]);
    assert!(ok);
    assert!(
        out.contains("Status") && out.contains("Crawling") && out.contains("complete"),
        "{out}"
    );
    let (ok, out, _) = admin_cli(&admin, &["collection-get-statistics", "web"]);
    assert!(ok);
    assert!(out.contains("web: 1 cycle(s) retained"), "{out}");
    let (ok, out, _) = admin_cli(&admin, &["--json", "get-global-statistics"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0], 1);
    assert!(v[1]["complete"]["DNSRate"].is_number());
    // A fault: its string on stderr, a non-zero exit.
    let (ok, _, err) = admin_cli(&admin, &["collection-resume", "web"]);
    assert!(!ok);
    assert!(err.contains("not suspended"), "{err}");
    let (ok, _, err) = admin_cli(&admin, &["collection-get-status"]);
    assert!(!ok);
    assert!(err.contains("takes 1 argument"), "{err}");
    let (ok, _, err) = admin_cli(&admin, &["no-such-command"]);
    assert!(!ok);
    assert!(err.contains("unknown command"), "{err}");
    let (ok, _, err) = admin_cli(&format!("127.0.0.1:{}", free_port()), &["is-distributed"]);
    assert!(!ok);
    assert!(err.contains("cannot connect"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// DESIGN.md "Limits every port keeps": a request followed by a half-close (the client shuts
/// its write side) is answered before the connection closes (MS-FSCADM 2.1: HTTP/1.1 POST).
#[test]
fn a_request_followed_by_a_half_close_is_answered() {
    let dir = temp_dir("admin-halfclose");
    let admin = format!("127.0.0.1:{}", free_port());
    let _node = standalone(&dir.path().join("data"), &admin);
    let mut s = TcpStream::connect(&admin).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(&post("/RPC2", LIST)).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).unwrap();
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply}");
    assert!(reply.contains("<array><data>"), "{reply}");
}

/// DESIGN.md "Limits every port keeps": a client pipelining XML-RPC requests and never reading
/// the answers is no longer read once the server holds enough of its requests, so the role's
/// memory stays bounded while another client is answered.
#[test]
fn pipelined_requests_from_a_client_that_never_reads_cost_bounded_memory() {
    let dir = temp_dir("admin-flood");
    let admin = format!("127.0.0.1:{}", free_port());
    let node = standalone(&dir.path().join("data"), &admin);
    let mut flooder = TcpStream::connect(&admin).unwrap();
    flooder
        .set_write_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let window = post("/RPC2", LIST).repeat(1000);
    let until = std::time::Instant::now() + Duration::from_secs(2);
    let mut sent = 0u64;
    while std::time::Instant::now() < until && flooder.write_all(&window).is_ok() {
        sent += 1000;
    }
    // Another client is answered meanwhile.
    let mut good = TcpStream::connect(&admin).unwrap();
    good.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (status, _) = exchange(&mut good, &post("/RPC2", LIST));
    assert_eq!(status, "HTTP/1.1 200 OK");
    let status = std::fs::read_to_string(format!("/proc/{}/status", node.child.id())).unwrap();
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    eprintln!("admin flood: {sent} requests written, node RSS {rss_kb} kB");
    assert!(
        rss_kb < 256 << 10,
        "the node holds {rss_kb} kB after a client pipelined {sent} requests without reading"
    );
}
