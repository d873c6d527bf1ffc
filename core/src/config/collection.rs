//! The typed view of one collection's parameter dict, with every default filled in.
//!
//! The dict is the one FSCMT 2.2.2.3 describes: what [`super::parse_xml`] builds from the XML and
//! what a node scheduler receives as PKT_DSPEC of CMD_ADM_CONF_ADD. Parameters crawlfleet does
//! not know are kept in the dict (they travel on to the nodes) and only logged here.

use log::debug;

use super::params::Params;
use super::parts::{host_of, login, subdomain, variable_delay, Login, SubDomain, VariableDelay};
use super::rules::{RuleSet, RuleTarget};
use super::{link_extraction_key, link_extraction_name, merge, ConfigError, LINK_EXTRACTION};
use crate::marshal::Value;

/// Every parameter name [`CollectionConfig::from_dict`] reads, dotted inside sections;
/// `docs/collection-config.md` documents each one (a test checks that it does).
pub const KNOWN_ATTRIBS: &[&str] = &[
    "start_uris",
    "start_uri_files",
    "include_domains",
    "exclude_domains",
    "include_uris",
    "exclude_uris",
    "exclude_exts",
    "exclude_headers",
    "max_ip_connections",
    "delay",
    "variable_delay",
    "refresh",
    "refresh_mode",
    "dbswitch",
    "max_doc_size",
    "limits.max_doc",
    "refresh_only",
    "limits.disk_free",
    "robots",
    "check_meta_robots",
    "obey_robots_delay",
    "sitemaps",
    "allowed_schemes",
    "allowed_types",
    "crawlmode.mode",
    "crawlmode.fwdlinks",
    "crawlmode.fwdredirects",
    "crawlmode.reset_level",
    "max_uri_recursion",
    "max_redirects",
    "link_extraction",
    "ppdup.dupservers",
    "ppdup.replicas",
    "linkstore.applications",
    "rup.robot_email",
    "rup.latency",
    "rup.enabled",
    "warc.enabled",
    "warc.dir",
    "warc.max_size",
    "warc.prefix",
    "max_sites",
    "max_pending",
    "max_inter_docs",
    "user_agent",
    "use_http_1_1",
    "fetch_timeout",
    "headers",
    "subdomains",
    "logins",
    "nodes",
];

/// The refresh modes, with the codes FSCADM 2.2.4.2 gives them in the statistics `dspec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RefreshMode {
    /// Keep the crawl queue; append the start URIs to it.
    Append,
    /// Keep the crawl queue; put the start URIs in front of it.
    Prepend,
    /// Drop the crawl queue; start again from the start URIs.
    Scratch,
    /// Keep crawling the current cycle's queue into the new cycle.
    Soft,
    /// Re-crawl by estimated change rate.
    Adaptive,
}

impl RefreshMode {
    const ALL: [RefreshMode; 5] = [
        RefreshMode::Append,
        RefreshMode::Prepend,
        RefreshMode::Scratch,
        RefreshMode::Soft,
        RefreshMode::Adaptive,
    ];

    /// The FSCADM 2.2.4.2 code: 1, 2, 4, 8 or 32.
    pub fn code(self) -> i64 {
        match self {
            RefreshMode::Append => 1,
            RefreshMode::Prepend => 2,
            RefreshMode::Scratch => 4,
            RefreshMode::Soft => 8,
            RefreshMode::Adaptive => 32,
        }
    }

    /// The name the XML writes: `append`, `prepend`, `scratch`, `soft`, `adaptive`.
    pub fn name(self) -> &'static str {
        match self {
            RefreshMode::Append => "append",
            RefreshMode::Prepend => "prepend",
            RefreshMode::Scratch => "scratch",
            RefreshMode::Soft => "soft",
            RefreshMode::Adaptive => "adaptive",
        }
    }

    /// The mode of an FSCADM 2.2.4.2 code.
    pub fn from_code(code: i64) -> Option<RefreshMode> {
        Self::ALL.into_iter().find(|m| m.code() == code)
    }

    /// The mode of a name, in any ASCII case.
    pub fn from_name(name: &str) -> Option<RefreshMode> {
        Self::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
    }
}

