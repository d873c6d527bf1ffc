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

/// A key's two bytes on the wire.
const fn wire(key: Key) -> [u8; 2] {
    let w = key.wire().as_bytes();
    [w[0], w[1]]
}

/// The 12 bytes that open a pair, all of fixed layout: the key (a two-byte `'s'` string), then
/// the value's tag and its length, or for an `'i'` value the integer itself.
#[inline(always)]
fn head(key: [u8; 2], value_tag: u8, n: u32) -> [u8; 12] {
    let [a, b, c, d] = n.to_le_bytes();
    [
        tag::STRING,
        2,
        0,
        0,
        0,
        key[0],
        key[1],
        value_tag,
        a,
        b,
        c,
        d,
    ]
}

/// A pair with an `'s'` string value: its 12 bytes of fixed layout in one piece, then the value.
#[inline(always)]
fn pair_str(out: &mut Vec<u8>, key: [u8; 2], v: &[u8]) {
    out.extend_from_slice(&head(key, tag::STRING, v.len() as u32));
    out.extend_from_slice(v);
}

/// The 10 bytes that open a frame: the length header and the 2-tuple's and dict's opening tags.
#[inline(always)]
fn open(out: &mut Vec<u8>, body: usize) {
    let [a, b, c, d] = (body as u32).to_be_bytes();
    out.extend_from_slice(&[a, b, c, d, tag::TUPLE, 2, 0, 0, 0, tag::DICT]);
}

/// The 6 bytes that close a frame: the dict's end and the `'i'` priority.
#[inline(always)]
fn close(out: &mut Vec<u8>, priority: Priority) {
    let [a, b, c, d] = (priority.as_i64() as i32).to_le_bytes();
    out.extend_from_slice(&[tag::NULL, tag::INT, a, b, c, d]);
}

/// The pairs every checksum message of these frames ends with, PKT_PPDUP_ID and PKT_DBNAME
/// (`ppdup_id_dbname`) where present, then [`close`].
#[inline(always)]
fn close_with(out: &mut Vec<u8>, ppdup_id_dbname: [Option<&[u8]>; 2], priority: Priority) {
    for (key, v) in [Key::PpdupId, Key::DbName].into_iter().zip(ppdup_id_dbname) {
        if let Some(v) = v {
            pair_str(out, wire(key), v);
        }
    }
    close(out, priority);
}

/// Appends one whole frame (length header included) carrying `ok` at `priority`: the bytes
/// `frame::encode_message(&Message::PpdupAddOk(ok.clone()), priority, out)` appends. The frame's
/// room is reserved once; each pair's 12 bytes of fixed layout go in as one piece, then its
/// value, so a frame is a dozen appends with no zeroing.
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
    out.reserve(HEADER_LEN + body);
    let start = out.len();
    open(out, body);
    pair_str(out, wire(Key::CollectionName), &ok.collection);
    pair_str(out, wire(Key::Id), &ok.node_id);
    out.extend_from_slice(&head(
        wire(Key::Cmd),
        tag::INT,
        Command::PpdupAddOk as i32 as u32,
    ));
    pair_str(out, wire(Key::Uri), &ok.uri);
    if let Some(v) = &ok.owner_uri {
        pair_str(out, wire(Key::OwnerUri), v);
    }
    close_with(
        out,
        [ok.ppdup_id.as_deref(), ok.dbname.as_deref()],
        priority,
    );
    debug_assert_eq!(
        out.len() - start,
        HEADER_LEN + body,
        "the frame is its length"
    );
}

/// Appends one whole frame (length header included) carrying PPDUP_ADD or PPDUP_REMOVE
/// (`command`) with the pairs of `m` at `priority`: the bytes `frame::encode_message` appends
/// for the typed message ([`ChecksumRef::to_message`]), written as [`encode_add_ok_frame`] writes
/// its frame (PKT_CSUM's pair, of fixed length, one piece of 28 bytes).
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
    out.reserve(HEADER_LEN + body);
    let start = out.len();
    open(out, body);
    let mut cs = [0; 28];
    cs[..12].copy_from_slice(&head(wire(Key::Checksum), tag::STRING, 16));
    cs[12..].copy_from_slice(&m.checksum.0);
    out.extend_from_slice(&cs);
    pair_str(out, wire(Key::CollectionName), m.collection);
    pair_str(out, wire(Key::Id), m.node_id);
    out.extend_from_slice(&head(wire(Key::Cmd), tag::INT, command as i32 as u32));
    pair_str(out, wire(Key::Uri), m.uri);
    close_with(out, [m.ppdup_id, m.dbname], priority);
    debug_assert_eq!(
        out.len() - start,
        HEADER_LEN + body,
        "the frame is its length"
    );
}

