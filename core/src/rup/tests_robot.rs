//! The robot's side of RUP: reading what the server writes (rupinfo.txt 3.1.1, reports 3.2,
//! CGI answers), the registrations' log, and what a sequence number or a silence means (3.3.3).

use super::cgi::{answer_text, html};
use super::info::{parse as parse_info, InfoError, RupInfo};
use super::report::{parse as parse_report, render, Change, ChangeKind, Filter, ReportError};
use super::robot::{intake, pick_latency, Book, Intake, Registration};
use super::{Span, Unit};

fn span(s: &str) -> Span {
    s.parse().unwrap()
}

#[test]
fn rupinfo_reads_back_what_the_server_writes() {
    // 3.1.1, as the server renders it.
    let info = RupInfo {
        cgi_url: "http://www.example.org/rup-cgi".into(),
        latencies: vec![Unit::Day, Unit::Second, Unit::Week],
        exclude: vec!["^tmp/".into()],
        include_only: vec!["^docs/".into(), "\\.html$".into()],
        max_query_span: span("4-week"),
    };
    let o = parse_info(info.render().as_bytes()).unwrap();
    assert_eq!(o.cgi_url, info.cgi_url);
    assert_eq!(o.authentifier.as_deref(), Some("none"));
    assert!(o.open_to_robots());
    assert_eq!(o.latencies, info.latencies);
    assert_eq!(o.exclude, info.exclude);
    assert_eq!(o.include_only, info.include_only);
    assert_eq!(o.max_query_span, Some(span("4-week")));
}

#[test]
fn rupinfo_of_other_servers_is_read_leniently_and_an_authentifier_closes_it() {
    let o = parse_info(
        b"rup-cgi: http://h/cgi-bin/rup\r\nAuthentifier: PGP\r\nLatency: day,fortnight, week\r\n\
          X-Other: 1\r\nMaxQuerySpan: week\r\n",
    )
    .unwrap();
    assert_eq!(o.cgi_url, "http://h/cgi-bin/rup");
    // 3.1.1: `none` is the only method defined; a robot cannot use another.
    assert!(!o.open_to_robots());
    assert_eq!(
        o.latencies,
        [Unit::Day, Unit::Week],
        "unknown units skipped"
    );
    assert_eq!(o.max_query_span, None, "MaxQuerySpan is integer-unit");
    assert_eq!(parse_info(b"Latency: day\n"), Err(InfoError::NoCgi));
    assert_eq!(parse_info(b"RUP-CGI: \xff\n"), Err(InfoError::NotText));
}

#[test]
fn reports_read_back_byte_for_byte_what_render_writes() {
    let changes = [
        (ChangeKind::New, 1_700_000_000, "docs/e.html"),
        (ChangeKind::New, 1_700_000_000, "docs/f%20g.html"),
        (ChangeKind::Change, 1_700_000_003, "index.html"),
        (ChangeKind::Delete, 1_700_000_007, "old/page.html"),
    ];
    let changes: Vec<Change> = changes
        .iter()
        .enumerate()
        .map(|(i, &(kind, date, path))| Change {
            seq: i as u64 + 1,
            kind,
            date,
            path: path.into(),
        })
        .collect();
    for nl in ["\r\n", "\n"] {
        let text = render(4, "http://www.example.org/", &changes, &Filter::All, nl);
        let r = parse_report(&text).unwrap();
        assert_eq!(r.seq, 4);
        assert_eq!(r.url_base, "http://www.example.org/");
        let lines: Vec<(ChangeKind, Vec<String>)> =
            r.lines.iter().map(|(k, _, p)| (*k, p.clone())).collect();
        assert_eq!(
            lines,
            [
                (
                    ChangeKind::New,
                    vec!["docs/e.html".into(), "docs/f%20g.html".into()]
                ),
                (ChangeKind::Change, vec!["index.html".into()]),
                (ChangeKind::Delete, vec!["old/page.html".into()]),
            ]
        );
        assert_eq!(r.lines[0].1, "2023-11-14T22:13:20Z");
        assert_eq!(r.url("docs/e.html"), "http://www.example.org/docs/e.html");
    }
    // An empty report (3.3.3: one each period, changes or not).
    let r = parse_report(&render(9, "http://h/", &[], &Filter::All, "\r\n")).unwrap();
    assert_eq!((r.seq, r.lines.len()), (9, 0));
}

#[test]
fn bad_reports_are_refused_with_where() {
    assert_eq!(
        parse_report("URLBase: http://h/\n\nNew: a\n"),
        Err(ReportError::NoSequenceNumber)
    );
    assert_eq!(
        parse_report("SequenceNumber: 1\n\nNew: a\n"),
        Err(ReportError::NoUrlBase)
    );
    assert_eq!(
        parse_report("SequenceNumber: 1\nURLBase: http://h/\n\nMoved[x]: a\n"),
        Err(ReportError::BadLine(4))
    );
    // The draft's optional date: without brackets.
    let r = parse_report("SequenceNumber: 2\nURLBase: http://h/\n\nDelete: a, b\n").unwrap();
    assert_eq!(
        r.lines[0],
        (
            ChangeKind::Delete,
            String::new(),
            vec!["a".into(), "b".into()]
        )
    );
}

#[test]
fn cgi_answers_read_back_through_the_html() {
    let text = "SequenceNumber: 0\nURLBase: http://h/?a<b&c>\n\nNew[2026-01-01T00:00:00Z]: x\n";
    assert_eq!(answer_text(&html(text)).trim_start(), text);
    assert_eq!(answer_text("RegistrationKey: k"), "RegistrationKey: k");
}

