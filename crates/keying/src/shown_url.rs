//! URLs as they may be shown (in errors, logs, health answers): without userinfo and with the
//! values of credential query parameters replaced, in one URL or in every URL of a text.

use std::borrow::Cow;

use crate::is_query_credential;

/// What a credential's value is shown as.
const HIDDEN: &str = "[REDACTED]";

/// `url` without its userinfo (`user:password@`) and with the values of its credential query
/// parameters ([`is_query_credential`], in the query and the fragment) replaced by
/// `[REDACTED]`. Everything else is kept as written.
pub fn shown_url(url: &str) -> Cow<'_, str> {
    let Some(scheme_end) = url.find("://") else {
        return Cow::Borrowed(url);
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let tail = &rest[authority_end..];
    let (before_fragment, fragment) = match tail.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (tail, None),
    };
    let (path, query) = match before_fragment.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (before_fragment, None),
    };
    let query = query.map(hidden_credentials);
    let fragment = fragment.map(hidden_credentials);
    let changed = host.len() != authority.len()
        || matches!(query, Some(Cow::Owned(_)))
        || matches!(fragment, Some(Cow::Owned(_)));
    if !changed {
        return Cow::Borrowed(url);
    }
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..scheme_end + 3]);
    out.push_str(host);
    out.push_str(path);
    if let Some(query) = query {
        out.push('?');
        out.push_str(&query);
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(&fragment);
    }
    Cow::Owned(out)
}

/// `text` with every URL in it (`scheme://...`, up to a space, a quote, a backtick or an angle
/// bracket) shown as [`shown_url`] shows it: for messages that quote URLs a user gave.
pub fn shown_urls(text: &str) -> Cow<'_, str> {
    let mut out = String::new();
    let mut copied = 0;
    let mut from = 0;
    while let Some(at) = text[from..].find("://") {
        let at = from + at;
        let start = text[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let end = text[at..]
            .find(|c: char| c.is_whitespace() || c.is_control() || "\"'`<>".contains(c))
            .map_or(text.len(), |i| at + i);
        from = end.max(at + 3);
        let scheme = &text[start..at];
        if !scheme.starts_with(|c: char| c.is_ascii_alphabetic()) {
            continue;
        }
        if let Cow::Owned(shown) = shown_url(&text[start..end]) {
            out.push_str(&text[copied..start]);
            out.push_str(&shown);
            copied = end;
        }
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// A query (or fragment) with the values of its credential parameters replaced, and the URLs
/// among its values (an S3 store's `endpoint=`) shown without credentials.
fn hidden_credentials(query: &str) -> Cow<'_, str> {
    let shown = |pair: &str| -> Option<String> {
        let (name, value) = pair.split_once('=')?;
        if is_query_credential(&crate::form_decode(name)) {
            return Some(format!("{name}={HIDDEN}"));
        }
        if let Cow::Owned(value) = shown_url(value) {
            return Some(format!("{name}={value}"));
        }
        let decoded = crate::form_decode(value);
        match shown_url(&decoded) {
            Cow::Owned(value) => Some(format!("{name}={value}")),
            Cow::Borrowed(_) => None,
        }
    };
    if !query.split('&').any(|pair| shown(pair).is_some()) {
        return Cow::Borrowed(query);
    }
    let pairs: Vec<Cow<'_, str>> = query
        .split('&')
        .map(|pair| shown(pair).map_or(Cow::Borrowed(pair), Cow::Owned))
        .collect();
    Cow::Owned(pairs.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 25, item 9: userinfo passwords and `?key=` are never shown.
    #[test]
    fn urls_are_shown_without_credentials() {
        for (url, shown) in [
            ("http://u:pw@h:1/v1", "http://h:1/v1"),
            (
                "https://h/v1?key=abc&alt=sse",
                "https://h/v1?key=[REDACTED]&alt=sse",
            ),
            (
                "https://tok@h?API-Key=1#access_token=2",
                "https://h?API-Key=[REDACTED]#access_token=[REDACTED]",
            ),
            ("http://a@b:pw@h/p@q", "http://h/p@q"),
            (
                "s3://bucket/prefix?endpoint=http://ak:sk@h:8333&region=x",
                "s3://bucket/prefix?endpoint=http://h:8333&region=x",
            ),
            (
                "s3://b?endpoint=http%3A%2F%2Fak%3Ask%40h",
                "s3://b?endpoint=http://h",
            ),
        ] {
            assert_eq!(shown_url(url), shown, "{url}");
        }
        assert!(matches!(
            shown_url("https://h/v1?alt=sse"),
            Cow::Borrowed(_)
        ));
        assert!(matches!(shown_url("not a url"), Cow::Borrowed(_)));

        let text = "invalid value 's3://b/p?endpoint=http://ak:hunter2@127.0.0.1:1&x=1' for \
                    `--upstream http://u:pw@h?token=t`: GET http://ak:hunter2@127.0.0.1:1/b/k in 2ms";
        let shown = shown_urls(text);
        assert_eq!(
            shown,
            "invalid value 's3://b/p?endpoint=http://127.0.0.1:1&x=1' for \
             `--upstream http://h?token=[REDACTED]`: GET http://127.0.0.1:1/b/k in 2ms"
        );
        assert!(matches!(
            shown_urls("no URL: 1://x, ://y"),
            Cow::Borrowed(_)
        ));
    }
}
