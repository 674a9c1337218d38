//! `cassette import PATH...`: tapes written by other tools become cassettes keyed by the
//! current contract, so an older suite's recordings replay under cassette:
//!
//! - the seed harness's flat `<16 hex>.json` files, `{"key", "params", "text"}`: `params` is
//!   the chat request (a `messages` list, or a `prompt` with an optional `system`, as the suite
//!   shorthand takes it) and `text` the answer, stored as an OpenAI-compatible chat completion;
//! - vcrpy YAML cassettes of OpenAI and Anthropic calls (`interactions` of `request` and
//!   `response`), bodies as strings or `!!binary`, gzip or deflate answers decoded, streamed
//!   answers assembled into their final response as when recording.
//!
//! Imports go through the recorder's redaction (credentials in headers and queries are never
//! stored) and are create-only unless `--overwrite`; the source files are left in place.

use crate::progress::Progress;
use crate::run::suite::CHAT_PATH;
use crate::settings::{RecorderArgs, SettingsFile};
use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use cassette_recorder::config::DEFAULT_TARGET;
use cassette_recorder::{Exchange, Mode, Request, Route, Stored, Write};
use serde_json::{json, Map, Value};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use yaml_serde::Value as Yaml;

/// The largest vcrpy cassette read.
const MAX_YAML_FILE: u64 = 256 << 20;

/// Arguments of `cassette import`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "PATH is a file or a folder (searched recursively): seed-harness tapes \
(<16 hex>.json with key, params, text) and vcrpy cassettes (.yaml, .yml) are imported, anything \
else is skipped and named.\n\
Exit status: 0 all imported (or already there), 2 some could not be imported.\n\n\
Examples:\n  \
cassette import old_cassettes/ --store file://cassettes\n  \
cassette import tests/cassettes/test_chat.yaml --route anthropic=https://api.anthropic.com"
)]
pub(crate) struct ImportArgs {
    /// Files or folders to import.
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<PathBuf>,

    /// Replace cassettes already stored under the same keys.
    #[arg(long)]
    overwrite: bool,

    #[command(flatten)]
    recorder: RecorderArgs,
}

/// What one source file held.
enum Source {
    Seed,
    Vcr,
}

/// Runs `cassette import`.
pub(crate) fn run(args: ImportArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    let write = if args.overwrite {
        Write::Overwrite
    } else {
        Write::CreateOnly
    };
    let mut settings = args.recorder.resolve(file)?;
    // Writing needs a writable store; nothing is ever sent upstream by an import.
    settings.config.mode = Mode::Record;
    let routes = settings.config.routes.clone();
    let recorder = settings.build()?;
    let mut files = Vec::new();
    for path in &args.paths {
        collect(path, &mut files)?;
    }
    let runtime = super::runtime()?;
    let (mut imported, mut kept, mut failed) = (0usize, 0usize, 0usize);
    let progress = Progress::bar(files.len() as u64, "files");
    for (path, source) in &files {
        progress.inc();
        let exchanges = match source {
            Source::Seed => seed_exchange(path).map(|e| vec![e]),
            Source::Vcr => vcr_exchanges(path, &routes),
        };
        let exchanges = match exchanges {
            Ok(exchanges) => exchanges,
            Err(err) => {
                failed += 1;
                progress.println(format!("cannot import {}: {err:#}", path.display()));
                continue;
            }
        };
        for (i, exchange) in exchanges.into_iter().enumerate() {
            let at = match source {
                Source::Seed => path.display().to_string(),
                Source::Vcr => format!("{} interaction {}", path.display(), i + 1),
            };
            let request = format!("{} {}", exchange.request.method, exchange.request.path);
            match runtime.block_on(recorder.import(exchange, write)) {
                Ok((key, Stored::Won)) => {
                    imported += 1;
                    progress.suspend(|| println!("imported {at} as {key} ({request})"));
                }
                Ok((key, Stored::Kept | Stored::Nothing)) => {
                    kept += 1;
                    progress.suspend(|| println!("kept {key}: already stored ({at})"));
                }
                Err(err) => {
                    failed += 1;
                    progress.println(format!("cannot import {at}: {:#}", anyhow::Error::new(err)));
                }
            }
        }
    }
    progress.finish();
    runtime.block_on(crate::flush_index(&recorder));
    eprintln!(
        "imported {imported}, kept {kept} already stored, failed {failed} ({}); the source files are left in place",
        recorder.store().location()
    );
    Ok(if failed > 0 {
        ExitCode::from(crate::EXIT_ERROR)
    } else {
        ExitCode::SUCCESS
    })
}

