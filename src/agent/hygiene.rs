//! Transcript hygiene: what a stored conversation becomes before a
//! provider sees it. In memory only; the transcript on disk is never
//! rewritten.
//!
//! Stored conversations can be anything a crash, a hand edit or another
//! tool left: tool calls without results, results without calls, ids a
//! provider refuses, two assistant messages in a row, empty messages,
//! thinking without a signature, huge images. [`clean`] repairs them per
//! provider so the request is accepted:
//!
//! 1. tool-call ids are made valid for the provider (characters and
//!    length) and unique, calls and results renamed together;
//! 2. every call gets exactly one result, right after the assistant
//!    message that made it: a missing one gets a synthetic error result,
//!    a result with no call (or a second one) is dropped;
//! 3. thinking blocks are dropped where the provider would reject them
//!    (no signature for Anthropic; never sent to OpenAI-compatible
//!    servers), images over the provider's limit become a note, empty
//!    text blocks and empty messages go;
//! 4. turn order: the conversation starts with a user message, and for
//!    Anthropic consecutive messages of one role are merged.
//!
//! The tests state each provider's documented rules and check, by
//! property, that any conversation, cleaned, passes them.

use std::collections::{HashMap, HashSet};

use crate::provider::{Api, Block, Message};

/// Largest base64 image payload sent (Anthropic: 5 MB per image; OpenAI
/// accepts more, the smaller limit serves both).
pub(crate) const MAX_IMAGE_BASE64: usize = 5 * 1024 * 1024;

/// Text of the synthetic result for a call whose result was never stored.
pub(crate) const MISSING_RESULT: &str =
    "No result was recorded for this tool call (the run stopped before it finished).";

/// Cleans `messages` for `api`; the notes say what was repaired.
pub(crate) fn clean(messages: &[Message], api: Api) -> (Vec<Message>, Vec<String>) {
    let mut notes = Vec::new();
    let renamed = rename_ids(messages, api);
    let paired = pair_results(renamed, &mut notes);
    let blocks = clean_blocks(paired, api, &mut notes);
    let ordered = order_turns(blocks, api, &mut notes);
    (ordered, notes)
}

fn rename_ids(messages: &[Message], api: Api) -> Vec<Message> {
    let max = match api {
        Api::AnthropicMessages => 64,
        Api::OpenAiCompletions => 40,
    };
    let mut map: HashMap<String, String> = HashMap::new();
    let mut used: HashSet<String> = HashSet::new();
    let fresh =
        |old: &str, map: &mut HashMap<String, String>, used: &mut HashSet<String>| -> String {
            if let Some(new) = map.get(old) {
                return new.clone();
            }
            let mut base: String = old
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .take(max - 4)
                .collect();
            if base.is_empty() {
                base = "call".to_string();
            }
            let mut candidate = base.clone();
            let mut n = 2;
            while used.contains(&candidate) {
                candidate = format!("{base}_{n}");
                n += 1;
            }
            used.insert(candidate.clone());
            map.insert(old.to_string(), candidate.clone());
            candidate
        };
    // Each call gets its own id, even when a stored conversation reused
    // one; results follow the latest call of that id.
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        match m {
            Message::Assistant(blocks) => {
                let blocks = blocks
                    .iter()
                    .map(|b| match b {
                        Block::ToolCall {
                            id,
                            name,
                            arguments,
                        } => {
                            map.remove(id);
                            Block::ToolCall {
                                id: fresh(id, &mut map, &mut used),
                                name: name.clone(),
                                arguments: arguments.clone(),
                            }
                        }
                        other => other.clone(),
                    })
                    .collect();
                out.push(Message::Assistant(blocks));
            }
            Message::ToolResult {
                tool_call_id,
                tool_name,
                content,
                is_error,
            } => out.push(Message::ToolResult {
                // A result whose call was never seen keeps a valid id;
                // pairing drops it.
                tool_call_id: map
                    .get(tool_call_id)
                    .cloned()
                    .unwrap_or_else(|| format!("orphan-{}", out.len())),
                tool_name: tool_name.clone(),
                content: content.clone(),
                is_error: *is_error,
            }),
            other => out.push(other.clone()),
        }
    }
    out
}

