//! Keeping the store sane through the binary (issue 10): maintenance commands that must not
//! create, double or empty a store by accident, a damaged JSON Lines log that `verify` reports,
//! settings refused before anything starts, a damaged cache that does not stop the recorder.

mod common;

use common::cli_env::{both, code, output_within, Workdir};
use common::fake_llm::FakeLlm;

fn case(id: &str, prompt: &str) -> String {
    format!(
        r#"{{"id":"{id}","prompt":"{prompt}","params":{{"model":"m","temperature":0}},"grader":"contains","expect":{{"needle":"said"}}}}"#
    )
}

/// Records three cases into `store` and returns nothing: the store then holds three cassettes.
fn record(dir: &Workdir, fake: &FakeLlm, store: &str) {
    let suite = [case("a", "one"), case("b", "two"), case("c", "three")].join("\n");
    dir.write("suite.jsonl", &suite);
    let out = dir.run(&[
        "run",
        "suite.jsonl",
        "--mode",
        "record",
        "--store",
        store,
        "--upstream",
        &fake.url,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
}

#[test]
fn reading_commands_on_a_missing_store_fail_and_create_nothing() {
    let dir = Workdir::new();
    for (url, path) in [
        ("file://nowhere", "nowhere"),
        ("jsonl://logs/none.jsonl", "logs"),
        ("sled://nodb", "nodb"),
    ] {
        for args in [
            vec!["verify", "--store", url],
            vec!["ls", "--store", url],
            vec!["show", "ab", "--store", url],
            vec!["gc", "--unused", "--usage-log", "u.log", "--store", url],
        ] {
            dir.write("u.log", &format!("{}\n", "ab".repeat(32)));
            let out = dir.run(&args);
            // verify's verdict is a failure (1); the others cannot run (2).
            let (expected, says) = match args[0] {
                "verify" => (1, "does not exist"),
                _ => (2, "no store at"),
            };
            assert_eq!(code(&out), expected, "{args:?}: {}", both(&out));
            assert!(both(&out).contains(says), "{args:?}: {}", both(&out));
            assert!(
                !dir.join(path).exists(),
                "{args:?} created {path}: {}",
                both(&out)
            );
        }
    }
}

#[test]
fn verify_reports_a_damaged_line_in_the_middle_of_a_log() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    let store = format!("jsonl://{}", dir.join("rec.jsonl").display());
    record(&dir, &fake, &store);
    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));

    let text = std::fs::read_to_string(dir.join("rec.jsonl")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    let damaged = lines[1].replacen("\"cassette\":{", "\"cassette\":{{", 1);
    lines[1] = &damaged;
    std::fs::write(dir.join("rec.jsonl"), lines.join("\n") + "\n").unwrap();

    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let stdout = common::stdout(&out);
    assert!(
        stdout.contains("rec.jsonl line 2") && stdout.contains("no readable cassette"),
        "{}",
        both(&out)
    );
}

#[test]
fn copy_onto_the_same_log_through_another_spelling_is_refused() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    record(&dir, &fake, "jsonl://rec.jsonl");
    std::os::unix::fs::symlink(dir.join("rec.jsonl"), dir.join("link.jsonl")).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    let before = std::fs::read(dir.join("rec.jsonl")).unwrap();
    let absolute = format!("jsonl://{}", dir.join("rec.jsonl").display());
    for to in [
        "jsonl://./rec.jsonl",
        "jsonl://link.jsonl",
        "jsonl://sub/../rec.jsonl",
        absolute.as_str(),
    ] {
        let out = dir.run(&["copy", "jsonl://rec.jsonl", to]);
        assert_eq!(code(&out), 2, "{to}: {}", both(&out));
        assert!(both(&out).contains("same store"), "{to}: {}", both(&out));
    }
    assert_eq!(std::fs::read(dir.join("rec.jsonl")).unwrap(), before);
    // A real second store is copied to.
    let out = dir.run(&["copy", "jsonl://rec.jsonl", "jsonl://copy.jsonl"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
}

#[test]
fn gc_with_a_usage_log_of_another_store_deletes_nothing() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    let store = dir.store("cassettes");
    record(&dir, &fake, &store);
    dir.write(
        "other.log",
        &format!("{}\n{}\n", "ab".repeat(32), "cd".repeat(32)),
    );
    for dry_run in [false, true] {
        let mut args = vec![
            "gc",
            "--unused",
            "--usage-log",
            "other.log",
            "--store",
            &store,
        ];
        if dry_run {
            args.push("--dry-run");
        }
        let out = dir.run(&args);
        assert_eq!(code(&out), 2, "{}", both(&out));
        assert!(both(&out).contains("none of them in"), "{}", both(&out));
    }
    let out = dir.run(&["ls", "--store", &store]);
    assert!(both(&out).contains("3 cassettes"), "{}", both(&out));
}

