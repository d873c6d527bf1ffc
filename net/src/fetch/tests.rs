//! Fetcher tests against loopback servers that write raw bytes from std threads.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
use flate2::Compression;

use super::http::ResponseReader;
use super::*;

/// Long enough that a loaded machine never hits it; tests never assert on time.
const WAIT: Duration = Duration::from_secs(60);

type Handler = dyn Fn(usize, TcpStream) + Send + Sync;

/// A loopback server: each accepted connection gets a thread running `handler(index, stream)`.
struct Server {
    addr: SocketAddr,
    accepts: Arc<AtomicUsize>,
    /// Request heads received, in order.
    heads: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(
        listener: TcpListener,
        handler: impl Fn(usize, TcpStream) + Send + Sync + 'static,
    ) -> Server {
        let addr = listener.local_addr().unwrap();
        let accepts = Arc::new(AtomicUsize::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        let count = accepts.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let i = count.fetch_add(1, Ordering::SeqCst);
                let h = handler.clone();
                std::thread::spawn(move || h(i, stream));
            }
        });
        Server {
            addr,
            accepts,
            heads: Arc::default(),
        }
    }

    fn local(handler: impl Fn(usize, TcpStream) + Send + Sync + 'static) -> Server {
        Server::start(TcpListener::bind("127.0.0.1:0").unwrap(), handler)
    }

    /// Answers every request on every connection with `response(path)`, keeping connections
    /// open, and records the request heads.
    fn keep_alive(response: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static) -> Server {
        let heads: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = heads.clone();
        let mut s = Server::local(move |_, stream| {
            let mut r = BufReader::new(stream.try_clone().unwrap());
            let mut w = stream;
            while let Some(head) = read_head(&mut r) {
                let path = head.split(' ').nth(1).unwrap_or("").to_string();
                seen.lock().unwrap().push(head);
                if w.write_all(&response(&path)).is_err() {
                    return;
                }
            }
        });
        s.heads = heads;
        s
    }

    fn accepted(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }
}

/// Reads one request head; `None` at end of stream.
fn read_head(r: &mut impl BufRead) -> Option<String> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        head.push_str(&line);
        if line == "\r\n" {
            return Some(head);
        }
    }
}

fn ok_response(body: &[u8]) -> Vec<u8> {
    let mut v = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    v.extend_from_slice(body);
    v
}

fn request(id: u64, url: &str, addr: SocketAddr) -> FetchRequest {
    FetchRequest {
        id,
        url: url.parse().unwrap(),
        addr,
        headers: Vec::new(),
        max_body: 1 << 20,
        connect_timeout: WAIT,
        timeout: WAIT,
        head: false,
        http10: false,
        post: None,
    }
}

fn fetcher() -> Fetcher {
    let _ = env_logger::builder().is_test(true).try_init();
    let opts = FetcherOptions {
        user_agent: "crawlfleet-test".into(),
        ..Default::default()
    };
    Fetcher::spawn(opts).unwrap()
}

/// Waits (bounded) until every answered request left the in-flight count, which drops just
/// after its result is sent.
fn settled(f: &Fetcher) {
    let until = std::time::Instant::now() + WAIT;
    while f.in_flight() != 0 && std::time::Instant::now() < until {
        std::thread::yield_now();
    }
    assert_eq!(f.in_flight(), 0);
}

fn fetch(f: &Fetcher, req: FetchRequest) -> FetchResult {
    let id = req.id;
    f.submit(req).unwrap();
    let res = f.results.recv_timeout(WAIT).expect("a result");
    assert_eq!(res.id, id);
    res
}

fn fetch_ok(f: &Fetcher, req: FetchRequest) -> Response {
    let res = fetch(f, req);
    match res.result {
        Ok(r) => r,
        Err(e) => panic!("{}: {e}", res.url),
    }
}

/// A server that answers the first request of each connection with `bytes` and closes.
fn one_shot(bytes: Vec<u8>) -> Server {
    Server::local(move |_, stream| {
        let mut r = BufReader::new(stream.try_clone().unwrap());
        let mut w = stream;
        if read_head(&mut r).is_some() {
            let _ = w.write_all(&bytes);
        }
    })
}