/// A PPDUP_ADD as [`super::read_ppdup`] read it from its frame body (the canonical layout: the
/// pairs PKT_CSUM, PKT_DSPECNAME, PKT_ID, PKT_CMD, PKT_URI, then PKT_PPDUP_ID and PKT_DBNAME if
/// present, then the dict's end and the priority), with where its pairs lie in the body. The
/// server's answer to it, its forward to the replica and the replica's answer to a forward are
/// the body's own runs of bytes with a pair or two added or dropped and PKT_CMD's value
/// changed, so they are written as three or four copies rather than pair by pair: the bytes
/// are those of [`encode_add_ok_frame`] and [`encode_checksum_frame`] (checked against them in
/// the tests, and on every frame in builds with debug assertions).
/// It is kept small (it is passed by value down the add's handling): the body and two offsets.
#[derive(Clone, Copy, Debug)]
pub struct AddBytes<'a> {
    body: &'a [u8],
    /// Start of the PKT_CMD pair (right after PKT_ID's value).
    cm: u32,
    /// End of the pairs: the dict's end tag. Its top bit is set when the add carries
    /// PKT_PPDUP_ID or PKT_DBNAME (pairs after PKT_URI's).
    end: u32,
}

/// The bit of [`AddBytes::end`] telling an add with pairs after PKT_URI's.
const TAIL: u32 = 1 << 31;

/// Where PKT_DSPECNAME's pair starts in a PPDUP_ADD's body: after the 2-tuple and dict tags (6
/// bytes) and PKT_CSUM's pair (12 + 16).
const DN_AT: usize = 6 + 12 + 16;