/// Runs `cassette ARGS`, killing it after ten seconds: a proxy that wrongly starts must fail the
/// test, not hang it.
fn run_with_deadline(dir: &Workdir, args: &[&str]) -> std::process::Output {
    let mut command = dir.cassette();
    command.args(args);
    output_within(command, std::time::Duration::from_secs(10)).0
}

#[test]
fn an_upstream_with_a_query_or_fragment_is_refused_at_start() {
    let dir = Workdir::new();
    let listen = ["--listen", "127.0.0.1:0"];
    for args in [
        vec!["proxy", "--upstream", "http://127.0.0.1:9/v1?api-key=x"],
        vec!["proxy", "--upstream", "http://127.0.0.1:9/v1#top"],
        vec!["proxy", "--route", "a=http://127.0.0.1:9/?x=1"],
        vec![
            "exec",
            "--upstream",
            "http://127.0.0.1:9/v1?k=1",
            "--",
            "true",
        ],
    ] {
        let mut args = args;
        if args[0] == "proxy" {
            args.extend(listen);
        }
        let out = run_with_deadline(&dir, &args);
        assert_eq!(code(&out), 2, "{args:?}: {}", both(&out));
        assert!(
            both(&out).contains("query or fragment"),
            "{args:?}: {}",
            both(&out)
        );
        assert!(!dir.join("cassettes").exists(), "{args:?} opened the store");
    }
}

