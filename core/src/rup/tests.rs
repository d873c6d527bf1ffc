//! Tests of the RUP server's pure side (draft-cosmo).

use super::cgi::{answer, parse_form, Action, Offer};
use super::info::RupInfo;
use super::modlog::{FileStat, ModLog};
use super::registry::{Patterns, Registry};
use super::report::{self, encode_path, render, Change, ChangeKind, Filter};
use super::*;

fn offer() -> Offer {
    Offer::new(
        RupInfo {
            cgi_url: "http://h/rup-cgi".into(),
            latencies: vec![Unit::Second, Unit::Day, Unit::Week],
            exclude: vec!["^tmp/".into(), r"\.gif$".into()],
            include_only: vec!["^docs/".into()],
            max_query_span: "4-week".parse().unwrap(),
        },
        "http://h/".into(),
    )
    .unwrap()
}

fn form(s: &str) -> Vec<(String, String)> {
    parse_form(s.as_bytes())
}

#[test]
fn spans_and_units() {
    assert_eq!(Unit::Month.seconds(), 30 * 86_400);
    assert_eq!(
        Span::parse("day", true).unwrap(),
        Span {
            count: 1,
            unit: Unit::Day
        }
    );
    assert!(matches!(
        Span::parse("day", false),
        Err(SpanError::Malformed(_))
    ));
    assert!(matches!(
        "0-day".parse::<Span>(),
        Err(SpanError::Malformed(_))
    ));
    assert!(matches!(
        "-1-day".parse::<Span>(),
        Err(SpanError::Malformed(_))
    ));
    assert!(matches!(
        "x-day".parse::<Span>(),
        Err(SpanError::Malformed(_))
    ));
    assert!(matches!(
        "2-fortnight".parse::<Span>(),
        Err(SpanError::UnknownUnit(_))
    ));
    assert!(matches!(
        "99999999999999999999-day".parse::<Span>(),
        Err(SpanError::Malformed(_))
    ));
}

#[test]
fn dates_are_rfc3339_utc_seconds() {
    assert_eq!(format_date(0), "1970-01-01T00:00:00Z");
    assert_eq!(format_date(1_795_600_800), "2026-11-25T10:00:00Z");
    assert_eq!(format_date(951_782_400), "2000-02-29T00:00:00Z");
}

#[test]
fn rupinfo_follows_3_1_1() {
    assert_eq!(
        offer().info.render(),
        "RUP-CGI: http://h/rup-cgi\nAuthentifier: none\nLatency: second, day, week\n\
         Exclude: ^tmp/, \\.gif$\nIncludeOnly: ^docs/\nMaxQuerySpan: 4-week\n"
    );
}

#[test]
fn report_follows_3_2_byte_for_byte() {
    let ch = |seq, kind, date, path: &str| Change {
        seq,
        kind,
        date,
        path: path.into(),
    };
    let t = 1_795_600_800;
    let changes = [
        ch(1, ChangeKind::New, t, "a.html"),
        ch(2, ChangeKind::New, t, "tmp/b.html"),
        ch(3, ChangeKind::Change, t, "a.html"),
        ch(4, ChangeKind::Delete, t + 1, "c%20d.html"),
        ch(5, ChangeKind::Delete, t + 1, "e.gif"),
    ];
    assert_eq!(
        render(7, "http://h/", &changes, &Filter::All, "\r\n"),
        "SequenceNumber: 7\r\nURLBase: http://h/\r\n\r\n\
         New[2026-11-25T10:00:00Z]: a.html, tmp/b.html\r\n\
         Change[2026-11-25T10:00:00Z]: a.html\r\n\
         Delete[2026-11-25T10:00:01Z]: c%20d.html, e.gif\r\n"
    );
    let o = offer();
    let f = o.filter(&Patterns::Exclude(vec!["^tmp/".into(), r"\.gif$".into()]));
    assert_eq!(
        render(1, "http://h/", &changes, &f, "\n"),
        "SequenceNumber: 1\nURLBase: http://h/\n\nNew[2026-11-25T10:00:00Z]: a.html\n\
         Change[2026-11-25T10:00:00Z]: a.html\nDelete[2026-11-25T10:00:01Z]: c%20d.html\n"
    );
    // 3.2 allows a report without change lines.
    assert_eq!(
        render(2, "http://h/", &[], &Filter::All, "\n"),
        "SequenceNumber: 2\nURLBase: http://h/\n\n"
    );
    let many: Vec<Change> = (0..200)
        .map(|i| ch(i, ChangeKind::New, t, &format!("page{i:03}.html")))
        .collect();
    let text = render(3, "http://h/", &many, &Filter::All, "\r\n");
    assert!(text.split("\r\n").all(|l| l.len() <= report::MAX_LINE));
    let paths: Vec<&str> = text
        .split("\r\n")
        .skip(3)
        .filter(|l| !l.is_empty())
        .flat_map(|l| {
            l.strip_prefix("New[2026-11-25T10:00:00Z]: ")
                .unwrap()
                .split(", ")
        })
        .collect();
    assert_eq!(
        paths,
        many.iter().map(|c| c.path.as_str()).collect::<Vec<_>>()
    );
    assert_eq!(encode_path("a b,c/é".as_bytes()), "a%20b%2Cc/%C3%A9");
}

