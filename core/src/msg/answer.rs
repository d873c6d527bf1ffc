//! PPDUP_ADD_OK (MS-FSCMT 2.2.5.3) written as a whole frame straight into an output buffer: the
//! duplicate server answers every PPDUP_ADD with one, and its replica every forwarded add, so
//! neither goes through a typed [`Message`](super::Message) and the frame encoder. So is the
//! PPDUP_ADD or PPDUP_REMOVE the server forwards to its replica (2.2.5.3, 2.2.5.4), from the
//! borrowed view of the node's message. The frame's
//! length is known before its first byte is written (one reservation, no length patched
//! afterwards); the bytes are exactly those of [`crate::frame::encode_message`] (keys in the
//! canonical order of [`Key`], `'s'` strings, `'i'` PKT_CMD and priority), which the tests
//! check against the general encoder and the golden vectors.

use super::{ChecksumRef, Command, Key, PpdupAddOk};
use crate::frame::{Priority, HEADER_LEN};
use crate::marshal::tag;

/// Bytes of a string key and the tag and length of its value (every key here is written as an
/// `'s'` string, every value as an `'s'` string or an `'i'` integer: 1 + 4 bytes of header).
const fn pair(key: Key) -> usize {
    5 + key.wire().len() + 5
}

/// Bytes of the frame body's fixed parts: the 2-tuple header, the dict's open and close tags,
/// the PKT_CMD pair (its `'i'` value 4 bytes after the tag) and the `'i'` priority.
const FIXED: usize = 5 + 1 + 1 + pair(Key::Cmd) + 5;

/// Writes the pieces of a frame into room already made for it, front to back.
struct Room<'a> {
    rest: &'a mut [u8],
}

impl Room<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        let (head, rest) = std::mem::take(&mut self.rest).split_at_mut(bytes.len());
        head.copy_from_slice(bytes);
        self.rest = rest;
    }

    /// An `'s'` string.
    #[inline]
    fn str(&mut self, v: &[u8]) {
        let mut head = [tag::STRING, 0, 0, 0, 0];
        head[1..].copy_from_slice(&(v.len() as u32).to_le_bytes());
        self.put(&head);
        self.put(v);
    }

    #[inline]
    fn pair(&mut self, key: Key, v: &[u8]) {
        self.str(key.wire().as_bytes());
        self.str(v);
    }

    /// An `'i'` integer.
    #[inline]
    fn int(&mut self, v: i32) {
        let mut i = [tag::INT, 0, 0, 0, 0];
        i[1..].copy_from_slice(&v.to_le_bytes());
        self.put(&i);
    }

    /// The PKT_CMD pair.
    #[inline]
    fn cmd(&mut self, command: Command) {
        self.str(Key::Cmd.wire().as_bytes());
        self.int(command as i32);
    }
}

