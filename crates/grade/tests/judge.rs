//! The judge with a scripted model behind `Ask`: each vote's request, its reply read strictly,
//! the votes tallied into the criterion's verdict, a miss stopping the grading, a case's result
//! line, and the key of a committed judge tape reproduced byte for byte.

mod support;

use cassette_grade::graders::{self, Check, JudgeSpec};
use cassette_grade::grading::{grade, grade_case};
use cassette_grade::judge::{Ballot, JudgeApi, JudgeConfig};
use cassette_grade::result::Verdict;
use cassette_grade::suite;
use cassette_keying::KeyConfig;
use serde_json::{json, Value};
use support::{now, text_answer, Judge, Missed, Scripted};

fn judged(expect: Value) -> Vec<graders::Grader> {
    graders::from_case(Some(&json!("judge")), Some(&expect)).unwrap()
}

fn endpoint() -> JudgeConfig {
    JudgeConfig {
        model: Some("judge-1".into()),
        ..JudgeConfig::new(JudgeApi::Openai)
    }
}

#[test]
fn a_verdict_is_the_strict_majority_of_its_votes() {
    let judge = Judge::new([
        Scripted::Says(200, "PASS. Polite."),
        Scripted::Says(200, "FAIL: curt"),
        Scripted::Says(200, "PASS"),
    ]);
    let graders = judged(json!({"criterion": "The reply is polite", "votes": 3}));
    let graded = now(grade(&judge, &endpoint(), &graders, &text_answer("Hi!"))).unwrap();
    assert!(graded.passed(), "{:?}", graded.failures(false));
    assert!(graded.hit);
    let judgement = graded.outcomes[0].judgement.as_ref().unwrap();
    let ballots: Vec<Ballot> = judgement.votes.iter().map(|v| v.verdict).collect();
    assert_eq!(ballots, [Ballot::Pass, Ballot::Fail, Ballot::Pass]);
    assert_eq!((judgement.passed, judgement.failed), (2, 1));
    assert!((judgement.disagreement - 1.0 / 3.0).abs() < 1e-9);
    assert!(judgement.decided_by_one_vote());
    let score = graded.outcomes[0].score.unwrap();
    assert_eq!(
        (score.threshold, (score.value * 1000.0).round()),
        (0.5, 667.0)
    );
    let tally = graded.judge_tally().unwrap();
    assert_eq!(
        (tally.passed, tally.failed, tally.disagreement),
        (2, 1, 0.333)
    );
    let criteria = graded.criteria();
    assert_eq!(
        (criteria[0].grader.as_str(), criteria[0].criterion.as_str()),
        ("judge", "The reply is polite")
    );

    // Each vote is its own question: numbered, seeded by its number, sampled at temperature 1.
    let bodies = judge.bodies();
    assert_eq!(bodies.len(), 3);
    for (i, body) in bodies.iter().enumerate() {
        let vote = i + 1;
        assert_eq!(body["model"], "judge-1");
        assert_eq!(
            (&body["seed"], &body["temperature"]),
            (&json!(vote), &json!(1.0))
        );
        let question = body["messages"][1]["content"].as_str().unwrap();
        assert!(
            question.ends_with(&format!("(Vote {vote} of 3.) Reply PASS or FAIL first.")),
            "{question}"
        );
        assert!(question.contains("Text:\n<<<\nHi!\n>>>\n\n"), "{question}");
    }
    assert!(judge
        .asked()
        .iter()
        .all(|r| r.path == "/v1/chat/completions" && r.target == "default"));
}

#[test]
fn chatty_replies_and_error_statuses_are_invalid_votes_against_passing() {
    let judge = Judge::new([
        Scripted::Says(200, "**PASS** it is polite"),
        Scripted::Says(503, "PASS"),
    ]);
    let graders = judged(json!({"criterion": "The reply is polite", "votes": 2}));
    let graded = now(grade(&judge, &endpoint(), &graders, &text_answer("Hi!"))).unwrap();
    assert!(!graded.passed());
    assert_eq!(
        graded.failures(false),
        ["criterion \"The reply is polite\": 0 of 2 votes passed (invalid: **PASS** it is polite | invalid: judge answered HTTP 503)"]
    );
    let outcome = &graded.outcomes[0];
    assert_eq!(outcome.judgement.as_ref().unwrap().failed, 2);
    assert_eq!(outcome.score.unwrap().value, 0.0);
}

#[test]
fn a_vote_with_no_reply_stops_the_grading_with_its_error() {
    let judge = Judge::new([
        Scripted::Says(200, "PASS"),
        Scripted::Misses("vote 2 is not recorded"),
    ]);
    let graders = graders::from_case(
        Some(&json!([
            {"grader": "judge", "expect": {"criterion": "polite", "votes": 3}},
            {"grader": "tone", "expect": {"tone": "warm"}},
        ])),
        None,
    )
    .unwrap();
    let stopped = now(grade(&judge, &endpoint(), &graders, &text_answer("Hi!")));
    assert_eq!(
        stopped.unwrap_err(),
        Missed("vote 2 is not recorded".into())
    );
    // Neither the third vote nor the next grader was asked.
    assert_eq!(judge.asked().len(), 2);
}

