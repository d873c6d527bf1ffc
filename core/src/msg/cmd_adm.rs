//! The CMD_ADM_* commands: configuration and administration that the multinode scheduler
//! passes on to its node schedulers (MS-FSCMT 2.2.3.5-2.2.3.14). CMD_ADM_CONF_RESUME and
//! CMD_ADM_CONF_REMOVE carry only the collection name ([`super::CollectionOnly`]).

use super::codec::{bytes_v, Codec, Pairs};
use super::reader::{opt_bytes_value, string_list, string_list_value, Bytes, Reader};
use super::types::borrow_value;
use super::{Key, MessageError};
use crate::marshal::Value;

/// CMD_ADM_CONF_SUSPEND (MS-FSCMT 2.2.3.5): suspend crawling a collection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfSuspend<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA: the state to enter (4 user, 5 disk full, 8 variable delay).
    pub state: i64,
}

impl<'a> Codec<'a> for ConfSuspend<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(ConfSuspend {
            collection: r.bytes(Key::CollectionName)?,
            state: r.int(Key::Data)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Data, Value::int(self.state)));
    }
}

/// CMD_ADM_CONF_FEEDING_SUSPEND (MS-FSCMT 2.2.3.7): suspend or resume content submission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedingSuspend<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: true to suspend, false to resume.
    pub suspend: bool,
    /// PKT_DATA[1]: the destinations, or None for all of them.
    pub destinations: Option<Vec<Bytes<'a>>>,
}

impl<'a> Codec<'a> for FeedingSuspend<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        let t = r.tuple(Key::Data, "feeding suspend 2-tuple", Some(2))?;
        let destinations = match t.value(1)? {
            Value::None => None,
            v => Some(string_list(Key::Data, "destination list", v)?),
        };
        Ok(FeedingSuspend {
            collection: r.bytes(Key::CollectionName)?,
            suspend: t.bool(0)?,
            destinations,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        let dest = self
            .destinations
            .as_deref()
            .map_or(Value::None, string_list_value);
        out.push((
            Key::Data,
            Value::Tuple(vec![Value::int(self.suspend.into()), dest]),
        ));
    }
}

/// CMD_ADM_CONF_REFRESH (MS-FSCMT 2.2.3.10): reload the configuration and refresh the crawl.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfRefresh<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the subcollection, or None for the whole collection.
    pub subcollection: Option<Bytes<'a>>,
    /// PKT_DATA[1]: the option bitmask ([`super::types::refresh_options`]).
    pub options: i64,
}

impl<'a> Codec<'a> for ConfRefresh<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        let t = r.tuple(Key::Data, "refresh 2-tuple", Some(2))?;
        Ok(ConfRefresh {
            collection: r.bytes(Key::CollectionName)?,
            subcollection: t.opt_bytes(0)?,
            options: t.int(1)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::Data,
            Value::Tuple(vec![
                opt_bytes_value(&self.subcollection),
                Value::int(self.options),
            ]),
        ));
    }
}

/// CMD_ADM_CONF_ADD / CMD_ADM_CONF_UPDATE (MS-FSCMT 2.2.3.11, 2.2.3.12): a new or changed
/// crawl configuration.
///
/// On the wire PKT_DSPEC is the crawl configuration structure of 2.2.2.3.1: a dictionary keyed
/// by the collection's name whose value is the collection's parameters, `{name: {...}}`. That
/// is what [`Codec::encode`] sends. [`Codec::read`] takes the entry named by PKT_DSPECNAME out
/// of it; a PKT_DSPEC without that entry is read as the flat form earlier versions sent (the
/// parameters themselves), which cannot be confused with the spec's form unless the
/// collection is named like one of its own sections (then the spec's form wins).
#[derive(Clone, Debug, PartialEq)]
pub struct ConfSpec<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// The collection's own parameters: the value under its name in PKT_DSPEC (2.2.2.3.1), a
    /// dict.
    pub config: Value<'a>,
    /// PKT_EPOCH, when sent: the configuration version.
    pub epoch: Option<i64>,
}

impl<'a> Codec<'a> for ConfSpec<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        let collection = r.bytes(Key::CollectionName)?;
        let spec = r.dict(Key::CollectionSpec)?;
        Ok(ConfSpec {
            config: collection_entry(spec, &collection),
            collection,
            epoch: r.opt_int(Key::Epoch)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::CollectionSpec,
            Value::Dict(vec![(
                bytes_v(&self.collection),
                borrow_value(&self.config),
            )]),
        ));
        if let Some(e) = self.epoch {
            out.push((Key::Epoch, Value::int(e)));
        }
    }
}

/// The parameters of collection `name` in a crawl configuration structure (MS-FSCMT
/// 2.2.2.3.1, `{name: {...}}`), or `spec` itself when it has no dictionary under `name` (the
/// flat form).
pub(crate) fn collection_entry<'a>(spec: Value<'a>, name: &[u8]) -> Value<'a> {
    if let Value::Dict(pairs) = spec {
        let at = pairs
            .iter()
            .position(|(k, v)| k.as_bytes() == Some(name) && matches!(v, Value::Dict(_)));
        match at {
            Some(i) => pairs
                .into_iter()
                .nth(i)
                .map(|(_, v)| v)
                .expect("found above"),
            None => Value::Dict(pairs),
        }
    } else {
        spec
    }
}

/// CMD_ADM_PREEMPT_SITE (MS-FSCMT 2.2.3.14): stop crawling a site now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreemptSite<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the site.
    pub site: Bytes<'a>,
    /// PKT_DATA[1]: requeue the site at the front of the crawl queue.
    pub requeue: bool,
}

impl<'a> Codec<'a> for PreemptSite<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        let t = r.tuple(Key::Data, "preempt 2-tuple", Some(2))?;
        Ok(PreemptSite {
            collection: r.bytes(Key::CollectionName)?,
            site: t.bytes(0)?,
            requeue: t.bool(1)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::Data,
            Value::Tuple(vec![bytes_v(&self.site), Value::int(self.requeue.into())]),
        ));
    }
}
