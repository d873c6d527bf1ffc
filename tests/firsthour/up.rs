//! `crawlfleet up` as a newcomer runs it: its data directory (default place, resume, lock,
//! `--fresh`), its admin address, progress, Ctrl-C and SIGTERM, and a site that is down.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{crawlfleet, free_port, run, shown, summary, text};
use crate::util::temp_dir;

/// A running `up`, its standard output and error read line by line.
struct Up {
    child: Child,
    out: mpsc::Receiver<String>,
    err: mpsc::Receiver<String>,
    err_seen: Vec<String>,
}

impl Up {
    fn start(cmd: &mut Command) -> Up {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("up starts");
        // Read to the end, whatever the bytes: a reader that stopped at a line of bad UTF-8
        // would close the pipe, and `up` would end on its next write.
        let lines = |r: Box<dyn Read + Send>| {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for l in BufReader::new(r).split(b'\n').map_while(Result::ok) {
                    let _ = tx.send(String::from_utf8_lossy(&l).into_owned());
                }
            });
            rx
        };
        let out = lines(Box::new(child.stdout.take().unwrap()));
        let err = lines(Box::new(child.stderr.take().unwrap()));
        Up {
            child,
            out,
            err,
            err_seen: Vec::new(),
        }
    }

    /// The next line of standard output; if there is none within 60 s, the panic shows why
    /// (the exit status and standard error of an `up` that stopped early).
    fn stdout_line(&mut self) -> String {
        match self.out.recv_timeout(Duration::from_secs(60)) {
            Ok(l) => l,
            Err(e) => {
                let deadline = Instant::now() + Duration::from_secs(10);
                let status = loop {
                    match self.child.try_wait() {
                        Ok(Some(s)) => break format!("{s}"),
                        _ if Instant::now() > deadline => {
                            let _ = self.child.kill();
                            break "still running (killed)".to_string();
                        }
                        _ => std::thread::sleep(Duration::from_millis(20)),
                    }
                };
                while let Ok(l) = self.err.recv_timeout(Duration::from_secs(2)) {
                    self.err_seen.push(l);
                }
                panic!(
                    "up prints its start lines within 60 s: {e}; up {status}; stderr:\n{}",
                    self.err_seen.join("\n")
                )
            }
        }
    }

    /// Waits (60 s at most) for a line of standard error that `want` accepts.
    fn stderr_until(&mut self, what: &str, want: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.err.recv_timeout(left) {
                Ok(l) => {
                    self.err_seen.push(l.clone());
                    if want(&l) {
                        return l;
                    }
                }
                Err(_) => panic!(
                    "{what}: not within 60 s; stderr so far:\n{}",
                    self.err_seen.join("\n")
                ),
            }
        }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig}");
    }

    /// Waits (30 s at most) for the exit; its status, the rest of stdout and of stderr.
    fn wait(mut self) -> (std::process::ExitStatus, String, String) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("up did not stop within 30 s:\n{}", self.err_seen.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let rest = |rx: &mpsc::Receiver<String>| {
            let mut v = Vec::new();
            while let Ok(l) = rx.recv_timeout(Duration::from_secs(5)) {
                v.push(l);
            }
            v.join("\n")
        };
        let out = rest(&self.out);
        let err = format!("{}\n{}", self.err_seen.join("\n"), rest(&self.err));
        (status, out, err)
    }
}

/// `N pages fetched, S stored, Q queued, ...` of a plain progress line.
fn progress_figures(line: &str) -> Option<(u64, u64)> {
    let (_, figures) = line.strip_prefix("progress ")?.split_once(": ")?;
    let num = |word: &str| -> Option<u64> {
        let part = figures.split(", ").find(|p| p.ends_with(word))?;
        part.split_whitespace().next()?.parse().ok()
    };
    Some((num("pages fetched")?, num("queued")?))
}

