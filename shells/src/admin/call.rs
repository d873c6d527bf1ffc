//! The 34 methods of MS-FSCADM 2.2.8, 2.2.9 and 2.2.10 as one typed call, [`AdminCall`], read
//! once from an XML-RPC method name and parameters. Every argument MUST be given with its type
//! (2.2.8-2.2.10); a call that breaks that is a [`CallError`], answered with a fault (2.2.7)
//! whose text names the method, the argument and what was wrong.

use std::fmt;

use crawlfleet_core::xmlrpc::Value;

/// The argument types of FSCADM methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// `int` (Python's `True`/`False` are accepted as 1/0).
    Int,
    /// `string` (and `hostport`, `contentdest`).
    Str,
    /// `array` of strings.
    Strings,
}

impl Ty {
    fn article(self) -> &'static str {
        match self {
            Ty::Int => "an int",
            Ty::Str => "a string",
            Ty::Strings => "an array of strings",
        }
    }
}

/// Every method of FSCADM 2.2.8, 2.2.9 and 2.2.10 and its parameters.
pub const METHODS: [(&str, &[Ty]); 34] = {
    use Ty::{Int as I, Str as S, Strings as A};
    [
        // 2.2.8 Web crawler management.
        ("GetLogLevel", &[]),
        ("GetNodeSchedulerXmlRpcPorts", &[]),
        ("GetSiteManagerNum", &[]),
        ("IsDistributed", &[]),
        ("IsMultiNodeScheduler", &[]),
        ("SetLogLevel", &[I]),
        // 2.2.9 Crawl collection management.
        ("AddURIs", &[S, I, A]),
        ("AddURIFile", &[S, I, S]),
        ("CollectionAdd", &[S, I]),
        ("CollectionDelete", &[S, I]),
        ("CollectionDeleteSite", &[S, S]),
        ("CollectionDeleteURIs", &[S, A]),
        ("CollectionDeleteURIFile", &[S, S]),
        ("CollectionGetConfigurationXML", &[S]),
        ("CollectionGetList", &[]),
        ("CollectionGetSiteRoutingAddress", &[S, S]),
        ("CollectionPreemptSite", &[S, S]),
        ("CollectionQuarantineSite", &[S, S, I]),
        ("CollectionRefetch", &[S, S]),
        ("CollectionRefetchURI", &[S, S, I, I, I]),
        ("CollectionReprocessSite", &[S, S, S]),
        ("CollectionReprocessSitePrefix", &[S, S, S, S]),
        ("CollectionReprocessURI", &[S, S, A]),
        ("CollectionResume", &[S]),
        ("CollectionResumeFeeding", &[S, S]),
        ("CollectionSuspend", &[S]),
        ("CollectionSuspendFeeding", &[S, S]),
        // 2.2.10 Crawl collection status.
        ("CollectionDisableRefreshOnly", &[S]),
        ("CollectionEnableRefreshOnly", &[S]),
        ("CollectionGetStatus", &[S]),
        ("CollectionGetSiteStatistics", &[S, S]),
        ("CollectionGetStatistics", &[S]),
        ("CollectionGetStatistics2", &[S]),
        ("GetGlobalStatistics", &[]),
    ]
};

/// The parameter types of `method`, None when FSCADM has no such method.
pub fn signature(method: &str) -> Option<&'static [Ty]> {
    METHODS.iter().find(|(m, _)| *m == method).map(|(_, s)| *s)
}

