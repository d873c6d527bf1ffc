//! Disk full is an answer, never an exit (DESIGN.md "Limits every port keeps"): a duplicate
//! server on a small tmpfs answers PPDUP_ERROR to adds it cannot make durable (MS-FSCMT 2.2.5:
//! PPDUP_ERROR carries the reason), keeps answering what needs no new record, loses nothing it
//! acknowledged, and takes adds again by itself once space returns. Needs root to mount the
//! tmpfs; says so and passes without checking anything otherwise.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crawlfleet_core::marshal::Value;
use crawlfleet_core::msg::{Checksum, Message, PpdupChecksum, PpdupSetConfig};

use crate::util::{temp_dir, Client, Role};

/// A tmpfs of `mib` MiB mounted at `at`, unmounted when dropped.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn mount(at: &Path, mib: u32) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn cs(i: u64) -> Checksum {
    let mut c = [0x3cu8; 16];
    c[..8].copy_from_slice(&i.to_le_bytes());
    Checksum(c)
}

/// A URI of about 1 KiB (long query strings are common), so the log's room fills in a few
/// thousand adds.
fn uri(node: &str, i: u64) -> String {
    format!(
        "http://{node}.example/search?q={}&page={i}",
        "long-query-term".repeat(60)
    )
}

fn add(node: &str, i: u64) -> Message<'static> {
    Message::PpdupAdd(PpdupChecksum {
        collection: b"c".to_vec().into(),
        node_id: node.as_bytes().to_vec().into(),
        uri: uri(node, i).into_bytes().into(),
        checksum: cs(i),
        ppdup_id: None,
        dbname: None,
    })
}

/// Sends adds `from..to` as node `node` in windows of 1,000; returns how many were answered
/// PPDUP_ADD_OK before the first PPDUP_ERROR, and that error's reason if one came.
fn add_until_error(c: &mut Client, node: &str, from: u64, to: u64) -> (u64, Option<String>) {
    let mut ok = 0;
    let mut i = from;
    while i < to {
        let n = 1000.min(to - i);
        let window: Vec<_> = (i..i + n).map(|k| add(node, k)).collect();
        c.send_many(&window);
        let mut error = None;
        for _ in 0..n {
            match c.recv_reply() {
                Message::PpdupAddOk(_) if error.is_none() => ok += 1,
                Message::PpdupAddOk(_) => {}
                Message::PpdupError(e) => {
                    error.get_or_insert(String::from_utf8_lossy(&e.why).into_owned());
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        if error.is_some() {
            return (ok, error);
        }
        i += n;
    }
    (ok, None)
}

fn owner(c: &mut Client, i: u64) -> String {
    c.send(&add("probe", i));
    match c.recv_reply() {
        Message::PpdupAddOk(ok) => String::from_utf8_lossy(ok.owner_uri.as_deref().unwrap()).into(),
        other => panic!("expected PPDUP_ADD_OK, got {other:?}"),
    }
}

fn start(dir: &Path) -> (Role, Client) {
    let server = Role::start(&[
        "dupserver",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        dir.to_str().unwrap(),
    ]);
    let mut c = Client::connect(server.addr());
    c.send(&Message::PpdupSetConfig(PpdupSetConfig {
        config: Value::Dict(vec![(Value::bytes(b"c"), Value::Dict(vec![]))]),
        vclock: 1,
        collection: None,
    }));
    assert!(matches!(c.recv_reply(), Message::PpdupConfigAck(_)));
    (server, c)
}

#[test]
fn a_full_disk_gets_ppdup_error_and_loses_nothing_acknowledged() {
    let scratch = temp_dir("disk-full");
    let Some(fs) = Tmpfs::mount(&scratch.path().join("mnt"), 40) else {
        eprintln!("disk_full: cannot mount a tmpfs here (not root?); test skipped");
        return;
    };
    let data = fs.0.join("dup");
    let (server, mut c) = start(&data);
    let (first, err) = add_until_error(&mut c, "a", 0, 1000);
    assert_eq!((first, err), (1000, None));

    // Fill the file system: the log has what it grew ahead (16 MiB) and nothing more.
    let filler_path = fs.0.join("filler");
    let mut filler = std::fs::File::create(&filler_path).unwrap();
    let mb = vec![0u8; 1 << 20];
    while filler.write_all(&mb).is_ok() {}
    let _ = filler.sync_all();

    // Adds go on into the room grown ahead, then get PPDUP_ERROR: nothing half-stored.
    let (more, err) = add_until_error(&mut c, "a", 1000, 1_000_000);
    let why = err.expect("adds past the space left get PPDUP_ERROR");
    assert!(why.contains("cannot store"), "{why}");
    let acked = 1000 + more;
    eprintln!("disk full after {acked} acknowledged adds: {why}");
    // The server still serves: an owned checksum needs no record and is answered.
    assert_eq!(owner(&mut c, 0), uri("a", 0));
    c.send(&Message::PpdupKeepalive);
    assert!(matches!(c.recv_reply(), Message::PpdupKeepaliveAck));

    // Space returns: adds are taken again without a restart.
    drop(filler);
    std::fs::remove_file(&filler_path).unwrap();
    let (after, err) = add_until_error(&mut c, "b", 2_000_000, 2_000_100);
    assert_eq!((after, err), (100, None));

    // Killed and restarted: every acknowledged add is there, owned by its first URI.
    server.kill();
    let (_server, mut c) = start(&data);
    for i in (0..acked).step_by(97).chain([acked - 1]) {
        assert_eq!(owner(&mut c, i), uri("a", i), "acknowledged add {i}");
    }
    assert_eq!(owner(&mut c, 2_000_099), uri("b", 2_000_099));
}
