use serde_json::{Value, json};

use super::*;

fn answer(line: &[u8], stopping: bool) -> Option<Value> {
    match admit(&Line::Text(line.to_vec()), stopping) {
        Admitted::Answer(v) => Some(v),
        Admitted::Pass | Admitted::Skip => None,
    }
}

#[test]
fn bad_lines_get_json_rpc_errors_with_their_codes() {
    let parse = answer(b"{not json", false).unwrap();
    assert_eq!(parse["error"]["code"], PARSE_ERROR);
    assert_eq!(parse["id"], Value::Null);
    let batch = answer(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, false).unwrap();
    assert_eq!(batch["error"]["code"], INVALID_REQUEST);
    let no_method = answer(br#"{"jsonrpc":"2.0","id":7}"#, false).unwrap();
    assert_eq!(
        (no_method["id"].clone(), no_method["error"]["code"].clone()),
        (json!(7), json!(INVALID_REQUEST))
    );
    let old = answer(br#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#, false).unwrap();
    assert_eq!(old["id"], "a");
    assert!(answer(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, false).is_none());
    assert!(answer(b"   ", false).is_none());
    let late = answer(br#"{"jsonrpc":"2.0","id":9,"method":"tools/call"}"#, true).unwrap();
    assert_eq!(
        (late["id"].clone(), late["error"]["code"].clone()),
        (json!(9), json!(SHUTTING_DOWN))
    );
    // A notification is never answered, even while stopping.
    assert!(
        answer(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            true
        )
        .is_none()
    );
    let long = admit(&Line::TooLong(MAX_LINE + 1), false);
    assert!(matches!(long, Admitted::Answer(v) if v["error"]["code"] == INVALID_REQUEST));
}

#[tokio::test]
async fn a_line_over_the_limit_is_skipped_without_being_kept_and_the_next_is_read() {
    let mut input = Vec::with_capacity(MAX_LINE + 64);
    input.resize(MAX_LINE + 10, b'x');
    input.extend_from_slice(b"\n{\"a\":1}\r\nlast");
    let mut reader = tokio::io::BufReader::with_capacity(8192, &input[..]);
    assert!(
        matches!(read_line(&mut reader).await.unwrap(), Some(Line::TooLong(n)) if n == MAX_LINE + 10)
    );
    assert!(
        matches!(read_line(&mut reader).await.unwrap(), Some(Line::Text(t)) if t == b"{\"a\":1}")
    );
    assert!(matches!(read_line(&mut reader).await.unwrap(), Some(Line::Text(t)) if t == b"last"));
    assert!(read_line(&mut reader).await.unwrap().is_none());
}
