//! The Bot API client: the few methods the channel calls, over the
//! engine's HTTP client. Requests go to `<apiRoot>/bot<token>/<method>`
//! as JSON; every answer is `{ok, result}` or `{ok: false, error_code,
//! description, parameters: {retry_after}}`.
//!
//! Invariants: the token is in every request URL and nowhere else; no
//! error this module returns holds it (transport errors are stripped of
//! their URL and the token is masked in any text that came back).

use std::time::Duration;

use serde_json::{Value, json};

/// The largest answer read (a batch of updates with long texts fits many
/// times over).
const MAX_ANSWER: usize = 32 * 1024 * 1024;
/// What a call may take besides a long poll's own wait.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ApiError {
    #[error("Telegram refused the bot token (401): it was revoked or is wrong")]
    Unauthorized,
    #[error("another poller takes this bot's updates (409 Conflict): {0}")]
    Conflict(String),
    #[error("Telegram asks to wait {0} s before the next call (429)")]
    RetryAfter(u64),
    #[error("Telegram refused the call ({code}): {description}")]
    Refused { code: u16, description: String },
    #[error("cannot reach Telegram: {0}")]
    Transport(String),
    #[error("Telegram's answer cannot be read: {0}")]
    BadAnswer(String),
}

impl ApiError {
    /// Whether the same call may succeed later (the network, Telegram's
    /// own trouble, a rate limit).
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            ApiError::Transport(_) | ApiError::RetryAfter(_) => true,
            ApiError::Refused { code, .. } => *code >= 500,
            _ => false,
        }
    }

    /// Telegram's "can't parse entities": the HTML was refused.
    pub(crate) fn is_parse_error(&self) -> bool {
        matches!(self, ApiError::Refused { code: 400, description } if description.contains("can't parse entities"))
    }
}

/// One bot's client.
#[derive(Clone)]
pub(crate) struct BotApi {
    http: reqwest::Client,
    root: String,
    token: String,
}

impl std::fmt::Debug for BotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotApi")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// What `getMe` says of the bot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Me {
    pub id: i64,
    pub username: String,
}

/// A message to send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Outgoing<'a> {
    pub chat_id: &'a str,
    pub text: &'a str,
    /// `HTML`, or none for plain text.
    pub html: bool,
    pub thread_id: Option<i64>,
    pub reply_to: Option<i64>,
    pub link_preview: bool,
}

impl BotApi {
    pub(crate) fn new(http: reqwest::Client, root: &str, token: &str) -> BotApi {
        BotApi {
            http,
            root: root.trim_end_matches('/').to_string(),
            token: token.to_string(),
        }
    }

    /// `text` with the token masked.
    pub(crate) fn redact(&self, text: &str) -> String {
        redact(text, &self.token)
    }

    /// One call; its `result`.
    pub(crate) async fn call(
        &self,
        method: &str,
        body: &Value,
        wait: Duration,
    ) -> Result<Value, ApiError> {
        let url = format!("{}/bot{}/{method}", self.root, self.token);
        let sent = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .timeout(CALL_TIMEOUT + wait)
            .send()
            .await
            .map_err(|e| ApiError::Transport(self.redact(&e.without_url().to_string())))?;
        let status = sent.status().as_u16();
        let bytes = read_capped(sent)
            .await
            .map_err(|e| ApiError::Transport(self.redact(&e)))?;
        answer(status, &bytes).map_err(|e| match e {
            ApiError::Refused { code, description } => ApiError::Refused {
                code,
                description: self.redact(&description),
            },
            ApiError::Conflict(d) => ApiError::Conflict(self.redact(&d)),
            other => other,
        })
    }

    pub(crate) async fn get_me(&self) -> Result<Me, ApiError> {
        let me = self.call("getMe", &json!({}), Duration::ZERO).await?;
        Ok(Me {
            id: me["id"].as_i64().unwrap_or_default(),
            username: me["username"].as_str().unwrap_or_default().to_string(),
        })
    }

    /// Long polling and a webhook exclude each other: polling needs none.
    pub(crate) async fn delete_webhook(&self) -> Result<(), ApiError> {
        self.call("deleteWebhook", &json!({}), Duration::ZERO)
            .await
            .map(|_| ())
    }

    /// The updates after `offset - 1`, waiting up to `wait` for one.
    pub(crate) async fn get_updates(
        &self,
        offset: i64,
        wait: Duration,
    ) -> Result<Vec<Value>, ApiError> {
        let body = json!({
            "offset": offset,
            "timeout": wait.as_secs(),
            "allowed_updates": ["message", "edited_message"],
        });
        match self.call("getUpdates", &body, wait).await? {
            Value::Array(updates) => Ok(updates),
            other => Err(ApiError::BadAnswer(format!(
                "getUpdates gave {} instead of a list",
                kind_of(&other)
            ))),
        }
    }

