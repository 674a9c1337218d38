//! The values settings are made of, and their parsers: single flag values (clap
//! `value_parser`s: sizes, upstream base URLs, `NAME=URL` routes, miss statuses, `ignore`
//! paths), store specs, and path joining and resolving. Every other settings module
//! builds on these; this one on none of them, so the settings modules depend one way. Errors
//! say what was expected; clap adds the flag and the value.

use cassette_keying::{path_leaves_out, JsonPath, QuestionLeftOut};
use cassette_recorder::proxy::built_in_routes;
use cassette_recorder::Route;
use cassette_store::StoreUrl;
use std::ffi::OsString;
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

/// Parses a yes-or-no setting (a boolean variable such as `CASSETTE_EXACT_STREAMS`, or `CI`) in
/// any of its usual spellings, in any case: `1`/`0`, `yes`/`no`, `y`/`n`, `on`/`off`,
/// `true`/`false`, `t`/`f`; an empty value is no. The one reading of every boolean variable.
pub(crate) fn parse_flag(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "yes" | "y" | "on" | "true" | "t" => Ok(true),
        "0" | "no" | "n" | "off" | "false" | "f" | "" => Ok(false),
        other => Err(format!(
            "`{other}` is not yes or no: use 1/0, yes/no, on/off or true/false"
        )),
    }
}

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

/// Whether a route exists without being configured (the recorder's table of vendors says
/// which do, and where they go).
pub(crate) fn is_built_in_route(name: &str) -> bool {
    built_in_routes().any(|(n, _)| n == name)
}

/// An HTTP error status, 400 to 599.
pub(crate) fn parse_miss_status(text: &str) -> Result<u16, String> {
    match text.trim().parse::<u16>() {
        Ok(code) if (400..=599).contains(&code) => Ok(code),
        _ => Err(format!(
            "`{text}` is not an HTTP error status (400 to 599), such as 409 or 424"
        )),
    }
}

/// Parses an `ignore` path: any JSON path but `$`, which would leave the whole body out.
pub(crate) fn parse_ignore_path(text: &str) -> Result<JsonPath, String> {
    let path = JsonPath::parse(text).map_err(|e| e.to_string())?;
    if path.is_root() {
        return Err("`$` would leave the whole body out of the key; name a member".to_owned());
    }
    Ok(path)
}

/// Whether an ignore path leaves the question out (for the file's located errors).
pub(crate) fn ignore_leaves_out(path: &JsonPath) -> Option<QuestionLeftOut> {
    path_leaves_out(path).map(|what| QuestionLeftOut {
        setting: "ignore",
        value: path.to_string(),
        what,
    })
}

/// `` `$.messages` leaves the prompt out of the key: ... `` for a setting the keying crate
/// found, with the escape hatch spelled as the caller's source spells it.
pub(crate) fn question_out_reason(found: &QuestionLeftOut, escape: &str) -> String {
    let instead = match found.setting {
        "volatile" => "name a member that varies between identical questions instead",
        _ => {
            "name the member inside it that varies (a client-generated id such as \
              `$.messages[*].tool_calls[*].id`) instead"
        }
    };
    format!(
        "`{}` would leave {} out of the key, so every request to a path would get one key and \
         one recording would answer every prompt as a replay hit; {instead}, or set {escape} \
         if that is really meant (see docs/keying.md)",
        found.value, found.what
    )
}

/// `dir` joined with a relative `path` (an absolute one is kept), without `.` segments.
pub(crate) fn join_clean(dir: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_owned();
    }
    let mut out = dir.to_owned();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// How many symlinks [`real_path`] follows before it gives up (Linux's own limit).
const MAX_LINKS: usize = 40;

/// One step of a path being resolved.
enum Part {
    Prefix(OsString),
    Root,
    Up,
    Name(OsString),
}

/// The parts of `path`, pushed so that popping yields them in order.
fn push_parts(todo: &mut Vec<Part>, path: &Path) {
    let parts: Vec<Part> = path
        .components()
        .filter_map(|c| match c {
            Component::Prefix(p) => Some(Part::Prefix(p.as_os_str().to_owned())),
            Component::RootDir => Some(Part::Root),
            Component::CurDir => None,
            Component::ParentDir => Some(Part::Up),
            Component::Normal(name) => Some(Part::Name(name.to_owned())),
        })
        .collect();
    todo.extend(parts.into_iter().rev());
}