/// A Node (FSCMT 2.2.2.3.1 `"nodes"`): parameters that replace the collection's on one node
/// scheduler, named by its node id.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The node scheduler's id.
    pub name: String,
    /// The overriding parameters (a dict, merged over the collection's by
    /// [`CollectionConfig::for_node`]).
    pub overrides: Value<'static>,
}

/// The typed view the schedulers and the crawler use, built from a collection's dict (the same
/// dict a node scheduler receives as PKT_DSPEC of CMD_ADM_CONF_ADD), with every default filled
/// in. `docs/collection-config.md` gives each parameter's meaning and default.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectionConfig {
    /// The collection's name (the DomainSpecification's `name`).
    pub name: String,
    /// URIs the crawl starts from.
    pub start_uris: Vec<String>,
    /// Local files holding more start URIs, one per line.
    pub start_uri_files: Vec<String>,
    /// Host names allowed; empty allows every host.
    pub include_domains: RuleSet,
    /// Host names refused.
    pub exclude_domains: RuleSet,
    /// URIs allowed; empty allows every URI.
    pub include_uris: RuleSet,
    /// URIs refused.
    pub exclude_uris: RuleSet,
    /// File-name extensions never fetched, lower case with the dot (`.jpg`).
    pub exclude_exts: Vec<String>,
    /// Response header lines (`Name: value`) that make a document skipped (`hx`, MS-FSCADM
    /// 2.2.3.2).
    pub exclude_headers: RuleSet,
    /// Seconds between requests to one site.
    pub delay: f64,
    /// Periods with another delay or a suspended crawl.
    pub variable_delay: Vec<VariableDelay>,
    /// Minutes per refresh cycle.
    pub refresh: f64,
    /// What a refresh does with the crawl queue.
    pub refresh_mode: RefreshMode,
    /// Refresh cycles a stored document may go unseen before it is deleted (fed as a delete
    /// when the next cycle starts); 0 = never.
    pub dbswitch: u32,
    /// Largest document fetched, bytes; longer ones are truncated.
    pub max_doc_size: u64,
    /// Documents in the collection after which it only refreshes (FSCADM 2.2.3.6
    /// `Refreshing(limit=max_doc)`); `None` is no limit.
    pub max_doc: Option<u64>,
    /// Free disk space, percent, below which the collection only refreshes
    /// (`Refreshing(limit=disk_free)`); 0 is no limit.
    pub disk_free: u32,
    /// Only documents already in the crawl store are fetched (FSCADM 2.2.10.2,
    /// CollectionEnableRefreshOnly; `Refreshing(limit=user)`).
    pub refresh_only: bool,
    /// Obey robots.txt.
    pub robots: bool,
    /// Obey `<meta name="robots">` noindex / nofollow.
    pub check_meta_robots: bool,
    /// Use robots.txt `Crawl-delay` when it is longer than `delay`.
    pub obey_robots_delay: bool,
    /// Read the sites' sitemaps (robots.txt `Sitemap:` lines, else /sitemap.xml): queue their
    /// URLs, and in refresh cycles fetch a stored URI only when its `<lastmod>` is newer than
    /// its last fetch.
    pub sitemaps: bool,
    /// URI schemes fetched, lower case.
    pub allowed_schemes: Vec<String>,
    /// MIME types fetched, with `text/*` style wildcards.
    pub allowed_types: Vec<String>,
    /// Link depth from the start URIs; `None` = unlimited (crawl mode `FULL`).
    pub max_depth: Option<u32>,
    /// Follow links to other sites (crawl mode `fwdlinks`).
    pub forward_links: bool,
    /// Follow redirects to other sites (crawl mode `fwdredirects`).
    pub forward_redirects: bool,
    /// Count depth from 0 again on each new site (crawl mode `reset_level`).
    pub reset_level: bool,
    /// Times one path segment may repeat in a URI before it is taken for a loop; 0 = no check.
    pub max_uri_recursion: u32,
    /// Redirects followed for one URI.
    pub max_redirects: u32,
    /// Tags links are taken from: a bitmask of FSCMT 2.2.2.3.3 keys.
    pub link_extraction: u32,
    /// `host:port` of the duplicate servers (`ppdup` section), in order.
    pub ppdup_servers: Vec<String>,
    /// `host:port` of duplicate server replicas to fail over to.
    pub ppdup_replicas: Vec<String>,
    /// Sites crawled at once by one node scheduler.
    pub max_sites: u32,
    /// Concurrent requests to one site (`max_pending`).
    pub max_site_connections: u32,
    /// Concurrent requests to one IP address over all its sites (`max_ip_connections`); 0 = no
    /// limit beyond the per-site one.
    pub max_ip_connections: u32,
    /// Documents fetched from a site before another site gets its turn; `None` = no limit.
    pub max_inter_docs: Option<u32>,
    /// The User-Agent header.
    pub user_agent: String,
    /// Fetch with HTTP/1.1 (keep-alive); HTTP/1.0 otherwise.
    pub use_http_1_1: bool,
    /// Seconds before a fetch is abandoned.
    pub fetch_timeout: f64,
    /// Extra request headers, `Name: value`.
    pub headers: Vec<String>,
    /// SubDomains, in document order.
    pub subdomains: Vec<SubDomain>,
    /// Logins, in document order.
    pub logins: Vec<Login>,
    /// Per-node overrides, in document order.
    pub nodes: Vec<Node>,
    /// The node as a RUP robot (draft-cosmo; the `rup` section, docs/rup.md "The robot"):
    /// `None` when the section has no `robot_email` or says `enabled` no.
    pub rup: Option<RupRobot>,
}

