use proptest::prelude::*;

use super::*;

/// The tags `to_html` may emit.
const TAGS: &[&str] = &["b", "i", "s", "code", "pre", "a", "blockquote"];

/// Whether `html` is well-formed Telegram HTML: known tags only, each
/// closed in order, and no raw `<`, `>` or `&` outside tags and entities.
fn well_formed(html: &str) -> Result<(), String> {
    let mut stack: Vec<&str> = Vec::new();
    let bytes = html.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' => {
                let end = i + html[i..].find('>').ok_or("unterminated tag")?;
                let tag = &html[i + 1..end];
                if let Some(name) = tag.strip_prefix('/') {
                    match stack.pop() {
                        Some(open) if open == name => {}
                        open => return Err(format!("</{name}> closes {open:?} in {html:?}")),
                    }
                } else {
                    let name = tag.split(' ').next().unwrap_or_default();
                    if !TAGS.contains(&name) {
                        return Err(format!("unknown tag <{tag}> in {html:?}"));
                    }
                    stack.push(name);
                }
                i = end + 1;
            }
            b'>' => return Err(format!("raw > at {i} in {html:?}")),
            b'&' => {
                if !["&lt;", "&gt;", "&amp;", "&quot;"]
                    .iter()
                    .any(|e| html[i..].starts_with(e))
                {
                    return Err(format!("raw & at {i} in {html:?}"));
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    if stack.is_empty() {
        Ok(())
    } else {
        Err(format!("unclosed {stack:?} in {html:?}"))
    }
}

/// `html` without tags and without whitespace: what must survive chunking.
fn text_of(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' if !in_tag => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag && !c.is_whitespace() => out.push(c),
            _ => {}
        }
    }
    out
}

/// Checks every chunk of `html` at `limit` in both modes; returns the
/// `Length` chunks.
fn check_chunks(html: &str, limit: usize) -> Result<Vec<String>, String> {
    let mut length = Vec::new();
    for mode in [ChunkMode::Length, ChunkMode::Newline] {
        let chunks = chunk_html(html, limit, mode);
        for chunk in &chunks {
            if utf16_len(chunk) > limit {
                return Err(format!("{mode:?} chunk over {limit}: {chunk:?}"));
            }
            if strip_html(chunk).trim().is_empty() {
                return Err(format!("{mode:?} empty chunk {chunk:?} of {html:?}"));
            }
            well_formed(chunk)?;
        }
        let joined: String = chunks.concat();
        if text_of(&joined) != text_of(html) {
            return Err(format!("{mode:?} lost text: {chunks:?} of {html:?}"));
        }
        if mode == ChunkMode::Length {
            length = chunks;
        }
    }
    Ok(length)
}

