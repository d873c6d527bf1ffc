//! The WARC writer against WARC 1.1: record layout byte for byte, digests, rotation and names
//! (annex C), revisit profiles (6.7), the CDXJ index, and recovery of a torn last member.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::*;

const DATE: i64 = 1_764_063_960_123; // 2025-11-25T09:46:00.123Z
const REQUEST: &[u8] = b"GET /a HTTP/1.1\r\nHost: example.com\r\n\r\n";
const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nhi";

fn exchange(uri: &str, response: &[u8], date_ms: i64) -> Exchange {
    Exchange {
        uri: uri.to_string(),
        ip: Some("10.0.0.1".parse().unwrap()),
        date_ms,
        request: REQUEST.to_vec(),
        response: response.to_vec(),
        truncated: false,
    }
}

/// Every gzip member of a file, decompressed, with its offset and length.
fn members(path: &Path) -> Vec<(u64, u64, Vec<u8>)> {
    let data = fs::read(path).unwrap();
    let mut rest: &[u8] = &data;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let start = data.len() - rest.len();
        let mut d = flate2::bufread::GzDecoder::new(rest);
        let mut v = Vec::new();
        d.read_to_end(&mut v).unwrap();
        rest = d.into_inner();
        out.push((start as u64, (data.len() - rest.len() - start) as u64, v));
    }
    out
}

