//! `/metrics` of the RUP server (`crawlfleet rup-server --metrics-listen`): the role thread
//! counts what it answers and sends into a shared view as it goes, and the metrics server
//! renders it. The CGI's `Action` comes from the request, so only the actions of draft-cosmo
//! are labels; anything else counts as `other` (and a request without one as `none`).

use std::collections::BTreeMap;
use std::sync::Arc;

use crawlfleet_core::metrics::{Exposition, Kind};
use crawlfleet_core::rup::report::ChangeKind;
use parking_lot::Mutex;

use super::MetricsRoute;

/// The actions of the RUP CGI (draft-cosmo 3.1.2, 3.3).
const ACTIONS: [&str; 5] = [
    "Register",
    "Unregister",
    "ModifyPreferences",
    "GetSequenceNumber",
    "GetIndex",
];

/// What the RUP server has done (updated by its role thread).
#[derive(Clone, Debug, Default)]
pub struct RupView {
    /// Robots registered now.
    pub robots: u64,
    /// Update reports the SMTP server accepted.
    pub reports_sent: u64,
    /// Attempts to send a report that failed (each retried later).
    pub reports_failed: u64,
    /// Changes held in the modification log: New, Change, Delete.
    pub modlog: [u64; 3],
    /// Files the modification log knows.
    pub files_known: u64,
    /// CGI requests by (action label, status).
    pub cgi: BTreeMap<(&'static str, u16), u64>,
    /// Files answered 200 (GET or HEAD).
    pub files_served: u64,
    /// Files answered 304 Not Modified.
    pub not_modified: u64,
}

impl RupView {
    /// Counts a CGI request whose `Action` item was `action`, answered with `status`.
    pub fn count_cgi(&mut self, action: Option<&str>, status: u16) {
        let label = match action {
            None => "none",
            Some(a) => ACTIONS
                .iter()
                .find(|x| **x == a)
                .copied()
                .unwrap_or("other"),
        };
        *self.cgi.entry((label, status)).or_default() += 1;
    }

    /// Counts the changes of the modification log by kind.
    pub fn set_modlog<'c>(&mut self, changes: impl Iterator<Item = &'c ChangeKind>, files: usize) {
        let mut n = [0u64; 3];
        for k in changes {
            n[kind_index(*k)] += 1;
        }
        self.modlog = n;
        self.files_known = files as u64;
    }
}

fn kind_index(k: ChangeKind) -> usize {
    match k {
        ChangeKind::New => 0,
        ChangeKind::Change => 1,
        ChangeKind::Delete => 2,
    }
}

/// The RUP server's shared view.
pub type SharedRup = Arc<Mutex<RupView>>;

/// The `/metrics` of the RUP server.
pub fn route(view: SharedRup) -> MetricsRoute {
    MetricsRoute::new(move |m| render(&view.lock(), m))
}

/// Renders the RUP server's view.
pub fn render(v: &RupView, m: &mut Exposition) {
    m.gauge(
        "crawlfleet_rup_robots_registered",
        "Robots registered for update reports (draft-cosmo 3.1.2).",
        &[],
        v.robots as f64,
    );
    m.counter(
        "crawlfleet_rup_reports_sent_total",
        "Update reports the SMTP server accepted (draft-cosmo 3.2).",
        &[],
        v.reports_sent as f64,
    );
    m.counter(
        "crawlfleet_rup_reports_failed_total",
        "Attempts to send an update report that failed (the report is tried again).",
        &[],
        v.reports_failed as f64,
    );
    let help = "Changes held in the modification log, by kind (New, Change, Delete).";
    for (kind, n) in [ChangeKind::New, ChangeKind::Change, ChangeKind::Delete]
        .into_iter()
        .zip(v.modlog)
    {
        m.gauge(
            "crawlfleet_rup_modlog_entries",
            help,
            &[("kind", kind.name())],
            n as f64,
        );
    }
    m.gauge(
        "crawlfleet_rup_files",
        "Files of the served tree the modification log knows.",
        &[],
        v.files_known as f64,
    );
    let help = "RUP CGI requests by Action (none: no Action item; other: an unknown one) and \
                status.";
    m.declare("crawlfleet_rup_cgi_requests_total", help, Kind::Counter);
    for ((action, status), n) in &v.cgi {
        m.counter(
            "crawlfleet_rup_cgi_requests_total",
            help,
            &[("action", action), ("status", &status.to_string())],
            *n as f64,
        );
    }
    m.counter(
        "crawlfleet_rup_files_served_total",
        "Files of the served tree answered 200 (GET or HEAD).",
        &[],
        v.files_served as f64,
    );
    m.counter(
        "crawlfleet_rup_files_not_modified_total",
        "Conditional requests for files answered 304 Not Modified.",
        &[],
        v.not_modified as f64,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgi_actions_outside_the_draft_share_one_label() {
        let mut v = RupView::default();
        v.count_cgi(Some("Register"), 200);
        v.count_cgi(Some("Register"), 200);
        v.count_cgi(Some("../../etc"), 400);
        v.count_cgi(Some("x\"y"), 400);
        v.count_cgi(None, 400);
        let mut m = Exposition::new();
        render(&v, &mut m);
        let text = m.finish();
        assert!(text
            .contains("crawlfleet_rup_cgi_requests_total{action=\"Register\",status=\"200\"} 2\n"));
        assert!(
            text.contains("crawlfleet_rup_cgi_requests_total{action=\"other\",status=\"400\"} 2\n")
        );
        assert!(
            text.contains("crawlfleet_rup_cgi_requests_total{action=\"none\",status=\"400\"} 1\n")
        );
    }
}