/// The `rup` section: the node registers with the RUP server of each site of the collection
/// that publishes /rupinfo.txt (draft-cosmo 3.1.2) and re-fetches what its reports name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RupRobot {
    /// `rup.robot_email`: the address the reports are sent to (Register's RobotEmail).
    pub robot_email: String,
    /// `rup.latency`: the Latency asked for (`INTEGER-UNIT` or a bare unit); `None` takes the
    /// shortest unit the site offers.
    pub latency: Option<crate::rup::Span>,
}

/// `link_extraction` when the configuration does not say: every tag but `comment` (links in
/// comments are mostly dead).
const DEFAULT_LINK_EXTRACTION: u32 = {
    let mut mask = 0;
    let mut i = 0;
    while i < LINK_EXTRACTION.len() {
        mask |= LINK_EXTRACTION[i].1;
        i += 1;
    }
    mask & !0x10
};

impl CollectionConfig {
    /// The configuration of a collection whose dict is empty.
    pub fn defaults(name: &str) -> CollectionConfig {
        CollectionConfig {
            name: name.to_string(),
            start_uris: Vec::new(),
            start_uri_files: Vec::new(),
            include_domains: RuleSet::empty(RuleTarget::Domain),
            exclude_domains: RuleSet::empty(RuleTarget::Domain),
            include_uris: RuleSet::empty(RuleTarget::Uri),
            exclude_uris: RuleSet::empty(RuleTarget::Uri),
            exclude_exts: Vec::new(),
            exclude_headers: RuleSet::empty(RuleTarget::Header),
            delay: 60.0,
            variable_delay: Vec::new(),
            refresh: 1440.0,
            refresh_mode: RefreshMode::Scratch,
            dbswitch: 5,
            max_doc_size: 5 << 20,
            max_doc: None,
            disk_free: 0,
            refresh_only: false,
            robots: true,
            check_meta_robots: true,
            obey_robots_delay: false,
            sitemaps: false,
            allowed_schemes: vec!["http".into(), "https".into()],
            allowed_types: vec!["text/html".into(), "text/plain".into()],
            max_depth: None,
            forward_links: true,
            forward_redirects: false,
            reset_level: false,
            max_uri_recursion: 5,
            max_redirects: 10,
            link_extraction: DEFAULT_LINK_EXTRACTION,
            ppdup_servers: Vec::new(),
            ppdup_replicas: Vec::new(),
            max_sites: 128,
            max_site_connections: 2,
            max_ip_connections: 8,
            max_inter_docs: None,
            rup: None,
            user_agent: format!("crawlfleet/{}", env!("CARGO_PKG_VERSION")),
            use_http_1_1: true,
            fetch_timeout: 300.0,
            headers: Vec::new(),
            subdomains: Vec::new(),
            logins: Vec::new(),
            nodes: Vec::new(),
        }
    }

