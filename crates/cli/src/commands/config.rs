//! `cassette config`: the effective settings and where each came from (flag, environment,
//! settings file, default). Keys are shown only as set or unset, with the variable they come
//! from.

use crate::shared::judge::JudgeArgs;
use crate::shared::settings::{
    RecorderArgs, RecorderSettings, ServeArgs, ServeSettings, SettingsFile,
};
use cassette_grade::judge::JudgeConfig;
use cassette_recorder::Downloads;
use clap::parser::ValueSource;
use clap::ArgMatches;
use serde::Serialize;
use std::process::ExitCode;

/// Arguments of `cassette config`: the recorder flags, so their effect can be seen.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Origins: flag, env (the variable), file (cassette.toml), default.\n\
Examples:\n  \
cassette config\n  \
CASSETTE_MODE=record cassette config --json"
)]
pub(crate) struct ConfigArgs {
    #[command(flatten)]
    recorder: RecorderArgs,

    #[command(flatten)]
    serve: ServeArgs,

    #[command(flatten)]
    judge: JudgeArgs,

    /// Print JSON: {"file": PATH or null, "settings": [{"name", "value", "origin"}]}.
    #[arg(long)]
    json: bool,
}

/// One setting as shown.
#[derive(Debug, Serialize)]
struct Row {
    name: String,
    value: String,
    origin: String,
}

