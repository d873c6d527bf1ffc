//! The XML-RPC introspection methods every administrative port answers beside the FSCADM
//! methods: `system.listMethods`, `system.methodHelp` and `system.methodSignature` (the
//! conventions of the XML-RPC introspection extension, which Python's `xmlrpc.client` and
//! other clients call). They are answered by the HTTP side from [`METHODS`], without the role.

use crawlfleet_core::xmlrpc::Value;

use super::{Ty, METHODS};

/// The introspection methods and their parameter types.
pub const SYSTEM_METHODS: [(&str, &[Ty]); 3] = [
    ("system.listMethods", &[]),
    ("system.methodHelp", &[Ty::Str]),
    ("system.methodSignature", &[Ty::Str]),
];

/// The MS-FSCADM section of a method: 2.2.8 for crawler management, 2.2.9 for collection
/// management, 2.2.10 for status, numbered in the order of [`METHODS`] (the spec's order).
fn section(method: &str) -> Option<String> {
    let i = METHODS.iter().position(|(m, _)| *m == method)?;
    Some(match i {
        0..=5 => format!("2.2.8.{}", i + 1),
        6..=26 => format!("2.2.9.{}", i - 5),
        _ => format!("2.2.10.{}", i - 26),
    })
}

fn type_name(t: Ty) -> &'static str {
    match t {
        Ty::Int => "int",
        Ty::Str => "string",
        Ty::Strings => "array",
    }
}

/// The answer to `method` when it is an introspection method: `Some(Ok)` a result,
/// `Some(Err)` a fault's text; `None` for every other method.
pub fn answer(method: &str, params: &[Value]) -> Option<Result<Value, String>> {
    let (name, sig) = SYSTEM_METHODS.iter().find(|(m, _)| *m == method)?;
    if params.len() != sig.len() {
        return Some(Err(format!(
            "{name} takes {} argument(s), {} given",
            sig.len(),
            params.len()
        )));
    }
    let asked = || -> Result<(&'static str, &'static [Ty]), String> {
        let Some(Value::String(m)) = params.first() else {
            return Err(format!(
                "{name}: the argument must be a method name (string)"
            ));
        };
        METHODS
            .iter()
            .chain(SYSTEM_METHODS.iter())
            .find(|(n, _)| n == m)
            .copied()
            .ok_or_else(|| format!("{name}: unknown method {m:?}"))
    };
    Some(match *name {
        "system.listMethods" => Ok(Value::Array(
            METHODS
                .iter()
                .chain(SYSTEM_METHODS.iter())
                .map(|(m, _)| Value::String(m.to_string()))
                .collect(),
        )),
        "system.methodSignature" => asked().map(|(m, sig)| {
            // Every FSCADM method answers an array (a cresult, or [code, result]) or a
            // struct/int; the introspection convention allows "undef" where it varies.
            let ret = match m {
                "system.listMethods" | "system.methodSignature" => "array",
                "system.methodHelp" => "string",
                _ => "undef",
            };
            let mut one = vec![Value::String(ret.into())];
            one.extend(sig.iter().map(|t| Value::String(type_name(*t).into())));
            Value::Array(vec![Value::Array(one)])
        }),
        _ => asked().map(|(m, sig)| {
            let params: Vec<&str> = sig.iter().map(|t| type_name(*t)).collect();
            let text = match section(m) {
                Some(s) => format!("{m}({}): MS-FSCADM {s}", params.join(", ")),
                None => format!("{m}({}): XML-RPC introspection", params.join(", ")),
            };
            Value::String(text)
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_is_listed_with_its_section_and_signature() {
        let Some(Ok(Value::Array(all))) = answer("system.listMethods", &[]) else {
            panic!("listMethods")
        };
        assert_eq!(all.len(), METHODS.len() + 3);
        let help = |m: &str| answer("system.methodHelp", &[Value::String(m.into())]);
        assert_eq!(
            help("CollectionAdd"),
            Some(Ok(Value::String(
                "CollectionAdd(string, int): MS-FSCADM 2.2.9.3".into()
            )))
        );
        assert_eq!(
            help("GetGlobalStatistics"),
            Some(Ok(Value::String(
                "GetGlobalStatistics(): MS-FSCADM 2.2.10.7".into()
            )))
        );
        let sig = answer("system.methodSignature", &[Value::String("AddURIs".into())]);
        let want = ["undef", "string", "int", "array"].map(|s| Value::String(s.into()));
        assert_eq!(
            sig,
            Some(Ok(Value::Array(vec![Value::Array(want.to_vec())])))
        );
        assert!(matches!(help("Nope"), Some(Err(e)) if e.contains("unknown method")));
        assert_eq!(answer("CollectionGetList", &[]), None);
    }
}
