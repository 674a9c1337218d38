//! `cassette ls [--json]`: what is recorded, one cassette a line, with model, path, size and
//! recorded_at; a later occurrence of a request (sequence mode) shows which (`#3`), a
//! test-scoped one says so, and a recording a test runner's plugin made names its test.

use crate::shared::cassettes::{foreign_files, load_all};
use crate::shared::runtime::runtime;
use crate::shared::settings::SettingsFile;
use crate::shared::settings::StoreArgs;
use cassette_recorder::Cassette;
use cassette_store::Key;
use serde_json::json;
use std::io::Write;
use std::process::ExitCode;

/// Arguments of `cassette ls`.
#[derive(Debug, clap::Args)]
pub(crate) struct LsArgs {
    #[command(flatten)]
    store: StoreArgs,

    /// One JSON object a line: key, target, method, path, model, response_model, status,
    /// size, recorded_at, key_version, test (the test that recorded it, when a test runner's
    /// plugin named one), for a later occurrence of a request (sequence mode) base_key and
    /// occurrence, for a test-scoped recording (adopt) test_scoped and plain_key (or key and
    /// error for unreadable cassettes).
    #[arg(long)]
    json: bool,
}

/// Runs `cassette ls`. Unreadable cassettes are listed with their error and make the exit
/// status 1, so a listing is also a cheap health check.
pub(crate) fn run(args: LsArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    match list(args, file) {
        // `cassette ls | head` closes the pipe early: that is a finished listing, not an error.
        Err(err)
            if err
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(ExitCode::SUCCESS)
        }
        other => other,
    }
}

fn list(args: LsArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    let spec = args.store.resolve(file);
    let store = spec.open_for_reading()?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let loaded = runtime()?.block_on(load_all(&store))?;
    let mut broken = 0;
    if !args.json && !loaded.is_empty() {
        writeln!(
            out,
            "{:<16}  {:<20}  {:<24}  {:<28}  {:>6}  {:>8}  TEST",
            "KEY", "RECORDED_AT", "MODEL", "PATH", "STATUS", "SIZE"
        )?;
    }
    for (key, bytes, parsed) in &loaded {
        let size = bytes.as_ref().map_or(0, |b| b.len());
        let line = match (parsed, args.json) {
            (Ok(cassette), true) => json_line(key, size, cassette),
            (Ok(cassette), false) => table_row(key, size, cassette),
            (Err(reason), true) => json!({"key": key, "size": size, "error": reason}).to_string(),
            (Err(reason), false) => format!("{:<16}  unreadable: {reason}", key.short()),
        };
        broken += usize::from(parsed.is_err());
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    // On stderr, so `ls --json` stays one cassette a line.
    let foreign = foreign_files(&spec)?;
    for file in &foreign {
        eprintln!("not listed: {}: {}", file.path.display(), file.what);
    }
    eprintln!(
        "{} cassettes in {}{}{}",
        loaded.len(),
        store.location(),
        if broken > 0 {
            format!(", {broken} unreadable")
        } else {
            String::new()
        },
        if foreign.is_empty() {
            String::new()
        } else {
            format!(", {} other files not listed", foreign.len())
        }
    );
    Ok(if broken > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// One cassette as a JSON line.
fn json_line(key: &Key, size: usize, c: &Cassette) -> String {
    let mut line = json!({
        "key": key,
        "target": c.target,
        "method": c.request.method,
        "path": c.request.path,
        "model": c.requested_model(),
        "response_model": c.meta.response_model,
        "status": c.response.status,
        "size": size,
        "recorded_at": c.recorded_at,
        "key_version": c.key_version,
        "test": c.meta.test,
    });
    if let Some(sequence) = &c.sequence {
        line["base_key"] = json!(sequence.base_key);
        line["occurrence"] = json!(sequence.occurrence);
    }
    if let Some(scope) = &c.test_scope {
        line["test_scoped"] = json!(true);
        line["plain_key"] = json!(scope.plain_key);
    }
    line.to_string()
}

/// One cassette as a row of the table.
fn table_row(key: &Key, size: usize, c: &Cassette) -> String {
    let mut path = if c.target == "default" {
        c.request.path.clone()
    } else if c.is_download() {
        // A download's target is its URL's origin; a HEAD (what the file's headers say) is
        // told from the GET of the same file.
        let method = match c.request.method.as_str() {
            "GET" => String::new(),
            other => format!("{other} "),
        };
        format!("{method}{}{}", c.target, c.request.path)
    } else {
        format!("{}:{}", c.target, c.request.path)
    };
    // A later occurrence of a request (sequence mode): which one.
    if let Some(sequence) = &c.sequence {
        path.push_str(&format!(" #{}", sequence.occurrence));
    }
    // A test-scoped recording (adopt): one test's own answer to a request another test's
    // recording answers otherwise.
    if c.test_scope.is_some() {
        path.push_str(" (test-scoped)");
    }
    format!(
        "{:<16}  {:<20}  {:<24}  {:<28}  {:>6}  {:>8}  {}",
        key.short(),
        c.recorded_at,
        c.requested_model().unwrap_or("-"),
        path,
        c.response.status,
        size,
        c.meta.test.as_deref().unwrap_or("-")
    )
}