/// A request in HTTP/1.0 (a collection's use_http_1_1 off) says so on its request line, asks
/// the server to close, and its connection is not kept: the next request opens another, even
/// when the server answered in HTTP/1.1 and kept the connection open.
#[test]
fn an_http10_request_closes_its_connection() {
    let s = Server::keep_alive(|_| ok_response(b"hi"));
    let f = fetcher();
    for id in 0..2 {
        let mut req = request(id, &format!("http://h.test:{}/x", s.addr.port()), s.addr);
        req.http10 = true;
        let resp = fetch_ok(&f, req);
        assert_eq!(resp.body, b"hi");
        assert!(!resp.reused_connection);
        settled(&f);
    }
    assert_eq!(s.accepted(), 2, "one connection a request");
    let heads = s.heads.lock().unwrap();
    for head in heads.iter() {
        assert!(head.starts_with("GET /x HTTP/1.0\r\n"), "{head}");
        assert!(head.contains("\r\nConnection: close\r\n"), "{head}");
    }
    drop(heads);
    // The same server in HTTP/1.1 keeps one connection for both.
    let s = Server::keep_alive(|_| ok_response(b"hi"));
    for id in 2..4 {
        fetch_ok(
            &f,
            request(id, &format!("http://h.test:{}/x", s.addr.port()), s.addr),
        );
        settled(&f);
    }
    assert_eq!(s.accepted(), 1);
}

/// A form submission (a Login's `action` POST): the request line says POST, the body follows
/// the head with its Content-Length (RFC 9112 section 6.2), and it goes on a connection of its
/// own, not on the kept-alive one a GET before it left idle (RFC 9112 section 9.3.1.1: a
/// POST is never sent twice, so never where a dropped idle connection could swallow it).
#[test]
fn a_post_sends_its_body_on_a_fresh_connection() {
    type Requests = Arc<Mutex<Vec<(String, Vec<u8>)>>>;
    let bodies: Requests = Arc::default();
    let seen = bodies.clone();
    let s = Server::local(move |_, stream| {
        let mut r = BufReader::new(stream.try_clone().unwrap());
        let mut w = stream;
        while let Some(head) = read_head(&mut r) {
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .map_or(0, |n| n.trim().parse::<usize>().unwrap());
            let mut body = vec![0; len];
            r.read_exact(&mut body).unwrap();
            seen.lock().unwrap().push((head, body));
            if w.write_all(&ok_response(b"ok")).is_err() {
                return;
            }
        }
    });
    let f = fetcher();
    let url = format!("http://h.test:{}/login", s.addr.port());
    fetch_ok(&f, request(1, &url, s.addr));
    settled(&f);
    let mut post = request(2, &url, s.addr);
    post.post = Some(b"user=a%20b&pass=x".to_vec());
    post.headers.push((
        "Content-Type".into(),
        "application/x-www-form-urlencoded".into(),
    ));
    let resp = fetch_ok(&f, post);
    assert_eq!(resp.body, b"ok");
    assert!(!resp.reused_connection, "a POST on the idle connection");
    settled(&f);
    // The connection the POST opened serves the next GET.
    assert!(fetch_ok(&f, request(3, &url, s.addr)).reused_connection);
    assert_eq!(s.accepted(), 2);
    let got = bodies.lock().unwrap();
    let (head, body) = &got[1];
    assert!(head.starts_with("POST /login HTTP/1.1\r\n"), "{head}");
    assert!(head.contains("\r\nContent-Length: 17\r\n"), "{head}");
    assert!(
        head.contains("\r\nContent-Type: application/x-www-form-urlencoded\r\n"),
        "{head}"
    );
    assert_eq!(body, b"user=a%20b&pass=x");
    assert!(got[0].0.starts_with("GET ") && got[2].0.starts_with("GET "));
}