/// Where `part` starts in `body`; None when it does not lie in it.
fn offset_in(body: &[u8], part: &[u8]) -> Option<usize> {
    let start = (part.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
    (start.checked_add(part.len())? <= body.len()).then_some(start)
}

impl<'a> AddBytes<'a> {
    /// `add` as [`super::read_ppdup`] read it from `body` (as a PPDUP_ADD); None when its strings
    /// do not lie in `body` where that layout puts them (a message read otherwise).
    pub fn of(body: &'a [u8], add: &ChecksumRef<'a>) -> Option<Self> {
        let cm = offset_in(body, add.node_id)? + add.node_id.len();
        let end = body.len().checked_sub(6)?;
        // Compared as words (a slice comparison is a call to memcmp).
        let word = |at: usize| Some(u64::from_le_bytes(*body.get(at..)?.first_chunk::<8>()?));
        let cm_head = u64::from_le_bytes(*head(wire(Key::Cmd), tag::INT, 0).first_chunk::<8>()?);
        let layout = offset_in(body, add.collection)? == DN_AT + 12
            && word(cm)? == cm_head
            && offset_in(body, add.uri)? == cm + 24
            && u16::from_le_bytes([body[end], body[end + 1]])
                == u16::from_le_bytes([tag::NULL, tag::INT])
            && end < TAIL as usize;
        let tail = add.ppdup_id.is_some() || add.dbname.is_some();
        layout.then_some(AddBytes {
            body,
            cm: cm as u32,
            end: end as u32 | if tail { TAIL } else { 0 },
        })
    }

    /// The message carries neither PKT_PPDUP_ID nor PKT_DBNAME: its last pair is PKT_URI's.
    fn plain(&self) -> bool {
        self.end & TAIL == 0
    }

    /// Start of the PKT_CMD pair, and end of the pairs.
    fn at(&self) -> (usize, usize) {
        (self.cm as usize, (self.end & !TAIL) as usize)
    }

    /// The add, read again from its body (for the checks made with debug assertions).
    fn add(&self) -> ChecksumRef<'a> {
        match super::read_ppdup(self.body, &Default::default()) {
            Some((_, super::PpdupRef::Add(add))) => add,
            other => panic!("AddBytes holds a PPDUP_ADD: {other:?}"),
        }
    }

    /// The replica's PPDUP_ADD_OK to this forwarded add (MS-FSCMT 3.4.5.3: the same pairs, no
    /// PKT_OWNURI), at normal priority: the body's pairs after PKT_CSUM's, PKT_CMD's value
    /// changed.
    pub fn echo_add_ok(&self, out: &mut Vec<u8>) {
        let (cm, end) = self.at();
        let body = 6 + (end - DN_AT) + 6;
        let start = out.len();
        out.reserve(HEADER_LEN + body);
        open(out, body);
        out.extend_from_slice(&self.body[DN_AT..cm + 8]);
        out.extend_from_slice(&(Command::PpdupAddOk as i32).to_le_bytes());
        out.extend_from_slice(&self.body[cm + 12..end]);
        close(out, Priority::Normal);
        self.check(&out[start..], |add| PpdupAddOk {
            collection: add.collection.into(),
            node_id: add.node_id.into(),
            uri: add.uri.into(),
            owner_uri: None,
            ppdup_id: add.ppdup_id.map(Into::into),
            dbname: add.dbname.map(Into::into),
        });
    }

    /// The server's PPDUP_ADD_OK to this new add of a node (3.3.5.4: PKT_OWNURI its own URI), at
    /// normal priority: the body's pairs after PKT_CSUM's, PKT_CMD's value changed, and
    /// PKT_OWNURI's pair. False, nothing written, when the add carries PKT_PPDUP_ID or
    /// PKT_DBNAME (the answer does not).
    pub fn fresh_add_ok(&self, out: &mut Vec<u8>) -> bool {
        if !self.plain() {
            return false;
        }
        let (cm, end) = self.at();
        // The add's last pair is PKT_URI's.
        let uri = &self.body[cm + 24..end];
        let body = 6 + (end - DN_AT) + pair(Key::OwnerUri) + uri.len() + 6;
        let start = out.len();
        out.reserve(HEADER_LEN + body);
        open(out, body);
        out.extend_from_slice(&self.body[DN_AT..cm + 8]);
        out.extend_from_slice(&(Command::PpdupAddOk as i32).to_le_bytes());
        out.extend_from_slice(&self.body[cm + 12..end]);
        pair_str(out, wire(Key::OwnerUri), uri);
        close(out, Priority::Normal);
        self.check(&out[start..], |add| PpdupAddOk {
            collection: add.collection.into(),
            node_id: add.node_id.into(),
            uri: add.uri.into(),
            owner_uri: Some(add.uri.into()),
            ppdup_id: None,
            dbname: None,
        });
        true
    }

    /// The forward of this node's add to the replica (3.3.5.4 step 1) with `ppdup_id` and
    /// `dbname`, at normal priority: the body's pairs, then those two. False, nothing written,
    /// when the add carries PKT_PPDUP_ID or PKT_DBNAME already.
    pub fn forward(&self, ppdup_id: &[u8], dbname: &[u8], out: &mut Vec<u8>) -> bool {
        if !self.plain() {
            return false;
        }
        let end = self.at().1;
        let body = end + pair(Key::PpdupId) + ppdup_id.len() + pair(Key::DbName) + dbname.len() + 6;
        let start = out.len();
        out.reserve(HEADER_LEN + body);
        out.extend_from_slice(&(body as u32).to_be_bytes());
        out.extend_from_slice(&self.body[..end]);
        pair_str(out, wire(Key::PpdupId), ppdup_id);
        pair_str(out, wire(Key::DbName), dbname);
        close(out, Priority::Normal);
        if cfg!(debug_assertions) {
            let fwd = ChecksumRef {
                ppdup_id: Some(ppdup_id),
                dbname: Some(dbname),
                ..self.add()
            };
            let mut want = Vec::new();
            encode_checksum_frame(Command::PpdupAdd, &fwd, Priority::Normal, &mut want);
            debug_assert_eq!(
                out[start..],
                want[..],
                "the forward as the encoder writes it"
            );
        }
        true
    }

    /// With debug assertions: `frame` is what [`encode_add_ok_frame`] writes for `ok(add)`.
    fn check(&self, frame: &[u8], ok: impl FnOnce(&ChecksumRef<'a>) -> PpdupAddOk<'a>) {
        if cfg!(debug_assertions) {
            let mut want = Vec::new();
            encode_add_ok_frame(&ok(&self.add()), Priority::Normal, &mut want);
            debug_assert_eq!(frame, &want[..], "the answer as the encoder writes it");
        }
    }
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

    /// Generated messages (lengths 0 to 300, a few past 64 KiB, optional pairs present or not,
    /// both priorities), each appended after earlier bytes: byte-equal to the general encoder.
    #[test]
    fn generated_frames_are_byte_for_byte_the_general_encoders() {
        use crate::msg::{Checksum, PpdupChecksum};
        let mut rng = fastrand::Rng::with_seed(28);
        let bytes = |rng: &mut fastrand::Rng| -> Cow<'static, [u8]> {
            let n = if rng.u8(..) == 0 {
                rng.usize(65_536..70_000)
            } else {
                rng.usize(..300)
            };
            Cow::Owned((0..n).map(|_| rng.u8(..)).collect())
        };
        for i in 0..2_000 {
            let p = if i % 2 == 0 {
                Priority::Normal
            } else {
                Priority::High
            };
            let some = |rng: &mut fastrand::Rng| rng.bool().then(|| bytes(rng));
            let ok = PpdupAddOk {
                collection: bytes(&mut rng),
                node_id: bytes(&mut rng),
                uri: bytes(&mut rng),
                owner_uri: some(&mut rng),
                ppdup_id: some(&mut rng),
                dbname: some(&mut rng),
            };
            let mut fast = vec![7; i % 5];
            encode_add_ok_frame(&ok, p, &mut fast);
            assert_eq!(fast[i % 5..], general(&Message::PpdupAddOk(ok), p)[..]);
            let mut cs = [0; 16];
            rng.fill(&mut cs);
            let m = PpdupChecksum {
                collection: bytes(&mut rng),
                node_id: bytes(&mut rng),
                uri: bytes(&mut rng),
                checksum: Checksum(cs),
                ppdup_id: some(&mut rng),
                dbname: some(&mut rng),
            };
            let (command, typed) = if rng.bool() {
                (Command::PpdupAdd, Message::PpdupAdd(m.clone()))
            } else {
                (Command::PpdupRemove, Message::PpdupRemove(m.clone()))
            };
            let mut fast = vec![7; i % 3];
            encode_checksum_frame(command, &ChecksumRef::of(&m), p, &mut fast);
            assert_eq!(fast[i % 3..], general(&typed, p)[..]);
        }
    }

    /// PPDUP_ADDs of every shape (optional pairs present or not, lengths 0-300 and past 64 KiB,
    /// both priorities) encoded, read back by read_ppdup, and answered and forwarded from their
    /// own bytes: the same bytes as the encoders' (the writers also check it themselves with
    /// debug assertions, on in the test profile).
    #[test]
    fn answers_and_forwards_spliced_from_the_add_are_the_encoders_bytes() {
        use crate::msg::{read_ppdup, Checksum, PpdupRef};
        let mut rng = fastrand::Rng::with_seed(3);
        let bytes = |rng: &mut fastrand::Rng| -> Vec<u8> {
            let n = if rng.u8(..) == 0 {
                rng.usize(65_536..70_000)
            } else {
                rng.usize(..300)
            };
            (0..n).map(|_| rng.u8(..)).collect()
        };
        let limits = Limits::default();
        for i in 0..2_000 {
            let p = [Priority::Normal, Priority::High][i % 2];
            let (dn, id, ur) = (bytes(&mut rng), bytes(&mut rng), bytes(&mut rng));
            let (pi, db) = (bytes(&mut rng), bytes(&mut rng));
            let mut cs = [0; 16];
            rng.fill(&mut cs);
            let add = ChecksumRef {
                collection: &dn,
                node_id: &id,
                uri: &ur,
                checksum: Checksum(cs),
                ppdup_id: rng.bool().then_some(&pi[..]),
                dbname: rng.bool().then_some(&db[..]),
            };
            let mut frame = Vec::new();
            encode_checksum_frame(Command::PpdupAdd, &add, p, &mut frame);
            let body = &frame[HEADER_LEN..];
            let Some((_, PpdupRef::Add(read))) = read_ppdup(body, &limits) else {
                panic!("read_ppdup reads the add");
            };
            let spliced = AddBytes::of(body, &read).expect("read from this body");
            let mut out = vec![9; i % 4];
            spliced.echo_add_ok(&mut out);
            let mut want = vec![9; i % 4];
            let echo = PpdupAddOk {
                collection: Cow::Borrowed(add.collection),
                node_id: Cow::Borrowed(add.node_id),
                uri: Cow::Borrowed(add.uri),
                owner_uri: None,
                ppdup_id: add.ppdup_id.map(Cow::Borrowed),
                dbname: add.dbname.map(Cow::Borrowed),
            };
            encode_add_ok_frame(&echo, Priority::Normal, &mut want);
            assert_eq!(out, want);
            let plain = add.ppdup_id.is_none() && add.dbname.is_none();
            let mut out = Vec::new();
            assert_eq!(spliced.fresh_add_ok(&mut out), plain);
            if plain {
                let fresh = PpdupAddOk {
                    owner_uri: Some(Cow::Borrowed(add.uri)),
                    ppdup_id: None,
                    dbname: None,
                    ..echo.clone()
                };
                let mut want = Vec::new();
                encode_add_ok_frame(&fresh, Priority::Normal, &mut want);
                assert_eq!(out, want);
            } else {
                assert!(out.is_empty());
            }
            let mut out = Vec::new();
            assert_eq!(spliced.forward(&pi, &db, &mut out), plain);
            if plain {
                let fwd = ChecksumRef {
                    ppdup_id: Some(&pi),
                    dbname: Some(&db),
                    ..add
                };
                let mut want = Vec::new();
                encode_checksum_frame(Command::PpdupAdd, &fwd, Priority::Normal, &mut want);
                assert_eq!(out, want);
            } else {
                assert!(out.is_empty());
            }
        }
    }

    /// A message whose strings do not lie in the body given is not spliced from it.
    #[test]
    fn an_add_read_from_elsewhere_is_not_spliced() {
        use crate::msg::{read_ppdup, Checksum, PpdupRef};
        let add = ChecksumRef {
            collection: b"coll",
            node_id: b"node",
            uri: b"http://a/",
            checksum: Checksum([1; 16]),
            ppdup_id: None,
            dbname: None,
        };
        let mut frame = Vec::new();
        encode_checksum_frame(Command::PpdupAdd, &add, Priority::Normal, &mut frame);
        assert!(AddBytes::of(&frame[HEADER_LEN..], &add).is_none());
        let copy = frame.clone();
        let Some((_, PpdupRef::Add(read))) = read_ppdup(&frame[HEADER_LEN..], &Limits::default())
        else {
            panic!("read_ppdup reads the add");
        };
        assert!(AddBytes::of(&copy[HEADER_LEN..], &read).is_none());
        assert!(AddBytes::of(&frame[HEADER_LEN..], &read).is_some());
    }

    /// The golden frames (tests/data/wire-vectors.tsv, a copy of the shared vectors): each
    /// vector's name and wire bytes.
    fn golden_vectors() -> Vec<(String, Vec<u8>)> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/wire-vectors.tsv"
        );
        let text = std::fs::read_to_string(path).expect("the wire vectors");
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|line| {
                let mut cols = line.split('\t');
                let (name, hex) = (cols.next()?, cols.next()?);
                let wire = (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                    .collect();
                Some((name.to_string(), wire))
            })
            .collect()
    }

    /// The golden vector of PPDUP_ADD, re-encoded from its decoded message by the forward's
    /// encoder.
    #[test]
    fn the_golden_add_comes_out_the_same() {
        let (_, wire) = golden_vectors()
            .into_iter()
            .find(|(name, _)| name == "PPDUP_ADD")
            .expect("PPDUP_ADD among the vectors");
        let (p, m) = frame::decode_message(&wire[4..], &Limits::default()).expect("decodes");
        let Message::PpdupAdd(add) = m else {
            panic!("PPDUP_ADD is not a PPDUP_ADD");
        };
        let mut out = Vec::new();
        encode_checksum_frame(Command::PpdupAdd, &ChecksumRef::of(&add), p, &mut out);
        assert_eq!(out, wire);
    }

    /// The golden vectors of PPDUP_ADD_OK (tests/data/wire-vectors.tsv, a copy of the shared
    /// vectors), re-encoded from their decoded message.
    #[test]
    fn the_golden_vectors_come_out_the_same() {
        let mut seen = 0;
        for (name, wire) in golden_vectors() {
            if !name.starts_with("PPDUP_ADD_OK") {
                continue;
            }
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
