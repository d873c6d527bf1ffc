//! One operation of a feeding session (docs/distributor.md "Feeding sessions") and its record
//! in the content index's log: the op as it came, so that the log alone rebuilds the index.
//!
//! Payload (little-endian, byte strings u32-length-prefixed): `u8` kind (1 add, 2 update,
//! 3 remove), `u64` seq, `i64` time, doc; then for add and update: 16 bytes checksum, `i64`
//! status, `u32` header count, each header name and value, body.

use crate::recordlog::{put_bytes, Cur};

/// What an operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// A new document.
    Add,
    /// A new version of a document.
    Update,
    /// The document is gone (a tombstone in the log).
    Remove,
}

impl OpKind {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Add => "add",
            OpKind::Update => "update",
            OpKind::Remove => "remove",
        }
    }

    /// From the wire name.
    pub fn from_name(s: &[u8]) -> Option<OpKind> {
        match s {
            b"add" => Some(OpKind::Add),
            b"update" => Some(OpKind::Update),
            b"remove" => Some(OpKind::Remove),
            _ => None,
        }
    }

    fn code(self) -> u8 {
        match self {
            OpKind::Add => 1,
            OpKind::Update => 2,
            OpKind::Remove => 3,
        }
    }

    fn from_code(c: u8) -> Option<OpKind> {
        match c {
            1 => Some(OpKind::Add),
            2 => Some(OpKind::Update),
            3 => Some(OpKind::Remove),
            _ => None,
        }
    }
}

/// A document's version: (time, seq), compared in that order.
pub type Version = (i64, u64);

/// One operation: add or update a document, or remove it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// The client's sequence number (at least 1).
    pub seq: u64,
    /// What it does.
    pub kind: OpKind,
    /// The document id (the URI).
    pub doc: String,
    /// Fetch time (remove: time of the delete), unix seconds.
    pub time: i64,
    /// MD5 of the document (zeros for a remove).
    pub checksum: [u8; 16],
    /// HTTP status (0 for a remove).
    pub status: i64,
    /// Response headers: name, value.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body (empty for a remove).
    pub body: Vec<u8>,
}

impl Op {
    /// The version this op carries.
    pub fn version(&self) -> Version {
        (self.time, self.seq)
    }

    /// True for add and update.
    pub fn is_live(&self) -> bool {
        self.kind != OpKind::Remove
    }

    /// Bytes of the record payload.
    pub fn encoded_len(&self) -> usize {
        let mut n = 1 + 8 + 8 + 4 + self.doc.len();
        if self.is_live() {
            n += 16 + 8 + 4 + 4 + self.body.len();
            n += self
                .headers
                .iter()
                .map(|(k, v)| 8 + k.len() + v.len())
                .sum::<usize>();
        }
        n
    }

    /// Appends the record payload to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.kind.code());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.time.to_le_bytes());
        put_bytes(out, self.doc.as_bytes());
        if self.is_live() {
            out.extend_from_slice(&self.checksum);
            out.extend_from_slice(&self.status.to_le_bytes());
            out.extend_from_slice(&(self.headers.len() as u32).to_le_bytes());
            for (k, v) in &self.headers {
                put_bytes(out, k.as_bytes());
                put_bytes(out, v);
            }
            put_bytes(out, &self.body);
        }
    }

    /// Reads a record payload; None when it is not one (the log ends there).
    pub fn decode(payload: &[u8]) -> Option<Op> {
        let mut c = Cur(payload);
        let kind = OpKind::from_code(c.u8()?)?;
        let seq = c.u64()?;
        let time = c.u64()? as i64;
        let doc = String::from_utf8(c.bytes()?.to_vec()).ok()?;
        let mut op = Op {
            seq,
            kind,
            doc,
            time,
            checksum: [0; 16],
            status: 0,
            headers: Vec::new(),
            body: Vec::new(),
        };
        if op.is_live() {
            op.checksum = c.array()?;
            op.status = c.u64()? as i64;
            let n = c.u32()? as usize;
            // Each header takes at least 8 bytes: a count past what is left is damage.
            if n > c.0.len() / 8 {
                return None;
            }
            op.headers.reserve(n);
            for _ in 0..n {
                let k = String::from_utf8(c.bytes()?.to_vec()).ok()?;
                op.headers.push((k, c.bytes()?.to_vec()));
            }
            op.body = c.bytes()?.to_vec();
        }
        c.is_empty().then_some(op)
    }
}

/// The head of a record payload: enough to list a document without its headers and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// What it did.
    pub kind: OpKind,
    /// Its version.
    pub version: Version,
    /// The document id.
    pub doc: String,
}

impl Head {
    /// Reads the head of a payload (the rest unchecked).
    pub fn decode(payload: &[u8]) -> Option<Head> {
        let mut c = Cur(payload);
        let kind = OpKind::from_code(c.u8()?)?;
        let seq = c.u64()?;
        let time = c.u64()? as i64;
        let doc = String::from_utf8(c.bytes()?.to_vec()).ok()?;
        Some(Head {
            kind,
            version: (time, seq),
            doc,
        })
    }
}
