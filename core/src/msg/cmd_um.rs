//! The CMD_UM_* commands between the node schedulers and the multinode scheduler: the URIs, the
//! routing of sites, name resolution, crawl-IP bookkeeping, statistics and logs (MS-FSCMT 2.2.3
//! to a node scheduler, 2.2.4 to the multinode scheduler). CMD_UM_KEEPALIVE and
//! CMD_UM_KEEPALIVE_ACK carry no data; CMD_UM_ASK_ROUTE, CMD_UM_LAST_ROUTE, CMD_UM_DELETE_OK and
//! the CMD_UM_CONF_STATE request only the collection name ([`super::CollectionOnly`]).
//!
//! Three commands have a shape per direction, told apart by PKT_DATA: CMD_UM_ADD_ROUTE
//! ([`AddRoute`] / [`RouteList`]), CMD_UM_START_CRAWL_IP ([`StartCrawlIp`] /
//! [`StartCrawlIpReply`]) and CMD_UM_CONF_STATE ([`ConfState`] / the request). Each node-bound
//! shape has an `is_shape` test that the message table asks first.

use super::codec::{bytes_v, Codec, Pairs};
use super::reader::{items, string_list, string_list_value, Bytes, Reader, Tuple};
use super::types::{addrinfo_list_from, addrinfo_list_to, borrow_value, AddrInfo, CrawlQueueEntry};
use super::{Key, Message, MessageError};
use crate::marshal::{Dict, Value};

/// CMD_UM_URI / CMD_UM_URI_URG (MS-FSCMT 2.2.3.3, 2.2.3.4 to a node scheduler; 2.2.4.5, 2.2.4.7
/// to the multinode scheduler): a crawl queue entry to route or to crawl.
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

impl<'a> Codec<'a> for UriMsg<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(UriMsg {
            collection: r.bytes(Key::CollectionName)?,
            entry: CrawlQueueEntry::from_value(Key::Data, r.req(Key::Data)?)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Data, self.entry.to_value()));
    }
}

/// CMD_UM_ADD_ROUTE to a node scheduler (MS-FSCMT 2.2.3.8): a site routed to a node, with its
/// addresses.
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

impl AddRoute<'_> {
    /// Whether PKT_DATA has this shape (a 5-tuple starting with the node identifier) rather
    /// than the multinode-bound [`RouteList`]'s list of pairs.
    pub(crate) fn is_shape(r: &Reader<'_, '_>) -> bool {
        matches!(r.get(Key::Data), Some(Value::Tuple(t))
            if t.len() == 5 && matches!(t[0], Value::Bytes(..)))
    }
}

impl<'a> Codec<'a> for AddRoute<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        let t = r.tuple(Key::Data, "add route 5-tuple", Some(5))?;
        Ok(AddRoute {
            collection: r.bytes(Key::CollectionName)?,
            node_id: t.bytes(0)?,
            routing_attr: t.bytes(1)?,
            site: t.bytes(2)?,
            addrinfo: addrinfo_list_from(Key::Data, t.value(3)?)?,
            ttl: t.int(4)?,
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

/// CMD_UM_ADD_ROUTE to the multinode scheduler (MS-FSCMT 2.2.4.9): at most 256 (attribute,
/// node) pairs.
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

impl<'a> Codec<'a> for RouteList<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        const S: &str = "(routing attribute, node id) 2-tuple";
        let list = items(Key::Data, "route list", r.req(Key::Data)?, None)?;
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
            .map(|route| {
                let p = Tuple::of(Key::Data, S, route, Some(2))?;
                Ok((p.bytes(0)?, p.bytes(1)?))
            })
            .collect::<Result<_, MessageError>>()?;
        Ok(RouteList {
            collection: r.bytes(Key::CollectionName)?,
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

/// CMD_UM_REPROCESS_SITE (MS-FSCMT 2.2.3.15): submit a site's documents again.
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

impl<'a> Codec<'a> for ReprocessSite<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        let t = r.tuple(Key::Data, "reprocess 4-tuple", Some(4))?;
        Ok(ReprocessSite {
            collection: r.bytes(Key::CollectionName)?,
            site: t.bytes(0)?,
            prefix: t.bytes(1)?,
            destination: t.opt_bytes(2)?,
            exact: t.bool(3)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::Data,
            Value::Tuple(vec![
                bytes_v(&self.site),
                bytes_v(&self.prefix),
                super::reader::opt_bytes_value(&self.destination),
                Value::int(self.exact.into()),
            ]),
        ));
    }
}

/// CMD_UM_DELETE_SITE (MS-FSCMT 2.2.3.16): delete a site and its documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteSite<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA: the site.
    pub site: Bytes<'a>,
}

impl<'a> Codec<'a> for DeleteSite<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(DeleteSite {
            collection: r.bytes(Key::CollectionName)?,
            site: r.bytes(Key::Data)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Data, bytes_v(&self.site)));
    }
}

