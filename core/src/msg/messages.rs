//! One struct per message shape of MS-FSCMT 2.2.3-2.2.5, and the [`Message`] enum over them.

use super::fields::{
    elem_bool, elem_bytes, elem_int, elem_opt_bytes, items, opt_bytes_value, string_list,
    string_list_value, Bytes, Fields,
};
use super::types::{addrinfo_list_from, addrinfo_list_to, borrow_value, AddrInfo, CrawlQueueEntry};
use super::{Command, Key, MessageError, Role};
use crate::marshal::{Dict, Value};

/// The pairs of one message (at most 7 today: PKT_CMD and six fields of PPDUP_ADD).
type Pairs<'s> = arrayvec::ArrayVec<(Key, Value<'s>), 12>;

/// A message whose only data is the collection name (PKT_DSPECNAME).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectionOnly<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
}

/// CMD_UM_URI / CMD_UM_URI_URG (2.2.3.3, 2.2.3.4, 2.2.4.5, 2.2.4.7).
#[derive(Clone, Debug, PartialEq)]
pub struct UriMsg<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA: the crawl queue entry.
    pub entry: CrawlQueueEntry<'a>,
}

impl<'a> UriMsg<'a> {
    /// As CMD_UM_URI_URG when `urgent`, else CMD_UM_URI.
    pub fn into_message(self, urgent: bool) -> Message<'a> {
        if urgent {
            Message::CmdUmUriUrg(self)
        } else {
            Message::CmdUmUri(self)
        }
    }
}

/// CMD_ADM_CONF_SUSPEND (2.2.3.5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfSuspend<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA: the state to enter (4 user, 5 disk full, 8 variable delay).
    pub state: i64,
}

/// CMD_ADM_CONF_FEEDING_SUSPEND (2.2.3.7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedingSuspend<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: true to suspend, false to resume.
    pub suspend: bool,
    /// PKT_DATA[1]: the destinations, or None for all of them.
    pub destinations: Option<Vec<Bytes<'a>>>,
}

/// CMD_UM_ADD_ROUTE to a node scheduler (2.2.3.8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddRoute<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the node the site is routed to.
    pub node_id: Bytes<'a>,
    /// PKT_DATA[1]: the crawl routing attribute.
    pub routing_attr: Bytes<'a>,
    /// PKT_DATA[2]: the crawl site.
    pub site: Bytes<'a>,
    /// PKT_DATA[3]: the site's addresses; None when crawling through a proxy.
    pub addrinfo: Option<Vec<AddrInfo<'a>>>,
    /// PKT_DATA[4]: seconds before the addresses must be resolved again.
    pub ttl: i64,
}

/// CMD_UM_ADD_ROUTE to the multinode scheduler (2.2.4.9): at most 256 (attribute, node) pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteList<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA: (crawl routing attribute, node identifier) pairs.
    pub routes: Vec<(Bytes<'a>, Bytes<'a>)>,
}

impl RouteList<'_> {
    /// The most entries one message may carry (2.2.4.9).
    pub const MAX_ROUTES: usize = 256;
}

/// CMD_ADM_CONF_REFRESH (2.2.3.10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfRefresh<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the subcollection, or None for the whole collection.
    pub subcollection: Option<Bytes<'a>>,
    /// PKT_DATA[1]: the option bitmask ([`super::types::refresh_options`]).
    pub options: i64,
}

/// CMD_ADM_CONF_ADD / CMD_ADM_CONF_UPDATE (2.2.3.11, 2.2.3.12).
#[derive(Clone, Debug, PartialEq)]
pub struct ConfSpec<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DSPEC: the crawl configuration structure (2.2.2.3), a dict.
    pub config: Value<'a>,
    /// PKT_EPOCH, when sent: the configuration version.
    pub epoch: Option<i64>,
}

/// CMD_ADM_PREEMPT_SITE (2.2.3.14).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreemptSite<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the site.
    pub site: Bytes<'a>,
    /// PKT_DATA[1]: requeue the site at the front of the crawl queue.
    pub requeue: bool,
}

/// CMD_UM_REPROCESS_SITE (2.2.3.15).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReprocessSite<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the site.
    pub site: Bytes<'a>,
    /// PKT_DATA[1]: the URI prefix.
    pub prefix: Bytes<'a>,
    /// PKT_DATA[2]: the content submission destination, or None for all.
    pub destination: Option<Bytes<'a>>,
    /// PKT_DATA[3]: the prefix is an exact match.
    pub exact: bool,
}

/// CMD_UM_DELETE_SITE (2.2.3.16).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteSite<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA: the site.
    pub site: Bytes<'a>,
}

/// CMD_UM_DELETE_URIS (2.2.3.17).
#[derive(Clone, Debug, PartialEq)]
pub struct DeleteUris<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: URIs keyed by their crawl site.
    pub uris: Vec<(Bytes<'a>, Vec<Bytes<'a>>)>,
    /// PKT_DATA[1]: the info dict (`{"errcode": "USR"}`), pairs in wire order.
    pub info: Dict<'a>,
}

