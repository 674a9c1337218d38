//! `cassette proxy --runner-pid PID`: a proxy a test runner started stops once that runner is
//! gone, however it died (SIGKILL included), by the path SIGTERM takes (counters printed,
//! exit 0); also while a process the runner started still holds the control pipe open
//! (issue 35 items 5 and 7). The runners' own tests are in tests/sdk/test_runner_death.py.
#![cfg(unix)]

mod common;

use common::cli_env::Workdir;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long a proxy may outlive its runner: it looks at it about every 250 ms.
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// `cassette proxy` as a runner plugin starts it, in replay on an empty store.
fn plugin_args(work: &Workdir) -> Vec<String> {
    [
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--ready",
        "json",
        "--control",
        "--mode",
        "replay",
        "--store",
        &work.store("tapes"),
    ]
    .map(str::to_owned)
    .to_vec()
}

fn running(pid: u32) -> bool {
    // SAFETY: signal 0 sends nothing; it asks whether the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

#[test]
fn the_proxy_stops_once_the_runner_it_watches_is_killed() {
    let work = Workdir::new();
    // The runner here is not the proxy's parent: a process looked at by its id.
    let mut runner = Command::new("sleep").arg("60").spawn().unwrap();
    let log = std::fs::File::create(work.join("proxy.log")).unwrap();
    let mut proxy = work
        .cassette()
        .args(plugin_args(&work))
        .args(["--runner-pid", &runner.id().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(proxy.stdout.take().unwrap());
    let ready = common::ready_line(&mut stdout);
    let port = common::ready_port(&ready);
    let (status, _) = common::raw_request(port, "GET", "/healthz", "", "");
    assert_eq!(status, 200);
    runner.kill().unwrap();
    runner.wait().unwrap();
    let Some(status) = common::cli_env::exited_within(&mut proxy, GONE_WITHIN) else {
        let _ = proxy.kill();
        panic!("the proxy kept serving after the runner it watches was killed");
    };
    assert!(status.success(), "{status}");
    // It stopped as on SIGTERM: counters printed (and the index flushed) on the one path.
    let log = std::fs::read_to_string(work.join("proxy.log")).unwrap();
    assert!(log.contains("cassette proxy: stopped;"), "{log}");
}

#[test]
fn a_killed_parent_runner_ends_its_proxy_though_a_child_holds_the_control_pipe() {
    let work = Workdir::new();
    // The runner is a shell, the proxy's parent; the proxy's stdin is a pipe from another
    // child of the runner, which outlives it: the pipe never closes while the proxy runs.
    let holder = work.write("holder.sh", "echo $$ > \"$1\"\nexec sleep 60\n");
    let script = r#"bin="$1"; shift; sh "$HOLDER" "$HELD" | "$bin" "$@" --control-pipe --runner-pid $$ 2>"$LOG""#;
    let mut runner = Command::new("sh")
        .args(["-c", script, "sh"])
        .arg(common::cassette_bin())
        .args(plugin_args(&work))
        .env("HOLDER", &holder)
        .env("HELD", work.join("holder.pid"))
        .env("LOG", work.join("proxy.log"))
        .env_remove("CASSETTE_CONFIG")
        .current_dir(work.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Only the shell and the proxy hold this pipe: once both are gone, it reads its end.
    let mut stdout = BufReader::new(runner.stdout.take().unwrap());
    let ready = common::ready_line(&mut stdout);
    assert_eq!(ready["control"]["pipe"], serde_json::json!(true), "{ready}");
    let proxy = ready["pid"].as_u64().unwrap() as u32;
    runner.kill().unwrap();
    runner.wait().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = stdout.read_to_end(&mut rest);
        let _ = tx.send(());
    });
    let gone = rx.recv_timeout(GONE_WITHIN);
    let held: u32 = std::fs::read_to_string(work.join("holder.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let holding = running(held);
    // SAFETY: plain kill(2) of processes this test started.
    unsafe {
        libc::kill(held as libc::pid_t, libc::SIGKILL);
        if gone.is_err() {
            libc::kill(proxy as libc::pid_t, libc::SIGKILL);
        }
    }
    assert!(
        gone.is_ok(),
        "the proxy kept serving after its runner was killed"
    );
    assert!(
        holding,
        "the pipe's other end closed before the proxy stopped"
    );
    let log = std::fs::read_to_string(work.join("proxy.log")).unwrap();
    assert!(log.contains("cassette proxy: stopped;"), "{log}");
}

#[test]
fn a_runner_that_is_not_running_is_refused() {
    let work = Workdir::new();
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let out = work
        .cassette()
        .args(plugin_args(&work))
        .args(["--runner-pid", &pid.to_string()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        common::cli_env::code(&out),
        2,
        "{}",
        common::cli_env::both(&out)
    );
    let stderr = common::stderr(&out);
    assert!(stderr.contains("runner"), "{stderr}");
    assert!(stderr.contains("no process has that id"), "{stderr}");
    let out = work
        .cassette()
        .args(plugin_args(&work))
        .args(["--runner-pid", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", common::cli_env::both(&out));
    assert!(
        common::stderr(&out).contains("--runner-pid"),
        "{}",
        common::stderr(&out)
    );
}

#[test]
fn a_runner_that_lives_keeps_its_proxy() {
    // This test's process is the runner, and the proxy's parent.
    let work = Workdir::new();
    let mut proxy = work
        .cassette()
        .args(plugin_args(&work))
        .args(["--runner-pid", &std::process::id().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(proxy.stdout.take().unwrap());
    let ready = common::ready_line(&mut stdout);
    let port = common::ready_port(&ready);
    std::thread::sleep(Duration::from_millis(1200));
    assert!(proxy.try_wait().unwrap().is_none(), "the proxy stopped");
    let (status, _) = common::raw_request(port, "GET", "/healthz", "", "");
    assert_eq!(status, 200);
    proxy.kill().unwrap();
    proxy.wait().unwrap();
    let mut line = String::new();
    let _ = stdout.read_line(&mut line);
}
