//! A settings file checked in by someone else (a pull request, a shared folder) through the
//! built binary (issues 25 and 35): under CI it cannot turn replay into a mode that calls an
//! upstream, it cannot send a variable that is not the route's own key to an upstream it names,
//! its paths stay in its folder (symlinks followed), and a cassette.toml that is not a regular
//! file is refused with its path.

mod common;

use common::cli_env::{both, code, output_within, Workdir};
use common::fake_llm::FakeLlm;

fn case(id: &str, prompt: &str) -> String {
    format!(
        r#"{{"id":"{id}","prompt":"{prompt}","params":{{"model":"m","temperature":0}},"grader":"contains","expect":{{"needle":"said"}}}}"#
    )
}

/// Item 3: a checked-in file sets `mode = "auto"`, its own upstream and `GITHUB_TOKEN` as the
/// key; a plain `cassette run` in CI must neither call that upstream nor send the token.
#[test]
fn under_ci_a_checked_in_file_cannot_record_or_send_the_jobs_token() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    dir.write("suite.jsonl", &case("a", "Hello"));
    let file = dir.write(
        "cassette.toml",
        &format!(
            "mode = \"auto\"\n[routes.default]\nupstream = \"{}\"\napi_key_env = \"GITHUB_TOKEN\"\n",
            fake.url
        ),
    );
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let mut cmd = dir.cassette();
        cmd.env("GITHUB_TOKEN", "ghp_0123456789abcdefghijABCDEFGHIJ012345");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.args(args).output().unwrap()
    };
    // Under CI, the file's mode alone is refused, naming the file and what to set.
    let out = run(&[("CI", "true")], &["run", "suite.jsonl"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    let err = common::stderr(&out);
    assert!(err.contains(&file.display().to_string()), "{err}");
    assert!(err.contains("CASSETTE_MODE=auto"), "{err}");
    let out = run(&[("CI", "1")], &["exec", "--", "true"]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(common::stderr(&out).contains("under CI"), "{}", both(&out));
    assert_eq!(fake.requests(), 0, "nothing was sent");

    // The job asks for auto itself: the token is still refused, the file cannot allow it.
    let out = run(
        &[("CI", "true"), ("CASSETTE_MODE", "auto")],
        &["run", "suite.jsonl"],
    );
    assert_eq!(code(&out), 2, "{}", both(&out));
    let err = common::stderr(&out);
    assert!(
        err.contains("api_key_env = \"GITHUB_TOKEN\"") && err.contains("--allow-key-env"),
        "{err}"
    );
    assert!(!err.contains("ghp_"), "{err}");
    assert_eq!(fake.requests(), 0, "nothing was sent");

    // Replay under CI is untouched: it misses (exit 2) without calling anything.
    let out = run(
        &[("CI", "true"), ("CASSETTE_MODE", "replay")],
        &["run", "suite.jsonl"],
    );
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(common::stderr(&out).contains("miss"), "{}", both(&out));

    // The command line allowing both: recorded, with the token the job chose to send.
    let out = run(
        &[
            ("CI", "true"),
            ("CASSETTE_MODE", "auto"),
            ("CASSETTE_ALLOW_KEY_ENV", "GITHUB_TOKEN"),
        ],
        &["run", "suite.jsonl"],
    );
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(fake.requests(), 1);
}

/// Runs `cassette ARGS` in `dir/sub`, killing it after ten seconds: reading a FIFO or a device
/// must fail the test, not hang it.
fn run_with_deadline(dir: &Workdir, sub: &str, args: &[&str]) -> std::process::Output {
    let mut command = dir.cassette();
    command.current_dir(dir.join(sub)).args(args);
    output_within(command, std::time::Duration::from_secs(10)).0
}

/// Item 14: a usage log outside the file's folder is refused, and inside it a file that is no
/// usage log (a symlinked `.bashrc`) never gets keys appended.
#[test]
fn a_usage_log_leaving_the_folder_or_not_a_usage_log_gets_nothing_appended() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    let victim = dir.write("home/.bashrc", "export PATH=$HOME/bin:$PATH\n");
    let before = std::fs::read(&victim).unwrap();
    dir.write("project/suite.jsonl", &case("a", "Hello"));
    let routes = format!("[routes.default]\nupstream = \"{}\"\n", fake.url);
    for (log, needle) in [
        ("../home/.bashrc", "outside the settings file's folder"),
        (
            &*format!("{}", victim.display()),
            "outside the settings file's folder",
        ),
    ] {
        let file = dir.write(
            "project/cassette.toml",
            &format!("usage_log = \"{log}\"\n{routes}"),
        );
        let out = dir.run_in("project", &["run", "suite.jsonl", "--mode", "record"]);
        assert_eq!(code(&out), 2, "{log}: {}", both(&out));
        let err = common::stderr(&out);
        assert!(err.contains(&format!("{}:1:13:", file.display())), "{err}");
        assert!(err.contains(needle) && err.contains("--usage-log"), "{err}");
    }
    // Inside the folder, through a symlink the pull request added: the link leads out of the
    // folder (issue 35 item 13), and named on the command line it is still no usage log.
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&victim, dir.join("project/used.log")).unwrap();
        dir.write(
            "project/cassette.toml",
            &format!("usage_log = \"used.log\"\n{routes}"),
        );
        let out = dir.run_in("project", &["run", "suite.jsonl", "--mode", "record"]);
        assert_eq!(code(&out), 2, "{}", both(&out));
        assert!(
            common::stderr(&out).contains("through a symlink"),
            "{}",
            both(&out)
        );
        dir.write("project/cassette.toml", &routes);
        let flagged = [
            "run",
            "suite.jsonl",
            "--mode",
            "record",
            "--usage-log",
            "used.log",
        ];
        let out = dir.run_in("project", &flagged);
        assert_eq!(code(&out), 2, "{}", both(&out));
        assert!(
            common::stderr(&out).contains("is not a usage log"),
            "{}",
            both(&out)
        );
    }
    assert_eq!(std::fs::read(&victim).unwrap(), before, "nothing appended");
    assert_eq!(fake.requests(), 0, "refused before anything was sent");

    // A real usage log in the folder is appended to.
    std::fs::remove_file(dir.join("project/used.log")).ok();
    dir.write(
        "project/cassette.toml",
        &format!("usage_log = \"logs/used.log\"\n{routes}"),
    );
    std::fs::create_dir_all(dir.join("project/logs")).unwrap();
    for _ in 0..2 {
        let out = dir.run_in("project", &["run", "suite.jsonl", "--mode", "auto"]);
        assert_eq!(code(&out), 0, "{}", both(&out));
    }
    let log = std::fs::read_to_string(dir.join("project/logs/used.log")).unwrap();
    assert_eq!(log.lines().count(), 2, "{log}");
}