/// Runs `cassette config`; `matches` are the subcommand's, to tell flags from variables.
pub(crate) fn run(
    args: ConfigArgs,
    file: &SettingsFile,
    matches: &ArgMatches,
) -> anyhow::Result<ExitCode> {
    let settings = args.recorder.resolve(file)?;
    let mut rows = rows(&settings, &args.serve.resolve(file), file, matches);
    rows.extend(judge_rows(&args.judge.resolve(file), file, matches));
    // A store or an upstream URL may carry a password or a key: shown without.
    for row in &mut rows {
        row.value = cassette_keying::shown_urls(&row.value).into_owned();
    }
    if args.json {
        let out = serde_json::json!({
            "file": file.path.as_ref().map(|p| p.display().to_string()),
            "settings": rows,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    match &file.path {
        Some(path) => println!("settings file: {}", path.display()),
        None => println!("settings file: none"),
    }
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let value_width = rows
        .iter()
        .map(|r| r.value.chars().count())
        .max()
        .unwrap_or(0)
        .min(60);
    for row in &rows {
        println!(
            "{:width$}  {:value_width$}  ({})",
            row.name, row.value, row.origin
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Where a single value came from: `id` is the flag's argument id, `env` its variable.
fn origin(matches: &ArgMatches, id: &str, env: Option<&str>, in_file: bool) -> String {
    match matches.value_source(id) {
        Some(ValueSource::CommandLine) => "flag".to_owned(),
        Some(ValueSource::EnvVariable) => format!("env {}", env.unwrap_or("?")),
        _ if in_file => "file".to_owned(),
        _ => "default".to_owned(),
    }
}

/// Where a list came from: the file's entries, then the flags'.
fn list_origin(matches: &ArgMatches, id: &str, in_file: bool) -> String {
    let from_flags = matches.value_source(id) == Some(ValueSource::CommandLine);
    match (in_file, from_flags) {
        (true, true) => "file + flag",
        (true, false) => "file",
        (false, true) => "flag",
        (false, false) => "default",
    }
    .to_owned()
}

fn list(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

fn rows(
    settings: &RecorderSettings,
    serve: &ServeSettings,
    file: &SettingsFile,
    m: &ArgMatches,
) -> Vec<Row> {
    let config = &settings.config;
    let row = |name: &str, value: String, origin: String| Row {
        name: name.to_owned(),
        value,
        origin,
    };
    let store_origin = match (m.value_source("store"), m.value_source("dir")) {
        (Some(ValueSource::CommandLine), _) | (_, Some(ValueSource::CommandLine)) => {
            "flag".to_owned()
        }
        (Some(ValueSource::EnvVariable), _) => "env CASSETTE_STORE".to_owned(),
        (_, Some(ValueSource::EnvVariable)) => "env CASSETTE_DIR".to_owned(),
        _ if file.store.is_some() => "file".to_owned(),
        _ => "default".to_owned(),
    };
    let errors_origin = if m.value_source("no_record_errors") == Some(ValueSource::CommandLine)
        || m.value_source("record_errors") == Some(ValueSource::CommandLine)
    {
        "flag".to_owned()
    } else if file.record_errors.is_some() {
        "file".to_owned()
    } else {
        "default".to_owned()
    };
    let key = config.key.canonical();
    let mut rows = vec![
        row(
            "mode",
            config.mode.to_string(),
            origin(m, "mode", Some("CASSETTE_MODE"), file.mode.is_some()),
        ),
        row("store", settings.store.to_string(), store_origin),
        row(
            "cache",
            settings
                .cache
                .as_ref()
                .map_or("none".to_owned(), ToString::to_string),
            origin(m, "cache", Some("CASSETTE_CACHE"), file.cache.is_some()),
        ),
        row(
            "usage_log",
            settings
                .usage_log
                .as_ref()
                .map_or("none".to_owned(), |p| p.display().to_string()),
            origin(
                m,
                "usage_log",
                Some("CASSETTE_USAGE_LOG"),
                file.usage_log.is_some(),
            ),
        ),
        row(
            "record_errors",
            (config.errors == cassette_recorder::ErrorRecording::Record).to_string(),
            errors_origin,
        ),
        row(
            "stream_chunk_size",
            config.stream_chunk_size.to_string(),
            origin(
                m,
                "stream_chunk_size",
                Some("CASSETTE_STREAM_CHUNK"),
                file.stream_chunk_size.is_some(),
            ),
        ),
        row(
            "replay_memory",
            config.replay_memory.to_string(),
            origin(
                m,
                "replay_memory",
                Some("CASSETTE_REPLAY_MEMORY"),
                file.replay_memory.is_some(),
            ),
        ),
        row(
            "max_answer",
            config.max_answer.to_string(),
            origin(
                m,
                "max_answer",
                Some("CASSETTE_MAX_ANSWER"),
                file.max_answer.is_some(),
            ),
        ),
        row(
            "upstream_timeout",
            config.upstream_timeout.as_secs().to_string(),
            origin(
                m,
                "upstream_timeout",
                Some("CASSETTE_UPSTREAM_TIMEOUT"),
                file.upstream_timeout.is_some(),
            ),
        ),
        row(
            "repeats",
            config.repeats.to_string(),
            origin(
                m,
                "repeats",
                Some("CASSETTE_REPEATS"),
                file.repeats.is_some(),
            ),
        ),
        row(
            "adopt.downloads",
            (config.downloads == Downloads::Stored).to_string(),
            match file.downloads {
                Some(_) => "file".to_owned(),
                None => "default".to_owned(),
            },
        ),
        row(
            "keying.volatile",
            list(&key.volatile),
            list_origin(m, "volatile", !file.volatile.is_empty()),
        ),
        row(
            "keying.keep_volatile",
            list(&key.keep_volatile),
            list_origin(m, "keep_volatile", !file.keep_volatile.is_empty()),
        ),
        row(
            "keying.ignore",
            list(&key.ignore),
            list_origin(m, "ignore", !file.ignore.is_empty()),
        ),
        row(
            "keying.fingerprint",
            key.fingerprint(),
            "derived from the three above".to_owned(),
        ),
        row(
            "redact.paths",
            list(&config.redaction.json_paths),
            list_origin(m, "redact_paths", !file.redact_paths.is_empty()),
        ),
        row(
            "redact.patterns",
            list(&config.redaction.patterns),
            list_origin(m, "redact_patterns", !file.redact_patterns.is_empty()),
        ),
    ];
    rows.extend(serve_rows(serve, file, m));
    rows.extend(route_rows(settings, file, m));
    rows
}

/// The miss status and the catch of traffic that bypasses the base URL.
fn serve_rows(serve: &ServeSettings, file: &SettingsFile, m: &ArgMatches) -> Vec<Row> {
    let catch_origin = if m.value_source("no_catch_bypass") == Some(ValueSource::CommandLine)
        || m.value_source("catch_bypass") == Some(ValueSource::CommandLine)
    {
        "flag".to_owned()
    } else if file.catch_bypass.is_some() {
        "file".to_owned()
    } else {
        "default".to_owned()
    };
    let allowed: Vec<String> = serve.allowed().iter().map(ToString::to_string).collect();
    vec![
        Row {
            name: "miss_status".to_owned(),
            value: serve.miss_status.to_string(),
            origin: origin(
                m,
                "miss_status",
                Some("CASSETTE_MISS_STATUS"),
                file.miss_status.is_some(),
            ),
        },
        Row {
            name: "bypass.catch".to_owned(),
            value: serve.catches().to_string(),
            origin: catch_origin,
        },
        Row {
            name: "bypass.allow".to_owned(),
            value: list(&allowed),
            origin: list_origin(m, "allow_hosts", !file.allow_hosts.is_empty()),
        },
    ]
}

/// The judge's model and route (`[judge]`, `--judge-model`, `--judge-route`).
fn judge_rows(judge: &JudgeConfig, file: &SettingsFile, m: &ArgMatches) -> Vec<Row> {
    vec![
        Row {
            name: "judge.model".to_owned(),
            value: judge.model.clone().unwrap_or_else(|| "none".to_owned()),
            origin: origin(
                m,
                "judge_model",
                Some("CASSETTE_JUDGE_MODEL"),
                file.judge_model.is_some(),
            ),
        },
        Row {
            name: "judge.route".to_owned(),
            value: judge.route.clone(),
            origin: origin(
                m,
                "judge_route",
                Some("CASSETTE_JUDGE_ROUTE"),
                file.judge_route.is_some(),
            ),
        },
    ]
}

/// For each route: its upstream, auth style and whether a key is held (never the key).
fn route_rows(settings: &RecorderSettings, file: &SettingsFile, m: &ArgMatches) -> Vec<Row> {
    let flagged_routes: Vec<String> = m
        .get_raw("routes")
        .map(|values| {
            values
                .filter_map(|v| {
                    v.to_str()?
                        .split_once('=')
                        .map(|(n, _)| n.trim().to_owned())
                })
                .collect()
        })
        .unwrap_or_default();
    let mut rows = Vec::new();
    for route in &settings.config.routes {
        let in_file = file.route(&route.name);
        let upstream_origin = if flagged_routes.contains(&route.name) {
            "flag".to_owned()
        } else if route.name == cassette_recorder::config::DEFAULT_TARGET
            && m.value_source("upstream")
                .is_some_and(|s| s != ValueSource::DefaultValue)
        {
            origin(m, "upstream", Some("UPSTREAM_BASE"), false)
        } else if in_file.is_some_and(|r| r.upstream.is_some()) {
            "file".to_owned()
        } else if in_file.is_none() && !crate::shared::settings::is_built_in_route(&route.name) {
            "flag".to_owned()
        } else {
            "default".to_owned()
        };
        let name = |what: &str| format!("routes.{}.{what}", route.name);
        rows.push(Row {
            name: name("upstream"),
            value: route.base_url.clone(),
            origin: upstream_origin,
        });
        rows.push(Row {
            name: name("auth"),
            value: route.auth.to_string(),
            origin: if in_file.is_some_and(|r| r.auth.is_some()) {
                "file"
            } else {
                "default"
            }
            .to_owned(),
        });
        let key = settings.keys.iter().find(|k| k.route == route.name);
        let sources = key.map(|k| k.sources.join(", ")).unwrap_or_default();
        let (value, origin) = match key.and_then(|k| k.from.as_ref()) {
            Some(var) => ("set".to_owned(), format!("env {var}")),
            None if sources.is_empty() => (
                "none".to_owned(),
                "this route holds no key; the client's credential passes through".to_owned(),
            ),
            None => ("unset".to_owned(), format!("reads {sources}")),
        };
        rows.push(Row {
            name: name("key"),
            value,
            origin,
        });
    }
    rows
}
