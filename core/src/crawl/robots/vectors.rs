//! robots.txt test vectors: the examples and rules of RFC 9309 and the cases of Google's
//! robots.txt parser tests (github.com/google/robotstxt, robots_test.cc), each a file, a
//! product token, a URL and whether the URL may be fetched.
//!
//! `Source::Rfc` vectors follow what RFC 9309 requires (and Google's tests of it, the `ID_`
//! cases); `Source::Google` vectors are Google's own extensions and readings that the RFC leaves
//! open (a missing colon, `index.html` as a directory, a product token up to its first space,
//! lines cut at 16,664 bytes). A crate is judged on the RFC vectors; the Google ones are counted
//! beside them.

/// Where a vector comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// RFC 9309 or a Google test of it.
    Rfc,
    /// A Google-only behaviour.
    Google,
}

/// A robots.txt file and the verdicts expected for it.
pub(crate) struct Case {
    /// The RFC section or Google test it comes from.
    pub name: &'static str,
    pub source: Source,
    pub txt: &'static [u8],
    /// (product token, URL, allowed)
    pub checks: &'static [(&'static str, &'static str, bool)],
}

use Source::{Google, Rfc};

const GROUPS: &[u8] = b"allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\ndisallow: /\nallow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\nuser-agent: FooBot\nallow: /z/\ndisallow: /\n";

const RFC_5_1: &[u8] = b"User-Agent: *\nDisallow: *.gif$\nDisallow: /example/\nAllow: /publications/\n\nUser-Agent: foobot\nDisallow:/\nAllow:/example/page.html\nAllow:/example/allowed.gif\n\nUser-Agent: barbot\nUser-Agent: bazbot\nDisallow: /example/page.html\n\nUser-Agent: quxbot\n\nEOF\n";

