//! Inbound webhooks: the settings they are served with, where a token
//! may come from, and the lockout.

use std::net::IpAddr;

use super::super::LOCKOUT_WINDOW;
use super::*;

#[test]
fn paths_are_normalised_and_never_take_the_gateways_own_routes() {
    for (raw, want) in [
        ("/hooks", Some("/hooks")),
        ("hooks/", Some("/hooks")),
        (" /in/hooks// ", Some("/in/hooks")),
        ("/v1x", Some("/v1x")),
        ("/", None),
        ("", None),
        ("/v1", None),
        ("/v1/hooks", None),
        ("/healthz", None),
        ("/readyz/x", None),
        ("/mcp", None),
        ("/mcp/hooks", None),
        ("/mcpx", Some("/mcpx")),
        ("/a/../v1", None),
    ] {
        assert_eq!(normalise_path(raw).ok().as_deref(), want, "{raw:?}");
    }
}

#[test]
fn webhooks_need_their_own_token() {
    let mut config = HooksConfig {
        enabled: true,
        ..HooksConfig::default()
    };
    assert!(matches!(
        settings(&config, "gw"),
        Err(WebhookConfigError::TokenMissing)
    ));
    config.token = Some("gw".into());
    assert!(matches!(
        settings(&config, "gw"),
        Err(WebhookConfigError::SameToken)
    ));
    config.token = Some("hook".into());
    let ok = settings(&config, "gw").unwrap().unwrap();
    assert_eq!((ok.base.as_str(), ok.max_body_bytes), ("/hooks", 262_144));
    config.enabled = false;
    assert!(settings(&config, "gw").unwrap().is_none());
}

#[test]
fn tokens_come_from_bearer_or_the_token_headers_and_never_the_query() {
    let mut headers = HeaderMap::new();
    headers.insert("x-almanac-token", HeaderValue::from_static("b"));
    assert_eq!(given_token(&headers).as_deref(), Some("b"));
    headers.insert("x-openclaw-token", HeaderValue::from_static("a"));
    assert_eq!(given_token(&headers).as_deref(), Some("a"));
    headers.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("bEaReR  t "),
    );
    assert_eq!(given_token(&headers).as_deref(), Some("t"));
    assert!(query_has_token(Some("a=1&token=x")));
    assert!(query_has_token(Some("%74oken=x")));
    assert!(!query_has_token(Some("tokens=x")));
    assert!(!query_has_token(None));
    assert!(secrets_equal("abc", "abc"));
    assert!(!secrets_equal("abc", "abcd"));
}

#[test]
fn the_lockout_counts_twenty_failures_in_a_sliding_minute() {
    let lockout = super::super::Lockout::new(LOCKOUT_AFTER);
    let ip: IpAddr = "10.0.0.1".parse().unwrap();
    let start = Instant::now();
    // 19 failures spread over the minute, then the oldest leave it.
    for i in 0..19 {
        lockout.failed(ip, start + Duration::from_secs(i));
    }
    let later = start + Duration::from_secs(61);
    lockout.failed(ip, later);
    assert!(
        lockout.locked(ip, later).is_none(),
        "two fell out of the window"
    );
    lockout.failed(ip, later);
    lockout.failed(ip, later);
    assert_eq!(lockout.locked(ip, later), Some(LOCKOUT_WINDOW));
    assert!(lockout.locked(ip, later + LOCKOUT_WINDOW).is_none());
    lockout.succeeded(ip);
    assert!(lockout.locked(ip, later).is_none());
}
