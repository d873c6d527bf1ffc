//! Sitemaps as sitemaps.org writes them: its sample files, indexes, gzip, the limits, the scope
//! rule and lastmod.

use std::io::Write;

use url::Url;

use super::*;

fn url(s: &str) -> Url {
    Url::parse(s).unwrap()
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn urlset(n: usize, host: &str) -> String {
    let mut s = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n",
    );
    for i in 0..n {
        s.push_str(&format!("<url><loc>http://{host}/p{i}.html</loc></url>\n"));
    }
    s.push_str("</urlset>\n");
    s
}

/// The sample of sitemaps.org "Sample XML Sitemap" (entities escaped as it asks).
const SAMPLE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
   <url>
      <loc>http://www.example.com/</loc>
      <lastmod>2005-01-01</lastmod>
      <changefreq>monthly</changefreq>
      <priority>0.8</priority>
   </url>
   <url>
      <loc>http://www.example.com/catalog?item=12&amp;desc=vacation_hawaii</loc>
      <changefreq>weekly</changefreq>
   </url>
   <url>
      <loc>http://www.example.com/catalog?item=73&amp;desc=vacation_new_zealand</loc>
      <lastmod>2004-12-23</lastmod>
      <changefreq>weekly</changefreq>
   </url>
   <url>
      <loc>http://www.example.com/catalog?item=74&amp;desc=vacation_newfoundland</loc>
      <lastmod>2004-12-23T18:00:15+00:00</lastmod>
      <priority>0.3</priority>
   </url>
   <url>
      <loc><![CDATA[http://www.example.com/catalog?item=83&desc=vacation_usa]]></loc>
      <lastmod>2004-11-23</lastmod>
   </url>
</urlset>"#;

#[test]
fn the_sitemaps_org_sample_reads_with_entities_and_lastmod() {
    let m = read(
        SAMPLE.as_bytes(),
        &Scope::of_file(&url("http://www.example.com/sitemap.xml")),
    )
    .unwrap();
    assert_eq!(m.kind, Kind::UrlSet);
    let got: Vec<(&str, Option<i64>)> = m
        .entries
        .iter()
        .map(|e| (e.loc.as_str(), e.lastmod))
        .collect();
    assert_eq!(
        got,
        vec![
            ("http://www.example.com/", Some(1_104_537_600)),
            (
                "http://www.example.com/catalog?item=12&desc=vacation_hawaii",
                None
            ),
            (
                "http://www.example.com/catalog?item=73&desc=vacation_new_zealand",
                Some(1_103_760_000)
            ),
            (
                "http://www.example.com/catalog?item=74&desc=vacation_newfoundland",
                Some(1_103_760_000 + 18 * 3600 + 15)
            ),
            (
                "http://www.example.com/catalog?item=83&desc=vacation_usa",
                Some(1_101_168_000)
            ),
        ]
    );
    assert_eq!((m.out_of_scope, m.bad), (0, 0));
}

/// sitemaps.org "Using Sitemap index files".
#[test]
fn a_sitemap_index_lists_sitemaps_of_its_own_host() {
    let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
   <sitemap>
      <loc>http://www.example.com/sitemap1.xml.gz</loc>
      <lastmod>2004-10-01T18:23:17+00:00</lastmod>
   </sitemap>
   <sitemap>
      <loc>http://www.example.com/deep/sitemap2.xml.gz</loc>
   </sitemap>
   <sitemap>
      <loc>http://elsewhere.example/sitemap3.xml.gz</loc>
   </sitemap>
</sitemapindex>"#;
    let m = read(
        xml.as_bytes(),
        &Scope::of_file(&url("http://www.example.com/sub/index.xml")),
    )
    .unwrap();
    assert_eq!(m.kind, Kind::Index);
    let locs: Vec<&str> = m.entries.iter().map(|e| e.loc.as_str()).collect();
    assert_eq!(
        locs,
        [
            "http://www.example.com/sitemap1.xml.gz",
            "http://www.example.com/deep/sitemap2.xml.gz"
        ]
    );
    assert_eq!(m.entries[0].lastmod, Some(1_096_654_997));
    assert_eq!(m.out_of_scope, 1);
}

/// "Sitemap file location": a file lists URLs of its host under its directory; robots.txt
/// widens that to the host.
#[test]
fn a_loc_outside_the_file_s_directory_or_host_is_skipped() {
    let xml = r#"<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>http://example.com/catalog/show?item=23</loc></url>
<url><loc>http://example.com/catalog/sub/x.html</loc></url>
<url><loc>http://example.com/image/show?item=23</loc></url>
<url><loc>https://example.com/catalog/secure</loc></url>
<url><loc>http://example.com:8080/catalog/port</loc></url>
<url><loc>http://www.example.com/catalog/www</loc></url>
<url><loc>/catalog/relative</loc></url>
<url><loc>ftp://example.com/catalog/f</loc></url>
<url><lastmod>2005-01-01</lastmod></url>
</urlset>"#;
    let file = url("http://example.com/catalog/sitemap.xml");
    let m = read(xml.as_bytes(), &Scope::of_file(&file)).unwrap();
    let locs: Vec<&str> = m.entries.iter().map(|e| e.loc.as_str()).collect();
    assert_eq!(
        locs,
        [
            "http://example.com/catalog/show?item=23",
            "http://example.com/catalog/sub/x.html"
        ]
    );
    assert_eq!((m.out_of_scope, m.bad), (4, 3));
    let wide = read(xml.as_bytes(), &Scope::of_host(&file)).unwrap();
    assert_eq!(wide.entries.len(), 3);
    assert_eq!(wide.out_of_scope, 3);
}

#[test]
fn gzip_bodies_are_inflated() {
    let plain = urlset(3, "h");
    let m = read(
        &gzip(plain.as_bytes()),
        &Scope::of_host(&url("http://h/s.xml.gz")),
    )
    .unwrap();
    assert_eq!(m.entries.len(), 3);
    assert!(matches!(
        read(
            &[0x1f, 0x8b, 8, 0, 1, 2, 3],
            &Scope::of_host(&url("http://h/"))
        ),
        Err(SitemapError::Gzip(_))
    ));
}

/// "Sitemap file format": 50,000 URLs and 50 MB uncompressed per file; a larger file is refused
/// (never read past the limit: the inflated size stops one byte over it).
#[test]
fn the_limits_refuse_a_file_over_50000_urls_or_50_mb() {
    let scope = Scope::of_host(&url("http://h/sitemap.xml"));
    assert_eq!(
        read(urlset(MAX_URLS, "h").as_bytes(), &scope)
            .unwrap()
            .entries
            .len(),
        MAX_URLS
    );
    assert_eq!(
        read(urlset(MAX_URLS + 1, "h").as_bytes(), &scope),
        Err(SitemapError::TooManyUrls { limit: MAX_URLS })
    );
    // Out-of-scope entries count against the limit too.
    let mut mixed = urlset(MAX_URLS, "h");
    mixed.insert_str(mixed.len() - 10, "<url><loc>http://x/y</loc></url>");
    assert_eq!(
        read(mixed.as_bytes(), &scope),
        Err(SitemapError::TooManyUrls { limit: MAX_URLS })
    );
    // 50 MB and one byte of white space inside the root element.
    let mut big = String::from("<urlset>");
    big.push_str(&" ".repeat(MAX_BYTES - big.len() - "</urlset>".len() + 1));
    big.push_str("</urlset>");
    assert_eq!(big.len(), MAX_BYTES + 1);
    assert_eq!(
        read(big.as_bytes(), &scope),
        Err(SitemapError::TooLarge { limit: MAX_BYTES })
    );
    // Compressed it is a few kilobytes: refused all the same once inflated past the limit.
    let packed = gzip(big.as_bytes());
    assert!(packed.len() < 1 << 20);
    assert_eq!(
        read(&packed, &scope),
        Err(SitemapError::TooLarge { limit: MAX_BYTES })
    );
    big.truncate(MAX_BYTES - "</urlset>".len());
    big.push_str("</urlset>");
    assert_eq!(
        read(&gzip(big.as_bytes()), &scope).unwrap().entries.len(),
        0
    );
}

#[test]
fn what_is_not_a_sitemap_is_an_error_never_a_panic() {
    let scope = Scope::of_host(&url("http://h/"));
    assert_eq!(
        read(b"<html><body>no</body></html>", &scope),
        Err(SitemapError::NotASitemap("html".into()))
    );
    assert_eq!(
        read(b"", &scope),
        Err(SitemapError::NotASitemap(String::new()))
    );
    assert!(matches!(
        read(b"<urlset><url><loc>x</urlset>", &scope),
        Err(SitemapError::Xml(_))
    ));
    assert!(matches!(
        read(b"<urlset>\xff\xfe</urlset>", &scope),
        Err(SitemapError::Xml(_))
    ));
    assert!(matches!(
        read(
            b"<urlset><url><loc>http://h/&bogus;</loc></url></urlset>",
            &scope
        ),
        Err(SitemapError::Xml(_))
    ));
    // Empty root, unknown elements, a bad lastmod and an over-long loc are tolerated.
    assert_eq!(read(b"<urlset/>", &scope).unwrap().entries, vec![]);
    let long = format!("http://h/{}", "a".repeat(MAX_LOC));
    let xml = format!(
        "<urlset><url><loc>http://h/a</loc><lastmod>soon</lastmod><x:y xmlns:x=\"u\"/></url>\
         <url><loc>{long}</loc></url></urlset>"
    );
    let m = read(xml.as_bytes(), &scope).unwrap();
    assert_eq!(
        m.entries,
        vec![Entry {
            loc: "http://h/a".into(),
            lastmod: None
        }]
    );
    assert_eq!(m.bad, 1);
    // Random bytes (a fuzz-style smoke test): an answer, never a panic.
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..2000 {
        let n = rng.usize(0..200);
        let mut b: Vec<u8> = SAMPLE.as_bytes()[..rng.usize(0..SAMPLE.len())].to_vec();
        b.extend((0..n).map(|_| rng.u8(..)));
        let _ = read(&b, &scope);
    }
}