#[test]
fn markdown_becomes_telegram_html() {
    let cases: &[(&str, &str)] = &[
        ("a < b & c", "a &lt; b &amp; c"),
        ("x > y", "x &gt; y"),
        ("```\n<tag>\n```", "<pre><code>&lt;tag&gt;</code></pre>"),
        (
            "```rust\nlet a = *b* & __c__;\n```\nafter",
            "<pre><code class=\"language-rust\">let a = *b* &amp; __c__;</code></pre>\nafter",
        ),
        (
            "  ```py\n  if x:\n      y\n  ```",
            "<pre><code class=\"language-py\">if x:\n    y</code></pre>",
        ),
        (
            "```\nunclosed\ncode",
            "<pre><code>unclosed\ncode</code></pre>",
        ),
        ("```inline```", "<code>inline</code>"),
        ("`x < y`", "<code>x &lt; y</code>"),
        ("`` a`b ``", "<code>a`b</code>"),
        ("**bold** and __bold__", "<b>bold</b> and <b>bold</b>"),
        ("*it* _it_", "<i>it</i> <i>it</i>"),
        ("***both***", "<b><i>both</i></b>"),
        ("~~gone~~", "<s>gone</s>"),
        ("*a **b** c*", "<i>a <b>b</b> c</i>"),
        ("**a `*b*` c**", "<b>a <code>*b*</code> c</b>"),
        ("snake_case_name", "snake_case_name"),
        ("x_1 and _y_", "x_1 and <i>y</i>"),
        ("**unclosed", "**unclosed"),
        ("*a", "*a"),
        ("a * b * c", "a * b * c"),
        ("~single~", "~single~"),
        ("`unclosed", "`unclosed"),
        ("# Title", "<b>Title</b>"),
        ("## Title ##", "<b>Title</b>"),
        ("### C#", "<b>C#</b>"),
        ("#hashtag", "#hashtag"),
        ("# **x** & y", "<b><b>x</b> &amp; y</b>"),
        (
            "> one\n> **two**\nthree",
            "<blockquote>one\n<b>two</b></blockquote>\nthree",
        ),
        (
            "> a\n\n> b",
            "<blockquote>a</blockquote>\n\n<blockquote>b</blockquote>",
        ),
        ("- item\n* item\n  - nested", "• item\n• item\n  • nested"),
        ("---", "---"),
        (
            "[site](https://example.com/a_b)",
            "<a href=\"https://example.com/a_b\">site</a>",
        ),
        (
            "[q](https://x.y/?a=\"1\"&b=<2>)",
            "<a href=\"https://x.y/?a=&quot;1&quot;&amp;b=&lt;2&gt;\">q</a>",
        ),
        (
            "[**me**](tg://user?id=1)",
            "<a href=\"tg://user?id=1\"><b>me</b></a>",
        ),
        ("[mail](MAILTO:a@b.c)", "<a href=\"MAILTO:a@b.c\">mail</a>"),
        (
            "[wiki](https://w.org/A_(b))",
            "<a href=\"https://w.org/A_(b)\">wiki</a>",
        ),
        ("[x](ftp://a)", "[x](ftp://a)"),
        ("[x](javascript:alert(1))", "[x](javascript:alert(1))"),
        ("[*x*](relative)", "[<i>x</i>](relative)"),
        ("[](https://a.b)", "[](https://a.b)"),
        ("[a [b](https://x)", "[a <a href=\"https://x\">b</a>"),
        (
            "`a` and ``b`` and `c",
            "<code>a</code> and <code>b</code> and `c",
        ),
        ("*a `b* c` d*", "<i>a <code>b* c</code> d</i>"),
        ("a\r\nb", "a\nb"),
        ("", ""),
    ];
    for (markdown, html) in cases {
        let got = to_html(markdown);
        assert_eq!(&got, html, "to_html({markdown:?})");
        well_formed(&got).unwrap();
    }
}

#[test]
fn utf16_counts_astral_characters_twice() {
    let cases: &[(&str, usize)] = &[
        ("", 0),
        ("abc", 3),
        ("é", 1),
        ("中文", 2),
        ("😀", 2),
        ("a😀é", 4),
        ("👍🏽", 4),
    ];
    for (text, units) in cases {
        assert_eq!(utf16_len(text), *units, "{text:?}");
    }
    let emoji = "😀".repeat(3000);
    let chunks = chunk_html(&emoji, 4000, ChunkMode::Length);
    assert_eq!(
        chunks.iter().map(|c| utf16_len(c)).collect::<Vec<_>>(),
        [4000, 2000]
    );
}

#[test]
fn strip_html_gives_plain_text() {
    let cases: &[(&str, &str)] = &[
        ("<b>a &lt; b</b>", "a < b"),
        ("&amp;lt; &gt; &quot;q&quot;", "&lt; > \"q\""),
        ("<a href=\"https://x?a=1&amp;b=2\">link</a>", "link"),
        ("<pre><code class=\"language-rs\">x</code></pre>", "x"),
        ("a < b &#39; &nbsp;", "a < b &#39; &nbsp;"),
        ("<blockquote>q\nr</blockquote>", "q\nr"),
    ];
    for (html, plain) in cases {
        assert_eq!(strip_html(html), *plain, "strip_html({html:?})");
    }
    let markdown = "**x** < `y & z`";
    assert_eq!(strip_html(&to_html(markdown)), "x < y & z");
}

