//! Form logins end to end (docs/collection-config.md "Login"; the `logins` dict of MS-FSCMT
//! 2.2.2.3.1): `crawlfleet up` crawls a site whose pages are behind a form login
//! (tests/login_site.py, Python's http.server), through the preload page, the form page's
//! hidden token, the POST, and new logins when sessions die.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::util::{temp_dir, up_summary};

/// The login site's process, killed when dropped.
struct Site {
    child: Child,
    port: u16,
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn site(addr: &str, log: &Path, pages: usize, expire: usize) -> Site {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/login_site.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(format!("{addr}:0"))
        .arg(log)
        .args([pages.to_string(), expire.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().unwrap_or_else(|_| {
        let _ = child.kill();
        panic!("the login site did not start: {line:?}")
    });
    Site { child, port }
}

/// One logged request: method, path, status, session, live.
#[derive(Debug)]
struct Hit {
    method: String,
    path: String,
    status: u64,
    session: Option<String>,
    live: bool,
}

fn hits(log: &Path) -> Vec<Hit> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            Hit {
                method: v["method"].as_str().unwrap().into(),
                path: v["path"].as_str().unwrap().into(),
                status: v["status"].as_u64().unwrap(),
                session: v["session"].as_str().map(String::from),
                live: v["live"].as_bool().unwrap(),
            }
        })
        .collect()
}

/// Crawls the site with `login` (the Login element's attribs) and returns the summary.
fn crawl(name: &str, addr: &str, port: u16, login: &str) -> serde_json::Value {
    let dir = temp_dir(name);
    let cfg = dir.path().join("members.xml");
    std::fs::write(
        &cfg,
        format!(
            r#"<CrawlerConfig><DomainSpecification name="members">
  <attrib name="start_uris" type="list-string"><member>http://{addr}:{port}/</member></attrib>
  <attrib name="delay" type="real">0</attrib>
  <Login name="members">
    <attrib name="site" type="string">{addr}:{port}</attrib>
    <attrib name="form" type="string">/login</attrib>
    <section name="parameters">
      <attrib name="user" type="string">alice</attrib>
      <attrib name="pass" type="string">secret</attrib>
    </section>
    <attrib name="sites" type="list-string"><member>{addr}</member></attrib>
    {login}
  </Login>
</DomainSpecification></CrawlerConfig>"#
        ),
    )
    .unwrap();
    up_summary(
        Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
            .args(["up", "--config"])
            .arg(&cfg)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--until-idle", "--json", "--timeout", "120"]),
    )
}

/// Serves the members' site (20 pages, sessions of 5) on `addr` and crawls it with a Login of
/// preload, form page and autofill, and `extra` attribs; the summary and the site's log.
fn crawl_members(name: &str, addr: &str, extra: &str) -> (serde_json::Value, Vec<Hit>) {
    let dir = temp_dir(&format!("{name}-site"));
    let log = dir.path().join("site.log");
    let s = site(addr, &log, 20, 5);
    let port = s.port;
    let login = format!(
        r#"<attrib name="preload" type="string">http://{addr}:{port}/welcome</attrib>
    <attrib name="html_form" type="string">http://{addr}:{port}/login-form</attrib>
    <attrib name="autofill" type="boolean">yes</attrib>
    {extra}"#
    );
    let summary = crawl(name, addr, port, &login);
    (summary, hits(&log))
}

fn count(v: &serde_json::Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

/// docs/collection-config.md "Login": before anything is fetched from the Login's sites the
/// node logs in (preload for its cookie, the form page for its one-time token with autofill,
/// the POST with the given fields); every members' page is then fetched through a live
/// session, and when a session dies (the site ends it after 5 pages) the node logs in again
/// and fetches the page that showed it once more: every page is stored, none as the redirect
/// to the form.
#[test]
fn a_node_logs_in_before_crawling_and_again_when_the_session_dies() {
    let (summary, hits) = crawl_members("login", "127.83.0.1", "");
    let c = &summary["collections"]["members"];
    assert_eq!(count(c, "documents_stored"), 20, "{summary}\n{hits:#?}");
    // Every members' page came with a live session, and nothing of the site was fetched
    // before the first login.
    let pages: Vec<&Hit> = hits
        .iter()
        .filter(|h| h.path == "/" || h.path.starts_with("/p/"))
        .collect();
    let mut served: Vec<&str> = pages
        .iter()
        .filter(|h| h.status == 200)
        .map(|h| h.path.as_str())
        .collect();
    served.sort();
    served.dedup();
    assert_eq!(served.len(), 20, "{hits:#?}");
    let first_login = hits
        .iter()
        .position(|h| h.method == "POST")
        .expect("a login");
    assert_eq!(hits[first_login].status, 302, "login refused: {hits:#?}");
    assert!(
        hits[..first_login]
            .iter()
            .all(|h| h.path == "/welcome" || h.path == "/login-form"),
        "fetched before the login: {hits:#?}"
    );
    assert!(
        hits[first_login - 2].path == "/welcome" && hits[first_login - 1].path == "/login-form",
        "{hits:#?}"
    );
    // 20 pages at 5 a session: at least four logins, each accepted; every page answered as
    // "session gone" went with a session that had been live.
    let logins: Vec<&Hit> = hits.iter().filter(|h| h.method == "POST").collect();
    assert!(logins.len() >= 4, "{hits:#?}");
    assert!(logins.iter().all(|h| h.status == 302), "{hits:#?}");
    for h in pages.iter().filter(|h| h.status != 200) {
        assert!(h.session.is_some() && !h.live, "{h:?}");
    }
    // No redirect reached the crawl: the ones to the form were the node's to act on.
    assert_eq!(count(c, "redirects"), 0, "{summary}");
}

/// Without `relogin_if_failed`, a dead session is not renewed before `ttl`: the pages after
/// it are answered with the redirect to the form and are not stored (the crawl follows the
/// redirect to the form page, which is), while those before are, through one login.
#[test]
fn without_relogin_a_dead_session_stays_dead_until_its_ttl() {
    let (summary, hits) = crawl_members(
        "login-once",
        "127.83.0.2",
        r#"<attrib name="relogin_if_failed" type="boolean">no</attrib>"#,
    );
    let logins = hits.iter().filter(|h| h.method == "POST").count();
    assert_eq!(logins, 1, "{hits:#?}");
    let c = &summary["collections"]["members"];
    let stored = count(c, "documents_stored");
    // The login's own visit to the page its submission redirects to (right after the POST)
    // is a page of the session too, not the crawl's.
    let after_post = |i: usize| i > 0 && hits[i - 1].method == "POST";
    let live_all = hits.iter().filter(|h| h.live && h.status == 200).count() as u64;
    assert_eq!(live_all, 5, "{hits:#?}");
    let live = hits
        .iter()
        .enumerate()
        .filter(|(i, h)| h.live && h.status == 200 && !after_post(*i))
        .count() as u64;
    // The form page, when the crawl followed a redirect to it after the login.
    let post = hits.iter().position(|h| h.method == "POST").unwrap();
    let form = hits[post..].iter().any(|h| h.path == "/login-form") as u64;
    assert_eq!(stored, live + form, "{summary}\n{hits:#?}");
    assert!(count(c, "redirects") > 0, "{summary}");
}