/// CMD_UM_QUARANTINE_SITE / CMD_UM_QUARANTINE_SITE_REQUEUE (2.2.3.18, 2.2.3.19).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quarantine<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the site.
    pub site: Bytes<'a>,
    /// PKT_DATA[1]: seconds of quarantine.
    pub seconds: i64,
}

/// CMD_UM_DNS_REPLY (2.2.3.20).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsReply<'a> {
    /// PKT_DSPECNAME (the spec requires the empty string).
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the host name resolved.
    pub host: Bytes<'a>,
    /// PKT_DATA[1][0]: the addresses, or None when the lookup failed.
    pub addrinfo: Option<Vec<AddrInfo<'a>>>,
    /// PKT_DATA[1][1]: when the resolution finished (Unix seconds).
    pub resolved_at: i64,
    /// PKT_DATA[1][2]: seconds the answer may be used.
    pub ttl: i64,
}

/// CMD_UM_CONF_STATE to a node scheduler (2.2.3.21).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfState<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA: the new state ([`super::types::conf_state`]).
    pub state: i64,
}

/// CMD_UM_START_CRAWL_IP request to the multinode scheduler (2.2.4.11).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartCrawlIp<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the IP address (the site when crawling through a proxy).
    pub ip: Bytes<'a>,
    /// PKT_DATA[1]: the site.
    pub site: Bytes<'a>,
    /// PKT_DATA[2]: the crawl store identifier.
    pub store_id: i64,
}

/// CMD_UM_START_CRAWL_IP reply to a node scheduler (2.2.3.22).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartCrawlIpReply<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the IP address (or site).
    pub ip: Bytes<'a>,
    /// PKT_DATA[1]: the site.
    pub site: Bytes<'a>,
    /// PKT_DATA[2]: the crawl store identifier.
    pub store_id: i64,
    /// PKT_DATA[3]: crawling is allowed (if not, block the IP or site for 30 minutes).
    pub allowed: bool,
}

/// CMD_UM_STOP_CRAWL_IP (2.2.4.12).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopCrawlIp<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the IP address (or site).
    pub ip: Bytes<'a>,
    /// PKT_DATA[1]: the site.
    pub site: Bytes<'a>,
}

/// CMD_UM_INIT (2.2.4.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Init<'a> {
    /// PKT_NODE_ID.
    pub node_id: Bytes<'a>,
    /// PKT_XMLRPCPRT[0]: the node scheduler's host name.
    pub xmlrpc_host: Bytes<'a>,
    /// PKT_XMLRPCPRT[1]: the port of its administrative interface.
    pub xmlrpc_port: i64,
}

/// CMD_UM_DNS_REQUEST (2.2.4.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsRequest<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_SITE: the host name to resolve.
    pub host: Bytes<'a>,
}

/// CMD_UM_STAT (2.2.4.6).
#[derive(Clone, Debug, PartialEq)]
pub struct Stat<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA: the statistics structure (MS-FSCADM 2.2.5).
    pub stats: Value<'a>,
}

/// CMD_UM_LOG (2.2.4.8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the log file: "si", "ur", "sc" or "dk".
    pub logfile: Bytes<'a>,
    /// PKT_DATA[1]: the message.
    pub message: Bytes<'a>,
}

/// A document checksum: the MD5 of the body, 16 bytes (2.2.5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Checksum(pub [u8; 16]);

/// PPDUP_ADD / PPDUP_REMOVE (2.2.5.3, 2.2.5.4).
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

/// PPDUP_ADD_OK (2.2.5.1).
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

/// PPDUP_REMOVE_OK (2.2.5.5).
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

/// PPDUP_ERROR (2.2.5.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PpdupError<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_WHY.
    pub why: Bytes<'a>,
}

/// PPDUP_PROMOTE_REQ (2.2.5.8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PpdupPromoteReq<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_CSUM: re-crawl the URIs with this checksum.
    pub checksum: Checksum,
}

/// PPDUP_CONF_REMOVE (2.2.5.9).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PpdupConfRemove<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_PPDUP_ID (server to replica, 3.3.5.2).
    pub ppdup_id: Option<Bytes<'a>>,
}

/// PPDUP_SET_CONFIG (2.2.5.10).
#[derive(Clone, Debug, PartialEq)]
pub struct PpdupSetConfig<'a> {
    /// PKT_DATA: the crawl collection configurations (2.2.2.3), a dict.
    pub config: Value<'a>,
    /// PKT_VCLOCK.
    pub vclock: i64,
    /// PKT_DSPECNAME, when sent (3.1.5.11).
    pub collection: Option<Bytes<'a>>,
}

/// PPDUP_CONFIG_ACK (2.2.5.11).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PpdupConfigAck {
    /// PKT_VCLOCK, echoed.
    pub vclock: i64,
}

fn bytes_v<'s>(b: &'s Bytes<'_>) -> Value<'s> {
    Value::bytes(b)
}

fn checksum(f: &Fields<'_, '_>) -> Result<Checksum, MessageError> {
    let b = f.bytes(Key::Checksum)?;
    <[u8; 16]>::try_from(&b[..])
        .map(Checksum)
        .map_err(|_| MessageError::WrongType {
            key: Key::Checksum,
            expected: "16-byte string",
            found: "string of another length",
        })
}

