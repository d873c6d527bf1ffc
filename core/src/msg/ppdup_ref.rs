//! PPDUP_ADD, PPDUP_REMOVE, PPDUP_ADD_OK and PPDUP_REMOVE_OK (MS-FSCMT 2.2.5) read from a frame
//! body in the canonical layout, borrowed from it: the duplicate server's hot path hands the
//! borrowed view straight to its handler, with no [`Message`] built or moved on the way (a
//! message is the size of its largest variant, a crawl queue entry, and each move of it was a
//! copy of that size).
//!
//! The layout read is exactly the one `flat.rs` writes and [`super::flat`]'s decoder accepts (it
//! reads these four messages through [`read_ppdup`]): keys are two-byte `'s'` strings in the
//! canonical order, each at most once, values `'s'` strings but PKT_CMD an `'i'` integer.
//! Anything else is `None`, for the general decoder.

use std::borrow::Cow;

use super::{Checksum, Command, Message, PpdupAddOk, PpdupChecksum, PpdupRemoveOk};
use crate::frame::Priority;
use crate::marshal::{tag, Limits};

/// PPDUP_ADD / PPDUP_REMOVE borrowed: [`PpdupChecksum`] with plain slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChecksumRef<'a> {
    /// PKT_DSPECNAME.
    pub collection: &'a [u8],
    /// PKT_ID.
    pub node_id: &'a [u8],
    /// PKT_URI.
    pub uri: &'a [u8],
    /// PKT_CSUM.
    pub checksum: Checksum,
    /// PKT_PPDUP_ID (server to replica only).
    pub ppdup_id: Option<&'a [u8]>,
    /// PKT_DBNAME (server to replica only).
    pub dbname: Option<&'a [u8]>,
}

impl<'a> ChecksumRef<'a> {
    /// The view of a typed message.
    pub fn of(m: &'a PpdupChecksum<'_>) -> ChecksumRef<'a> {
        ChecksumRef {
            collection: &m.collection,
            node_id: &m.node_id,
            uri: &m.uri,
            checksum: m.checksum,
            ppdup_id: m.ppdup_id.as_deref(),
            dbname: m.dbname.as_deref(),
        }
    }

    /// The typed message, borrowing the same bytes.
    pub fn to_message(&self) -> PpdupChecksum<'a> {
        PpdupChecksum {
            collection: Cow::Borrowed(self.collection),
            node_id: Cow::Borrowed(self.node_id),
            uri: Cow::Borrowed(self.uri),
            checksum: self.checksum,
            ppdup_id: self.ppdup_id.map(Cow::Borrowed),
            dbname: self.dbname.map(Cow::Borrowed),
        }
    }
}

