//! Typed reads of one parameter dict, each refusal naming the parameter by its dotted path.

use super::rules::{RuleKind, RuleSet, RuleTarget};
use super::xml::parse_bool;
use super::ConfigError;
use crate::marshal::Value;

/// A parameter dict (a DomainSpecification, section, SubDomain, Login or Node) and its path.
pub(crate) struct Params<'d, 'a> {
    pub pairs: &'d [(Value<'a>, Value<'a>)],
    pub path: String,
}

impl<'d, 'a> Params<'d, 'a> {
    /// The parameters of `v`, which must be a dict.
    pub fn of(v: &'d Value<'a>, path: String) -> Result<Params<'d, 'a>, ConfigError> {
        match v.as_dict() {
            Some(pairs) => Ok(Params { pairs, path }),
            None => Err(ConfigError::WrongType {
                attrib: path,
                expected: "dict",
                found: v.type_name(),
            }),
        }
    }

    pub fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    pub fn get(&self, key: &str) -> Option<&'d Value<'a>> {
        crate::marshal::dict_get(self.pairs, key.as_bytes())
    }

    fn wrong(&self, key: &str, expected: &'static str, v: &Value<'_>) -> ConfigError {
        ConfigError::WrongType {
            attrib: self.key_path(key),
            expected,
            found: v.type_name(),
        }
    }

    pub fn bad(&self, key: &str, value: impl ToString, why: impl ToString) -> ConfigError {
        ConfigError::BadSetting {
            attrib: self.key_path(key),
            value: value.to_string(),
            why: why.to_string(),
        }
    }

    pub fn string(&self, key: &str) -> Result<Option<String>, ConfigError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        v.as_bytes()
            .and_then(|b| std::str::from_utf8(b).ok())
            .map(|s| Some(s.to_string()))
            .ok_or_else(|| self.wrong(key, "UTF-8 string", v))
    }

    /// A `list-string`: a list (or tuple) of UTF-8 strings.
    pub fn strings(&self, key: &str) -> Result<Option<Vec<String>>, ConfigError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let items = match v {
            Value::List(items) | Value::Tuple(items) => items,
            _ => return Err(self.wrong(key, "list of strings", v)),
        };
        items
            .iter()
            .map(|item| {
                item.as_bytes()
                    .and_then(|b| std::str::from_utf8(b).ok())
                    .map(str::to_string)
                    .ok_or_else(|| self.wrong(key, "list of strings", item))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    pub fn int(&self, key: &str) -> Result<Option<i64>, ConfigError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        match v {
            Value::Int(i, _) => Ok(Some(*i)),
            Value::Bool(b) => Ok(Some(i64::from(*b))),
            _ => Err(self.wrong(key, "integer", v)),
        }
    }

    /// An integer that must fit `T` (counts and sizes: not negative).
    pub fn uint<T: TryFrom<i64>>(&self, key: &str) -> Result<Option<T>, ConfigError> {
        match self.int(key)? {
            None => Ok(None),
            Some(i) => T::try_from(i)
                .map(Some)
                .map_err(|_| self.bad(key, i, "out of range (negative or too large)")),
        }
    }

    /// A `real` that is finite and not negative (delays, intervals); integers are accepted.
    pub fn real(&self, key: &str) -> Result<Option<f64>, ConfigError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let f = match v {
            Value::Int(i, _) => *i as f64,
            Value::Float(_) | Value::FloatText(_) => v.as_f64().unwrap_or(f64::NAN),
            _ => return Err(self.wrong(key, "real", v)),
        };
        if f.is_finite() && f >= 0.0 {
            Ok(Some(f))
        } else {
            Err(self.bad(key, f, "must be a finite number not below 0"))
        }
    }

    /// A `boolean`: the integer 1 or 0 of FSCMT 2.2.2.3.2 (any non-zero integer is true), a
    /// marshal bool, or the words `parse_xml` accepts.
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        match v {
            Value::Int(i, _) => Ok(Some(*i != 0)),
            Value::Bool(b) => Ok(Some(*b)),
            Value::Bytes(b, _) => std::str::from_utf8(b)
                .ok()
                .and_then(parse_bool)
                .map(Some)
                .ok_or_else(|| self.bad(key, String::from_utf8_lossy(b), "not a boolean")),
            _ => Err(self.wrong(key, "boolean", v)),
        }
    }

    pub fn section(&self, key: &str) -> Result<Option<Params<'d, 'a>>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => Params::of(v, self.key_path(key)).map(Some),
        }
    }

    /// An include/exclude rule list: a `list-string` of `kind:pattern` rules, or a section whose
    /// `exact` / `prefix` / `suffix` / `regexp` list-strings hold patterns of that kind.
    pub fn rules(&self, key: &str, target: RuleTarget) -> Result<RuleSet, ConfigError> {
        let built = match self.get(key) {
            None => return Ok(RuleSet::empty(target)),
            Some(v @ Value::Dict(_)) => {
                let sec = Params::of(v, self.key_path(key))?;
                for (k, _) in sec.pairs {
                    let name = k.as_bytes().and_then(|b| std::str::from_utf8(b).ok());
                    if name.and_then(RuleKind::from_name).is_none() {
                        return Err(self.bad(
                            key,
                            k.py_repr(),
                            "rule kinds are exact, prefix, suffix and regexp",
                        ));
                    }
                }
                let mut rules = Vec::new();
                for kind in RuleKind::ALL {
                    let patterns = sec.strings(kind.name())?.unwrap_or_default();
                    rules.extend(patterns.into_iter().map(|p| (kind, p)));
                }
                RuleSet::from_rules(target, rules)
            }
            Some(_) => {
                let list = self.strings(key)?.unwrap_or_default();
                RuleSet::parse(target, &list)
            }
        };
        built.map_err(|e| self.bad(key, e.pattern, e.message))
    }

    /// The keys of this dict that are not in `known` (for a log line).
    pub fn unknown_keys(&self, known: &[&str]) -> Vec<String> {
        self.pairs
            .iter()
            .filter_map(|(k, _)| {
                let name = String::from_utf8_lossy(k.as_bytes()?).into_owned();
                (!known.contains(&name.as_str())).then_some(name)
            })
            .collect()
    }
}
