//! A full disk pauses the multinode scheduler's routing instead of stopping it (issue "Disk
//! full": an answer, never an exit). Its data directory sits on a small tmpfs that a filler
//! file fills while a node sends URIs of new sites: the scheduler stays up, logs the pause,
//! reads as "Disk full" (state 5, MS-FSCADM 2.2.3.3) on its administrative port, keeps the
//! node's URIs, and once the filler goes routes every one of them, every site once (MS-FSCMT
//! 3.2.5.5); a SIGKILL and a restart after that keep every route. Needs root to mount the
//! tmpfs; says so and passes without checking anything otherwise.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use super::*;
use crate::disk_full::Tmpfs;
use crate::util::wait_until;
use crawlfleet_core::frame::{self, Priority};

/// Sites sent while the disk is full: their routes and queue records need more room than the
/// filler leaves (each URI is about 1 KiB).
const SITES: usize = 3000;

fn uri(i: usize) -> String {
    format!("http://www.full{i}.net/{}", "p".repeat(1000))
}

fn start(data: &Path, cfg: &Path, admin: &str, log: &Path) -> Role {
    let err = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
    cmd.args(["multinode", "--listen", "127.0.0.1:0", "--sync-ms", "20"])
        .args(["--admin", admin])
        .arg("--data-dir")
        .arg(data)
        .arg("--config")
        .arg(cfg)
        .env("RUST_LOG", "warn,crawlfleet_core::sched::multinode=info")
        .stderr(Stdio::from(err));
    Role::spawn(cmd)
}

fn uri_msg(u: &str) -> Message<'static> {
    Message::CmdUmUri(UriMsg {
        collection: b("web"),
        entry: entry(u),
    })
}

fn send_uri(s: &mut TcpStream, u: &str) {
    let mut out = Vec::new();
    frame::encode_message(&uri_msg(u), Priority::Normal, &mut out);
    s.write_all(&out).unwrap();
}

/// Collects what the multinode scheduler sends the node until it closes the connection
/// (answering keep-alives).
fn read_routed(mut c: Client, seen: &Mutex<Seen>) {
    c.stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    while let Some(m) = c.recv() {
        let mut s = seen.lock().unwrap();
        match m {
            Message::CmdUmKeepalive => c.send(&Message::CmdUmKeepaliveAck),
            Message::CmdUmAddRoute(r) => {
                s.route_msgs += 1;
                s.routes.insert(
                    String::from_utf8_lossy(&r.routing_attr).into_owned(),
                    String::from_utf8_lossy(&r.node_id).into_owned(),
                );
            }
            Message::CmdUmUri(u) => s.uris.push((
                String::from_utf8_lossy(&u.entry.uri.uri).into_owned(),
                false,
            )),
            _ => {}
        }
    }
}

fn status(admin: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args([
            "admin",
            "--json",
            "--server",
            admin,
            "CollectionGetStatus",
            "web",
        ])
        .output()
        .expect("crawlfleet admin runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fill(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("filler");
    let mut filler = std::fs::File::create(&path).unwrap();
    let mb = vec![1u8; 1 << 20];
    while filler.write_all(&mb).is_ok() {}
    let kb = [1u8; 1024];
    while filler.write_all(&kb).is_ok() {}
    let _ = filler.sync_all();
    path
}

#[test]
fn a_full_disk_pauses_routing_and_every_uri_is_routed_when_space_returns() {
    let scratch = temp_dir("mn-disk-full");
    let Some(fs) = Tmpfs::mount(&scratch.path().join("mnt"), 48) else {
        eprintln!("multinode disk full: cannot mount a tmpfs here (not root?); test skipped");
        return;
    };
    let cfg = config_xml(scratch.path(), "web", 0, None);
    let data = fs.0.join("mn");
    let log = scratch.path().join("mn.log");
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let admin = format!("127.0.0.1:{port}");
    let mut mn = start(&data, &cfg, &admin, &log);
    let (mut node, _) = register(mn.addr(), "n1");
    answer_ask(&mut node);
    let mut sender = node.stream.try_clone().unwrap();
    // The node reads everything routed to it on its own thread while the test sends.
    let seen = Arc::new(Mutex::new(Seen::default()));
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || read_routed(node, &seen))
    };
    let routed = || seen.lock().unwrap().uris.len();
    // Routing works before the disk fills.
    send_uri(&mut sender, "http://www.before.org/");
    wait_until("the first URI is routed", || routed() == 1);

    let filler = fill(&fs.0);
    let mut batch = Vec::new();
    for i in 0..SITES {
        frame::encode_message(&uri_msg(&uri(i)), Priority::Normal, &mut batch);
    }
    sender.write_all(&batch).unwrap();
    let logged = |what: &str| std::fs::read_to_string(&log).is_ok_and(|l| l.contains(what));
    wait_until("the pause is logged", || {
        if let Some(exit) = mn.child.try_wait().unwrap() {
            panic!(
                "the multinode scheduler exited ({exit}) instead of pausing:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        logged("routing paused")
    });
    assert!(
        status(&admin).contains("suspended"),
        "the status while the disk is full: {}",
        status(&admin)
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(mn.child.try_wait().unwrap().is_none(), "it exited");
    let paused_at = routed();
    assert!(
        paused_at < SITES + 1,
        "the disk filled before every URI was routed ({paused_at} routed)"
    );

    std::fs::remove_file(&filler).unwrap();
    wait_until("every URI is routed", || routed() > SITES);
    wait_until("the resume is logged", || logged("routing resumed"));
    assert!(
        !status(&admin).contains("suspended"),
        "the status after space returned: {}",
        status(&admin)
    );
    {
        let seen = seen.lock().unwrap();
        let got: BTreeSet<&str> = seen.uris.iter().map(|(u, _)| u.as_str()).collect();
        for i in 0..SITES {
            assert!(got.contains(uri(i).as_str()), "{} was routed", uri(i));
        }
        assert_eq!(seen.uris.len(), SITES + 1, "each URI routed once");
        assert_eq!(seen.routes.len(), SITES + 1, "one route per site");
        assert_eq!(seen.route_msgs, SITES + 1, "no site routed twice");
    }

    // The routes made across the pause survive a SIGKILL: a URI of a site routed during it
    // goes to n1 with no new decision.
    mn.child.kill().unwrap();
    mn.child.wait().unwrap();
    drop(sender);
    reader.join().unwrap();
    let mn = start(&data, &cfg, &admin, &log);
    let (mut node, _) = register(mn.addr(), "n1");
    answer_ask(&mut node);
    let mut again = Seen::default();
    node.send(&uri_msg(&format!("{}/again", uri(7))));
    observe(&mut node, &mut again, |s| !s.uris.is_empty());
    assert!(
        again.routes.is_empty(),
        "no new decision: {:?}",
        again.routes
    );
}
