//! The providers almanac knows without configuration: their protocol,
//! address and the variable their key is read from.

use super::Api;

/// Built-in endpoints: (provider, api, base URL, key variable, base URL
/// variable, whether a key is required).
pub(crate) const KNOWN: &[(&str, Api, &str, Option<&str>, Option<&str>, bool)] = &[
    (
        "openai",
        Api::OpenAiCompletions,
        "https://api.openai.com/v1",
        Some("OPENAI_API_KEY"),
        Some("OPENAI_BASE_URL"),
        true,
    ),
    (
        "anthropic",
        Api::AnthropicMessages,
        "https://api.anthropic.com",
        Some("ANTHROPIC_API_KEY"),
        Some("ANTHROPIC_BASE_URL"),
        true,
    ),
    (
        "openrouter",
        Api::OpenAiCompletions,
        "https://openrouter.ai/api/v1",
        Some("OPENROUTER_API_KEY"),
        None,
        true,
    ),
    (
        "ollama",
        Api::OpenAiCompletions,
        "http://127.0.0.1:11434/v1",
        None,
        Some("OLLAMA_BASE_URL"),
        false,
    ),
    (
        "lmstudio",
        Api::OpenAiCompletions,
        "http://127.0.0.1:1234/v1",
        None,
        None,
        false,
    ),
    (
        "vllm",
        Api::OpenAiCompletions,
        "http://127.0.0.1:8000/v1",
        None,
        None,
        false,
    ),
    (
        "llamacpp",
        Api::OpenAiCompletions,
        "http://127.0.0.1:8080/v1",
        None,
        None,
        false,
    ),
];

/// The variables model providers' keys are read from, which no child gets
/// even when a skill names them (a skill is given a key through
/// `skills.entries.<key>.apiKey` instead).
pub(crate) fn provider_key_vars() -> impl Iterator<Item = &'static str> {
    KNOWN.iter().filter_map(|k| k.3)
}
