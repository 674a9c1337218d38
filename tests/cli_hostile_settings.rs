//! A settings file checked in by someone else (a pull request, a shared folder) through the
//! built binary (issue 25): under CI it cannot turn replay into a mode that calls an upstream,
//! it cannot send a variable that is not an API key's to an upstream it names, its paths stay
//! in its folder, and a cassette.toml that is not a regular file is refused with its path.

mod common;

use common::cli_env::{both, code, Workdir};
use common::fake_llm::FakeLlm;

fn case(id: &str, prompt: &str) -> String {
    format!(
        r#"{{"id":"{id}","prompt":"{prompt}","params":{{"model":"m","temperature":0}},"grader":"contains","expect":{{"needle":"said"}}}}"#
    )
}


/// Runs `cassette ARGS` in `dir/sub`, killing it after ten seconds: reading a FIFO or a device
/// must fail the test, not hang it.
fn run_with_deadline(dir: &Workdir, sub: &str, args: &[&str]) -> std::process::Output {
    let mut child = dir
        .cassette()
        .current_dir(dir.join(sub))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
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
    let cases: [(&str, &dyn Fn(&std::path::Path), &str); 3] = [
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