#[test]
fn up_resumes_its_data_dir_refuses_a_second_and_stops_on_ctrl_c() {
    let dir = temp_dir("up-layout");
    let state = dir.path().join("state");
    let home = dir.path().join("home");
    let data = state.join("crawlfleet").join("up");
    let port = free_port();
    let admin = format!("127.0.0.1:{port}");
    let web = [
        "--synthetic-web",
        "3:40",
        "--web-base",
        "127.90.0.1",
        "--web-delay",
        "0.05",
    ];
    let env = |c: &mut Command| {
        c.env("XDG_STATE_HOME", &state).env("HOME", &home);
    };
    let mut cmd = crawlfleet(&["up"]);
    cmd.args(web)
        .args(["--progress-interval", "0.3", "--admin-listen", &admin]);
    env(&mut cmd);
    let mut up = Up::start(&mut cmd);
    // Where the cluster is, on standard output, in the per-user state directory.
    assert_eq!(
        up.stdout_line(),
        format!("crawlfleet up: data in {} (new cluster)", data.display())
    );
    assert!(up.stdout_line().starts_with(&format!(
        "admin {admin}  (crawlfleet admin --data-dir {}",
        data.display()
    )));
    assert_eq!(
        std::fs::read_to_string(data.join("admin.addr"))
            .unwrap()
            .trim(),
        admin
    );
    // Plain progress lines (standard error is not a terminal), with what is really queued.
    up.stderr_until("progress with pages fetched and queued", |l| {
        progress_figures(l).is_some_and(|(f, q)| f > 0 && q > 0)
    });
    // A second up on the directory is refused with the first one's pid.
    let mut second = crawlfleet(&["up", "--synthetic-web", "1:5", "--web-base", "127.90.1.1"]);
    env(&mut second);
    let o = run(&mut second, 30);
    assert!(!o.status.success(), "{}", shown(&o));
    assert!(
        text(&o.stderr).contains(&format!("is in use by process {}", up.child.id())),
        "{}",
        shown(&o)
    );
    // The admin CLI finds the cluster from --data-dir alone; introspection answers.
    let d = data.to_str().unwrap();
    let o = run(
        &mut crawlfleet(&["admin", "--data-dir", d, "collection-get-list"]),
        30,
    );
    assert!(
        o.status.success() && text(&o.stdout).contains("synthetic"),
        "{}",
        shown(&o)
    );
    let o = run(
        &mut crawlfleet(&["admin", "--data-dir", d, "system.listMethods"]),
        30,
    );
    assert!(
        text(&o.stdout).contains("CollectionAdd")
            && text(&o.stdout).contains("system.methodSignature"),
        "{}",
        shown(&o)
    );
    let o = run(
        &mut crawlfleet(&[
            "admin",
            "--data-dir",
            d,
            "system.methodHelp",
            "CollectionAdd",
        ]),
        30,
    );
    assert_eq!(
        text(&o.stdout).trim(),
        "CollectionAdd(string, int): MS-FSCADM 2.2.9.3",
        "{}",
        shown(&o)
    );
    // Ctrl-C: a clean stop with the summary so far, exit 0.
    up.signal("-INT");
    let (status, out, err) = up.wait();
    assert_eq!(status.code(), Some(0), "{out}\n{err}");
    assert!(
        err.contains("crawlfleet up: stopping (Ctrl-C again to force it)"),
        "{err}"
    );
    assert!(
        out.contains("collection ") && out.contains(" pages in "),
        "{out}"
    );
    // The next up resumes: same addresses, statistics added up.
    let mut again = crawlfleet(&["up"]);
    again
        .args(web)
        .args(["--until-idle", "--json", "--timeout", "120"]);
    env(&mut again);
    let o = run(&mut again, 180);
    assert!(o.status.success(), "{}", shown(&o));
    let start: serde_json::Value =
        serde_json::from_str(text(&o.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(start["event"], "start");
    assert_eq!(start["resumed"], true, "{start}");
    assert_eq!(start["admin"], admin.as_str(), "{start}");
    let sum = summary(&o);
    let earlier = sum["earlier_pages_fetched"].as_u64().unwrap_or(0);
    assert!(earlier > 0, "{sum}");
    assert!(sum["pages_fetched"].as_u64() >= Some(earlier), "{sum}");
    // --fresh starts over; --progress never shows none.
    let mut fresh = crawlfleet(&["up"]);
    fresh.args(web).args([
        "--until-idle",
        "--fresh",
        "--progress",
        "never",
        "--progress-interval",
        "0.1",
        "--timeout",
        "120",
    ]);
    env(&mut fresh);
    let o = run(&mut fresh, 180);
    assert!(o.status.success(), "{}", shown(&o));
    assert!(
        text(&o.stdout).starts_with(&format!(
            "crawlfleet up: data in {} (new cluster)",
            data.display()
        )),
        "{}",
        shown(&o)
    );
    assert!(
        !text(&o.stdout).contains("more in earlier runs"),
        "{}",
        shown(&o)
    );
    assert!(!text(&o.stderr).contains("progress "), "{}", shown(&o));
}

#[test]
fn sigterm_stops_up_and_a_second_signal_forces_the_exit() {
    let dir = temp_dir("up-signals");
    let mut cmd = crawlfleet(&["up", "--synthetic-web", "2:200", "--web-base", "127.90.2.1"]);
    cmd.args(["--web-delay", "0.2", "--data-dir"])
        .arg(dir.path().join("data"));
    let mut up = Up::start(&mut cmd);
    up.stdout_line();
    up.stdout_line();
    up.signal("-TERM");
    up.stderr_until("the stop", |l| l.starts_with("crawlfleet up: stopping"));
    up.signal("-INT");
    let (status, _, err) = up.wait();
    assert_eq!(status.code(), Some(130), "{err}");
}

/// A crawl whose site is down says so (issue 26: it used to exit 0 "after unexplained errors").
#[test]
fn up_explains_the_errors_of_a_crawl_whose_site_is_down() {
    let dir = temp_dir("up-dead");
    let cfg = dir.path().join("dead.xml");
    let dead = free_port();
    std::fs::write(
        &cfg,
        format!(
            r#"<CrawlerConfig><DomainSpecification name="dead">
  <attrib name="start_uris" type="list-string"><member>http://127.0.0.1:{dead}/</member></attrib>
  <attrib name="robots" type="boolean">no</attrib>
</DomainSpecification></CrawlerConfig>"#
        ),
    )
    .unwrap();
    let o = run(
        crawlfleet(&[
            "up",
            "--until-idle",
            "--distributors",
            "0",
            "--timeout",
            "120",
            "--config",
        ])
        .arg(&cfg)
        .arg("--data-dir")
        .arg(dir.path().join("data")),
        180,
    );
    assert!(o.status.success(), "{}", shown(&o));
    let want = "crawlfleet up: collection dead: 1 fetch error(s); 1 co: no connection: nothing answers at the address (is the site up?)";
    assert!(text(&o.stderr).lines().any(|l| l == want), "{}", shown(&o));
}
