//! `cassette key`: print the key of a request, or with `--json` the material behind it.
//!
//! The request comes either from flags plus a body file (`-` for stdin), or from a request file
//! (`--request`, see [`crate::shared::request_file`]). A body that is not UTF-8 or not JSON is keyed
//! raw, exactly as the proxy would key it; only a file that cannot be read is an error.

use crate::shared::request_file;
use crate::shared::settings::{KeyingArgs, SettingsFile};
use anyhow::{anyhow, Context};
use cassette_keying::KEY_VERSION;
use cassette_recorder::Request;
use serde_json::json;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `cassette key`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    cassette key --path /v1/chat/completions body.json\n  \
    cassette key --path /v1/messages --target anthropic --header 'anthropic-version: 2023-06-01' - < body.json\n  \
    cassette key --request examples/requests/chat.json --json")]
pub(crate) struct KeyArgs {
    /// Request path, e.g. /v1/chat/completions (selects the profile).
    #[arg(long, required_unless_present = "request")]
    path: Option<String>,

    /// HTTP method [default: POST].
    #[arg(long)]
    method: Option<String>,

    /// Upstream route name [default: default].
    #[arg(long)]
    target: Option<String>,

    /// A request header as 'Name: value'; repeatable. Only semantic headers enter the key.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,

    /// Raw query string, with or without the leading '?'.
    #[arg(long)]
    query: Option<String>,

    /// Read the whole request from a JSON request file instead of the flags above.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["path", "method", "target", "headers", "query", "body"]
    )]
    request: Option<PathBuf>,

    /// Print {"key", "version", "material", "system_sha256"} instead of the bare key.
    #[arg(long)]
    json: bool,

    /// How the body is keyed, as for the proxy and the runner.
    #[command(flatten)]
    keying: KeyingArgs,

    /// The body: a file, or '-' for standard input. No body when omitted.
    #[arg(value_name = "BODY_FILE|-")]
    body: Option<PathBuf>,
}

/// Runs `cassette key`.
pub(crate) fn run(args: KeyArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    let request = match &args.request {
        Some(file) => request_file::load(file)?,
        None => from_flags(&args)?,
    };
    let config = args.keying.config(file)?;
    let keyed = request.key(&config);
    if args.json {
        let out = json!({
            "key": keyed.key.as_str(),
            "version": KEY_VERSION,
            "material": keyed.material,
            "system_sha256": keyed.system_sha256,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{}", keyed.key);
    }
    Ok(ExitCode::SUCCESS)
}

fn from_flags(args: &KeyArgs) -> anyhow::Result<Request> {
    let path = args
        .path
        .clone()
        .ok_or_else(|| anyhow!("--path is required unless --request is given"))?;
    let headers = args
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Request {
        target: args.target.clone().unwrap_or_else(|| "default".into()),
        method: args.method.clone().unwrap_or_else(|| "POST".into()),
        path,
        query: args
            .query
            .as_deref()
            .unwrap_or("")
            .trim_start_matches('?')
            .to_owned(),
        headers,
        body: match &args.body {
            Some(file) => read_body(file)?.into(),
            None => Default::default(),
        },
    })
}

fn parse_header(header: &str) -> anyhow::Result<(String, String)> {
    let (name, value) = header
        .split_once(':')
        .ok_or_else(|| anyhow!("--header {header:?} is not of the form 'Name: value'"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(anyhow!("--header {header:?} has an empty name"));
    }
    Ok((name.to_owned(), value.trim().to_owned()))
}

fn read_body(file: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    if file.as_os_str() == "-" {
        let mut body = Vec::new();
        std::io::stdin()
            .read_to_end(&mut body)
            .context("reading the body from standard input")?;
        return Ok(body);
    }
    std::fs::read(file).with_context(|| format!("reading body file {}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_split_at_the_first_colon() {
        assert_eq!(
            parse_header("X-Thing:  a:b ").unwrap(),
            ("X-Thing".to_owned(), "a:b".to_owned())
        );
        assert!(parse_header("no colon").is_err());
        assert!(parse_header(": v").is_err());
    }
}
