//! Suite files: JSON Lines, one case a line, parsed and validated whole before any request is
//! sent, with errors that name the file, line and member.
//!
//! A case is `{"id", "prompt", "params", "grader", "expect"}` (the prompt shorthand for an
//! OpenAI-compatible chat request to `/v1/chat/completions` on the default route) or
//! `{"id", "request", "grader", "expect"}` with a full request in the request-file format of
//! `cassette key --request`. Blank lines and lines starting with `#` or `//` are skipped.

use super::graders::{self, Grader};
use crate::request_file;
use anyhow::Context;
use cassette_recorder::Request;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

pub(crate) use super::call::CHAT_PATH;

/// Members a case may have.
const MEMBERS: &[&str] = &["id", "prompt", "params", "request", "grader", "expect"];

/// One case, ready to run.
#[derive(Debug)]
pub(crate) struct Case {
    /// Unique id.
    pub(crate) id: String,
    /// 1-based line in the suite file.
    pub(crate) line: usize,
    /// The request to send.
    pub(crate) request: Request,
    /// What to check, every grader on the one answer.
    pub(crate) graders: Vec<Grader>,
}

/// Reads and validates a whole suite. Every bad line is reported, not just the first.
pub(crate) fn load(path: &Path) -> anyhow::Result<Vec<Case>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read suite {}", path.display()))?;
    parse(&text).map_err(|errors| {
        let mut message = format!(
            "suite {} has {} bad line(s); nothing was run:",
            path.display(),
            errors.len()
        );
        for (line, error) in &errors {
            let _ = write!(message, "\n  {}:{line}: {error}", path.display());
        }
        anyhow::Error::msg(message)
    })
}

/// Parses a suite's text; on failure, every bad line with its 1-based number.
pub(crate) fn parse(text: &str) -> Result<Vec<Case>, Vec<(usize, String)>> {
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
                    errors.push((
                        line,
                        format!("duplicate id {:?} (first on line {first})", case.id),
                    ));
                } else {
                    cases.push(case);
                }
            }
            Err(err) => errors.push((line, format!("{err:#}"))),
        }
    }
    if cases.is_empty() && errors.is_empty() {
        errors.push((1, "the suite has no cases".to_owned()));
    }
    if errors.is_empty() {
        Ok(cases)
    } else {
        Err(errors)
    }
}

fn case(text: &str, line: usize) -> anyhow::Result<Case> {
    let value: Value = serde_json::from_str(text).context("invalid JSON")?;
    let Value::Object(obj) = value else {
        anyhow::bail!("a case is a JSON object");
    };
    if let Some(unknown) = obj.keys().find(|k| !MEMBERS.contains(&k.as_str())) {
        anyhow::bail!(
            "unknown member {unknown:?} (a case has: {})",
            MEMBERS.join(", ")
        );
    }
    let id = match obj.get("id") {
        Some(Value::String(id)) if !id.trim().is_empty() => id.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => anyhow::bail!("\"id\" must be a non-empty string, found {other}"),
        None => anyhow::bail!("missing member \"id\""),
    };
    let (request, graders) = request_and_graders(&obj).with_context(|| format!("case {id:?}"))?;
    Ok(Case {
        id,
        line,
        request,
        graders,
    })
}

/// A case's request and its graders, built from `grader` and `expect`.
fn request_and_graders(obj: &Map<String, Value>) -> anyhow::Result<(Request, Vec<Grader>)> {
    let request = request(obj)?;
    Ok((
        request,
        graders::from_case(obj.get("grader"), obj.get("expect"))?,
    ))
}

fn request(obj: &Map<String, Value>) -> anyhow::Result<Request> {
    match (obj.get("prompt"), obj.get("request")) {
        (Some(_), Some(_)) => anyhow::bail!("give either \"prompt\" or \"request\", not both"),
        (None, None) => anyhow::bail!("missing member \"prompt\" (or a full \"request\")"),
        (Some(prompt), None) => {
            let Value::String(prompt) = prompt else {
                anyhow::bail!("\"prompt\" must be a string, found {prompt}");
            };
            let params = match obj.get("params") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(params)) => params.clone(),
                Some(other) => anyhow::bail!("\"params\" must be an object, found {other}"),
            };
            Ok(Request::post_json(CHAT_PATH, &chat_body(prompt, params)?))
        }
        (None, Some(request)) => {
            if obj.contains_key("params") {
                anyhow::bail!(
                    "\"params\" goes with \"prompt\"; put them in the request body instead"
                );
            }
            if !request.is_object() {
                anyhow::bail!("\"request\" must be an object, found {request}");
            }
            request_file::parse(&request.to_string()).context("in \"request\"")
        }
    }
}

/// The OpenAI-compatible chat body for the prompt shorthand: `system` becomes the first
/// message, the prompt the user message, and every other parameter a body member as written.
fn chat_body(prompt: &str, mut params: Map<String, Value>) -> anyhow::Result<Value> {
    match params.get("model") {
        Some(Value::String(m)) if !m.is_empty() => {}
        Some(other) => anyhow::bail!("params.model must be a model name, found {other}"),
        None => anyhow::bail!("missing params.model (the prompt shorthand needs a model)"),
    }
    if params.contains_key("messages") {
        anyhow::bail!(
            "params.messages conflicts with \"prompt\"; use a full \"request\" for a conversation"
        );
    }
    let mut messages = Vec::new();
    match params.remove("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(system)) => {
            messages.push(serde_json::json!({"role": "system", "content": system}));
        }
        Some(other) => anyhow::bail!("params.system must be a string, found {other}"),
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
        let errors = parse(&text).unwrap_err();
        let lines: Vec<usize> = errors.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, [2, 3, 4, 5, 6, 7, 8]);
        let all: Vec<&str> = errors.iter().map(|(_, e)| e.as_str()).collect();
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
