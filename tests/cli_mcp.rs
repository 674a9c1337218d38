//! `cassette mcp` and `cassette exec` end to end: the binary relaying a small `sh` MCP server,
//! replaying without it, exit statuses, and misses reported to exec through its report file.

mod common;

use common::cli_env::{both, code, Workdir};
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Output, Stdio};

/// A stdio MCP server in `sh`: answers every request with its id and a counter kept in
/// `count`, and appends a line to `starts` when it starts.
const SERVER: &str = r#"echo start >> starts
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  [ -z "$id" ] && continue
  n=$(( $(cat count 2>/dev/null || echo 0) + 1 )); echo $n > count
  printf '{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"call %s"}}\n' "$n"
  printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"n=%s"}]}}\n' "$id" "$n"
done"#;

fn call(id: u64, label: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "count", "arguments": {"label": label}}}).to_string()
}

/// Runs `cassette ARGS` with `input` (lines) on stdin.
fn run_with_input(dir: &Workdir, args: &[&str], env: &[(&str, &str)], input: &[String]) -> Output {
    let mut child = dir
        .cassette()
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running cassette");
    let mut stdin = child.stdin.take().unwrap();
    for line in input {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

fn messages(out: &Output) -> Vec<Value> {
    common::cli_env::json_lines(out)
}

fn starts(dir: &Workdir) -> usize {
    std::fs::read_to_string(dir.join("starts"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn record_then_replay_without_the_server() {
    let dir = Workdir::new();
    let store = dir.store("cassettes");
    let record = run_with_input(
        &dir,
        &[
            "mcp", "--name", "counter", "--store", &store, "--", "sh", "-c", SERVER,
        ],
        &[("CASSETTE_MODE", "record")],
        &[call(1, "a"), call(2, "b")],
    );
    assert_eq!(code(&record), 0, "{}", both(&record));
    let recorded = messages(&record);
    assert_eq!(recorded.len(), 4, "{}", both(&record));
    assert_eq!(recorded[1]["result"]["content"][0]["text"], "n=1");
    assert_eq!(starts(&dir), 1);
    assert!(
        common::stderr(&record).contains("2 recorded, 1 server starts"),
        "{}",
        both(&record)
    );

    let replay = run_with_input(
        &dir,
        &[
            "mcp",
            "--name",
            "counter",
            "--store",
            &store,
            "--",
            "/nonexistent/server",
        ],
        &[],
        &[call(7, "b"), call(8, "a")],
    );
    assert_eq!(code(&replay), 0, "{}", both(&replay));
    let replayed = messages(&replay);
    // Both calls were in flight at once while recording, so whether the first call's log line
    // was kept with it depends on timing; the second call's always was.
    let at = |id: u64| replayed.iter().position(|m| m["id"] == id).unwrap();
    assert_eq!(replayed[at(7)]["result"]["content"][0]["text"], "n=2");
    assert_eq!(replayed[at(7) - 1]["params"]["data"], "call 2");
    assert_eq!(replayed[at(8)]["result"]["content"][0]["text"], "n=1");
    assert!(at(7) < at(8), "answers come in the order asked");
    assert_eq!(starts(&dir), 1, "replay started nothing");
    assert!(common::stderr(&replay).contains("2 hits, 0 misses, 0 recorded, 0 server starts"));

    // A miss: a JSON-RPC error naming the tool and the argument, and exit status 2.
    let miss = run_with_input(
        &dir,
        &[
            "mcp",
            "--name",
            "counter",
            "--store",
            &store,
            "--",
            "/nonexistent/server",
        ],
        &[],
        &[call(9, "c")],
    );
    assert_eq!(code(&miss), 2, "{}", both(&miss));
    let error = &messages(&miss)[0]["error"];
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("tool `count`"), "{message}");
    assert!(message.contains("params.arguments.label"), "{message}");
    assert!(
        common::stderr(&miss).contains("cassette miss"),
        "{}",
        both(&miss)
    );
}

#[test]
fn a_record_whose_server_cannot_start_names_it_and_exits_2() {
    let dir = Workdir::new();
    let out = run_with_input(
        &dir,
        &[
            "mcp",
            "--store",
            &dir.store("c"),
            "--",
            "/nonexistent/server",
            "--flag",
        ],
        &[("CASSETTE_MODE", "record")],
        &[],
    );
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("cannot start the MCP server `/nonexistent/server --flag`"),
        "{}",
        both(&out)
    );
}

#[test]
fn a_server_named_only_by_an_interpreter_gets_a_warning() {
    let dir = Workdir::new();
    let out = run_with_input(
        &dir,
        &["mcp", "--store", &dir.store("c"), "--", "sh", "-c", "true"],
        &[],
        &[],
    );
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(common::stderr(&out).contains("--name"), "{}", both(&out));
}

#[test]
fn exec_exits_2_when_a_cassette_mcp_it_ran_missed() {
    let dir = Workdir::new();
    let store = dir.store("cassettes");
    let bin = common::cassette_bin().display().to_string();
    // The command under exec starts `cassette mcp` with a cleared environment (as MCP SDKs
    // do): exec's settings and report file reach it through its ancestor.
    let script = format!(
        "printf '%s\\n' '{}' | env -i PATH=\"$PATH\" {bin} mcp --name counter -- /nonexistent/server",
        call(1, "never recorded")
    );
    let out = dir
        .cassette()
        .args(["exec", "--store", &store, "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", both(&out));
    let stderr = common::stderr(&out);
    assert!(
        stderr.contains("cassette exec: 1 distinct key missed:"),
        "{}",
        both(&out)
    );
    assert!(
        stderr.contains(
            " tools/call `count` on MCP server `counter`: Nothing is recorded for tools/call on this server."
        ),
        "{}",
        both(&out)
    );
    assert!(
        stderr.contains("mcp: 1 sessions, 1 requests: 0 hits, 1 misses"),
        "{}",
        both(&out)
    );

    // Without a miss, exec passes the command's status through.
    let clean = format!(
        "printf '' | env -i PATH=\"$PATH\" {bin} mcp --name counter -- /nonexistent/server"
    );
    let out = dir
        .cassette()
        .args(["exec", "--store", &store, "--", "sh", "-c", &clean])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", both(&out));
}
