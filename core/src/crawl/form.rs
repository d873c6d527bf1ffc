//! The forms of an HTML page and what submitting one sends, for a collection's form logins
//! (docs/collection-config.md "Login"): a Login's `html_form` page is read for the form that
//! posts to the Login's form URI, and with `autofill` its fields fill in what the Login's
//! `parameters` leave out (a hidden CSRF token, a field the site fills itself).
//!
//! The fields are the WHATWG HTML "constructing the entry list" (4.10.21.4) for a form
//! submitted without a submit button: named controls that are not disabled; checkboxes and
//! radio buttons only when checked (value `on` when they have none); no buttons, images or
//! files; a `select`'s selected options (its first when none is selected and it takes one);
//! a `textarea`'s text. The tokenizer is html5gum's, as for link extraction.

use html5gum::{Token, Tokenizer};
use url::Url;

/// One `<form>` of a page.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Form {
    /// Its `action` attribute, as written (`None`: the page's own URI).
    pub action: Option<String>,
    /// Its `method` attribute, lower-cased (`None`: GET).
    pub method: Option<String>,
    /// Its fields in document order: the entry list.
    pub fields: Vec<(String, String)>,
    /// It has a password field (the mark of a login form).
    pub has_password: bool,
}

/// A `<select>` being read: its name, whether it takes many, its options so far (value,
/// selected) and the option whose text is being read (it has no `value` attribute).
struct Select {
    name: String,
    multiple: bool,
    disabled: bool,
    options: Vec<(String, bool)>,
    text_option: Option<usize>,
}