/// One of the four PPDUP messages read by [`read_ppdup`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PpdupRef<'a> {
    /// PPDUP_ADD.
    Add(ChecksumRef<'a>),
    /// PPDUP_REMOVE.
    Remove(ChecksumRef<'a>),
    /// PPDUP_ADD_OK.
    AddOk(PpdupAddOk<'a>),
    /// PPDUP_REMOVE_OK.
    RemoveOk(PpdupRemoveOk<'a>),
}

impl<'a> PpdupRef<'a> {
    /// Its command.
    pub fn command(&self) -> Command {
        match self {
            PpdupRef::Add(_) => Command::PpdupAdd,
            PpdupRef::Remove(_) => Command::PpdupRemove,
            PpdupRef::AddOk(_) => Command::PpdupAddOk,
            PpdupRef::RemoveOk(_) => Command::PpdupRemoveOk,
        }
    }

    /// The typed message, borrowing the same bytes.
    pub fn into_message(self) -> Message<'a> {
        match self {
            PpdupRef::Add(c) => Message::PpdupAdd(c.to_message()),
            PpdupRef::Remove(c) => Message::PpdupRemove(c.to_message()),
            PpdupRef::AddOk(ok) => Message::PpdupAddOk(ok),
            PpdupRef::RemoveOk(ok) => Message::PpdupRemoveOk(ok),
        }
    }
}

/// A two-byte key as one number, for matching.
const fn key(k: &[u8; 2]) -> u16 {
    u16::from_le_bytes(*k)
}

/// The rank of a key these messages carry: its place in the canonical order.
fn rank(k: u16) -> Option<usize> {
    const CS: u16 = key(b"cs");
    const DN: u16 = key(b"dn");
    const ID: u16 = key(b"id");
    const CM: u16 = key(b"cm");
    const UR: u16 = key(b"ur");
    const OU: u16 = key(b"ou");
    const PI: u16 = key(b"pi");
    const DB: u16 = key(b"db");
    Some(match k {
        CS => 0,
        DN => 1,
        ID => 2,
        CM => CMD,
        UR => 4,
        OU => 5,
        PI => 6,
        DB => 7,
        _ => return None,
    })
}

/// The rank of PKT_CMD, whose value is an integer.
const CMD: usize = 3;
/// Keys in all.
const KEYS: usize = 8;

/// The first five bytes of a pair's 12 of fixed layout, as the low bytes of a little-endian
/// word: the key's `'s'` tag and its length, 2.
const KEY_HEAD: u64 = tag::STRING as u64 | 2 << 8;

/// Walks the pairs of a frame body in the canonical layout (the module docs), handing `value`
/// each string pair's rank and value; returns the priority and PKT_CMD (None when absent).
/// None on any departure from the layout.
#[inline(always)]
fn walk<'a>(
    body: &'a [u8],
    limits: &Limits,
    mut value: impl FnMut(usize, &'a [u8]),
) -> Option<(Priority, Option<i32>)> {
    if body.len() > limits.max_size || limits.max_depth < 2 {
        return None;
    }
    let mut rest = body.strip_prefix(b"(\x02\x00\x00\x00{")?;
    // The pairs, each key at most once and in the canonical order. Every key is a two-byte
    // string, so a pair starts with 12 bytes of known layout (the key, then its value's tag and
    // length or integer), read as two words and the key matched as one number. What is not a
    // pair's head ends the walk: it must be the dict's end and the priority, and nothing after.
    let mut cmd = None;
    let mut next = 0;
    while let Some((h, after)) = rest.split_first_chunk::<12>() {
        let w = u64::from_le_bytes(*h.first_chunk::<8>().expect("12 bytes"));
        if w & 0xff_ffff_ffff != KEY_HEAD {
            break;
        }
        let rank = rank((w >> 40) as u16)?;
        if rank < next {
            return None;
        }
        next = rank + 1;
        let n = u32::from_le_bytes(*h.last_chunk::<4>().expect("12 bytes"));
        let value_tag = (w >> 56) as u8;
        if rank == CMD {
            if value_tag != tag::INT {
                return None;
            }
            cmd = Some(n as i32);
            rest = after;
        } else {
            if value_tag != tag::STRING {
                return None;
            }
            let (v, after) = after.split_at_checked(n as usize)?;
            value(rank, v);
            rest = after;
        }
    }
    let &[tag::NULL, tag::INT, a, b, c, d] = rest else {
        return None;
    };
    let priority = Priority::from_i64(i32::from_le_bytes([a, b, c, d]).into())?;
    Some((priority, cmd))
}

/// The command of a frame body [`read_ppdup`] reads, and its priority, without its strings:
/// `read_ppdup(body, limits).map(|(p, m)| (p, m.command()))`. The server needs no more of its
/// replica's PPDUP_ADD_OK and PPDUP_REMOVE_OK (they release the oldest forward), so it reads
/// them so, with nothing built.
pub fn read_ppdup_command(body: &[u8], limits: &Limits) -> Option<(Priority, Command)> {
    if let Some((priority, command, ..)) = ok_parts(body, limits) {
        return Some((priority, command));
    }
    // Bit `rank` set for each string pair present; PKT_CSUM's length checked as it passes.
    let mut present = 0u8;
    let mut cs_len_ok = true;
    let (priority, cmd) = walk(body, limits, |rank, v| {
        present |= 1 << rank;
        if rank == 0 {
            cs_len_ok = v.len() == 16;
        }
    })?;
    let has = |rank: usize| present & (1 << rank) != 0;
    let (cs, dn, id, ur, ou) = (has(0), has(1), has(2), has(4), has(5));
    let command = Command::from_i64(cmd?.into())?;
    let ok = match command {
        Command::PpdupAdd | Command::PpdupRemove => cs && cs_len_ok && dn && id && ur && !ou,
        Command::PpdupAddOk => !cs && dn && id && ur,
        Command::PpdupRemoveOk => !cs && !ou && dn && ur,
        _ => false,
    };
    ok.then_some((priority, command))
}

/// A pair's first 8 bytes as a little-endian word: the two-byte `'s'` key `k` and the value's
/// tag `t`.
const fn pair_word(k: &[u8; 2], t: u8) -> u64 {
    u64::from_le_bytes([tag::STRING, 2, 0, 0, 0, k[0], k[1], t])
}

/// The string pair of key `k` at the front of `rest`: its value, and what follows it.
#[inline(always)]
fn string_pair<'a>(rest: &'a [u8], k: &[u8; 2]) -> Option<(&'a [u8], &'a [u8])> {
    let (h, after) = rest.split_first_chunk::<12>()?;
    if u64::from_le_bytes(*h.first_chunk::<8>()?) != pair_word(k, tag::STRING) {
        return None;
    }
    let n = u32::from_le_bytes(*h.last_chunk::<4>()?) as usize;
    after.split_at_checked(n)
}

/// The body's opening (a dict in a 2-tuple), under the limits; what follows it.
#[inline(always)]
fn dict_body<'a>(body: &'a [u8], limits: &Limits) -> Option<&'a [u8]> {
    if body.len() > limits.max_size || limits.max_depth < 2 {
        return None;
    }
    body.strip_prefix(b"(\x02\x00\x00\x00{")
}

