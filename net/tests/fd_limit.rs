//! The fetcher in a process out of file descriptors (EMFILE): a request that finds no
//! descriptor for its socket waits for one of the fetcher's sockets to free instead of failing,
//! and every request is answered. A test binary of its own: it lowers the process's
//! descriptor limit.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crawlfleet_net::fetch::{FetchRequest, Fetcher, FetcherOptions};
use rustix::process::{getrlimit, setrlimit, Resource};

/// A keep-alive HTTP/1.1 server in a child process (its own descriptors), answering each
/// request after 200 ms with the Host header it got.
const SERVER: &str = r#"
import http.server, socketserver, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        time.sleep(0.2)
        body = self.headers.get("Host", "").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 512
s = S(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn open_descriptors() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

#[test]
fn requests_wait_for_a_descriptor_instead_of_failing() {
    let mut child = Command::new("python3")
        .args(["-c", SERVER])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _server = Server(child);
    let port: u16 = line.trim().parse().expect("the server's port");
    let addr = format!("127.0.0.1:{port}").parse().unwrap();

    let f = Fetcher::spawn(FetcherOptions::default()).unwrap();
    // Room for about 12 sockets more than the process holds now (its epoll, its waker, the
    // test harness's own descriptors included): the 60 requests, each to a host name of its
    // own (no connection reused), need more.
    let saved = getrlimit(Resource::Nofile);
    let mut low = saved;
    low.current = Some(open_descriptors() + 12);
    setrlimit(Resource::Nofile, low).unwrap();

    let n = 60u64;
    let reqs = (0..n).map(|i| FetchRequest {
        id: i,
        url: format!("http://h{i}.test:{port}/").parse().unwrap(),
        addr,
        headers: Vec::new(),
        max_body: 1 << 16,
        connect_timeout: Duration::from_secs(30),
        timeout: Duration::from_secs(30),
        head: false,
        http10: false,
        post: None,
    });
    assert!(f.submit_many(reqs).is_empty());
    let mut answered = vec![false; n as usize];
    for _ in 0..n {
        let r = f
            .results
            .recv_timeout(Duration::from_secs(60))
            .expect("every request is answered");
        let resp = r
            .result
            .unwrap_or_else(|e| panic!("request {} failed: {e}", r.id));
        assert_eq!(resp.body, format!("h{}.test:{port}", r.id).into_bytes());
        assert!(!std::mem::replace(&mut answered[r.id as usize], true));
    }
    let peak = f.peak_connections();
    setrlimit(Resource::Nofile, saved).unwrap();
    assert!(
        peak < n as usize,
        "the descriptor limit held the sockets below the requests (peak {peak})"
    );
}