/// One FSCADM method call with its arguments, in the spec's order and names. Ints that MUST be
/// 0 or 1 are kept as given: the method checks them and faults with its own text.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)] // Each field is the spec's parameter of the same name.
pub enum AdminCall {
    /// 2.2.8.1
    GetLogLevel,
    /// 2.2.8.2
    GetNodeSchedulerXmlRpcPorts,
    /// 2.2.8.3
    GetSiteManagerNum,
    /// 2.2.8.4
    IsDistributed,
    /// 2.2.8.5
    IsMultiNodeScheduler,
    /// 2.2.8.6
    SetLogLevel { level: i64 },
    /// 2.2.9.1
    AddUris {
        collection: String,
        urgent: i64,
        uris: Vec<String>,
    },
    /// 2.2.9.2
    AddUriFile {
        collection: String,
        urgent: i64,
        file: String,
    },
    /// 2.2.9.3
    CollectionAdd { config_data: String, force: i64 },
    /// 2.2.9.4
    CollectionDelete { collection: String, force: i64 },
    /// 2.2.9.5
    CollectionDeleteSite { collection: String, site: String },
    /// 2.2.9.6
    CollectionDeleteUris {
        collection: String,
        uris: Vec<String>,
    },
    /// 2.2.9.7
    CollectionDeleteUriFile { collection: String, file: String },
    /// 2.2.9.8
    CollectionGetConfigurationXml { collection: String },
    /// 2.2.9.9
    CollectionGetList,
    /// 2.2.9.10
    CollectionGetSiteRoutingAddress { collection: String, site: String },
    /// 2.2.9.11
    CollectionPreemptSite { collection: String, site: String },
    /// 2.2.9.12
    CollectionQuarantineSite {
        collection: String,
        site: String,
        time: i64,
    },
    /// 2.2.9.13
    CollectionRefetch {
        collection: String,
        subcollection: String,
    },
    /// 2.2.9.14
    CollectionRefetchUri {
        collection: String,
        uri: String,
        refeed: i64,
        site: i64,
        immediately: i64,
    },
    /// 2.2.9.15
    CollectionReprocessSite {
        collection: String,
        destination: String,
        site: String,
    },
    /// 2.2.9.16
    CollectionReprocessSitePrefix {
        collection: String,
        site: String,
        prefix: String,
        destination: String,
    },
    /// 2.2.9.17
    CollectionReprocessUri {
        collection: String,
        destination: String,
        uris: Vec<String>,
    },
    /// 2.2.9.18
    CollectionResume { collection: String },
    /// 2.2.9.19
    CollectionResumeFeeding {
        collection: String,
        destination: String,
    },
    /// 2.2.9.20
    CollectionSuspend { collection: String },
    /// 2.2.9.21
    CollectionSuspendFeeding {
        collection: String,
        destination: String,
    },
    /// 2.2.10.1
    CollectionDisableRefreshOnly { collection: String },
    /// 2.2.10.2
    CollectionEnableRefreshOnly { collection: String },
    /// 2.2.10.3
    CollectionGetStatus { collection: String },
    /// 2.2.10.4
    CollectionGetSiteStatistics { collection: String, site: String },
    /// 2.2.10.5
    CollectionGetStatistics { collection: String },
    /// 2.2.10.6
    CollectionGetStatistics2 { collection: String },
    /// 2.2.10.7
    GetGlobalStatistics,
}

/// Why a method call could not be read (2.2.7: answered with a fault of this text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallError {
    /// FSCADM has no method of this name.
    UnknownMethod(String),
    /// The wrong number of arguments.
    Arity {
        /// The method.
        method: &'static str,
        /// Its parameter count.
        want: usize,
        /// The arguments given.
        got: usize,
    },
    /// An argument of the wrong type.
    Type {
        /// The method.
        method: &'static str,
        /// The argument's position, from 1.
        position: usize,
        /// The parameter's type.
        want: Ty,
        /// The XML-RPC type given.
        got: &'static str,
    },
    /// An argument of the right type whose text is not what its FSCADM type allows (a
    /// hostport, 2.2.2.2, or a contentdest, 2.2.2.3).
    Malformed {
        /// The method.
        method: &'static str,
        /// The argument's position, from 1.
        position: usize,
        /// The parameter's name in the spec, e.g. "Site".
        name: &'static str,
        /// What is wrong.
        why: String,
    },
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::UnknownMethod(m) => write!(f, "unknown method {m:?}"),
            CallError::Arity { method, want, got } => write!(
                f,
                "{method} takes {want} argument{}, {got} given",
                if *want == 1 { "" } else { "s" }
            ),
            CallError::Type {
                method,
                position,
                want,
                got,
            } => write!(
                f,
                "{method}: argument {position} must be {}, not {got}",
                want.article()
            ),
            CallError::Malformed {
                method,
                position,
                name,
                why,
            } => write!(f, "{method}: argument {position} ({name}) {why}"),
        }
    }
}

/// Why `site` is no hostport (MS-FSCADM 2.2.2.2: `<hostname>:<port>`, the hostname a host name,
/// an FQDN, an IPv4 address or an IPv6 address in brackets). The port may be left out (the
/// crawl site of a URI on its scheme's default port has none).
pub fn hostport_error(site: &str) -> Option<String> {
    let (host, port) = if let Some(rest) = site.strip_prefix('[') {
        let Some((h, after)) = rest.split_once(']') else {
            return Some(format!("{site:?} is no hostport: \"[\" without \"]\""));
        };
        if h.parse::<std::net::Ipv6Addr>().is_err() {
            return Some(format!("{site:?} is no hostport: {h:?} is no IPv6 address"));
        }
        match after {
            "" => return None,
            a => match a.strip_prefix(':') {
                Some(p) => ("", Some(p)),
                None => return Some(format!("{site:?} is no hostport: {a:?} after \"]\"")),
            },
        }
    } else {
        match site.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (site, None),
        }
    };
    if let Some(p) = port {
        if p.is_empty()
            || !p.bytes().all(|b| b.is_ascii_digit())
            || !(1..=65535).contains(&p.parse::<u32>().unwrap_or(0))
        {
            return Some(format!(
                "{site:?} is no hostport: port {p:?} is not 1-65535"
            ));
        }
    }
    if site.starts_with('[') {
        return None;
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if host.is_empty() || host.len() > 253 || !host.trim_end_matches('.').split('.').all(label_ok) {
        return Some(format!(
            "{site:?} is no hostport: {host:?} is no host name or address"
        ));
    }
    None
}