/// Item 15: a directory, FIFO or symlink to a device named cassette.toml is refused with its
/// path, never skipped for the parent's file (which here would record).
#[cfg(unix)]
#[test]
fn a_cassette_toml_that_is_not_a_file_is_refused_not_skipped() {
    let dir = Workdir::new();
    dir.write(
        "cassette.toml",
        "mode = \"record\"\n[routes.default]\nupstream = \"http://127.0.0.1:9\"\n",
    );
    let fifo = |p: &std::path::Path| {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path and mode.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    };
    type Make<'a> = &'a dyn Fn(&std::path::Path);
    let cases: [(&str, Make, &str); 3] = [
        ("dir", &|p| std::fs::create_dir(p).unwrap(), "a directory"),
        ("fifo", &fifo, "a FIFO"),
        (
            "zero",
            &|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
            "a device",
        ),
    ];
    for (sub, make, kind) in cases {
        std::fs::create_dir(dir.join(sub)).unwrap();
        let path = dir.join(sub).join("cassette.toml");
        make(&path);
        for args in [
            &["ls"][..],
            &["config"],
            &["--config", "cassette.toml", "ls"],
        ] {
            let out = run_with_deadline(&dir, sub, args);
            assert_eq!(code(&out), 2, "{sub} {args:?}: {}", both(&out));
            let err = common::stderr(&out);
            assert!(err.contains(&path.display().to_string()), "{err}");
            assert!(err.contains(kind), "{sub}: {err}");
        }
    }
}

