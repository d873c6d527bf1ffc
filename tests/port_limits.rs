//! The limits every port keeps (DESIGN.md "Limits every port keeps"), tried on a real duplicate
//! server process as a hostile client would: PPDUP_ADD sent without ever reading the answers,
//! and connections each holding most of a 60 MiB frame. The server's resident memory stays
//! bounded and a well-behaved client is answered throughout.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::Value;
use crawlfleet_core::msg::{Checksum, Message, PpdupChecksum, PpdupSetConfig};

use crate::util::{temp_dir, Client, Role};

/// Resident memory of a process, from /proc/<pid>/status (VmRSS), in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<pid>/status");
    kb * 1024
}

fn add(node: &str, i: u64) -> Message<'static> {
    let mut c = [0x5au8; 16];
    c[..8].copy_from_slice(&i.to_le_bytes());
    Message::PpdupAdd(PpdupChecksum {
        collection: b"c".to_vec().into(),
        node_id: node.as_bytes().to_vec().into(),
        uri: format!("http://{node}.example/{i}").into_bytes().into(),
        checksum: Checksum(c),
        ppdup_id: None,
        dbname: None,
    })
}

fn configured_client(addr: SocketAddr) -> Client {
    let mut c = Client::connect(addr);
    c.send(&Message::PpdupSetConfig(PpdupSetConfig {
        config: Value::Dict(vec![(Value::bytes(b"c"), Value::Dict(vec![]))]),
        vclock: 1,
        collection: None,
    }));
    assert!(matches!(c.recv_reply(), Message::PpdupConfigAck(_)));
    c
}

fn dupserver(dir: &std::path::Path) -> Role {
    Role::start(&[
        "dupserver",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        dir.to_str().unwrap(),
    ])
}

/// MS-FSCMT 3.3.5: every PPDUP_ADD is answered; a client that never reads those answers is
/// not read either once its answers back up (4 MiB), so it costs bounded memory.
#[test]
fn a_client_that_sends_ppdup_add_and_never_reads_costs_bounded_memory() {
    let dir = temp_dir("limits-flood");
    let server = dupserver(dir.path());
    let addr = server.addr();
    let mut good = configured_client(addr);
    let flooder = configured_client(addr);

    // Flood for up to 2 s: pipelined windows of 1,000 adds, never reading. Writes that block
    // for a second mean the server has stopped taking them.
    let mut stream = flooder.stream;
    stream
        .set_write_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let flood = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(2);
        let (mut i, mut buf) = (0u64, Vec::new());
        while Instant::now() < until {
            buf.clear();
            for _ in 0..1000 {
                frame::encode_message(&add("flood", i), Priority::Normal, &mut buf);
                i += 1;
            }
            if stream.write_all(&buf).is_err() {
                break;
            }
        }
        (stream, i)
    });

    // Meanwhile a well-behaved client's adds are answered, one round trip at a time.
    let mut answered = 0;
    while !flood.is_finished() {
        good.send(&add("good", answered));
        assert!(matches!(good.recv_reply(), Message::PpdupAddOk(_)));
        answered += 1;
    }
    let (_stream, sent) = flood.join().unwrap();
    let rss = rss(server.child.id());
    eprintln!("flood: {sent} adds offered, {answered} good round trips, server RSS {rss} bytes");
    assert!(answered > 0);
    assert!(
        rss < 256 << 20,
        "the duplicate server holds {rss} bytes after a client flooded it without reading"
    );
    good.send(&Message::PpdupKeepalive);
    assert!(matches!(good.recv_reply(), Message::PpdupKeepaliveAck));
}

/// 32 connections each announcing a 60 MiB frame (under the 64 MiB limit, MS-FSCMT 2.2.1) and
/// sending most of it: the partial-message budget closes those holding the most, so the server
/// stays under 512 MB and keeps answering.
#[test]
fn partial_60_mib_frames_on_32_connections_cost_bounded_memory() {
    let dir = temp_dir("limits-partial");
    let server = dupserver(dir.path());
    let addr = server.addr();
    let announced: u32 = 60 << 20;
    let chunk = vec![0u8; 1 << 20];
    let writers: Vec<_> = (0..32)
        .map(|_| {
            let chunk = chunk.clone();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut sent = 0usize;
                if s.write_all(&announced.to_be_bytes()).is_ok() {
                    // All but the last MiB: the frame never completes.
                    while sent + chunk.len() < announced as usize {
                        if s.write_all(&chunk).is_err() {
                            break;
                        }
                        sent += chunk.len();
                    }
                }
                (s, sent)
            })
        })
        .collect();
    let held: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let rss = rss(server.child.id());
    let sent: usize = held.iter().map(|(_, n)| n).sum();
    eprintln!("partial frames: {sent} bytes sent on 32 connections, server RSS {rss} bytes");
    assert!(
        rss < 512 << 20,
        "the duplicate server holds {rss} bytes for 32 partial frames"
    );
    let mut good = configured_client(addr);
    good.send(&add("good", 1));
    assert!(matches!(good.recv_reply(), Message::PpdupAddOk(_)));
}

