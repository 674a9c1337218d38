//! JSON-RPC 2.0 messages as the MCP engine sees them: what kind a line is, and the answers the
//! engine writes itself (replayed responses with the client's id, errors).

use serde_json::{json, Map, Value};

/// The JSON-RPC error code of a replay miss. Implementation-defined server errors are
/// -32000 to -32099; the MCP SDKs use -32000 (connection closed) and -32001 (request timeout),
/// so a miss has a code of its own that clients can tell apart.
pub const MISS_CODE: i64 = -32090;

/// JSON-RPC "parse error": the line is not JSON.
pub const PARSE_ERROR: i64 = -32700;

/// JSON-RPC "invalid request": JSON, but not a JSON-RPC message cassette can handle.
pub const INVALID_REQUEST: i64 = -32600;

/// JSON-RPC "internal error": the engine or the server failed (the server died, a store
/// failed, a message was over the size limit).
pub const INTERNAL_ERROR: i64 = -32603;

/// One message from a client or a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request: it has an `id` and a `method`, and expects a response.
    Request {
        /// The sender's id, any JSON value (a string or a number in practice).
        id: Value,
        /// The method, such as `tools/call`.
        method: String,
        /// The params, when present.
        params: Option<Value>,
    },
    /// A notification: a `method` and no `id`; nothing answers it.
    Notification {
        /// The method, such as `notifications/progress`.
        method: String,
        /// The params, when present.
        params: Option<Value>,
    },
    /// A response: an `id` with a `result` or an `error`.
    Response {
        /// The id of the request it answers.
        id: Value,
        /// Whether it carries `error` rather than `result`.
        is_error: bool,
    },
}

impl Message {
    /// Classifies a parsed JSON value, or says why it is not one JSON-RPC message (a batch
    /// array, a value that is not an object, a member of the wrong type).
    pub fn classify(value: &Value) -> Result<Message, String> {
        let Value::Object(map) = value else {
            return Err(match value {
                Value::Array(_) => "JSON-RPC batches are not supported by MCP".to_owned(),
                _ => "a JSON-RPC message must be a JSON object".to_owned(),
            });
        };
        let id = map.get("id").cloned();
        let params = map.get("params").cloned();
        match (map.get("method"), id) {
            (Some(Value::String(method)), Some(id)) => Ok(Message::Request {
                id,
                method: method.clone(),
                params,
            }),
            (Some(Value::String(method)), None) => Ok(Message::Notification {
                method: method.clone(),
                params,
            }),
            (Some(_), _) => Err("the JSON-RPC `method` must be a string".to_owned()),
            (None, Some(id)) if map.contains_key("result") || map.contains_key("error") => {
                Ok(Message::Response {
                    id,
                    is_error: map.contains_key("error"),
                })
            }
            (None, _) => Err("neither a request, a notification nor a response".to_owned()),
        }
    }
}

/// What a request is about, for messages: the tool of `tools/call`, the prompt of
/// `prompts/get`, the URI of `resources/read`, ...
pub fn subject(method: &str, params: Option<&Value>) -> Option<String> {
    let params = params?;
    let member = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        _ => return None,
    };
    params.get(member)?.as_str().map(str::to_owned)
}

/// The progress token a request asked for, when it did.
pub fn progress_token(params: Option<&Value>) -> Option<&Value> {
    params?.get("_meta")?.get("progressToken")
}

/// A JSON-RPC response message as one line (no newline).
pub fn response_line(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// A JSON-RPC error message as one line (no newline).
pub fn error_line(id: &Value, code: i64, message: &str, data: Option<Value>) -> String {
    let mut error = Map::new();
    error.insert("code".into(), Value::from(code));
    error.insert("message".into(), Value::from(message));
    if let Some(data) = data {
        error.insert("data".into(), data);
    }
    json!({"jsonrpc": "2.0", "id": id, "error": Value::Object(error)}).to_string()
}

/// A recorded response message with the client's id in place of the recorded one.
pub fn with_id(mut response: Value, id: &Value) -> Value {
    if let Value::Object(map) = &mut response {
        map.insert("id".into(), id.clone());
        map.entry("jsonrpc").or_insert_with(|| Value::from("2.0"));
    }
    response
}

/// The ids of a map of calls in flight are JSON values; this is their canonical text, so
/// `1` and `1.0` or two spellings of one string are one id.
pub fn id_text(id: &Value) -> String {
    cassette_keying::to_canonical_string(id)
}

/// Finds the top-level `id` of a message too long to parse, and whether it is a response, as
/// its bytes go by: a response relayed without being read whole still answers its call, which
/// must then not be answered again. The `id` may come after a long `result`.
#[derive(Debug, Default)]
pub(crate) struct IdScan {
    depth: usize,
    in_string: bool,
    escaped: bool,
    state: ScanState,
    /// The top-level member name being read (only its first bytes: `id` and `method` matter).
    name: Vec<u8>,
    /// The bytes of the `id` value while it is being read.
    capture: Option<Vec<u8>>,
    id: Option<Vec<u8>>,
    has_method: bool,
}

#[derive(Debug, Default, PartialEq, Eq)]
enum ScanState {
    /// Before a member name of the top-level object.
    #[default]
    Name,
    /// Inside a member name.
    InName,
    /// After a member name, before its `:`.
    Colon,
    /// In a member value.
    Value,
}

/// The longest `id` kept: a JSON-RPC id is a short string or a number.
const MAX_ID: usize = 1024;

impl IdScan {
    /// Reads the next bytes of the message.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        let top = self.depth == 1;
        if self.in_string {
            if let Some(capture) = &mut self.capture {
                capture.push(b);
            }
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if top && self.state == ScanState::InName {
                    self.state = ScanState::Colon;
                }
                return;
            }
            if top && self.state == ScanState::InName && self.name.len() < 8 {
                self.name.push(b);
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if top && self.state == ScanState::Name {
                    self.state = ScanState::InName;
                    self.name.clear();
                }
            }
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' if top => {
                self.end_value();
                self.depth = 0;
                return;
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b':' if top && self.state == ScanState::Colon => {
                self.state = ScanState::Value;
                match &self.name[..] {
                    b"id" => self.capture = Some(Vec::new()),
                    b"method" => self.has_method = true,
                    _ => {}
                }
                return;
            }
            b',' if top => {
                self.end_value();
                self.state = ScanState::Name;
                return;
            }
            _ => {}
        }
        if let Some(capture) = &mut self.capture {
            capture.push(b);
            if capture.len() > MAX_ID {
                self.capture = None;
            }
        }
    }

    fn end_value(&mut self) {
        if let Some(capture) = self.capture.take() {
            self.id = Some(capture);
        }
    }

    /// The id of the message when it is a response (it has an id and no method).
    pub(crate) fn response_id(&self) -> Option<Value> {
        if self.has_method {
            return None;
        }
        serde_json::from_slice(self.id.as_deref()?).ok()
    }
}