/// CMD_UM_DELETE_URIS (MS-FSCMT 2.2.3.17): delete URIs, grouped by their crawl site.
#[derive(Clone, Debug, PartialEq)]
pub struct DeleteUris<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: URIs keyed by their crawl site.
    pub uris: Vec<(Bytes<'a>, Vec<Bytes<'a>>)>,
    /// PKT_DATA[1]: the info dict (`{"errcode": "USR"}`), pairs in wire order.
    pub info: Dict<'a>,
}

impl<'a> Codec<'a> for DeleteUris<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        const S: &str = "delete URIs 2-tuple";
        let t = r.tuple(Key::Data, S, Some(2))?;
        let (Value::Dict(by_site), Value::Dict(info)) = (t.value(0)?, t.value(1)?) else {
            return Err(MessageError::BadElement {
                key: Key::Data,
                structure: S,
                index: if matches!(t.value(0)?, Value::Dict(_)) {
                    1
                } else {
                    0
                },
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
            collection: r.bytes(Key::CollectionName)?,
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

/// CMD_UM_QUARANTINE_SITE / CMD_UM_QUARANTINE_SITE_REQUEUE (MS-FSCMT 2.2.3.18, 2.2.3.19): stop
/// crawling a site for a while.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quarantine<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the site.
    pub site: Bytes<'a>,
    /// PKT_DATA[1]: seconds of quarantine.
    pub seconds: i64,
}

impl<'a> Codec<'a> for Quarantine<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        let t = r.tuple(Key::Data, "quarantine 2-tuple", Some(2))?;
        Ok(Quarantine {
            collection: r.bytes(Key::CollectionName)?,
            site: t.bytes(0)?,
            seconds: t.int(1)?,
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

/// CMD_UM_DNS_REPLY (MS-FSCMT 2.2.3.20): the answer to a CMD_UM_DNS_REQUEST.
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

impl<'a> Codec<'a> for DnsReply<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        const S: &str = "DNS reply (host, (addrinfo, time, ttl))";
        let t = r.tuple(Key::Data, S, Some(2))?;
        let answer = Tuple::of(Key::Data, S, t.value(1)?, Some(3))?;
        Ok(DnsReply {
            collection: r.bytes(Key::CollectionName)?,
            host: t.bytes(0)?,
            addrinfo: addrinfo_list_from(Key::Data, answer.value(0)?)?,
            resolved_at: answer.int(1)?,
            ttl: answer.int(2)?,
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

/// CMD_UM_CONF_STATE to a node scheduler (MS-FSCMT 2.2.3.21): a collection's new state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfState<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA: the new state ([`super::types::conf_state`]).
    pub state: i64,
}

impl ConfState<'_> {
    /// Whether PKT_DATA is there: the 2.2.4.13 request to the multinode scheduler has none.
    pub(crate) fn is_shape(r: &Reader<'_, '_>) -> bool {
        r.get(Key::Data).is_some()
    }
}

impl<'a> Codec<'a> for ConfState<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(ConfState {
            collection: r.bytes(Key::CollectionName)?,
            state: r.int(Key::Data)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Data, Value::int(self.state)));
    }
}

/// CMD_UM_START_CRAWL_IP request to the multinode scheduler (MS-FSCMT 2.2.4.11): may this node
/// start crawling an IP address (or site)?
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

/// The structure both directions of CMD_UM_START_CRAWL_IP are read as.
const START_CRAWL_IP: &str = "start crawl IP tuple";

/// PKT_DATA of CMD_UM_START_CRAWL_IP, as long as the reply is, or the error for `wanted`
/// elements (the request and the reply share their first three).
fn start_crawl_ip<'d, 'a>(
    r: &Reader<'d, 'a>,
    wanted: usize,
) -> Result<(Tuple<'d, 'a>, StartCrawlIp<'a>), MessageError> {
    let t = r.tuple(Key::Data, START_CRAWL_IP, None)?;
    let request = StartCrawlIp {
        collection: r.bytes(Key::CollectionName)?,
        ip: t.bytes(0)?,
        site: t.bytes(1)?,
        store_id: t.int(2)?,
    };
    if t.len() != wanted {
        return Err(MessageError::BadLength {
            key: Key::Data,
            structure: "start crawl IP 3-tuple (request) or 4-tuple (reply)",
            expected: wanted,
            found: t.len(),
        });
    }
    Ok((t, request))
}

impl<'a> Codec<'a> for StartCrawlIp<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        start_crawl_ip(r, 3).map(|(_, request)| request)
    }
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

/// CMD_UM_START_CRAWL_IP reply to a node scheduler (MS-FSCMT 2.2.3.22): whether it may.
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

impl StartCrawlIpReply<'_> {
    /// Whether PKT_DATA has the reply's four elements rather than the request's three.
    pub(crate) fn is_shape(r: &Reader<'_, '_>) -> bool {
        matches!(r.get(Key::Data), Some(Value::Tuple(t) | Value::List(t)) if t.len() == 4)
    }
}

