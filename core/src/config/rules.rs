//! Include and exclude rules: `include_domains`, `exclude_domains`, `include_uris`,
//! `exclude_uris` (and the same inside a SubDomain), and `exclude_headers`.
//!
//! A rule is `kind:pattern` with kind `exact`, `prefix`, `suffix` or `regexp`; a pattern without
//! a known kind is `exact` for domain rules and `prefix` for URI rules (what an administrator
//! means by `www.example.com` and by `http://www.example.com/docs/`). Domain rules compare host
//! names without regard to ASCII case; URI rules are case-sensitive. A `regexp` must match the
//! whole host name or URI (it is anchored at both ends).

use std::collections::HashSet;
use std::fmt;

use regex::{RegexBuilder, RegexSet, RegexSetBuilder};

#[path = "rules_straight.rs"]
mod straight;
use straight::Straight;

/// What a rule set is matched against; decides the meaning of a pattern with no kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleTarget {
    /// Host names: plain patterns are `exact`, matching ignores ASCII case.
    Domain,
    /// URIs: plain patterns are `prefix`, matching is case-sensitive.
    Uri,
    /// HTTP response header lines `Name: value` (`exclude_headers`): plain patterns are
    /// `prefix`, matching ignores ASCII case.
    Header,
}

impl RuleTarget {
    fn ignores_case(self) -> bool {
        matches!(self, RuleTarget::Domain | RuleTarget::Header)
    }
}

/// How one rule's pattern matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleKind {
    /// The whole string equals the pattern.
    Exact,
    /// The string starts with the pattern.
    Prefix,
    /// The string ends with the pattern.
    Suffix,
    /// The regular expression matches the whole string.
    Regexp,
}

impl RuleKind {
    /// Every kind, in the order rule sections are read.
    pub const ALL: [RuleKind; 4] = [
        RuleKind::Exact,
        RuleKind::Prefix,
        RuleKind::Suffix,
        RuleKind::Regexp,
    ];

    /// The rule kind a `kind:` prefix names.
    pub fn from_name(name: &str) -> Option<RuleKind> {
        match name {
            "exact" => Some(RuleKind::Exact),
            "prefix" => Some(RuleKind::Prefix),
            "suffix" => Some(RuleKind::Suffix),
            "regexp" => Some(RuleKind::Regexp),
            _ => None,
        }
    }

    /// The name written before the `:` of a rule.
    pub fn name(self) -> &'static str {
        match self {
            RuleKind::Exact => "exact",
            RuleKind::Prefix => "prefix",
            RuleKind::Suffix => "suffix",
            RuleKind::Regexp => "regexp",
        }
    }
}

/// A rule refused while building a [`RuleSet`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    /// The pattern (for a set too large to compile together: all regexp patterns).
    pub pattern: String,
    /// The regular expression compiler's message.
    pub message: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rule {:?}: {}", self.pattern, self.message)
    }
}

impl std::error::Error for RuleError {}

/// A compiled set of rules; [`RuleSet::matches`] is true when any rule matches.
#[derive(Clone)]
pub struct RuleSet {
    target: RuleTarget,
    /// The rules as given (domain patterns other than regexps lower-cased).
    rules: Vec<(RuleKind, String)>,
    /// The `exact` patterns, looked up by hash (a domain list may name thousands of hosts).
    exact: HashSet<String, foldhash::fast::RandomState>,
    /// The `prefix` and `suffix` rules.
    affixes: Vec<(RuleKind, String)>,
    /// The `regexp` rules matched in one pass (a case-sensitive set's straight patterns,
    /// `rules_straight.rs`).
    straight: Vec<Straight>,
    /// The other `regexp` rules, anchored, compiled once.
    regexps: Option<RegexSet>,
}

impl RuleSet {
    /// The largest compiled size of a rule set's regular expressions; a configuration arrives
    /// over the network, and one pathological pattern must not take the scheduler's memory.
    pub const REGEX_SIZE_LIMIT: usize = 8 << 20;

    /// A set with no rules: matches nothing.
    pub fn empty(target: RuleTarget) -> RuleSet {
        RuleSet {
            target,
            rules: Vec::new(),
            exact: HashSet::default(),
            affixes: Vec::new(),
            straight: Vec::new(),
            regexps: None,
        }
    }

