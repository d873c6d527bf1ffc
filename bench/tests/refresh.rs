//! `crawlfleet bench refresh` on a small web: one refresh cycle with conditional GETs only, one
//! with sitemaps (lastmod) and one with RUP (rup-server processes mailing their reports to the
//! nodes' SMTP receivers), each exact (the benchmark fails otherwise), in one run. Skipped when
//! nginx is missing (`.ci/run` installs it).

use crate::util::run_json;

#[test]
fn a_short_refresh_run_measures_conditional_gets_sitemaps_and_rup() {
    if std::process::Command::new("nginx")
        .arg("-v")
        .output()
        .is_err()
    {
        eprintln!("bench refresh: nginx is not installed; test skipped");
        return;
    }
    let args = [
        "refresh",
        "--web",
        "3:60",
        "--changed",
        "10%",
        "--nodes",
        "2",
        "--base",
        "127.96.0.1",
        "--timeout",
        "120",
        "--json",
    ];
    let v = run_json(&args);
    let expected = v["expected_pages"].as_u64().unwrap();
    assert_eq!(expected, 180, "{v}");
    let methods = v["methods"].as_array().unwrap();
    let by = |name: &str| {
        methods
            .iter()
            .find(|m| m["method"] == name)
            .unwrap_or_else(|| panic!("{name} in {v}"))
            .clone()
    };
    let (cond, maps, rup) = (by("conditional"), by("sitemaps"), by("rup"));
    let changed = cond["changed_pages"].as_u64().unwrap();
    assert_eq!(changed, 18, "{v}");
    for m in [&cond, &maps, &rup] {
        assert_eq!(m["complete"], true, "{m}");
        assert_eq!(m["modified"].as_u64(), Some(changed), "{m}");
        assert_eq!(m["repeated_pages"].as_u64(), Some(0), "{m}");
    }
    // Conditional GETs: every page asked, the unchanged ones answered 304.
    assert_eq!(cond["pages"].as_u64(), Some(expected), "{cond}");
    assert_eq!(
        cond["not_modified"].as_u64(),
        Some(expected - changed),
        "{cond}"
    );
    // Sitemaps: one per host, then exactly the changed pages; the rest skipped by lastmod.
    assert_eq!(maps["sitemap_requests"].as_u64(), Some(3), "{maps}");
    assert_eq!(maps["pages"].as_u64(), Some(changed), "{maps}");
    assert_eq!(maps["not_modified"].as_u64(), Some(0), "{maps}");
    assert_eq!(
        maps["skipped_by_lastmod"].as_u64(),
        Some(expected - changed),
        "{maps}"
    );
    assert!(
        maps["requests"].as_u64().unwrap() <= changed + 3 + 3,
        "{maps}"
    );
    // RUP: the reports named exactly the changed pages, each fetched once, nothing else asked
    // (the rupinfo.txt fetches and registrations were in the first crawl).
    assert_eq!(rup["pages"].as_u64(), Some(changed), "{rup}");
    assert_eq!(rup["requests"].as_u64(), Some(changed), "{rup}");
    assert_eq!(rup["report_paths"].as_u64(), Some(changed), "{rup}");
    assert_eq!(rup["not_modified"].as_u64(), Some(0), "{rup}");
    assert_eq!(rup["rup_requests"].as_u64(), Some(0), "{rup}");
    assert!(rup["reports"].as_u64().unwrap() >= 1, "{rup}");
}
