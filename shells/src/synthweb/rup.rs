//! The synthetic web as a RUP server (draft-cosmo; docs/rup.md "The synthetic web"), so that
//! `crawlfleet up` shows RUP at work: every host publishes `/rupinfo.txt` and answers the CGI
//! at [`CGI_PATH`], keeps a modification log of its changing pages and mails each registered
//! robot its update report every latency period.
//!
//! It is `crawlfleet rup-server`'s state (`core::rup`: the offer, the registry, the
//! modification log and the CGI actions) and mailer (`rup::mail`), one registry and one log per
//! host, opened when a robot first asks for the host's rupinfo.txt or CGI. The log is not fed
//! by a file watcher: the web's changes are a seeded schedule ([`ChangeSchedule`]), so each
//! round of changes is logged as it comes, a Change for every tree page it changes, dated when
//! the round happened (a host opened later logs the rounds of the last MaxQuerySpan first).
//!
//! [`ChangeSchedule`]: crawlfleet_core::synthweb::ChangeSchedule

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_core::marshal::Value;
use crawlfleet_core::rup::cgi::{self, Action, Offer};
use crawlfleet_core::rup::info::RupInfo;
use crawlfleet_core::rup::modlog::{FileStat, ModLog};
use crawlfleet_core::rup::registry::Registry;
use crawlfleet_core::rup::report::ChangeKind;
use crawlfleet_core::rup::{Refusal, Span, Unit};
use crawlfleet_core::synthweb::{ChangeSchedule, Reply, SyntheticWeb};
use crawlfleet_core::{clock, warn_limited};
use crossbeam_channel::Receiver;

use crate::rup::mail::{self, Outbox, Sent, Targets};

/// The CGI's path on every host (rupinfo.txt's RUP-CGI is the host's URL base plus this).
pub const CGI_PATH: &str = "/rup-cgi";

/// Seconds before a report no SMTP server took is tried again.
const RETRY_SECS: i64 = 5;
/// How often the changes older than MaxQuerySpan are dropped.
const EXPIRE_EVERY: Duration = Duration::from_secs(60);

/// What the web offers and where its reports go.
#[derive(Clone, Debug)]
pub struct RupOptions {
    /// The registries and modification logs, a directory per host (by address).
    pub data_dir: PathBuf,
    /// The SMTP servers every report is sent to (each gets every report); may be filled in
    /// after the web started (reports wait until then).
    pub targets: Targets,
    /// The reports' sender address.
    pub from: String,
    /// The latency units offered.
    pub latencies: Vec<Unit>,
    /// How long the modification log is kept (rupinfo.txt's MaxQuerySpan).
    pub max_query_span: Span,
}

impl RupOptions {
    /// Seconds to minutes and hours offered, a day of log kept, reports from
    /// `rup@synthweb.invalid` to `targets`.
    pub fn new(data_dir: PathBuf, targets: Targets) -> RupOptions {
        RupOptions {
            data_dir,
            targets,
            from: "rup@synthweb.invalid".into(),
            latencies: vec![Unit::Second, Unit::Minute, Unit::Hour, Unit::Day],
            max_query_span: Span {
                count: 1,
                unit: Unit::Day,
            },
        }
    }
}

/// The robot's address in `crawlfleet up`'s collection of the synthetic web.
pub const UP_ROBOT: &str = "robot@crawlfleet.invalid";

/// The `rup` section `crawlfleet up` gives the synthetic web's collection (docs/rup.md): the
/// nodes register with every host as [`UP_ROBOT`], asking for a report each round of
/// `changes` (at least every 2 seconds), or each minute when the pages do not change.
pub fn up_robot_section(changes: Option<ChangeSchedule>) -> Value<'static> {
    let latency = match changes {
        Some(c) => format!("{}-second", c.every.max(2)),
        None => "1-minute".to_string(),
    };
    let s = |x: &str| Value::owned_bytes(x.as_bytes().to_vec());
    Value::Dict(vec![
        (s("robot_email"), s(UP_ROBOT)),
        (s("latency"), s(&latency)),
    ])
}

/// What the web's RUP servers did, for tests and the summary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RupActivity {
    /// Robots registered now, over the hosts.
    pub registered: u64,
    /// Reports an SMTP server accepted.
    pub reports_sent: u64,
    /// Changes logged.
    pub changes_logged: u64,
}

/// One host's RUP server.
struct Site {
    offer: Offer,
    rupinfo: String,
    registry: Registry,
    modlog: ModLog,
    /// The last round of changes logged.
    round: u64,
}