/// The records with their `<urn:uuid:...>` ids numbered in order of first appearance.
fn numbered(records: &[Vec<u8>]) -> String {
    let text: String = records
        .iter()
        .map(|r| String::from_utf8(r.clone()).unwrap())
        .collect();
    let mut ids: Vec<String> = Vec::new();
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("<urn:uuid:") {
        out.push_str(&rest[..i]);
        let end = rest[i..].find('>').unwrap() + i + 1;
        let id = rest[i..end].to_string();
        assert_eq!(id.len(), "<urn:uuid:>".len() + 36, "{id}");
        let n = ids.iter().position(|x| *x == id).unwrap_or_else(|| {
            ids.push(id.clone());
            ids.len() - 1
        });
        out.push_str(&format!("<urn:uuid:{n}>"));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

#[test]
fn digests_are_sha1_in_base32() {
    // Known SHA-1 values (FIPS 180 "abc", the empty string) in RFC 4648 base32.
    assert_eq!(sha1_base32(&[]), "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ");
    assert_eq!(
        sha1_base32(&[b"abc"]),
        "sha1:VGMT4NSHA2AWVOR6EVYXQUGCNSONBWE5"
    );
    assert_eq!(sha1_base32(&[b"a", b"bc"]), sha1_base32(&[b"abc"]));
    assert_eq!(warc_date(DATE), "2025-11-25T09:46:00Z");
    assert_eq!(timestamp14(DATE), "20251125094600");
    assert_eq!(timestamp17(DATE), "20251125094600123");
}

#[test]
fn record_layout_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = WarcOptions::new(dir.path(), "crawl", "host1");
    opts.info.push(("isPartOf".into(), "web".into()));
    let mut w = WarcWriter::open(opts).unwrap();
    w.write(&exchange("http://example.com/a", RESPONSE, DATE))
        .unwrap();
    w.close().unwrap();
    let name = "crawl-20251125094600123-00000-host1.warc.gz";
    let recs = members(&dir.path().join(name));
    assert_eq!(recs.len(), 3);
    let texts: Vec<Vec<u8>> = recs.iter().map(|r| r.2.clone()).collect();
    let info = format!(
        "software: crawlfleet/{}\r\nformat: WARC File Format 1.1\r\nconformsTo: \
         http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n\
         hostname: host1\r\nisPartOf: web\r\n",
        env!("CARGO_PKG_VERSION")
    );
    let expected = format!(
        "WARC/1.1\r\nWARC-Type: warcinfo\r\nWARC-Record-ID: <urn:uuid:0>\r\n\
         WARC-Date: 2025-11-25T09:46:00Z\r\nWARC-Filename: {name}\r\n\
         WARC-Block-Digest: {}\r\nContent-Type: application/warc-fields\r\n\
         Content-Length: {}\r\n\r\n{info}\r\n\r\n\
         WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:1>\r\n\
         WARC-Date: 2025-11-25T09:46:00Z\r\nWARC-Target-URI: http://example.com/a\r\n\
         WARC-IP-Address: 10.0.0.1\r\nWARC-Warcinfo-ID: <urn:uuid:0>\r\n\
         WARC-Payload-Digest: sha1:YIVV7ELYGQTASQUNN5I3FRNPJQF542SC\r\n\
         WARC-Block-Digest: sha1:SMOFRIAXAATVGUJBCP73ZJUVCNSJSSX4\r\n\
         Content-Type: application/http;msgtype=response\r\nContent-Length: 65\r\n\r\n\
         HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nhi\r\n\r\n\
         WARC/1.1\r\nWARC-Type: request\r\nWARC-Record-ID: <urn:uuid:2>\r\n\
         WARC-Date: 2025-11-25T09:46:00Z\r\nWARC-Target-URI: http://example.com/a\r\n\
         WARC-IP-Address: 10.0.0.1\r\nWARC-Concurrent-To: <urn:uuid:1>\r\n\
         WARC-Warcinfo-ID: <urn:uuid:0>\r\n\
         WARC-Block-Digest: sha1:JPQRWHDN4K2M2JOW2HFKK5MJFTLKZYVX\r\n\
         Content-Type: application/http;msgtype=request\r\nContent-Length: 38\r\n\r\n\
         GET /a HTTP/1.1\r\nHost: example.com\r\n\r\n\r\n\r\n",
        sha1_base32(&[info.as_bytes()]),
        info.len()
    );
    assert_eq!(numbered(&texts), expected);
    // The index: one line for the response, pointing at its member.
    let cdxj = fs::read_to_string(dir.path().join("crawl-20251125094600123-00000-host1.cdxj"));
    assert_eq!(
        cdxj.unwrap(),
        format!(
            "com,example)/a 20251125094600 {{\"url\":\"http://example.com/a\",\"mime\":\
             \"text/html\",\"status\":\"200\",\"digest\":\"YIVV7ELYGQTASQUNN5I3FRNPJQF542SC\",\
             \"length\":\"{}\",\"offset\":\"{}\",\"filename\":\"{name}\"}}\n",
            recs[1].1, recs[1].0
        )
    );
    assert_eq!(
        w.stats(),
        WarcStats {
            records: 3,
            bytes: fs::metadata(dir.path().join(name)).unwrap().len(),
            revisits: 0,
            files: 1,
        }
    );
}

#[test]
fn files_rotate_at_the_size_limit_with_increasing_serials() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = WarcOptions::new(dir.path(), "rot", "h");
    opts.max_size = 1500;
    let mut w = WarcWriter::open(opts.clone()).unwrap();
    for i in 0..12 {
        let body = format!("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\npage{i:02}");
        let uri = format!("http://example.com/p{i}");
        w.write(&exchange(&uri, body.as_bytes(), DATE + i * 1000))
            .unwrap();
        // While written, a file carries .open.
        assert_eq!(files(dir.path(), ".warc.gz.open").len(), 1);
    }
    drop(w);
    assert!(files(dir.path(), ".open").is_empty());
    let warcs = files(dir.path(), ".warc.gz");
    assert!(warcs.len() >= 3, "{warcs:?}");
    let mut uris = Vec::new();
    for (serial, path) in warcs.iter().enumerate() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("rot-2025112509"), "{name}");
        assert!(name.ends_with(&format!("-{serial:05}-h.warc.gz")), "{name}");
        let recs = members(path);
        // Every file opens with its warcinfo; a file stops growing once past the limit.
        assert!(recs[0]
            .2
            .starts_with(b"WARC/1.1\r\nWARC-Type: warcinfo\r\n"));
        let size = fs::metadata(path).unwrap().len();
        let last = recs.last().unwrap();
        assert!(last.0 < 1500 || recs.len() == 3, "{name}: {size}");
        let cdxj = fs::read_to_string(path.with_extension("").with_extension("cdxj")).unwrap();
        for line in cdxj.lines() {
            let json: serde_json::Value =
                serde_json::from_str(line.splitn(3, ' ').nth(2).unwrap()).unwrap();
            let offset: u64 = json["offset"].as_str().unwrap().parse().unwrap();
            let rec = recs
                .iter()
                .find(|r| r.0 == offset)
                .expect("a member at the offset");
            assert_eq!(json["length"].as_str().unwrap(), rec.1.to_string());
            assert!(rec.2.starts_with(b"WARC/1.1\r\nWARC-Type: response\r\n"));
            assert_eq!(json["filename"], name.as_str());
            uris.push(json["url"].as_str().unwrap().to_string());
        }
    }
    uris.sort();
    let mut want: Vec<String> = (0..12)
        .map(|i| format!("http://example.com/p{i}"))
        .collect();
    want.sort();
    assert_eq!(uris, want);
    // A writer opened again continues the serials.
    let mut w = WarcWriter::open(opts).unwrap();
    w.write(&exchange("http://example.com/z", RESPONSE, DATE))
        .unwrap();
    w.close().unwrap();
    let n = warcs.len();
    assert!(files(dir.path(), &format!("-{n:05}-h.warc.gz")).len() == 1);
}