#[test]
fn a_damaged_sled_cache_is_bypassed_with_a_warning() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    let store = dir.store("cassettes");
    record(&dir, &fake, &store);
    std::fs::create_dir(dir.join("cache")).unwrap();
    for name in ["db", "conf"] {
        std::fs::write(dir.join("cache").join(name), vec![0xA5u8; 4096]).unwrap();
    }
    let requests = fake.requests();
    let out = dir.run(&[
        "run",
        "suite.jsonl",
        "--store",
        &store,
        "--cache",
        "sled://cache",
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let stderr = common::stderr(&out);
    assert!(
        stderr.contains("cache") && stderr.contains("not used"),
        "{stderr}"
    );
    assert_eq!(fake.requests(), requests, "replayed, not called");
}

#[test]
fn exec_fails_naming_the_key_when_a_recording_is_not_stored() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    // The log the recording goes to is deleted under the running recorder.
    let script = r#"rm rec.jsonl && curl -s -o /dev/null -H 'content-type: application/json' \
        -d '{"model":"m","messages":[{"role":"user","content":"hi"}]}' \
        "$OPENAI_BASE_URL/chat/completions""#;
    let out = dir.run(&[
        "exec",
        "--mode",
        "record",
        "--store",
        "jsonl://rec.jsonl",
        "--upstream",
        &fake.url,
        "--",
        "sh",
        "-c",
        script,
    ]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    let stderr = common::stderr(&out);
    let at = stderr
        .find("the recording of ")
        .unwrap_or_else(|| panic!("{stderr}"));
    let key = &stderr[at + "the recording of ".len()..][..64];
    assert!(key.bytes().all(|b| b.is_ascii_hexdigit()), "{stderr}");
    assert!(stderr.contains("1 failed recordings"), "{stderr}");
    assert_eq!(fake.requests(), 1);
}

/// Issue 25, item 8: the command under `exec` read the real key from its parent's
/// `/proc/$PPID/environ` (and could read its memory). On Linux the proxy makes itself
/// undumpable, so no other process of the same user can read either; the command's own
/// environment holds only the placeholder. Run as `nobody` when the test runs as root, which
/// may read any process.
#[cfg(target_os = "linux")]
#[test]
fn the_command_under_exec_cannot_read_the_real_key_from_its_parent() {
    use std::os::unix::fs::PermissionsExt;
    const KEY: &str = "sk-proj-Zq8Wm3Lp6Xv1Rk9Tb4Nc7Hd2Jf5Gs0Ay";
    let dir = Workdir::new();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut command = if root {
        let mut setpriv = std::process::Command::new("setpriv");
        setpriv.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
        setpriv.arg(common::cassette_bin());
        setpriv
    } else {
        std::process::Command::new(common::cassette_bin())
    };
    let probe = "tr '\\0' '\\n' < /proc/$PPID/environ; echo environ=$?; \
                 head -c 64 /proc/$PPID/mem >/dev/null; echo mem=$?; \
                 echo child=$OPENAI_API_KEY";
    let out = command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("OPENAI_API_KEY", KEY)
        .current_dir(dir.path())
        .args(["exec", "--", "sh", "-c", probe])
        .output();
    let out = match out {
        Ok(out) => out,
        Err(err) if root => {
            eprintln!("skipped: cannot run setpriv to drop root ({err})");
            return;
        }
        Err(err) => panic!("cannot run cassette: {err}"),
    };
    let text = both(&out);
    assert!(!text.contains(KEY), "the real key was read: {text}");
    assert!(text.contains("child=cassette"), "{text}");
    // The reads were tried, and refused, not skipped.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("environ=0"), "{text}");
    assert!(text.contains("Permission denied"), "{text}");
    assert!(!stdout.contains("mem=0"), "{text}");
}

/// Sends one HTTP/1.1 request to `addr` and returns the whole answer, headers included.
fn http(addr: &str, method: &str, path: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

/// Issue 25, item 9: error messages, `/healthz`, logs and miss bodies echoed userinfo passwords
/// and `?key=` of refused upstream, route and store URLs (an S3 `endpoint` with userinfo
/// included). Every URL shown anywhere is shown without them.
#[test]
fn no_url_is_shown_with_its_credentials() {
    use std::io::BufRead;
    const PASSWORD: &str = "hunter2pw";
    const KEY: &str = "SEKRITqueryKEY";
    let dir = Workdir::new();
    let s3 = format!("s3://b/p?endpoint=http://ak:{PASSWORD}@127.0.0.1:1&region=us-east-1");
    let refused: Vec<Vec<String>> = vec![
        vec![
            "proxy".into(),
            "--upstream".into(),
            format!("http://u:{PASSWORD}@127.0.0.1:1/?key={KEY}"),
        ],
        vec![
            "proxy".into(),
            "--route".into(),
            format!("x=ftp://u:{PASSWORD}@h/?key={KEY}"),
        ],
        vec!["proxy".into(), "--store".into(), format!("{s3}&colour=red")],
        vec![
            "proxy".into(),
            "--store".into(),
            format!("bogus://u:{PASSWORD}@h"),
        ],
    ];
    for args in &refused {
        let out = dir.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let text = both(&out);
        assert_eq!(code(&out), 2, "{text}");
        assert!(!text.contains(PASSWORD) && !text.contains(KEY), "{text}");
        assert!(text.contains("invalid value"), "{text}");
    }
    // From a settings file, and in `cassette config`.
    dir.write(
        "cassette.toml",
        &format!("store = \"{s3}&colour=red\"\n[routes.x]\nupstream = \"http://u:{PASSWORD}@h\"\n"),
    );
    let out = dir.run(&["config"]);
    let text = both(&out);
    assert!(!text.contains(PASSWORD), "{text}");
    assert!(text.contains("unknown option `colour`"), "{text}");
    std::fs::remove_file(dir.join("cassette.toml")).unwrap();
    let out = dir.run(&[
        "config",
        "--store",
        &s3,
        "--upstream",
        &format!("http://u:{PASSWORD}@h"),
    ]);
    let text = both(&out);
    assert_eq!(code(&out), 0, "{text}");
    assert!(!text.contains(PASSWORD), "{text}");
    assert!(text.contains("http://h"), "{text}");

    // A running proxy: its health answer, an error answer from the store and its log.
    let mut proxy = dir
        .cassette()
        .args(["proxy", "--listen", "127.0.0.1:0", "--mode", "replay"])
        .args(["--store", &s3])
        .env("AWS_ACCESS_KEY_ID", "ak")
        .env("AWS_SECRET_ACCESS_KEY", "sk")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(proxy.stderr.take().unwrap());
    let mut log = String::new();
    let addr = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the proxy died: {log}"
        );
        log.push_str(&line);
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    let health = http(&addr, "GET", "/healthz", "");
    let chat = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let error = http(&addr, "POST", "/v1/chat/completions", chat);
    // SAFETY: kill(2) on the pid of a child we spawned and have not reaped yet.
    unsafe {
        libc::kill(proxy.id() as i32, libc::SIGTERM);
    }
    std::io::Read::read_to_string(&mut stderr, &mut log).unwrap();
    proxy.wait().unwrap();
    assert!(health.contains("\"store\""), "{health}");
    assert!(error.contains("cassette_store_error"), "{error}");
    assert!(
        error.contains("127.0.0.1:1"),
        "the endpoint is named: {error}"
    );
    assert!(log.contains("127.0.0.1:1"), "{log}");
    for text in [&health, &error, &log] {
        assert!(!text.contains(PASSWORD), "{text}");
    }
}