fn push_opt<'s>(out: &mut Pairs<'s>, key: Key, v: &'s Option<Bytes<'_>>) {
    if let Some(b) = v {
        out.push((key, Value::bytes(b)));
    }
}

macro_rules! messages {
    (
        units { $($unit:ident => $ucmd:ident,)* }
        data { $($variant:ident($ty:ident) => $cmd:ident,)* }
    ) => {
        /// A typed FSCMT message.
        #[allow(missing_docs)]
        #[derive(Clone, Debug, PartialEq)]
        pub enum Message<'a> {
            $($unit,)*
            $($variant($ty<'a>),)*
            /// PPDUP_CONFIG_ACK (2.2.5.11).
            PpdupConfigAck(PpdupConfigAck),
        }

        impl<'a> Message<'a> {
            /// The PKT_CMD of the message.
            pub fn command(&self) -> Command {
                match self {
                    $(Message::$unit => Command::$ucmd,)*
                    $(Message::$variant(_) => Command::$cmd,)*
                    Message::PpdupConfigAck(_) => Command::PpdupConfigAck,
                }
            }

            fn data_pairs<'s>(&'s self, out: &mut Pairs<'s>) {
                match self {
                    $(Message::$unit => {})*
                    $(Message::$variant(m) => m.encode(out),)*
                    Message::PpdupConfigAck(m) => {
                        out.push((Key::VectorClock, Value::int(m.vclock)))
                    }
                }
            }
        }
    };
}

messages! {
    units {
        CmdUmKeepalive => CmdUmKeepalive,
        CmdUmKeepaliveAck => CmdUmKeepaliveAck,
        PpdupKeepalive => PpdupKeepalive,
        PpdupKeepaliveAck => PpdupKeepaliveAck,
    }
    data {
        CmdUmUri(UriMsg) => CmdUmUri,
        CmdUmUriUrg(UriMsg) => CmdUmUriUrg,
        CmdAdmConfSuspend(ConfSuspend) => CmdAdmConfSuspend,
        CmdAdmConfResume(CollectionOnly) => CmdAdmConfResume,
        CmdAdmConfFeedingSuspend(FeedingSuspend) => CmdAdmConfFeedingSuspend,
        CmdUmAddRoute(AddRoute) => CmdUmAddRoute,
        CmdUmAddRoutes(RouteList) => CmdUmAddRoute,
        CmdUmAskRoute(CollectionOnly) => CmdUmAskRoute,
        CmdAdmConfRefresh(ConfRefresh) => CmdAdmConfRefresh,
        CmdAdmConfAdd(ConfSpec) => CmdAdmConfAdd,
        CmdAdmConfUpdate(ConfSpec) => CmdAdmConfUpdate,
        CmdAdmConfRemove(CollectionOnly) => CmdAdmConfRemove,
        CmdAdmPreemptSite(PreemptSite) => CmdAdmPreemptSite,
        CmdUmReprocessSite(ReprocessSite) => CmdUmReprocessSite,
        CmdUmDeleteSite(DeleteSite) => CmdUmDeleteSite,
        CmdUmDeleteUris(DeleteUris) => CmdUmDeleteUris,
        CmdUmQuarantineSite(Quarantine) => CmdUmQuarantineSite,
        CmdUmQuarantineSiteRequeue(Quarantine) => CmdUmQuarantineSiteRequeue,
        CmdUmDnsReply(DnsReply) => CmdUmDnsReply,
        CmdUmConfState(ConfState) => CmdUmConfState,
        CmdUmConfStateRequest(CollectionOnly) => CmdUmConfState,
        CmdUmStartCrawlIp(StartCrawlIp) => CmdUmStartCrawlIp,
        CmdUmStartCrawlIpReply(StartCrawlIpReply) => CmdUmStartCrawlIp,
        CmdUmStopCrawlIp(StopCrawlIp) => CmdUmStopCrawlIp,
        CmdUmInit(Init) => CmdUmInit,
        CmdUmDnsRequest(DnsRequest) => CmdUmDnsRequest,
        CmdUmStat(Stat) => CmdUmStat,
        CmdUmLog(Log) => CmdUmLog,
        CmdUmLastRoute(CollectionOnly) => CmdUmLastRoute,
        CmdUmDeleteOk(CollectionOnly) => CmdUmDeleteOk,
        PpdupAddOk(PpdupAddOk) => PpdupAddOk,
        PpdupError(PpdupError) => PpdupError,
        PpdupAdd(PpdupChecksum) => PpdupAdd,
        PpdupRemove(PpdupChecksum) => PpdupRemove,
        PpdupRemoveOk(PpdupRemoveOk) => PpdupRemoveOk,
        PpdupPromoteReq(PpdupPromoteReq) => PpdupPromoteReq,
        PpdupConfRemove(PpdupConfRemove) => PpdupConfRemove,
        PpdupSetConfig(PpdupSetConfig) => PpdupSetConfig,
        PpdupConfRemove2(CollectionOnly) => PpdupConfRemove2,
    }
}