/// The importable files under `path`: seed tapes and vcrpy cassettes; other files are named
/// as skipped, except cassettes of our own (an import may be pointed at a cassette folder).
fn collect(path: &Path, out: &mut Vec<(PathBuf, Source)>) -> anyhow::Result<()> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("cannot list {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for entry in entries {
            let hidden = entry
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'));
            if !hidden {
                collect(&entry, out)?;
            }
        }
        return Ok(());
    }
    let name = path.to_string_lossy();
    if name.ends_with(".yaml") || name.ends_with(".yml") {
        out.push((path.to_owned(), Source::Vcr));
        return Ok(());
    }
    let json = name
        .ends_with(".json")
        .then(|| std::fs::read(path).ok())
        .flatten()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
    match json {
        Some(v) if v.get("params").is_some() && v.get("text").is_some() => {
            out.push((path.to_owned(), Source::Seed));
        }
        Some(v) if v.get("key_version").is_some() && v.get("request").is_some() => {}
        _ => eprintln!(
            "skipped {}: not a seed-harness tape or a vcrpy cassette",
            path.display()
        ),
    }
    Ok(())
}

/// When a file was last written, as the best guess at when it was recorded.
fn modified(path: &Path) -> String {
    let time = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map(chrono::DateTime::<chrono::Utc>::from)
        .unwrap_or_else(|_| chrono::Utc::now());
    time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn tool(what: &str, path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    format!(
        "cassette {} import of {what} {}",
        env!("CARGO_PKG_VERSION"),
        name.unwrap_or_default()
    )
}

/// A seed-harness tape: `{"key", "params", "text"}`.
fn seed_exchange(path: &Path) -> anyhow::Result<Exchange> {
    let value: Value = serde_json::from_slice(&std::fs::read(path)?).context("not valid JSON")?;
    let params = match value.get("params") {
        Some(Value::Object(params)) => params.clone(),
        _ => bail!("\"params\" must be an object"),
    };
    let Some(Value::String(text)) = value.get("text") else {
        bail!("\"text\" must be a string");
    };
    let body = seed_body(params)?;
    let model = body.get("model").cloned().unwrap_or(Value::Null);
    let answer = json!({
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
    });
    Ok(Exchange {
        request: Request::post_json(CHAT_PATH, &body),
        status: 200,
        headers: vec![("content-type".to_owned(), "application/json".to_owned())],
        body: Bytes::from(answer.to_string()),
        upstream: "https://api.openai.com".to_owned(),
        recorded_at: modified(path),
        tool: tool("the seed-harness tape", path),
    })
}

/// The chat body of a seed tape's `params`: as is when it has `messages`, else the suite
/// shorthand's (`system` then `prompt` as messages, every other member kept).
fn seed_body(mut params: Map<String, Value>) -> anyhow::Result<Value> {
    if params.contains_key("messages") {
        return Ok(Value::Object(params));
    }
    let Some(Value::String(prompt)) = params.remove("prompt") else {
        bail!("\"params\" has neither \"messages\" nor a \"prompt\" string");
    };
    let mut messages = Vec::new();
    match params.remove("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(system)) => {
            messages.push(json!({"role": "system", "content": system}));
        }
        Some(other) => bail!("params.system must be a string, found {other}"),
    }
    messages.push(json!({"role": "user", "content": prompt}));
    params.insert("messages".into(), Value::Array(messages));
    Ok(Value::Object(params))
}

