//! End-to-end tests of cassette.toml through the built binary: which file is read, the
//! precedence of flags, environment, file and defaults (`cassette config --json`), the same
//! store from any folder below the file, bad files refused before any IO, keying settings that
//! differ between record and replay, redaction from the file, and keys never shown.

mod common;

use common::cli_env::{both, code, json_lines, Workdir};
use common::fake_llm::FakeLlm;
use serde_json::Value;
use std::collections::HashMap;

/// `cassette config --json` as name -> (value, origin).
fn config(out: &std::process::Output) -> (Value, HashMap<String, (String, String)>) {
    assert_eq!(code(out), 0, "{}", both(out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = doc["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                (
                    r["value"].as_str().unwrap().to_owned(),
                    r["origin"].as_str().unwrap().to_owned(),
                ),
            )
        })
        .collect();
    (doc["file"].clone(), rows)
}

fn get<'a>(rows: &'a HashMap<String, (String, String)>, name: &str) -> (&'a str, &'a str) {
    let (value, origin) = rows
        .get(name)
        .unwrap_or_else(|| panic!("no {name}: {rows:?}"));
    (value, origin)
}

const TEAM: &str = r#"
store = "file://tapes"
mode = "auto"
record_errors = true

[keying]
volatile = ["seed"]

[redact]
paths = ["$..email"]

[routes.default]
upstream = "https://gateway.team.internal/v1"

[routes.acme]
upstream = "https://llm.acme.internal"
api_key_env = "ACME_API_KEY"
auth = "query:key"
"#;