    /// Sends one message; its `message_id`.
    pub(crate) async fn send_message(&self, out: &Outgoing<'_>) -> Result<i64, ApiError> {
        let mut body = json!({
            "chat_id": out.chat_id,
            "text": out.text,
            "link_preview_options": {"is_disabled": !out.link_preview},
        });
        if out.html {
            body["parse_mode"] = json!("HTML");
        }
        if let Some(thread) = out.thread_id {
            body["message_thread_id"] = json!(thread);
        }
        if let Some(reply) = out.reply_to {
            body["reply_parameters"] =
                json!({"message_id": reply, "allow_sending_without_reply": true});
        }
        let sent = self.call("sendMessage", &body, Duration::ZERO).await?;
        Ok(sent["message_id"].as_i64().unwrap_or_default())
    }

    /// "typing…" in `chat_id` (for about five seconds).
    pub(crate) async fn send_typing(
        &self,
        chat_id: &str,
        thread_id: Option<i64>,
    ) -> Result<(), ApiError> {
        let mut body = json!({"chat_id": chat_id, "action": "typing"});
        if let Some(thread) = thread_id {
            body["message_thread_id"] = json!(thread);
        }
        self.call("sendChatAction", &body, Duration::ZERO)
            .await
            .map(|_| ())
    }
}

/// `text` with every occurrence of `token` masked.
pub(crate) fn redact(text: &str, token: &str) -> String {
    if token.len() < 4 {
        return text.to_string();
    }
    text.replace(token, "<bot-token>")
}

async fn read_capped(mut answer: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    while let Some(chunk) = answer
        .chunk()
        .await
        .map_err(|e| e.without_url().to_string())?
    {
        if bytes.len() + chunk.len() > MAX_ANSWER {
            return Err(format!("the answer is larger than {} MB", MAX_ANSWER >> 20));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// The `result` of an answer, or why there is none.
fn answer(status: u16, bytes: &[u8]) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        if status >= 400 {
            ApiError::Refused {
                code: status,
                description: String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned(),
            }
        } else {
            ApiError::BadAnswer(e.to_string())
        }
    })?;
    if value["ok"] == Value::Bool(true) {
        return Ok(value.get("result").cloned().unwrap_or(Value::Null));
    }
    let code = value["error_code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(status);
    let description = value["description"]
        .as_str()
        .unwrap_or("no description")
        .chars()
        .take(300)
        .collect::<String>();
    Err(match code {
        401 => ApiError::Unauthorized,
        409 => ApiError::Conflict(description),
        429 => ApiError::RetryAfter(value["parameters"]["retry_after"].as_u64().unwrap_or(5)),
        _ => ApiError::Refused { code, description },
    })
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_results_or_errors_that_name_what_to_do() {
        assert_eq!(answer(200, br#"{"ok":true,"result":[1]}"#), Ok(json!([1])));
        assert_eq!(
            answer(
                401,
                br#"{"ok":false,"error_code":401,"description":"Unauthorized"}"#
            ),
            Err(ApiError::Unauthorized)
        );
        assert_eq!(
            answer(429, br#"{"ok":false,"error_code":429,"description":"Too Many Requests","parameters":{"retry_after":7}}"#),
            Err(ApiError::RetryAfter(7))
        );
        assert!(matches!(
            answer(409, br#"{"ok":false,"error_code":409,"description":"Conflict: terminated by other getUpdates request"}"#),
            Err(ApiError::Conflict(_))
        ));
        let parse = answer(400, br#"{"ok":false,"error_code":400,"description":"Bad Request: can't parse entities: unexpected end tag"}"#).unwrap_err();
        assert!(parse.is_parse_error());
        assert!(matches!(
            answer(502, b"<html>bad gateway</html>"),
            Err(ApiError::Refused { code: 502, .. })
        ));
        assert!(matches!(
            answer(200, b"\xff\xfe not json"),
            Err(ApiError::BadAnswer(_))
        ));
    }

    #[test]
    fn the_token_is_masked_wherever_it_appears() {
        let token = "123456:ABC-secret";
        let text = format!(
            "error sending request for url (https://api.telegram.org/bot{token}/getUpdates)"
        );
        let masked = redact(&text, token);
        assert!(!masked.contains("ABC-secret"), "{masked}");
        assert!(masked.contains("<bot-token>"));
    }
}