#[cfg(test)]
mod tests {
    /// Issue 25, item 10: the id of a response too long to parse is found wherever it is.
    #[test]
    fn the_id_of_a_long_message_is_found_as_it_goes_by() {
        let scan = |pieces: &[&str]| {
            let mut scan = IdScan::default();
            for piece in pieces {
                scan.push(piece.as_bytes());
            }
            scan.response_id()
        };
        let text = "x\\\"id\\\":9,}{[".repeat(50);
        let first = format!(r#"{{"id":7,"jsonrpc":"2.0","result":{{"text":"{text}"}}}}"#);
        let last = format!(r#"{{ "result" : {{"id": 3, "text": "{text}"}}, "id" : "call-7" }}"#);
        let error = r#"{"jsonrpc":"2.0","error":{"code":1,"message":"m"},"id":{"a":[1]}}"#;
        for cut in [1, 5, 17, 40] {
            let (a, b) = first.split_at(cut);
            assert_eq!(scan(&[a, b]), Some(json!(7)));
            let (a, b) = last.split_at(cut);
            assert_eq!(scan(&[a, b]), Some(json!("call-7")));
        }
        assert_eq!(scan(&[error]), Some(json!({"a": [1]})));
        // A request from the server is no answer; a message without an id answers nothing.
        let request = r#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}}"#;
        assert_eq!(scan(&[request]), None);
        assert_eq!(scan(&[r#"{"jsonrpc":"2.0","result":{"id":1}}"#]), None);
        // Cut off before its end: the id read so far is not guessed at.
        assert_eq!(scan(&[r#"{"result":1,"id":12"#]), None);
    }

    use super::*;

    #[test]
    fn messages_are_classified() {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        assert!(matches!(
            Message::classify(&request),
            Ok(Message::Request { method, params: None, .. }) if method == "tools/list"
        ));
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert!(matches!(
            Message::classify(&note),
            Ok(Message::Notification { .. })
        ));
        let response = json!({"jsonrpc": "2.0", "id": "a", "error": {"code": 1}});
        assert_eq!(
            Message::classify(&response),
            Ok(Message::Response {
                id: json!("a"),
                is_error: true
            })
        );
        assert!(Message::classify(&json!([request]))
            .unwrap_err()
            .contains("batches"));
        assert!(Message::classify(&json!({"id": 1})).is_err());
        assert!(Message::classify(&json!({"id": 1, "method": 5})).is_err());
        assert!(Message::classify(&json!("x")).is_err());
    }

    #[test]
    fn subjects_name_the_tool_prompt_or_resource() {
        let call = json!({"name": "next_number", "arguments": {}});
        assert_eq!(
            subject("tools/call", Some(&call)).as_deref(),
            Some("next_number")
        );
        let read = json!({"uri": "file:///a"});
        assert_eq!(
            subject("resources/read", Some(&read)).as_deref(),
            Some("file:///a")
        );
        assert_eq!(subject("tools/list", None), None);
    }

    #[test]
    fn ids_are_rewritten() {
        let recorded = json!({"jsonrpc": "2.0", "id": 7, "result": {"x": 1}});
        assert_eq!(
            with_id(recorded, &json!("client-3")),
            json!({"jsonrpc": "2.0", "id": "client-3", "result": {"x": 1}})
        );
        assert_eq!(id_text(&json!(1.0)), id_text(&json!(1)));
    }
}