/// Why `dest` is no contentdest (MS-FSCADM 2.2.2.3: empty, a destination name of the
/// configuration, or "default:<content collection>").
pub fn contentdest_error(dest: &str) -> Option<String> {
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.len() <= 255
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
    };
    if dest.is_empty() {
        return None;
    }
    match dest.strip_prefix("default:") {
        Some(c) if name_ok(c.trim_start()) => None,
        Some(c) => Some(format!(
            "{dest:?} is no contentdest: {c:?} is no content collection name"
        )),
        None if name_ok(dest) => None,
        None => Some(format!(
            "{dest:?} is no contentdest: not a destination name or \"default:<content collection>\""
        )),
    }
}

impl std::error::Error for CallError {}

/// Reads a call's arguments in order, each checked against the type asked for.
struct Args<'a> {
    method: &'static str,
    params: &'a [Value],
    next: usize,
}

impl Args<'_> {
    fn take(&mut self, want: Ty) -> Result<&Value, CallError> {
        let position = self.next + 1;
        let v = self.params.get(self.next).ok_or(CallError::Arity {
            method: self.method,
            want: position,
            got: self.params.len(),
        })?;
        self.next += 1;
        let ok = match want {
            Ty::Int => v.as_i64().is_some(),
            Ty::Str => v.as_str().is_some(),
            Ty::Strings => v
                .as_array()
                .is_some_and(|a| a.iter().all(|s| s.as_str().is_some())),
        };
        if !ok {
            return Err(CallError::Type {
                method: self.method,
                position,
                want,
                got: v.type_name(),
            });
        }
        Ok(v)
    }

    fn int(&mut self) -> Result<i64, CallError> {
        Ok(self.take(Ty::Int)?.as_i64().unwrap_or_default())
    }

    fn str(&mut self) -> Result<String, CallError> {
        Ok(self.take(Ty::Str)?.as_str().unwrap_or_default().to_string())
    }

    /// A string argument checked by `check` (None when it is well formed).
    fn checked(
        &mut self,
        name: &'static str,
        check: fn(&str) -> Option<String>,
    ) -> Result<String, CallError> {
        let position = self.next + 1;
        let v = self.str()?;
        match check(&v) {
            None => Ok(v),
            Some(why) => Err(CallError::Malformed {
                method: self.method,
                position,
                name,
                why,
            }),
        }
    }

    /// A hostport argument (2.2.2.2).
    fn site(&mut self) -> Result<String, CallError> {
        self.checked("Site", hostport_error)
    }

    /// A contentdest argument (2.2.2.3).
    fn destination(&mut self) -> Result<String, CallError> {
        self.checked("Destination", contentdest_error)
    }

    fn strings(&mut self) -> Result<Vec<String>, CallError> {
        let a = self.take(Ty::Strings)?.as_array().unwrap_or_default();
        Ok(a.iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect())
    }
}

