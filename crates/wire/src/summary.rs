//! What a final response says, normalized across providers: for review metadata and for the
//! suite runner's assertions on text and tool calls.

use cassette_keying::Profile;
use serde::Serialize;
use serde_json::{Map, Value};

/// The normalized meaning of a final (non-streaming shape) response.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ResponseSummary {
    /// The model named in the response (it can differ from the requested alias; Gemini's
    /// `modelVersion`).
    pub model: Option<String>,
    /// Finish or stop reason (`stop`, `tool_calls`, `end_turn`, `tool_use`, `length`, Gemini's
    /// `STOP`, `MAX_TOKENS`, ...); for Responses, the status, or the reason when incomplete; for
    /// a Gemini prompt that was blocked, the block reason.
    pub finish_reason: Option<String>,
    /// The usage object as the provider reports it (for Ollama, its counts and durations).
    pub usage: Option<Value>,
    /// The answer's text (first choice for OpenAI chat and completions, first candidate for
    /// Gemini), concatenated; thinking is not part of it.
    pub text: String,
    /// Tool calls in order.
    pub tool_calls: Vec<ToolCall>,
}

/// One tool call, normalized.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    /// The call id (`call_...`, `toolu_...`, Gemini's optional `id`), when the provider gives
    /// one.
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON; a string holds arguments that were not valid JSON, verbatim.
    pub arguments: Value,
}

/// Summarizes a final response of any profile. Unknown shapes give an empty summary rather
/// than an error: this is metadata, never a reason to refuse a recording.
pub fn response_summary(profile: Profile, final_response: &Value) -> ResponseSummary {
    let mut summary = ResponseSummary {
        model: string(final_response.get("model")),
        ..ResponseSummary::default()
    };
    match profile {
        Profile::OpenaiChat | Profile::OpenaiCompletions => {
            openai_chat(final_response, &mut summary)
        }
        Profile::OpenaiResponses => openai_responses(final_response, &mut summary),
        Profile::AnthropicMessages => anthropic(final_response, &mut summary),
        Profile::OllamaChat | Profile::OllamaGenerate => ollama(final_response, &mut summary),
        Profile::GeminiGenerate => gemini(final_response, &mut summary),
        Profile::OpenaiEmbeddings | Profile::OllamaEmbed => {
            summary.usage = present(final_response.get("usage"));
        }
        _ => {}
    }
    summary
}

fn string(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).map(str::to_owned)
}

fn present(value: Option<&Value>) -> Option<Value> {
    value.filter(|v| !v.is_null()).cloned()
}

fn arguments(value: Option<&Value>) -> Value {
    match value {
        Some(Value::String(raw)) => {
            if raw.trim().is_empty() {
                Value::Object(Map::new())
            } else {
                serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone()))
            }
        }
        Some(other) => other.clone(),
        None => Value::Object(Map::new()),
    }
}

/// Text that may be a string or a list of typed parts.
fn text_of(value: Option<&Value>, out: &mut String) {
    match value {
        Some(Value::String(text)) => out.push_str(text),
        Some(Value::Array(parts)) => {
            for part in parts {
                if let Some(text) = part.get("text").and_then(Value::as_str) {
                    out.push_str(text);
                }
            }
        }
        _ => {}
    }
}

fn openai_chat(response: &Value, summary: &mut ResponseSummary) {
    summary.usage = present(response.get("usage"));
    let Some(choice) = response
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
    else {
        return;
    };
    summary.finish_reason = string(choice.get("finish_reason"));
    text_of(choice.get("text"), &mut summary.text);
    let Some(message) = choice.get("message") else {
        return;
    };
    text_of(message.get("content"), &mut summary.text);
    function_calls(message, summary);
}

fn openai_responses(response: &Value, summary: &mut ResponseSummary) {
    summary.usage = present(response.get("usage"));
    let status = string(response.get("status"));
    let reason = string(response.pointer("/incomplete_details/reason"));
    summary.finish_reason = reason.or(status);
    for item in response
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if part.get("type").and_then(Value::as_str) == Some("output_text") {
                        text_of(part.get("text"), &mut summary.text);
                    }
                }
            }
            Some("function_call") => summary.tool_calls.push(ToolCall {
                id: string(item.get("call_id")).or_else(|| string(item.get("id"))),
                name: string(item.get("name")).unwrap_or_default(),
                arguments: arguments(item.get("arguments")),
            }),
            _ => {}
        }
    }
}