/// Prose: sentences of a few words, `count` paragraphs of about `size`
/// characters each.
fn prose(count: usize, size: usize) -> String {
    const WORDS: &[&str] = &[
        "the",
        "almanac",
        "keeps",
        "notes",
        "and",
        "answers",
        "questions",
        "about",
        "yesterday's",
        "meetings",
        "while",
        "résumé",
        "drafts",
        "wait",
    ];
    let mut paragraphs = Vec::new();
    let mut w = 0;
    for _ in 0..count {
        let mut paragraph = String::new();
        while paragraph.len() < size {
            if !paragraph.is_empty() {
                paragraph.push(' ');
            }
            paragraph.push_str(WORDS[w % WORDS.len()]);
            w += 1;
            if w % 9 == 0 {
                paragraph.push('.');
            }
        }
        paragraphs.push(paragraph);
    }
    paragraphs.join("\n\n")
}

#[test]
fn a_long_reply_is_cut_at_paragraphs() {
    let reply = prose(20, 448);
    assert!((8900..9300).contains(&reply.chars().count()));
    let html = to_html(&reply);
    let chunks = check_chunks(&html, 4000).unwrap();
    assert_eq!(chunks.len(), 3);
    for chunk in &chunks {
        assert!(utf16_len(chunk) <= 4000);
        well_formed(chunk).unwrap();
        // Whole paragraphs only.
        assert!(chunk.ends_with('.') || chunk.ends_with(|c: char| c.is_alphabetic()));
        assert!(html.contains(&format!("{chunk}\n\n")) || html.ends_with(chunk.as_str()));
    }
    // Short text comes back as it is.
    assert_eq!(
        chunk_html("<b>hi</b>", 4000, ChunkMode::Length),
        ["<b>hi</b>"]
    );
    assert!(chunk_html(" \n\n ", 4000, ChunkMode::Length).is_empty());
}

#[test]
fn a_long_code_block_is_closed_and_reopened() {
    let code: Vec<String> = (0..200)
        .map(|i| format!("    let x_{i} = a < b && c; // {}", "😀".repeat(i % 3)))
        .collect();
    let markdown = format!("Here:\n\n```rust\n{}\n```\nDone.", code.join("\n"));
    let html = to_html(&markdown);
    let chunks = check_chunks(&html, 1000).unwrap();
    assert!(chunks.len() >= 8, "{}", chunks.len());
    let open = "<pre><code class=\"language-rust\">";
    let mut lines = Vec::new();
    for (k, chunk) in chunks.iter().enumerate() {
        if k > 0 {
            assert!(chunk.starts_with(open), "{chunk:?}");
        }
        if k + 1 < chunks.len() {
            assert!(chunk.ends_with("</code></pre>"), "{chunk:?}");
        }
        let body = chunk.trim_start_matches("Here:\n\n");
        let body = body.trim_end_matches("\nDone.");
        lines.extend(
            strip_html(body)
                .split('\n')
                .map(str::to_string)
                .collect::<Vec<_>>(),
        );
    }
    // Cut only between lines, indentation kept.
    assert_eq!(lines, code);
}