/// PKT_DSPECNAME's, PKT_ID's and PKT_URI's values, PKT_CMD's, and what follows them.
type Common<'a> = ([&'a [u8]; 3], i32, &'a [u8]);

/// The pairs every checksum message of these layouts has in this order: PKT_DSPECNAME, PKT_ID,
/// PKT_CMD and PKT_URI, at the front of `rest`.
#[inline(always)]
fn dn_id_cm_ur(rest: &[u8]) -> Option<Common<'_>> {
    let (collection, rest) = string_pair(rest, b"dn")?;
    let (node_id, rest) = string_pair(rest, b"id")?;
    let (h, rest) = rest.split_first_chunk::<12>()?;
    if u64::from_le_bytes(*h.first_chunk::<8>()?) != pair_word(b"cm", tag::INT) {
        return None;
    }
    let cmd = i32::from_le_bytes(*h.last_chunk::<4>()?);
    let (uri, rest) = string_pair(rest, b"ur")?;
    Some(([collection, node_id, uri], cmd, rest))
}

/// PPDUP_ADD or PPDUP_REMOVE in the layout nodes and the server write (PKT_CSUM, PKT_DSPECNAME,
/// PKT_ID, PKT_CMD, PKT_URI, then PKT_PPDUP_ID and PKT_DBNAME if present), read with each
/// pair's key known in advance: one comparison of a word per pair instead of the key's lookup
/// and rank. None for anything else, which [`read_ppdup`] then walks: where this reads a body,
/// the walk reads the same message.
#[inline(always)]
fn read_checksum_straight<'a>(body: &'a [u8], limits: &Limits) -> Option<(Priority, PpdupRef<'a>)> {
    let (cs, rest) = string_pair(dict_body(body, limits)?, b"cs")?;
    let checksum = Checksum(cs.try_into().ok()?);
    let ([collection, node_id, uri], cmd, mut rest) = dn_id_cm_ur(rest)?;
    let mut ppdup_id = None;
    let mut dbname = None;
    if let Some((v, after)) = string_pair(rest, b"pi") {
        ppdup_id = Some(v);
        rest = after;
    }
    if let Some((v, after)) = string_pair(rest, b"db") {
        dbname = Some(v);
        rest = after;
    }
    let &[tag::NULL, tag::INT, a, b, c, d] = rest else {
        return None;
    };
    let priority = Priority::from_i64(i32::from_le_bytes([a, b, c, d]).into())?;
    let m = ChecksumRef {
        collection,
        node_id,
        uri,
        checksum,
        ppdup_id,
        dbname,
    };
    match Command::from_i64(cmd.into())? {
        Command::PpdupAdd => Some((priority, PpdupRef::Add(m))),
        Command::PpdupRemove => Some((priority, PpdupRef::Remove(m))),
        _ => None,
    }
}

/// PKT_DSPECNAME's value and PKT_CSUM's of a frame body that opens as a PPDUP_ADD or
/// PPDUP_REMOVE in the layout [`read_ppdup`] reads straight (PKT_CSUM, then PKT_DSPECNAME),
/// the rest of the body unread: for a caller that prefetches a window's table slots before it
/// reads the window's frames. A hint: a body this names a checksum of may still be refused
/// when read, and None says nothing about the body.
#[inline]
pub fn peek_checksum(body: &[u8]) -> Option<(&[u8], Checksum)> {
    let rest = body.strip_prefix(b"(\x02\x00\x00\x00{")?;
    let (cs, rest) = string_pair(rest, b"cs")?;
    let checksum = Checksum(cs.try_into().ok()?);
    let (collection, _) = string_pair(rest, b"dn")?;
    Some((collection, checksum))
}

