//! The codec every FSCMT message type implements, in the manner of rustls's `msgs::codec`: a
//! type reads itself from a [`Reader`] over the message dict and writes its pairs back, and
//! nothing else in the model knows its keys. Which PKT_CMD values a type stands for, in which
//! direction and for which role, is the message table's business (`message.rs`), since some
//! shapes serve several commands (PPDUP_ADD and PPDUP_REMOVE are both a [`PpdupChecksum`]).
//!
//! [`PpdupChecksum`]: super::PpdupChecksum

use super::reader::{Bytes, Reader};
use super::{Key, MessageError};
use crate::marshal::Value;

/// The (key, value) pairs of one message: PKT_CMD and at most six more today (PPDUP_ADD from a
/// duplicate server to its replica), on the stack.
pub(crate) type Pairs<'s> = arrayvec::ArrayVec<(Key, Value<'s>), 12>;

/// One message shape of MS-FSCMT 2.2.3-2.2.5.
pub(crate) trait Codec<'a>: Sized {
    /// Reads the shape's keys from a message dict whose PKT_CMD has been read; the first key
    /// missing or malformed is the error, named.
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError>;

    /// Appends the shape's pairs (PKT_CMD excepted), values borrowing from `self`.
    fn encode<'s>(&'s self, out: &mut Pairs<'s>);
}

/// A message whose only data is the collection name (PKT_DSPECNAME): CMD_ADM_CONF_RESUME
/// (MS-FSCMT 2.2.3.6), CMD_ADM_CONF_REMOVE (2.2.3.13), CMD_UM_ASK_ROUTE (2.2.3.9),
/// CMD_UM_LAST_ROUTE (2.2.4.10), CMD_UM_CONF_STATE to the multinode scheduler (2.2.4.13),
/// CMD_UM_DELETE_OK (2.2.4.14) and PPDUP_CONF_REMOVE2 (2.2.5.12).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectionOnly<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
}

impl<'a> Codec<'a> for CollectionOnly<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(CollectionOnly {
            collection: r.bytes(Key::CollectionName)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
    }
}

/// A byte string of a message as a marshal value borrowing it.
pub(crate) fn bytes_v<'s>(b: &'s Bytes<'_>) -> Value<'s> {
    Value::bytes(b)
}

/// The pair `(key, v)` when `v` is present; optional keys are left out rather than sent as None.
pub(crate) fn push_opt<'s>(out: &mut Pairs<'s>, key: Key, v: &'s Option<Bytes<'_>>) {
    if let Some(b) = v {
        out.push((key, Value::bytes(b)));
    }
}