/// Every form of `html`, in document order. Controls outside any form are left out (the
/// `form` attribute, which places a control in a form elsewhere, is not followed).
pub fn forms(html: &[u8]) -> Vec<Form> {
    let mut out: Vec<Form> = Vec::new();
    let mut open = false;
    let mut select: Option<Select> = None;
    let mut textarea: Option<(String, String)> = None;
    for token in Tokenizer::new(html).flatten() {
        match token {
            Token::StartTag(tag) => {
                let name = String::from_utf8_lossy(&tag.name).to_ascii_lowercase();
                let attr = |a: &str| {
                    tag.attributes
                        .get(a.as_bytes())
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                };
                if name == "form" {
                    out.push(Form {
                        action: attr("action"),
                        method: attr("method").map(|m| m.trim().to_ascii_lowercase()),
                        ..Form::default()
                    });
                    open = true;
                    continue;
                }
                if !open {
                    continue;
                }
                let Some(form) = out.last_mut() else { continue };
                let disabled = attr("disabled").is_some();
                match name.as_str() {
                    "input" => {
                        let kind = attr("type").unwrap_or_default().to_ascii_lowercase();
                        if kind == "password" {
                            form.has_password = true;
                        }
                        let Some(field) = attr("name").filter(|n| !n.is_empty()) else {
                            continue;
                        };
                        let checked = attr("checked").is_some();
                        let value = match kind.as_str() {
                            "submit" | "button" | "reset" | "image" | "file" => continue,
                            "checkbox" | "radio" if !checked => continue,
                            "checkbox" | "radio" => attr("value").unwrap_or_else(|| "on".into()),
                            _ => attr("value").unwrap_or_default(),
                        };
                        if !disabled {
                            form.fields.push((field, value));
                        }
                    }
                    "select" => {
                        select = Some(Select {
                            name: attr("name").unwrap_or_default(),
                            multiple: attr("multiple").is_some(),
                            disabled,
                            options: Vec::new(),
                            text_option: None,
                        });
                    }
                    "option" => {
                        if let Some(s) = &mut select {
                            let selected = attr("selected").is_some();
                            s.text_option = None;
                            match attr("value") {
                                Some(v) => s.options.push((v, selected)),
                                None => {
                                    s.text_option = Some(s.options.len());
                                    s.options.push((String::new(), selected));
                                }
                            }
                        }
                    }
                    "textarea" => {
                        if let Some(field) = attr("name").filter(|n| !n.is_empty() && !disabled) {
                            textarea = Some((field, String::new()));
                        }
                    }
                    _ => {}
                }
            }
            Token::String(text) => {
                let text = String::from_utf8_lossy(&text);
                if let Some((_, value)) = &mut textarea {
                    value.push_str(&text);
                } else if let Some(s) = &mut select {
                    if let Some(i) = s.text_option {
                        s.options[i].0.push_str(&text);
                    }
                }
            }
            Token::EndTag(tag) => {
                let name = String::from_utf8_lossy(&tag.name).to_ascii_lowercase();
                match name.as_str() {
                    "form" => open = false,
                    "option" => {
                        if let Some(s) = &mut select {
                            s.text_option = None;
                        }
                    }
                    "textarea" => {
                        if let (Some((field, value)), Some(form)) =
                            (textarea.take(), out.last_mut())
                        {
                            // The newline right after <textarea> is not part of its value.
                            let value = value.strip_prefix('\n').unwrap_or(&value).to_string();
                            form.fields.push((field, value));
                        }
                    }
                    "select" => {
                        if let (Some(s), Some(form)) = (select.take(), out.last_mut()) {
                            close_select(s, form);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    out
}

/// The entries of a finished `<select>`: its selected options, else (one-value selects) its
/// first option. An option read from its text has its white space collapsed.
fn close_select(s: Select, form: &mut Form) {
    if s.name.is_empty() || s.disabled {
        return;
    }
    let collapse = |v: &str| v.split_ascii_whitespace().collect::<Vec<_>>().join(" ");
    let mut any = false;
    for (value, selected) in &s.options {
        if *selected {
            form.fields.push((s.name.clone(), collapse(value)));
            any = true;
            if !s.multiple {
                break;
            }
        }
    }
    if !any && !s.multiple {
        if let Some((value, _)) = s.options.first() {
            form.fields.push((s.name.clone(), collapse(value)));
        }
    }
}

/// True when `a` and `b` are the same page: scheme, host, port and path (not the query).
pub fn same_page(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
        && a.path() == b.path()
}

/// The form of `forms` (read from the page at `page`) that submits to `target`: the one whose
/// action resolves to `target`'s scheme, authority and path, else the first with a password
/// field, else the first.
pub fn login_form<'f>(forms: &'f [Form], page: &Url, target: &Url) -> Option<&'f Form> {
    forms
        .iter()
        .find(|f| {
            let action = f.action.as_deref().unwrap_or("");
            page.join(action).is_ok_and(|u| same_page(&u, target))
        })
        .or_else(|| forms.iter().find(|f| f.has_password))
        .or_else(|| forms.first())
}

/// The fields a login submits: without a form, `given` as it is; with one, the form's fields
/// in the form's order, each taking the given value where `given` names it (and only the
/// given ones when `autofill` is off), then the given fields the form lacks.
pub fn submission(
    given: &[(String, String)],
    form: Option<&Form>,
    autofill: bool,
) -> Vec<(String, String)> {
    let Some(form) = form else {
        return given.to_vec();
    };
    let mut out = Vec::with_capacity(given.len() + form.fields.len());
    let mut used = vec![false; given.len()];
    for (name, value) in &form.fields {
        match given.iter().position(|(n, _)| n == name) {
            Some(i) if !used[i] => {
                used[i] = true;
                out.push((name.clone(), given[i].1.clone()));
            }
            // A second field of a name given once (a repeated hidden field): the form's value.
            Some(_) if autofill => out.push((name.clone(), value.clone())),
            Some(_) => {}
            None if autofill => out.push((name.clone(), value.clone())),
            None => {}
        }
    }
    for (i, g) in given.iter().enumerate() {
        if !used[i] {
            out.push(g.clone());
        }
    }
    out
}

/// `application/x-www-form-urlencoded` of `fields` (WHATWG URL 5.2).
pub fn urlencoded(fields: &[(String, String)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<html><body>
<form action="/search"><input name="q" value="x"></form>
<form method="POST" action="/login?next=%2F">
  <input type="hidden" name="csrf" value="t0k&amp;en">
  <input name="user" value="">
  <input type="password" name="pass">
  <input type="checkbox" name="remember" checked>
  <input type="checkbox" name="spam" value="yes">
  <input type="radio" name="lang" value="en">
  <input type="radio" name="lang" value="fr" checked>
  <input type="text" name="off" value="1" disabled>
  <input type="submit" name="go" value="Log in">
  <input value="no name">
  <select name="zone"><option>  Europe /
     Paris </option><option value="utc" selected>UTC</option></select>
  <select name="first"><option value="a">A<option value="b">B</select>
  <select name="many" multiple><option value="1" selected><option value="2"><option value="3" selected></select>
  <textarea name="note">
line one
</textarea>
</form>
<input name="outside" value="z">
</body></html>"#;

    // WHATWG HTML 4.10.21.4: the entry list of a form submitted without a submitter.
    #[test]
    fn a_forms_fields_are_its_entry_list() {
        let f = forms(PAGE.as_bytes());
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].fields, [("q".to_string(), "x".to_string())]);
        assert!(!f[0].has_password);
        let login = &f[1];
        assert_eq!(login.method.as_deref(), Some("post"));
        assert_eq!(login.action.as_deref(), Some("/login?next=%2F"));
        assert!(login.has_password);
        let got: Vec<(&str, &str)> = login
            .fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("csrf", "t0k&en"),
                ("user", ""),
                ("pass", ""),
                ("remember", "on"),
                ("lang", "fr"),
                ("zone", "utc"),
                ("first", "a"),
                ("many", "1"),
                ("many", "3"),
                ("note", "line one\n"),
            ]
        );
    }

    #[test]
    fn an_option_without_a_value_gives_its_text() {
        let f = forms(b"<form><select name=z><option>  Europe /\n Paris </option></select></form>");
        assert_eq!(
            f[0].fields,
            [("z".to_string(), "Europe / Paris".to_string())]
        );
    }

    #[test]
    fn the_login_form_is_the_one_posting_to_the_target() {
        let f = forms(PAGE.as_bytes());
        let page = Url::parse("http://h.test/account/").unwrap();
        let target = Url::parse("http://h.test/login").unwrap();
        assert_eq!(login_form(&f, &page, &target), Some(&f[1]));
        // No form posts there: the one with a password field.
        let other = Url::parse("http://h.test/elsewhere").unwrap();
        assert_eq!(login_form(&f, &page, &other), Some(&f[1]));
        let search = Url::parse("http://h.test/search").unwrap();
        assert_eq!(login_form(&f, &page, &search), Some(&f[0]));
        assert_eq!(login_form(&[], &page, &target), None);
    }

    #[test]
    fn given_fields_fill_the_form_and_autofill_keeps_the_rest() {
        let form = Form {
            fields: vec![
                ("csrf".into(), "tok".into()),
                ("user".into(), "".into()),
                ("pass".into(), "".into()),
            ],
            ..Form::default()
        };
        let given = vec![
            ("pass".to_string(), "secret".to_string()),
            ("user".to_string(), "alice".to_string()),
            ("extra".to_string(), "1".to_string()),
        ];
        let pairs = |v: Vec<(String, String)>| {
            v.into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("&")
        };
        assert_eq!(
            pairs(submission(&given, Some(&form), true)),
            "csrf=tok&user=alice&pass=secret&extra=1"
        );
        assert_eq!(
            pairs(submission(&given, Some(&form), false)),
            "user=alice&pass=secret&extra=1"
        );
        assert_eq!(
            pairs(submission(&given, None, true)),
            "pass=secret&user=alice&extra=1"
        );
    }

    #[test]
    fn fields_are_form_urlencoded() {
        let f = vec![
            ("user name".to_string(), "a&b=c".to_string()),
            ("pass".to_string(), "ø+%".to_string()),
        ];
        assert_eq!(urlencoded(&f), "user+name=a%26b%3Dc&pass=%C3%B8%2B%25");
    }

    #[test]
    fn broken_markup_never_panics() {
        for html in [
            &b"<form"[..],
            b"<form><select name=a><option",
            b"</form></select></textarea><option>",
            b"<form><textarea name=t>unclosed",
            b"\xff\xfe<form action=\xff><input name=\xff value=\xfe>",
        ] {
            let _ = forms(html);
        }
    }
}