/// The value of a field in a record's head.
fn field<'a>(record: &'a str, name: &str) -> Option<&'a str> {
    let head = &record[..record.find("\r\n\r\n").unwrap()];
    head.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .map(str::trim_end)
}

#[test]
fn revisit_records_of_both_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::open(WarcOptions::new(dir.path(), "rv", "h")).unwrap();
    let not_modified = b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n";
    w.write(&exchange("http://example.com/a", RESPONSE, DATE))
        .unwrap();
    w.write(&exchange(
        "http://example.com/a",
        not_modified,
        DATE + 60_000,
    ))
    .unwrap();
    w.write(&exchange(
        "http://example.com/copy",
        RESPONSE,
        DATE + 120_000,
    ))
    .unwrap();
    w.write(&exchange("http://example.com/never", not_modified, DATE))
        .unwrap();
    assert_eq!(w.stats().revisits, 3);
    w.close().unwrap();
    let path = &files(dir.path(), ".warc.gz")[0];
    let recs: Vec<String> = members(path)
        .into_iter()
        .map(|r| String::from_utf8(r.2).unwrap())
        .collect();
    let first = &recs[1];
    let first_id = field(first, "WARC-Record-ID").unwrap();
    // WARC 1.1 6.7.2: a 304 to a conditional request; the block is the 304 as received.
    let nm = &recs[3];
    assert_eq!(field(nm, "WARC-Type"), Some("revisit"));
    assert_eq!(field(nm, "WARC-Profile"), Some(PROFILE_NOT_MODIFIED));
    assert_eq!(field(nm, "WARC-Refers-To"), Some(first_id));
    assert_eq!(
        field(nm, "WARC-Refers-To-Target-URI"),
        Some("http://example.com/a")
    );
    assert_eq!(
        field(nm, "WARC-Refers-To-Date"),
        Some("2025-11-25T09:46:00Z")
    );
    assert!(nm.ends_with("\r\n\r\nHTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n\r\n\r\n"));
    assert_eq!(
        field(nm, "WARC-Block-Digest").unwrap(),
        sha1_base32(&[not_modified])
    );
    // 6.7.1: the same payload under another URI; the block is the HTTP head alone.
    let ip = &recs[5];
    assert_eq!(field(ip, "WARC-Profile"), Some(PROFILE_IDENTICAL));
    assert_eq!(field(ip, "WARC-Refers-To"), Some(first_id));
    assert_eq!(
        field(ip, "WARC-Refers-To-Target-URI"),
        Some("http://example.com/a")
    );
    assert_eq!(
        field(ip, "WARC-Target-URI"),
        Some("http://example.com/copy")
    );
    assert_eq!(
        field(ip, "WARC-Payload-Digest"),
        field(first, "WARC-Payload-Digest")
    );
    let head = &RESPONSE[..RESPONSE.len() - 2];
    assert_eq!(
        field(ip, "WARC-Block-Digest").unwrap(),
        sha1_base32(&[head])
    );
    assert!(ip.ends_with("Content-Length: 2\r\n\r\n\r\n\r\n"));
    // A 304 whose earlier capture this writer did not make names none.
    let unknown = &recs[7];
    assert_eq!(field(unknown, "WARC-Profile"), Some(PROFILE_NOT_MODIFIED));
    assert_eq!(field(unknown, "WARC-Refers-To"), None);
    assert_eq!(field(unknown, "WARC-Payload-Digest"), None);
    let cdxj = fs::read_to_string(path.with_extension("").with_extension("cdxj")).unwrap();
    assert_eq!(cdxj.matches("\"mime\":\"warc/revisit\"").count(), 3);
}