#[test]
fn content_length_and_request_head() {
    let s = Server::keep_alive(|_| {
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Test: a b\r\n\r\nhello".to_vec()
    });
    let f = fetcher();
    let mut req = request(
        7,
        &format!("http://Example.TEST:{}/p/a?q=1#frag", s.addr.port()),
        s.addr,
    );
    req.headers.push(("If-None-Match".into(), "\"v1\"".into()));
    let resp = fetch_ok(&f, req);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"hello");
    assert_eq!(resp.header("x-test"), Some(&b"a b"[..]));
    assert!(!resp.truncated && !resp.reused_connection);
    let heads = s.heads.lock().unwrap();
    let head = &heads[0];
    assert!(head.starts_with("GET /p/a?q=1 HTTP/1.1\r\n"), "{head}");
    assert!(
        head.contains(&format!("\r\nHost: example.test:{}\r\n", s.addr.port())),
        "{head}"
    );
    for line in [
        "User-Agent: crawlfleet-test",
        "Accept-Encoding: gzip, deflate",
        "Connection: keep-alive",
        "If-None-Match: \"v1\"",
    ] {
        assert!(
            head.contains(&format!("\r\n{line}\r\n")),
            "{line} missing from {head}"
        );
    }
    settled(&f);
}

#[test]
fn default_port_is_left_out_of_host() {
    let mut b = Vec::new();
    super::conn::encode_request(
        &request(1, "http://example.test/x", "127.0.0.1:80".parse().unwrap()),
        "ua",
        &mut b,
    );
    assert!(String::from_utf8(b)
        .unwrap()
        .contains("\r\nHost: example.test\r\n"));
}

const CHUNKED: &[&[u8]] = &[
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"5;ext=1\r\nhello\r\n",
    b"6\r\n world\r\n",
    b"0\r\nX-Trailer: t\r\n\r\n",
];

#[test]
fn chunked_with_trailers_then_reuse() {
    let s = Server::local(|_, stream| {
        let mut r = BufReader::new(stream.try_clone().unwrap());
        let mut w = stream;
        while read_head(&mut r).is_some() {
            for part in CHUNKED {
                w.write_all(part).unwrap();
                w.flush().unwrap();
            }
        }
    });
    let f = fetcher();
    let url = format!("http://h.test:{}/", s.addr.port());
    let first = fetch_ok(&f, request(1, &url, s.addr));
    assert_eq!(first.body, b"hello world");
    let second = fetch_ok(&f, request(2, &url, s.addr));
    assert_eq!(second.body, b"hello world");
    assert!(second.reused_connection);
    assert_eq!(s.accepted(), 1);
}

#[test]
fn chunked_parses_at_every_split_point() {
    let all: Vec<u8> = CHUNKED.concat();
    for split in 0..=all.len() {
        let mut r = ResponseReader::new(false, 1 << 20);
        let a = r.feed(&all[..split]).unwrap();
        assert_eq!(a.done, split == all.len());
        let mut rest = all[a.consumed..].to_vec();
        // Byte by byte from the split on: partial lines must wait, not fail.
        let mut done = a.done;
        let mut pending = Vec::new();
        for b in rest.drain(..) {
            pending.push(b);
            let fed = r.feed(&pending).unwrap();
            pending.drain(..fed.consumed);
            done = fed.done;
        }
        assert!(done && pending.is_empty(), "split {split}");
        let (resp, keep) = r.take(false).unwrap();
        assert_eq!(resp.body, b"hello world");
        assert!(keep);
    }
}

