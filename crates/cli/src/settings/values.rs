//! Parsers for single flag values (clap `value_parser`s): sizes, upstream base URLs and
//! `NAME=URL` routes. Their errors say what was expected; clap adds the flag and the value.

use cassette_recorder::Route;

/// Parses a byte size: `1048576`, `512KiB`, `32MiB`, `1GiB` (also `k`, `m`, `g`, `KB`, `MB`).
pub(crate) fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: usize = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size such as 1048576, 512KiB or 32MiB"))?;
    let factor: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit `{other}` in `{text}`: use KiB, MiB or GiB"
            ))
        }
    };
    let size = number
        .checked_mul(factor)
        .ok_or_else(|| format!("`{text}` is too large"))?;
    if size == 0 {
        return Err("the size must be at least 1 byte".to_owned());
    }
    Ok(size)
}

/// Parses an amount of memory: a size as [`parse_size`] reads it, or `0` for none.
pub(crate) fn parse_memory(text: &str) -> Result<usize, String> {
    if text.trim() == "0" {
        return Ok(0);
    }
    parse_size(text)
}

/// Parses an upstream base URL: an absolute `http://` or `https://` URL, kept as written
/// (trimmed), since the recorder joins request paths onto it.
pub(crate) fn parse_base_url(text: &str) -> Result<String, String> {
    let text = text.trim();
    let url = url::Url::parse(text).map_err(|e| format!("`{text}` is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("`{text}` must be an http:// or https:// URL"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "`{text}` has a query or fragment; a base URL is a scheme, host and path, to which \
             each request's own path and query are joined"
        ));
    }
    Ok(text.to_owned())
}

/// Whether `name` is letters, digits, `-`, `_` and `.` only, and not empty: safe as a URL path
/// segment and as a file name.
pub(crate) fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Parses a `--route` value, `NAME=URL`: requests to `/NAME/...` go to URL, and NAME is the
/// key's target.
pub(crate) fn parse_route(spec: &str) -> Result<Route, String> {
    let (name, url) = spec
        .split_once('=')
        .ok_or("expected NAME=URL, e.g. anthropic=https://api.anthropic.com")?;
    let name = name.trim();
    if !is_plain_name(name) {
        return Err(format!(
            "the route name `{name}` must be letters, digits, `-`, `_` or `.` (NAME=URL)"
        ));
    }
    Ok(Route::new(name, parse_base_url(url)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("32MiB"), Ok(32 << 20));
        assert_eq!(parse_size("100"), Ok(100));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert!(parse_size("0").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn routes_parse() {
        assert_eq!(
            parse_route(" anthropic = http://127.0.0.1:9/ "),
            Ok(Route::new("anthropic", "http://127.0.0.1:9/"))
        );
        assert!(parse_route("nourl").unwrap_err().contains("NAME=URL"));
        assert!(parse_route("a=ftp://x").unwrap_err().contains("http"));
        assert!(parse_route("a=not a url")
            .unwrap_err()
            .contains("not a URL"));
        assert!(parse_route("a b=http://x").unwrap_err().contains("a b"));
        assert!(parse_route("=http://x").is_err());
        for bad in ["a=http://x/v1?key=1", "a=http://x/v1#frag", "a=http://x/?"] {
            assert!(
                parse_route(bad).unwrap_err().contains("query or fragment"),
                "{bad}"
            );
        }
    }
}