/// The RUP servers of every host of the web, owned by the web's server thread.
pub(super) struct WebRup {
    opts: RupOptions,
    web: Arc<SyntheticWeb>,
    sites: HashMap<u32, Site>,
    /// Hosts whose registry or log could not be opened (answered 503, tried again later).
    broken: HashMap<u32, Instant>,
    outbox: Outbox,
    sent_rx: Receiver<Sent>,
    expired_at: Instant,
    activity: Arc<parking_lot::Mutex<RupActivity>>,
}

impl WebRup {
    /// The RUP servers of `web`, their mail thread started.
    pub fn start(
        web: Arc<SyntheticWeb>,
        opts: RupOptions,
        activity: Arc<parking_lot::Mutex<RupActivity>>,
    ) -> io::Result<WebRup> {
        std::fs::create_dir_all(&opts.data_dir)?;
        let (mail_tx, mail_rx) = crossbeam_channel::unbounded();
        let (sent_tx, sent_rx) = crossbeam_channel::unbounded();
        mail::spawn(opts.targets.clone(), opts.from.clone(), mail_rx, sent_tx)?;
        Ok(WebRup {
            opts,
            web,
            sites: HashMap::new(),
            broken: HashMap::new(),
            outbox: Outbox::new(mail_tx),
            sent_rx,
            expired_at: Instant::now(),
            activity,
        })
    }

    /// The answer to `path` on `host` when it is RUP's: `/rupinfo.txt`, or the CGI with the
    /// form `form` (a GET's query or a POST's body). `None`: not RUP's path.
    pub fn respond(&mut self, host: SocketAddr, path: &str, form: Option<&[u8]>) -> Option<Reply> {
        let bare = path.split_once('?').map_or(path, |(p, _)| p);
        if bare != "/rupinfo.txt" && bare != CGI_PATH {
            return None;
        }
        let h = self.web.host_index(host)?;
        let site = match self.site(h) {
            Ok(s) => s,
            Err(e) => return Some(text(503, &e)),
        };
        if bare == "/rupinfo.txt" {
            return Some(reply(
                200,
                "text/plain; charset=utf-8",
                site.rupinfo.clone(),
            ));
        }
        let Some(form) = form else {
            return Some(text(405, "the RUP CGI takes GET and POST"));
        };
        let done = Action::parse(cgi::parse_form(form), &site.offer).and_then(|action| {
            let key = match &action {
                Action::Register { .. } => crate::rup::new_key().map_err(|e| Refusal {
                    status: 503,
                    reason: e,
                })?,
                _ => String::new(),
            };
            cgi::answer(
                action,
                &site.offer,
                &mut site.registry,
                &site.modlog,
                clock::unix_now(),
                || key,
            )
        });
        let registered = self.sites.values().map(|s| s.registry.len() as u64).sum();
        self.activity.lock().registered = registered;
        Some(match done {
            Ok(doc) => reply(200, "text/html; charset=utf-8", doc),
            Err(r) => {
                warn_limited!("synthweb-rup", "CGI request refused: {r}");
                text(r.status, &r.reason)
            }
        })
    }

    /// The RUP server of host `h`, opened (and its log brought up to now) on first use.
    fn site(&mut self, h: u32) -> Result<&mut Site, String> {
        if !self.sites.contains_key(&h) {
            if self
                .broken
                .get(&h)
                .is_some_and(|t| t.elapsed() < Duration::from_secs(10))
            {
                return Err("the RUP server's data could not be opened".into());
            }
            match self.open(h) {
                Ok(s) => {
                    self.sites.insert(h, s);
                    self.broken.remove(&h);
                }
                Err(e) => {
                    warn_limited!("synthweb-rup", "{e}");
                    self.broken.insert(h, Instant::now());
                    return Err(e);
                }
            }
        }
        let now = clock::unix_now();
        let site = self.sites.get_mut(&h).ok_or("no site")?;
        let logged = log_rounds(&self.web, h, site, now);
        self.activity.lock().changes_logged += logged;
        Ok(site)
    }