#[test]
fn the_ollama_form_and_a_case_s_own_model() {
    let judge = Judge::passing();
    let ollama = JudgeConfig {
        route: "local".into(),
        ..JudgeConfig::new(JudgeApi::Ollama)
    };
    let graders = judged(json!({"criterion": "polite", "model": "llama3"}));
    now(grade(&judge, &ollama, &graders, &text_answer("Hi!"))).unwrap();
    let asked = judge.asked();
    assert_eq!(
        (asked[0].path.as_str(), asked[0].target.as_str()),
        ("/api/chat", "local")
    );
    let body = &judge.bodies()[0];
    assert_eq!(
        (&body["model"], &body["stream"], &body["options"]),
        (
            &json!("llama3"),
            &json!(false),
            &json!({"temperature": 0.0, "seed": 1})
        )
    );
    let Check::Judge(spec) = &graders[0].check else {
        panic!("a judge grader");
    };
    assert_eq!(ollama.model_for(spec), Some("llama3"));
    let unnamed = JudgeSpec {
        model: None,
        ..spec.clone()
    };
    assert_eq!(ollama.model_for(&unnamed), None);
}

#[test]
fn a_case_is_graded_into_its_result_line() {
    let case = &suite::parse(concat!(
        r#"{"id":"greet","prompt":"Say hi","params":{"model":"m"},"grader":[{"grader":"contains","expect":{"needle":"hi"}},"#,
        r#"{"grader":"judge","expect":{"criterion":"polite","votes":3}}]}"#
    ))
    .unwrap()[0];
    let reply = |status: u16, text: &str, hit: bool| cassette_grade::answer::Reply {
        key: "k".repeat(64),
        hit,
        status,
        answer: text_answer(text),
    };
    let judge = Judge::new([
        Scripted::Says(200, "PASS"),
        Scripted::Says(200, "FAIL"),
        Scripted::Says(200, "FAIL"),
    ]);
    let result = now(grade_case(
        &judge,
        &endpoint(),
        case,
        &reply(200, "hi there", true),
    ))
    .unwrap();
    assert_eq!(
        (result.id.as_str(), result.verdict),
        ("greet", Verdict::Fail)
    );
    assert!(result.hit, "the case and every vote were replayed");
    let reason = result.reason.as_deref().unwrap();
    assert!(
        reason.starts_with("judge: criterion \"polite\": 1 of 3 votes passed"),
        "{reason}"
    );
    assert_eq!((result.score, result.threshold), (Some(0.333), Some(0.5)));
    assert_eq!(
        result.scores.len(),
        1,
        "several graders: each score is named"
    );
    assert!(result.judges[0].by_one_vote);
    let line = serde_json::to_value(&result).unwrap();
    assert_eq!(
        line["judge"],
        json!({"passed": 1, "failed": 2, "disagreement": 0.333})
    );

    // An answer that is no success fails ungraded: the judge is not asked.
    let judge = Judge::new([]);
    let result = now(grade_case(
        &judge,
        &endpoint(),
        case,
        &reply(500, "overloaded", false),
    ))
    .unwrap();
    assert_eq!(result.verdict, Verdict::Fail);
    assert_eq!(
        result.reason.as_deref(),
        Some("the upstream answered HTTP 500: overloaded")
    );
    assert!(!result.hit && result.judge.is_none() && result.score.is_none());
    assert!(judge.asked().is_empty());
}

#[test]
fn the_committed_judge_tapes_of_the_example_suite_are_asked_again_byte_for_byte() {
    // examples/suite/suite.jsonl's judged case and the keys its three votes are stored under
    // in examples/suite/cassettes (replayed by tests/cli_run.rs). A change of the judge's
    // request that moves these keys orphans every judge tape users have recorded: it needs a
    // re-record of those tapes and a line in docs/suite.md, not a new constant here.
    let line = include_str!("../../../examples/suite/suite.jsonl")
        .lines()
        .find(|l| l.contains("\"greeting-judged\""))
        .unwrap();
    let case = &suite::parse(line).unwrap()[0];
    let Check::Judge(spec) = &case.graders[0].check else {
        panic!("a judged case");
    };
    let text = "You said: Write a short, friendly greeting for new users.";
    let keys: Vec<String> = (1..=3)
        .map(|vote| {
            JudgeConfig::new(JudgeApi::Openai)
                .request(spec, text, vote)
                .key(&KeyConfig::default())
                .key
                .to_string()
        })
        .collect();
    assert_eq!(
        keys,
        [
            "db14209848198c4b4c6cae95a88386d83540570fb85f074683e4afe35a45e557",
            "e4461977b207f68996f0d25c17630f0ff4229bb2a0fe32d78a6dff1a21203564",
            "bb06bc56eb17b87756084eabbaaec5dccd5645d78f4383fc85054c8a9f805219",
        ]
    );
}