    /// Reads a collection's dict. A parameter of the wrong marshal type is
    /// [`ConfigError::WrongType`] naming it; a value that means nothing (an unknown refresh
    /// mode, a regexp that does not compile) [`ConfigError::BadSetting`]. Parameters not in
    /// [`KNOWN_ATTRIBS`] are logged at debug level and otherwise left alone.
    pub fn from_dict(name: &str, dict: &Value<'_>) -> Result<CollectionConfig, ConfigError> {
        let p = Params::of(dict, String::new())?;
        let mut c = CollectionConfig::defaults(name);
        for k in p.unknown_keys(&top_level_known()) {
            debug!("collection {name}: parameter {k:?} is not one crawlfleet reads");
        }
        let str_list = |key: &str, into: &mut Vec<String>| -> Result<(), ConfigError> {
            if let Some(v) = p.strings(key)? {
                *into = v;
            }
            Ok(())
        };
        str_list("start_uris", &mut c.start_uris)?;
        str_list("start_uri_files", &mut c.start_uri_files)?;
        str_list("headers", &mut c.headers)?;
        str_list("allowed_types", &mut c.allowed_types)?;
        str_list("allowed_schemes", &mut c.allowed_schemes)?;
        c.allowed_schemes
            .iter_mut()
            .for_each(|s| s.make_ascii_lowercase());
        c.allowed_types
            .iter_mut()
            .for_each(|s| s.make_ascii_lowercase());
        if let Some(exts) = p.strings("exclude_exts")? {
            c.exclude_exts = exts
                .into_iter()
                .map(|e| format!(".{}", e.trim_start_matches('.').to_ascii_lowercase()))
                .collect();
        }
        c.include_domains = p.rules("include_domains", RuleTarget::Domain)?;
        c.exclude_domains = p.rules("exclude_domains", RuleTarget::Domain)?;
        c.include_uris = p.rules("include_uris", RuleTarget::Uri)?;
        c.exclude_uris = p.rules("exclude_uris", RuleTarget::Uri)?;
        c.exclude_headers = p.rules("exclude_headers", RuleTarget::Header)?;
        set(&mut c.delay, p.real("delay")?);
        set(&mut c.refresh, p.real("refresh")?);
        set(&mut c.dbswitch, p.uint("dbswitch")?);
        set(&mut c.fetch_timeout, p.real("fetch_timeout")?);
        if let Some(v) = p.get("refresh_mode") {
            c.refresh_mode = refresh_mode(&p, v)?;
        }
        set(&mut c.max_doc_size, p.uint("max_doc_size")?);
        set(&mut c.robots, p.boolean("robots")?);
        set(&mut c.refresh_only, p.boolean("refresh_only")?);
        set(&mut c.check_meta_robots, p.boolean("check_meta_robots")?);
        set(&mut c.obey_robots_delay, p.boolean("obey_robots_delay")?);
        set(&mut c.sitemaps, p.boolean("sitemaps")?);
        set(&mut c.max_uri_recursion, p.uint("max_uri_recursion")?);
        set(&mut c.max_redirects, p.uint("max_redirects")?);
        set(&mut c.max_sites, p.uint("max_sites")?);
        set(&mut c.max_site_connections, p.uint("max_pending")?);
        set(&mut c.max_ip_connections, p.uint("max_ip_connections")?);
        if let Some(n) = p.uint::<u32>("max_inter_docs")? {
            c.max_inter_docs = (n > 0).then_some(n);
        }
        set(&mut c.user_agent, p.string("user_agent")?);
        set(&mut c.use_http_1_1, p.boolean("use_http_1_1")?);
        if let Some(l) = p.section("limits")? {
            if let Some(n) = l.uint::<u64>("max_doc")? {
                c.max_doc = (n > 0).then_some(n);
            }
            set(&mut c.disk_free, l.uint("disk_free")?);
        }
        if let Some(m) = p.section("crawlmode")? {
            if let Some(depth) = crawl_mode(&m)? {
                c.max_depth = depth;
            }
            set(&mut c.forward_links, m.boolean("fwdlinks")?);
            set(&mut c.forward_redirects, m.boolean("fwdredirects")?);
            set(&mut c.reset_level, m.boolean("reset_level")?);
        }
        if let Some(le) = p.section("link_extraction")? {
            c.link_extraction = link_extraction(&le, c.link_extraction)?;
        }
        if let Some(pp) = p.section("ppdup")? {
            set(&mut c.ppdup_servers, pp.strings("dupservers")?);
            set(&mut c.ppdup_replicas, pp.strings("replicas")?);
        }
        if let Some(r) = p.section("rup")? {
            c.rup = rup_robot(&r)?;
        }
        if let Some(vd) = p.section("variable_delay")? {
            c.variable_delay = variable_delay(&vd)?;
        }
        if let Some(g) = p.section("subdomains")? {
            c.subdomains = members(&g, subdomain)?;
        }
        if let Some(g) = p.section("logins")? {
            c.logins = members(&g, login)?;
        }
        if let Some(g) = p.section("nodes")? {
            c.nodes = members(&g, |n: &Params<'_, '_>, name| {
                Ok(Node {
                    name,
                    overrides: Value::Dict(n.pairs.to_vec()).into_owned(),
                })
            })?;
        }
        Ok(c)
    }