#[test]
fn cuts_prefer_paragraphs_then_lines_then_spaces() {
    let para = |c: &str, words: usize| format!("{c} {}", "word ".repeat(words).trim_end());
    // A paragraph break in the second half of the room beats a later line
    // break; one in the first half does not.
    let (a, b, c) = (para("a", 13), para("b", 3), para("c", 13));
    let text = format!("{a}\n\n{b}\n{c}");
    let chunks = chunk_html(&text, 120, ChunkMode::Length);
    assert_eq!(chunks, [a.clone(), format!("{b}\n{c}")]);
    let text = format!("{b}\n\n{a}\n{c}");
    let chunks = chunk_html(&text, 120, ChunkMode::Length);
    assert_eq!(chunks, [format!("{b}\n\n{a}"), c.clone()]);
    // Length mode fills the message at a space rather than cut at an
    // early line break; Newline mode cuts at the line break.
    let text = format!("short\n{}", "word ".repeat(40).trim_end());
    let length = chunk_html(&text, 100, ChunkMode::Length);
    assert!(length[0].starts_with("short\nword") && length[0].len() > 50);
    let newline = chunk_html(&text, 100, ChunkMode::Newline);
    assert_eq!(newline[0], "short");
    assert!(newline[1..].iter().all(|c| utf16_len(c) <= 100));
    // Newline mode keeps lines whole when they fit.
    let lines: Vec<String> = (0..30)
        .map(|i| format!("line {i:02} has some words"))
        .collect();
    for chunk in chunk_html(&lines.join("\n"), 100, ChunkMode::Newline) {
        assert!(chunk.split('\n').all(|l| lines.iter().any(|x| x == l)));
    }
    // A word longer than the limit is cut anywhere, never inside an entity.
    let text = "a&amp;b".repeat(40);
    for chunk in chunk_html(&text, 20, ChunkMode::Length) {
        assert!(utf16_len(&chunk) <= 20);
        well_formed(&chunk).unwrap();
    }
}

#[test]
fn formatting_spans_the_cut() {
    let html = to_html(&format!("**{}**", "bold words ".repeat(30).trim_end()));
    let chunks = check_chunks(&html, 100).unwrap();
    assert!(chunks.len() > 3);
    assert!(
        chunks
            .iter()
            .all(|c| c.starts_with("<b>") && c.ends_with("</b>"))
    );
    // A link whose tags cannot fit is sent as its text.
    let url = format!("https://example.com/{}", "x".repeat(200));
    let html = to_html(&format!("see [the page]({url}) now"));
    let chunks = check_chunks(&html, 100).unwrap();
    assert_eq!(strip_html(&chunks.join(" ")), "see the page now");
    // Tiny limits are raised to what an entity needs.
    for chunk in chunk_html("&amp;&amp;&amp;&amp;", 1, ChunkMode::Length) {
        assert!(utf16_len(&chunk) <= MIN_LIMIT);
        well_formed(&chunk).unwrap();
    }
}

/// Markdown-ish text: letters, whitespace, every marker, and a few pieces
/// that make links, fences, quotes, headings and astral characters likely.
fn markdownish() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "a",
        "b",
        "z",
        " ",
        " ",
        "\n",
        "\n\n",
        "*",
        "**",
        "_",
        "__",
        "~",
        "~~",
        "`",
        "```",
        "[",
        "]",
        "(",
        ")",
        "<",
        ">",
        "&",
        "](https://x.y/",
        "> ",
        "# ",
        "- ",
        "😀",
        "é",
        "&amp;",
        "\"",
    ]);
    prop::collection::vec(pieces, 0..200).prop_map(|pieces| pieces.concat())
}

proptest! {
    #[test]
    fn html_and_chunks_are_well_formed(markdown in markdownish()) {
        let html = to_html(&markdown);
        prop_assert!(well_formed(&html).is_ok(), "{:?}", well_formed(&html));
        for limit in [50, 200, 4000] {
            let checked = check_chunks(&html, limit);
            prop_assert!(checked.is_ok(), "{:?}", checked);
        }
    }

    #[test]
    fn long_replies_chunk_within_the_limit(markdown in markdownish(), copies in 1usize..40) {
        let html = to_html(&vec![markdown; copies].join("\n"));
        for limit in [50, 200, 4000] {
            let checked = check_chunks(&html, limit);
            prop_assert!(checked.is_ok(), "{:?}", checked);
        }
    }

    #[test]
    fn strip_html_keeps_the_text(markdown in markdownish()) {
        let plain = strip_html(&to_html(&markdown));
        prop_assert!(!plain.contains("&lt;") || markdown.contains("&lt;"));
        // Formatting drops markers and link URLs, never words: the plain
        // text's letters are the Markdown's, in order, with gaps.
        let mut source = markdown.chars().filter(|c| c.is_alphabetic());
        prop_assert!(
            plain.chars().filter(|c| c.is_alphabetic()).all(|c| source.any(|s| s == c)),
            "{:?} -> {:?}", markdown, plain
        );
    }
}
