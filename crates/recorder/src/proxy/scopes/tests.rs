//! Unit tests of test scopes: scope prefixes, the control token, the pipe's lines, begins and
//! the failure text a reporting read tells.

use super::*;

#[test]
fn scope_prefixes_are_split_off_only_when_well_formed() {
    assert_eq!(
        split_scope("/_scope/w1/v1/chat/completions"),
        Some(("w1", "/v1/chat/completions"))
    );
    assert_eq!(split_scope("/_scope/a.b-c_9"), Some(("a.b-c_9", "/")));
    for path in [
        "/v1/chat",
        "/_scope/",
        "/_scope//v1",
        "/_scope/a%2Fb/v1",
        "/_scopes/x/v1",
    ] {
        assert_eq!(split_scope(path), None, "{path}");
    }
    assert!(!valid_scope_id(&"x".repeat(129)));
}

#[test]
fn the_token_is_compared_whole() {
    let scopes = Scopes::new("secret-token".into(), Notices::Off);
    assert!(scopes.authorized(Some("secret-token")));
    for wrong in [None, Some(""), Some("secret-toke"), Some("secret-tokenX")] {
        assert!(!scopes.authorized(wrong), "{wrong:?}");
    }
}

#[test]
fn a_pipe_line_is_a_begin_or_an_end_and_nothing_else() {
    let parse = |line: &str| Control::parse(line.as_bytes());
    match parse(r#"{"op":"begin","scope":"w1","test":"t","repeats":"sequence","alias":"t1"}"#) {
        Ok(Control::Begin { id, scope, alias }) => {
            assert_eq!((id.as_str(), scope.test.as_deref()), ("w1", Some("t")));
            assert_eq!(alias.as_deref(), Some("t1"));
            assert_eq!(scope.repeats, Some(Repeats::Sequence));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        parse(r#"{"op":"end","scope":"default"}"#),
        Ok(Control::End { id }) if id == "default"
    ));
    for (line, says) in [
        (r#"{"op":"begin","scope":"w1","tset":"t"}"#, "tset"),
        (
            r#"{"op":"end","scope":"w1","test":"t"}"#,
            "only `op` and `scope`",
        ),
        (r#"{"op":"restart","scope":"w1"}"#, "restart"),
        (r#"{"op":"begin"}"#, "`scope`"),
        (r#"{"op":"begin","scope":"a/b"}"#, "a/b"),
        ("[1]", "one line of JSON"),
    ] {
        let err = parse(line).unwrap_err();
        assert!(err.contains(says), "{line}: {err}");
    }
}

#[test]
fn a_begin_names_its_mode_and_repeats() {
    let begin = |mode: Option<&str>, repeats: Option<&str>| Begin {
        test: Some("t".into()),
        mode: mode.map(str::to_owned),
        repeats: repeats.map(str::to_owned),
        ..Begin::default()
    };
    let scope = begin(Some("replay"), Some("sequence")).scope().unwrap();
    assert_eq!(scope.sharing, Sharing::Shared);
    assert_eq!(
        (scope.mode, scope.repeats),
        (Some(Mode::Replay), Some(Repeats::Sequence))
    );
    assert!(begin(Some("rec"), None)
        .scope()
        .unwrap_err()
        .contains("rec"));
    assert!(begin(None, Some("twice"))
        .scope()
        .unwrap_err()
        .contains("twice"));
    let own = |sharing: &str| Begin {
        sharing: Some(sharing.to_owned()),
        ..Begin::default()
    };
    assert_eq!(own("own").scope().unwrap().sharing, Sharing::Own);
    assert_eq!(own("shared").scope().unwrap().sharing, Sharing::Shared);
    assert!(own("mine").scope().unwrap_err().contains("mine"));
    // The control pipe's begin says the same.
    let line = br#"{"op":"begin","scope":"default","test":"t","sharing":"own"}"#;
    match Control::parse(line).unwrap() {
        Control::Begin { id, scope, .. } => {
            assert_eq!((id.as_str(), scope.sharing), ("default", Sharing::Own));
        }
        other => panic!("{other:?}"),
    }
    let line = br#"{"op":"begin","scope":"default","sharing":"mine"}"#;
    assert!(Control::parse(line).unwrap_err().contains("mine"));
}

#[test]
fn a_reporting_read_tells_only_what_is_new() {
    let mut tally = Tally {
        misses: KEPT as u64 + 3,
        missed: (0..KEPT)
            .map(|n| MissedRequest {
                key: format!("k{n}"),
                request: "an MCP request".into(),
                summary: "no recording".into(),
                explanation: Vec::new(),
            })
            .collect(),
        bypassed: vec![BypassedHost {
            host: "api.openai.com:443".into(),
            requests: 2,
            refused: true,
        }],
        unused: Some(vec!["0123456789abcdef0123".into()]),
        ..Tally::default()
    };
    let mut told = Told::default();
    tally.render(&mut told);
    let lines = tally.failure.clone();
    assert_eq!(lines.len(), 2 * KEPT + 4, "{lines:#?}");
    assert_eq!(lines[2 * KEPT], "  ... and 3 more misses");
    assert!(lines[2 * KEPT + 1].contains("record it in record or auto mode"));
    assert!(lines[2 * KEPT + 2].starts_with("cassette: 2 request(s) to api.openai.com:443"));
    assert!(lines[2 * KEPT + 3].starts_with("cassette strict: 1 recording(s)"));
    // Nothing new: nothing told.
    tally.render(&mut told);
    assert!(tally.failure.is_empty(), "{:#?}", tally.failure);
    // Two more misses past the kept ones, one more refused request, one error.
    tally.misses += 2;
    tally.bypassed[0].requests = 3;
    tally.failed.push("upstream unreachable".into());
    tally.record = Some("the record mode".into());
    tally.render(&mut told);
    assert_eq!(
        tally.failure,
        [
            "cassette miss: 2 more misses",
            "  (replay never calls the vendor: record it with the record mode, which calls the vendor with your key)",
            "cassette error: upstream unreachable",
            "cassette: 1 request(s) to api.openai.com:443 bypassed the base URL and were refused (replay never connects anywhere): the client has a hard-coded URL or reads a variable cassette does not set; give it the proxy's base URL (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, ...: see docs/proxy.md); a host that is not an LLM API: point its client at the proxy with a route ([routes.NAME]), or allow it: [bypass] allow in cassette.toml",
        ]
    );
    assert_eq!(
        tally.headline.as_deref(),
        Some("an MCP request: no recording")
    );
}

#[test]
fn a_begin_names_a_tests_tapes_and_their_match_on() {
    let line = br#"{"op":"begin","scope":"default","test":"t","tapes":["a.yaml","b.yaml"],"match_on":["method","body"]}"#;
    match Control::parse(line).unwrap() {
        Control::Begin { scope, .. } => assert_eq!(
            scope.tapes,
            Some(TapeSet {
                paths: vec!["a.yaml".into(), "b.yaml".into()],
                match_on: vec!["method".into(), "body".into()],
                ..TapeSet::default()
            })
        ),
        other => panic!("{other:?}"),
    }
    let line = br#"{"op":"begin","scope":"default","test":"t","tapes":[]}"#;
    match Control::parse(line).unwrap() {
        Control::Begin { scope, .. } => assert_eq!(scope.tapes, Some(TapeSet::default())),
        other => panic!("{other:?}"),
    }
    let line = br#"{"op":"begin","scope":"default","match_on":["body"]}"#;
    assert!(Control::parse(line).unwrap_err().contains("`match_on`"));
}