    /// The configuration as node scheduler `node` runs it: the collection's dict with the
    /// parameters of its Node element (if any) merged over it.
    pub fn for_node(
        name: &str,
        dict: &Value<'_>,
        node: &str,
    ) -> Result<CollectionConfig, ConfigError> {
        let p = Params::of(dict, String::new())?;
        let over = match p.section("nodes")? {
            Some(nodes) => nodes.section(node)?,
            None => None,
        };
        match over {
            Some(o) => {
                let o = Value::Dict(o.pairs.to_vec());
                CollectionConfig::from_dict(name, &merge(dict, &o))
            }
            None => CollectionConfig::from_dict(name, dict),
        }
    }

    /// The `ppdup` section alone, as PPDUP_SET_CONFIG's PKT_DATA carries it for the collection
    /// (FSCMT 3.1.5.11); an empty dict when the collection has none.
    pub fn ppdup_section(dict: &Value<'_>) -> Value<'static> {
        match dict.get(b"ppdup") {
            Some(v @ Value::Dict(_)) => v.clone().into_owned(),
            _ => Value::Dict(Vec::new()),
        }
    }

    /// PKT_DATA of a PPDUP_SET_CONFIG for collection `name`: `{name: ppdup section}`, the shape
    /// of the FSCMT 4.5 example.
    pub fn ppdup_set_config_data(name: &str, dict: &Value<'_>) -> Value<'static> {
        Value::Dict(vec![(
            Value::owned_bytes(name.as_bytes().to_vec()),
            Self::ppdup_section(dict),
        )])
    }

    /// True when the crawl rules allow `uri`: its scheme is allowed, its host passes the domain
    /// rules, the URI passes the URI rules, and its extension is not excluded.
    pub fn allows(&self, uri: &str) -> bool {
        self.refusal(uri).is_none()
    }

    /// The first rule that refuses `uri`, checked in the order scheme, extension, host, URI;
    /// `None` when the rules allow it.
    pub fn refusal(&self, uri: &str) -> Option<Refusal> {
        self.refusal_with(uri, true)
    }

    /// [`CollectionConfig::refusal`], with the host name rules checked only when `hosts` is
    /// true (an entry flagged URIF_IGNORE_NETLOC bypasses them, MS-FSCMT 2.2.2.2.1).
    pub fn refusal_with(&self, uri: &str, hosts: bool) -> Option<Refusal> {
        self.refusal_by(uri, || hosts && self.domain_refused(uri))
    }

    /// True when the host of `uri` fails `include_domains` / `exclude_domains`.
    pub fn domain_refused(&self, uri: &str) -> bool {
        if self.include_domains.is_empty() && self.exclude_domains.is_empty() {
            return false;
        }
        let host = host_of(uri);
        !(self.include_domains.is_empty() || self.include_domains.matches(host))
            || self.exclude_domains.matches(host)
    }

    /// [`Self::refusal_with`] (host rules checked) of a URI whose host is known to pass or fail
    /// the host rules: `domain_refused` is [`Self::domain_refused`] of a URI with the same
    /// scheme and authority (the links of a page on the page's own site).
    pub fn refusal_known_domain(&self, uri: &str, domain_refused: bool) -> Option<Refusal> {
        self.refusal_by(uri, || domain_refused)
    }

    /// The rules in their order (scheme, extension, host, URI), the host's verdict asked of
    /// `domain_refused` only when the scheme and extension pass.
    fn refusal_by(&self, uri: &str, domain_refused: impl FnOnce() -> bool) -> Option<Refusal> {
        // Every link of every page comes here: each part of the URI is looked at only when
        // there is a rule to check it against.
        let scheme = memchr::memchr(b':', uri.as_bytes()).map_or("", |i| &uri[..i]);
        if !self
            .allowed_schemes
            .iter()
            .any(|s| s.eq_ignore_ascii_case(scheme))
        {
            return Some(Refusal::Scheme);
        }
        if !self.exclude_exts.is_empty() {
            let path = uri.split(['?', '#']).next().unwrap_or(uri);
            let last = path.rsplit('/').next().unwrap_or("");
            if let Some(dot) = last.rfind('.') {
                let ext = last[dot..].to_ascii_lowercase();
                if self.exclude_exts.contains(&ext) {
                    return Some(Refusal::Extension);
                }
            }
        }
        if self.max_uri_recursion > 0 && path_loops(uri, self.max_uri_recursion) {
            return Some(Refusal::Recursion);
        }
        if domain_refused() {
            return Some(Refusal::Domain);
        }
        if !(self.include_uris.is_empty() || self.include_uris.matches(uri))
            || self.exclude_uris.matches(uri)
        {
            return Some(Refusal::Uri);
        }
        None
    }

    /// True when a document of MIME type `mime` (parameters after `;` ignored) is allowed:
    /// `allowed_types` entries match exactly, as `type/*`, or as `*` / `*/*`.
    pub fn allows_type(&self, mime: &str) -> bool {
        let mime = mime
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let major = mime.split('/').next().unwrap_or("");
        self.allowed_types.iter().any(|t| {
            t == "*" || t == "*/*" || *t == mime || t.strip_suffix("/*").is_some_and(|m| m == major)
        })
    }

    /// The first SubDomain `uri` belongs to.
    pub fn subdomain_for(&self, uri: &str) -> Option<&SubDomain> {
        self.subdomains.iter().find(|s| s.contains(uri))
    }

    /// [`Self::delay_at`] at `unix_secs` (seconds since 1970, UTC: the periods are the node's
    /// UTC days and hours). `None`: crawling is suspended now.
    pub fn delay_now(&self, unix_secs: i64) -> Option<f64> {
        if self.variable_delay.is_empty() {
            return Some(self.delay);
        }
        let days = unix_secs.div_euclid(86_400);
        // 1970-01-01 was a Thursday (3, counting from Monday = 0).
        let weekday = (days + 3).rem_euclid(7) as u8;
        let hour = (unix_secs.rem_euclid(86_400) / 3_600) as u8;
        self.delay_at(weekday, hour)
    }

    /// [`Self::delay_now`] on the node's clock. `None`: a variable_delay period suspends
    /// crawling now.
    pub fn current_delay(&self) -> Option<f64> {
        if self.variable_delay.is_empty() {
            return Some(self.delay);
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        self.delay_now(now)
    }

    /// The delay between requests at `hour` of `weekday` (0 = Monday): the first
    /// `variable_delay` period covering it, else `delay`. `None` means crawling is suspended.
    pub fn delay_at(&self, weekday: u8, hour: u8) -> Option<f64> {
        match self.variable_delay.iter().find(|v| v.covers(weekday, hour)) {
            Some(v) => v.delay,
            None => Some(self.delay),
        }
    }
}

/// Which crawl rule refuses a URI ([`CollectionConfig::refusal`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The scheme is not in `allowed_schemes`.
    Scheme,
    /// The file-name extension is in `exclude_exts`.
    Extension,
    /// The host fails `include_domains` / `exclude_domains`.
    Domain,
    /// The URI fails `include_uris` / `exclude_uris`.
    Uri,
    /// A segment of the URI's path repeats more than `max_uri_recursion` times (a loop such as
    /// `/a/b/a/b/a/b/...` of relative links).
    Recursion,
}

/// True when one segment of `uri`'s path (between its authority and its query or fragment)
/// occurs more than `max` times. Paths of at most `max` segments are passed without a look
/// at their segments (every link comes here); longer ones are counted in one pass.
fn path_loops(uri: &str, max: u32) -> bool {
    let b = uri.as_bytes();
    // The path starts at the first `/` after `scheme://` and before any query or fragment.
    let Some(colon) = memchr::memchr(b':', b) else {
        return false;
    };
    if b.get(colon + 1..colon + 3) != Some(b"//") {
        return false;
    }
    let rest = &b[colon + 3..];
    let Some(start) = memchr::memchr3(b'/', b'?', b'#', rest).map(|j| colon + 3 + j) else {
        return false;
    };
    if b[start] != b'/' {
        return false;
    }
    let end = memchr::memchr2(b'?', b'#', &b[start..]).map_or(b.len(), |i| start + i);
    let path = &uri[start..end];
    if memchr::memchr_iter(b'/', path.as_bytes()).count() <= max as usize {
        return false;
    }
    let mut counts: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    path.split('/').filter(|s| !s.is_empty()).any(|s| {
        let n = counts.entry(s).or_insert(0);
        *n += 1;
        *n > max
    })
}

/// The dict of every default, in the form [`super::parse_xml`] gives (booleans as 1/0): what
/// FSCADM 2.2.9.3 merges a new collection's partial configuration over.
/// `CollectionConfig::from_dict(name, &default_dict())` equals `CollectionConfig::defaults(name)`.
pub fn default_dict() -> Value<'static> {
    let d = CollectionConfig::defaults("");
    let s = |x: &str| Value::owned_bytes(x.as_bytes().to_vec());
    let list = |v: &[String]| Value::list(v.iter().map(|x| s(x)).collect());
    let b = |x: bool| Value::int(i64::from(x));
    let kv = |k: &str, v: Value<'static>| (s(k), v);
    let links = LINK_EXTRACTION
        .iter()
        .map(|(_, bit)| (Value::int(i64::from(*bit)), b(d.link_extraction & bit != 0)))
        .collect();
    Value::Dict(vec![
        kv("start_uris", list(&d.start_uris)),
        kv("start_uri_files", list(&d.start_uri_files)),
        kv("include_domains", list(&[])),
        kv("exclude_domains", list(&[])),
        kv("include_uris", list(&[])),
        kv("exclude_uris", list(&[])),
        kv("exclude_exts", list(&d.exclude_exts)),
        kv("exclude_headers", list(&[])),
        kv("delay", Value::Float(d.delay)),
        kv("refresh", Value::Float(d.refresh)),
        kv("refresh_mode", s(d.refresh_mode.name())),
        kv("dbswitch", Value::int(i64::from(d.dbswitch))),
        kv("max_doc_size", Value::int(d.max_doc_size as i64)),
        kv(
            "limits",
            Value::Dict(vec![
                kv("max_doc", Value::int(0)),
                kv("disk_free", Value::int(i64::from(d.disk_free))),
            ]),
        ),
        kv("refresh_only", b(d.refresh_only)),
        kv("robots", b(d.robots)),
        kv("check_meta_robots", b(d.check_meta_robots)),
        kv("obey_robots_delay", b(d.obey_robots_delay)),
        kv("sitemaps", b(d.sitemaps)),
        kv("allowed_schemes", list(&d.allowed_schemes)),
        kv("allowed_types", list(&d.allowed_types)),
        kv(
            "crawlmode",
            Value::Dict(vec![
                kv("mode", s("FULL")),
                kv("fwdlinks", b(d.forward_links)),
                kv("fwdredirects", b(d.forward_redirects)),
                kv("reset_level", b(d.reset_level)),
            ]),
        ),
        kv(
            "max_uri_recursion",
            Value::int(i64::from(d.max_uri_recursion)),
        ),
        kv("max_redirects", Value::int(i64::from(d.max_redirects))),
        kv("link_extraction", Value::Dict(links)),
        kv("max_sites", Value::int(i64::from(d.max_sites))),
        kv("max_pending", Value::int(i64::from(d.max_site_connections))),
        kv(
            "max_ip_connections",
            Value::int(i64::from(d.max_ip_connections)),
        ),
        kv("max_inter_docs", Value::int(0)),
        kv("user_agent", s(&d.user_agent)),
        kv("use_http_1_1", b(d.use_http_1_1)),
        kv("fetch_timeout", Value::Float(d.fetch_timeout)),
        kv("headers", list(&d.headers)),
    ])
}

fn set<T>(field: &mut T, v: Option<T>) {
    if let Some(v) = v {
        *field = v;
    }
}

/// The top-level names of [`KNOWN_ATTRIBS`] (section names for dotted entries).
fn top_level_known() -> Vec<&'static str> {
    KNOWN_ATTRIBS
        .iter()
        .map(|k| k.split('.').next().unwrap_or(k))
        .collect()
}

