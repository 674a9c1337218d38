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