#[test]
fn close_delimited_body() {
    let s = one_shot(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end".to_vec());
    let f = fetcher();
    let url = format!("http://h.test:{}/", s.addr.port());
    let resp = fetch_ok(&f, request(1, &url, s.addr));
    assert_eq!(resp.body, b"until the end");
    // The connection was not pooled: the next request opens another.
    assert_eq!(
        fetch_ok(&f, request(2, &url, s.addr)).body,
        b"until the end"
    );
    assert_eq!(s.accepted(), 2);
}

fn encoded(encoding: &str, body: &[u8]) -> Vec<u8> {
    let data = match encoding {
        "gzip" => {
            let mut e = GzEncoder::new(Vec::new(), Compression::fast());
            e.write_all(body).unwrap();
            e.finish().unwrap()
        }
        "zlib" => {
            let mut e = ZlibEncoder::new(Vec::new(), Compression::fast());
            e.write_all(body).unwrap();
            e.finish().unwrap()
        }
        _ => {
            let mut e = DeflateEncoder::new(Vec::new(), Compression::fast());
            e.write_all(body).unwrap();
            e.finish().unwrap()
        }
    };
    let name = if encoding == "gzip" {
        "gzip"
    } else {
        "deflate"
    };
    let mut v = format!(
        "HTTP/1.1 200 OK\r\nContent-Encoding: {name}\r\nContent-Length: {}\r\n\r\n",
        data.len()
    )
    .into_bytes();
    v.extend_from_slice(&data);
    v
}

#[test]
fn gzip_and_both_deflate_forms_are_decoded() {
    let body: Vec<u8> = (0..50_000u32)
        .flat_map(|i| (i % 251).to_le_bytes())
        .collect();
    let f = fetcher();
    for (i, encoding) in ["gzip", "zlib", "raw"].into_iter().enumerate() {
        let bytes = encoded(encoding, &body);
        let s = Server::keep_alive(move |_| bytes.clone());
        let url = format!("http://h.test:{}/", s.addr.port());
        let resp = fetch_ok(&f, request(i as u64, &url, s.addr));
        assert_eq!(resp.body.len(), body.len(), "{encoding}");
        assert!(resp.body == body && !resp.truncated, "{encoding}");
    }
}

/// "deflate" is sniffed from its first two bytes, which may come in different chunks.
#[test]
fn deflate_in_one_byte_chunks() {
    let body = b"deflate in tiny chunks, zlib-wrapped and raw".repeat(20);
    for encoding in ["zlib", "raw"] {
        let whole = encoded(encoding, &body);
        let at = whole.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let mut wire =
            b"HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n\r\n"
                .to_vec();
        for b in &whole[at..] {
            wire.extend_from_slice(b"1\r\n");
            wire.push(*b);
            wire.extend_from_slice(b"\r\n");
        }
        wire.extend_from_slice(b"0\r\n\r\n");
        let mut r = ResponseReader::new(false, 1 << 20);
        let fed = r.feed(&wire).unwrap();
        assert!(fed.done && fed.consumed == wire.len(), "{encoding}");
        assert_eq!(r.take(false).unwrap().0.body, body, "{encoding}");
    }
}

#[test]
fn bad_gzip_is_a_decode_error() {
    let s = one_shot(
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 8\r\n\r\nnot gzip".to_vec(),
    );
    let f = fetcher();
    let res = fetch(
        &f,
        request(1, &format!("http://h.test:{}/", s.addr.port()), s.addr),
    );
    assert!(
        matches!(res.result, Err(FetchError::Decode(_))),
        "{:?}",
        res.result
    );
}

#[test]
fn body_beyond_max_body_is_cut_off() {
    let s = Server::keep_alive(|p| match p {
        "/len" => ok_response(&[b'x'; 100_000]),
        _ => {
            let mut v = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for _ in 0..100 {
                v.extend_from_slice(b"3e8\r\n");
                v.extend_from_slice(&[b'y'; 1000]);
                v.extend_from_slice(b"\r\n");
            }
            v.extend_from_slice(b"0\r\n\r\n");
            v
        }
    });
    let f = fetcher();
    for path in ["/len", "/chunked"] {
        let mut req = request(1, &format!("http://h.test:{}{path}", s.addr.port()), s.addr);
        req.max_body = 1000;
        let resp = fetch_ok(&f, req);
        assert_eq!(resp.body.len(), 1000, "{path}");
        assert!(resp.truncated, "{path}");
    }
    // A cut-off body leaves bytes on the wire: both connections were closed, none reused.
    assert_eq!(s.accepted(), 2);
}

#[test]
fn decompression_bomb_is_capped() {
    let bomb = encoded("gzip", &vec![0u8; 16 << 20]);
    assert!(bomb.len() < 200 << 10);
    let s = Server::keep_alive(move |_| bomb.clone());
    let f = fetcher();
    let mut req = request(1, &format!("http://h.test:{}/", s.addr.port()), s.addr);
    req.max_body = 256 << 10;
    let resp = fetch_ok(&f, req);
    assert_eq!(resp.body.len(), 256 << 10);
    assert!(resp.truncated);
}

#[test]
fn refused_connection() {
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let f = fetcher();
    let res = fetch(
        &f,
        request(1, &format!("http://h.test:{}/", addr.port()), addr),
    );
    assert!(
        matches!(res.result, Err(FetchError::Refused)),
        "{:?}",
        res.result
    );
}

#[test]
fn server_that_never_answers_times_out() {
    let s = Server::local(|_, mut stream| {
        let mut sink = Vec::new();
        let _ = stream.read_to_end(&mut sink); // until the client gives up
    });
    let f = fetcher();
    let mut req = request(1, &format!("http://h.test:{}/", s.addr.port()), s.addr);
    req.timeout = Duration::from_millis(200);
    let res = fetch(&f, req);
    assert!(
        matches!(res.result, Err(FetchError::Timeout)),
        "{:?}",
        res.result
    );
    settled(&f);
}

/// A listener with a backlog of 0 and its queue filled: further SYNs are dropped, so a
/// connect hangs until its timeout.
#[test]
fn connect_to_full_backlog_times_out() {
    let Some((listener, _held)) = full_listener() else {
        eprintln!("skipped: could not fill a listen backlog here");
        return;
    };
    let addr = listener.local_addr().unwrap();
    let f = fetcher();
    let mut req = request(1, &format!("http://h.test:{}/", addr.port()), addr);
    req.connect_timeout = Duration::from_millis(300);
    let res = fetch(&f, req);
    assert!(
        matches!(res.result, Err(FetchError::ConnectTimeout)),
        "{:?}",
        res.result
    );
}

fn full_listener() -> Option<(TcpListener, Vec<TcpStream>)> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    // A listener with a backlog of 0 (std's bind chooses its own, larger backlog).
    let fd = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    rustix::net::bind(&fd, &SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
    rustix::net::listen(&fd, 0).unwrap();
    let listener = TcpListener::from(fd);
    let addr = listener.local_addr().unwrap();
    let mut held = Vec::new();
    // Fill the accept queue; once a connect times out, the next one will too.
    for _ in 0..8 {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => held.push(s),
            Err(_) => return Some((listener, held)),
        }
    }
    None
}