impl AdminCall {
    /// Reads a call: the method by its FSCADM name, then its arguments, count first, then each
    /// one's type in order.
    pub fn parse(method: &str, params: &[Value]) -> Result<AdminCall, CallError> {
        let Some(&(name, sig)) = METHODS.iter().find(|(m, _)| *m == method) else {
            return Err(CallError::UnknownMethod(method.to_string()));
        };
        if params.len() != sig.len() {
            return Err(CallError::Arity {
                method: name,
                want: sig.len(),
                got: params.len(),
            });
        }
        let mut a = Args {
            method: name,
            params,
            next: 0,
        };
        use AdminCall::*;
        Ok(match name {
            "GetLogLevel" => GetLogLevel,
            "GetNodeSchedulerXmlRpcPorts" => GetNodeSchedulerXmlRpcPorts,
            "GetSiteManagerNum" => GetSiteManagerNum,
            "IsDistributed" => IsDistributed,
            "IsMultiNodeScheduler" => IsMultiNodeScheduler,
            "SetLogLevel" => SetLogLevel { level: a.int()? },
            "AddURIs" => AddUris {
                collection: a.str()?,
                urgent: a.int()?,
                uris: a.strings()?,
            },
            "AddURIFile" => AddUriFile {
                collection: a.str()?,
                urgent: a.int()?,
                file: a.str()?,
            },
            "CollectionAdd" => CollectionAdd {
                config_data: a.str()?,
                force: a.int()?,
            },
            "CollectionDelete" => CollectionDelete {
                collection: a.str()?,
                force: a.int()?,
            },
            "CollectionDeleteSite" => CollectionDeleteSite {
                collection: a.str()?,
                site: a.site()?,
            },
            "CollectionDeleteURIs" => CollectionDeleteUris {
                collection: a.str()?,
                uris: a.strings()?,
            },
            "CollectionDeleteURIFile" => CollectionDeleteUriFile {
                collection: a.str()?,
                file: a.str()?,
            },
            "CollectionGetConfigurationXML" => CollectionGetConfigurationXml {
                collection: a.str()?,
            },
            "CollectionGetList" => CollectionGetList,
            "CollectionGetSiteRoutingAddress" => CollectionGetSiteRoutingAddress {
                collection: a.str()?,
                site: a.site()?,
            },
            "CollectionPreemptSite" => CollectionPreemptSite {
                collection: a.str()?,
                site: a.site()?,
            },
            "CollectionQuarantineSite" => CollectionQuarantineSite {
                collection: a.str()?,
                site: a.site()?,
                time: a.int()?,
            },
            "CollectionRefetch" => CollectionRefetch {
                collection: a.str()?,
                subcollection: a.str()?,
            },
            "CollectionRefetchURI" => CollectionRefetchUri {
                collection: a.str()?,
                uri: a.str()?,
                refeed: a.int()?,
                site: a.int()?,
                immediately: a.int()?,
            },
            "CollectionReprocessSite" => CollectionReprocessSite {
                collection: a.str()?,
                destination: a.destination()?,
                site: a.site()?,
            },
            "CollectionReprocessSitePrefix" => CollectionReprocessSitePrefix {
                collection: a.str()?,
                site: a.site()?,
                prefix: a.str()?,
                destination: a.destination()?,
            },
            "CollectionReprocessURI" => CollectionReprocessUri {
                collection: a.str()?,
                destination: a.destination()?,
                uris: a.strings()?,
            },
            "CollectionResume" => CollectionResume {
                collection: a.str()?,
            },
            "CollectionResumeFeeding" => CollectionResumeFeeding {
                collection: a.str()?,
                destination: a.destination()?,
            },
            "CollectionSuspend" => CollectionSuspend {
                collection: a.str()?,
            },
            "CollectionSuspendFeeding" => CollectionSuspendFeeding {
                collection: a.str()?,
                destination: a.destination()?,
            },
            "CollectionDisableRefreshOnly" => CollectionDisableRefreshOnly {
                collection: a.str()?,
            },
            "CollectionEnableRefreshOnly" => CollectionEnableRefreshOnly {
                collection: a.str()?,
            },
            "CollectionGetStatus" => CollectionGetStatus {
                collection: a.str()?,
            },
            "CollectionGetSiteStatistics" => CollectionGetSiteStatistics {
                collection: a.str()?,
                site: a.site()?,
            },
            "CollectionGetStatistics" => CollectionGetStatistics {
                collection: a.str()?,
            },
            "CollectionGetStatistics2" => CollectionGetStatistics2 {
                collection: a.str()?,
            },
            "GetGlobalStatistics" => GetGlobalStatistics,
            // Every name of METHODS has its arm above (checked by a test).
            _ => return Err(CallError::UnknownMethod(method.to_string())),
        })
    }