fn reg(latency: &str, max: Option<&str>, heard_at: i64) -> Registration {
    Registration {
        collection: b"c".to_vec(),
        url_base: "http://h:8/".into(),
        cgi_url: "http://h:8/rup-cgi".into(),
        email: "r@example.org".into(),
        key: "k1".into(),
        latency: span(latency),
        max_query_span: max.map(span),
        seq: 3,
        heard_at,
    }
}

#[test]
fn sequence_numbers_decide_apply_drop_or_recover() {
    // 3.2: numbers step by one; 3.3.3: a jump means reports were lost.
    assert_eq!(intake(3, 3), Intake::Stale);
    assert_eq!(intake(3, 2), Intake::Stale);
    assert_eq!(intake(3, 4), Intake::Next);
    assert_eq!(intake(3, 6), Intake::Gap);
    assert_eq!(intake(0, 1), Intake::Next);
}

#[test]
fn a_silence_and_the_recovery_span_follow_the_latency() {
    let r = reg("1-day", Some("4-week"), 1_000_000);
    // Two periods and the margin without a report.
    assert!(!r.overdue(1_000_000 + 2 * 86_400 + 10));
    assert!(r.overdue(1_000_000 + 2 * 86_400 + 11));
    // Back to the last report plus one period, rounded up to whole days.
    assert_eq!(r.recovery_span(1_000_000 + 3_600), Some(span("2-day")));
    assert_eq!(r.recovery_span(1_000_000 + 86_400), Some(span("2-day")));
    assert_eq!(r.recovery_span(1_000_000 + 86_401), Some(span("3-day")));
    // Past MaxQuerySpan: too far back for GetIndex.
    assert_eq!(
        r.recovery_span(1_000_000 + 27 * 86_400),
        Some(span("28-day"))
    );
    assert_eq!(r.recovery_span(1_000_000 + 27 * 86_400 + 1), None);
    let s = reg("2-second", Some("3-second"), 100);
    assert_eq!(s.recovery_span(101), Some(span("3-second")));
    assert_eq!(s.recovery_span(102), None);
    assert!(s.covers(b"http://h:8/a.html"));
    assert!(!s.covers(b"http://h:80/a.html"));
}

#[test]
fn the_latency_asked_for_is_one_offered() {
    let offered = [Unit::Day, Unit::Second, Unit::Week];
    assert_eq!(
        pick_latency(&offered, Some(span("2-week"))),
        Some(span("2-week"))
    );
    // 3.1.2: a unit not offered would be refused: the shortest offered instead.
    assert_eq!(
        pick_latency(&offered, Some(span("1-hour"))),
        Some(span("1-second"))
    );
    assert_eq!(pick_latency(&offered, None), Some(span("1-second")));
    assert_eq!(pick_latency(&[], None), None);
}

#[test]
fn registrations_survive_reopening_and_removal_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Book::open(dir.path()).unwrap();
    let mut a = reg("1-second", None, 5);
    b.put(a.clone()).unwrap();
    let mut other = reg("1-day", Some("4-week"), 7);
    other.url_base = "https://x/".into();
    b.put(other.clone()).unwrap();
    a.seq = 9;
    b.put(a.clone()).unwrap();
    drop(b);
    let mut b = Book::open(dir.path()).unwrap();
    assert_eq!(b.get(b"c", "http://h:8/"), Some(&a));
    assert_eq!(b.for_url_base("https://x/"), [other]);
    b.remove(b"c", "https://x/").unwrap();
    drop(b);
    let b = Book::open(dir.path()).unwrap();
    assert_eq!(b.all().count(), 1);
    assert!(b.get(b"c", "https://x/").is_none());
}

#[test]
fn the_rup_section_turns_the_robot_on_and_is_checked() {
    use crate::config::{parse_xml, CollectionConfig, RupRobot};
    let conf = |section: &str| {
        let xml = format!(
            "<CrawlerConfig><DomainSpecification name=\"c\"><section name=\"rup\">{section}\
             </section></DomainSpecification></CrawlerConfig>"
        );
        let (_, dict) = parse_xml(&xml).unwrap().remove(0);
        CollectionConfig::from_dict("c", &dict).map(|c| c.rup)
    };
    let email = "<attrib name=\"robot_email\" type=\"string\"> r@example.org </attrib>";
    assert_eq!(
        conf(email),
        Ok(Some(RupRobot {
            robot_email: "r@example.org".into(),
            latency: None,
        }))
    );
    let with_latency = format!("{email}<attrib name=\"latency\" type=\"string\">2-day</attrib>");
    assert_eq!(
        conf(&with_latency).unwrap().unwrap().latency,
        Some(span("2-day"))
    );
    let off = format!("{email}<attrib name=\"enabled\" type=\"boolean\">no</attrib>");
    assert_eq!(conf(&off), Ok(None));
    assert_eq!(conf(""), Ok(None));
    let bad = conf("<attrib name=\"robot_email\" type=\"string\">not an address</attrib>");
    assert!(bad.unwrap_err().to_string().contains("rup.robot_email"));
    let bad = conf(&format!(
        "{email}<attrib name=\"latency\" type=\"string\">fortnight</attrib>"
    ));
    assert!(bad.unwrap_err().to_string().contains("rup.latency"));
}