    fn open(&self, h: u32) -> Result<Site, String> {
        let origin = self.web.origin_of(h).ok_or("not a host of the web")?;
        let dir = self
            .opts
            .data_dir
            .join(match self.web.hosts().get(h as usize).map(|a| a.ip()) {
                Some(IpAddr::V4(a)) => a.to_string(),
                Some(IpAddr::V6(a)) => a.to_string(),
                None => return Err("not a host of the web".into()),
            });
        let fail = |e: &dyn std::fmt::Display| format!("RUP server of {origin}: {e}");
        std::fs::create_dir_all(&dir).map_err(|e| fail(&e))?;
        let registry = Registry::open(&dir).map_err(|e| fail(&e))?;
        let modlog = ModLog::open(&dir).map_err(|e| fail(&e))?;
        let url_base = format!("{origin}/");
        let offer = Offer::new(
            RupInfo {
                cgi_url: format!("{origin}{CGI_PATH}"),
                latencies: self.opts.latencies.clone(),
                exclude: Vec::new(),
                include_only: Vec::new(),
                max_query_span: self.opts.max_query_span,
            },
            url_base,
        )?;
        // The rounds of the last MaxQuerySpan, for GetIndex.
        let span = self.opts.max_query_span.seconds() as i64;
        let from = self.web.round_at(clock::unix_now() - span);
        Ok(Site {
            rupinfo: offer.info.render(),
            offer,
            registry,
            modlog,
            round: from,
        })
    }

    /// The loop's tick: the rounds of changes come since logged, the reports due handed to
    /// the mail thread, the mail thread's outcomes recorded, old changes dropped.
    pub fn tick(&mut self) {
        let now = clock::unix_now();
        while let Ok(s) = self.sent_rx.try_recv() {
            self.sent(s, now);
        }
        let mut logged = 0;
        for (h, site) in &mut self.sites {
            logged += log_rounds(&self.web, *h, site, now);
        }
        self.activity.lock().changes_logged += logged;
        if self.expired_at.elapsed() >= EXPIRE_EVERY {
            self.expired_at = Instant::now();
            let span = self.opts.max_query_span.seconds() as i64;
            for site in self.sites.values_mut() {
                let unreported = site
                    .registry
                    .robots()
                    .map(|r| r.sent_upto)
                    .min()
                    .unwrap_or(u64::MAX);
                if let Err(e) = site.modlog.expire(now - span, unreported) {
                    warn_limited!("synthweb-rup", "modification log not compacted: {e}");
                }
            }
        }
        for site in self.sites.values() {
            self.outbox
                .send_due(&site.registry, &site.offer, &site.modlog, now);
        }
    }

    fn sent(&mut self, s: Sent, now: i64) {
        if !self.outbox.settle(&s, now, RETRY_SECS) {
            if let Err(e) = &s.result {
                warn_limited!(
                    "synthweb-rup",
                    "report {} for {} to {} not sent (tried again in {RETRY_SECS} s): {e}",
                    s.mail.seq,
                    s.mail.url_base,
                    s.mail.to
                );
            }
            return;
        }
        self.activity.lock().reports_sent += 1;
        let site = self
            .sites
            .values_mut()
            .find(|site| site.registry.get(&s.mail.key).is_some());
        if let Some(site) = site {
            if let Err(e) = mail::record_sent(&mut site.registry, &s.mail, now) {
                warn_limited!("synthweb-rup", "sequence number not written: {e}");
            }
        }
    }
}

/// Logs the rounds of changes of host `h` up to `now` not logged yet; returns the changes.
fn log_rounds(web: &SyntheticWeb, h: u32, site: &mut Site, now: i64) -> u64 {
    let upto = web.round_at(now);
    if upto <= site.round {
        return 0;
    }
    let mut n = 0;
    for r in site.round + 1..=upto {
        let date = web.round_time(r);
        for path in web.changed_in_round(h, r) {
            let stat = FileStat {
                mtime_ns: date.saturating_mul(1_000_000_000),
                size: r,
            };
            // Paths relative to the URL base (3.2).
            site.modlog.note(&path[1..], ChangeKind::Change, stat, date);
            n += 1;
        }
    }
    site.round = upto;
    if let Err(e) = site.modlog.commit() {
        warn_limited!("synthweb-rup", "modification log not written: {e}");
    }
    if n > 0 {
        log::debug!(
            "synthweb: {n} changes of host {h} logged for RUP ({})",
            web.origin_of(h).unwrap_or_default()
        );
    }
    n
}

fn reply(status: u16, content_type: &str, body: String) -> Reply {
    Reply {
        status,
        headers: vec![("Content-Type".into(), content_type.into())],
        body: body.into_bytes(),
        delay: Duration::ZERO,
    }
}

fn text(status: u16, why: &str) -> Reply {
    reply(status, "text/plain; charset=utf-8", format!("{why}\n"))
}