#[test]
fn garbage_status_line_is_a_protocol_error() {
    let s = one_shot(b"SSH-2.0-OpenSSH_9.2\r\n\r\n".to_vec());
    let f = fetcher();
    let res = fetch(
        &f,
        request(1, &format!("http://h.test:{}/", s.addr.port()), s.addr),
    );
    assert!(
        matches!(res.result, Err(FetchError::Protocol(_))),
        "{:?}",
        res.result
    );
}

#[test]
fn head_204_304_have_no_body_and_keep_the_connection() {
    let s = Server::keep_alive(|p| {
        match p {
        "/head" => b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n".to_vec(),
        "/304" => b"HTTP/1.1 304 Not Modified\r\nContent-Length: 1000\r\n\r\n".to_vec(),
        "/204" => b"HTTP/1.1 204 No Content\r\n\r\n".to_vec(),
        _ => b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\ngone".to_vec(),
    }
    });
    let f = fetcher();
    let url = |p: &str| format!("http://h.test:{}{p}", s.addr.port());
    let mut head = request(1, &url("/head"), s.addr);
    head.head = true;
    let r = fetch_ok(&f, head);
    assert_eq!((r.status, r.body.len()), (200, 0));
    let r = fetch_ok(&f, request(2, &url("/304"), s.addr));
    assert_eq!(
        (r.status, r.body.len(), r.reused_connection),
        (304, 0, true)
    );
    let r = fetch_ok(&f, request(3, &url("/204"), s.addr));
    assert_eq!(
        (r.status, r.body.len(), r.reused_connection),
        (204, 0, true)
    );
    let r = fetch_ok(&f, request(4, &url("/interim"), s.addr));
    assert_eq!(
        (r.status, r.body.as_slice(), r.reused_connection),
        (404, &b"gone"[..], true)
    );
    assert!(s.heads.lock().unwrap()[0].starts_with("HEAD /head HTTP/1.1\r\n"));
    assert_eq!(s.accepted(), 1);
}

