//! Issue 35 item 6: a route's key an upstream spells out across the text of several stream
//! events (a few characters per delta) never reaches the client live in record mode, while the
//! stream still reads as the provider's stream; a stream without the key passes byte for byte.

mod support;

use bytes::Bytes;
use cassette_recorder::Request;
use cassette_wire::{Assembler, StreamFormat};
use serde_json::{json, Value};
use support::{keyed_recorder, FakeUpstream, Reply, ROUTE_KEY};

/// `text` cut in pieces of the sizes given (cycled), the way a model streams a key it repeats.
fn pieces<'a>(text: &'a str, sizes: &[usize]) -> Vec<&'a str> {
    let (mut out, mut at, mut i) = (Vec::new(), 0, 0);
    while at < text.len() {
        let end = (at + sizes[i % sizes.len()]).min(text.len());
        out.push(&text[at..end]);
        (at, i) = (end, i + 1);
    }
    out
}

/// One provider's stream format: its path and request, one text delta as bytes, the end of
/// the stream, and where the final response has its text.
struct Provider {
    path: &'static str,
    body: Value,
    format: StreamFormat,
    content_type: &'static str,
    delta: fn(&str) -> String,
    end: &'static str,
    text: fn(&Value) -> String,
}

fn providers() -> Vec<Provider> {
    vec![
        Provider {
            path: "/v1/chat/completions",
            body: json!({"model": "gpt-4o-mini", "stream": true,
                "messages": [{"role": "user", "content": "key?"}]}),
            format: StreamFormat::OpenaiChat,
            content_type: "text/event-stream",
            delta: |text| {
                let data = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1,
                    "model": "gpt-4o-mini", "choices": [{"index": 0,
                    "delta": {"content": text}, "finish_reason": null}]});
                format!("data: {data}\n\n")
            },
            end: "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\
                  \"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\
                  \"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
            text: |v| {
                v["choices"][0]["message"]["content"]
                    .as_str()
                    .unwrap_or("")
                    .into()
            },
        },
        Provider {
            path: "/v1/messages",
            body: json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": true,
                "messages": [{"role": "user", "content": "key?"}]}),
            format: StreamFormat::AnthropicMessages,
            content_type: "text/event-stream",
            delta: |text| {
                let data = json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": text}});
                format!("event: content_block_delta\ndata: {data}\n\n")
            },
            end:
                "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
                  event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":\
                  {\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n\
                  event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
            text: |v| v["content"][0]["text"].as_str().unwrap_or("").into(),
        },
        Provider {
            path: "/api/chat",
            body: json!({"model": "llama3.2", "messages": [{"role": "user", "content": "key?"}]}),
            format: StreamFormat::OllamaNdjson,
            content_type: "application/x-ndjson",
            delta: |text| {
                let line = json!({"model": "llama3.2", "created_at": "2025-01-01T00:00:00Z",
                    "message": {"role": "assistant", "content": text}, "done": false});
                format!("{line}\n")
            },
            end: "{\"model\":\"llama3.2\",\"created_at\":\"2025-01-01T00:00:00Z\",\"message\":\
                  {\"role\":\"assistant\",\"content\":\"\"},\"done\":true,\"done_reason\":\
                  \"stop\",\"eval_count\":9,\"prompt_eval_count\":3}\n",
            text: |v| v["message"]["content"].as_str().unwrap_or("").into(),
        },
    ]
}

