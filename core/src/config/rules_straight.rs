//! `regexp` rules of a case-sensitive rule set matched without the regex engine when the
//! pattern is a straight line: literals and greedy runs of one character class, each run
//! ending where the text leaves its class. `http://[^/]+/excluded/.*` is of this kind: the
//! literal `http://`, a run of characters other than `/`, the literal `/excluded/`, a run of
//! characters other than a line feed to the end. Such a pattern matches (anchored at both
//! ends, as a rule's regexp is) exactly when, piece by piece, each literal is where the text
//! stands and each run takes what its class allows, so one pass over the text decides it.
//!
//! A pattern is taken only when that pass is the regex crate's answer:
//! - a run is `C*` or `C+` of a class `C` (greedy or not: only whether it matches counts) that
//!   holds either every character above ASCII or none of them, so a run of characters is a run
//!   of bytes (a UTF-8 sequence's bytes are all above ASCII) and a run of one character or more
//!   is a run of one byte or more;
//! - a run is the last piece, or is followed by a literal that is the last piece (then the run
//!   takes what comes before that literal at the end), or by a literal whose first byte its
//!   class refuses (then the run ends at the first byte its class refuses);
//! - nothing else: no alternation, look-around (`^`, `$`, `\b`), bounded repetition, class
//!   alone, byte class or case-insensitive flag. Any other pattern goes to the regex set.

use regex_syntax::hir::{Class, Hir, HirKind};

/// One piece of a straight pattern.
#[derive(Clone, Debug)]
enum Piece {
    /// These bytes.
    Literal(Box<[u8]>),
    /// Bytes of the class (`holds`), at least one when `one`. `stop`: the one byte the class
    /// refuses, when it refuses one only (found by memchr).
    Run {
        holds: Box<[bool; 256]>,
        one: bool,
        stop: Option<u8>,
    },
}

/// A `regexp` rule's pattern matched in one pass.
#[derive(Clone, Debug)]
pub(super) struct Straight {
    pieces: Vec<Piece>,
}

/// The bytes of a run of `class`, when the class holds all of the characters above ASCII or
/// none.
fn run_bytes(class: &Class) -> Option<[bool; 256]> {
    let Class::Unicode(u) = class else {
        return None;
    };
    let mut holds = [false; 256];
    // Characters above ASCII the class holds, in ranges clipped at 0x80.
    let mut above = Vec::new();
    for r in u.ranges() {
        let (s, e) = (u32::from(r.start()), u32::from(r.end()));
        for c in s..=e.min(0x7f) {
            holds[c as usize] = true;
        }
        if e >= 0x80 {
            above.push((s.max(0x80), e));
        }
    }
    let all_above = match above.as_slice() {
        [] => false,
        [(0x80, 0x10ffff)] => true,
        _ => return None,
    };
    for b in holds.iter_mut().skip(0x80) {
        *b = all_above;
    }
    Some(holds)
}

/// Appends the pieces of `h`; false when `h` is not a straight pattern's part.
fn push(h: &Hir, out: &mut Vec<Piece>) -> bool {
    match h.kind() {
        HirKind::Empty => true,
        HirKind::Literal(l) => {
            match out.last_mut() {
                Some(Piece::Literal(prev)) => {
                    let mut joined = prev.to_vec();
                    joined.extend_from_slice(&l.0);
                    *prev = joined.into_boxed_slice();
                }
                _ => out.push(Piece::Literal(l.0.clone())),
            }
            true
        }
        HirKind::Capture(c) => push(&c.sub, out),
        HirKind::Concat(parts) => parts.iter().all(|p| push(p, out)),
        HirKind::Repetition(r) if r.min <= 1 && r.max.is_none() => {
            let HirKind::Class(class) = r.sub.kind() else {
                return false;
            };
            let Some(holds) = run_bytes(class) else {
                return false;
            };
            let refused: Vec<u8> = (0..=255u8).filter(|&b| !holds[b as usize]).collect();
            out.push(Piece::Run {
                holds: Box::new(holds),
                one: r.min == 1,
                stop: (refused.len() == 1).then(|| refused[0]),
            });
            true
        }
        _ => false,
    }
}

impl Straight {
    /// The straight form of `pattern` (a rule's regexp, without the anchors the rule adds),
    /// if it has one (see the module doc).
    pub fn compile(pattern: &str) -> Option<Straight> {
        let hir = regex_syntax::ParserBuilder::new()
            .build()
            .parse(pattern)
            .ok()?;
        let mut pieces = Vec::new();
        if !push(&hir, &mut pieces) {
            return None;
        }
        for (i, p) in pieces.iter().enumerate() {
            let Piece::Run { holds, .. } = p else {
                continue;
            };
            match pieces.get(i + 1) {
                None => {}
                Some(Piece::Literal(_)) if i + 2 == pieces.len() => {}
                Some(Piece::Literal(l)) if l.first().is_some_and(|&b| !holds[b as usize]) => {}
                _ => return None,
            }
        }
        Some(Straight { pieces })
    }