fn pair_results(messages: Vec<Message>, notes: &mut Vec<String>) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            Message::Assistant(blocks) => {
                let calls: Vec<(String, String)> = blocks
                    .iter()
                    .filter_map(|b| match b {
                        Block::ToolCall { id, name, .. } => Some((id.clone(), name.clone())),
                        _ => None,
                    })
                    .collect();
                out.push(messages[i].clone());
                i += 1;
                // The results (and any user messages) up to the next
                // assistant message.
                let mut results: HashMap<String, Message> = HashMap::new();
                let mut others = Vec::new();
                while i < messages.len() && !matches!(messages[i], Message::Assistant(_)) {
                    match &messages[i] {
                        Message::ToolResult { tool_call_id, .. } => {
                            if calls.iter().any(|(id, _)| id == tool_call_id)
                                && !results.contains_key(tool_call_id)
                            {
                                results.insert(tool_call_id.clone(), messages[i].clone());
                            } else {
                                notes.push(format!(
                                    "dropped a tool result without a matching call ({tool_call_id})"
                                ));
                            }
                        }
                        other => others.push(other.clone()),
                    }
                    i += 1;
                }
                for (id, name) in &calls {
                    match results.remove(id) {
                        Some(result) => out.push(result),
                        None => {
                            notes.push(format!("added a result for call {id}, which had none"));
                            out.push(Message::ToolResult {
                                tool_call_id: id.clone(),
                                tool_name: name.clone(),
                                content: vec![Block::text(MISSING_RESULT)],
                                is_error: true,
                            });
                        }
                    }
                }
                out.extend(others);
            }
            Message::ToolResult { tool_call_id, .. } => {
                notes.push(format!(
                    "dropped a tool result without a matching call ({tool_call_id})"
                ));
                i += 1;
            }
            Message::User(_) => {
                out.push(messages[i].clone());
                i += 1;
            }
        }
    }
    out
}

fn clean_blocks(messages: Vec<Message>, api: Api, notes: &mut Vec<String>) -> Vec<Message> {
    let keep_thinking = |b: &Block| match b {
        Block::Thinking { signature, .. } => {
            api == Api::AnthropicMessages && signature.as_deref().is_some_and(|s| !s.is_empty())
        }
        _ => true,
    };
    let fix_image = |b: Block, notes: &mut Vec<String>| match b {
        Block::Image { data, .. } if data.len() > MAX_IMAGE_BASE64 => {
            notes.push(format!("left out an image of {} KiB", data.len() / 1024));
            Block::text("[image left out: larger than the provider accepts]")
        }
        other => other,
    };
    let non_empty_text = |b: &Block| !matches!(b, Block::Text { text } if text.trim().is_empty());
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        match m {
            Message::User(blocks) => {
                let blocks: Vec<Block> = blocks
                    .into_iter()
                    .filter(|b| matches!(b, Block::Text { .. } | Block::Image { .. }))
                    .map(|b| fix_image(b, notes))
                    .filter(non_empty_text)
                    .collect();
                if !blocks.is_empty() {
                    out.push(Message::User(blocks));
                }
            }
            Message::Assistant(blocks) => {
                let before = blocks.len();
                let blocks: Vec<Block> = blocks
                    .into_iter()
                    .filter(keep_thinking)
                    .filter(|b| !matches!(b, Block::Image { .. }))
                    .filter(non_empty_text)
                    .collect();
                if blocks.len() < before {
                    notes.push(format!(
                        "left out {} block(s) the provider would refuse",
                        before - blocks.len()
                    ));
                }
                if !blocks.is_empty() {
                    out.push(Message::Assistant(blocks));
                }
            }
            Message::ToolResult {
                tool_call_id,
                tool_name,
                content,
                is_error,
            } => {
                let mut content: Vec<Block> = content
                    .into_iter()
                    .filter(|b| matches!(b, Block::Text { .. } | Block::Image { .. }))
                    .map(|b| fix_image(b, notes))
                    .filter(non_empty_text)
                    .collect();
                if content.is_empty() {
                    content.push(Block::text("(no output)"));
                }
                out.push(Message::ToolResult {
                    tool_call_id,
                    tool_name,
                    content,
                    is_error,
                });
            }
        }
    }
    out
}