#[test]
fn a_torn_last_member_is_cut_off_on_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let opts = WarcOptions::new(dir.path(), "crash", "h");
    let mut w = WarcWriter::open(opts.clone()).unwrap();
    w.write(&exchange("http://example.com/a", RESPONSE, DATE))
        .unwrap();
    w.write(&exchange("http://example.com/b", RESPONSE, DATE))
        .unwrap();
    w.sync().unwrap();
    // A crash: the writer never closes; half a member follows the whole ones.
    std::mem::forget(w);
    let open = files(dir.path(), ".warc.gz.open").pop().unwrap();
    let whole = fs::metadata(&open).unwrap().len();
    let torn = gzip_member(&record_bytes(&[("WARC-Type", "response")], &[RESPONSE]));
    let mut f = fs::OpenOptions::new().append(true).open(&open).unwrap();
    f.write_all(&torn[..torn.len() / 2]).unwrap();
    drop(f);

    let mut w = WarcWriter::open(opts).unwrap();
    assert!(files(dir.path(), ".open").is_empty());
    let closed = files(dir.path(), ".warc.gz");
    assert_eq!(closed.len(), 1);
    assert_eq!(fs::metadata(&closed[0]).unwrap().len(), whole);
    assert_eq!(members(&closed[0]).len(), 5);
    // The index is rebuilt from the records.
    let cdxj = fs::read_to_string(closed[0].with_extension("").with_extension("cdxj")).unwrap();
    let lines: Vec<&str> = cdxj.lines().collect();
    assert_eq!(lines.len(), 2, "{cdxj}");
    assert!(lines[0].starts_with("com,example)/a 20251125094600 {\"url\":\"http://example.com/a\",\"mime\":\"text/html\",\"status\":\"200\",\"digest\":\"YIVV7ELYGQTASQUNN5I3FRNPJQF542SC\""));
    // Writing resumes in a new file.
    w.write(&exchange("http://example.com/c", RESPONSE, DATE))
        .unwrap();
    w.close().unwrap();
    assert_eq!(files(dir.path(), ".warc.gz").len(), 2);
    assert_eq!(files(dir.path(), "-00001-h.warc.gz").len(), 1);

    // A file with not one whole member is removed.
    let empty = dir
        .path()
        .join("crash-20251125094600123-00009-h.warc.gz.open");
    fs::write(&empty, &torn[..10]).unwrap();
    assert_eq!(recover(&empty).unwrap(), 0);
    assert!(!empty.exists());
}

#[test]
fn truncated_bodies_are_marked() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WarcWriter::open(WarcOptions::new(dir.path(), "t", "h")).unwrap();
    let mut ex = exchange(
        "http://example.com/big",
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc",
        DATE,
    );
    ex.truncated = true;
    w.write(&ex).unwrap();
    w.close().unwrap();
    let recs = members(&files(dir.path(), ".warc.gz")[0]);
    let resp = String::from_utf8(recs[1].2.clone()).unwrap();
    assert_eq!(field(&resp, "WARC-Truncated"), Some("length"));
}

#[test]
fn surt_keys() {
    assert_eq!(
        surt("http://www.Example.com/A/b?z=1&a=2"),
        "com,example)/a/b?a=2&z=1"
    );
    assert_eq!(surt("https://example.com:8443/"), "com,example:8443)/");
    assert_eq!(surt("http://example.com:80/x"), "com,example)/x");
    assert_eq!(
        surt("http://127.0.0.1:8080/p.html"),
        "127.0.0.1:8080)/p.html"
    );
    assert_eq!(surt("http://www.com/"), "com,www)/");
}

#[test]
fn interim_responses_are_skipped() {
    let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Type: Text/HTML; charset=utf-8\r\n\r\nno";
    let h = parse_response(raw);
    assert_eq!((h.status, h.mime.as_str()), (404, "text/html"));
    assert_eq!(&raw[h.start..h.start + 12], b"HTTP/1.1 404");
    assert_eq!(&raw[h.body..], b"no");
    let h = parse_response(b"garbage");
    assert_eq!((h.status, h.mime.as_str(), h.body), (0, "unk", 7));
}
