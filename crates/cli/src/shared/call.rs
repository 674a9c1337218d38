//! One request through the recorder and its answer read out: what a case and each judge vote
//! do.

use cassette_grade::answer::{self, Answer, Reply};
use cassette_keying::Key;
use cassette_recorder::miss::{Explanation, Nearest};
use cassette_recorder::{Error, Miss, Recorder, Request, Scope, Source};
use serde_json::Value;

/// Why a run stops early.
pub(crate) enum Stop {
    /// Replay found no cassette.
    Miss(Box<Miss>),
    /// Anything else that is not a verdict.
    Fatal(anyhow::Error),
}

/// Sends one request through the recorder and reads the answer.
pub(crate) async fn call(recorder: &Recorder, request: Request) -> Result<Reply, Stop> {
    call_in(recorder, request, &Scope::default()).await
}

/// Sends one request through the recorder for `scope` (the judge's votes name theirs) and reads
/// the answer.
pub(crate) async fn call_in(
    recorder: &Recorder,
    request: Request,
    scope: &Scope,
) -> Result<Reply, Stop> {
    let path = request.path.clone();
    match recorder.handle_in(request, scope).await {
        Ok(outcome) => {
            let status = outcome.response.status;
            let header = |name: &str| {
                outcome
                    .response
                    .headers
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.clone())
            };
            // Passed through to a cassette proxy in front (`cassette grade` under `cassette exec`
            // or the pytest plugin): that proxy recorded or replayed it, and says which.
            let relayed = (outcome.source == Source::PassedThrough)
                .then(|| header("x-cassette"))
                .flatten();
            let key = match relayed.as_ref().and_then(|_| header("x-cassette-key")) {
                Some(key) => key,
                None => outcome.key.to_string(),
            };
            let hit = match &relayed {
                Some(source) => source == "replayed",
                None => outcome.source == Source::Replayed,
            };
            let content_type = header("content-type");
            let body = outcome.response.into_bytes().await.map_err(|e| {
                Stop::Fatal(anyhow::Error::new(e).context(format!("reading the answer for {key}")))
            })?;
            if outcome.source == Source::PassedThrough && !(200..300).contains(&status) {
                if let Some(miss) = relayed_miss(&body) {
                    return Err(Stop::Miss(Box::new(miss)));
                }
            }
            Ok(Reply {
                hit,
                status,
                answer: redacted_answer(recorder, &path, content_type.as_deref(), &body),
                key,
            })
        }
        Err(Error::Miss(miss)) => Err(Stop::Miss(miss)),
        Err(other) => Err(Stop::Fatal(other.into())),
    }
}

/// The answer to a request for `path` read out of `body` (a stream assembled first) after the
/// recorder's own redaction of a stored response body (credential names and shapes, a secret
/// split across events, the routes' keys, the user's paths and patterns): what a recording
/// stores is all a result line, a saved run, a JUnit report or a grader ever sees, so a live
/// answer and its replay grade, print and save alike, and a key the model streamed or an
/// upstream echoed never reaches `.cassette/runs/`.
pub(crate) fn redacted_answer(
    recorder: &Recorder,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> Answer {
    answer::from_response(path, content_type, body, recorder.redactor())
}

/// The miss a cassette proxy in front answered with (its JSON error, in the OpenAI and
/// Anthropic envelope or in Ollama's), read back into the miss it explains; `None` for any
/// other answer.
fn relayed_miss(body: &[u8]) -> Option<Miss> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let detail = match value.get("cassette") {
        Some(detail) => detail,
        None => value.get("error")?,
    };
    let kind = detail.get("code").or_else(|| detail.get("type"))?;
    if kind.as_str()? != "cassette_miss" {
        return None;
    }
    let text = |value: &Value, name: &str| value.get(name)?.as_str().map(str::to_owned);
    let explanation = detail.get("explanation")?;
    let nearest = explanation.get("nearest").and_then(|nearest| {
        Some(Nearest {
            key: Key::parse(nearest.get("key")?.as_str()?)?,
            recorded_at: text(nearest, "recorded_at").unwrap_or_default(),
            differences: nearest
                .get("differences")?
                .as_array()?
                .iter()
                .filter_map(|d| d.as_str().map(str::to_owned))
                .collect(),
            hint: text(nearest, "hint"),
        })
    });
    Some(Miss {
        key: Key::parse(detail.get("key")?.as_str()?)?,
        profile: text(detail, "profile").unwrap_or_default(),
        target: text(detail, "target").unwrap_or_default(),
        method: text(detail, "method").unwrap_or_default(),
        path: text(detail, "path").unwrap_or_default(),
        model: text(detail, "model"),
        store: text(detail, "store").unwrap_or_default(),
        repeat: None,
        explanation: Explanation {
            nearest,
            summary: text(explanation, "summary")?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &str = "3e17a5eaa5502deb4e9d41d564fa0d4deeaba2c7c5d58c763f61fb5885af5653";
    const NEAR: &str = "cb11d22a34161eaec0fc568d64247ea17975ab4b0c5a4fced1f4d52e41444aea";

    fn detail() -> Value {
        json!({
            "type": "cassette_miss", "code": "cassette_miss", "message": "cassette miss: ...",
            "key": KEY, "profile": "openai.chat", "target": "judge", "method": "POST",
            "path": "/v1/chat/completions", "model": "judge-1", "store": "file:///c (read-only)",
            "explanation": {"summary": "The nearest recording differs.",
                            "nearest": {"key": NEAR, "recorded_at": "2026-12-01T15:19:17Z",
                                        "differences": ["body.seed: 1 -> 2"]}},
        })
    }

    #[test]
    fn a_proxy_s_miss_answer_is_read_back_into_its_miss() {
        let body = json!({"type": "error", "error": detail()}).to_string();
        let miss = relayed_miss(body.as_bytes()).expect("a miss");
        assert_eq!(miss.key.as_str(), KEY);
        assert_eq!(
            miss.request_line(),
            "POST /v1/chat/completions (target judge, model judge-1)"
        );
        let nearest = miss.explanation.nearest.expect("nearest");
        assert_eq!(nearest.key.as_str(), NEAR);
        assert_eq!(nearest.differences, ["body.seed: 1 -> 2"]);
        // Ollama's shape keeps the detail under `cassette`.
        let mut ollama = detail();
        ollama.as_object_mut().unwrap().remove("code");
        let body = json!({"error": "cassette miss: ...", "cassette": ollama}).to_string();
        assert_eq!(relayed_miss(body.as_bytes()).unwrap().key.as_str(), KEY);
    }

    #[test]
    fn other_errors_are_not_misses() {
        for body in [
            json!({"error": {"type": "invalid_request_error", "message": "bad", "key": KEY}}),
            json!({"error": {"code": "cassette_miss", "key": "not a key", "explanation": {"summary": "s"}}}),
            json!({"error": "overloaded"}),
        ] {
            assert!(
                relayed_miss(body.to_string().as_bytes()).is_none(),
                "{body}"
            );
        }
        assert!(relayed_miss(b"<html>502</html>").is_none());
    }
}
