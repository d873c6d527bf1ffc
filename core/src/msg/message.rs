//! The [`Message`] enum and the one table that maps each PKT_CMD to its shape, its spec section
//! and the roles that receive it (MS-FSCMT 2.2.3 to a node scheduler, 2.2.4 to the multinode
//! scheduler, 2.2.5 to the duplicate server); reading, writing and role checks are generated
//! from that table and nowhere else.

use super::cmd_adm::{ConfRefresh, ConfSpec, ConfSuspend, FeedingSuspend, PreemptSite};
use super::cmd_um::{
    AddRoute, ConfState, DeleteSite, DeleteUris, DnsReply, DnsRequest, Init, Log, Quarantine,
    ReprocessSite, RouteList, StartCrawlIp, StartCrawlIpReply, Stat, StopCrawlIp, UriMsg,
};
use super::codec::{Codec, CollectionOnly, Pairs};
use super::ppdup::{
    PpdupAddOk, PpdupChecksum, PpdupConfRemove, PpdupConfigAck, PpdupError, PpdupPromoteReq,
    PpdupRemoveOk, PpdupSetConfig,
};
use super::reader::Reader;
use super::{Command, Key, MessageError, Role};
use crate::marshal::{Dict, Value};

/// The pattern of a table row's variant, binding its data (if any) to `$m`.
macro_rules! variant_pat {
    ($variant:ident, $m:ident) => {
        Message::$variant
    };
    ($variant:ident, $m:ident, $ty:ty) => {
        Message::$variant($m)
    };
}

/// Appends the pairs of a row's data `$m` (nothing for a message without data).
macro_rules! encode_data {
    ($m:ident, $out:ident) => {{}};
    ($m:ident, $out:ident, $ty:ty) => {
        <$ty as Codec<'_>>::encode($m, $out)
    };
}

/// Generates [`Message`] and its table-driven methods from one row per message shape:
///
/// `Variant(Shape) = PKT_CMD [if shape test], "spec section", [receiving roles];`
///
/// A command with a shape per direction has two rows, the guarded one first: its test looks at
/// the dict and picks the shape, the other row takes the rest.
macro_rules! messages {
    ($(
        $variant:ident $(($ty:ty))? = $cmd:ident $(if $shape:path)?, $spec:literal,
            [$($role:ident),+];
    )*) => {
        /// A typed FSCMT message: one variant per message shape of MS-FSCMT 2.2.3-2.2.5.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Message<'a> {
            $(
                #[doc = concat!("[`Command::", stringify!($cmd), "`], MS-FSCMT ", $spec, ".")]
                $variant $(($ty))?,
            )*
        }

        impl<'a> Message<'a> {
            /// Reads a typed message from a frame's message dict.
            pub fn from_dict(dict: &[(Value<'a>, Value<'a>)]) -> Result<Message<'a>, MessageError> {
                let r = Reader::new(dict);
                Ok(match super::command_of(dict)? {
                    $(
                        Command::$cmd $(if $shape(&r))? => Message::$variant
                            $((<$ty as Codec<'a>>::read(&r)?))?,
                    )*
                })
            }

            /// The PKT_CMD of the message.
            pub fn command(&self) -> Command {
                match self {
                    $(Message::$variant { .. } => Command::$cmd,)*
                }
            }

            /// The section of MS-FSCMT that specifies this message, e.g. `"2.2.5.3"` for
            /// PPDUP_ADD; two sections when both schedulers receive it.
            pub fn spec_section(&self) -> &'static str {
                match self {
                    $(Message::$variant { .. } => $spec,)*
                }
            }

            /// Whether `role` receives this message, per the command tables of 2.2.3, 2.2.4
            /// and 2.2.5.
            pub fn handled_by(&self, role: Role) -> bool {
                let roles: &[Role] = match self {
                    $(Message::$variant { .. } => &[$(Role::$role),+],)*
                };
                roles.contains(&role)
            }

            /// Appends the pairs of the message's data, PKT_CMD excepted.
            fn data_pairs<'s>(&'s self, out: &mut Pairs<'s>) {
                match self {
                    $(variant_pat!($variant, m $(, $ty)?) => encode_data!(m, out $(, $ty)?),)*
                }
            }
        }
    };
}