#[test]
fn actions_are_checked_against_the_offer() {
    let o = offer();
    let p = |s: &str| Action::parse(form(s), &o);
    assert_eq!(
        p("Action=Register&RobotEmail=bot%40example.org&Latency=2-day&Exclude=%5Etmp%2F"),
        Ok(Action::Register {
            email: "bot@example.org".into(),
            latency: Some(Span {
                count: 2,
                unit: Unit::Day
            }),
            patterns: Some(Patterns::Exclude(vec!["^tmp/".into()])),
        })
    );
    let status = |s: &str| p(s).unwrap_err().status;
    assert_eq!(status("Action=Register"), 400);
    assert_eq!(status("Action=Register&RobotEmail=not-an-address"), 400);
    assert_eq!(
        status("Action=Register&RobotEmail=a%40b.org&Latency=0-day"),
        400
    );
    assert_eq!(
        status("Action=Register&RobotEmail=a%40b.org&Latency=month"),
        501
    );
    assert_eq!(
        status("Action=Register&RobotEmail=a%40b.org&Latency=2-fortnight"),
        501
    );
    assert_eq!(
        status("Action=Register&RobotEmail=a%40b.org&Exclude=x"),
        501
    );
    assert_eq!(
        status("Action=Register&RobotEmail=a%40b.org&Exclude=%5Etmp%2F&IncludeOnly=%5Edocs%2F"),
        400
    );
    assert_eq!(
        status("Action=Register&RobotEmail=a%40b.org&RobotEmail=c%40d.org"),
        400
    );
    assert_eq!(status("Action=Fly"), 400);
    assert_eq!(status(""), 400);
    assert_eq!(status("Action=Unregister&RegistrationKey=k"), 400);
    assert_eq!(status("Action=GetIndex&Span=5-week"), 400);
    assert_eq!(status("Action=GetIndex&Span=week"), 400);
    assert_eq!(status("Action=GetIndex&Span=1-fortnight"), 501);
    assert_eq!(
        p("Action=GetIndex&Span=4-week"),
        Ok(Action::GetIndex {
            span: "4-week".parse().unwrap()
        })
    );
}