#[test]
fn shutdown_answers_pending_requests() {
    let s = Server::local(|_, mut stream| {
        let mut sink = Vec::new();
        let _ = stream.read_to_end(&mut sink);
    });
    let f = fetcher();
    let results = f.results.clone();
    f.submit(request(
        9,
        &format!("http://h.test:{}/", s.addr.port()),
        s.addr,
    ))
    .unwrap();
    f.shutdown();
    let res = results.recv_timeout(WAIT).unwrap();
    assert!(
        matches!(res.result, Err(FetchError::Shutdown)),
        "{:?}",
        res.result
    );
}

#[test]
fn invalid_requests_are_refused_at_submit() {
    let f = fetcher();
    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let r = f.submit(request(1, "ftp://h.test/x", addr));
    assert!(matches!(r, Err(FetchError::InvalidRequest(_))));
    let mut req = request(2, "http://h.test/x", addr);
    req.headers
        .push(("X-A".into(), "1\r\nX-Injected: 2".into()));
    assert!(matches!(f.submit(req), Err(FetchError::InvalidRequest(_))));
    // A POST's body length is the fetcher's to frame; HEAD and POST at once is neither.
    for (id, header, head) in [
        (3, "Content-Length", false),
        (4, "transfer-encoding", false),
        (5, "X-A", true),
    ] {
        let mut req = request(id, "http://h.test/x", addr);
        req.post = Some(b"a=1".to_vec());
        req.head = head;
        req.headers.push((header.into(), "3".into()));
        assert!(
            matches!(f.submit(req), Err(FetchError::InvalidRequest(_))),
            "{header}"
        );
    }
    settled(&f);
}

/// A batch with a request that cannot be sent: that one comes back refused with why, and
/// every other one of the batch is still fetched (a refusal once dropped the rest of the
/// batch, and the crawl waited for their answers for good).
#[test]
fn a_refused_request_in_a_batch_leaves_the_others_queued() {
    let s = Server::keep_alive(|_| ok_response(b"hi"));
    let f = fetcher();
    let url = format!("http://h.test:{}/x", s.addr.port());
    let reqs = (0..5).map(|id| {
        let mut r = request(id, &url, s.addr);
        if id == 2 {
            r.headers.push(("X-A".into(), "1\r\nX-Injected: 2".into()));
        }
        r
    });
    let refused = f.submit_many(reqs);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].0.id, 2);
    assert!(matches!(refused[0].1, FetchError::InvalidRequest(_)));
    let mut answered: Vec<u64> = (0..4)
        .map(|_| f.results.recv_timeout(WAIT).expect("a result").id)
        .collect();
    answered.sort_unstable();
    assert_eq!(answered, [0, 1, 3, 4]);
    settled(&f);
}

#[test]
fn ipv6_loopback() {
    let Ok(listener) = TcpListener::bind("[::1]:0") else {
        eprintln!("skipped: cannot bind [::1] here");
        return;
    };
    let s = Server::start(listener, |_, stream| {
        let mut r = BufReader::new(stream.try_clone().unwrap());
        let mut w = stream;
        while read_head(&mut r).is_some() {
            w.write_all(&ok_response(b"v6")).unwrap();
        }
    });
    let f = fetcher();
    let resp = fetch_ok(
        &f,
        request(1, &format!("http://[::1]:{}/", s.addr.port()), s.addr),
    );
    assert_eq!(resp.body, b"v6");
}

