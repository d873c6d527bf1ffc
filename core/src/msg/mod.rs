//! The FSCMT message model (MS-FSCMT 2.2.1.1 keys, 2.2.3-2.2.5 commands).
//!
//! One module per protocol family, one type per message shape: `cmd_um` (the CMD_UM_* commands
//! between node and multinode schedulers), `cmd_adm` (the CMD_ADM_* configuration commands the
//! multinode scheduler passes on) and `ppdup` (the duplicate server's PPDUP_* commands). Each
//! shape reads itself from a `Reader` over the message dict (`reader.rs`) and writes its pairs
//! back (the `Codec` trait in `codec.rs`); `message.rs` holds the one table from PKT_CMD to
//! shape, spec section and receiving roles, from which [`Message`] and its methods are
//! generated.
//!
//! [`Message::from_dict`] turns the dict of a decoded frame into a typed message, borrowing its
//! strings from the frame; [`Message::to_dict`] turns it back. A missing or mistyped key is a
//! [`MessageError`] naming the key; an unknown command value is [`MessageError::UnknownCommand`].
//! The hot messages (PPDUP_ADD and kin, CMD_UM_URI) in their canonical layout also have a fast
//! path (`flat.rs`) that reads and writes the same bytes without building marshal values.
//!
//! Three commands have one number and two shapes, one per direction: CMD_UM_ADD_ROUTE (2.2.3.8
//! to a node scheduler, 2.2.4.9 to the multinode scheduler), CMD_UM_START_CRAWL_IP (2.2.4.11
//! request, 2.2.3.22 reply) and CMD_UM_CONF_STATE (2.2.4.13 request, 2.2.3.21 reply). They are
//! told apart by the shape of PKT_DATA, so a frame decodes the same whoever reads it; a role
//! checks with [`Message::handled_by`] that the message is one it takes.

mod answer;
mod cmd_adm;
mod cmd_um;
mod codec;
mod flat;
mod message;
mod ppdup;
mod ppdup_ref;
mod reader;
pub mod types;

use std::fmt;

pub use answer::{encode_add_ok_frame, encode_checksum_frame, AddBytes};
pub use cmd_adm::{ConfRefresh, ConfSpec, ConfSuspend, FeedingSuspend, PreemptSite};
pub use cmd_um::{
    AddRoute, ConfState, DeleteSite, DeleteUris, DnsReply, DnsRequest, Init, Log, Quarantine,
    ReprocessSite, RouteList, StartCrawlIp, StartCrawlIpReply, Stat, StopCrawlIp, UriMsg,
};
pub use codec::CollectionOnly;
pub(crate) use flat::decode as decode_hot;
pub(crate) use flat::peek_uri;
pub(crate) use flat::{decode_entry as decode_entry_flat, peek_entry as peek_entry_flat};
pub use message::Message;
pub use ppdup::{
    Checksum, PpdupAddOk, PpdupChecksum, PpdupConfRemove, PpdupConfigAck, PpdupError,
    PpdupPromoteReq, PpdupRemoveOk, PpdupSetConfig,
};
pub use ppdup_ref::{peek_checksum, read_ppdup, read_ppdup_command, ChecksumRef, PpdupRef};
pub use reader::Bytes;
pub use types::{AddrInfo, CrawlQueueEntry, Redirect, UriStructure};

use crate::marshal::Value;
use reader::Reader;

/// The message dictionary keys (MS-FSCMT 2.2.1.1).
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    // Declared in the order keys are written in a frame (the order of the golden vectors).
    XmlRpcPort,
    NodeId,
    Checksum,
    CollectionName,
    Id,
    VectorClock,
    Cmd,
    Uri,
    Data,
    Site,
    Why,
    OwnerUri,
    SiteAddrInfo,
    CollectionSpec,
    Epoch,
    PpdupId,
    DbName,
}

impl Key {
    /// Every key.
    pub const ALL: [Key; 17] = [
        Key::XmlRpcPort,
        Key::NodeId,
        Key::Checksum,
        Key::CollectionName,
        Key::Id,
        Key::VectorClock,
        Key::Cmd,
        Key::Uri,
        Key::Data,
        Key::Site,
        Key::Why,
        Key::OwnerUri,
        Key::SiteAddrInfo,
        Key::CollectionSpec,
        Key::Epoch,
        Key::PpdupId,
        Key::DbName,
    ];