/// Appends one whole frame whose body is `body` bytes ([`FIXED`] and the pairs): the length
/// header, the 2-tuple and the dict opened, the dict's pairs written by `pairs` (PKT_CMD among
/// them, in key order), the dict closed and the priority. The room is made in one step and
/// filled piece by piece, without a capacity check per piece.
fn dict_frame(
    out: &mut Vec<u8>,
    body: usize,
    priority: Priority,
    pairs: impl FnOnce(&mut Room<'_>),
) {
    let start = out.len();
    out.resize(start + HEADER_LEN + body, 0);
    let mut w = Room {
        rest: &mut out[start..],
    };
    w.put(&(body as u32).to_be_bytes());
    w.put(&[tag::TUPLE, 2, 0, 0, 0, tag::DICT]);
    pairs(&mut w);
    w.put(&[tag::NULL]);
    w.int(priority.as_i64() as i32);
    debug_assert!(w.rest.is_empty(), "the frame fills the room made for it");
}

/// Appends one whole frame (length header included) carrying `ok` at `priority`: the bytes
/// `frame::encode_message(&Message::PpdupAddOk(ok.clone()), priority, out)` appends. The room is
/// made in one step and filled piece by piece, without a capacity check per piece.
pub fn encode_add_ok_frame(ok: &PpdupAddOk<'_>, priority: Priority, out: &mut Vec<u8>) {
    let opt =
        |key: Key, v: &Option<super::Bytes<'_>>| v.as_deref().map_or(0, |v| pair(key) + v.len());
    let body = FIXED
        + pair(Key::CollectionName)
        + ok.collection.len()
        + pair(Key::Id)
        + ok.node_id.len()
        + pair(Key::Uri)
        + ok.uri.len()
        + opt(Key::OwnerUri, &ok.owner_uri)
        + opt(Key::PpdupId, &ok.ppdup_id)
        + opt(Key::DbName, &ok.dbname);
    dict_frame(out, body, priority, |w| {
        w.pair(Key::CollectionName, &ok.collection);
        w.pair(Key::Id, &ok.node_id);
        w.cmd(Command::PpdupAddOk);
        w.pair(Key::Uri, &ok.uri);
        for (key, v) in [
            (Key::OwnerUri, &ok.owner_uri),
            (Key::PpdupId, &ok.ppdup_id),
            (Key::DbName, &ok.dbname),
        ] {
            if let Some(v) = v {
                w.pair(key, v);
            }
        }
    });
}

/// Appends one whole frame (length header included) carrying PPDUP_ADD or PPDUP_REMOVE
/// (`command`) with the pairs of `m` at `priority`: the bytes `frame::encode_message` appends
/// for the typed message ([`ChecksumRef::to_message`]), written as [`encode_add_ok_frame`] writes
/// its frame.
pub fn encode_checksum_frame(
    command: Command,
    m: &ChecksumRef<'_>,
    priority: Priority,
    out: &mut Vec<u8>,
) {
    debug_assert!(matches!(command, Command::PpdupAdd | Command::PpdupRemove));
    let opt = |key: Key, v: Option<&[u8]>| v.map_or(0, |v| pair(key) + v.len());
    let body = FIXED
        + pair(Key::Checksum)
        + m.checksum.0.len()
        + pair(Key::CollectionName)
        + m.collection.len()
        + pair(Key::Id)
        + m.node_id.len()
        + pair(Key::Uri)
        + m.uri.len()
        + opt(Key::PpdupId, m.ppdup_id)
        + opt(Key::DbName, m.dbname);
    dict_frame(out, body, priority, |w| {
        w.pair(Key::Checksum, &m.checksum.0);
        w.pair(Key::CollectionName, m.collection);
        w.pair(Key::Id, m.node_id);
        w.cmd(command);
        w.pair(Key::Uri, m.uri);
        for (key, v) in [(Key::PpdupId, m.ppdup_id), (Key::DbName, m.dbname)] {
            if let Some(v) = v {
                w.pair(key, v);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::frame;
    use crate::marshal::Limits;
    use crate::msg::Message;

    fn b(s: &str) -> Cow<'static, [u8]> {
        Cow::Owned(s.as_bytes().to_vec())
    }

    /// The general encoder: the message's dict built as marshal values, pairs sorted by key.
    fn general(m: &Message<'_>, p: Priority) -> Vec<u8> {
        let mut out = Vec::new();
        frame::encode_dict(&m.to_dict(), p, &mut out);
        out
    }

    #[test]
    fn the_frame_is_byte_for_byte_the_general_encoders() {
        let long = "x".repeat(70_000);
        let base = PpdupAddOk {
            collection: b("coll"),
            node_id: b("node-1"),
            uri: b("http://www.example.com/a.html"),
            owner_uri: None,
            ppdup_id: None,
            dbname: None,
        };
        let cases = [
            base.clone(),
            PpdupAddOk {
                owner_uri: Some(b("http://www.example.com/b.html")),
                ..base.clone()
            },
            PpdupAddOk {
                ppdup_id: Some(b("dup-1")),
                dbname: Some(b("/var/lib/dup/coll")),
                ..base.clone()
            },
            PpdupAddOk {
                owner_uri: Some(b("")),
                ppdup_id: Some(b("dup-1")),
                dbname: Some(b("")),
                ..base.clone()
            },
            PpdupAddOk {
                collection: b(""),
                node_id: b(""),
                uri: Cow::Owned(long.clone().into_bytes()),
                owner_uri: Some(Cow::Owned(long.into_bytes())),
                ppdup_id: None,
                dbname: Some(b("d")),
            },
        ];
        for ok in cases {
            for p in [Priority::Normal, Priority::High] {
                let m = Message::PpdupAddOk(ok.clone());
                // Appended after other bytes, as into an output buffer holding earlier frames.
                let mut fast = b"earlier".to_vec();
                encode_add_ok_frame(&ok, p, &mut fast);
                assert_eq!(&fast[..7], b"earlier");
                assert_eq!(fast[7..], general(&m, p)[..], "{ok:?}");
                let mut typed = Vec::new();
                frame::encode_message(&m, p, &mut typed);
                assert_eq!(fast[7..], typed[..]);
                let (priority, back) =
                    frame::decode_message(&fast[7 + 4..], &Limits::default()).expect("decodes");
                assert_eq!((priority, back), (p, m));
            }
        }
    }

    #[test]
    fn the_checksum_frame_is_byte_for_byte_the_general_encoders() {
        use crate::msg::{Checksum, PpdupChecksum};
        let long = "x".repeat(70_000);
        let base = PpdupChecksum {
            collection: b("coll"),
            node_id: b("node-1"),
            uri: b("http://www.example.com/a.html"),
            checksum: Checksum(*b"0123456789abcdef"),
            ppdup_id: None,
            dbname: None,
        };
        let cases = [
            base.clone(),
            PpdupChecksum {
                ppdup_id: Some(b("dup-1")),
                dbname: Some(b("/var/lib/dup/coll")),
                ..base.clone()
            },
            PpdupChecksum {
                ppdup_id: Some(b("")),
                ..base.clone()
            },
            PpdupChecksum {
                uri: b(&long),
                dbname: Some(b(&long)),
                ..base.clone()
            },
        ];
        for m in cases {
            for (command, typed) in [
                (Command::PpdupAdd, Message::PpdupAdd(m.clone())),
                (Command::PpdupRemove, Message::PpdupRemove(m.clone())),
            ] {
                for p in [Priority::Normal, Priority::High] {
                    let mut fast = b"earlier".to_vec();
                    encode_checksum_frame(command, &ChecksumRef::of(&m), p, &mut fast);
                    assert_eq!(&fast[..7], b"earlier");
                    assert_eq!(fast[7..], general(&typed, p)[..], "{typed:?}");
                    let (priority, back) =
                        frame::decode_message(&fast[7 + 4..], &Limits::default()).unwrap();
                    assert_eq!((priority, back), (p, typed.clone()));
                }
            }
        }
    }

    /// The golden vectors of PPDUP_ADD_OK (tests/data/wire-vectors.tsv, a copy of the shared
    /// vectors), re-encoded from their decoded message.
    #[test]
    fn the_golden_vectors_come_out_the_same() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/wire-vectors.tsv"
        );
        let text = std::fs::read_to_string(path).expect("the wire vectors");
        let mut seen = 0;
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let mut cols = line.split('\t');
            let (Some(name), Some(hex)) = (cols.next(), cols.next()) else {
                continue;
            };
            if !name.starts_with("PPDUP_ADD_OK") {
                continue;
            }
            let wire: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                .collect();
            let (p, m) = frame::decode_message(&wire[4..], &Limits::default()).expect("decodes");
            let Message::PpdupAddOk(ok) = m else {
                panic!("{name} is not a PPDUP_ADD_OK");
            };
            let mut out = Vec::new();
            encode_add_ok_frame(&ok, p, &mut out);
            assert_eq!(out, wire, "{name}");
            seen += 1;
        }
        assert!(
            seen >= 2,
            "PPDUP_ADD_OK and PPDUP_ADD_OK_OWNER are among the vectors"
        );
    }
}