/// DESIGN.md "Limits every port keeps": four connections flooding the link store with messages
/// it must refuse (MS-FSWASDR 3.2.5: answered `failed`) cost a log line a second, not a line a
/// message, and a valid message right after is acknowledged.
#[test]
fn a_flood_of_refused_link_store_messages_logs_a_line_a_second() {
    use std::io::{BufRead, BufReader};
    use std::process::Command;

    let dir = temp_dir("limits-logflood");
    let log_path = dir.path().join("stderr.log");
    std::fs::create_dir_all(dir.path()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
    cmd.args(["linkstore", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env("RUST_LOG", "warn")
        .stderr(std::fs::File::create(&log_path).unwrap());
    let store = Role::spawn(cmd);
    let addr = store.addr();

    // An empty marshal dict: well framed, but no link store message (no application key).
    let mut refused = b"{0".to_vec();
    refused.extend_from_slice(crate::util::WASDR_TERMINATOR);
    let window: Vec<u8> = refused.repeat(200);
    let flooders: Vec<_> = (0..4)
        .map(|_| {
            let window = window.clone();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let mut answers = BufReader::new(s.try_clone().unwrap());
                let (until, mut n) = (Instant::now() + Duration::from_secs(2), 0u64);
                while Instant::now() < until {
                    s.write_all(&window).unwrap();
                    for _ in 0..200 {
                        let mut a = String::new();
                        answers.read_line(&mut a).unwrap();
                        assert_eq!(a, "failed\n");
                        n += 1;
                    }
                }
                n
            })
        })
        .collect();
    let total: u64 = flooders.into_iter().map(|f| f.join().unwrap()).sum();

    // A valid (minimal) message right after is stored and acknowledged.
    let mut wire = Vec::new();
    {
        use crawlfleet_core::links::{Message, WebAnalyzerBatch};
        let mut b = WebAnalyzerBatch::default();
        b.no_links(b"http://www.fourthcoffee.com/", 1244208852)
            .unwrap();
        wire.extend_from_slice(&Message::webanalyzer(b"sp", &b).to_wire());
    }
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(&wire).unwrap();
    let mut a = String::new();
    BufReader::new(&s).read_line(&mut a).unwrap();
    assert_eq!(a, "ack\n");
    drop(store);

    let log = std::fs::read_to_string(&log_path).unwrap();
    let lines = log
        .lines()
        .filter(|l| l.contains("refusing a message"))
        .count();
    eprintln!("{total} refused messages, {lines} log lines about them");
    assert!(total >= 1000, "the flood was too small to tell ({total})");
    assert!(
        lines <= 8,
        "{lines} log lines for {total} refused messages in about 2 s:\n{log}"
    );
}

/// DESIGN.md "Limits every port keeps": requests received before the peer's FIN are answered.
/// A link store batch followed by a half-close gets its `ack` (MS-FSWASDR 3.2.5), and a
/// PPDUP_ADD followed by a half-close its PPDUP_ADD_OK (MS-FSCMT 3.3.5.3), both after the data
/// is durable; then the server closes.
#[test]
fn requests_sent_before_a_half_close_are_answered() {
    use std::io::Read;
    use std::net::Shutdown;

    let dir = temp_dir("limits-halfclose");
    let store = Role::start(&[
        "linkstore",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        dir.path().join("links").to_str().unwrap(),
    ]);
    let mut b = crawlfleet_core::links::WebAnalyzerBatch::default();
    b.no_links(b"http://www.fourthcoffee.com/", 1244208852)
        .unwrap();
    let wire = crawlfleet_core::links::Message::webanalyzer(b"sp", &b).to_wire();
    let mut s = TcpStream::connect(store.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(&wire).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    assert_eq!(answer, b"ack\n");

    let server = dupserver(&dir.path().join("dup"));
    let mut c = configured_client(server.addr());
    c.send(&add("half", 1));
    c.stream.shutdown(Shutdown::Write).unwrap();
    assert!(matches!(c.recv_reply(), Message::PpdupAddOk(_)));
    assert!(c.recv().is_none(), "the server closes once it has answered");
}

/// MS-FSWASDR 3.2.5: a message ends at its terminator. Bytes that are no marshal data, data
/// breaking off at the terminator and a string declaring more than the size limit are each
/// answered `failed` at once (not after 64 MiB more input), and the connection goes on.
#[test]
fn garbage_before_a_terminator_is_answered_failed_at_once() {
    use std::io::{BufRead, BufReader};

    let dir = temp_dir("limits-garbage");
    let store = Role::start(&[
        "linkstore",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        dir.path().to_str().unwrap(),
    ]);
    let mut huge = b"s".to_vec();
    huge.extend_from_slice(&(200u32 << 20).to_le_bytes());
    huge.extend_from_slice(b"abc");
    let s = TcpStream::connect(store.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut answers = BufReader::new(s.try_clone().unwrap());
    let mut s = s;
    for garbage in [
        b"this is not marshal data".to_vec(),
        b"{garbage".to_vec(),
        huge,
    ] {
        s.write_all(&garbage).unwrap();
        s.write_all(crate::util::WASDR_TERMINATOR).unwrap();
        let mut a = String::new();
        answers.read_line(&mut a).unwrap();
        assert_eq!(a, "failed\n", "{:?}", String::from_utf8_lossy(&garbage));
    }
}