#[test]
fn registrations_persist_and_a_second_register_voids_the_old_key() {
    let dir = tempfile::tempdir().unwrap();
    let o = offer();
    let modlog = ModLog::open(dir.path()).unwrap();
    let mut reg = Registry::open(dir.path()).unwrap();
    let mut n = 0;
    let mut key = || {
        n += 1;
        format!("k{n}")
    };
    let run = |reg: &mut Registry, s: &str, key: &mut dyn FnMut() -> String| {
        let a = Action::parse(form(s), &o)?;
        answer(a, &o, reg, &modlog, 1000, key)
    };
    let doc = run(
        &mut reg,
        "Action=Register&RobotEmail=a%40b.org&Latency=2-second",
        &mut key,
    )
    .unwrap();
    assert!(doc.contains("\nRegistrationKey: k1\n"), "{doc}");
    let doc = run(
        &mut reg,
        "Action=GetSequenceNumber&RegistrationKey=k1&RegisteredRobotEmail=a%40b.org",
        &mut key,
    )
    .unwrap();
    assert!(doc.contains("\nSequenceNumber=0\n"), "{doc}");
    let wrong = run(
        &mut reg,
        "Action=GetSequenceNumber&RegistrationKey=k1&RegisteredRobotEmail=x%40b.org",
        &mut key,
    );
    assert_eq!(wrong.unwrap_err().status, 400);
    run(&mut reg, "Action=ModifyPreferences&RegistrationKey=k1&RegisteredRobotEmail=a%40b.org&IncludeOnly=%5Edocs%2F", &mut key).unwrap();
    assert_eq!(
        reg.get("k1").unwrap().patterns,
        Patterns::IncludeOnly(vec!["^docs/".into()])
    );
    assert_eq!(
        reg.get("k1").unwrap().latency,
        Span {
            count: 2,
            unit: Unit::Second
        }
    );
    drop(reg);
    let mut reg = Registry::open(dir.path()).unwrap();
    assert_eq!(
        reg.get("k1").unwrap().patterns,
        Patterns::IncludeOnly(vec!["^docs/".into()])
    );
    run(&mut reg, "Action=Register&RobotEmail=a%40b.org", &mut key).unwrap();
    assert!(reg.get("k1").is_none());
    assert_eq!(reg.len(), 1);
    drop(reg);
    let mut reg = Registry::open(dir.path()).unwrap();
    assert!(reg.get("k1").is_none() && reg.get("k2").is_some());
    run(
        &mut reg,
        "Action=Unregister&RegistrationKey=k2&RegisteredRobotEmail=a%40b.org",
        &mut key,
    )
    .unwrap();
    drop(reg);
    assert!(Registry::open(dir.path()).unwrap().is_empty());
}

#[test]
fn modlog_logs_new_change_delete_and_survives_reopen_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let st = |m, s| {
        Some(FileStat {
            mtime_ns: m,
            size: s,
        })
    };
    let mut log = ModLog::open(dir.path()).unwrap();
    assert_eq!(log.observe("a", st(1, 1), 10), Some(ChangeKind::New));
    assert_eq!(log.observe("a", st(1, 1), 11), None);
    assert_eq!(log.observe("b", st(1, 1), 12), Some(ChangeKind::New));
    assert_eq!(log.observe("a", st(2, 1), 13), Some(ChangeKind::Change));
    assert_eq!(log.observe("b", None, 14), Some(ChangeKind::Delete));
    assert_eq!(log.observe("c", None, 14), None);
    log.commit().unwrap();
    drop(log);
    let mut log = ModLog::open(dir.path()).unwrap();
    assert_eq!(log.head(), 4);
    let kinds: Vec<_> = log.since(1).map(|c| (c.seq, c.kind)).collect();
    assert_eq!(
        kinds,
        [
            (2, ChangeKind::New),
            (3, ChangeKind::Change),
            (4, ChangeKind::Delete)
        ]
    );
    assert_eq!(log.dated_from(13).count(), 2);
    assert_eq!(log.files().len(), 1);
    // Change 2 is older than the span but still owed to a robot that heard of change 1 only.
    assert_eq!(log.expire(13, 1).unwrap(), 1);
    assert_eq!(log.changes().front().map(|c| c.seq), Some(2));
    assert_eq!(log.expire(13, u64::MAX).unwrap(), 1);
    log.compact().unwrap();
    drop(log);
    let log = ModLog::open(dir.path()).unwrap();
    assert_eq!(log.head(), 4);
    assert_eq!(log.changes().len(), 2);
    assert_eq!(log.files().get("a"), st(2, 1).as_ref());
    assert!(!log.files().contains_key("b"));
}

/// A change noted (not found by comparing files) is numbered, reported and kept across a
/// reopen like an observed one.
#[test]
fn noted_changes_are_logged_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let stat = FileStat {
        mtime_ns: 5_000_000_000,
        size: 1,
    };
    {
        let mut log = ModLog::open(dir.path()).unwrap();
        log.note("s0/p3.html", ChangeKind::Change, stat, 5);
        log.note("s0/p4.html", ChangeKind::Change, stat, 5);
        log.commit().unwrap();
        assert_eq!(log.head(), 2);
    }
    let log = ModLog::open(dir.path()).unwrap();
    assert_eq!(log.head(), 2);
    assert_eq!(log.files().get("s0/p3.html"), Some(&stat));
    let text = render(1, "http://h/", log.since(0), &Filter::All, "\n");
    assert_eq!(
        text,
        "SequenceNumber: 1\nURLBase: http://h/\n\nChange[1970-01-01T00:00:05Z]: s0/p3.html, s0/p4.html\n"
    );
}
