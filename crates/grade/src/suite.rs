//! Suites: JSON Lines, one case a line, parsed and validated whole before any request is sent,
//! with errors that name the line and member.
//!
//! A case is `{"id", "prompt", "params", "grader", "expect"}` (the prompt shorthand for an
//! OpenAI-compatible chat request to `/v1/chat/completions` on the default route) or
//! `{"id", "request", "grader", "expect"}` with a full request in the request-file format
//! ([`crate::request_file`]). Blank lines and lines starting with `#` or `//` are skipped.

use crate::error::{bail, BadLine, Error, Result};
use crate::graders::{self, Grader};
use crate::request_file;
use cassette_tape::Request;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The path the prompt shorthand posts to.
pub const CHAT_PATH: &str = "/v1/chat/completions";

/// Members a case may have.
const MEMBERS: &[&str] = &["id", "prompt", "params", "request", "grader", "expect"];

/// One case, ready to run.
#[derive(Debug)]
pub struct Case {
    /// Unique id.
    pub id: String,
    /// 1-based line in the suite file.
    pub line: usize,
    /// The request to send.
    pub request: Request,
    /// What to check, every grader on the one answer.
    pub graders: Vec<Grader>,
}

/// Parses and validates a suite's text, every case's graders built: on failure
/// [`Error::Suite`] with every bad line and its 1-based number, not just the first, or
/// [`Error::EmptySuite`] when it holds no case.
pub fn parse(text: &str) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    let mut errors = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with("//") {
            continue;
        }
        match case(trimmed, line) {
            Ok(case) => {
                if let Some(first) = seen.insert(case.id.clone(), line) {
                    errors.push(BadLine {
                        line,
                        reason: format!("duplicate id {:?} (first on line {first})", case.id),
                    });
                } else {
                    cases.push(case);
                }
            }
            Err(err) => errors.push(BadLine {
                line,
                reason: err.to_string(),
            }),
        }
    }
    if !errors.is_empty() {
        return Err(Error::Suite { lines: errors });
    }
    if cases.is_empty() {
        return Err(Error::EmptySuite);
    }
    Ok(cases)
}

fn case(text: &str, line: usize) -> Result<Case> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| Error::case(format!("invalid JSON: {e}")))?;
    let Value::Object(obj) = value else {
        bail!(case, "a case is a JSON object");
    };
    if let Some(unknown) = obj.keys().find(|k| !MEMBERS.contains(&k.as_str())) {
        bail!(
            case,
            "unknown member {unknown:?} (a case has: {})",
            MEMBERS.join(", ")
        );
    }
    let id = match obj.get("id") {
        Some(Value::String(id)) if !id.trim().is_empty() => id.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => bail!(case, "\"id\" must be a non-empty string, found {other}"),
        None => bail!(case, "missing member \"id\""),
    };
    let (request, graders) =
        request_and_graders(&obj).map_err(|e| e.within(format!("case {id:?}")))?;
    Ok(Case {
        id,
        line,
        request,
        graders,
    })
}

/// A case's request and its graders, built from `grader` and `expect`.
fn request_and_graders(obj: &Map<String, Value>) -> Result<(Request, Vec<Grader>)> {
    let request = request(obj)?;
    Ok((
        request,
        graders::from_case(obj.get("grader"), obj.get("expect"))?,
    ))
}

fn request(obj: &Map<String, Value>) -> Result<Request> {
    match (obj.get("prompt"), obj.get("request")) {
        (Some(_), Some(_)) => bail!(request, "give either \"prompt\" or \"request\", not both"),
        (None, None) => bail!(request, "missing member \"prompt\" (or a full \"request\")"),
        (Some(prompt), None) => {
            let Value::String(prompt) = prompt else {
                bail!(request, "\"prompt\" must be a string, found {prompt}");
            };
            let params = match obj.get("params") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(params)) => params.clone(),
                Some(other) => bail!(request, "\"params\" must be an object, found {other}"),
            };
            Ok(Request::post_json(CHAT_PATH, &chat_body(prompt, params)?))
        }
        (None, Some(request)) => {
            if obj.contains_key("params") {
                bail!(
                    request,
                    "\"params\" goes with \"prompt\"; put them in the request body instead"
                );
            }
            if !request.is_object() {
                bail!(request, "\"request\" must be an object, found {request}");
            }
            request_file::parse(&request.to_string()).map_err(|e| e.within("in \"request\""))
        }
    }
}

