//! Server-sent events, read incrementally: bytes arrive in any chunking
//! (a line, or a UTF-8 character, may be split between reads) and the
//! events come out the same.

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// The largest event read (its lines together); a server sending more
/// without ending the event is refused rather than buffered without end.
pub(crate) const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// The incremental parser.
#[derive(Debug, Default)]
pub(crate) struct Parser {
    /// Bytes of an unfinished line.
    pending: Vec<u8>,
    /// A `\r` ended the last chunk: a `\n` starting the next one belongs
    /// to it.
    after_cr: bool,
    event: Option<String>,
    data: Vec<String>,
    /// Bytes of `data` so far.
    data_bytes: usize,
    /// An event grew past [`MAX_EVENT_BYTES`]: what it held was dropped.
    oversized: bool,
}

impl Parser {
    /// Feeds bytes; returns the events they complete.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let mut start = 0;
        let mut bytes = chunk;
        // An empty read says nothing about what follows the `\r`.
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b == b'\n' || b == b'\r' {
                self.pending.extend_from_slice(&bytes[start..i]);
                let line = std::mem::take(&mut self.pending);
                self.line(&line, &mut out);
                if b == b'\r' {
                    if i + 1 < bytes.len() {
                        if bytes[i + 1] == b'\n' {
                            i += 1;
                        }
                    } else {
                        self.after_cr = true;
                    }
                }
                start = i + 1;
            }
            i += 1;
        }
        self.pending
            .extend_from_slice(&bytes[start.min(bytes.len())..]);
        if self.pending.len().saturating_add(self.data_bytes) > MAX_EVENT_BYTES {
            self.oversized = true;
            self.pending = Vec::new();
            self.data = Vec::new();
            self.data_bytes = 0;
        }
        out
    }

    /// Whether an event grew past [`MAX_EVENT_BYTES`] (the stream is then
    /// not to be trusted).
    pub(crate) fn oversized(&self) -> bool {
        self.oversized
    }

    /// The end of the stream: an event still being collected is returned
    /// (a server may close without the final blank line).
    pub(crate) fn finish(&mut self) -> Option<SseEvent> {
        let mut out = Vec::new();
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.line(&line, &mut out);
        }
        self.line(b"", &mut out);
        out.pop()
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if !self.data.is_empty() {
                out.push(SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data).join("\n"),
                });
            }
            self.data_bytes = 0;
            self.event = None;
            return;
        }
        let line = String::from_utf8_lossy(line);
        if line.starts_with(':') {
            return; // a comment (keep-alive)
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                self.data_bytes = self.data_bytes.saturating_add(value.len() + 1);
                self.data.push(value.to_string());
            }
            "event" => self.event = Some(value.to_string()),
            // `id:` and `retry:` (a reconnection delay, for clients that
            // reconnect) are not used: an answer is never resumed.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<SseEvent> {
        let mut p = Parser::default();
        let mut out = p.push(text.as_bytes());
        out.extend(p.finish());
        out
    }

    #[test]
    fn fields_comments_and_line_endings() {
        let events = all(
            ": ping\n\nevent: message_start\ndata: {\"a\":1}\n\ndata: one\r\ndata:two\r\n\r\ndata: [DONE]",
        );
        assert_eq!(
            events,
            vec![
                SseEvent {
                    event: Some("message_start".into()),
                    data: "{\"a\":1}".into()
                },
                SseEvent {
                    event: None,
                    data: "one\ntwo".into()
                },
                SseEvent {
                    event: None,
                    data: "[DONE]".into()
                },
            ]
        );
    }

    #[test]
    fn an_empty_read_between_cr_and_lf_keeps_them_one_line_end() {
        let mut p = Parser::default();
        let mut got = p.push(b"event: a\r");
        got.extend(p.push(b""));
        got.extend(p.push(b"\ndata: x\r\n\r\n"));
        assert_eq!(
            got,
            vec![SseEvent {
                event: Some("a".into()),
                data: "x".into()
            }]
        );
    }

    #[test]
    fn an_endless_event_is_refused_not_buffered() {
        let mut p = Parser::default();
        let chunk = vec![b'x'; 1024 * 1024];
        assert!(p.push(b"data: ").is_empty());
        for _ in 0..MAX_EVENT_BYTES / chunk.len() + 1 {
            assert!(p.push(&chunk).is_empty());
        }
        assert!(p.oversized());
        assert!(
            p.pending.capacity() < chunk.len() * 2,
            "the buffer was let go"
        );
        // Many data lines of one event count together.
        let mut p = Parser::default();
        let line = format!("data: {}\n", "y".repeat(1024 * 1024));
        for _ in 0..MAX_EVENT_BYTES / (1024 * 1024) + 1 {
            p.push(line.as_bytes());
        }
        assert!(p.oversized());
        // Ordinary events reset the count.
        let mut p = Parser::default();
        for _ in 0..40 {
            assert_eq!(p.push(format!("{line}\n").as_bytes()).len(), 1);
        }
        assert!(!p.oversized());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Any bytes, cut anywhere (status lines, `retry:` fields,
            /// invalid UTF-8): events or nothing, never a panic.
            #[test]
            fn any_bytes_parse(bytes in prop::collection::vec(any::<u8>(), 0..400), cut in any::<usize>()) {
                let mut p = Parser::default();
                let cut = cut % (bytes.len() + 1);
                let _ = p.push(&bytes[..cut]);
                let _ = p.push(&bytes[cut..]);
                let _ = p.finish();
                let mut p = Parser::default();
                let text = format!("HTTP/1.1 200 OK\r\nretry: {}\nid: {cut}\ndata: x\n\n", String::from_utf8_lossy(&bytes));
                let _ = p.push(text.as_bytes());
            }

            /// However the bytes are cut, the same events come out.
            #[test]
            fn chunking_does_not_matter(
                events in prop::collection::vec(("[a-z_]{0,8}", "[ -~é中]{0,20}"), 0..6),
                newline in prop::sample::select(vec!["\n", "\r\n", "\r"]),
                cuts in prop::collection::vec(0usize..200, 0..10),
            ) {
                let mut text = String::new();
                for (name, data) in &events {
                    if !name.is_empty() {
                        text.push_str(&format!("event: {name}{newline}"));
                    }
                    text.push_str(&format!("data: {data}{newline}{newline}"));
                }
                let bytes = text.as_bytes();
                let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
                cuts.sort_unstable();
                let mut p = Parser::default();
                let mut got = Vec::new();
                let mut last = 0;
                for c in cuts.into_iter().chain([bytes.len()]) {
                    got.extend(p.push(&bytes[last..c]));
                    last = c;
                }
                got.extend(p.finish());
                prop_assert_eq!(got, all(&text));
                prop_assert_eq!(all(&text).len(), events.len());
            }
        }
    }
}