fn anthropic(response: &Value, summary: &mut ResponseSummary) {
    summary.usage = present(response.get("usage"));
    summary.finish_reason = string(response.get("stop_reason"));
    for block in response
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text_of(block.get("text"), &mut summary.text),
            Some("tool_use") => summary.tool_calls.push(ToolCall {
                id: string(block.get("id")),
                name: string(block.get("name")).unwrap_or_default(),
                arguments: arguments(block.get("input")),
            }),
            _ => {}
        }
    }
}

const OLLAMA_USAGE: &[&str] = &[
    "prompt_eval_count",
    "eval_count",
    "total_duration",
    "load_duration",
    "prompt_eval_duration",
    "eval_duration",
];

fn ollama(response: &Value, summary: &mut ResponseSummary) {
    summary.finish_reason = string(response.get("done_reason"));
    let usage: Map<String, Value> = OLLAMA_USAGE
        .iter()
        .filter_map(|key| present(response.get(*key)).map(|v| ((*key).to_owned(), v)))
        .collect();
    if !usage.is_empty() {
        summary.usage = Some(Value::Object(usage));
    }
    text_of(response.get("response"), &mut summary.text);
    let Some(message) = response.get("message") else {
        return;
    };
    text_of(message.get("content"), &mut summary.text);
    function_calls(message, summary);
}

fn gemini(response: &Value, summary: &mut ResponseSummary) {
    summary.model = string(response.get("modelVersion"));
    summary.usage = present(response.get("usageMetadata"));
    summary.finish_reason = string(response.pointer("/promptFeedback/blockReason"));
    let Some(candidate) = response
        .get("candidates")
        .and_then(Value::as_array)
        .and_then(|candidates| candidates.first())
    else {
        return;
    };
    summary.finish_reason = string(candidate.get("finishReason")).or(summary.finish_reason.take());
    for part in candidate
        .pointer("/content/parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
        if let (Some(text), false) = (part.get("text").and_then(Value::as_str), thought) {
            summary.text.push_str(text);
        }
        if let Some(call) = part.get("functionCall") {
            summary.tool_calls.push(ToolCall {
                id: string(call.get("id")),
                name: string(call.get("name")).unwrap_or_default(),
                arguments: arguments(call.get("args")),
            });
        }
    }
}