impl<'a> Message<'a> {
    /// Reads a typed message from a frame's message dict.
    pub fn from_dict(dict: &[(Value<'a>, Value<'a>)]) -> Result<Message<'a>, MessageError> {
        use Command as C;
        let f = Fields::new(dict);
        let cmd = super::command_of(dict)?;
        let coll = || CollectionOnly::decode(&f);
        Ok(match cmd {
            C::CmdUmKeepalive => Message::CmdUmKeepalive,
            C::CmdUmKeepaliveAck => Message::CmdUmKeepaliveAck,
            C::PpdupKeepalive => Message::PpdupKeepalive,
            C::PpdupKeepaliveAck => Message::PpdupKeepaliveAck,
            C::CmdUmUri => Message::CmdUmUri(UriMsg::decode(&f)?),
            C::CmdUmUriUrg => Message::CmdUmUriUrg(UriMsg::decode(&f)?),
            C::CmdAdmConfSuspend => Message::CmdAdmConfSuspend(ConfSuspend {
                collection: f.bytes(Key::CollectionName)?,
                state: f.int(Key::Data)?,
            }),
            C::CmdAdmConfResume => Message::CmdAdmConfResume(coll()?),
            C::CmdAdmConfFeedingSuspend => {
                Message::CmdAdmConfFeedingSuspend(FeedingSuspend::decode(&f)?)
            }
            // 2.2.3.8 (a 5-tuple starting with the node id) or 2.2.4.9 (a list of pairs).
            C::CmdUmAddRoute => match f.req(Key::Data)? {
                Value::Tuple(t) if t.len() == 5 && matches!(t[0], Value::Bytes(..)) => {
                    Message::CmdUmAddRoute(AddRoute::decode(&f)?)
                }
                _ => Message::CmdUmAddRoutes(RouteList::decode(&f)?),
            },
            C::CmdUmAskRoute => Message::CmdUmAskRoute(coll()?),
            C::CmdAdmConfRefresh => Message::CmdAdmConfRefresh(ConfRefresh::decode(&f)?),
            C::CmdAdmConfAdd => Message::CmdAdmConfAdd(ConfSpec::decode(&f)?),
            C::CmdAdmConfUpdate => Message::CmdAdmConfUpdate(ConfSpec::decode(&f)?),
            C::CmdAdmConfRemove => Message::CmdAdmConfRemove(coll()?),
            C::CmdAdmPreemptSite => {
                let t = f.tuple(Key::Data, "preempt 2-tuple", Some(2))?;
                Message::CmdAdmPreemptSite(PreemptSite {
                    collection: f.bytes(Key::CollectionName)?,
                    site: elem_bytes(Key::Data, "preempt 2-tuple", t, 0)?,
                    requeue: elem_bool(Key::Data, "preempt 2-tuple", t, 1)?,
                })
            }
            C::CmdUmReprocessSite => Message::CmdUmReprocessSite(ReprocessSite::decode(&f)?),
            C::CmdUmDeleteSite => Message::CmdUmDeleteSite(DeleteSite {
                collection: f.bytes(Key::CollectionName)?,
                site: f.bytes(Key::Data)?,
            }),
            C::CmdUmDeleteUris => Message::CmdUmDeleteUris(DeleteUris::decode(&f)?),
            C::CmdUmQuarantineSite => Message::CmdUmQuarantineSite(Quarantine::decode(&f)?),
            C::CmdUmQuarantineSiteRequeue => {
                Message::CmdUmQuarantineSiteRequeue(Quarantine::decode(&f)?)
            }
            C::CmdUmDnsReply => Message::CmdUmDnsReply(DnsReply::decode(&f)?),
            // 2.2.3.21 carries the state in PKT_DATA; the 2.2.4.13 request has no PKT_DATA.
            C::CmdUmConfState => match f.get(Key::Data) {
                Some(_) => Message::CmdUmConfState(ConfState {
                    collection: f.bytes(Key::CollectionName)?,
                    state: f.int(Key::Data)?,
                }),
                None => Message::CmdUmConfStateRequest(coll()?),
            },
            // 2.2.4.11 request (3 elements) or 2.2.3.22 reply (4 elements).
            C::CmdUmStartCrawlIp => {
                const S: &str = "start crawl IP tuple";
                let t = f.tuple(Key::Data, S, None)?;
                let (collection, ip, site, store_id) = (
                    f.bytes(Key::CollectionName)?,
                    elem_bytes(Key::Data, S, t, 0)?,
                    elem_bytes(Key::Data, S, t, 1)?,
                    elem_int(Key::Data, S, t, 2)?,
                );
                match t.len() {
                    3 => Message::CmdUmStartCrawlIp(StartCrawlIp {
                        collection,
                        ip,
                        site,
                        store_id,
                    }),
                    4 => Message::CmdUmStartCrawlIpReply(StartCrawlIpReply {
                        collection,
                        ip,
                        site,
                        store_id,
                        allowed: elem_bool(Key::Data, S, t, 3)?,
                    }),
                    n => {
                        return Err(MessageError::BadLength {
                            key: Key::Data,
                            structure: "start crawl IP 3-tuple (request) or 4-tuple (reply)",
                            expected: 3,
                            found: n,
                        })
                    }
                }
            }
            C::CmdUmStopCrawlIp => {
                let t = f.tuple(Key::Data, "stop crawl IP 2-tuple", Some(2))?;
                Message::CmdUmStopCrawlIp(StopCrawlIp {
                    collection: f.bytes(Key::CollectionName)?,
                    ip: elem_bytes(Key::Data, "stop crawl IP 2-tuple", t, 0)?,
                    site: elem_bytes(Key::Data, "stop crawl IP 2-tuple", t, 1)?,
                })
            }
            C::CmdUmInit => {
                let t = f.tuple(Key::XmlRpcPort, "(host, port) 2-tuple", Some(2))?;
                Message::CmdUmInit(Init {
                    node_id: f.bytes(Key::NodeId)?,
                    xmlrpc_host: elem_bytes(Key::XmlRpcPort, "(host, port) 2-tuple", t, 0)?,
                    xmlrpc_port: elem_int(Key::XmlRpcPort, "(host, port) 2-tuple", t, 1)?,
                })
            }
            C::CmdUmDnsRequest => Message::CmdUmDnsRequest(DnsRequest {
                collection: f.bytes(Key::CollectionName)?,
                host: f.bytes(Key::Site)?,
            }),
            C::CmdUmStat => Message::CmdUmStat(Stat {
                collection: f.bytes(Key::CollectionName)?,
                stats: f.req(Key::Data)?.clone(),
            }),
            C::CmdUmLog => {
                let t = f.tuple(Key::Data, "log 2-tuple", Some(2))?;
                Message::CmdUmLog(Log {
                    collection: f.bytes(Key::CollectionName)?,
                    logfile: elem_bytes(Key::Data, "log 2-tuple", t, 0)?,
                    message: elem_bytes(Key::Data, "log 2-tuple", t, 1)?,
                })
            }
            C::CmdUmLastRoute => Message::CmdUmLastRoute(coll()?),
            C::CmdUmDeleteOk => Message::CmdUmDeleteOk(coll()?),
            C::PpdupAddOk => Message::PpdupAddOk(PpdupAddOk {
                collection: f.bytes(Key::CollectionName)?,
                node_id: f.bytes(Key::Id)?,
                uri: f.bytes(Key::Uri)?,
                owner_uri: f.opt_bytes(Key::OwnerUri)?,
                ppdup_id: f.opt_bytes(Key::PpdupId)?,
                dbname: f.opt_bytes(Key::DbName)?,
            }),
            C::PpdupError => Message::PpdupError(PpdupError {
                collection: f.bytes(Key::CollectionName)?,
                why: f.bytes(Key::Why)?,
            }),
            C::PpdupAdd => Message::PpdupAdd(PpdupChecksum::decode(&f)?),
            C::PpdupRemove => Message::PpdupRemove(PpdupChecksum::decode(&f)?),
            C::PpdupRemoveOk => Message::PpdupRemoveOk(PpdupRemoveOk {
                collection: f.bytes(Key::CollectionName)?,
                uri: f.bytes(Key::Uri)?,
                node_id: f.opt_bytes(Key::Id)?,
                ppdup_id: f.opt_bytes(Key::PpdupId)?,
                dbname: f.opt_bytes(Key::DbName)?,
            }),
            C::PpdupPromoteReq => Message::PpdupPromoteReq(PpdupPromoteReq {
                collection: f.bytes(Key::CollectionName)?,
                checksum: checksum(&f)?,
            }),
            C::PpdupConfRemove => Message::PpdupConfRemove(PpdupConfRemove {
                collection: f.bytes(Key::CollectionName)?,
                ppdup_id: f.opt_bytes(Key::PpdupId)?,
            }),
            C::PpdupSetConfig => Message::PpdupSetConfig(PpdupSetConfig {
                config: dict_value(&f, Key::Data)?,
                vclock: f.int(Key::VectorClock)?,
                collection: f.opt_bytes(Key::CollectionName)?,
            }),
            C::PpdupConfigAck => Message::PpdupConfigAck(PpdupConfigAck {
                vclock: f.int(Key::VectorClock)?,
            }),
            C::PpdupConfRemove2 => Message::PpdupConfRemove2(coll()?),
        })
    }

    /// The message dict, keys in the canonical order, strings borrowed from `self`.
    pub fn to_dict(&self) -> Dict<'_> {
        self.sorted_pairs()
            .into_iter()
            .map(|(k, v)| (Value::bytes(k.wire().as_bytes()), v))
            .collect()
    }

    /// The pairs in the canonical key order, on the stack.
    fn sorted_pairs(&self) -> Pairs<'_> {
        let mut pairs = Pairs::new();
        pairs.push((Key::Cmd, Value::int(self.command() as i64)));
        self.data_pairs(&mut pairs);
        pairs.sort_unstable_by_key(|(k, _)| *k);
        pairs
    }

    /// Appends the marshal dict of the message to `out`, without building it first.
    pub fn encode_dict_into(&self, out: &mut Vec<u8>) {
        // The duplicate server's hot messages, written straight (same bytes).
        if super::flat::encode_dict(self, out) {
            return;
        }
        out.push(crate::marshal::tag::DICT);
        for (k, v) in self.sorted_pairs() {
            let key = k.wire().as_bytes();
            out.push(crate::marshal::tag::STRING);
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
            crate::marshal::encode_into(&v, out);
        }
        out.push(crate::marshal::tag::NULL);
    }

    /// A copy that owns its bytes, to send across threads or keep past the frame buffer.
    pub fn into_owned(&self) -> Message<'static> {
        let dict: Dict<'static> = self
            .to_dict()
            .into_iter()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        // A message always reads back from its own dict (tested for every variant).
        Message::from_dict(&dict).expect("a message re-reads its own dict")
    }

    /// Whether `role` receives this message, per the command tables of 2.2.3, 2.2.4 and 2.2.5.
    pub fn handled_by(&self, role: Role) -> bool {
        use Message as M;
        match role {
            Role::NodeScheduler => matches!(
                self,
                M::CmdUmKeepalive
                    | M::CmdUmKeepaliveAck
                    | M::CmdUmUri(_)
                    | M::CmdUmUriUrg(_)
                    | M::CmdAdmConfSuspend(_)
                    | M::CmdAdmConfResume(_)
                    | M::CmdAdmConfFeedingSuspend(_)
                    | M::CmdUmAddRoute(_)
                    | M::CmdUmAskRoute(_)
                    | M::CmdAdmConfRefresh(_)
                    | M::CmdAdmConfAdd(_)
                    | M::CmdAdmConfUpdate(_)
                    | M::CmdAdmConfRemove(_)
                    | M::CmdAdmPreemptSite(_)
                    | M::CmdUmReprocessSite(_)
                    | M::CmdUmDeleteSite(_)
                    | M::CmdUmDeleteUris(_)
                    | M::CmdUmQuarantineSite(_)
                    | M::CmdUmQuarantineSiteRequeue(_)
                    | M::CmdUmDnsReply(_)
                    | M::CmdUmConfState(_)
                    | M::CmdUmStartCrawlIpReply(_)
                    | M::PpdupAddOk(_)
                    | M::PpdupError(_)
                    | M::PpdupRemoveOk(_)
                    | M::PpdupKeepalive
                    | M::PpdupKeepaliveAck
                    | M::PpdupPromoteReq(_)
                    | M::PpdupConfigAck(_)
            ),
            Role::MultinodeScheduler => matches!(
                self,
                M::CmdUmInit(_)
                    | M::CmdUmKeepalive
                    | M::CmdUmKeepaliveAck
                    | M::CmdUmDnsRequest(_)
                    | M::CmdUmUri(_)
                    | M::CmdUmStat(_)
                    | M::CmdUmUriUrg(_)
                    | M::CmdUmLog(_)
                    | M::CmdUmAddRoutes(_)
                    | M::CmdUmLastRoute(_)
                    | M::CmdUmStartCrawlIp(_)
                    | M::CmdUmStopCrawlIp(_)
                    | M::CmdUmConfStateRequest(_)
                    | M::CmdUmDeleteOk(_)
            ),
            Role::DuplicateServer => matches!(
                self,
                M::PpdupAddOk(_)
                    | M::PpdupError(_)
                    | M::PpdupAdd(_)
                    | M::PpdupRemove(_)
                    | M::PpdupRemoveOk(_)
                    | M::PpdupKeepalive
                    | M::PpdupKeepaliveAck
                    | M::PpdupPromoteReq(_)
                    | M::PpdupConfRemove(_)
                    | M::PpdupSetConfig(_)
                    | M::PpdupConfigAck(_)
                    | M::PpdupConfRemove2(_)
            ),
        }
    }
}