    /// True when the pattern matches the whole of `s`.
    pub fn is_match(&self, s: &[u8]) -> bool {
        let mut rest = s;
        let mut i = 0;
        while let Some(p) = self.pieces.get(i) {
            i += 1;
            match p {
                Piece::Literal(l) => match rest.strip_prefix(&l[..]) {
                    Some(r) => rest = r,
                    None => return false,
                },
                Piece::Run { holds, one, stop } => {
                    let held = |b: &[u8]| match stop {
                        Some(c) => memchr::memchr(*c, b).unwrap_or(b.len()),
                        None => b
                            .iter()
                            .position(|&c| !holds[c as usize])
                            .unwrap_or(b.len()),
                    };
                    // A literal at the end: the run takes what comes before it.
                    if let (Some(Piece::Literal(l)), true) =
                        (self.pieces.get(i), i + 1 == self.pieces.len())
                    {
                        let Some(body) = rest.strip_suffix(&l[..]) else {
                            return false;
                        };
                        return held(body) == body.len() && !(*one && body.is_empty());
                    }
                    let n = held(rest);
                    if *one && n == 0 {
                        return false;
                    }
                    rest = &rest[n..];
                }
            }
        }
        rest.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    /// Straight patterns, and patterns that are not (the regex set keeps them).
    const STRAIGHT: &[&str] = &[
        "http://[^/]+/excluded/.*",
        "http://[^/]*/excluded/.*",
        ".*",
        ".+",
        "[^/]+",
        ".*\\.pdf",
        ".+/x/",
        "[a-z]+:/.*",
        "[a-z]*/[^x]+x",
        "(?:http)://(a)[^/]+/.*",
        "abc",
        "",
        "[^\\n]*z",
        "[^a-z]+a.*",
    ];
    const NOT: &[&str] = &[
        "a|b",
        "^abc",
        "abc$",
        "[^/]+[^x]+",
        "[^/]+a.*",
        "a.*b.*",
        "[^/]{2,}",
        "(?i)abc",
        "(?-u:[^/])+",
        "\\bx",
        "[a-z]",
        "a+",
        ".*a.*",
        "https?://[^/]+/x",
        "(?:http)://(a)[^é]+é.*",
        "\\w+/.*",
    ];

    /// Texts over an alphabet that meets every class above: `/`, a line feed, letters, two
    /// and three byte UTF-8, the patterns' literals.
    fn texts(n: usize) -> Vec<String> {
        let parts = [
            "/",
            "\n",
            "a",
            "x",
            "z",
            "é",
            "€",
            "http://",
            "https://",
            "h.test",
            "excluded",
            "/excluded/",
            ".pdf",
            "abc",
            "é",
            ":",
            "/x/",
            "/x",
            "A",
            "9",
            "_",
            "ab",
        ];
        let mut rng = fastrand::Rng::with_seed(28);
        let mut out = vec![String::new()];
        for _ in 0..n {
            let len = rng.usize(0..8);
            out.push((0..len).map(|_| parts[rng.usize(..parts.len())]).collect());
        }
        out
    }

    #[test]
    fn straight_patterns_match_as_the_regex_crate_does() {
        let texts = texts(20_000);
        let (mut yes, mut no) = (0, 0);
        for p in STRAIGHT {
            let s = Straight::compile(p).unwrap_or_else(|| panic!("{p} is straight"));
            let re = Regex::new(&format!("^(?:{p})$")).unwrap();
            for t in &texts {
                let want = re.is_match(t);
                assert_eq!(s.is_match(t.as_bytes()), want, "{p:?} on {t:?}");
                if want {
                    yes += 1;
                } else {
                    no += 1;
                }
            }
        }
        // Both answers seen often: the texts meet the patterns.
        assert!(yes > 5_000 && no > 5_000, "{yes} {no}");
        for p in [STRAIGHT[0], STRAIGHT[5], STRAIGHT[8]] {
            let s = Straight::compile(p).unwrap();
            let re = Regex::new(&format!("^(?:{p})$")).unwrap();
            assert!(
                texts
                    .iter()
                    .any(|t| re.is_match(t) && s.is_match(t.as_bytes())),
                "{p}"
            );
        }
    }

    #[test]
    fn other_patterns_are_left_to_the_regex_set() {
        for p in NOT {
            assert!(Straight::compile(p).is_none(), "{p} is not straight");
        }
        assert!(Straight::compile("(").is_none(), "does not parse");
    }
}
