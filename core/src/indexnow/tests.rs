//! Submissions as the IndexNow protocol documentation writes them.

use super::*;

const KEY: &str = "7e3f6e8bc8a54e2b9a4f3c1d0e9b8a77";

fn json(host: &str, key: &str, loc: Option<&str>, urls: &[&str]) -> Vec<u8> {
    let mut v = serde_json::json!({"host": host, "key": key, "urlList": urls});
    if let Some(l) = loc {
        v["keyLocation"] = serde_json::Value::String(l.into());
    }
    v.to_string().into_bytes()
}

/// The documentation's JSON example ("Submitting a set of URLs").
#[test]
fn the_protocol_s_post_example_reads() {
    let body = format!(
        r#"{{
  "host": "www.example.org",
  "key": "{KEY}",
  "keyLocation": "https://www.example.org/{KEY}.txt",
  "urlList": [
      "https://www.example.org/url1",
      "https://www.example.org/folder/url2",
      "https://www.example.org/url3"
      ]
}}"#
    );
    let s = Submission::from_json(body.as_bytes()).unwrap();
    assert_eq!(s.host, "www.example.org");
    assert_eq!(s.urls.len(), 3);
    assert_eq!(s.key_url(), format!("https://www.example.org/{KEY}.txt"));
    let no_loc =
        Submission::from_json(&json("h.test", KEY, None, &["http://h.test:8080/a"])).unwrap();
    assert_eq!(no_loc.key_url(), format!("http://h.test:8080/{KEY}.txt"));
}

/// "Submitting one URL": GET with url and key.
#[test]
fn the_get_form_reads_one_url() {
    let q = format!("url=http%3A%2F%2Fwww.example.com%2Fproduct.html&key={KEY}");
    let s = Submission::from_query(&q).unwrap();
    assert_eq!(s.host, "www.example.com");
    assert_eq!(s.urls, ["http://www.example.com/product.html"]);
    assert_eq!(
        Submission::from_query(&format!("key={KEY}"))
            .unwrap_err()
            .status(),
        400
    );
    assert_eq!(
        Submission::from_query("url=http://h/a")
            .unwrap_err()
            .status(),
        400
    );
    assert_eq!(
        Submission::from_query(&format!("url=nope&key={KEY}"))
            .unwrap_err()
            .status(),
        400
    );
}

#[test]
fn status_codes_of_bad_submissions() {
    let status = |b: &[u8]| Submission::from_json(b).unwrap_err().status();
    // 400: not JSON, fields missing, no URL, too many, a URL that is not one.
    assert_eq!(status(b"{"), 400);
    assert_eq!(status(br#"{"key": "abcdefgh", "urlList": []}"#), 400);
    assert_eq!(status(&json("h", KEY, None, &[])), 400);
    assert_eq!(status(&json("h", KEY, None, &["not a url"])), 400);
    assert_eq!(status(&json("h", KEY, None, &["ftp://h/x"])), 400);
    let many: Vec<String> = (0..=MAX_URLS).map(|i| format!("http://h/{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert_eq!(status(&json("h", KEY, None, &many)), 400);
    assert!(Submission::from_json(&json("h", KEY, None, &many[..MAX_URLS])).is_ok());
    // 422: the key's format, URLs of another host, outside the key file's directory.
    for key in ["short", &"a".repeat(129), "has space1", "under_score"] {
        assert_eq!(status(&json("h", key, None, &["http://h/a"])), 422, "{key}");
    }
    assert!(valid_key("abcdefgh") && valid_key(&"A-9".repeat(42)));
    assert_eq!(
        status(&json("h", KEY, None, &["http://h/a", "http://other/b"])),
        422
    );
    assert_eq!(
        status(&json("h", KEY, Some("http://other/k.txt"), &["http://h/a"])),
        422
    );
    let loc = Some("http://h/catalog/key.txt");
    assert_eq!(status(&json("h", KEY, loc, &["http://h/image/x"])), 422);
    let s = Submission::from_json(&json("h", KEY, loc, &["http://h/catalog/x"])).unwrap();
    assert_eq!(s.key_url(), "http://h/catalog/key.txt");
}

#[test]
fn the_key_file_must_hold_the_key() {
    assert!(key_file_holds(format!("{KEY}\n").as_bytes(), KEY));
    assert!(!key_file_holds(b"something else", KEY));
    assert!(!key_file_holds(b"", KEY));
    assert!(!key_file_holds(format!("{KEY} {KEY}").as_bytes(), KEY));
}

#[test]
fn the_rate_limit_is_per_host_and_refills() {
    let mut r = RateLimit::new(1.0, 3, 100);
    assert!((0..3).all(|_| r.allow("a", 0.0)));
    assert!(!r.allow("a", 0.0));
    assert!(r.allow("b", 0.0));
    assert!(r.allow("a", 1.0));
    assert!(!r.allow("a", 1.0));
    // Bounded: many hosts, never more than max tracked.
    let mut r = RateLimit::new(1.0, 2, 10);
    for i in 0..1000 {
        assert!(r.allow(&format!("h{i}"), f64::from(i) / 1000.0));
    }
    assert!(r.hosts.len() <= 10);
}

#[test]
fn key_checks_are_cached_until_they_expire() {
    let s = Submission::from_json(&json("h", KEY, None, &["http://h/a"])).unwrap();
    let mut c = KeyCache::new(60.0, 2);
    assert_eq!(c.get(&s, 0.0), None);
    assert!(c.set(&s, KeyState::Pending, 0.0));
    assert_eq!(c.get(&s, 1000.0), Some(KeyState::Pending));
    c.set(&s, KeyState::Valid, 10.0);
    assert_eq!(c.get(&s, 69.0), Some(KeyState::Valid));
    assert_eq!(c.get(&s, 71.0), None);
    // Full of pending checks: a new one is refused (the caller answers 429).
    let other =
        |h: &str| Submission::from_json(&json(h, KEY, None, &[&format!("http://{h}/a")])).unwrap();
    assert!(c.set(&other("x"), KeyState::Pending, 100.0));
    assert!(c.set(&other("y"), KeyState::Pending, 100.0));
    assert!(!c.set(&other("z"), KeyState::Pending, 100.0));
}