/// `path` made absolute with every symlink in it followed, a dangling one included (to where it
/// points, though nothing is there yet), and each `..` taken where the links led, as the
/// system will when the path is opened; what does not exist yet is appended as written. What a
/// settings file names is checked on this, before anything is created: a committed symlink
/// must not lead a store or a usage log out of the file's folder. Reads only link metadata.
pub(crate) fn real_path(path: &Path) -> std::io::Result<PathBuf> {
    let mut todo = Vec::new();
    push_parts(&mut todo, &std::path::absolute(path)?);
    let mut out = PathBuf::new();
    // Once a part is missing, nothing below it exists, so no later part can be a link.
    let mut missing = false;
    let mut links = 0;
    while let Some(part) = todo.pop() {
        match part {
            Part::Prefix(prefix) => out = PathBuf::from(prefix),
            Part::Root => {
                let prefix = match out.components().next() {
                    Some(Component::Prefix(p)) => PathBuf::from(p.as_os_str()),
                    _ => PathBuf::new(),
                };
                out = prefix;
                out.push(Component::RootDir);
            }
            Part::Up => {
                out.pop();
            }
            Part::Name(name) => {
                out.push(name);
                if missing {
                    continue;
                }
                match std::fs::symlink_metadata(&out) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        links += 1;
                        if links > MAX_LINKS {
                            return Err(std::io::Error::other(format!(
                                "{} goes through more than {MAX_LINKS} symlinks",
                                path.display()
                            )));
                        }
                        let target = std::fs::read_link(&out)?;
                        // A relative target continues from the link's folder, an absolute one
                        // from the root.
                        out.pop();
                        push_parts(&mut todo, &target);
                    }
                    Ok(_) => {}
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => missing = true,
                    Err(err) => return Err(err),
                }
            }
        }
    }
    Ok(out)
}

/// A store as the user named it: the parsed URL, and the text it was given as, which is how
/// messages name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoreSpec {
    url: StoreUrl,
    text: String,
}

impl FromStr for StoreSpec {
    type Err = cassette_store::Error;

    /// Parses a store URL (surrounding whitespace ignored); clap uses this as the value parser
    /// of every store flag and argument.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        Ok(StoreSpec {
            url: StoreUrl::parse(text)?,
            text: text.to_owned(),
        })
    }
}

impl fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl StoreSpec {
    /// A folder of cassette files.
    pub(crate) fn folder(dir: PathBuf) -> StoreSpec {
        StoreSpec {
            text: format!("file://{}", dir.display()),
            url: StoreUrl::File(dir),
        }
    }

    /// The store with a relative local path (`file://`, `jsonl://`, `sled://`, a bare path)
    /// resolved against `dir`; other stores as they are.
    pub(crate) fn relative_to(self, dir: &Path) -> StoreSpec {
        let scheme = self.scheme().to_owned();
        let rebuilt = |path: &Path| format!("{scheme}://{}", join_clean(dir, path).display());
        let url = match &self.url {
            StoreUrl::File(path) if path.is_relative() => StoreUrl::File(join_clean(dir, path)),
            StoreUrl::Jsonl(path) if path.is_relative() => StoreUrl::Jsonl(join_clean(dir, path)),
            #[cfg(feature = "sled")]
            StoreUrl::Sled(path) if path.is_relative() => StoreUrl::Sled(join_clean(dir, path)),
            _ => return self,
        };
        let text = match &url {
            StoreUrl::File(path) | StoreUrl::Jsonl(path) => rebuilt(path),
            #[cfg(feature = "sled")]
            StoreUrl::Sled(path) => rebuilt(path),
            _ => self.text,
        };
        StoreSpec { url, text }
    }

    /// The parsed URL.
    pub(crate) fn url(&self) -> &StoreUrl {
        &self.url
    }

    /// The scheme as written (`file` for a bare path).
    pub(crate) fn scheme(&self) -> &str {
        self.text
            .split_once("://")
            .map_or("file", |(scheme, _)| scheme)
    }
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

    #[cfg(unix)]
    #[test]
    fn real_paths_follow_every_link_even_to_nothing() {
        let root = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(root.path()).unwrap();
        std::fs::create_dir_all(base.join("a/b")).unwrap();
        let link = |name: &str, to: &str| std::os::unix::fs::symlink(to, base.join(name)).unwrap();
        link("dangling", "gone/deeper");
        link("a/up", "..");
        link("chain", "a/up/a/b");
        assert_eq!(
            real_path(&base.join("dangling/x")).unwrap(),
            base.join("gone/deeper/x")
        );
        // `..` is taken where the link led, as the system opens it.
        assert_eq!(
            real_path(&base.join("chain/../c")).unwrap(),
            base.join("a/c")
        );
        assert_eq!(
            real_path(&base.join("a/./b/missing/../y")).unwrap(),
            base.join("a/b/y")
        );
        link("abs", "/");
        assert_eq!(real_path(&base.join("abs")).unwrap(), PathBuf::from("/"));
    }
}