impl Provider {
    /// The start of an Anthropic stream; the others start with their first delta.
    fn start(&self) -> String {
        match self.format {
            StreamFormat::AnthropicMessages => {
                "event: message_start\ndata: {\"type\":\"message_start\",\"message\":\
                 {\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\
                 \"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":\
                 {\"input_tokens\":3,\"output_tokens\":1}}}\n\n\
                 event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\
                 \"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
                    .to_owned()
            }
            _ => String::new(),
        }
    }

    fn stream(&self, texts: &[&str]) -> String {
        let deltas: String = texts.iter().map(|t| (self.delta)(t)).collect();
        format!("{}{deltas}{}", self.start(), self.end)
    }
}

/// What the client of the recording proxy gets for a stream of `texts`, cut by the network
/// into pieces of 5, 13 and 2 bytes.
async fn relayed(provider: &Provider, texts: &[&str]) -> (String, String) {
    let upstream = FakeUpstream::start().await;
    let sent = provider.stream(texts);
    upstream.reply(
        provider.path,
        Reply::Stream {
            content_type: provider.content_type.into(),
            body: Bytes::from(sent.clone()),
            pieces: vec![5, 13, 2],
        },
    );
    let store = cassette_store::open("memory://").unwrap();
    let rec = keyed_recorder(&upstream.url, &store);
    let mut request = Request::post_json(provider.path, &provider.body);
    request.headers.push((
        "authorization".into(),
        "Bearer sk-cassette-placeholder".into(),
    ));
    let outcome = rec.handle(request).await.unwrap();
    let bytes = outcome.response.into_bytes().await.unwrap();
    (sent, String::from_utf8(bytes.to_vec()).unwrap())
}

/// The JSON of every event (SSE `data`, NDJSON line) of a stream, `[DONE]` left out.
fn event_json(format: StreamFormat, stream: &str) -> Vec<Value> {
    let items: Vec<&str> = match format {
        StreamFormat::OllamaNdjson => stream.lines().collect(),
        _ => stream
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .collect(),
    };
    items
        .into_iter()
        .filter(|item| !item.is_empty() && *item != "[DONE]")
        .map(|item| serde_json::from_str(item).unwrap_or_else(|e| panic!("not JSON ({e}): {item}")))
        .collect()
}

#[tokio::test]
async fn a_route_key_spelled_across_events_never_reaches_the_client() {
    for provider in providers() {
        let name = provider.format.name();
        // Four characters first: a start of the key long enough to hold its event back.
        for (sizes, expected) in [
            (&[4, 3][..], "Your key is [REDACTED]. Keep it safe."),
            (&[3, 4][..], "Your key is sk-[REDACTED]. Keep it safe."),
        ] {
            let mut texts = vec!["Your key is "];
            texts.extend(pieces(ROUTE_KEY, sizes));
            texts.push(". Keep it safe.");
            let (sent, got) = relayed(&provider, &texts).await;
            assert!(
                !sent.contains(ROUTE_KEY),
                "{name}: spelled out, never whole"
            );
            // Every event still reads, and the stream assembles to the provider's answer.
            let events = event_json(provider.format, &got);
            let assembled: String = events
                .iter()
                .map(|e| {
                    let delta = match provider.format {
                        StreamFormat::OpenaiChat => &e["choices"][0]["delta"]["content"],
                        StreamFormat::AnthropicMessages => &e["delta"]["text"],
                        _ => &e["message"]["content"],
                    };
                    delta.as_str().unwrap_or("").to_owned()
                })
                .collect();
            assert_eq!(assembled, expected, "{name} {sizes:?}: {got}");
            let mut assembler = Assembler::new(provider.format);
            assembler.push(got.as_bytes());
            let answer = assembler.finish().unwrap();
            assert_eq!((provider.text)(&answer), expected, "{name}");
            // No run of pieces the client holds spells the key past its public `sk-`.
            for window in ROUTE_KEY.as_bytes().windows(6).skip(3) {
                let window = std::str::from_utf8(window).unwrap();
                assert!(
                    !assembled.contains(window),
                    "{name}: {window} in {assembled}"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_stream_without_the_key_passes_byte_for_byte() {
    for provider in providers() {
        // Ordinary text, a start of the key that goes no further, and a split `sk-` word.
        let texts = [
            "The max_tokens setting ",
            "limits tokens; a key like sk-ant-",
            "api03 is a prefix, ",
            "and sk",
            "-learn is a library.",
        ];
        let (sent, got) = relayed(&provider, &texts).await;
        assert_eq!(got, sent, "{}", provider.format.name());
    }
}