fn dict_value<'a>(f: &Fields<'_, 'a>, key: Key) -> Result<Value<'a>, MessageError> {
    match f.req(key)? {
        v @ Value::Dict(_) => Ok(v.clone()),
        other => Err(MessageError::WrongType {
            key,
            expected: "dict",
            found: other.type_name(),
        }),
    }
}

impl<'a> CollectionOnly<'a> {
    fn decode(f: &Fields<'_, 'a>) -> Result<Self, MessageError> {
        Ok(CollectionOnly {
            collection: f.bytes(Key::CollectionName)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
    }
}

impl<'a> UriMsg<'a> {
    fn decode(f: &Fields<'_, 'a>) -> Result<Self, MessageError> {
        Ok(UriMsg {
            collection: f.bytes(Key::CollectionName)?,
            entry: CrawlQueueEntry::from_value(Key::Data, f.req(Key::Data)?)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Data, self.entry.to_value()));
    }
}

impl ConfSuspend<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Data, Value::int(self.state)));
    }
}

impl<'a> FeedingSuspend<'a> {
    fn decode(f: &Fields<'_, 'a>) -> Result<Self, MessageError> {
        const S: &str = "feeding suspend 2-tuple";
        let t = f.tuple(Key::Data, S, Some(2))?;
        let destinations = match &t[1] {
            Value::None => None,
            v => Some(string_list(Key::Data, "destination list", v)?),
        };
        Ok(FeedingSuspend {
            collection: f.bytes(Key::CollectionName)?,
            suspend: elem_bool(Key::Data, S, t, 0)?,
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

impl<'a> AddRoute<'a> {
    fn decode(f: &Fields<'_, 'a>) -> Result<Self, MessageError> {
        const S: &str = "add route 5-tuple";
        let t = f.tuple(Key::Data, S, Some(5))?;
        Ok(AddRoute {
            collection: f.bytes(Key::CollectionName)?,
            node_id: elem_bytes(Key::Data, S, t, 0)?,
            routing_attr: elem_bytes(Key::Data, S, t, 1)?,
            site: elem_bytes(Key::Data, S, t, 2)?,
            addrinfo: addrinfo_list_from(Key::Data, &t[3])?,
            ttl: elem_int(Key::Data, S, t, 4)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::Data,
            Value::Tuple(vec![
                bytes_v(&self.node_id),
                bytes_v(&self.routing_attr),
                bytes_v(&self.site),
                addrinfo_list_to(&self.addrinfo),
                Value::int(self.ttl),
            ]),
        ));
    }
}

impl<'a> RouteList<'a> {
    fn decode(f: &Fields<'_, 'a>) -> Result<Self, MessageError> {
        const S: &str = "(routing attribute, node id) 2-tuple";
        let list = items(Key::Data, "route list", f.req(Key::Data)?, None)?;
        if list.len() > Self::MAX_ROUTES {
            return Err(MessageError::BadLength {
                key: Key::Data,
                structure: "route list (at most 256 entries)",
                expected: Self::MAX_ROUTES,
                found: list.len(),
            });
        }
        let routes = list
            .iter()
            .map(|r| {
                let p = items(Key::Data, S, r, Some(2))?;
                Ok((
                    elem_bytes(Key::Data, S, p, 0)?,
                    elem_bytes(Key::Data, S, p, 1)?,
                ))
            })
            .collect::<Result<_, MessageError>>()?;
        Ok(RouteList {
            collection: f.bytes(Key::CollectionName)?,
            routes,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        let list = self
            .routes
            .iter()
            .map(|(a, n)| Value::Tuple(vec![bytes_v(a), bytes_v(n)]))
            .collect();
        out.push((Key::Data, Value::List(list)));
    }
}

impl<'a> ConfRefresh<'a> {
    fn decode(f: &Fields<'_, 'a>) -> Result<Self, MessageError> {
        const S: &str = "refresh 2-tuple";
        let t = f.tuple(Key::Data, S, Some(2))?;
        Ok(ConfRefresh {
            collection: f.bytes(Key::CollectionName)?,
            subcollection: elem_opt_bytes(Key::Data, S, t, 0)?,
            options: elem_int(Key::Data, S, t, 1)?,
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

impl<'a> ConfSpec<'a> {
    fn decode(f: &Fields<'_, 'a>) -> Result<Self, MessageError> {
        Ok(ConfSpec {
            collection: f.bytes(Key::CollectionName)?,
            config: dict_value(f, Key::CollectionSpec)?,
            epoch: f.opt_int(Key::Epoch)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::CollectionSpec, borrow_value(&self.config)));
        if let Some(e) = self.epoch {
            out.push((Key::Epoch, Value::int(e)));
        }
    }
}

impl PreemptSite<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::Data,
            Value::Tuple(vec![bytes_v(&self.site), Value::int(self.requeue.into())]),
        ));
    }
}

impl<'a> ReprocessSite<'a> {
    fn decode(f: &Fields<'_, 'a>) -> Result<Self, MessageError> {
        const S: &str = "reprocess 4-tuple";
        let t = f.tuple(Key::Data, S, Some(4))?;
        Ok(ReprocessSite {
            collection: f.bytes(Key::CollectionName)?,
            site: elem_bytes(Key::Data, S, t, 0)?,
            prefix: elem_bytes(Key::Data, S, t, 1)?,
            destination: elem_opt_bytes(Key::Data, S, t, 2)?,
            exact: elem_bool(Key::Data, S, t, 3)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::Data,
            Value::Tuple(vec![
                bytes_v(&self.site),
                bytes_v(&self.prefix),
                opt_bytes_value(&self.destination),
                Value::int(self.exact.into()),
            ]),
        ));
    }
}

impl DeleteSite<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Data, bytes_v(&self.site)));
    }
}

impl<'a> DeleteUris<'a> {
    fn decode(f: &Fields<'_, 'a>) -> Result<Self, MessageError> {
        const S: &str = "delete URIs 2-tuple";
        let t = f.tuple(Key::Data, S, Some(2))?;
        let (Value::Dict(by_site), Value::Dict(info)) = (&t[0], &t[1]) else {
            return Err(MessageError::BadElement {
                key: Key::Data,
                structure: S,
                index: if matches!(t[0], Value::Dict(_)) { 1 } else { 0 },
                expected: "a dict",
            });
        };
        let uris = by_site
            .iter()
            .map(|(site, list)| {
                let site = match site {
                    Value::Bytes(b, _) => b.clone(),
                    _ => {
                        return Err(MessageError::BadElement {
                            key: Key::Data,
                            structure: S,
                            index: 0,
                            expected: "a dict keyed by site strings",
                        })
                    }
                };
                Ok((site, string_list(Key::Data, "URI list", list)?))
            })
            .collect::<Result<_, MessageError>>()?;
        Ok(DeleteUris {
            collection: f.bytes(Key::CollectionName)?,
            uris,
            info: info.clone(),
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        let by_site = self
            .uris
            .iter()
            .map(|(site, list)| (bytes_v(site), string_list_value(list)))
            .collect();
        let info = self
            .info
            .iter()
            .map(|(k, v)| (borrow_value(k), borrow_value(v)))
            .collect();
        out.push((
            Key::Data,
            Value::Tuple(vec![Value::Dict(by_site), Value::Dict(info)]),
        ));
    }
}

impl<'a> Quarantine<'a> {
    fn decode(f: &Fields<'_, 'a>) -> Result<Self, MessageError> {
        const S: &str = "quarantine 2-tuple";
        let t = f.tuple(Key::Data, S, Some(2))?;
        Ok(Quarantine {
            collection: f.bytes(Key::CollectionName)?,
            site: elem_bytes(Key::Data, S, t, 0)?,
            seconds: elem_int(Key::Data, S, t, 1)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::Data,
            Value::Tuple(vec![bytes_v(&self.site), Value::int(self.seconds)]),
        ));
    }
}

impl<'a> DnsReply<'a> {
    fn decode(f: &Fields<'_, 'a>) -> Result<Self, MessageError> {
        const S: &str = "DNS reply (host, (addrinfo, time, ttl))";
        let t = f.tuple(Key::Data, S, Some(2))?;
        let r = items(Key::Data, S, &t[1], Some(3))?;
        Ok(DnsReply {
            collection: f.bytes(Key::CollectionName)?,
            host: elem_bytes(Key::Data, S, t, 0)?,
            addrinfo: addrinfo_list_from(Key::Data, &r[0])?,
            resolved_at: elem_int(Key::Data, S, r, 1)?,
            ttl: elem_int(Key::Data, S, r, 2)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::Data,
            Value::Tuple(vec![
                bytes_v(&self.host),
                Value::Tuple(vec![
                    addrinfo_list_to(&self.addrinfo),
                    Value::int(self.resolved_at),
                    Value::int(self.ttl),
                ]),
            ]),
        ));
    }
}

impl ConfState<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Data, Value::int(self.state)));
    }
}