messages! {
    // Keepalives, both directions (2.2.3.1, 2.2.3.2, 2.2.4.2, 2.2.4.3, 2.2.5.6, 2.2.5.7).
    CmdUmKeepalive = CmdUmKeepalive, "2.2.3.1, 2.2.4.2", [NodeScheduler, MultinodeScheduler];
    CmdUmKeepaliveAck = CmdUmKeepaliveAck, "2.2.3.2, 2.2.4.3",
        [NodeScheduler, MultinodeScheduler];
    PpdupKeepalive = PpdupKeepalive, "2.2.5.6", [NodeScheduler, DuplicateServer];
    PpdupKeepaliveAck = PpdupKeepaliveAck, "2.2.5.7", [NodeScheduler, DuplicateServer];

    // CMD_UM_* (cmd_um.rs).
    CmdUmUri(UriMsg<'a>) = CmdUmUri, "2.2.3.3, 2.2.4.5", [NodeScheduler, MultinodeScheduler];
    CmdUmUriUrg(UriMsg<'a>) = CmdUmUriUrg, "2.2.3.4, 2.2.4.7",
        [NodeScheduler, MultinodeScheduler];
    CmdUmAddRoute(AddRoute<'a>) = CmdUmAddRoute if AddRoute::is_shape, "2.2.3.8",
        [NodeScheduler];
    CmdUmAddRoutes(RouteList<'a>) = CmdUmAddRoute, "2.2.4.9", [MultinodeScheduler];
    CmdUmAskRoute(CollectionOnly<'a>) = CmdUmAskRoute, "2.2.3.9", [NodeScheduler];
    CmdUmReprocessSite(ReprocessSite<'a>) = CmdUmReprocessSite, "2.2.3.15", [NodeScheduler];
    CmdUmDeleteSite(DeleteSite<'a>) = CmdUmDeleteSite, "2.2.3.16", [NodeScheduler];
    CmdUmDeleteUris(DeleteUris<'a>) = CmdUmDeleteUris, "2.2.3.17", [NodeScheduler];
    CmdUmQuarantineSite(Quarantine<'a>) = CmdUmQuarantineSite, "2.2.3.18", [NodeScheduler];
    CmdUmQuarantineSiteRequeue(Quarantine<'a>) = CmdUmQuarantineSiteRequeue, "2.2.3.19",
        [NodeScheduler];
    CmdUmDnsReply(DnsReply<'a>) = CmdUmDnsReply, "2.2.3.20", [NodeScheduler];
    CmdUmConfState(ConfState<'a>) = CmdUmConfState if ConfState::is_shape, "2.2.3.21",
        [NodeScheduler];
    CmdUmConfStateRequest(CollectionOnly<'a>) = CmdUmConfState, "2.2.4.13",
        [MultinodeScheduler];
    CmdUmStartCrawlIpReply(StartCrawlIpReply<'a>) = CmdUmStartCrawlIp
        if StartCrawlIpReply::is_shape, "2.2.3.22", [NodeScheduler];
    CmdUmStartCrawlIp(StartCrawlIp<'a>) = CmdUmStartCrawlIp, "2.2.4.11", [MultinodeScheduler];
    CmdUmInit(Init<'a>) = CmdUmInit, "2.2.4.1", [MultinodeScheduler];
    CmdUmDnsRequest(DnsRequest<'a>) = CmdUmDnsRequest, "2.2.4.4", [MultinodeScheduler];
    CmdUmStat(Stat<'a>) = CmdUmStat, "2.2.4.6", [MultinodeScheduler];
    CmdUmLog(Log<'a>) = CmdUmLog, "2.2.4.8", [MultinodeScheduler];
    CmdUmLastRoute(CollectionOnly<'a>) = CmdUmLastRoute, "2.2.4.10", [MultinodeScheduler];
    CmdUmStopCrawlIp(StopCrawlIp<'a>) = CmdUmStopCrawlIp, "2.2.4.12", [MultinodeScheduler];
    CmdUmDeleteOk(CollectionOnly<'a>) = CmdUmDeleteOk, "2.2.4.14", [MultinodeScheduler];

    // CMD_ADM_* (cmd_adm.rs).
    CmdAdmConfSuspend(ConfSuspend<'a>) = CmdAdmConfSuspend, "2.2.3.5", [NodeScheduler];
    CmdAdmConfResume(CollectionOnly<'a>) = CmdAdmConfResume, "2.2.3.6", [NodeScheduler];
    CmdAdmConfFeedingSuspend(FeedingSuspend<'a>) = CmdAdmConfFeedingSuspend, "2.2.3.7",
        [NodeScheduler];
    CmdAdmConfRefresh(ConfRefresh<'a>) = CmdAdmConfRefresh, "2.2.3.10", [NodeScheduler];
    CmdAdmConfAdd(ConfSpec<'a>) = CmdAdmConfAdd, "2.2.3.11", [NodeScheduler];
    CmdAdmConfUpdate(ConfSpec<'a>) = CmdAdmConfUpdate, "2.2.3.12", [NodeScheduler];
    CmdAdmConfRemove(CollectionOnly<'a>) = CmdAdmConfRemove, "2.2.3.13", [NodeScheduler];
    CmdAdmPreemptSite(PreemptSite<'a>) = CmdAdmPreemptSite, "2.2.3.14", [NodeScheduler];

    // PPDUP_* (ppdup.rs).
    PpdupAddOk(PpdupAddOk<'a>) = PpdupAddOk, "2.2.5.1", [NodeScheduler, DuplicateServer];
    PpdupError(PpdupError<'a>) = PpdupError, "2.2.5.2", [NodeScheduler, DuplicateServer];
    PpdupAdd(PpdupChecksum<'a>) = PpdupAdd, "2.2.5.3", [DuplicateServer];
    PpdupRemove(PpdupChecksum<'a>) = PpdupRemove, "2.2.5.4", [DuplicateServer];
    PpdupRemoveOk(PpdupRemoveOk<'a>) = PpdupRemoveOk, "2.2.5.5",
        [NodeScheduler, DuplicateServer];
    PpdupPromoteReq(PpdupPromoteReq<'a>) = PpdupPromoteReq, "2.2.5.8",
        [NodeScheduler, DuplicateServer];
    PpdupConfRemove(PpdupConfRemove<'a>) = PpdupConfRemove, "2.2.5.9", [DuplicateServer];
    PpdupSetConfig(PpdupSetConfig<'a>) = PpdupSetConfig, "2.2.5.10", [DuplicateServer];
    PpdupConfigAck(PpdupConfigAck) = PpdupConfigAck, "2.2.5.11",
        [NodeScheduler, DuplicateServer];
    PpdupConfRemove2(CollectionOnly<'a>) = PpdupConfRemove2, "2.2.5.12", [DuplicateServer];
}

impl<'a> Message<'a> {
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
}
