use std::time::{Duration, Instant};

use super::extract::{self, Kind};
use super::*;

const HTML: Option<&[u8]> = Some(b"text/html; charset=utf-8");

fn page(title: &str, body: &str) -> Vec<u8> {
    format!(
        "<!DOCTYPE html><html><head><title>{title}</title>\
         <style>.x {{ color: zebracolor }}</style>\
         <script>var hidden = \"scriptword\";</script></head>\
         <body><h1>{title}</h1><p>{body}</p><!-- commentword --></body></html>"
    )
    .into_bytes()
}

fn put<'a>(uri: &'a str, body: &'a [u8]) -> Op<'a> {
    Op::Put(Doc {
        uri,
        time: 1_700_000_000,
        checksum: &[0xab; 16],
        content_type: HTML,
        body,
    })
}

fn uris(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.uri.as_str()).collect()
}

#[test]
fn extraction_keeps_visible_text_and_the_title() {
    let t = extract::text(HTML, &page("The Title", "Visible &amp; <b>bo</b>ld words"));
    assert_eq!(t.title, "The Title");
    assert_eq!(t.body, "The Title Visible & bold words");
    // Script, style and comments are not shown, so not indexed.
    for hidden in ["scriptword", "zebracolor", "commentword"] {
        assert!(!t.body.contains(hidden), "{hidden} in {:?}", t.body);
    }
    // Block elements separate words.
    let t = extract::html(b"<p>one</p><p>two</p><br>three <span>fo</span>ur");
    assert_eq!(t.body, "one two three four");
}

#[test]
fn extraction_by_content_type() {
    assert_eq!(extract::kind(Some(b"TEXT/HTML"), b""), Kind::Html);
    assert_eq!(
        extract::kind(Some(b"application/xhtml+xml"), b""),
        Kind::Html
    );
    assert_eq!(extract::kind(Some(b"text/plain"), b"<html>"), Kind::Plain);
    assert_eq!(extract::kind(Some(b"image/png"), b"abc"), Kind::Binary);
    assert_eq!(extract::kind(None, b"  <!DOCTYPE html><p>x"), Kind::Html);
    assert_eq!(extract::kind(None, b"just words"), Kind::Plain);
    assert_eq!(extract::kind(None, &[0xff, 0xfe, 0x00, 0x80]), Kind::Binary);
    let t = extract::text(Some(b"text/plain"), b"  <b>plain</b>\n\ttext ");
    assert_eq!(t.body, "<b>plain</b> text");
    assert_eq!(
        extract::text(Some(b"image/gif"), b"GIF89a words"),
        Default::default()
    );
    // Truncated or hostile markup is read without a panic.
    for bad in [
        &b"<scr"[..],
        b"<script>never closed",
        b"<title>x",
        b"<<<>>>&#xffffffff;",
    ] {
        let _ = extract::text(HTML, bad);
    }
}

#[test]
fn dir_names_cannot_leave_the_search_folder() {
    let d = Path::new("/data");
    assert_eq!(dir(d, "web"), Path::new("/data/search/web"));
    assert_eq!(dir(d, "../x"), Path::new("/data/search/%2E.%2Fx"));
    assert_eq!(dir(d, "a/b"), Path::new("/data/search/a%2Fb"));
    assert_eq!(dir(d, "v1.2"), Path::new("/data/search/v1.2"));
}