/// The OpenAI-compatible chat body for the prompt shorthand: `system` becomes the first
/// message, the prompt the user message, and every other parameter a body member as written.
fn chat_body(prompt: &str, mut params: Map<String, Value>) -> Result<Value> {
    match params.get("model") {
        Some(Value::String(m)) if !m.is_empty() => {}
        Some(other) => bail!(request, "params.model must be a model name, found {other}"),
        None => bail!(
            request,
            "missing params.model (the prompt shorthand needs a model)"
        ),
    }
    if params.contains_key("messages") {
        bail!(
            request,
            "params.messages conflicts with \"prompt\"; use a full \"request\" for a conversation"
        );
    }
    let mut messages = Vec::new();
    match params.remove("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(system)) => {
            messages.push(serde_json::json!({"role": "system", "content": system}));
        }
        Some(other) => bail!(request, "params.system must be a string, found {other}"),
    }
    messages.push(serde_json::json!({"role": "user", "content": prompt}));
    params.insert("messages".into(), Value::Array(messages));
    Ok(Value::Object(params))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorthand_becomes_an_openai_chat_request() {
        let cases = parse(concat!(
            "# a comment\n",
            r#"{"id":"a","prompt":"Hi","params":{"model":"m","system":"Be brief","temperature":0},"grader":"contains","expect":{"needle":"hi"}}"#,
            "\n\n",
            r#"{"id":"b","request":{"target":"anthropic","path":"/v1/messages","body":{"model":"c"}},"grader":"refusal"}"#,
        ))
        .unwrap();
        assert_eq!(cases.len(), 2);
        let body: Value = serde_json::from_slice(&cases[0].request.body).unwrap();
        assert_eq!(cases[0].request.path, CHAT_PATH);
        assert_eq!(cases[0].line, 2);
        assert_eq!(body["messages"][0]["content"], "Be brief");
        assert_eq!(
            body["messages"][1],
            serde_json::json!({"role": "user", "content": "Hi"})
        );
        assert_eq!(body["temperature"], 0);
        assert!(body.get("system").is_none());
        assert_eq!(cases[1].request.target, "anthropic");
        assert_eq!(cases[1].request.path, "/v1/messages");
    }

    #[test]
    fn every_bad_line_is_reported_with_its_number() {
        let text = [
            r#"{"id":"ok","prompt":"Hi","params":{"model":"m"},"grader":"contains","expect":{"needle":"x"}}"#,
            r#"{"id":"broken","#,
            r#"{"id":"g","prompt":"Hi","params":{"model":"m"},"grader":"vibes"}"#,
            r#"{"id":"n","prompt":"Hi","params":{"model":"m"},"grader":"contains"}"#,
            r#"{"prompt":"Hi","params":{"model":"m"},"grader":"refusal"}"#,
            r#"{"id":"ok","prompt":"Hi","params":{"model":"m"},"grader":"refusal"}"#,
            r#"{"id":"p","prompt":"Hi","grader":"refusal"}"#,
            r#"{"id":"t","prompt":"Hi","params":{"model":"m"},"grader":"refusal","expected":{}}"#,
        ]
        .join("\n");
        let Err(Error::Suite { lines: errors }) = parse(&text) else {
            panic!("not a suite error");
        };
        let lines: Vec<usize> = errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, [2, 3, 4, 5, 6, 7, 8]);
        let all: Vec<&str> = errors.iter().map(|e| e.reason.as_str()).collect();
        for (i, needle) in [
            "invalid JSON",
            "unknown grader \"vibes\"",
            "expect.needle",
            "missing member \"id\"",
            "duplicate id \"ok\"",
            "params.model",
            "unknown member \"expected\"",
        ]
        .iter()
        .enumerate()
        {
            assert!(all[i].contains(needle), "{}: {}", lines[i], all[i]);
        }
    }
}