/// PPDUP_ADD_OK or PPDUP_REMOVE_OK in the layouts the server and the replica answer in
/// (PKT_DSPECNAME, PKT_ID, PKT_CMD, PKT_URI, then PKT_OWNURI, PKT_PPDUP_ID and PKT_DBNAME if
/// present), read with each pair's key known in advance, as [`read_checksum_straight`] reads.
/// None for anything else, which the walk then reads: where this reads a body, the walk reads
/// the same message.
#[inline(always)]
fn read_ok_straight<'a>(body: &'a [u8], limits: &Limits) -> Option<(Priority, PpdupRef<'a>)> {
    let (priority, command, [collection, node_id, uri], optional) = ok_parts(body, limits)?;
    let [owner_uri, ppdup_id, dbname] = optional.map(|v| v.map(Cow::Borrowed));
    let m = match command {
        Command::PpdupAddOk => PpdupRef::AddOk(PpdupAddOk {
            collection: Cow::Borrowed(collection),
            node_id: Cow::Borrowed(node_id),
            uri: Cow::Borrowed(uri),
            owner_uri,
            ppdup_id,
            dbname,
        }),
        _ => PpdupRef::RemoveOk(PpdupRemoveOk {
            collection: Cow::Borrowed(collection),
            uri: Cow::Borrowed(uri),
            node_id: Some(Cow::Borrowed(node_id)),
            ppdup_id,
            dbname,
        }),
    };
    Some((priority, m))
}

/// The pieces [`read_ok_straight`] reads: the priority, the command (PPDUP_ADD_OK, or
/// PPDUP_REMOVE_OK without PKT_OWNURI), PKT_DSPECNAME, PKT_ID and PKT_URI, and PKT_OWNURI,
/// PKT_PPDUP_ID and PKT_DBNAME when present; [`read_ppdup_command`] takes the command alone.
type OkParts<'a> = (Priority, Command, [&'a [u8]; 3], [Option<&'a [u8]>; 3]);

/// Reads the [`OkParts`] of a body in the layouts of [`read_ok_straight`].
#[inline(always)]
fn ok_parts<'a>(body: &'a [u8], limits: &Limits) -> Option<OkParts<'a>> {
    let ([collection, node_id, uri], cmd, mut rest) = dn_id_cm_ur(dict_body(body, limits)?)?;
    let mut optional: [Option<&'a [u8]>; 3] = [None; 3];
    for (slot, key) in optional.iter_mut().zip([b"ou", b"pi", b"db"]) {
        if let Some((v, after)) = string_pair(rest, key) {
            *slot = Some(v);
            rest = after;
        }
    }
    let &[tag::NULL, tag::INT, a, b, c, d] = rest else {
        return None;
    };
    let priority = Priority::from_i64(i32::from_le_bytes([a, b, c, d]).into())?;
    let command = match Command::from_i64(cmd.into())? {
        Command::PpdupAddOk => Command::PpdupAddOk,
        Command::PpdupRemoveOk if optional[0].is_none() => Command::PpdupRemoveOk,
        _ => return None,
    };
    Some((priority, command, [collection, node_id, uri], optional))
}

/// Reads a frame body holding PPDUP_ADD, PPDUP_REMOVE, PPDUP_ADD_OK or PPDUP_REMOVE_OK in the
/// canonical layout, borrowing its strings; `None` for anything else (other commands, other key
/// orders or string forms, missing or extra keys, any error), which the caller then hands to
/// the general decoder.
pub fn read_ppdup<'a>(body: &'a [u8], limits: &Limits) -> Option<(Priority, PpdupRef<'a>)> {
    if let Some(read) = read_checksum_straight(body, limits) {
        return Some(read);
    }
    if let Some(read) = read_ok_straight(body, limits) {
        return Some(read);
    }
    let mut fields: [Option<&'a [u8]>; KEYS] = [None; KEYS];
    let (priority, cmd) = walk(body, limits, |rank, v| fields[rank] = Some(v))?;
    let [cs, dn, id, _, ur, ou, pi, db] = fields;
    let b = |v: Option<&'a [u8]>| v.map(Cow::Borrowed);
    let m = match Command::from_i64(cmd?.into())? {
        cmd @ (Command::PpdupAdd | Command::PpdupRemove) => {
            if ou.is_some() {
                return None;
            }
            let m = ChecksumRef {
                collection: dn?,
                node_id: id?,
                uri: ur?,
                checksum: Checksum(cs?.try_into().ok()?),
                ppdup_id: pi,
                dbname: db,
            };
            if cmd == Command::PpdupAdd {
                PpdupRef::Add(m)
            } else {
                PpdupRef::Remove(m)
            }
        }
        Command::PpdupAddOk => {
            if cs.is_some() {
                return None;
            }
            PpdupRef::AddOk(PpdupAddOk {
                collection: b(dn)?,
                node_id: b(id)?,
                uri: b(ur)?,
                owner_uri: b(ou),
                ppdup_id: b(pi),
                dbname: b(db),
            })
        }
        Command::PpdupRemoveOk => {
            if cs.is_some() || ou.is_some() {
                return None;
            }
            PpdupRef::RemoveOk(PpdupRemoveOk {
                collection: b(dn)?,
                uri: b(ur)?,
                node_id: b(id),
                ppdup_id: b(pi),
                dbname: b(db),
            })
        }
        _ => return None,
    };
    Some((priority, m))
}