fn order_turns(messages: Vec<Message>, api: Api, notes: &mut Vec<String>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len() + 1);
    if !matches!(messages.first(), Some(Message::User(_)) | None) {
        notes.push("the conversation did not start with a user message".to_string());
        out.push(Message::User(vec![Block::text(
            "(The earlier part of this conversation is not available.)",
        )]));
    }
    for m in messages {
        if api == Api::AnthropicMessages {
            match (out.last_mut(), &m) {
                (Some(Message::Assistant(prev)), Message::Assistant(next)) => {
                    prev.extend(next.iter().cloned());
                    continue;
                }
                (Some(Message::User(prev)), Message::User(next)) => {
                    prev.extend(next.iter().cloned());
                    continue;
                }
                _ => {}
            }
        }
        out.push(m);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `id` is acceptable to `api`.
    fn valid_id(id: &str, api: Api) -> bool {
        let max = match api {
            Api::AnthropicMessages => 64,
            Api::OpenAiCompletions => 40,
        };
        !id.is_empty()
            && id.len() <= max
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    /// The provider's documented rules for a request's messages; `Err`
    /// names the first one broken.
    fn validate(messages: &[Message], api: Api) -> Result<(), String> {
        if !matches!(messages.first(), Some(Message::User(_))) {
            return Err("the first message must be a user message".into());
        }
        let mut seen_ids: HashSet<&str> = HashSet::new();
        let mut i = 0;
        while i < messages.len() {
            match &messages[i] {
                Message::User(blocks) => {
                    if blocks.is_empty() {
                        return Err(format!("message {i}: empty user message"));
                    }
                    for b in blocks {
                        check_user_block(b, i)?;
                    }
                    if api == Api::AnthropicMessages
                        && matches!(messages.get(i + 1), Some(Message::User(_)))
                    {
                        return Err(format!("message {i}: two user messages in a row"));
                    }
                    i += 1;
                }
                Message::Assistant(blocks) => {
                    if blocks.is_empty() {
                        return Err(format!("message {i}: empty assistant message"));
                    }
                    let mut calls = Vec::new();
                    for b in blocks {
                        match b {
                            Block::Text { text } if text.trim().is_empty() => {
                                return Err(format!("message {i}: empty text block"));
                            }
                            Block::Text { .. } => {}
                            Block::Thinking { signature, .. } => {
                                if api == Api::OpenAiCompletions {
                                    return Err(format!(
                                        "message {i}: thinking block sent to a chat-completions server"
                                    ));
                                }
                                if signature.as_deref().is_none_or(str::is_empty) {
                                    return Err(format!(
                                        "message {i}: thinking block without a signature"
                                    ));
                                }
                            }
                            Block::ToolCall { id, .. } => {
                                if !valid_id(id, api) {
                                    return Err(format!(
                                        "message {i}: invalid tool call id {id:?}"
                                    ));
                                }
                                if !seen_ids.insert(id) {
                                    return Err(format!(
                                        "message {i}: tool call id {id} used twice"
                                    ));
                                }
                                calls.push(id.as_str());
                            }
                            Block::Image { .. } => {
                                return Err(format!("message {i}: image in an assistant message"));
                            }
                        }
                    }
                    if api == Api::AnthropicMessages
                        && matches!(messages.get(i + 1), Some(Message::Assistant(_)))
                    {
                        return Err(format!("message {i}: two assistant messages in a row"));
                    }
                    i += 1;
                    // Every call is answered, right after, exactly once.
                    let mut answered = HashSet::new();
                    while let Some(Message::ToolResult {
                        tool_call_id,
                        content,
                        ..
                    }) = messages.get(i)
                    {
                        if !calls.contains(&tool_call_id.as_str()) {
                            return Err(format!(
                                "message {i}: result for unknown call {tool_call_id}"
                            ));
                        }
                        if !answered.insert(tool_call_id.as_str()) {
                            return Err(format!(
                                "message {i}: second result for call {tool_call_id}"
                            ));
                        }
                        if content.is_empty() {
                            return Err(format!("message {i}: empty tool result"));
                        }
                        for b in content {
                            check_user_block(b, i)?;
                        }
                        i += 1;
                    }
                    if answered.len() != calls.len() {
                        return Err(format!(
                            "message {i}: {} call(s) without a result",
                            calls.len() - answered.len()
                        ));
                    }
                    if api == Api::AnthropicMessages
                        && !calls.is_empty()
                        && matches!(messages.get(i), Some(Message::User(_)))
                    {
                        // Results and the following user text travel in one
                        // user message, so a user message may follow.
                    }
                }
                Message::ToolResult { tool_call_id, .. } => {
                    return Err(format!(
                        "message {i}: result for call {tool_call_id} not right after its call"
                    ));
                }
            }
        }
        Ok(())
    }

    fn check_user_block(b: &Block, i: usize) -> Result<(), String> {
        match b {
            Block::Text { text } if text.trim().is_empty() => {
                Err(format!("message {i}: empty text block"))
            }
            Block::Text { .. } => Ok(()),
            Block::Image { data, .. } if data.len() > MAX_IMAGE_BASE64 => {
                Err(format!("message {i}: image too large"))
            }
            Block::Image { .. } => Ok(()),
            other => Err(format!("message {i}: {other:?} in a user message")),
        }
    }
    use serde_json::json;

    fn call(id: &str) -> Block {
        Block::ToolCall {
            id: id.into(),
            name: "read".into(),
            arguments: json!({}),
        }
    }

    fn result(id: &str) -> Message {
        Message::ToolResult {
            tool_call_id: id.into(),
            tool_name: "read".into(),
            content: vec![Block::text("ok")],
            is_error: false,
        }
    }

    #[test]
    fn repairs_a_crashed_run() {
        // The process died after the model asked for two tools and one
        // result was stored; then the user wrote again.
        let stored = vec![
            Message::User(vec![Block::text("read a and b")]),
            Message::Assistant(vec![
                Block::text("Reading."),
                call("call|1"),
                call("call|2"),
            ]),
            result("call|1"),
            Message::User(vec![Block::text("hello?")]),
            result("ghost"),
        ];
        for api in [Api::AnthropicMessages, Api::OpenAiCompletions] {
            let (clean, notes) = clean(&stored, api);
            validate(&clean, api).unwrap_or_else(|e| panic!("{api:?}: {e}\n{clean:#?}"));
            assert!(notes.iter().any(|n| n.contains("had none")), "{notes:?}");
            assert!(
                notes.iter().any(|n| n.contains("without a matching call")),
                "{notes:?}"
            );
            let Message::ToolResult {
                tool_call_id,
                is_error,
                ..
            } = &clean[3]
            else {
                panic!("{clean:#?}")
            };
            assert_eq!(tool_call_id, "call_2");
            assert!(is_error);
        }
    }

    #[test]
    fn per_provider_blocks_and_order() {
        let stored = vec![
            Message::Assistant(vec![Block::text("I start?")]),
            Message::Assistant(vec![
                Block::Thinking {
                    thinking: "x".into(),
                    signature: None,
                },
                Block::Thinking {
                    thinking: "y".into(),
                    signature: Some("sig".into()),
                },
                Block::text("  "),
            ]),
            Message::User(vec![Block::Image {
                media_type: "image/png".into(),
                data: "A".repeat(MAX_IMAGE_BASE64 + 1),
            }]),
            Message::User(vec![Block::text("")]),
        ];
        let (a, _) = clean(&stored, Api::AnthropicMessages);
        validate(&a, Api::AnthropicMessages).unwrap();
        assert_eq!(a.len(), 3, "{a:#?}");
        let Message::Assistant(blocks) = &a[1] else {
            panic!()
        };
        assert_eq!(blocks.len(), 2, "text + the signed thinking: {blocks:?}");
        let (o, _) = clean(&stored, Api::OpenAiCompletions);
        validate(&o, Api::OpenAiCompletions).unwrap();
        assert!(
            o.iter()
                .all(|m| !matches!(m, Message::Assistant(b) if b.iter().any(|b| matches!(b, Block::Thinking { .. }))))
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn any_block(user: bool) -> impl Strategy<Value = Block> {
            let text = prop_oneof![Just(String::new()), Just("  ".to_string()), "[a-z ]{1,12}"]
                .prop_map(|t| Block::Text { text: t });
            let image = prop_oneof![Just(10usize), Just(MAX_IMAGE_BASE64 + 10)].prop_map(|n| {
                Block::Image {
                    media_type: "image/png".into(),
                    data: "A".repeat(n),
                }
            });
            let thinking = (any::<bool>(), "[a-z]{0,5}").prop_map(|(signed, t)| Block::Thinking {
                thinking: t,
                signature: signed.then(|| "sig".to_string()),
            });
            let call = prop_oneof![
                Just("a".to_string()),
                Just("b|c".to_string()),
                Just("x".repeat(70)),
                "[a-zA-Z0-9:_.-]{0,10}"
            ]
            .prop_map(|id| Block::ToolCall {
                id,
                name: "read".into(),
                arguments: serde_json::json!({}),
            });
            if user {
                prop_oneof![text, image].boxed()
            } else {
                prop_oneof![text, image, thinking, call].boxed()
            }
        }

        fn any_message() -> impl Strategy<Value = Message> {
            let ids = prop_oneof![
                Just("a".to_string()),
                Just("b|c".to_string()),
                Just("x".repeat(70)),
                "[a-zA-Z0-9:_.-]{0,10}"
            ];
            prop_oneof![
                prop::collection::vec(any_block(true), 0..3).prop_map(Message::User),
                prop::collection::vec(any_block(false), 0..4).prop_map(Message::Assistant),
                (
                    ids,
                    prop::collection::vec(any_block(true), 0..2),
                    any::<bool>()
                )
                    .prop_map(|(id, content, is_error)| Message::ToolResult {
                        tool_call_id: id,
                        tool_name: "read".into(),
                        content,
                        is_error,
                    }),
            ]
        }

        proptest! {
            /// Whatever was stored, the cleaned conversation follows the
            /// provider's rules (when anything is left of it).
            #[test]
            fn cleaned_conversations_are_accepted(stored in prop::collection::vec(any_message(), 0..12)) {
                for api in [Api::AnthropicMessages, Api::OpenAiCompletions] {
                    let (clean, _) = clean(&stored, api);
                    if clean.is_empty() {
                        continue;
                    }
                    if let Err(e) = validate(&clean, api) {
                        return Err(TestCaseError::fail(format!("{api:?}: {e}\nstored: {stored:#?}\nclean: {clean:#?}")));
                    }
                }
            }

            /// A conversation that is already valid comes out unchanged.
            #[test]
            fn valid_conversations_are_left_alone(n in 1usize..5) {
                let mut conv = vec![Message::User(vec![Block::text("start")])];
                for i in 0..n {
                    let id = format!("call_{i}");
                    conv.push(Message::Assistant(vec![Block::text("step"), Block::ToolCall { id: id.clone(), name: "read".into(), arguments: serde_json::json!({"i": i}) }]));
                    conv.push(Message::ToolResult { tool_call_id: id, tool_name: "read".into(), content: vec![Block::text("r")], is_error: false });
                }
                conv.push(Message::Assistant(vec![Block::text("done")]));
                conv.push(Message::User(vec![Block::text("thanks")]));
                for api in [Api::AnthropicMessages, Api::OpenAiCompletions] {
                    validate(&conv, api).unwrap();
                    let (clean, notes) = clean(&conv, api);
                    prop_assert_eq!(&clean, &conv);
                    prop_assert!(notes.is_empty());
                }
            }
        }
    }
}