pub(crate) const CASES: &[Case] = &[
    // RFC 9309 5.1: the simple example.
    Case {
        name: "RFC 9309 5.1 simple example",
        source: Rfc,
        txt: RFC_5_1,
        checks: &[
            ("foobot", "http://h/example/page.html", true),
            ("foobot", "http://h/example/allowed.gif", true),
            ("foobot", "http://h/example/other.html", false),
            ("foobot", "http://h/publications/", false),
            ("barbot", "http://h/example/page.html", false),
            ("barbot", "http://h/example/other.html", true),
            ("bazbot", "http://h/example/page.html", false),
            ("bazbot", "http://h/x.gif", true),
            ("quxbot", "http://h/example/page.html", true),
            ("quxbot", "http://h/x.gif", true),
            ("otherbot", "http://h/example/page.html", false),
            ("otherbot", "http://h/images/x.gif", false),
            ("otherbot", "http://h/images/x.gif?v=1", true),
            ("otherbot", "http://h/publications/a", true),
            ("otherbot", "http://h/", true),
        ],
    },
    // RFC 9309 5.2: the longest match wins.
    Case {
        name: "RFC 9309 5.2 longest match",
        source: Rfc,
        txt: b"User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n",
        checks: &[
            ("foobot", "http://h/example/page/", true),
            ("foobot", "http://h/example/page/x.gif", true),
            ("foobot", "http://h/example/page/disallowed.gif", false),
        ],
    },
    // RFC 9309 2.2.2: /robots.txt is implicitly allowed.
    Case {
        name: "RFC 9309 2.2.2 robots.txt implicitly allowed",
        source: Rfc,
        txt: b"User-agent: *\nDisallow: /\n",
        checks: &[
            ("foobot", "http://h/robots.txt", true),
            ("foobot", "http://h/x", false),
        ],
    },
    // RFC 9309 2.2.2: percent-encoding before comparison (the table of the section).
    Case {
        name: "RFC 9309 2.2.2 percent-encoding",
        source: Rfc,
        txt: b"User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?baz=quz\nAllow: /foo/bar/\xe3\x83\x84\nAllow: /a/%E3%83%84\nAllow: /b/%62%61%7A\n",
        checks: &[
            ("FooBot", "http://h/foo/bar?baz=quz", true),
            ("FooBot", "http://h/foo/bar/%E3%83%84", true),
            ("FooBot", "http://h/a/%E3%83%84", true),
            ("FooBot", "http://h/b/baz", true),
            ("FooBot", "http://h/b/%62%61%7A", true),
        ],
    },
    // RFC 9309 2.2.1: the product token is matched case-insensitively and without its version.
    Case {
        name: "RFC 9309 2.2.1 product token",
        source: Rfc,
        txt: b"User-agent: ExampleBot\nDisallow: /private/\n\nUser-agent: *\nDisallow: /\n",
        checks: &[
            ("ExampleBot", "http://h/public", true),
            ("examplebot", "http://h/private/x", false),
            ("EXAMPLEBOT", "http://h/public", true),
            ("Example", "http://h/public", false),
            ("ExampleBotX", "http://h/public", false),
        ],
    },
    // Google ID_LineSyntax_Line
    Case {
        name: "ID_LineSyntax_Line correct",
        source: Rfc,
        txt: b"user-agent: FooBot\ndisallow: /\n",
        checks: &[("FooBot", "http://foo.bar/x/y", false)],
    },
    Case {
        name: "ID_LineSyntax_Line incorrect",
        source: Rfc,
        txt: b"foo: FooBot\nbar: /\n",
        checks: &[("FooBot", "http://foo.bar/x/y", true)],
    },
    Case {
        name: "GoogleOnly missing colon accepted",
        source: Google,
        txt: b"user-agent FooBot\ndisallow /\n",
        checks: &[("FooBot", "http://foo.bar/x/y", false)],
    },
    // Google ID_LineSyntax_Groups
    Case {
        name: "ID_LineSyntax_Groups",
        source: Rfc,
        txt: GROUPS,
        checks: &[
            ("FooBot", "http://foo.bar/x/b", true),
            ("FooBot", "http://foo.bar/z/d", true),
            ("FooBot", "http://foo.bar/y/c", false),
            ("BarBot", "http://foo.bar/y/c", true),
            ("BarBot", "http://foo.bar/w/a", true),
            ("BarBot", "http://foo.bar/z/d", false),
            ("BazBot", "http://foo.bar/z/d", true),
            ("FooBot", "http://foo.bar/foo/bar/", false),
            ("BarBot", "http://foo.bar/foo/bar/", false),
            ("BazBot", "http://foo.bar/foo/bar/", false),
        ],
    },
    // Google ID_LineSyntax_Groups_OtherRules
    Case {
        name: "ID_LineSyntax_Groups_OtherRules sitemap",
        source: Rfc,
        txt: b"User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n",
        checks: &[
            ("FooBot", "http://foo.bar/", false),
            ("BarBot", "http://foo.bar/", false),
        ],
    },
    Case {
        name: "ID_LineSyntax_Groups_OtherRules unknown",
        source: Rfc,
        txt: b"User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n",
        checks: &[
            ("FooBot", "http://foo.bar/", false),
            ("BarBot", "http://foo.bar/", false),
        ],
    },
    // Google ID_REPLineNamesCaseInsensitive
    Case {
        name: "ID_REPLineNamesCaseInsensitive upper",
        source: Rfc,
        txt: b"USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
        checks: &[
            ("FooBot", "http://foo.bar/x/y", true),
            ("FooBot", "http://foo.bar/a/b", false),
        ],
    },
    Case {
        name: "ID_REPLineNamesCaseInsensitive lower",
        source: Rfc,
        txt: b"user-agent: FooBot\nallow: /x/\ndisallow: /\n",
        checks: &[
            ("FooBot", "http://foo.bar/x/y", true),
            ("FooBot", "http://foo.bar/a/b", false),
        ],
    },
    Case {
        name: "ID_REPLineNamesCaseInsensitive camel",
        source: Rfc,
        txt: b"uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
        checks: &[
            ("FooBot", "http://foo.bar/x/y", true),
            ("FooBot", "http://foo.bar/a/b", false),
        ],
    },
    // RFC 9309 2.2.1: product tokens are matched case-insensitively.
    Case {
        name: "RFC 9309 2.2.1 user-agent value case-insensitive",
        source: Rfc,
        txt: b"User-Agent: FOOBOT\nAllow: /x/\nDisallow: /\n\nUser-Agent: barbot\nDisallow: /\n\nUser-Agent: BaZbOt\nDisallow: /\n",
        checks: &[
            ("FooBot", "http://foo.bar/x/y", true),
            ("FooBot", "http://foo.bar/a/b", false),
            ("foobot", "http://foo.bar/a/b", false),
            ("BarBot", "http://foo.bar/a/b", false),
            ("BARBOT", "http://foo.bar/a/b", false),
            ("bazbot", "http://foo.bar/a/b", false),
        ],
    },
    // Google ID_UserAgentValueCaseInsensitive: its values ("FOO BAR") are not product tokens
    // (RFC 9309 2.2.1 allows no space), and they match "Foo" only through Google's reading of a
    // value up to its first space, so they count as Google's.
    Case {
        name: "ID_UserAgentValueCaseInsensitive upper",
        source: Google,
        txt: b"User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n",
        checks: &[
            ("Foo", "http://foo.bar/x/y", true),
            ("Foo", "http://foo.bar/a/b", false),
            ("foo", "http://foo.bar/x/y", true),
            ("foo", "http://foo.bar/a/b", false),
        ],
    },
    Case {
        name: "ID_UserAgentValueCaseInsensitive lower",
        source: Google,
        txt: b"User-Agent: foo bar\nAllow: /x/\nDisallow: /\n",
        checks: &[
            ("Foo", "http://foo.bar/x/y", true),
            ("Foo", "http://foo.bar/a/b", false),
            ("foo", "http://foo.bar/x/y", true),
            ("foo", "http://foo.bar/a/b", false),
        ],
    },
    Case {
        name: "ID_UserAgentValueCaseInsensitive camel",
        source: Google,
        txt: b"User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n",
        checks: &[
            ("Foo", "http://foo.bar/x/y", true),
            ("Foo", "http://foo.bar/a/b", false),
            ("foo", "http://foo.bar/x/y", true),
            ("foo", "http://foo.bar/a/b", false),
        ],
    },
    // Google GoogleOnly_AcceptUserAgentUpToFirstSpace
    Case {
        name: "GoogleOnly_AcceptUserAgentUpToFirstSpace",
        source: Google,
        txt: b"User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n",
        checks: &[
            ("Foo", "http://foo.bar/x/y", true),
            ("Foo Bar", "http://foo.bar/x/y", false),
        ],
    },
    // Google ID_GlobalGroups_Secondary
    Case {
        name: "ID_GlobalGroups_Secondary empty",
        source: Rfc,
        txt: b"",
        checks: &[("FooBot", "http://foo.bar/x/y", true)],
    },
    Case {
        name: "ID_GlobalGroups_Secondary global",
        source: Rfc,
        txt: b"user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n",
        checks: &[
            ("FooBot", "http://foo.bar/x/y", false),
            ("BarBot", "http://foo.bar/x/y", true),
        ],
    },
    Case {
        name: "ID_GlobalGroups_Secondary only specific",
        source: Rfc,
        txt: b"user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\nuser-agent: BazBot\ndisallow: /\n",
        checks: &[("QuxBot", "http://foo.bar/x/y", true)],
    },
    // Google ID_AllowDisallow_Value_CaseSensitive
    Case {
        name: "ID_AllowDisallow_Value_CaseSensitive lower",
        source: Rfc,
        txt: b"user-agent: FooBot\ndisallow: /x/\n",
        checks: &[("FooBot", "http://foo.bar/x/y", false)],
    },
    Case {
        name: "ID_AllowDisallow_Value_CaseSensitive upper",
        source: Rfc,
        txt: b"user-agent: FooBot\ndisallow: /X/\n",
        checks: &[("FooBot", "http://foo.bar/x/y", true)],
    },
    // Google ID_LongestMatch
    Case {
        name: "ID_LongestMatch 1",
        source: Rfc,
        txt: b"user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n",
        checks: &[("FooBot", "http://foo.bar/x/page.html", false)],
    },
    Case {
        name: "ID_LongestMatch 2",
        source: Rfc,
        txt: b"user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
        checks: &[
            ("FooBot", "http://foo.bar/x/page.html", true),
            ("FooBot", "http://foo.bar/x/", false),
        ],
    },
    Case {
        name: "ID_LongestMatch 3 empty allow and disallow",
        source: Rfc,
        txt: b"user-agent: FooBot\ndisallow: \nallow: \n",
        checks: &[("FooBot", "http://foo.bar/x/page.html", true)],
    },
    Case {
        name: "ID_LongestMatch 4 equal allow wins",
        source: Rfc,
        txt: b"user-agent: FooBot\ndisallow: /\nallow: /\n",
        checks: &[("FooBot", "http://foo.bar/x/page.html", true)],
    },
    Case {
        name: "ID_LongestMatch 5",
        source: Rfc,
        txt: b"user-agent: FooBot\ndisallow: /x\nallow: /x/\n",
        checks: &[
            ("FooBot", "http://foo.bar/x", false),
            ("FooBot", "http://foo.bar/x/", true),
        ],
    },
    Case {
        name: "ID_LongestMatch 6 equal allow wins",
        source: Rfc,
        txt: b"user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n",
        checks: &[("FooBot", "http://foo.bar/x/page.html", true)],
    },
    Case {
        name: "ID_LongestMatch 7 wildcard",
        source: Rfc,
        txt: b"user-agent: FooBot\nallow: /page\ndisallow: /*.html\n",
        checks: &[
            ("FooBot", "http://foo.bar/page.html", false),
            ("FooBot", "http://foo.bar/page", true),
        ],
    },
    Case {
        name: "ID_LongestMatch 8 wildcard",
        source: Rfc,
        txt: b"user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n",
        checks: &[
            ("FooBot", "http://foo.bar/x/page.html", true),
            ("FooBot", "http://foo.bar/x/y.html", false),
        ],
    },
    Case {
        name: "ID_LongestMatch 9 specific group",
        source: Rfc,
        txt: b"User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
        checks: &[
            ("FooBot", "http://foo.bar/x/page", true),
            ("FooBot", "http://foo.bar/y/page", false),
        ],
    },
    // Google ID_Encoding
    Case {
        name: "ID_Encoding query unencoded",
        source: Rfc,
        txt: b"User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n",
        checks: &[(
            "FooBot",
            "http://foo.bar/foo/bar?qux=taz&baz=http://foo.bar?tar&par",
            true,
        )],
    },
    Case {
        name: "ID_Encoding 3-byte character",
        source: Rfc,
        txt: b"User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/\xe3\x83\x84\n",
        checks: &[("FooBot", "http://foo.bar/foo/bar/%E3%83%84", true)],
    },
    Case {
        name: "ID_Encoding percent-encoded 3-byte character",
        source: Rfc,
        txt: b"User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n",
        checks: &[("FooBot", "http://foo.bar/foo/bar/%E3%83%84", true)],
    },
    Case {
        name: "GoogleOnly raw UTF-8 URL and encoded unreserved octets compared as they are",
        source: Google,
        txt: b"User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/\xe3\x83\x84\nAllow: /a/%62%61%7A\n",
        checks: &[
            ("FooBot", "http://foo.bar/foo/bar/\u{30c4}", false),
            ("FooBot", "http://foo.bar/a/baz", false),
            ("FooBot", "http://foo.bar/a/%62%61%7A", true),
        ],
    },
    // Google ID_SpecialCharacters
    Case {
        name: "ID_SpecialCharacters *",
        source: Rfc,
        txt: b"User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n",
        checks: &[
            ("FooBot", "http://foo.bar/foo/bar/quz", false),
            ("FooBot", "http://foo.bar/foo/quz", true),
            ("FooBot", "http://foo.bar/foo//quz", true),
            ("FooBot", "http://foo.bar/foo/bax/quz", true),
        ],
    },
    Case {
        name: "ID_SpecialCharacters $",
        source: Rfc,
        txt: b"User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n",
        checks: &[
            ("FooBot", "http://foo.bar/foo/bar", false),
            ("FooBot", "http://foo.bar/foo/bar/qux", true),
            ("FooBot", "http://foo.bar/foo/bar/", true),
            ("FooBot", "http://foo.bar/foo/bar/baz", true),
        ],
    },
    Case {
        name: "ID_SpecialCharacters #",
        source: Rfc,
        txt: b"User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
        checks: &[
            ("FooBot", "http://foo.bar/foo/bar", true),
            ("FooBot", "http://foo.bar/foo/quz", false),
        ],
    },
    // Google GoogleOnly_IndexHTMLisDirectory
    Case {
        name: "GoogleOnly_IndexHTMLisDirectory",
        source: Google,
        txt: b"User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n",
        checks: &[
            ("foobot", "http://foo.com/allowed-slash/", true),
            ("foobot", "http://foo.com/allowed-slash/index.htm", false),
            ("foobot", "http://foo.com/allowed-slash/index.html", true),
            ("foobot", "http://foo.com/anyother-url", false),
        ],
    },
    // Google GoogleOnly_DocumentationChecks (Google's documented matching, all RFC 9309 rules)
    Case {
        name: "DocumentationChecks /fish",
        source: Rfc,
        txt: b"user-agent: FooBot\ndisallow: /\nallow: /fish\n",
        checks: &[
            ("FooBot", "http://foo.bar/bar", false),
            ("FooBot", "http://foo.bar/fish", true),
            ("FooBot", "http://foo.bar/fish.html", true),
            ("FooBot", "http://foo.bar/fish/salmon.html", true),
            ("FooBot", "http://foo.bar/fishheads", true),
            ("FooBot", "http://foo.bar/fishheads/yummy.html", true),
            ("FooBot", "http://foo.bar/fish.html?id=anything", true),
            ("FooBot", "http://foo.bar/Fish.asp", false),
            ("FooBot", "http://foo.bar/catfish", false),
            ("FooBot", "http://foo.bar/?id=fish", false),
        ],
    },
    Case {
        name: "DocumentationChecks /fish*",
        source: Rfc,
        txt: b"user-agent: FooBot\ndisallow: /\nallow: /fish*\n",
        checks: &[
            ("FooBot", "http://foo.bar/bar", false),
            ("FooBot", "http://foo.bar/fish", true),
            ("FooBot", "http://foo.bar/fish.html", true),
            ("FooBot", "http://foo.bar/fish/salmon.html", true),
            ("FooBot", "http://foo.bar/fishheads", true),
            ("FooBot", "http://foo.bar/fishheads/yummy.html", true),
            ("FooBot", "http://foo.bar/fish.html?id=anything", true),
            ("FooBot", "http://foo.bar/Fish.bar", false),
            ("FooBot", "http://foo.bar/catfish", false),
            ("FooBot", "http://foo.bar/?id=fish", false),
        ],
    },
    Case {
        name: "DocumentationChecks /fish/",
        source: Rfc,
        txt: b"user-agent: FooBot\ndisallow: /\nallow: /fish/\n",
        checks: &[
            ("FooBot", "http://foo.bar/bar", false),
            ("FooBot", "http://foo.bar/fish/", true),
            ("FooBot", "http://foo.bar/fish/salmon", true),
            ("FooBot", "http://foo.bar/fish/?salmon", true),
            ("FooBot", "http://foo.bar/fish/salmon.html", true),
            ("FooBot", "http://foo.bar/fish/?id=anything", true),
            ("FooBot", "http://foo.bar/fish", false),
            ("FooBot", "http://foo.bar/fish.html", false),
            ("FooBot", "http://foo.bar/Fish/Salmon.html", false),
        ],
    },
    Case {
        name: "DocumentationChecks /*.php",
        source: Rfc,
        txt: b"user-agent: FooBot\ndisallow: /\nallow: /*.php\n",
        checks: &[
            ("FooBot", "http://foo.bar/bar", false),
            ("FooBot", "http://foo.bar/filename.php", true),
            ("FooBot", "http://foo.bar/folder/filename.php", true),
            ("FooBot", "http://foo.bar/folder/filename.php?parameters", true),
            ("FooBot", "http://foo.bar//folder/any.php.file.html", true),
            ("FooBot", "http://foo.bar/filename.php/", true),
            ("FooBot", "http://foo.bar/index?f=filename.php/", true),
            ("FooBot", "http://foo.bar/php/", false),
            ("FooBot", "http://foo.bar/index?php", false),
            ("FooBot", "http://foo.bar/windows.PHP", false),
        ],
    },
    Case {
        name: "DocumentationChecks /*.php$",
        source: Rfc,
        txt: b"user-agent: FooBot\ndisallow: /\nallow: /*.php$\n",
        checks: &[
            ("FooBot", "http://foo.bar/bar", false),
            ("FooBot", "http://foo.bar/filename.php", true),
            ("FooBot", "http://foo.bar/folder/filename.php", true),
            ("FooBot", "http://foo.bar/filename.php?parameters", false),
            ("FooBot", "http://foo.bar/filename.php/", false),
            ("FooBot", "http://foo.bar/filename.php5", false),
            ("FooBot", "http://foo.bar/php/", false),
            ("FooBot", "http://foo.bar/filename?php", false),
            ("FooBot", "http://foo.bar/aaaphpaaa", false),
            ("FooBot", "http://foo.bar//windows.PHP", false),
        ],
    },
    Case {
        name: "DocumentationChecks /fish*.php",
        source: Rfc,
        txt: b"user-agent: FooBot\ndisallow: /\nallow: /fish*.php\n",
        checks: &[
            ("FooBot", "http://foo.bar/bar", false),
            ("FooBot", "http://foo.bar/fish.php", true),
            ("FooBot", "http://foo.bar/fishheads/catfish.php?parameters", true),
            ("FooBot", "http://foo.bar/Fish.PHP", false),
        ],
    },
    Case {
        name: "DocumentationChecks precedence /p",
        source: Rfc,
        txt: b"user-agent: FooBot\nallow: /p\ndisallow: /\n",
        checks: &[("FooBot", "http://example.com/page", true)],
    },
    Case {
        name: "DocumentationChecks precedence /folder",
        source: Rfc,
        txt: b"user-agent: FooBot\nallow: /folder\ndisallow: /folder\n",
        checks: &[("FooBot", "http://example.com/folder/page", true)],
    },
    Case {
        name: "DocumentationChecks precedence /*.htm",
        source: Rfc,
        txt: b"user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n",
        checks: &[("FooBot", "http://example.com/page.htm", false)],
    },
    Case {
        name: "DocumentationChecks precedence /$",
        source: Rfc,
        txt: b"user-agent: FooBot\nallow: /$\ndisallow: /\n",
        checks: &[
            ("FooBot", "http://example.com/", true),
            ("FooBot", "http://example.com/page.html", false),
        ],
    },
    // Google ID_LinesNumbersAreCountedCorrectly: every line ending.
    Case {
        name: "ID_LinesNumbersAreCountedCorrectly CRLF",
        source: Rfc,
        txt: b"User-Agent: foo\r\nAllow: /some/path\r\nUser-Agent: bar\r\n\r\n\r\nDisallow: /\r\n",
        checks: &[
            ("foo", "http://h/some/path", true),
            ("bar", "http://h/x", false),
        ],
    },
    Case {
        name: "ID_LinesNumbersAreCountedCorrectly CR",
        source: Rfc,
        txt: b"User-Agent: foo\rAllow: /some/path\rUser-Agent: bar\r\r\rDisallow: /\r",
        checks: &[
            ("foo", "http://h/some/path", true),
            ("bar", "http://h/x", false),
        ],
    },
    Case {
        name: "ID_LinesNumbersAreCountedCorrectly no final newline",
        source: Rfc,
        txt: b"User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /",
        checks: &[
            ("foo", "http://h/some/path", true),
            ("bar", "http://h/x", false),
        ],
    },
    Case {
        name: "ID_LinesNumbersAreCountedCorrectly mixed",
        source: Rfc,
        txt: b"User-Agent: foo\nAllow: /some/path\r\nUser-Agent: bar\n\r\n\nDisallow: /",
        checks: &[
            ("foo", "http://h/some/path", true),
            ("bar", "http://h/x", false),
        ],
    },
    // Google ID_UTF8ByteOrderMarkIsSkipped
    Case {
        name: "ID_UTF8ByteOrderMarkIsSkipped full BOM",
        source: Rfc,
        txt: b"\xef\xbb\xbfUser-Agent: foo\nDisallow: /AnyValue\n",
        checks: &[("foo", "http://h/AnyValue", false)],
    },
    Case {
        name: "GoogleOnly partial BOM",
        source: Google,
        txt: b"\xef\xbbUser-Agent: foo\nDisallow: /AnyValue\n",
        checks: &[("foo", "http://h/AnyValue", false)],
    },
    Case {
        name: "ID_UTF8ByteOrderMarkIsSkipped BOM mid-file is garbage",
        source: Rfc,
        txt: b"User-Agent: foo\n\xef\xbb\xbfDisallow: /AnyValue\n",
        checks: &[("foo", "http://h/AnyValue", true)],
    },
    // Google ID_NonStandardLineExample_Sitemap: a sitemap line anywhere ends no group.
    Case {
        name: "ID_NonStandardLineExample_Sitemap",
        source: Rfc,
        txt: b"Sitemap: http://foo.bar/sitemap.xml\nUser-Agent: foo\nAllow: /some/path\nDisallow: /\nUser-Agent: bar\n\n\n",
        checks: &[
            ("foo", "http://h/some/path", true),
            ("foo", "http://h/other", false),
            ("bar", "http://h/other", true),
        ],
    },
];