#[test]
fn indexes_searches_ranked_with_snippets() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ft, stale) = FullText::open(tmp.path(), 0).unwrap();
    assert_eq!(stale, Some(Stale::Missing));
    ft.rebuild(std::iter::empty(), 0).unwrap();
    let a = page("Gardening", "tomato tomato tomato grow in summer");
    let b = page("Cooking", "a tomato soup and bread");
    let c = page("Cars", "engines and wheels");
    ft.apply(&put("http://a.example/g", &a), 1).unwrap();
    ft.apply(&put("http://b.example/c", &b), 2).unwrap();
    ft.apply(&put("http://c.example/x", &c), 3).unwrap();
    // Nothing is seen before the commit.
    assert!(ft.search("tomato", 10).unwrap().is_empty());
    ft.commit().unwrap();
    assert_eq!(ft.committed(), 3);
    let hits = ft.search("tomato", 10).unwrap();
    assert_eq!(uris(&hits), ["http://a.example/g", "http://b.example/c"]);
    assert!(hits[0].score > hits[1].score);
    assert_eq!(hits[0].title, "Gardening");
    assert!(hits[0].snippet.contains("tomato"), "{:?}", hits[0].snippet);
    assert!(
        hits[1].snippet.contains("tomato soup"),
        "{:?}",
        hits[1].snippet
    );
    // The title counts: a word in it finds the page.
    assert_eq!(
        uris(&ft.search("cars", 10).unwrap()),
        ["http://c.example/x"]
    );
    // Hidden text is not indexed.
    assert!(ft.search("scriptword", 10).unwrap().is_empty());
    assert!(ft.search("zebracolor", 10).unwrap().is_empty());
    // Every word must match; the site field, exact.
    assert!(ft.search("tomato engines", 10).unwrap().is_empty());
    assert_eq!(
        uris(&ft.search("site:b.example tomato", 10).unwrap()),
        ["http://b.example/c"]
    );
    // The URI exactly, and the fetch time by range (docs/search.md "Queries").
    assert_eq!(
        uris(&ft.search("uri:\"http://c.example/x\"", 10).unwrap()),
        ["http://c.example/x"]
    );
    assert_eq!(
        ft.search("fetch_time:[1700000000 TO *]", 10).unwrap().len(),
        3
    );
    assert!(ft
        .search("fetch_time:[1800000000 TO *]", 10)
        .unwrap()
        .is_empty());
    // Limit, and query syntax errors taken as words, not refused.
    assert_eq!(ft.search("tomato", 1).unwrap().len(), 1);
    assert_eq!(ft.search("tomato AND (", 10).unwrap().len(), 2);
    assert!(ft.search("", 10).unwrap().is_empty());
}

#[test]
fn update_replaces_and_remove_deletes() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ft, _) = FullText::open(tmp.path(), 0).unwrap();
    let old = page("Old", "apple orchard");
    let new = page("New", "banana plantation");
    ft.apply(&put("http://a.example/", &old), 1).unwrap();
    ft.commit().unwrap();
    assert_eq!(ft.search("apple", 10).unwrap().len(), 1);
    // Update: replaced by URI, in the same batch as an add of another document.
    ft.apply(&put("http://a.example/", &new), 2).unwrap();
    ft.apply(&put("http://b.example/", &old), 3).unwrap();
    ft.commit().unwrap();
    assert_eq!(ft.len(), 2);
    assert_eq!(
        uris(&ft.search("apple", 10).unwrap()),
        ["http://b.example/"]
    );
    assert_eq!(
        uris(&ft.search("banana", 10).unwrap()),
        ["http://a.example/"]
    );
    // Put then remove in one batch leaves nothing.
    ft.apply(&put("http://c.example/", &new), 4).unwrap();
    ft.apply(
        &Op::Remove {
            uri: "http://c.example/",
        },
        5,
    )
    .unwrap();
    ft.apply(
        &Op::Remove {
            uri: "http://b.example/",
        },
        6,
    )
    .unwrap();
    ft.commit().unwrap();
    assert_eq!(ft.len(), 1);
    assert!(ft.search("apple", 10).unwrap().is_empty());
    assert_eq!(
        uris(&ft.search("banana", 10).unwrap()),
        ["http://a.example/"]
    );
}

#[test]
fn reopen_keeps_and_a_stale_position_asks_for_a_rebuild() {
    let tmp = tempfile::tempdir().unwrap();
    let body = page("Kept", "persistent words");
    {
        let (mut ft, _) = FullText::open(tmp.path(), 0).unwrap();
        ft.apply(&put("http://a.example/", &body), 7).unwrap();
        ft.commit().unwrap();
    }
    // The same position: kept as it is.
    let (ft, stale) = FullText::open(tmp.path(), 7).unwrap();
    assert_eq!(stale, None);
    assert_eq!(ft.committed(), 7);
    assert_eq!(ft.search("persistent", 10).unwrap().len(), 1);
    drop(ft);
    // The log went on without the index (a crash between commits): behind.
    let (mut ft, stale) = FullText::open(tmp.path(), 9).unwrap();
    assert_eq!(stale, Some(Stale::Position(7, 9)));
    assert!(ft.is_empty(), "a stale index is emptied");
    let other = page("Rebuilt", "fresh words");
    let docs = [
        Doc {
            uri: "http://a.example/",
            time: 5,
            checksum: &[1; 16],
            content_type: HTML,
            body: &other,
        },
        Doc {
            uri: "http://b.example/",
            time: 5,
            checksum: &[2; 16],
            content_type: Some(b"text/plain"),
            body: b"persistent plain",
        },
    ];
    assert_eq!(ft.rebuild(docs, 9).unwrap(), 2);
    assert_eq!(ft.committed(), 9);
    assert_eq!(
        uris(&ft.search("persistent", 10).unwrap()),
        ["http://b.example/"]
    );
    drop(ft);
    // The log lost a tail the index covers: beyond.
    let (ft, stale) = FullText::open(tmp.path(), 4).unwrap();
    assert_eq!(stale, Some(Stale::Position(9, 4)));
    assert!(ft.is_empty());
}