/// Issue 35 item 13: a path the file names that a committed symlink leads out of the file's
/// folder (dangling or not, through a linked folder or a chain of links) is refused, naming the
/// setting, the file and the path, before anything is created or sent; a link that stays inside
/// the folder is followed.
#[cfg(unix)]
#[test]
fn a_committed_symlink_never_leads_a_settings_path_out_of_its_folder() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    std::fs::create_dir_all(dir.join("victim")).unwrap();
    dir.write("project/suite.jsonl", &case("a", "Hello"));
    let link = |name: &str, to: &str| {
        std::os::unix::fs::symlink(to, dir.join("project").join(name)).unwrap();
    };
    link("used.log", "../victim/.bash_logout");
    link("logs", "../victim");
    link("tapes", "../victim/tapes");
    link("c.jsonl", "../victim/c.jsonl");
    link("hop", "inner");
    std::fs::create_dir_all(dir.join("project/inner")).unwrap();
    std::os::unix::fs::symlink("../../victim", dir.join("project/inner/out")).unwrap();
    let routes = format!("[routes.default]\nupstream = \"{}\"\n", fake.url);
    for (setting, path) in [
        ("usage_log = \"used.log\"", "used.log"),
        ("usage_log = \"logs/used.log\"", "logs/used.log"),
        ("usage_log = \"hop/out/.bashrc\"", "hop/out/.bashrc"),
        ("store = \"file://tapes\"", "tapes"),
        ("store = \"jsonl://logs/t.jsonl\"", "logs/t.jsonl"),
        ("cache = \"jsonl://c.jsonl\"", "c.jsonl"),
    ] {
        let file = dir.write("project/cassette.toml", &format!("{setting}\n{routes}"));
        let out = dir.run_in("project", &["run", "suite.jsonl", "--mode", "record"]);
        assert_eq!(code(&out), 2, "{setting}: {}", both(&out));
        let err = common::stderr(&out);
        let name = setting.split(' ').next().unwrap();
        assert!(
            err.contains(&format!("{}:1:", file.display())) && err.contains(&format!("`{name}`")),
            "{setting}: {err}"
        );
        assert!(
            err.contains(&dir.join("project").join(path).display().to_string())
                && err.contains("through a symlink")
                && err.contains("outside the settings file's folder"),
            "{setting}: {err}"
        );
    }
    let created: Vec<_> = std::fs::read_dir(dir.join("victim")).unwrap().collect();
    assert!(
        created.is_empty(),
        "created outside the folder: {created:?}"
    );
    assert_eq!(fake.requests(), 0, "refused before anything was sent");

    // A link inside the folder to a folder inside it is followed.
    link("inside", "inner");
    dir.write(
        "project/cassette.toml",
        &format!("usage_log = \"inside/used.log\"\nstore = \"file://inside/tapes\"\n{routes}"),
    );
    let out = dir.run_in("project", &["run", "suite.jsonl", "--mode", "record"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let log = std::fs::read_to_string(dir.join("project/inner/used.log")).unwrap();
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(dir.join("project/inner/tapes").is_dir());
}

/// Issue 35 item 13: outside CI too, a route's key variable from the file that is not the
/// route's vendor's own (`AWS_SECRET_ACCESS_KEY`, another vendor's key) is sent nowhere unless
/// the command line or the environment names it; the route's own variable needs no leave.
#[test]
fn a_file_never_sends_a_variable_that_is_not_the_routes_own_key() {
    let fake = FakeLlm::start();
    let dir = Workdir::new();
    dir.write("suite.jsonl", &case("a", "Hello"));
    let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY0";
    let run = |var: &str, allow: Option<&str>, args: &[&str]| {
        dir.write(
            "cassette.toml",
            &format!(
                "mode = \"auto\"\n[routes.default]\nupstream = \"{}\"\napi_key_env = \"{var}\"\n",
                fake.url
            ),
        );
        let mut cmd = dir.cassette();
        cmd.env("AWS_SECRET_ACCESS_KEY", secret)
            .env("ANTHROPIC_API_KEY", "sk-ant-test-NOTFORTHEDEFAULTROUTE0123")
            .env("OPENAI_API_KEY", "sk-test-THEDEFAULTROUTESOWNKEY0123");
        if let Some(allow) = allow {
            cmd.env("CASSETTE_ALLOW_KEY_ENV", allow);
        }
        cmd.args(args).output().unwrap()
    };
    for var in ["AWS_SECRET_ACCESS_KEY", "ANTHROPIC_API_KEY"] {
        for args in [&["run", "suite.jsonl"][..], &["exec", "--", "true"]] {
            let out = run(var, None, args);
            assert_eq!(code(&out), 2, "{var} {args:?}: {}", both(&out));
            let err = common::stderr(&out);
            assert!(
                err.contains(&format!(
                    "[routes.default] api_key_env = \"{var}\" is not the route's own key variable (UPSTREAM_API_KEY or OPENAI_API_KEY)"
                )) && err.contains(&format!("--allow-key-env {var}"))
                    && err.contains(&format!("CASSETTE_ALLOW_KEY_ENV={var}")),
                "{err}"
            );
            assert!(!err.contains(secret), "{err}");
        }
    }
    assert_eq!(fake.requests(), 0, "nothing was sent");

    // The environment names it: the job chose to send it.
    let out = run(
        "AWS_SECRET_ACCESS_KEY",
        Some("AWS_SECRET_ACCESS_KEY"),
        &["run", "suite.jsonl"],
    );
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(fake.requests(), 1);
    // The route's own variable needs no leave.
    std::fs::remove_dir_all(dir.join("cassettes")).unwrap();
    let out = run("OPENAI_API_KEY", None, &["run", "suite.jsonl"]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(fake.requests(), 2);
}