/// The interactions of a vcrpy cassette.
fn vcr_exchanges(path: &Path, routes: &[Route]) -> anyhow::Result<Vec<Exchange>> {
    let size = std::fs::metadata(path)?.len();
    if size > MAX_YAML_FILE {
        bail!("it is {size} bytes; a vcrpy cassette read here is at most {MAX_YAML_FILE}");
    }
    let text = std::fs::read_to_string(path)?;
    // Before the YAML library: its parser takes time quadratic in flow nesting.
    if let Some((line, column)) = super::yaml_depth::too_deep(&text, super::yaml_depth::MAX_DEPTH) {
        bail!(
            "not a vcrpy cassette: it nests collections more than {} levels deep at line {line}, \
             column {column} (a vcrpy cassette nests a few), so it is not read",
            super::yaml_depth::MAX_DEPTH
        );
    }
    // The YAML library resolves the standard `!!binary` tag to its base64 text, losing that
    // the body was binary; a local tag in its place keeps it.
    let binary = regex::Regex::new(r"(:[ \t]+|-[ \t]+)!!binary(\s)").expect("a valid regex");
    let text = binary.replace_all(&text, "$1!binary$2");
    let doc: Yaml = yaml_serde::from_str(&text).map_err(|err| {
        let err = err.to_string();
        if err.contains("recursion limit exceeded") {
            // Block nesting: the library stops at its limit, in linear time.
            anyhow!(
                "not a vcrpy cassette: it nests collections too deeply for the YAML reader ({err})"
            )
        } else {
            anyhow!("not valid YAML: {err}")
        }
    })?;
    let interactions = doc
        .get("interactions")
        .and_then(Yaml::as_sequence)
        .ok_or_else(|| anyhow!("no \"interactions\" list: not a vcrpy cassette"))?;
    let recorded_at = modified(path);
    interactions
        .iter()
        .enumerate()
        .map(|(i, interaction)| {
            vcr_exchange(interaction, routes, &recorded_at, path)
                .with_context(|| format!("interaction {}", i + 1))
        })
        .collect()
}

fn vcr_exchange(
    interaction: &Yaml,
    routes: &[Route],
    recorded_at: &str,
    path: &Path,
) -> anyhow::Result<Exchange> {
    let request = interaction
        .get("request")
        .ok_or_else(|| anyhow!("no \"request\""))?;
    let response = interaction
        .get("response")
        .ok_or_else(|| anyhow!("no \"response\""))?;
    let uri = request
        .get("uri")
        .and_then(Yaml::as_str)
        .ok_or_else(|| anyhow!("request.uri is missing"))?;
    let url = url::Url::parse(uri).with_context(|| format!("request.uri {uri:?}"))?;
    let (target, upstream, path_for_key) = route_of(&url, routes);
    let method = request
        .get("method")
        .and_then(Yaml::as_str)
        .unwrap_or("POST")
        .to_ascii_uppercase();
    let request_headers = headers(request.get("headers"))?;
    let request_body = body(request.get("body"))?;
    let status = response
        .get("status")
        .and_then(|s| s.get("code"))
        .and_then(Yaml::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .ok_or_else(|| anyhow!("response.status.code is missing"))?;
    let response_headers = headers(response.get("headers"))?;
    let raw = body(response.get("body").and_then(|b| b.get("string")))?;
    let response_body = decode(raw, &response_headers)?;
    Ok(Exchange {
        request: Request {
            target,
            method,
            path: path_for_key,
            query: url.query().unwrap_or("").to_owned(),
            headers: request_headers,
            body: request_body,
        },
        status,
        headers: response_headers
            .into_iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("content-encoding"))
            .collect(),
        body: response_body,
        upstream,
        recorded_at: recorded_at.to_owned(),
        tool: tool("the vcrpy cassette", path),
    })
}

/// The route a recorded URL belongs to, its upstream, and the path a client of the proxy
/// sends: a route whose upstream has the URL's scheme, host and port (the route's own path
/// removed, keeping its last segment, which the proxy shares with the request path); else the
/// default route with the whole path.
fn route_of(url: &url::Url, routes: &[Route]) -> (String, String, String) {
    let origin = url.origin().ascii_serialization();
    for route in routes {
        let Ok(base) = url::Url::parse(&route.base_url) else {
            continue;
        };
        if base.origin().ascii_serialization() != origin {
            continue;
        }
        let base_path = base.path().trim_end_matches('/');
        let kept = base_path.rsplit('/').next().unwrap_or("");
        let prefix = &base_path[..base_path.len() - kept.len()];
        let rest = url
            .path()
            .strip_prefix(prefix.trim_end_matches('/'))
            .filter(|rest| rest.starts_with('/'));
        if let Some(rest) = rest {
            return (route.name.clone(), route.base_url.clone(), rest.to_owned());
        }
    }
    (DEFAULT_TARGET.to_owned(), origin, url.path().to_owned())
}

/// vcrpy headers: a map of names to lists of values (or single values).
fn headers(value: Option<&Yaml>) -> anyhow::Result<Vec<(String, String)>> {
    let Some(Yaml::Mapping(map)) = value else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (name, values) in map {
        let name = name
            .as_str()
            .ok_or_else(|| anyhow!("a header name is not a string"))?;
        let values = match values {
            Yaml::Sequence(list) => list.iter().collect::<Vec<_>>(),
            single => vec![single],
        };
        for value in values {
            let value = match value {
                Yaml::String(s) => s.clone(),
                Yaml::Number(n) => n.to_string(),
                Yaml::Bool(b) => b.to_string(),
                other => bail!("header {name}: unexpected value {other:?}"),
            };
            out.push((name.to_owned(), value));
        }
    }
    Ok(out)
}

