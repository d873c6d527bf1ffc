//! The PPDUP_* commands between node schedulers, the duplicate server and its replica
//! (MS-FSCMT 2.2.5). PPDUP_KEEPALIVE and PPDUP_KEEPALIVE_ACK carry no data and
//! PPDUP_CONF_REMOVE2 only the collection name ([`super::CollectionOnly`]).
//!
//! PPDUP_ADD, PPDUP_ADD_OK, PPDUP_REMOVE and PPDUP_REMOVE_OK in their canonical layout are also
//! read and written by the fast path (`flat.rs`), byte for byte as here.

use super::codec::{bytes_v, push_opt, Codec, Pairs};
use super::reader::{Bytes, Reader};
use super::types::borrow_value;
use super::{Key, MessageError};
use crate::marshal::Value;

/// A document checksum: the MD5 of the body, 16 bytes (MS-FSCMT 2.2.5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Checksum(pub [u8; 16]);

impl Checksum {
    /// PKT_CSUM, which "MUST be 16 bytes" (2.2.5.3).
    fn read(r: &Reader<'_, '_>) -> Result<Checksum, MessageError> {
        let b = r.bytes(Key::Checksum)?;
        <[u8; 16]>::try_from(&b[..])
            .map(Checksum)
            .map_err(|_| MessageError::WrongType {
                key: Key::Checksum,
                expected: "16-byte string",
                found: "string of another length",
            })
    }
}

/// PPDUP_ADD / PPDUP_REMOVE (MS-FSCMT 2.2.5.3, 2.2.5.4): a URI and the checksum of its
/// document, added to or removed from the duplicate database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PpdupChecksum<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_ID: the node scheduler the message originated from.
    pub node_id: Bytes<'a>,
    /// PKT_URI: the URI added, or the owner URI removed.
    pub uri: Bytes<'a>,
    /// PKT_CSUM.
    pub checksum: Checksum,
    /// PKT_PPDUP_ID: the duplicate server that forwarded it (server to replica only).
    pub ppdup_id: Option<Bytes<'a>>,
    /// PKT_DBNAME: the duplicate database path (server to replica only).
    pub dbname: Option<Bytes<'a>>,
}

impl<'a> Codec<'a> for PpdupChecksum<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(PpdupChecksum {
            collection: r.bytes(Key::CollectionName)?,
            node_id: r.bytes(Key::Id)?,
            uri: r.bytes(Key::Uri)?,
            checksum: Checksum::read(r)?,
            ppdup_id: r.opt_bytes(Key::PpdupId)?,
            dbname: r.opt_bytes(Key::DbName)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::Checksum, Value::bytes(&self.checksum.0)));
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Id, bytes_v(&self.node_id)));
        out.push((Key::Uri, bytes_v(&self.uri)));
        push_opt(out, Key::PpdupId, &self.ppdup_id);
        push_opt(out, Key::DbName, &self.dbname);
    }
}

/// PPDUP_ADD_OK (MS-FSCMT 2.2.5.1): the answer to a PPDUP_ADD, naming the checksum's owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PpdupAddOk<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_ID: the node scheduler the PPDUP_ADD came from.
    pub node_id: Bytes<'a>,
    /// PKT_URI: the URI added.
    pub uri: Bytes<'a>,
    /// PKT_OWNURI: the owner of the checksum (3.3.5.4).
    pub owner_uri: Option<Bytes<'a>>,
    /// PKT_PPDUP_ID (replica to server, 3.4.5.3).
    pub ppdup_id: Option<Bytes<'a>>,
    /// PKT_DBNAME (replica to server, 3.4.5.3).
    pub dbname: Option<Bytes<'a>>,
}

impl<'a> Codec<'a> for PpdupAddOk<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(PpdupAddOk {
            collection: r.bytes(Key::CollectionName)?,
            node_id: r.bytes(Key::Id)?,
            uri: r.bytes(Key::Uri)?,
            owner_uri: r.opt_bytes(Key::OwnerUri)?,
            ppdup_id: r.opt_bytes(Key::PpdupId)?,
            dbname: r.opt_bytes(Key::DbName)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Id, bytes_v(&self.node_id)));
        out.push((Key::Uri, bytes_v(&self.uri)));
        push_opt(out, Key::OwnerUri, &self.owner_uri);
        push_opt(out, Key::PpdupId, &self.ppdup_id);
        push_opt(out, Key::DbName, &self.dbname);
    }
}