    /// The method's FSCADM name.
    pub fn name(&self) -> &'static str {
        use AdminCall::*;
        match self {
            GetLogLevel => "GetLogLevel",
            GetNodeSchedulerXmlRpcPorts => "GetNodeSchedulerXmlRpcPorts",
            GetSiteManagerNum => "GetSiteManagerNum",
            IsDistributed => "IsDistributed",
            IsMultiNodeScheduler => "IsMultiNodeScheduler",
            SetLogLevel { .. } => "SetLogLevel",
            AddUris { .. } => "AddURIs",
            AddUriFile { .. } => "AddURIFile",
            CollectionAdd { .. } => "CollectionAdd",
            CollectionDelete { .. } => "CollectionDelete",
            CollectionDeleteSite { .. } => "CollectionDeleteSite",
            CollectionDeleteUris { .. } => "CollectionDeleteURIs",
            CollectionDeleteUriFile { .. } => "CollectionDeleteURIFile",
            CollectionGetConfigurationXml { .. } => "CollectionGetConfigurationXML",
            CollectionGetList => "CollectionGetList",
            CollectionGetSiteRoutingAddress { .. } => "CollectionGetSiteRoutingAddress",
            CollectionPreemptSite { .. } => "CollectionPreemptSite",
            CollectionQuarantineSite { .. } => "CollectionQuarantineSite",
            CollectionRefetch { .. } => "CollectionRefetch",
            CollectionRefetchUri { .. } => "CollectionRefetchURI",
            CollectionReprocessSite { .. } => "CollectionReprocessSite",
            CollectionReprocessSitePrefix { .. } => "CollectionReprocessSitePrefix",
            CollectionReprocessUri { .. } => "CollectionReprocessURI",
            CollectionResume { .. } => "CollectionResume",
            CollectionResumeFeeding { .. } => "CollectionResumeFeeding",
            CollectionSuspend { .. } => "CollectionSuspend",
            CollectionSuspendFeeding { .. } => "CollectionSuspendFeeding",
            CollectionDisableRefreshOnly { .. } => "CollectionDisableRefreshOnly",
            CollectionEnableRefreshOnly { .. } => "CollectionEnableRefreshOnly",
            CollectionGetStatus { .. } => "CollectionGetStatus",
            CollectionGetSiteStatistics { .. } => "CollectionGetSiteStatistics",
            CollectionGetStatistics { .. } => "CollectionGetStatistics",
            CollectionGetStatistics2 { .. } => "CollectionGetStatistics2",
            GetGlobalStatistics => "GetGlobalStatistics",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arguments of the right types for `sig`.
    fn args_for(sig: &[Ty]) -> Vec<Value> {
        sig.iter()
            .map(|t| match t {
                Ty::Int => Value::Int(1),
                Ty::Str => Value::String("s".into()),
                Ty::Strings => Value::Array(vec![Value::String("http://a/".into())]),
            })
            .collect()
    }

    #[test]
    fn every_method_parses_to_the_call_of_its_name() {
        for (name, sig) in METHODS {
            let call = AdminCall::parse(name, &args_for(sig)).unwrap();
            assert_eq!(call.name(), name);
        }
    }

    #[test]
    fn arguments_land_in_the_spec_order() {
        let s = |v: &str| Value::String(v.into());
        let call = AdminCall::parse(
            "CollectionReprocessSitePrefix",
            &[s("c"), s("a.com"), s("/x"), s("dest")],
        );
        assert_eq!(
            call,
            Ok(AdminCall::CollectionReprocessSitePrefix {
                collection: "c".into(),
                site: "a.com".into(),
                prefix: "/x".into(),
                destination: "dest".into(),
            })
        );
        // Python's True is an int of 1.
        let call = AdminCall::parse(
            "AddURIs",
            &[s("c"), Value::Bool(true), Value::Array(vec![])],
        );
        assert_eq!(
            call,
            Ok(AdminCall::AddUris {
                collection: "c".into(),
                urgent: 1,
                uris: vec![]
            })
        );
    }

    #[test]
    fn bad_calls_are_typed_errors_with_the_fault_texts() {
        let e = AdminCall::parse("NoSuchMethod", &[]).unwrap_err();
        assert_eq!(e, CallError::UnknownMethod("NoSuchMethod".into()));
        assert_eq!(e.to_string(), "unknown method \"NoSuchMethod\"");
        let e = AdminCall::parse("CollectionGetStatus", &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "CollectionGetStatus takes 1 argument, 0 given"
        );
        let e = AdminCall::parse("CollectionAdd", &[]).unwrap_err();
        assert_eq!(e.to_string(), "CollectionAdd takes 2 arguments, 0 given");
        let e = AdminCall::parse("CollectionGetStatus", &[Value::Int(7)]).unwrap_err();
        assert_eq!(
            e,
            CallError::Type {
                method: "CollectionGetStatus",
                position: 1,
                want: Ty::Str,
                got: "int"
            }
        );
        assert_eq!(
            e.to_string(),
            "CollectionGetStatus: argument 1 must be a string, not int"
        );
        let mixed = Value::Array(vec![Value::String("http://a/".into()), Value::Int(1)]);
        let e = AdminCall::parse("CollectionDeleteURIs", &["c".into(), mixed]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "CollectionDeleteURIs: argument 2 must be an array of strings, not array"
        );
    }
}
