//! Which API a request speaks, decided from its path alone (key contract step 1).

use std::fmt;

/// The API family of a request. Profiles decide which canonicalization rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Profile {
    /// OpenAI-compatible `/chat/completions`.
    OpenaiChat,
    /// OpenAI `/responses`.
    OpenaiResponses,
    /// OpenAI legacy `/completions`.
    OpenaiCompletions,
    /// OpenAI `/embeddings`.
    OpenaiEmbeddings,
    /// Anthropic `/messages`.
    AnthropicMessages,
    /// Ollama `/api/chat`.
    OllamaChat,
    /// Ollama `/api/generate`.
    OllamaGenerate,
    /// Ollama `/api/embed`.
    OllamaEmbed,
    /// Gemini `models/*:generateContent` and `:streamGenerateContent`.
    GeminiGenerate,
    /// Anything else: the body is only canonicalized, never interpreted.
    Http,
    /// A JSON-RPC request to an MCP tool server (see [`crate::mcp`]). Never chosen from a
    /// path: the MCP engine keys its messages with [`crate::McpRequest`].
    Mcp,
    /// A file fetched from a host no route serves (see [`crate::download`]), keyed by its
    /// method and URL. Never chosen from a path: downloads are keyed with
    /// [`crate::DownloadRequest`].
    Download,
}

/// Path suffixes in match order: `/chat/completions` must win over `/completions`.
const SUFFIXES: &[(&str, Profile)] = &[
    ("/chat/completions", Profile::OpenaiChat),
    ("/responses", Profile::OpenaiResponses),
    ("/completions", Profile::OpenaiCompletions),
    ("/embeddings", Profile::OpenaiEmbeddings),
    ("/messages", Profile::AnthropicMessages),
    ("/api/chat", Profile::OllamaChat),
    ("/api/generate", Profile::OllamaGenerate),
    ("/api/embed", Profile::OllamaEmbed),
    (GENERATE_CONTENT, Profile::GeminiGenerate),
    (STREAM_GENERATE_CONTENT, Profile::GeminiGenerate),
];

/// Gemini's method suffixes. The streaming one is keyed as the other (see [`keyed_path`]).
const GENERATE_CONTENT: &str = ":generateContent";
const STREAM_GENERATE_CONTENT: &str = ":streamGenerateContent";

impl Profile {
    /// Picks the profile of a path (normalized first).
    pub fn from_path(path: &str) -> Profile {
        let path = normalize_path(path);
        SUFFIXES
            .iter()
            .find(|(suffix, _)| path.ends_with(suffix))
            .map(|(_, profile)| *profile)
            .unwrap_or(Profile::Http)
    }

    /// The profile's name as it appears in key material.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::OpenaiChat => "openai.chat",
            Profile::OpenaiResponses => "openai.responses",
            Profile::OpenaiCompletions => "openai.completions",
            Profile::OpenaiEmbeddings => "openai.embeddings",
            Profile::AnthropicMessages => "anthropic.messages",
            Profile::OllamaChat => "ollama.chat",
            Profile::OllamaGenerate => "ollama.generate",
            Profile::OllamaEmbed => "ollama.embed",
            Profile::GeminiGenerate => "gemini.generate",
            Profile::Http => "http",
            Profile::Mcp => "mcp",
            Profile::Download => "download",
        }
    }

    /// Whether this is one of the LLM profiles (everything but `http`, `mcp` and `download`).
    pub fn is_llm(self) -> bool {
        !matches!(self, Profile::Http | Profile::Mcp | Profile::Download)
    }

    /// Whether the API streams its answer when the request does not say (Ollama's chat and
    /// generate endpoints), rather than only on `"stream": true`.
    pub fn streams_by_default(self) -> bool {
        matches!(self, Profile::OllamaChat | Profile::OllamaGenerate)
    }

    /// Whether the path itself asks for a streamed answer rather than the body: Gemini's
    /// `:streamGenerateContent` (the body has no `stream` member there).
    pub fn path_streams(path: &str) -> bool {
        normalize_path(path).ends_with(STREAM_GENERATE_CONTENT)
    }

    /// Whether this is an Ollama profile (`keep_alive` is volatile there).
    pub fn is_ollama(self) -> bool {
        matches!(
            self,
            Profile::OllamaChat | Profile::OllamaGenerate | Profile::OllamaEmbed
        )
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The path as it enters the key material (key contract step 1), from a normalized path:
/// itself, except that Gemini's `:streamGenerateContent` is written `:generateContent`, so a
/// streamed and a plain request for the same content share a key, as `stream` does elsewhere.
pub(crate) fn keyed_path(profile: Profile, normalized: String) -> String {
    match normalized.strip_suffix(STREAM_GENERATE_CONTENT) {
        Some(rest) if profile == Profile::GeminiGenerate => format!("{rest}{GENERATE_CONTENT}"),
        _ => normalized,
    }
}

/// Collapses duplicate slashes and drops a trailing slash (`/` itself stays `/`; an empty path
/// becomes `/`).
pub fn normalize_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 1);
    if !path.starts_with('/') {
        out.push('/');
    }
    for c in path.chars() {
        if c == '/' && out.ends_with('/') {
            continue;
        }
        out.push(c);
    }
    if out.len() > 1 && out.ends_with('/') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_from_paths() {
        let table = [
            ("/v1/chat/completions", "openai.chat"),
            ("//v1//chat/completions/", "openai.chat"),
            ("/v1/responses", "openai.responses"),
            ("/v1/completions", "openai.completions"),
            ("/v1/embeddings", "openai.embeddings"),
            ("/v1/messages", "anthropic.messages"),
            ("/anthropic/v1/messages", "anthropic.messages"),
            ("/api/chat", "ollama.chat"),
            ("/api/generate", "ollama.generate"),
            ("/api/embed", "ollama.embed"),
            ("/api/embeddings", "openai.embeddings"),
            (
                "/v1beta/models/gemini-2.5-flash:generateContent",
                "gemini.generate",
            ),
            (
                "/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent",
                "gemini.generate",
            ),
            (
                "/v1/projects/p/locations/l/publishers/google/models/m:generateContent",
                "gemini.generate",
            ),
            ("/v1beta/models/gemini-2.5-flash:countTokens", "http"),
            ("/v1beta/models/gemini-2.5-flash:embedContent", "http"),
            ("/v1beta/models/m:generatecontent", "http"),
            ("/v1/models", "http"),
            ("/", "http"),
        ];
        for (path, expected) in table {
            assert_eq!(Profile::from_path(path).as_str(), expected, "{path}");
        }
    }

    #[test]
    fn the_streaming_method_is_keyed_as_the_plain_one() {
        let keyed = |path: &str| keyed_path(Profile::from_path(path), normalize_path(path));
        assert_eq!(
            keyed("/v1beta/models/m:streamGenerateContent"),
            "/v1beta/models/m:generateContent"
        );
        assert_eq!(
            keyed("/v1beta/models/m:generateContent/"),
            "/v1beta/models/m:generateContent"
        );
        assert_eq!(keyed("/v1/chat/completions"), "/v1/chat/completions");
        assert!(Profile::path_streams(
            "/v1beta/models/m:streamGenerateContent/"
        ));
        assert!(!Profile::path_streams("/v1beta/models/m:generateContent"));
    }

    #[test]
    fn paths_normalize() {
        assert_eq!(normalize_path("//v1///chat/"), "/v1/chat");
        assert_eq!(normalize_path("/"), "/");
        assert_eq!(normalize_path(""), "/");
        assert_eq!(normalize_path("v1/x"), "/v1/x");
    }
}