impl<'a> Codec<'a> for StartCrawlIpReply<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        let (t, request) = start_crawl_ip(r, 4)?;
        Ok(StartCrawlIpReply {
            collection: request.collection,
            ip: request.ip,
            site: request.site,
            store_id: request.store_id,
            allowed: t.bool(3)?,
        })
    }
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

/// CMD_UM_STOP_CRAWL_IP (MS-FSCMT 2.2.4.12): the node has stopped crawling an IP (or site).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopCrawlIp<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the IP address (or site).
    pub ip: Bytes<'a>,
    /// PKT_DATA[1]: the site.
    pub site: Bytes<'a>,
}

impl<'a> Codec<'a> for StopCrawlIp<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        let t = r.tuple(Key::Data, "stop crawl IP 2-tuple", Some(2))?;
        Ok(StopCrawlIp {
            collection: r.bytes(Key::CollectionName)?,
            ip: t.bytes(0)?,
            site: t.bytes(1)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::Data,
            Value::Tuple(vec![bytes_v(&self.ip), bytes_v(&self.site)]),
        ));
    }
}

/// CMD_UM_INIT (MS-FSCMT 2.2.4.1): a node scheduler introduces itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Init<'a> {
    /// PKT_NODE_ID.
    pub node_id: Bytes<'a>,
    /// PKT_XMLRPCPRT[0]: the node scheduler's host name.
    pub xmlrpc_host: Bytes<'a>,
    /// PKT_XMLRPCPRT[1]: the port of its administrative interface.
    pub xmlrpc_port: i64,
}

impl<'a> Codec<'a> for Init<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        let t = r.tuple(Key::XmlRpcPort, "(host, port) 2-tuple", Some(2))?;
        Ok(Init {
            node_id: r.bytes(Key::NodeId)?,
            xmlrpc_host: t.bytes(0)?,
            xmlrpc_port: t.int(1)?,
        })
    }
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

/// CMD_UM_DNS_REQUEST (MS-FSCMT 2.2.4.4): resolve a host name for a node scheduler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsRequest<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_SITE: the host name to resolve.
    pub host: Bytes<'a>,
}

impl<'a> Codec<'a> for DnsRequest<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(DnsRequest {
            collection: r.bytes(Key::CollectionName)?,
            host: r.bytes(Key::Site)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Site, bytes_v(&self.host)));
    }
}

/// CMD_UM_STAT (MS-FSCMT 2.2.4.6): a node scheduler's statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct Stat<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA: the statistics structure (MS-FSCADM 2.2.5).
    pub stats: Value<'a>,
}

impl<'a> Codec<'a> for Stat<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        Ok(Stat {
            collection: r.bytes(Key::CollectionName)?,
            stats: r.req(Key::Data)?.clone(),
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((Key::Data, borrow_value(&self.stats)));
    }
}

/// CMD_UM_LOG (MS-FSCMT 2.2.4.8): a line for one of the multinode scheduler's logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log<'a> {
    /// PKT_DSPECNAME.
    pub collection: Bytes<'a>,
    /// PKT_DATA[0]: the log file: "si", "ur", "sc" or "dk".
    pub logfile: Bytes<'a>,
    /// PKT_DATA[1]: the message.
    pub message: Bytes<'a>,
}

impl<'a> Codec<'a> for Log<'a> {
    fn read(r: &Reader<'_, 'a>) -> Result<Self, MessageError> {
        let t = r.tuple(Key::Data, "log 2-tuple", Some(2))?;
        Ok(Log {
            collection: r.bytes(Key::CollectionName)?,
            logfile: t.bytes(0)?,
            message: t.bytes(1)?,
        })
    }
    fn encode<'s>(&'s self, out: &mut Pairs<'s>) {
        out.push((Key::CollectionName, bytes_v(&self.collection)));
        out.push((
            Key::Data,
            Value::Tuple(vec![bytes_v(&self.logfile), bytes_v(&self.message)]),
        ));
    }
}