    /// Builds a set from `kind:pattern` strings (see the module doc). The error names the
    /// pattern and why it was refused (a regular expression that does not compile).
    pub fn parse<S: AsRef<str>>(target: RuleTarget, rules: &[S]) -> Result<RuleSet, RuleError> {
        let parsed: Vec<(RuleKind, String)> = rules
            .iter()
            .map(|r| {
                let r = r.as_ref();
                match r
                    .split_once(':')
                    .and_then(|(k, p)| Some((RuleKind::from_name(k)?, p)))
                {
                    Some((kind, p)) => (kind, p.to_string()),
                    None => match target {
                        RuleTarget::Domain => (RuleKind::Exact, r.to_string()),
                        RuleTarget::Uri | RuleTarget::Header => (RuleKind::Prefix, r.to_string()),
                    },
                }
            })
            .collect();
        RuleSet::from_rules(target, parsed)
    }

    /// Builds a set from rules already split into kind and pattern.
    pub fn from_rules(
        target: RuleTarget,
        rules: Vec<(RuleKind, String)>,
    ) -> Result<RuleSet, RuleError> {
        let rules: Vec<(RuleKind, String)> = rules
            .into_iter()
            .map(|(k, p)| match (target, k) {
                (_, RuleKind::Regexp) => (k, p),
                (t, _) if t.ignores_case() => (k, p.to_ascii_lowercase()),
                _ => (k, p),
            })
            .collect();
        let mut straight = Vec::new();
        let patterns: Vec<String> = rules
            .iter()
            .filter(|(k, _)| *k == RuleKind::Regexp)
            .filter(|(_, p)| {
                let s = (!target.ignores_case())
                    .then(|| Straight::compile(p))
                    .flatten();
                s.map(|s| straight.push(s)).is_none()
            })
            .map(|(_, p)| format!("^(?:{p})$"))
            .collect();
        // Each pattern alone first, so that an error names the pattern that failed.
        for (kind, p) in &rules {
            if *kind == RuleKind::Regexp {
                RegexBuilder::new(&format!("^(?:{p})$"))
                    .size_limit(Self::REGEX_SIZE_LIMIT)
                    .build()
                    .map_err(|e| RuleError {
                        pattern: p.clone(),
                        message: e.to_string(),
                    })?;
            }
        }
        let regexps = if patterns.is_empty() {
            None
        } else {
            let set = RegexSetBuilder::new(&patterns)
                .case_insensitive(target.ignores_case())
                .size_limit(Self::REGEX_SIZE_LIMIT)
                .build()
                .map_err(|e| RuleError {
                    pattern: patterns.join(" | "),
                    message: e.to_string(),
                })?;
            Some(set)
        };
        let exact = rules
            .iter()
            .filter(|(k, _)| *k == RuleKind::Exact)
            .map(|(_, p)| p.clone())
            .collect();
        let affixes = rules
            .iter()
            .filter(|(k, _)| matches!(k, RuleKind::Prefix | RuleKind::Suffix))
            .cloned()
            .collect();
        Ok(RuleSet {
            target,
            rules,
            exact,
            affixes,
            straight,
            regexps,
        })
    }

    /// What this set is matched against.
    pub fn target(&self) -> RuleTarget {
        self.target
    }

    /// The rules, in the order given.
    pub fn rules(&self) -> &[(RuleKind, String)] {
        &self.rules
    }

    /// True when the set has no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// True when any rule matches `s` (a host name or a URI, as the target says).
    pub fn matches(&self, s: &str) -> bool {
        if self.rules.is_empty() {
            return false;
        }
        let lowered;
        let s = if self.target.ignores_case() && s.bytes().any(|b| b.is_ascii_uppercase()) {
            lowered = s.to_ascii_lowercase();
            lowered.as_str()
        } else {
            s
        };
        let plain = self.exact.contains(s)
            || self.affixes.iter().any(|(k, p)| match k {
                RuleKind::Prefix => s.starts_with(p.as_str()),
                RuleKind::Suffix => s.ends_with(p.as_str()),
                RuleKind::Exact | RuleKind::Regexp => false,
            });
        plain
            || self.straight.iter().any(|r| r.is_match(s.as_bytes()))
            || self.regexps.as_ref().is_some_and(|r| r.is_match(s))
    }
}

impl PartialEq for RuleSet {
    fn eq(&self, other: &Self) -> bool {
        // The compiled set is a function of the rules.
        self.target == other.target && self.rules == other.rules
    }
}

impl fmt::Debug for RuleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rules: Vec<String> = self
            .rules
            .iter()
            .map(|(k, p)| format!("{}:{p}", k.name()))
            .collect();
        f.debug_struct("RuleSet")
            .field("target", &self.target)
            .field("rules", &rules)
            .finish()
    }
}
