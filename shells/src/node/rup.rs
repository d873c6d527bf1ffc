//! The node scheduler as a RUP robot (draft-cosmo; docs/rup.md "The robot"), on a thread of
//! its own so that the CGI calls (blocking, with ureq) never hold up the node's event loop.
//!
//! The node's loop tells the thread which sites of RUP collections started and what each
//! collection's `rup` section says; the thread fetches a site's /rupinfo.txt, registers once
//! (3.1.2; the key in `core::rup::robot::Book`, in the data directory), reads the reports the
//! SMTP receiver and `crawlfleet rup-deliver` leave in the spool (3.2), notices lost ones
//! (3.3.3: a gap in sequence numbers, or a silence) and asks GetSequenceNumber and GetIndex
//! for them, and unregisters (3.3.1) when a collection goes or turns RUP off. What a report
//! means for the crawl goes back to the loop as [`RobotOut`] messages, which it applies to the
//! scheduler (`core/src/sched/node_rup.rs`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crawlfleet_core::clock;
use crawlfleet_core::config::RupRobot;
use crawlfleet_core::rup::report::{self, ChangeKind, Report};
use crawlfleet_core::rup::robot::{intake, pick_latency, Book, Intake, Registration};
use crawlfleet_core::rup::{cgi, info, Span};
use crawlfleet_core::sched::multinode::SchedError;
use crawlfleet_core::sched::node::NodeScheduler;
use crawlfleet_core::warn_limited;
use crossbeam_channel::{Receiver, Sender};
use log::{info, warn};

use super::rup_smtp::Recipients;
use super::rup_spool;

/// What the node's loop tells the robot.
pub enum RobotIn {
    /// Sites of RUP collections that started: (collection, URL base).
    Sites(Vec<(Vec<u8>, String)>),
    /// Every collection and its `rup` section (`None`: RUP off).
    Configs(BTreeMap<Vec<u8>, Option<RupRobot>>),
}

/// What the robot asks of the node's loop.
#[derive(Debug)]
pub enum RobotOut {
    /// Fetch these URIs now (New and Change).
    Fetch(Vec<u8>, Vec<Vec<u8>>),
    /// Delete these URIs (Delete).
    Delete(Vec<u8>, Vec<Vec<u8>>),
    /// Refresh the whole site at this URL base once.
    Refresh(Vec<u8>, String),
    /// The site at this URL base is (true) or is no longer (false) kept current by reports.
    Cover(Vec<u8>, String, bool),
}

/// What the robot did in this run (`crawlfleet up`'s summary shows them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RupCounters {
    /// Sites registered with now (over the collections).
    pub sites_registered: u64,
    /// Reports received for a site registered with.
    pub reports_received: u64,
    /// Reports applied (the next in sequence, or one after a gap).
    pub reports_applied: u64,
    /// URIs queued for fetching by the reports and by GetIndex answers.
    pub pages_queued: u64,
}

/// The counters, shared by the robot thread and the node's loop.
type SharedCounters = std::sync::Arc<parking_lot::Mutex<RupCounters>>;

/// The robot thread's two ends.
pub struct RobotLink {
    /// To the robot.
    pub tx: Sender<RobotIn>,
    /// From the robot.
    pub rx: Receiver<RobotOut>,
    /// The addresses the SMTP receiver accepts mail for.
    pub recipients: Recipients,
    /// Wakes the robot when a mail is spooled.
    pub wake: Sender<()>,
    /// Wakes the node's loop when the robot asked something (`rx`), so that what a report
    /// names is queued at once rather than at the loop's next event.
    pub asked: Receiver<()>,
    /// Keeps `asked` connected whatever becomes of the robot thread (a loop selecting on a
    /// disconnected channel would spin).
    _asked_kept: Sender<()>,
    /// The `rup` sections last sent, and when they were last compared.
    configs: Option<BTreeMap<Vec<u8>, Option<RupRobot>>>,
    configs_at: Instant,
    counters: SharedCounters,
}

/// How often the node's loop compares the collections' `rup` sections with those it sent.
const CONFIGS_EVERY: Duration = Duration::from_millis(200);