/// The `rup` section: on when it names a valid `robot_email` and `enabled` is not no.
fn rup_robot(r: &Params<'_, '_>) -> Result<Option<RupRobot>, ConfigError> {
    let enabled = r.boolean("enabled")?.unwrap_or(true);
    let latency = match r.string("latency")? {
        Some(l) => Some(
            crate::rup::Span::parse(l.trim(), true)
                .map_err(|e| r.bad("latency", &l, format!("{e}: INTEGER-UNIT or a unit")))?,
        ),
        None => None,
    };
    let Some(email) = r.string("robot_email")? else {
        return Ok(None);
    };
    let email = email.trim().to_owned();
    if !crate::rup::valid_email(&email) {
        return Err(r.bad("robot_email", &email, "not an e-mail address"));
    }
    Ok(enabled.then_some(RupRobot {
        robot_email: email,
        latency,
    }))
}

/// `refresh_mode`: a name (the XML's `string`) or an FSCADM 2.2.4.2 code.
fn refresh_mode(p: &Params<'_, '_>, v: &Value<'_>) -> Result<RefreshMode, ConfigError> {
    if v.as_i64().is_some() {
        let code = p.int("refresh_mode")?.unwrap_or_default();
        return RefreshMode::from_code(code).ok_or_else(|| {
            p.bad(
                "refresh_mode",
                code,
                "refresh mode codes are 1, 2, 4, 8, 32",
            )
        });
    }
    let name = p.string("refresh_mode")?.unwrap_or_default();
    RefreshMode::from_name(name.trim()).ok_or_else(|| {
        p.bad(
            "refresh_mode",
            &name,
            "refresh modes are append, prepend, scratch, soft, adaptive",
        )
    })
}

