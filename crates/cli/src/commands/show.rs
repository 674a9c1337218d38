//! `cassette show KEY`: one cassette, readably: its facts, the request, the response and the
//! answer's text and tool calls. A unique key prefix is enough.

use crate::shared::cassettes::{cassette_answer, resolve_key};
use crate::shared::runtime::runtime;
use crate::shared::settings::SettingsFile;
use crate::shared::settings::StoreArgs;
use anyhow::Context;
use cassette_recorder::Cassette;
use cassette_tape::document::StoredBody;
use std::process::ExitCode;

/// Arguments of `cassette show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The key, or a prefix of it that matches one cassette.
    key: String,

    #[command(flatten)]
    store: StoreArgs,

    /// Print the stored document as it is.
    #[arg(long)]
    json: bool,
}

/// Runs `cassette show`.
pub(crate) fn run(args: ShowArgs, file: &SettingsFile) -> anyhow::Result<ExitCode> {
    let store = args.store.open_for_reading(file)?;
    let (key, bytes) = runtime()?.block_on(async {
        let key = resolve_key(&store, &args.key).await?;
        let bytes = store
            .get(&key)
            .await?
            .with_context(|| format!("cassette {key} disappeared while reading"))?;
        anyhow::Ok((key, bytes))
    })?;
    if args.json {
        print!("{}", String::from_utf8_lossy(&bytes));
        return Ok(ExitCode::SUCCESS);
    }
    let cassette = Cassette::from_document(&bytes)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("cassette {key} in {} does not parse", store.location()))?;
    print!("{}", render(&cassette));
    Ok(ExitCode::SUCCESS)
}

fn render(c: &Cassette) -> String {
    let mut out = String::new();
    let mut fact = |name: &str, value: &str| out.push_str(&format!("{name:<15}{value}\n"));
    fact("key", c.key.as_str());
    fact("key_version", &c.key_version.to_string());
    fact("recorded_at", &c.recorded_at);
    fact("tool", &c.tool);
    if let Some(test) = &c.meta.test {
        // Provenance: the test a test runner's plugin said was running when it was recorded.
        fact("test", test);
    }
    if let Some(scope) = &c.test_scope {
        // Keyed for that test alone: another test's recording answers the plain key.
        fact(
            "test_scoped",
            &format!("yes, for {} (plain key {})", scope.test, scope.plain_key),
        );
    }
    fact("target", &format!("{} ({})", c.target, c.upstream));
    fact("profile", &c.meta.profile);
    let model = match (
        c.meta.requested_model.as_deref(),
        c.meta.response_model.as_deref(),
    ) {
        (Some(a), Some(b)) if a != b => format!("{a} (answered by {b})"),
        (Some(a), _) => a.to_owned(),
        (None, Some(b)) => format!("(none requested; answered by {b})"),
        (None, None) => "-".to_owned(),
    };
    fact("model", &model);
    if let Some(finish) = &c.meta.finish_reason {
        fact("finish", finish);
    }
    if let Some(usage) = &c.meta.usage {
        fact("usage", &usage.to_string());
    }
    fact("latency", &format!("{} ms", c.meta.latency_ms));
    if c.meta.request_redacted {
        fact(
            "note",
            "redaction changed keyed parts of the stored request",
        );
    }

    let query = if c.request.query.is_empty() {
        String::new()
    } else {
        format!("?{}", c.request.query)
    };
    out.push_str(&format!(
        "\n--- request: {} {}{query}\n",
        c.request.method, c.request.path
    ));
    for (name, value) in &c.request.headers {
        out.push_str(&format!("{name}: {value}\n"));
    }
    out.push_str(&body(&c.request.body));

    let stream = c
        .response
        .stream
        .as_deref()
        .map(|s| format!(" (recorded as a {s} stream)"))
        .unwrap_or_default();
    out.push_str(&format!("\n--- response: {}{stream}\n", c.response.status));
    for (name, value) in &c.response.headers {
        out.push_str(&format!("{name}: {value}\n"));
    }
    out.push_str(&body(&c.response.body));
    if c.is_download() {
        // A file, not a model's answer: no answer text to read out of it.
        if !out.ends_with('\n') {
            out.push('\n');
        }
        return out;
    }

    let answer = cassette_answer(c);
    out.push_str("\n--- answer text\n");
    out.push_str(&answer.text);
    if !answer.text.ends_with('\n') {
        out.push('\n');
    }
    for call in &answer.tool_calls {
        out.push_str(&format!("tool call: {}({})\n", call.name, call.arguments));
    }
    out
}

fn body(body: &StoredBody) -> String {
    let mut text = match body {
        StoredBody::Empty => "(no body)".to_owned(),
        StoredBody::Json(value) => {
            serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
        }
        StoredBody::Text(text) => text.clone(),
        StoredBody::Base64(b64) => format!("(binary, base64) {b64}"),
    };
    text.push('\n');
    text
}
