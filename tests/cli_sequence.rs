//! Sequence mode through the binary: a suite that sends one request three times records three
//! tapes (the first under the request's plain key), replays them in order and misses on a
//! fourth with "recorded 3 times, asked a 4th"; `ls`, `verify` and `gc` know later occurrences.

mod common;

use common::cli_env::{both, code, json_lines, Workdir};
use common::fake_llm::FakeLlm;
use serde_json::Value;
use std::path::Path;

fn case(id: &str) -> String {
    format!(
        r#"{{"id":"{id}","prompt":"[noisy] Name a colour.","params":{{"model":"m","temperature":1}},"grader":"contains","expect":{{"needle":"Answer"}}}}"#
    )
}

fn suite(n: usize) -> String {
    (1..=n)
        .map(|i| case(&format!("ask{i}")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Records three repeats in sequence mode; returns the listing's rows.
fn recorded(dir: &Workdir, fake: &FakeLlm, store: &str) -> Vec<Value> {
    dir.write("three.jsonl", &suite(3));
    let out = dir.run(&[
        "run",
        "three.jsonl",
        "--mode",
        "record",
        "--repeats",
        "sequence",
        "--store",
        store,
        "--upstream",
        &fake.url,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert_eq!(fake.requests(), 3);
    json_lines(&dir.run(&["ls", "--json", "--store", store]))
}

fn cassette_file(store_dir: &Path, key: &str) -> std::path::PathBuf {
    store_dir.join(&key[..2]).join(format!("{key}.json"))
}

#[test]
fn repeats_record_replay_in_order_and_list_as_occurrences() {
    let dir = Workdir::new();
    let store = dir.store("tapes");
    let fake = FakeLlm::start();
    let rows = recorded(&dir, &fake, &store);
    assert_eq!(rows.len(), 3, "{rows:?}");
    let first = rows.iter().find(|r| r.get("occurrence").is_none()).unwrap();
    let base = first["key"].as_str().unwrap();
    let mut occurrences: Vec<u64> = rows
        .iter()
        .filter_map(|r| {
            assert!(r.get("base_key").is_none() || r["base_key"] == base, "{r}");
            r["occurrence"].as_u64()
        })
        .collect();
    occurrences.sort();
    assert_eq!(occurrences, [2, 3]);
    let table = common::stdout(&dir.run(&["ls", "--store", &store]));
    assert!(
        table.contains("/v1/chat/completions #2") && table.contains("/v1/chat/completions #3"),
        "{table}"
    );
    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));

    dir.write("four.jsonl", &suite(4));
    let out = dir.run(&[
        "run",
        "four.jsonl",
        "--repeats",
        "sequence",
        "--store",
        &store,
    ]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    let all = both(&out);
    assert!(all.contains("recorded 3 times, asked a 4th"), "{all}");
    assert_eq!(fake.requests(), 3, "replay never calls the upstream");
    // Without sequence mode, every repeat is answered by the first recording: no miss.
    let out = dir.run(&["run", "four.jsonl", "--store", &store]);
    assert_eq!(code(&out), 0, "{}", both(&out));
}

#[test]
fn verify_finds_a_gap_in_a_sequence_and_a_hand_edited_base_key() {
    let dir = Workdir::new();
    let store = dir.store("tapes");
    let fake = FakeLlm::start();
    let rows = recorded(&dir, &fake, &store);
    let store_dir = dir.join("tapes");
    let key_of = |n: u64| {
        rows.iter()
            .find(|r| r["occurrence"].as_u64() == Some(n))
            .map(|r| r["key"].as_str().unwrap().to_owned())
            .unwrap()
    };
    let (second, third) = (key_of(2), key_of(3));
    std::fs::remove_file(cassette_file(&store_dir, &second)).unwrap();
    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    let report = common::stdout(&out);
    assert!(
        report.contains(&format!("{third}: occurrence 3 of request"))
            && report.contains("its occurrence 2 is not stored"),
        "{report}"
    );

    let path = cassette_file(&store_dir, &third);
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    doc["sequence"]["base_key"] = Value::from("ab".repeat(32));
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let out = dir.run(&["verify", "--store", &store]);
    assert_eq!(code(&out), 1, "{}", both(&out));
    assert!(
        common::stdout(&out).contains("its sequence names the request abab"),
        "{}",
        both(&out)
    );
}

#[test]
fn gc_keeps_the_later_occurrences_of_a_request_a_log_names() {
    let dir = Workdir::new();
    let store = dir.store("tapes");
    let fake = FakeLlm::start();
    let rows = recorded(&dir, &fake, &store);
    // A replay without sequence mode logs only the first occurrence.
    let out = dir.run(&[
        "run",
        "three.jsonl",
        "--store",
        &store,
        "--usage-log",
        "same.log",
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    let logged = std::fs::read_to_string(dir.join("same.log")).unwrap();
    assert_eq!(
        logged
            .lines()
            .collect::<std::collections::HashSet<_>>()
            .len(),
        1
    );
    let out = dir.run(&[
        "gc",
        "--unused",
        "--usage-log",
        "same.log",
        "--store",
        &store,
    ]);
    assert_eq!(code(&out), 0, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("kept 2 later occurrences"),
        "{}",
        both(&out)
    );
    assert_eq!(
        json_lines(&dir.run(&["ls", "--json", "--store", &store])).len(),
        3
    );

    // A log that names no key of the store (another store's, another key version's) would
    // select every cassette: refused, nothing deleted (issue 10, item 18).
    let other = "cd".repeat(32);
    dir.write("other.log", &format!("{other}\n"));
    let out = dir.run(&[
        "gc",
        "--unused",
        "--usage-log",
        "other.log",
        "--store",
        &store,
    ]);
    assert_eq!(code(&out), 2, "{}", both(&out));
    assert!(
        common::stderr(&out).contains("none of them"),
        "{}",
        both(&out)
    );
    assert_eq!(
        json_lines(&dir.run(&["ls", "--json", "--store", &store])).len(),
        rows.len()
    );
}