impl RobotLink {
    /// One turn of the node's loop: the sites started go to the robot, and the collections'
    /// `rup` sections when they changed; what the robot asks is done.
    pub fn pump(&mut self, sm: &mut NodeScheduler) -> Result<(), SchedError> {
        // The sections first, compared again when a site of a collection not in them started:
        // the robot registers with a site only once it knows its collection's section.
        let started = sm.rup_take_started();
        let unknown = started
            .iter()
            .any(|(c, _)| !self.configs.as_ref().is_some_and(|k| k.contains_key(c)));
        if unknown || self.configs.is_none() || self.configs_at.elapsed() >= CONFIGS_EVERY {
            self.configs_at = Instant::now();
            let now: BTreeMap<Vec<u8>, Option<RupRobot>> = sm
                .collections()
                .into_iter()
                .map(|(n, _)| {
                    let r = sm.collection_settings(&n).and_then(|s| s.rup.clone());
                    (n, r)
                })
                .collect();
            if self.configs.as_ref() != Some(&now) {
                self.configs = Some(now.clone());
                let _ = self.tx.send(RobotIn::Configs(now));
            }
        }
        if !started.is_empty() {
            let _ = self.tx.send(RobotIn::Sites(started));
        }
        while let Ok(m) = self.rx.try_recv() {
            match m {
                RobotOut::Fetch(c, uris) => {
                    let n = sm.rup_fetch(&c, &uris)?;
                    self.counters.lock().pages_queued += n;
                }
                RobotOut::Delete(c, uris) => {
                    sm.rup_delete(&c, &uris)?;
                }
                RobotOut::Refresh(c, base) => {
                    sm.rup_refresh_site(&c, &base)?;
                }
                RobotOut::Cover(c, base, on) => sm.rup_cover(&c, &base, on),
            }
        }
        Ok(())
    }

    /// What the robot did so far.
    pub fn counters(&self) -> RupCounters {
        *self.counters.lock()
    }
}

/// How long a site without a usable rupinfo.txt is left alone before the robot looks again.
const RECHECK: Duration = Duration::from_secs(3600);
/// The robot's tick: the spool and the silences.
const TICK: Duration = Duration::from_millis(200);
/// How long a failed recovery waits before it is tried again.
const RETRY: Duration = Duration::from_secs(10);
/// Largest rupinfo.txt or CGI answer read.
const MAX_ANSWER: u64 = 32 << 20;

struct Robot {
    data_dir: PathBuf,
    book: Book,
    agent: ureq::Agent,
    configs: Option<BTreeMap<Vec<u8>, Option<RupRobot>>>,
    /// Sites looked at without a registration, and when.
    looked: HashMap<(Vec<u8>, String), Instant>,
    /// Registrations whose recovery failed, and when to try again.
    retry_at: HashMap<(Vec<u8>, String), Instant>,
    out: Sender<RobotOut>,
    /// Wakes the node's loop after `out` (`RobotLink::asked`).
    asked: Sender<()>,
    recipients: Recipients,
    counters: SharedCounters,
}

/// Starts the robot thread over the data directory `data_dir`.
pub fn start(data_dir: &Path, user_agent: &str) -> Result<RobotLink, String> {
    let book = Book::open(data_dir).map_err(|e| format!("RUP robot: {e}"))?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .http_status_as_error(false)
        .proxy(None)
        .max_redirects(5)
        .user_agent(user_agent)
        .build()
        .into();
    let (tx, in_rx) = crossbeam_channel::unbounded();
    let (out, rx) = crossbeam_channel::unbounded();
    let (wake, wake_rx) = crossbeam_channel::bounded(1);
    let (asked_tx, asked) = crossbeam_channel::bounded(1);
    let recipients = Recipients::default();
    let counters = SharedCounters::default();
    counters.lock().sites_registered = book.all().count() as u64;
    let mut robot = Robot {
        data_dir: data_dir.to_path_buf(),
        book,
        agent,
        configs: None,
        looked: HashMap::new(),
        retry_at: HashMap::new(),
        out,
        asked: asked_tx.clone(),
        recipients: recipients.clone(),
        counters: counters.clone(),
    };
    robot.publish_sites(None);
    std::thread::Builder::new()
        .name("rup-robot".into())
        .spawn(move || robot.run(&in_rx, &wake_rx))
        .map_err(|e| format!("RUP robot thread: {e}"))?;
    Ok(RobotLink {
        tx,
        rx,
        recipients,
        wake,
        asked,
        _asked_kept: asked_tx,
        configs: None,
        configs_at: Instant::now(),
        counters,
    })
}