#[test]
fn random_bytes_never_panic_the_reader() {
    let mut rng = fastrand::Rng::with_seed(5);
    let prefixes: [&[u8]; 4] = [
        b"",
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n",
    ];
    for round in 0..4000 {
        let mut input = prefixes[round % prefixes.len()].to_vec();
        let alphabet = b"0123456789abcdefABCDEF\r\n :;,HTP/.\x1f\x8b\x08\x00";
        for _ in 0..rng.usize(0..300) {
            input.push(if rng.bool() {
                alphabet[rng.usize(..alphabet.len())]
            } else {
                rng.u8(..)
            });
        }
        let mut r = ResponseReader::new(rng.bool(), rng.usize(0..100));
        let mut at = 0;
        while at < input.len() {
            let end = (at + rng.usize(1..40)).min(input.len());
            match r.feed(&input[at..end]) {
                Ok(fed) if fed.done => {
                    let _ = r.take(false);
                    break;
                }
                Ok(fed) if fed.consumed == 0 => at = end, // partial: the real buffer keeps them
                Ok(fed) => at += fed.consumed,
                Err(_) => break,
            }
        }
        let _ = r.eof();
    }
}

mod drained;
mod https;
mod pool;

#[test]
fn keep_wire_gives_the_exchange_as_sent_and_received() {
    // Chunked and gzip-coded: the wire bytes keep both codings, the body has neither.
    let gz = encoded("gzip", b"archived body");
    let head_end = gz.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let data = &gz[head_end..];
    let mut sent = format!(
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\
         Transfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        data.len()
    )
    .into_bytes();
    sent.extend_from_slice(data);
    sent.extend_from_slice(b"\r\n0\r\n\r\n");
    let reply = sent.clone();
    let s = Server::keep_alive(move |_| reply.clone());
    let f = Fetcher::spawn(FetcherOptions {
        user_agent: "crawlfleet-test".into(),
        keep_wire: true,
        ..Default::default()
    })
    .unwrap();
    let url = format!("http://h.test:{}/w", s.addr.port());
    let resp = fetch_ok(&f, request(1, &url, s.addr));
    assert_eq!(resp.body, b"archived body");
    let wire = resp.wire.expect("the wire bytes");
    assert_eq!(wire.response, sent);
    assert_eq!(wire.peer, s.addr);
    let head = s.heads.lock().unwrap()[0].clone();
    assert_eq!(String::from_utf8(wire.request).unwrap(), head);
    // Without keep_wire nothing is kept.
    let plain = fetch_ok(&fetcher(), request(2, &url, s.addr));
    assert!(plain.wire.is_none());
}

/// The bytes a fetch read and wrote are counted as they went over the socket: the response
/// head with the body, the request as sent (MS-FSCADM 2.2.4.9 ReadNet / WriteNet), and a
/// failed fetch's too.
#[test]
fn network_bytes_read_and_written_are_counted() {
    let body = b"0123456789".repeat(50);
    let resp = ok_response(&body);
    let sent = resp.clone();
    let s = Server::keep_alive(move |_| sent.clone());
    let f = fetcher();
    for id in 1..=2 {
        let url = format!("http://{}/n{id}", s.addr);
        let r = fetch(&f, request(id, &url, s.addr));
        assert_eq!(r.result.unwrap().body, body);
        assert_eq!(r.net_read, resp.len() as u64);
        let head = s.heads.lock().unwrap().last().unwrap().clone();
        assert_eq!(r.net_written, head.len() as u64, "{head:?}");
    }
    // A server that reads the request and closes: what was written still counts.
    let closing = Server::local(|_, stream| {
        let mut r = BufReader::new(stream);
        read_head(&mut r);
    });
    let url = format!("http://{}/gone", closing.addr);
    let r = fetch(&f, request(3, &url, closing.addr));
    assert!(r.result.is_err());
    assert_eq!(r.net_read, 0);
    assert!(r.net_written > 30, "{}", r.net_written);
    f.shutdown();
}