#[test]
fn precedence_is_flag_then_env_then_file_then_default() {
    let dir = Workdir::new();
    dir.write("cassette.toml", TEAM);
    let root = dir.path().display().to_string();

    // The file alone (its mode calls an upstream, so acme's key variable is its own:
    // `ACME_API_KEY`, which a developer's shell must not set here).
    let alone = dir
        .cassette()
        .args(["config", "--json"])
        .env_remove("ACME_API_KEY")
        .output()
        .unwrap();
    let (file, rows) = config(&alone);
    assert_eq!(file, format!("{root}/cassette.toml").as_str());
    assert_eq!(get(&rows, "mode"), ("auto", "file"));
    assert_eq!(
        get(&rows, "store"),
        (format!("file://{root}/tapes").as_str(), "file")
    );
    assert_eq!(get(&rows, "record_errors"), ("true", "file"));
    assert_eq!(get(&rows, "keying.volatile"), ("[seed]", "file"));
    assert_eq!(get(&rows, "redact.paths"), ("[$..email]", "file"));
    assert_eq!(get(&rows, "cache"), ("none", "default"));
    assert_eq!(get(&rows, "stream_chunk_size"), ("64", "default"));
    assert_eq!(
        get(&rows, "routes.default.upstream"),
        ("https://gateway.team.internal/v1", "file")
    );
    assert_eq!(get(&rows, "routes.acme.auth"), ("query:key", "file"));
    assert_eq!(
        get(&rows, "routes.acme.key"),
        ("unset", "reads ACME_API_KEY")
    );
    assert_eq!(get(&rows, "routes.ollama.key").0, "none");

    // The environment over the file.
    let out = dir
        .cassette()
        .args(["config", "--json"])
        .env("CASSETTE_MODE", "record")
        .env("CASSETTE_STORE", "memory://")
        .env("UPSTREAM_BASE", "http://127.0.0.1:1")
        .env("CASSETTE_STREAM_CHUNK", "5")
        .env("ACME_API_KEY", "acme-secret-value-123")
        .output()
        .unwrap();
    let (_, rows) = config(&out);
    assert_eq!(get(&rows, "mode"), ("record", "env CASSETTE_MODE"));
    assert_eq!(get(&rows, "store"), ("memory://", "env CASSETTE_STORE"));
    assert_eq!(
        get(&rows, "stream_chunk_size"),
        ("5", "env CASSETTE_STREAM_CHUNK")
    );
    assert_eq!(
        get(&rows, "routes.default.upstream"),
        ("http://127.0.0.1:1", "env UPSTREAM_BASE")
    );
    assert_eq!(get(&rows, "routes.acme.key"), ("set", "env ACME_API_KEY"));
    assert!(
        !common::stdout(&out).contains("acme-secret"),
        "{}",
        both(&out)
    );

    // Flags over both; lists add to the file's; a boolean from the file is turned off.
    let out = dir
        .cassette()
        .args([
            "config",
            "--json",
            "--mode",
            "off",
            "--store",
            "jsonl://x.jsonl",
            "--no-record-errors",
            "--volatile",
            "temperature",
            "--upstream",
            "http://127.0.0.1:2",
            "--route",
            "acme=http://127.0.0.1:3",
        ])
        .env("CASSETTE_MODE", "record")
        .env("CASSETTE_STORE", "memory://")
        .output()
        .unwrap();
    let (_, rows) = config(&out);
    assert_eq!(get(&rows, "mode"), ("off", "flag"));
    assert_eq!(get(&rows, "store"), ("jsonl://x.jsonl", "flag"));
    assert_eq!(get(&rows, "record_errors"), ("false", "flag"));
    assert_eq!(
        get(&rows, "keying.volatile"),
        ("[seed, temperature]", "file + flag")
    );
    assert_eq!(
        get(&rows, "routes.default.upstream"),
        ("http://127.0.0.1:2", "flag")
    );
    assert_eq!(
        get(&rows, "routes.acme.upstream"),
        ("http://127.0.0.1:3", "flag")
    );
    assert_eq!(get(&rows, "routes.acme.auth"), ("query:key", "file"));

    // --no-config: defaults again; --config and CASSETTE_CONFIG: another file.
    let (file, rows) = config(&dir.run(&["config", "--json", "--no-config"]));
    assert_eq!(file, Value::Null);
    assert_eq!(get(&rows, "mode"), ("replay", "default"));
    assert_eq!(get(&rows, "store"), ("file://cassettes", "default"));
    dir.write("other/elsewhere.toml", "mode = \"record\"\n");
    let (file, rows) = config(&dir.run(&["config", "--json", "--config", "other/elsewhere.toml"]));
    assert_eq!(file, format!("{root}/other/elsewhere.toml").as_str());
    assert_eq!(get(&rows, "mode"), ("record", "file"));
    assert_eq!(
        get(&rows, "store"),
        (format!("file://{root}/other/cassettes").as_str(), "default")
    );
    let out = dir
        .cassette()
        .args(["config", "--json"])
        .env("CASSETTE_CONFIG", dir.join("other/elsewhere.toml"))
        .output()
        .unwrap();
    assert_eq!(get(&config(&out).1, "mode"), ("record", "file"));
}

#[test]
fn boolean_variables_take_the_usual_spellings_of_yes_and_no() {
    // Issue 33: `CASSETTE_EXACT_STREAMS=1` was refused (`possible values: true, false`).
    let dir = Workdir::new();
    for value in ["1", "0", "yes", "No", "on", "OFF", "true", "False"] {
        let out = dir
            .cassette()
            .args(["config", "--json"])
            .env("CASSETTE_EXACT_STREAMS", value)
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{value}: {}", both(&out));
    }
    let out = dir
        .cassette()
        .args(["config", "--json"])
        .env("CASSETTE_EXACT_STREAMS", "maybe")
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(
        both(&out).contains("`maybe` is not yes or no"),
        "{}",
        both(&out)
    );
}

#[test]
fn keys_are_only_ever_set_or_unset() {
    let dir = Workdir::new();
    let secret = "sk-proj-thisIsTheRealKey0123456789abcdef";
    let out = dir
        .cassette()
        .args(["config"])
        .env("OPENAI_API_KEY", secret)
        .env("ANTHROPIC_API_KEY", "sk-ant-api03-another-real-key-987654")
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", both(&out));
    let text = both(&out);
    assert!(!text.contains("thisIsTheRealKey"), "{text}");
    assert!(!text.contains("another-real-key"), "{text}");
    assert!(
        text.contains("set") && text.contains("env OPENAI_API_KEY"),
        "{text}"
    );
    assert!(text.contains("env ANTHROPIC_API_KEY"), "{text}");
}