/// Tool calls in the `{"function": {"name", "arguments"}}` shape that OpenAI chat and Ollama
/// messages share.
fn function_calls(message: &Value, summary: &mut ResponseSummary) {
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let function = call.get("function");
        summary.tool_calls.push(ToolCall {
            id: string(call.get("id")),
            name: string(function.and_then(|f| f.get("name"))).unwrap_or_default(),
            arguments: arguments(function.and_then(|f| f.get("arguments"))),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_chat_tool_calls_are_parsed() {
        let response = json!({
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "broken", "arguments": "{oops"}}
                ]}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
        });
        let s = response_summary(Profile::OpenaiChat, &response);
        assert_eq!(s.model.as_deref(), Some("gpt-4o-mini-2024-07-18"));
        assert_eq!(s.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(s.usage.unwrap()["total_tokens"], 12);
        assert_eq!(s.text, "");
        assert_eq!(
            s.tool_calls,
            [
                ToolCall {
                    id: Some("call_1".into()),
                    name: "get_weather".into(),
                    arguments: json!({"city": "Paris"})
                },
                ToolCall {
                    id: Some("call_2".into()),
                    name: "broken".into(),
                    arguments: json!("{oops")
                },
            ]
        );
    }

    #[test]
    fn responses_text_function_calls_and_incomplete_reason() {
        let response = json!({
            "model": "gpt-4.1", "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [
                {"type": "reasoning", "summary": []},
                {"type": "message", "content": [{"type": "output_text", "text": "Hel"}, {"type": "output_text", "text": "lo"}]},
                {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "f", "arguments": "{\"a\":1}"}
            ]
        });
        let s = response_summary(Profile::OpenaiResponses, &response);
        assert_eq!(s.finish_reason.as_deref(), Some("max_output_tokens"));
        assert_eq!(s.text, "Hello");
        assert_eq!(s.tool_calls[0].id.as_deref(), Some("call_9"));
        assert_eq!(s.tool_calls[0].arguments, json!({"a": 1}));
    }

    #[test]
    fn anthropic_text_and_tool_use() {
        let response = json!({
            "model": "claude-sonnet-4-5", "stop_reason": "tool_use",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "x"},
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
            ],
            "usage": {"input_tokens": 3, "output_tokens": 4}
        });
        let s = response_summary(Profile::AnthropicMessages, &response);
        assert_eq!(s.finish_reason.as_deref(), Some("tool_use"));
        assert_eq!(s.text, "Let me check.");
        assert_eq!(s.tool_calls[0].name, "get_weather");
        assert_eq!(s.tool_calls[0].arguments, json!({"city": "Paris"}));
    }

    #[test]
    fn ollama_chat_and_generate() {
        let chat = json!({
            "model": "llama3.2", "done": true, "done_reason": "stop",
            "message": {"role": "assistant", "content": "Hi", "tool_calls": [
                {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
            ]},
            "prompt_eval_count": 10, "eval_count": 3
        });
        let s = response_summary(Profile::OllamaChat, &chat);
        assert_eq!(s.text, "Hi");
        assert_eq!(s.finish_reason.as_deref(), Some("stop"));
        assert_eq!(
            s.usage,
            Some(json!({"prompt_eval_count": 10, "eval_count": 3}))
        );
        assert_eq!(s.tool_calls[0].id, None);
        assert_eq!(s.tool_calls[0].arguments, json!({"city": "Paris"}));

        let generate = json!({"model": "llama3.2", "response": "Blue.", "done": true});
        let s = response_summary(Profile::OllamaGenerate, &generate);
        assert_eq!(s.text, "Blue.");
        assert_eq!(s.usage, None);
    }

    #[test]
    fn gemini_text_function_calls_usage_and_model_version() {
        let response = json!({
            "candidates": [{
                "content": {"role": "model", "parts": [
                    {"text": "Checking.", "thought": true},
                    {"text": "Let me look "},
                    {"text": "that up."},
                    {"functionCall": {"id": "fc-1", "name": "get_weather", "args": {"city": "Paris"}}},
                    {"functionCall": {"name": "get_time"}}
                ]},
                "finishReason": "STOP", "index": 0
            }],
            "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 5, "totalTokenCount": 14},
            "modelVersion": "gemini-2.5-flash-001"
        });
        let s = response_summary(Profile::GeminiGenerate, &response);
        assert_eq!(s.model.as_deref(), Some("gemini-2.5-flash-001"));
        assert_eq!(s.finish_reason.as_deref(), Some("STOP"));
        assert_eq!(s.usage.unwrap()["totalTokenCount"], 14);
        assert_eq!(s.text, "Let me look that up.");
        assert_eq!(s.tool_calls[0].id.as_deref(), Some("fc-1"));
        assert_eq!(s.tool_calls[0].arguments, json!({"city": "Paris"}));
        assert_eq!(s.tool_calls[1].id, None);
        assert_eq!(s.tool_calls[1].arguments, json!({}));

        let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"}, "modelVersion": "m"});
        let s = response_summary(Profile::GeminiGenerate, &blocked);
        assert_eq!(s.finish_reason.as_deref(), Some("SAFETY"));
        assert!(s.tool_calls.is_empty());
    }

    #[test]
    fn unknown_shapes_give_empty_summaries() {
        let s = response_summary(Profile::OpenaiChat, &json!([1, 2]));
        assert_eq!(s, ResponseSummary::default());
        let s = response_summary(Profile::Http, &json!({"model": "m", "events": []}));
        assert_eq!(s.model.as_deref(), Some("m"));
        assert!(s.tool_calls.is_empty());
    }
}