/// PPDUP_REMOVE_OK (MS-FSCMT 2.2.5.5): the answer to a PPDUP_REMOVE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PpdupRemoveOk<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_URI: the URI removed.
    pub uri: Bytes<'a>,
    /// PKT_ID, when sent: the node scheduler the PPDUP_REMOVE came from.
    pub node_id: Option<Bytes<'a>>,
    /// PKT_PPDUP_ID (replica to server, 3.4.5.4).
    pub ppdup_id: Option<Bytes<'a>>,
    /// PKT_DBNAME (replica to server, 3.4.5.4).
    pub dbname: Option<Bytes<'a>>,
}

impl<'a> Codec<'a> for PpdupRemoveOk<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(PpdupRemoveOk {
            collection: r.bytes(Key::CollectionName)?,
            uri: r.bytes(Key::Uri)?,
            node_id: r.opt_bytes(Key::Id)?,
            ppdup_id: r.opt_bytes(Key::PpdupId)?,
            dbname: r.opt_bytes(Key::DbName)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Uri, bytes_v(&self.uri)));
        push_opt(out, Key::Id, &self.node_id);
        push_opt(out, Key::PpdupId, &self.ppdup_id);
        push_opt(out, Key::DbName, &self.dbname);
    }
}

/// PPDUP_ERROR (MS-FSCMT 2.2.5.2): a request the duplicate server could not carry out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PpdupError<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_WHY.
    pub why: Bytes<'a>,
}

impl<'a> Codec<'a> for PpdupError<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(PpdupError {
            collection: r.bytes(Key::CollectionName)?,
            why: r.bytes(Key::Why)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Why, bytes_v(&self.why)));
    }
}

/// PPDUP_PROMOTE_REQ (MS-FSCMT 2.2.5.8): re-crawl the URIs that share a checksum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PpdupPromoteReq<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_CSUM: re-crawl the URIs with this checksum.
    pub checksum: Checksum,
}

impl<'a> Codec<'a> for PpdupPromoteReq<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(PpdupPromoteReq {
            collection: r.bytes(Key::CollectionName)?,
            checksum: Checksum::read(r)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Checksum, Value::bytes(&self.checksum.0)));
    }
}

/// PPDUP_CONF_REMOVE (MS-FSCMT 2.2.5.9): drop a collection's duplicate database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PpdupConfRemove<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_PPDUP_ID (server to replica, 3.3.5.2).
    pub ppdup_id: Option<Bytes<'a>>,
}

impl<'a> Codec<'a> for PpdupConfRemove<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(PpdupConfRemove {
            collection: r.bytes(Key::CollectionName)?,
            ppdup_id: r.opt_bytes(Key::PpdupId)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        push_opt(out, Key::PpdupId, &self.ppdup_id);
    }
}

/// PPDUP_SET_CONFIG (MS-FSCMT 2.2.5.10): the crawl configurations the duplicate server keeps.
#[derive(Clone, Debug, PartialEq)]
pub struct PpdupSetConfig<'a> {
    /// PKT_DATA: the crawl collection configurations (2.2.2.3), a dict.
    pub config: Value<'a>,
    /// PKT_VCLOCK.
    pub vclock: i64,
    /// PKT_DSPECNAME, when sent (3.1.5.11).
    pub collection: Option<Bytes<'a>>,
}

impl<'a> Codec<'a> for PpdupSetConfig<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(PpdupSetConfig {
            config: r.dict(Key::Data)?,
            vclock: r.int(Key::VectorClock)?,
            collection: r.opt_bytes(Key::CollectionName)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::Data, borrow_value(&self.config)));
        out.push((Key::VectorClock, Value::int(self.vclock)));
        push_opt(out, Key::CollectionName, &self.collection);
    }
}

/// PPDUP_CONFIG_ACK (MS-FSCMT 2.2.5.11): the answer to a PPDUP_SET_CONFIG.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PpdupConfigAck {
    /// PKT_VCLOCK, echoed.
    pub vclock: i64,
}

impl<'a> Codec<'a> for PpdupConfigAck {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(PpdupConfigAck {
            vclock: r.int(Key::VectorClock)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::VectorClock, Value::int(self.vclock)));
    }
}