fn case(id: &str, prompt: &str, extra: &str) -> String {
    format!(
        r#"{{"id":"{id}","prompt":"{prompt}","params":{{"model":"m","temperature":0{extra}}},"grader":"contains","expect":{{"needle":"said"}}}}"#
    )
}

#[test]
fn a_subdirectory_uses_the_same_store() {
    let dir = Workdir::new();
    let fake = FakeLlm::start();
    dir.write(
        "cassette.toml",
        &format!(
            "store = \"file://tests/cassettes\"\n[routes.default]\nupstream = \"{}\"\n",
            fake.url
        ),
    );
    dir.write("suite.jsonl", &case("a", "Hello there", ""));
    let out = dir.run(&["run", "suite.jsonl", "--mode", "record"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(
        dir.join("tests/cassettes").is_dir(),
        "the store is beside the file"
    );
    fake.stop();

    // From two folders down: the same store, so replay hits and ls lists the tape.
    let out = dir.run_in("src/deep", &["run", "../../suite.jsonl"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(json_lines(&out)[0]["hit"], true);
    let out = dir.run_in("src/deep", &["ls"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(common::stdout(&out).lines().count(), 2, "{}", both(&out));
    assert!(!dir.join("src/deep/cassettes").exists());
    assert!(!dir.join("src/deep/tests").exists());

    // Without the file, the default store of that folder: nothing recorded there.
    let out = dir.run_in("src/deep", &["run", "../../suite.jsonl", "--no-config"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
}

#[test]
fn bad_files_fail_before_any_io_naming_file_line_and_fix() {
    let fake = FakeLlm::start();
    let suite = format!(
        "{}\n{}",
        case("a", "Hello", ""),
        r#"{"id":"b","request":{"target":"acme","path":"/v1/chat/completions","body":{"model":"m","messages":[]}},"grader":"contains","expect":{"needle":"x"}}"#
    );
    let base = format!(
        "store = \"file://never-created\"\nmode = \"record\"\n[routes.default]\nupstream = \"{}\"\n",
        fake.url
    );
    for (tail, line, needles) in [
        ("[keying\nvolatile = []\n", ":5:", &["cassette.toml"][..]),
        (
            "[keying]\nvolatiles = [\"seed\"]\n",
            ":6:1:",
            &["unknown field `volatiles`", "`volatile`"][..],
        ),
        (
            "[redact]\npatterns = ['(unclosed']\n",
            ":6:13:",
            &["(unclosed", "redact.patterns"][..],
        ),
        (
            "[keying]\nignore = [\"contents[*].id\"]\n",
            ":6:11:",
            &["must start with `$`", "keying.ignore"][..],
        ),
        (
            "[routes.acme]\nauth = \"bearer\"\n",
            ":5:",
            &["[routes.acme] needs `upstream"][..],
        ),
    ] {
        let dir = Workdir::new();
        dir.write("suite.jsonl", &suite);
        let path = dir.write("cassette.toml", &format!("{base}{tail}"));
        let out = dir.run(&["run", "suite.jsonl"]);
        assert_eq!(code(&out), 2, "{tail}: {}", both(&out));
        let err = common::stderr(&out);
        assert!(
            err.contains(&format!("{}{line}", path.display())),
            "{tail}: {err}"
        );
        for needle in needles {
            assert!(err.contains(needle), "{tail}: {needle}: {err}");
        }
        assert!(err.contains("docs/settings.md"), "{err}");
        assert!(
            !dir.join("never-created").exists(),
            "{tail}: a store was opened"
        );
        // Every command reads the file, even one that only lists.
        let out = dir.run(&["ls"]);
        assert_eq!(code(&out), 2, "{}", both(&out));
    }

    // A valid file, but the suite names a route it does not define.
    let dir = Workdir::new();
    dir.write("suite.jsonl", &suite);
    dir.write("cassette.toml", &base);
    let out = dir.run(&["run", "suite.jsonl"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    let err = common::stderr(&out);
    assert!(
        err.contains("suite.jsonl:2: case \"b\": target \"acme\" is not a route"),
        "{err}"
    );
    assert!(
        err.contains("[routes.acme]") && err.contains("cassette.toml"),
        "{err}"
    );
    assert!(!dir.join("never-created").exists());
    assert_eq!(fake.requests(), 0, "nothing was sent");
}

/// Issue 25 item 2: keying settings that leave the prompt, the model or every member out of
/// the key would make one recording answer every prompt; they are refused with the reason
/// before anything is sent or stored, unless the named escape hatch says it is meant.
#[test]
fn keying_that_leaves_the_prompt_out_is_refused_unless_meant() {
    let fake = FakeLlm::start();
    let suite = format!(
        "{}\n{}",
        case("a", "Hello", ""),
        case("b", "Something else entirely", "")
    );
    let base = format!(
        "store = \"file://tapes\"\n[routes.default]\nupstream = \"{}\"\n[keying]\n",
        fake.url
    );
    for (tail, position, what) in [
        ("ignore = ['$.*']\n", ":5:11:", "every member of the body"),
        ("ignore = ['$.messages']\n", ":5:11:", "the prompt"),
        (
            "volatile = [\"messages\", \"model\"]\n",
            ":5:13:",
            "the prompt",
        ),
        ("volatile = [\"seed\", \"model\"]\n", ":5:21:", "the model"),
    ] {
        let dir = Workdir::new();
        dir.write("suite.jsonl", &suite);
        let path = dir.write("cassette.toml", &format!("{base}{tail}"));
        for args in [
            &["run", "suite.jsonl", "--mode", "record"][..],
            &["key", "--path", "/v1/chat/completions"],
            &["verify"],
        ] {
            let out = dir.run(args);
            assert_eq!(code(&out), 2, "{tail} {args:?}: {}", both(&out));
            let err = common::stderr(&out);
            assert!(
                err.contains(&format!("{}{position}", path.display())),
                "{tail}: {err}"
            );
            assert!(err.contains(what), "{tail}: {err}");
            assert!(
                err.contains("one recording would answer every prompt"),
                "{err}"
            );
            assert!(err.contains("dangerously_allow_prompt_out"), "{err}");
        }
        assert!(!dir.join("tapes").exists(), "{tail}: a store was opened");
        // The same settings as a flag are refused alike, naming the flag.
        let out = dir.run(&[
            "--no-config",
            "key",
            "--path",
            "/v1/chat/completions",
            "--volatile",
            "messages",
        ]);
        assert_eq!(code(&out), 2, "{}", both(&out));
        assert!(
            common::stderr(&out).contains("--volatile `messages` would leave the prompt out"),
            "{}",
            both(&out)
        );
    }
    assert_eq!(fake.requests(), 0, "nothing was sent");

    // The escape hatch: accepted, and then one recording does answer every prompt.
    let dir = Workdir::new();
    dir.write("suite.jsonl", &suite);
    dir.write(
        "cassette.toml",
        &format!("{base}dangerously_allow_prompt_out = true\nignore = ['$.messages']\n"),
    );
    let out = dir.run(&["run", "suite.jsonl", "--mode", "auto"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(fake.requests(), 1, "{}", both(&out));
}

#[test]
fn keying_changed_between_record_and_replay_names_the_difference() {
    let dir = Workdir::new();
    let fake = FakeLlm::start();
    let routes = format!("[routes.default]\nupstream = \"{}\"\n", fake.url);
    dir.write("suite.jsonl", &case("seeded", "Hello", ",\"seed\":7"));
    dir.write(
        "cassette.toml",
        &format!("[keying]\nvolatile = [\"seed\"]\n{routes}"),
    );
    let out = dir.run(&["run", "suite.jsonl", "--mode", "record"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let out = dir.run(&["run", "suite.jsonl"]);
    assert_eq!(code(&out), 0, "same settings replay: {}", both(&out));
    let out = dir.run(&["verify"]);
    assert_eq!(code(&out), 0, "{}", both(&out));

    // The team drops the setting: the replay misses, and says why.
    dir.write("cassette.toml", &routes);
    let out = dir.run(&["run", "suite.jsonl"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    let err = common::stderr(&out);
    assert!(
        err.contains("recorded with volatile [seed]; now []"),
        "{err}"
    );
    assert!(!err.contains("key version"), "{err}");
    // verify names the tapes replay would miss.
    let out = dir.run(&["verify"]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    assert!(
        common::stdout(&out).contains("recorded with volatile [seed]; now []"),
        "{}",
        both(&out)
    );
}

#[test]
fn redaction_from_the_file_applies_to_a_re_record_with_no_flags() {
    let dir = Workdir::new();
    let fake = FakeLlm::start();
    dir.write(
        "cassette.toml",
        &format!(
            "[redact]\npaths = [\"$..metadata_email\"]\npatterns = ['[\\w.+-]+@[\\w-]+\\.[\\w.]+']\n[routes.default]\nupstream = \"{}\"\n",
            fake.url
        ),
    );
    dir.write(
        "suite.jsonl",
        &case(
            "mail",
            "Write to ada@example.com now",
            ",\"metadata_email\":\"kept-out\"",
        ),
    );
    for _ in 0..2 {
        let out = dir.run(&["run", "suite.jsonl", "--mode", "record"]);
        assert_eq!(code(&out), 0, "{}", both(&out));
    }
    let mut stored = String::new();
    for entry in walk(&dir.join("cassettes")) {
        stored.push_str(&std::fs::read_to_string(entry).unwrap());
    }
    assert!(stored.contains("[REDACTED]"), "{stored}");
    assert!(!stored.contains("ada@example.com"), "{stored}");
    assert!(!stored.contains("kept-out"), "{stored}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn init_writes_a_valid_starter_once() {
    let dir = Workdir::new();
    let out = dir.run(&["init"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let written = std::fs::read_to_string(dir.join("cassette.toml")).unwrap();
    assert!(written.contains("[keying]") && written.contains("[redact]"));
    assert_eq!(
        std::fs::read_to_string(dir.join(".gitignore")).unwrap(),
        ".cassette/\n"
    );
    let (_, rows) = config(&dir.run(&["config", "--json"]));
    assert_eq!(get(&rows, "store").1, "file");
    // Never over an existing file, even a broken one.
    dir.write("cassette.toml", "not toml [");
    let out = dir.run(&["init"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("already exists"),
        "{}",
        both(&out)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("cassette.toml")).unwrap(),
        "not toml ["
    );
}

#[test]
fn cassette_key_keys_under_the_files_settings() {
    let dir = Workdir::new();
    dir.write("with_seed.json", r#"{"model":"m","seed":1,"messages":[]}"#);
    dir.write("without.json", r#"{"model":"m","messages":[]}"#);
    let key = |args: &[&str]| {
        let out = dir.run(args);
        assert_eq!(code(&out), 0, "{}", both(&out));
        common::stdout(&out).trim().to_owned()
    };
    let path = ["key", "--path", "/v1/chat/completions"];
    let plain = key(&[&path[..], &["with_seed.json"]].concat());
    assert_ne!(plain, key(&[&path[..], &["without.json"]].concat()));
    dir.write("cassette.toml", "[keying]\nvolatile = [\"seed\"]\n");
    let seeded = key(&[&path[..], &["with_seed.json"]].concat());
    assert_eq!(seeded, key(&[&path[..], &["without.json"]].concat()));
    assert_ne!(seeded, plain);
    assert_eq!(
        plain,
        key(&[&path[..], &["--no-config", "with_seed.json"]].concat())
    );
}
