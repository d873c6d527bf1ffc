//! A socket read's frames handled at once, their checksum slots prefetched ahead
//! ([`DupServer::handle_frames`]), give what the same frames handled one by one give.

use super::tests::{add, cs, remove, same_dir, server, set_config, NODE_A, NODE_B, REPLICA};
use super::*;
use crate::msg::PpdupChecksum;

fn frame(m: &Message<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode_message(m, Priority::Normal, &mut out);
    out
}

/// `n` frames from `node` of window `w`: adds of new checksums, of checksums added earlier in
/// the window and in earlier windows, removes by the owner and by others, forwards (with
/// PKT_PPDUP_ID and PKT_DBNAME, as the server sends them to its replica) when `forwarded`,
/// and, at `bad`, a body that is not a frame.
fn window(n: usize, w: usize, node: &str, forwarded: bool, bad: Option<usize>) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            if Some(i) == bad {
                return b"....\xffjunk".to_vec();
            }
            // Checksums from a small range, so that repeats come within and across windows.
            let c = ((i * 7 + w * 13) % 61) as u8;
            let uri = format!("http://{node}/{w}/{i}");
            let mut m = match i % 9 {
                4 => remove(
                    "c",
                    node,
                    &format!("http://{node}/{}/{}", w.saturating_sub(1), i),
                    cs(c),
                ),
                7 => remove("c", node, "http://nobody/", cs(c)),
                _ => add("c", node, &uri, cs(c)),
            };
            if forwarded {
                if let Message::PpdupAdd(PpdupChecksum {
                    ppdup_id, dbname, ..
                })
                | Message::PpdupRemove(PpdupChecksum {
                    ppdup_id, dbname, ..
                }) = &mut m
                {
                    *ppdup_id = Some(super::tests::b("dup-1"));
                    *dbname = Some(super::tests::b("/data/c"));
                }
            }
            frame(&m)
        })
        .collect()
}

/// Runs the same windows through two servers, one read at a time and one frame at a time;
/// what each sends, frame for frame in the same order, and what each stores, must be the same.
fn same_as_one_by_one(mode: Mode, with_replica: bool, from: PeerId, forwarded: bool) {
    let (mut batched, _d1) = server("batched", mode, with_replica);
    let (mut single, _d2) = server("single", mode, with_replica);
    for s in [&mut batched, &mut single] {
        if with_replica {
            s.replica_connected(REPLICA);
        }
        s.peer_connected(from);
        s.handle_message(from, set_config("c", 5));
        s.flush().unwrap();
    }
    // Sizes below, at and past the ring of frames read ahead, and a window cut by a bad frame.
    let sizes = [0, 1, 2, 15, 16, 17, 31, 40, 200, 1024];
    for (w, &n) in sizes.iter().enumerate() {
        for node in ["na", "nb"] {
            let bad = (w == 7 && node == "nb").then_some(23);
            let frames = window(n, w, node, forwarded, bad);
            let bodies = frames.iter().map(|f| &f[4..]);
            let bytes = frames.iter().map(Vec::len).sum();
            let got = batched.handle_frames(from, bodies, bytes);
            let mut expect = Ok(());
            for f in &frames {
                if let Err(e) = single.handle_frames(from, [&f[4..]], f.len()) {
                    expect = Err(e);
                    break;
                }
            }
            assert_eq!(got, expect, "window {w} of {n} from {node}");
            // Frame by frame (the buffers they share differ in size), PKT_DBNAME of forwards
            // cut to the collection (each server has a scratch directory of its own).
            let (a, b) = (batched.take_direct(), single.take_direct());
            assert_eq!(same_dir(&a), same_dir(&b), "window {w}");
            let (a, b) = (batched.flush().unwrap(), single.flush().unwrap());
            assert_eq!(same_dir(&a), same_dir(&b), "window {w}");
        }
    }
    let entries = |s: &DupServer| {
        let mut e: Vec<_> = s
            .stores()
            .collection(b"c")
            .unwrap()
            .store
            .iter()
            .map(|(c, u, n)| (c, u.to_vec(), n.to_vec()))
            .collect();
        e.sort();
        e
    };
    assert!(!entries(&batched).is_empty());
    assert_eq!(entries(&batched), entries(&single));
    assert_eq!(batched.counters(), single.counters());
}

#[test]
fn a_server_alone_answers_a_read_as_it_answers_its_frames_one_by_one() {
    same_as_one_by_one(Mode::Server, false, NODE_A, false);
}

#[test]
fn a_server_with_a_replica_forwards_and_holds_a_read_as_its_frames_one_by_one() {
    same_as_one_by_one(Mode::Server, true, NODE_B, false);
}

#[test]
fn a_replica_stores_and_answers_a_read_of_forwards_as_its_frames_one_by_one() {
    same_as_one_by_one(Mode::Replica, false, REPLICA, true);
}