/// A CGI or rupinfo.txt answer: status and body.
struct Answer {
    status: u16,
    body: String,
}

impl Robot {
    fn run(&mut self, rx: &Receiver<RobotIn>, wake: &Receiver<()>) {
        loop {
            crossbeam_channel::select! {
                recv(rx) -> m => match m {
                    Ok(RobotIn::Sites(sites)) => {
                        for (c, b) in sites {
                            self.site_started(&c, &b);
                        }
                    }
                    Ok(RobotIn::Configs(c)) => self.configs(c),
                    Err(_) => return,
                },
                recv(wake) -> _ => {}
                default(TICK) => {}
            }
            if self.configs.is_some() {
                self.read_spool();
                self.check_silences();
            }
        }
    }

    fn send(&self, m: RobotOut) {
        let _ = self.out.send(m);
        let _ = self.asked.try_send(());
    }

    fn setting(&self, collection: &[u8]) -> Option<&RupRobot> {
        self.configs.as_ref()?.get(collection)?.as_ref()
    }

    /// The collections' `rup` sections: registrations of a collection gone, or with RUP off,
    /// are unregistered (3.3.1); those of another address are registered again with it.
    fn configs(&mut self, configs: BTreeMap<Vec<u8>, Option<RupRobot>>) {
        let first = self.configs.is_none();
        *self.recipients.addresses.write() = configs
            .values()
            .flatten()
            .map(|r| r.robot_email.to_ascii_lowercase())
            .collect();
        self.configs = Some(configs);
        let regs: Vec<Registration> = self.book.all().cloned().collect();
        for r in regs {
            match self.setting(&r.collection).cloned() {
                None => self.unregister(&r),
                Some(s) if !s.robot_email.eq_ignore_ascii_case(&r.email) => {
                    self.unregister(&r);
                    self.register(&r.collection, &r.url_base);
                }
                Some(_) if first => {
                    // Registered in an earlier run: its refresh cycles are the reports'.
                    self.send(RobotOut::Cover(
                        r.collection.clone(),
                        r.url_base.clone(),
                        true,
                    ));
                }
                Some(_) => {}
            }
        }
    }

    fn site_started(&mut self, collection: &[u8], url_base: &str) {
        if self.setting(collection).is_none() || self.book.get(collection, url_base).is_some() {
            return;
        }
        let k = (collection.to_vec(), url_base.to_owned());
        if self.looked.get(&k).is_some_and(|t| t.elapsed() < RECHECK) {
            return;
        }
        self.looked.insert(k, Instant::now());
        self.register(collection, url_base);
    }