    /// The two-letter string on the wire.
    pub const fn wire(self) -> &'static str {
        match self {
            Key::Cmd => "cm",
            Key::Uri => "ur",
            Key::VectorClock => "vc",
            Key::SiteAddrInfo => "si",
            Key::CollectionName => "dn",
            Key::Site => "st",
            Key::CollectionSpec => "ds",
            Key::Epoch => "ep",
            Key::Checksum => "cs",
            Key::Id => "id",
            Key::OwnerUri => "ou",
            Key::Why => "wy",
            Key::NodeId => "mi",
            Key::Data => "pd",
            Key::PpdupId => "pi",
            Key::DbName => "db",
            Key::XmlRpcPort => "xp",
        }
    }

    /// The name the specification uses.
    pub fn name(self) -> &'static str {
        match self {
            Key::Cmd => "PKT_CMD",
            Key::Uri => "PKT_URI",
            Key::VectorClock => "PKT_VCLOCK",
            Key::SiteAddrInfo => "PKT_SITE_ADDRINFO",
            Key::CollectionName => "PKT_DSPECNAME",
            Key::Site => "PKT_SITE",
            Key::CollectionSpec => "PKT_DSPEC",
            Key::Epoch => "PKT_EPOCH",
            Key::Checksum => "PKT_CSUM",
            Key::Id => "PKT_ID",
            Key::OwnerUri => "PKT_OWNURI",
            Key::Why => "PKT_WHY",
            Key::NodeId => "PKT_NODE_ID",
            Key::Data => "PKT_DATA",
            Key::PpdupId => "PKT_PPDUP_ID",
            Key::DbName => "PKT_DBNAME",
            Key::XmlRpcPort => "PKT_XMLRPCPRT",
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (\"{}\")", self.name(), self.wire())
    }
}

macro_rules! commands {
    ($($variant:ident = $value:literal => $name:literal,)*) => {
        /// The PKT_CMD values (MS-FSCMT 2.2.3, 2.2.4, 2.2.5).
        #[allow(missing_docs)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Command { $($variant = $value,)* }

        impl Command {
            /// Every command.
            pub const ALL: &'static [Command] = &[$(Command::$variant,)*];

            /// The command with this PKT_CMD value.
            pub fn from_i64(v: i64) -> Option<Command> {
                match v { $($value => Some(Command::$variant),)* _ => None }
            }

            /// The spec's name, e.g. `"PPDUP_ADD"`.
            pub fn name(self) -> &'static str {
                match self { $(Command::$variant => $name,)* }
            }
        }
    };
}