/// A vcrpy body: a string, `!!binary` base64, or nothing.
fn body(value: Option<&Yaml>) -> anyhow::Result<Bytes> {
    use base64::Engine;
    match value {
        None | Some(Yaml::Null) => Ok(Bytes::new()),
        Some(Yaml::String(s)) => Ok(Bytes::from(s.clone())),
        Some(Yaml::Tagged(tagged)) if tagged.tag == "binary" => {
            let Yaml::String(b64) = &tagged.value else {
                bail!("a !!binary body is not a string");
            };
            let compact: String = b64.split_whitespace().collect();
            base64::engine::general_purpose::STANDARD
                .decode(compact)
                .map(Bytes::from)
                .context("a !!binary body is not valid base64")
        }
        Some(Yaml::Mapping(map)) if map.contains_key("string") => body(map.get("string")),
        Some(other) => bail!("unexpected body {other:?}"),
    }
}

/// The body without its content encoding: gzip and deflate are decoded; another encoding is
/// an error rather than a cassette holding compressed bytes.
fn decode(body: Bytes, headers: &[(String, String)]) -> anyhow::Result<Bytes> {
    let encoding = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-encoding"))
        .map(|(_, v)| v.trim().to_ascii_lowercase());
    let mut out = Vec::new();
    match encoding.as_deref() {
        None | Some("" | "identity") => return Ok(body),
        Some("gzip" | "x-gzip") => flate2::read::MultiGzDecoder::new(&body[..])
            .read_to_end(&mut out)
            .context("the gzip answer does not decode (truncated?)")?,
        Some("deflate") => flate2::read::ZlibDecoder::new(&body[..])
            .read_to_end(&mut out)
            .context("the deflate answer does not decode (truncated?)")?,
        Some(other) => bail!(
            "the answer is {other}-encoded, which cannot be decoded here; re-record it with vcrpy's decode_compressed_response=True"
        ),
    };
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> Vec<Route> {
        [
            ("default", "https://api.openai.com"),
            ("anthropic", "https://api.anthropic.com"),
            ("groq", "https://api.groq.com/openai/v1"),
        ]
        .iter()
        .map(|(name, base)| Route::new(*name, *base))
        .collect()
    }

    #[test]
    fn urls_map_to_the_route_and_path_a_proxy_client_sends() {
        let of = |uri: &str| {
            let (target, _, path) = route_of(&url::Url::parse(uri).unwrap(), &routes());
            format!("{target} {path}")
        };
        assert_eq!(
            of("https://api.openai.com/v1/chat/completions"),
            "default /v1/chat/completions"
        );
        assert_eq!(
            of("https://api.anthropic.com/v1/messages"),
            "anthropic /v1/messages"
        );
        assert_eq!(
            of("https://api.groq.com/openai/v1/chat/completions"),
            "groq /v1/chat/completions"
        );
        assert_eq!(
            of("https://elsewhere.example/v1/chat/completions"),
            "default /v1/chat/completions"
        );
    }

    #[test]
    fn seed_params_become_a_chat_body() {
        let body = seed_body(
            json!({"model": "m", "system": "Be brief", "prompt": "Hi", "temperature": 0})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap();
        assert_eq!(
            body,
            json!({"model": "m", "temperature": 0, "messages": [
                {"role": "system", "content": "Be brief"}, {"role": "user", "content": "Hi"}]})
        );
        assert!(seed_body(Map::new()).is_err());
    }

    #[test]
    fn compressed_answers_are_decoded_and_bad_ones_refused() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(b"{\"ok\":true}").unwrap();
        let bytes = Bytes::from(gz.finish().unwrap());
        let gzip = vec![("Content-Encoding".to_owned(), "gzip".to_owned())];
        assert_eq!(
            decode(bytes.clone(), &gzip).unwrap(),
            Bytes::from("{\"ok\":true}")
        );
        let truncated = bytes.slice(..bytes.len() / 2);
        assert!(format!("{:#}", decode(truncated, &gzip).unwrap_err()).contains("truncated"));
        let br = vec![("content-encoding".to_owned(), "br".to_owned())];
        assert!(decode(bytes, &br)
            .unwrap_err()
            .to_string()
            .contains("decode_compressed_response"));
    }
}