    fn get(&self, url: &str) -> Result<Answer, String> {
        let mut resp = self.agent.get(url).call().map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER)
            .read_to_string()
            .map_err(|e| e.to_string())?;
        Ok(Answer { status, body })
    }

    fn post(&self, url: &str, form: &[(&str, &str)]) -> Result<Answer, String> {
        let mut resp = self
            .agent
            .post(url)
            .send_form(form.iter().copied())
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER)
            .read_to_string()
            .map_err(|e| e.to_string())?;
        Ok(Answer { status, body })
    }

    /// Tells the SMTP receiver the sites whose reports this robot takes: those it registered
    /// with, and `registering` (from before its Register is sent, so that a report the server
    /// sends as soon as it has the registration is not turned away).
    fn publish_sites(&self, registering: Option<&str>) {
        let mut sites: HashSet<String> = self.book.all().map(|r| r.url_base.clone()).collect();
        sites.extend(registering.map(str::to_owned));
        *self.recipients.sites.write() = sites;
    }

    /// Fetches the site's /rupinfo.txt (3.1.1) and, when it is open to robots
    /// (`Authentifier: none`), registers (3.1.2) with a latency it offers.
    fn register(&mut self, collection: &[u8], url_base: &str) {
        self.try_register(collection, url_base);
        self.publish_sites(None);
    }

    fn try_register(&mut self, collection: &[u8], url_base: &str) {
        let Some(setting) = self.setting(collection).cloned() else {
            return;
        };
        let url = format!("{url_base}rupinfo.txt");
        let offered = match self.get(&url) {
            Ok(a) if a.status == 200 => match info::parse(a.body.as_bytes()) {
                Ok(o) => o,
                Err(e) => {
                    info!("{url}: not a rupinfo.txt ({e}): refreshed as any site");
                    return;
                }
            },
            Ok(a) => {
                log::debug!("{url}: {}: not a RUP site", a.status);
                return;
            }
            Err(e) => {
                warn_limited!("rup-robot", "{url}: {e}");
                return;
            }
        };
        if !offered.open_to_robots() {
            info!(
                "{url}: Authentifier {:?} is not one this robot knows: not registered",
                offered.authentifier.as_deref().unwrap_or("")
            );
            return;
        }
        let latency = pick_latency(&offered.latencies, setting.latency);
        let lat = latency.map(|l| l.to_string());
        let mut form = vec![
            ("Action", "Register"),
            ("RobotEmail", setting.robot_email.as_str()),
        ];
        if let Some(l) = &lat {
            form.push(("Latency", l));
        }
        self.publish_sites(Some(url_base));
        let key = match self.post(&offered.cgi_url, &form) {
            Ok(a) if a.status == 200 => cgi::answer_text(&a.body).lines().find_map(|l| {
                l.trim()
                    .strip_prefix("RegistrationKey:")
                    .map(|k| k.trim().to_owned())
            }),
            Ok(a) => {
                warn!(
                    "{}: Register refused: {} {}",
                    offered.cgi_url,
                    a.status,
                    a.body.trim()
                );
                return;
            }
            Err(e) => {
                warn_limited!("rup-robot", "{}: Register: {e}", offered.cgi_url);
                return;
            }
        };
        let Some(key) = key.filter(|k| !k.is_empty()) else {
            warn!("{}: Register answered no RegistrationKey", offered.cgi_url);
            return;
        };
        let reg = Registration {
            collection: collection.to_vec(),
            url_base: url_base.to_owned(),
            cgi_url: offered.cgi_url,
            email: setting.robot_email,
            key,
            latency: latency.unwrap_or(Span {
                count: 1,
                unit: crawlfleet_core::rup::Unit::Day,
            }),
            max_query_span: offered.max_query_span,
            seq: 0,
            heard_at: clock::unix_now(),
        };
        info!(
            "collection {}: registered with the RUP server of {url_base} (latency {})",
            String::from_utf8_lossy(collection),
            reg.latency
        );
        if let Err(e) = self.book.put(reg) {
            warn!("RUP registration of {url_base} not written: {e}");
            return;
        }
        self.count_registered();
        self.send(RobotOut::Cover(
            collection.to_vec(),
            url_base.to_owned(),
            true,
        ));
    }

    /// Unregisters (3.3.1) and forgets the registration, whatever the server answers (a server
    /// that does not know the key any more has nothing to undo).
    fn unregister(&mut self, r: &Registration) {
        let form = [
            ("Action", "Unregister"),
            ("RegistrationKey", r.key.as_str()),
            ("RegisteredRobotEmail", r.email.as_str()),
        ];
        match self.post(&r.cgi_url, &form) {
            Ok(a) if a.status == 200 => info!(
                "collection {}: unregistered from the RUP server of {}",
                String::from_utf8_lossy(&r.collection),
                r.url_base
            ),
            Ok(a) => warn!("{}: Unregister: {} {}", r.cgi_url, a.status, a.body.trim()),
            Err(e) => warn!("{}: Unregister: {e}", r.cgi_url),
        }
        if let Err(e) = self.book.remove(&r.collection, &r.url_base) {
            warn!("RUP registration of {} not removed: {e}", r.url_base);
        }
        self.publish_sites(None);
        self.count_registered();
        self.send(RobotOut::Cover(
            r.collection.clone(),
            r.url_base.clone(),
            false,
        ));
    }

    /// Applies the spooled mails in order, removing each once applied.
    /// Applies the reports waiting in the spool. The sequence numbers they move on are
    /// committed together, once, before their files leave the spool (a crash before that reads
    /// them again: applying a report is idempotent), so a burst of reports (every site's at
    /// the same second) costs one fdatasync rather than one each.
    fn read_spool(&mut self) {
        let waiting = rup_spool::waiting(&self.data_dir);
        if waiting.is_empty() {
            return;
        }
        for path in &waiting {
            let raw = match std::fs::read(path) {
                Ok(r) => r,
                Err(e) => {
                    warn_limited!("rup-robot", "{}: {e}", path.display());
                    continue;
                }
            };
            for raw in rup_spool::mails_of(path, raw) {
                match body_of(&raw).and_then(|b| report::parse(&b).map_err(|e| e.to_string())) {
                    Ok(rep) => self.report(&rep),
                    Err(e) => warn!("{}: not a RUP report ({e}): dropped", path.display()),
                }
            }
        }
        if let Err(e) = self.book.commit_staged() {
            warn_limited!("rup-robot", "RUP registrations not written: {e}");
        }
        for path in &waiting {
            if let Err(e) = std::fs::remove_file(path) {
                warn_limited!("rup-robot", "{}: {e}", path.display());
            }
        }
    }

    /// A report (3.2) for every collection registered with its site: applied once, in
    /// sequence; a gap asks for what was lost (3.3.3).
    fn report(&mut self, rep: &Report) {
        let regs = self.book.for_url_base(&rep.url_base);
        if regs.is_empty() {
            // A collection crawled by several nodes has one robot address, which a mail
            // server may deliver to every node: each applies the reports of the sites it
            // registered with (docs/rup.md).
            log::debug!(
                "a RUP report for {}, which no collection of this node registered with: dropped",
                rep.url_base
            );
        } else {
            self.counters.lock().reports_received += 1;
        }
        for mut r in regs {
            let now = clock::unix_now();
            match intake(r.seq, rep.seq) {
                Intake::Stale => continue,
                Intake::Next => {
                    self.counters.lock().reports_applied += 1;
                    self.apply(&r.collection, rep);
                    r.seq = rep.seq;
                    r.heard_at = now;
                    // Committed with the rest of the spool's reports (read_spool).
                    self.book.stage(r);
                }
                Intake::Gap => {
                    info!(
                        "collection {}: RUP report {} of {} after {}: reports lost",
                        String::from_utf8_lossy(&r.collection),
                        rep.seq,
                        r.url_base,
                        r.seq
                    );
                    self.counters.lock().reports_applied += 1;
                    self.apply(&r.collection, rep);
                    r.seq = rep.seq;
                    self.recover(r, true);
                }
            }
        }
    }

    fn count_registered(&self) {
        self.counters.lock().sites_registered = self.book.all().count() as u64;
    }

    fn save(&mut self, r: Registration) {
        if let Err(e) = self.book.put(r) {
            warn_limited!("rup-robot", "RUP registration not written: {e}");
        }
    }

    /// The lines of a report, each path's last kind deciding (the lines are in the server's
    /// log order): New and Change fetched, Delete deleted.
    fn apply(&self, collection: &[u8], rep: &Report) {
        let mut last: Vec<(String, ChangeKind)> = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        for (kind, _, paths) in &rep.lines {
            for p in paths {
                let url = rep.url(p);
                match at.get(&url) {
                    Some(&i) => last[i].1 = *kind,
                    None => {
                        at.insert(url.clone(), last.len());
                        last.push((url, *kind));
                    }
                }
            }
        }
        let (mut fetch, mut delete) = (Vec::new(), Vec::new());
        for (u, k) in last {
            match k {
                ChangeKind::Delete => delete.push(u.into_bytes()),
                ChangeKind::New | ChangeKind::Change => fetch.push(u.into_bytes()),
            }
        }
        if !delete.is_empty() {
            self.send(RobotOut::Delete(collection.to_vec(), delete));
        }
        if !fetch.is_empty() {
            self.send(RobotOut::Fetch(collection.to_vec(), fetch));
        }
    }

    /// Registrations that heard nothing for two periods and a margin ask what they missed.
    fn check_silences(&mut self) {
        let now = clock::unix_now();
        let due: Vec<Registration> = self
            .book
            .all()
            .filter(|r| r.overdue(now))
            .filter(|r| {
                self.retry_at
                    .get(&(r.collection.clone(), r.url_base.clone()))
                    .is_none_or(|t| Instant::now() >= *t)
            })
            .cloned()
            .collect();
        for r in due {
            self.recover(r, false);
        }
    }

    /// 3.3.3: GetSequenceNumber, then GetIndex for the span since the last report applied
    /// (rounded up to whole units); refused or too far back, one full refresh of the site. A
    /// key the server no longer knows registers again, with a full refresh. `lost`: a gap in
    /// the sequence numbers showed reports lost; else the server's number tells.
    fn recover(&mut self, mut r: Registration, lost: bool) {
        let k = (r.collection.clone(), r.url_base.clone());
        let form = [
            ("Action", "GetSequenceNumber"),
            ("RegistrationKey", r.key.as_str()),
            ("RegisteredRobotEmail", r.email.as_str()),
        ];
        let latest = match self.post(&r.cgi_url, &form) {
            Ok(a) if a.status == 200 => cgi::answer_text(&a.body).lines().find_map(|l| {
                l.trim()
                    .strip_prefix("SequenceNumber=")
                    .and_then(|n| n.trim().parse::<u64>().ok())
            }),
            Ok(a) if a.status == 400 => {
                warn!(
                    "{}: GetSequenceNumber refused ({}): registering again",
                    r.cgi_url,
                    a.body.trim()
                );
                let _ = self.book.remove(&r.collection, &r.url_base);
                self.register(&r.collection, &r.url_base);
                self.send(RobotOut::Refresh(r.collection.clone(), r.url_base.clone()));
                return;
            }
            Ok(a) => {
                warn_limited!(
                    "rup-robot",
                    "{}: GetSequenceNumber: {}",
                    r.cgi_url,
                    a.status
                );
                None
            }
            Err(e) => {
                warn_limited!("rup-robot", "{}: GetSequenceNumber: {e}", r.cgi_url);
                None
            }
        };
        let Some(latest) = latest else {
            self.retry_at.insert(k, Instant::now() + RETRY);
            return;
        };
        self.retry_at.remove(&k);
        let now = clock::unix_now();
        if lost || latest > r.seq {
            match r.recovery_span(now) {
                Some(span) => self.get_index(&r, span),
                None => {
                    info!(
                        "{}: changes since {} are past MaxQuerySpan: one full refresh",
                        r.url_base,
                        crawlfleet_core::rup::format_date(r.heard_at)
                    );
                    self.send(RobotOut::Refresh(r.collection.clone(), r.url_base.clone()));
                }
            }
        }
        r.seq = r.seq.max(latest);
        r.heard_at = now;
        self.save(r);
    }

    /// GetIndex (3.3.4) over `span`, applied; refused, one full refresh of the site.
    fn get_index(&self, r: &Registration, span: Span) {
        let span_s = span.to_string();
        let form = [("Action", "GetIndex"), ("Span", span_s.as_str())];
        let got = match self.post(&r.cgi_url, &form) {
            Ok(a) if a.status == 200 => report::parse(&cgi::answer_text(&a.body))
                .map_err(|e| format!("answer not read: {e}")),
            Ok(a) => Err(format!("{} {}", a.status, a.body.trim())),
            Err(e) => Err(e),
        };
        match got {
            Ok(rep) => {
                info!(
                    "{}: GetIndex over {span_s} applied ({} lines)",
                    r.url_base,
                    rep.lines.len()
                );
                self.apply(&r.collection, &rep);
            }
            Err(e) => {
                info!(
                    "{}: GetIndex over {span_s} refused ({e}): one full refresh",
                    r.url_base
                );
                self.send(RobotOut::Refresh(r.collection.clone(), r.url_base.clone()));
            }
        }
    }
}

/// The text of a mail's report: the body of the message (its first text/plain part when it is
/// multipart), its transfer encoding undone.
pub(super) fn body_of(raw: &[u8]) -> Result<String, String> {
    let m = mailparse::parse_mail(raw).map_err(|e| e.to_string())?;
    let part = if m.subparts.is_empty() {
        &m
    } else {
        m.subparts
            .iter()
            .find(|p| p.ctype.mimetype.eq_ignore_ascii_case("text/plain"))
            .ok_or("no text/plain part")?
    };
    part.get_body().map_err(|e| e.to_string())
}