#[test]
fn a_corrupt_directory_asks_for_a_rebuild() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let (mut ft, _) = FullText::open(tmp.path(), 0).unwrap();
        ft.apply(&put("http://a.example/", &page("T", "words")), 1)
            .unwrap();
        ft.commit().unwrap();
    }
    std::fs::write(tmp.path().join("meta.json"), b"{ not json").unwrap();
    let (mut ft, stale) = FullText::open(tmp.path(), 1).unwrap();
    assert!(matches!(stale, Some(Stale::Corrupt(_))), "{stale:?}");
    ft.rebuild(std::iter::empty(), 1).unwrap();
    drop(ft);
    assert_eq!(FullText::open(tmp.path(), 1).unwrap().1, None);

    // A segment file cut short.
    let (mut ft, _) = FullText::open(tmp.path(), 1).unwrap();
    ft.apply(&put("http://a.example/", &page("T", "words")), 2)
        .unwrap();
    ft.commit().unwrap();
    drop(ft);
    for e in std::fs::read_dir(tmp.path()).unwrap() {
        let p = e.unwrap().path();
        if p.extension()
            .is_some_and(|x| x == "store" || x == "idx" || x == "term")
        {
            std::fs::write(&p, b"x").unwrap();
        }
    }
    let (_, stale) = FullText::open(tmp.path(), 2).unwrap();
    assert!(matches!(stale, Some(Stale::Corrupt(_))), "{stale:?}");
}

#[test]
fn commits_by_time_and_batch_not_per_operation() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut ft, _) = FullText::open(tmp.path(), 0).unwrap();
    let t0 = Instant::now();
    let body = page("T", "clockword");
    assert!(!ft.tick(t0).unwrap(), "nothing to commit");
    ft.apply_at(&put("http://a.example/", &body), 1, t0)
        .unwrap();
    assert_eq!(ft.next_commit(), Some(t0 + COMMIT_INTERVAL));
    assert!(!ft.tick(t0 + Duration::from_millis(10)).unwrap());
    assert!(ft.search("clockword", 10).unwrap().is_empty());
    assert!(ft.tick(t0 + COMMIT_INTERVAL).unwrap());
    assert_eq!(ft.search("clockword", 10).unwrap().len(), 1);
    assert_eq!(ft.next_commit(), None);
    // A full batch commits at once.
    let uris: Vec<String> = (0..COMMIT_OPS)
        .map(|i| format!("http://b.example/{i}"))
        .collect();
    for (i, u) in uris.iter().enumerate() {
        ft.apply_at(&put(u, b"batchword"), 2 + i as u64, t0)
            .unwrap();
    }
    assert!(ft.tick(t0).unwrap());
    assert_eq!(ft.len(), 1 + COMMIT_OPS as u64);
    assert_eq!(ft.committed(), 1 + COMMIT_OPS as u64);
}

#[test]
fn a_read_only_searcher_sees_the_writers_commits() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(Searcher::open(tmp.path()).is_err(), "no index yet");
    let (mut ft, _) = FullText::open(tmp.path(), 0).unwrap();
    ft.apply(&put("http://a.example/", &page("T", "first")), 1)
        .unwrap();
    ft.commit().unwrap();
    let s = Searcher::open(tmp.path()).unwrap();
    assert_eq!(s.position(), 1);
    assert_eq!(uris(&s.search("first", 10).unwrap()), ["http://a.example/"]);
    // Opened while the writer holds its lock, and as of the last commit only.
    ft.apply(&put("http://b.example/", &page("T", "second")), 2)
        .unwrap();
    let s = Searcher::open(tmp.path()).unwrap();
    assert!(s.search("second", 10).unwrap().is_empty());
    ft.commit().unwrap();
    let s = Searcher::open(tmp.path()).unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(
        uris(&s.search("second", 10).unwrap()),
        ["http://b.example/"]
    );
    // The writer's reader handle, from another thread.
    let r = ft.reader();
    let hits = std::thread::spawn(move || r.search("second", 10).unwrap())
        .join()
        .unwrap();
    assert_eq!(uris(&hits), ["http://b.example/"]);
}
