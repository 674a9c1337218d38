//! `cassette rekey` (issue 23): after a keying settings change every cassette is keyed again
//! from its stored request and written under its new key, so replay finds it; two that key to
//! one key now with different answers are a collision naming both, and a cassette whose stored
//! request cannot give back its key (redacted or edited) stays where it is, named.

mod common;

use common::cli_env::{both, code, Workdir};
use serde_json::Value;

fn interaction(temperature: &str, question: &str, text: &str) -> String {
    format!(
        r#"- request:
    body: '{{"messages":[{{"role":"user","content":"{question}"}}],"model":"gpt-4o-mini","temperature":{temperature}}}'
    headers: {{Content-Type: [application/json]}}
    method: POST
    uri: https://api.openai.com/v1/chat/completions
  response:
    body: {{string: '{{"object":"chat.completion","model":"gpt-4o-mini","choices":[{{"index":0,"message":{{"role":"assistant","content":"{text}"}},"finish_reason":"stop"}}]}}'}}
    headers: {{Content-Type: [application/json]}}
    status: {{code: 200, message: OK}}
"#
    )
}

fn keys(dir: &Workdir, store: &str) -> Vec<String> {
    let out = dir.run(&["ls", "--json", "--store", store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let mut keys: Vec<String> = common::stdout(&out)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["key"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    keys.sort();
    keys
}

#[test]
fn a_settings_change_rekeys_instead_of_orphaning() {
    let dir = Workdir::new();
    dir.write(
        "tapes/t.yaml",
        &format!(
            "interactions:\n{}{}{}{}version: 1\n",
            interaction("0.1", "Name a colour.", "teal"),
            interaction("0.9", "Name a colour.", "amber"),
            interaction("0.5", "Name a city.", "Paris"),
            // A key in the prompt: redaction replaces keyed material.
            interaction(
                "0.5",
                "Use the key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD please.",
                "ok"
            ),
        ),
    );
    let store = dir.store("c");
    let out = dir.run(&["import", "tapes", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let before = keys(&dir, &store);
    assert_eq!(before.len(), 4);
    // A hand edit of one stored request.
    let city = walk(&dir.join("c"))
        .into_iter()
        .find(|p| std::fs::read_to_string(p).unwrap().contains("Name a city."))
        .unwrap();
    let edited_dir = Workdir::new();
    let edited = edited_dir.store("e");
    std::fs::create_dir_all(
        edited_dir
            .join("e")
            .join(city.parent().unwrap().file_name().unwrap()),
    )
    .unwrap();
    let target = edited_dir
        .join("e")
        .join(city.parent().unwrap().file_name().unwrap())
        .join(city.file_name().unwrap());
    std::fs::write(
        &target,
        std::fs::read_to_string(&city)
            .unwrap()
            .replace("Name a city.", "Name a town."),
    )
    .unwrap();

    // Temperature leaves the key: teal and amber key to one key now, with different answers.
    dir.write("cassette.toml", "[keying]\nignore = [\"$.temperature\"]\n");
    let out = dir.run(&["rekey", "--dry-run", "--store", &store]);
    let text = both(&out);
    assert_eq!(code(&out), 2, "{text}");
    assert_eq!(
        keys(&dir, &store),
        before,
        "a dry run changed the store: {text}"
    );
    assert!(text.contains("would move 2, 0 already current"), "{text}");

    let out = dir.run(&["rekey", "--store", &store]);
    let text = both(&out);
    assert_eq!(code(&out), 2, "{text}");
    assert!(
        text.contains("moved 2, 0 already current, 0 merged into an equal answer, 1 collision(s), 1 whose stored request cannot give back its key"),
        "{text}"
    );
    assert!(
        text.contains("which holds another answer, from tapes/t.yaml interaction"),
        "{text}"
    );
    assert!(text.contains("redaction replaced keyed material"), "{text}");
    let after = keys(&dir, &store);
    // Two moved (old removed), the collided and the redacted one stay: four documents.
    assert_eq!(after.len(), 4, "{after:?}");
    assert_eq!(after.iter().filter(|k| before.contains(k)).count(), 2);

    // Replay under the new settings finds the moved ones: any temperature, the city.
    dir.write(
        "suite.jsonl",
        &[
            r#"{"id":"colour","request":{"path":"/v1/chat/completions","body":{"model":"gpt-4o-mini","temperature":0.3,"messages":[{"role":"user","content":"Name a colour."}]}},"grader":"regex","expect":{"pattern":"teal|amber"}}"#,
            r#"{"id":"city","request":{"path":"/v1/chat/completions","body":{"model":"gpt-4o-mini","temperature":1,"messages":[{"role":"user","content":"Name a city."}]}},"grader":"contains","expect":{"needle":"Paris"}}"#,
        ]
        .join("\n"),
    );
    let out = dir.run(&["run", "suite.jsonl", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));

    // Run again: the moved ones are current, the others are reported again.
    let out = dir.run(&["rekey", "--store", &store]);
    assert!(
        both(&out).contains("moved 0, 2 already current"),
        "{}",
        both(&out)
    );

    // An edited stored request cannot give back its key: never moved.
    let out = edited_dir.run(&[
        "rekey",
        "--store",
        &edited,
        "--ignore-path",
        "$.temperature",
    ]);
    let text = both(&out);
    assert_eq!(code(&out), 2, "{text}");
    assert!(
        text.contains("the request was edited or redacted after it was keyed"),
        "{text}"
    );
    assert!(target.exists());
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
    out
}

/// A test-scoped cassette (adopt: `docs/keying.md`, "Test-scoped keys") beside the plain one of
/// its request: `verify` finds nothing wrong with it, `ls` and `show` say what it is, `rekey`
/// keeps it test-scoped under the new settings, and a hand-edited scope is named.
#[test]
fn a_test_scoped_cassette_is_verified_listed_and_rekeyed_as_one() {
    use cassette_keying::KeyConfig;
    use cassette_tape::{Cassette, StoredBody, TestScope};

    let dir = Workdir::new();
    dir.write(
        "tapes/t.yaml",
        &format!(
            "interactions:\n{}version: 1\n",
            interaction("1", "Pick a number.", "answer 5")
        ),
    );
    let store = dir.store("c");
    let out = dir.run(&["import", "tapes", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let plain_path = walk(&dir.join("c"))
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let plain_text = std::fs::read_to_string(&plain_path).unwrap();
    let plain: Cassette = serde_json::from_str(&plain_text).unwrap();
    // Another test's answer to the same request, as adopt stores it.
    let test = "tests/test_chat.py::test_same_request_second";
    let mut scoped = plain.clone();
    scoped.test_scope = Some(TestScope {
        test: test.into(),
        plain_key: plain.key.clone(),
    });
    scoped.meta.test = Some(test.into());
    scoped.format = 3;
    scoped.key = scoped.keyed_request(&KeyConfig::default()).key;
    assert_ne!(scoped.key, plain.key);
    let text = serde_json::to_string_pretty(&scoped)
        .unwrap()
        .replace("answer 5", "answer 6");
    let write = |cassette: &Cassette, text: &str| {
        let key = cassette.key.as_str();
        let path = plain_path
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join(&key[..2])
            .join(format!("{key}.json"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    };
    assert!(
        plain_path.ends_with(format!("{}/{}.json", &plain.key.as_str()[..2], plain.key)),
        "{plain_path:?}"
    );
    write(&scoped, &text);

    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let out = dir.run(&["ls", "--store", &store]);
    let listed = common::stdout(&out);
    assert_eq!(
        listed
            .lines()
            .filter(|l| l.contains("(test-scoped)"))
            .count(),
        1,
        "{listed}"
    );
    let out = dir.run(&["ls", "--json", "--store", &store]);
    let lines: Vec<Value> = common::stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let row = lines.iter().find(|l| l["test_scoped"] == true).unwrap();
    assert_eq!(row["plain_key"], plain.key.as_str());
    assert_eq!(row["test"], test);
    let out = dir.run(&["show", scoped.key.as_str(), "--store", &store]);
    assert!(
        common::stdout(&out).contains(&format!("yes, for {test} (plain key {})", plain.key)),
        "{}",
        both(&out)
    );

    // New settings: both move, the scoped one stays scoped to its test and names the new plain
    // key; verify under the new settings agrees.
    dir.write("cassette.toml", "[keying]\nignore = [\"$.temperature\"]\n");
    let out = dir.run(&["rekey", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(both(&out).contains("moved 2"), "{}", both(&out));
    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let moved: Vec<Cassette> = walk(&dir.join("c"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    assert_eq!(moved.len(), 2, "{moved:?}");
    let new_plain = moved.iter().find(|c| c.test_scope.is_none()).unwrap();
    let new_scoped = moved.iter().find(|c| c.test_scope.is_some()).unwrap();
    assert_ne!(new_plain.key, plain.key);
    let scope = new_scoped.test_scope.as_ref().unwrap();
    assert_eq!(
        (scope.test.as_str(), &scope.plain_key),
        (test, &new_plain.key)
    );
    assert!(
        matches!(&new_scoped.response.body, StoredBody::Json(v) if v.to_string().contains("answer 6"))
    );

    // A scope edited by hand to name another request is named by verify.
    let mut edited = new_scoped.clone();
    edited.test_scope.as_mut().unwrap().plain_key = plain.key.clone();
    let text = serde_json::to_string_pretty(&edited).unwrap();
    write(&edited, &text);
    let out = dir.run(&["verify", "--store", &store]);
    assert_ne!(code(&out), 0, "{}", both(&out));
    assert!(
        both(&out).contains("its test scope names the request"),
        "{}",
        both(&out)
    );
}