commands! {
    CmdAdmConfUpdate = 0 => "CMD_ADM_CONF_UPDATE",
    CmdAdmConfAdd = 1 => "CMD_ADM_CONF_ADD",
    CmdAdmConfRemove = 2 => "CMD_ADM_CONF_REMOVE",
    CmdAdmConfSuspend = 3 => "CMD_ADM_CONF_SUSPEND",
    CmdAdmConfResume = 4 => "CMD_ADM_CONF_RESUME",
    CmdAdmConfRefresh = 5 => "CMD_ADM_CONF_REFRESH",
    CmdAdmPreemptSite = 6 => "CMD_ADM_PREEMPT_SITE",
    CmdUmAddRoute = 7 => "CMD_UM_ADD_ROUTE",
    CmdUmAskRoute = 8 => "CMD_UM_ASK_ROUTE",
    CmdUmLastRoute = 9 => "CMD_UM_LAST_ROUTE",
    CmdUmKeepalive = 10 => "CMD_UM_KEEPALIVE",
    CmdUmKeepaliveAck = 11 => "CMD_UM_KEEPALIVE_ACK",
    CmdUmDnsRequest = 12 => "CMD_UM_DNS_REQUEST",
    CmdUmDnsReply = 13 => "CMD_UM_DNS_REPLY",
    CmdUmReprocessSite = 14 => "CMD_UM_REPROCESS_SITE",
    CmdUmQuarantineSite = 15 => "CMD_UM_QUARANTINE_SITE",
    CmdUmStartCrawlIp = 16 => "CMD_UM_START_CRAWL_IP",
    CmdUmStopCrawlIp = 17 => "CMD_UM_STOP_CRAWL_IP",
    CmdUmDeleteSite = 18 => "CMD_UM_DELETE_SITE",
    CmdUmDeleteUris = 19 => "CMD_UM_DELETE_URIS",
    CmdUmConfState = 20 => "CMD_UM_CONF_STATE",
    CmdUmQuarantineSiteRequeue = 21 => "CMD_UM_QUARANTINE_SITE_REQUEUE",
    CmdUmDeleteOk = 22 => "CMD_UM_DELETE_OK",
    CmdAdmConfFeedingSuspend = 23 => "CMD_ADM_CONF_FEEDING_SUSPEND",
    CmdUmInit = 24 => "CMD_UM_INIT",
    CmdUmUri = 25 => "CMD_UM_URI",
    CmdUmUriUrg = 26 => "CMD_UM_URI_URG",
    CmdUmStat = 27 => "CMD_UM_STAT",
    CmdUmLog = 28 => "CMD_UM_LOG",
    PpdupAddOk = 50 => "PPDUP_ADD_OK",
    PpdupError = 51 => "PPDUP_ERROR",
    PpdupAdd = 52 => "PPDUP_ADD",
    PpdupRemove = 53 => "PPDUP_REMOVE",
    PpdupRemoveOk = 54 => "PPDUP_REMOVE_OK",
    PpdupKeepalive = 55 => "PPDUP_KEEPALIVE",
    PpdupKeepaliveAck = 56 => "PPDUP_KEEPALIVE_ACK",
    PpdupPromoteReq = 57 => "PPDUP_PROMOTE_REQ",
    PpdupConfRemove = 58 => "PPDUP_CONF_REMOVE",
    PpdupSetConfig = 59 => "PPDUP_SET_CONFIG",
    PpdupConfigAck = 60 => "PPDUP_CONFIG_ACK",
    PpdupConfRemove2 = 61 => "PPDUP_CONF_REMOVE2",
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a message dict is not a valid FSCMT message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MessageError {
    /// PKT_CMD holds a value no command has.
    UnknownCommand(i64),
    /// A key the command requires is absent.
    MissingKey(Key),
    /// A key holds a value of the wrong type.
    WrongType {
        /// The key.
        key: Key,
        /// What the spec requires.
        expected: &'static str,
        /// What was there.
        found: &'static str,
    },
    /// A tuple under a key has the wrong number of elements.
    BadLength {
        /// The key.
        key: Key,
        /// The structure, e.g. "crawl queue entry 9-tuple".
        structure: &'static str,
        /// Elements required.
        expected: usize,
        /// Elements present.
        found: usize,
    },
    /// One element of a structure under a key is wrong.
    BadElement {
        /// The key.
        key: Key,
        /// The structure.
        structure: &'static str,
        /// The element's index.
        index: usize,
        /// What the spec requires there.
        expected: &'static str,
    },
}

impl fmt::Display for MessageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MessageError::UnknownCommand(v) => write!(f, "unknown command {v} in PKT_CMD"),
            MessageError::MissingKey(k) => write!(f, "missing key {k}"),
            MessageError::WrongType {
                key,
                expected,
                found,
            } => write!(f, "key {key}: expected {expected}, found {found}"),
            MessageError::BadLength {
                key,
                structure,
                expected,
                found,
            } => write!(
                f,
                "key {key}: {structure} has {found} elements, not {expected}"
            ),
            MessageError::BadElement {
                key,
                structure,
                index,
                expected,
            } => write!(
                f,
                "key {key}: element {index} of the {structure} is not {expected}"
            ),
        }
    }
}

impl std::error::Error for MessageError {}

/// The roles that receive FSCMT messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The node scheduler (MS-FSCMT 2.2.3).
    NodeScheduler,
    /// The multinode scheduler (MS-FSCMT 2.2.4).
    MultinodeScheduler,
    /// The duplicate server and its replica (MS-FSCMT 2.2.5).
    DuplicateServer,
}

/// The command value of a message dict, if PKT_CMD is present and an integer.
pub fn command_of(dict: &[(Value<'_>, Value<'_>)]) -> Result<Command, MessageError> {
    let v = Reader::new(dict).int(Key::Cmd)?;
    Command::from_i64(v).ok_or(MessageError::UnknownCommand(v))
}

#[cfg(test)]
mod tests;