/// Google's GoogleOnly_LineTooLong: a line is cut at 8 * 2083 bytes and what remains of a
/// pattern still matches.
pub(crate) fn long_line_cases() -> Vec<(Vec<u8>, String, bool)> {
    const MAX_LINE: usize = 2083 * 8;
    let mut out = Vec::new();
    let disallow = "disallow: ";
    let mut long = String::from("/x/");
    while long.len() < MAX_LINE - 3 - disallow.len() + 1 {
        long.push('a');
    }
    let txt = format!("user-agent: FooBot\n{disallow}{long}/qux\n");
    out.push((
        txt.clone().into_bytes(),
        "http://foo.bar/fux".to_string(),
        true,
    ));
    out.push((txt.into_bytes(), format!("http://foo.bar{long}/fux"), false));
    out
}

/// Runs every vector through `allowed(file, product token, url)`: the failures, by source.
pub(crate) fn failures(allowed: impl Fn(&[u8], &str, &str) -> bool) -> Vec<(Source, String)> {
    let mut failed = Vec::new();
    for case in CASES {
        for &(agent, url, want) in case.checks {
            if allowed(case.txt, agent, url) != want {
                failed.push((
                    case.source,
                    format!("{}: {agent} {url} (want {want})", case.name),
                ));
            }
        }
    }
    for (txt, url, want) in long_line_cases() {
        if allowed(&txt, "FooBot", &url) != want {
            let name = format!(
                "GoogleOnly_LineTooLong: {} (want {want})",
                &url[..40.min(url.len())]
            );
            failed.push((Source::Google, name));
        }
    }
    failed
}

/// Checks counted, by source.
pub(crate) fn counts() -> (usize, usize) {
    let mut rfc = 0;
    let mut google = long_line_cases().len();
    for case in CASES {
        match case.source {
            Source::Rfc => rfc += case.checks.len(),
            Source::Google => google += case.checks.len(),
        }
    }
    (rfc, google)
}