/// `crawlmode.mode`: `FULL` (no depth limit) or `DEPTH:n`; `None` when absent.
pub(crate) fn crawl_mode(m: &Params<'_, '_>) -> Result<Option<Option<u32>>, ConfigError> {
    let Some(mode) = m.string("mode")? else {
        return Ok(None);
    };
    let t = mode.trim();
    if t.eq_ignore_ascii_case("full") {
        return Ok(Some(None));
    }
    let depth = t
        .split_once(':')
        .filter(|(k, _)| k.eq_ignore_ascii_case("depth"))
        .and_then(|(_, n)| n.trim().parse::<u32>().ok());
    match depth {
        Some(n) => Ok(Some(Some(n))),
        None => Err(m.bad("mode", &mode, "crawl modes are FULL and DEPTH:n")),
    }
}

/// The `link_extraction` section over `mask`: integer keys of FSCMT 2.2.2.3.3 (names are
/// accepted too), boolean values.
fn link_extraction(le: &Params<'_, '_>, mut mask: u32) -> Result<u32, ConfigError> {
    for (k, v) in le.pairs {
        let bit = match (k.as_i64(), k.as_bytes()) {
            (Some(i), _) => link_extraction_name(i).and_then(link_extraction_key),
            (None, Some(name)) => std::str::from_utf8(name).ok().and_then(link_extraction_key),
            _ => None,
        };
        let Some(bit) = bit else {
            return Err(le.bad(&k.py_repr(), k.py_repr(), "not a key of FSCMT 2.2.2.3.3"));
        };
        let on = match v {
            Value::Int(i, _) => *i != 0,
            Value::Bool(b) => *b,
            _ => {
                return Err(ConfigError::WrongType {
                    attrib: le.key_path(&k.py_repr()),
                    expected: "boolean",
                    found: v.type_name(),
                })
            }
        };
        if on {
            mask |= bit;
        } else {
            mask &= !bit;
        }
    }
    Ok(mask)
}

/// Reads every member of a `subdomains` / `logins` / `nodes` dict with `read`.
fn members<T>(
    g: &Params<'_, '_>,
    read: impl Fn(&Params<'_, '_>, String) -> Result<T, ConfigError>,
) -> Result<Vec<T>, ConfigError> {
    let mut out = Vec::new();
    for (k, v) in g.pairs {
        let Some(name) = k.as_bytes().and_then(|b| std::str::from_utf8(b).ok()) else {
            return Err(g.bad("", k.py_repr(), "member names are UTF-8 strings"));
        };
        let p = Params::of(v, g.key_path(name))?;
        out.push(read(&p, name.to_string())?);
    }
    Ok(out)
}