impl StartCrawlIp<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::Data,
            Value::Tuple(vec![
                bytes_v(&self.ip),
                bytes_v(&self.site),
                Value::int(self.store_id),
            ]),
        ));
    }
}

impl StartCrawlIpReply<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::Data,
            Value::Tuple(vec![
                bytes_v(&self.ip),
                bytes_v(&self.site),
                Value::int(self.store_id),
                Value::int(self.allowed.into()),
            ]),
        ));
    }
}

impl StopCrawlIp<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::Data,
            Value::Tuple(vec![bytes_v(&self.ip), bytes_v(&self.site)]),
        ));
    }
}

impl Init<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::NodeId, bytes_v(&self.node_id)));
        out.push((
            Key::XmlRpcPort,
            Value::Tuple(vec![
                bytes_v(&self.xmlrpc_host),
                Value::int(self.xmlrpc_port),
            ]),
        ));
    }
}

impl DnsRequest<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Site, bytes_v(&self.host)));
    }
}

impl Stat<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Data, borrow_value(&self.stats)));
    }
}

impl Log<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::Data,
            Value::Tuple(vec![bytes_v(&self.logfile), bytes_v(&self.message)]),
        ));
    }
}

impl<'a> PpdupChecksum<'a> {
    fn decode(f: &Fields<'_, 'a>) -> Result<Self, MessageError> {
        Ok(PpdupChecksum {
            collection: f.bytes(Key::CollectionName)?,
            node_id: f.bytes(Key::Id)?,
            uri: f.bytes(Key::Uri)?,
            checksum: checksum(f)?,
            ppdup_id: f.opt_bytes(Key::PpdupId)?,
            dbname: f.opt_bytes(Key::DbName)?,
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

impl PpdupAddOk<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Id, bytes_v(&self.node_id)));
        out.push((Key::Uri, bytes_v(&self.uri)));
        push_opt(out, Key::OwnerUri, &self.owner_uri);
        push_opt(out, Key::PpdupId, &self.ppdup_id);
        push_opt(out, Key::DbName, &self.dbname);
    }
}

impl PpdupRemoveOk<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Uri, bytes_v(&self.uri)));
        push_opt(out, Key::Id, &self.node_id);
        push_opt(out, Key::PpdupId, &self.ppdup_id);
        push_opt(out, Key::DbName, &self.dbname);
    }
}

impl PpdupError<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Why, bytes_v(&self.why)));
    }
}

impl PpdupPromoteReq<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Checksum, Value::bytes(&self.checksum.0)));
    }
}

impl PpdupConfRemove<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        push_opt(out, Key::PpdupId, &self.ppdup_id);
    }
}

impl PpdupSetConfig<'_> {
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::Data, borrow_value(&self.config)));
        out.push((Key::VectorClock, Value::int(self.vclock)));
        push_opt(out, Key::CollectionName, &self.collection);
    }
}
