//! A large job store read and rewritten as a stream: the runner of a
//! hundred thousand jobs must not hold the whole document (or a tree of
//! it) to learn its jobs or to write their runtime state back.
//!
//! * [`each_job`] hands over the text of every element of the `jobs` list
//!   in order; the rest of the document is skipped.
//! * [`rewrite`] copies a document to a writer in the store's written
//!   form (2-space indent, as [`super::store`] writes it), each element of
//!   `jobs` verbatim unless the caller gives a new value for it or leaves
//!   it out, and new elements added at the end of the list. The output is
//!   the same bytes a full read, change and write would give.
//!   [`rewrite_bytes`] does the same from a document held in memory, for
//!   a short-lived command that may hold it (several times faster).
//! * Anything but a JSON object with a `jobs` list (and no key twice at
//!   its top level) is an error: the caller then takes the full path,
//!   which copes with every shape.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Read, Write};

use serde::Deserializer as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// Calls `each` with the text of every element of the document's `jobs`
/// list. An error from `each` stops the reading and is returned.
pub(crate) fn each_job(
    reader: impl Read,
    each: &mut dyn FnMut(&RawValue) -> Result<(), String>,
) -> Result<(), String> {
    let mut de =
        serde_json::Deserializer::from_reader(io::BufReader::with_capacity(256 * 1024, reader));
    let found = de
        .deserialize_map(Top { each })
        .map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    if found {
        Ok(())
    } else {
        Err("no `jobs` list".into())
    }
}

struct Top<'f> {
    each: &'f mut dyn FnMut(&RawValue) -> Result<(), String>,
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object with a `jobs` list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut found = false;
        while let Some(key) = map.next_key::<String>()? {
            if key == "jobs" && !found {
                map.next_value_seed(Jobs {
                    each: &mut *self.each,
                })?;
                found = true;
            } else if key == "jobs" {
                return Err(de::Error::custom("two `jobs` lists"));
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

struct Jobs<'f> {
    each: &'f mut dyn FnMut(&RawValue) -> Result<(), String>,
}

impl<'de> DeserializeSeed<'de> for Jobs<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Jobs<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of jobs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(raw) = seq.next_element::<Box<RawValue>>()? {
            (self.each)(&raw).map_err(de::Error::custom)?;
        }
        Ok(())
    }
}

/// What [`rewrite`] writes for one element of the `jobs` list.
#[derive(Debug)]
pub(crate) enum Element {
    /// Its text as read.
    Keep,
    /// This value in its place.
    Replace(Value),
    /// Nothing: it is left out.
    Drop,
}

/// Copies the document from `reader` to `out` in the store's written form;
/// `change` says what becomes of each job element, and `append` is added
/// at the end of the list. Errors (of the reading, of `change`, of the
/// writing) stop the copy.
pub(crate) fn rewrite(
    reader: impl Read,
    out: &mut dyn Write,
    change: &mut dyn FnMut(&RawValue) -> Result<Element, String>,
    append: &[Value],
) -> io::Result<()> {
    let mut tail = LastByte {
        inner: reader,
        last: None,
    };
    let mut de =
        serde_json::Deserializer::from_reader(io::BufReader::with_capacity(256 * 1024, &mut tail));
    copy(&mut de, out, change, append, false)?;
    drop(de);
    if tail.last == Some(b'\n') {
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// [`rewrite`] of a document held in memory: the same output, several
/// times faster (the elements are read in place, not through a reader).
pub(crate) fn rewrite_bytes(
    bytes: &[u8],
    out: &mut dyn Write,
    change: &mut dyn FnMut(&RawValue) -> Result<Element, String>,
    append: &[Value],
) -> io::Result<()> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    copy(&mut de, out, change, append, true)?;
    if bytes.last() == Some(&b'\n') {
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// The copy itself; `borrowed`: the deserializer reads from memory, so
/// elements are borrowed from it rather than copied out.
fn copy<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
    out: &mut dyn Write,
    change: &mut dyn FnMut(&RawValue) -> Result<Element, String>,
    append: &[Value],
    borrowed: bool,
) -> io::Result<()> {
    let found = de
        .deserialize_map(CopyTop {
            out,
            change,
            append,
            borrowed,
        })
        .map_err(invalid)?;
    de.end().map_err(invalid)?;
    if !found {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "no `jobs` list"));
    }
    Ok(())
}

fn invalid(err: serde_json::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, err)
}

/// Remembers the last byte read (a trailing newline is kept).
struct LastByte<R> {
    inner: R,
    last: Option<u8>,
}

impl<R: Read> Read for LastByte<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            self.last = Some(buf[n - 1]);
        }
        Ok(n)
    }
}

/// `value` pretty-printed as it appears `depth` levels deep.
fn pretty_at(value: &Value, depth: usize) -> String {
    let text = serde_json::to_string_pretty(value).expect("a value serialises");
    text.replace('\n', &format!("\n{}", "  ".repeat(depth)))
}

struct CopyTop<'o, 'c> {
    out: &'o mut dyn Write,
    change: &'c mut dyn FnMut(&RawValue) -> Result<Element, String>,
    append: &'c [Value],
    borrowed: bool,
}

impl<'de> Visitor<'de> for CopyTop<'_, '_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object with a `jobs` list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let io = |e: io::Error| de::Error::custom(e);
        let mut found = false;
        let mut first = true;
        // A key given twice is read once by the full path (the last value
        // in the first place): a copy would differ.
        let mut keys = std::collections::HashSet::new();
        self.out.write_all(b"{").map_err(io)?;
        while let Some(key) = map.next_key::<String>()? {
            if !keys.insert(key.clone()) {
                return Err(de::Error::custom(format!("`{key}` twice")));
            }
            let lead: &[u8] = if first { b"\n  " } else { b",\n  " };
            first = false;
            self.out.write_all(lead).map_err(io)?;
            let key_text = serde_json::to_string(&key).expect("a string serialises");
            self.out.write_all(key_text.as_bytes()).map_err(io)?;
            self.out.write_all(b": ").map_err(io)?;
            if key == "jobs" {
                found = true;
                map.next_value_seed(CopyJobs {
                    out: &mut *self.out,
                    change: &mut *self.change,
                    append: self.append,
                    borrowed: self.borrowed,
                })?;
            } else {
                let value = map.next_value::<Value>()?;
                self.out
                    .write_all(pretty_at(&value, 1).as_bytes())
                    .map_err(io)?;
            }
        }
        let end: &[u8] = if first { b"}" } else { b"\n}" };
        self.out.write_all(end).map_err(io)?;
        Ok(found)
    }
}

struct CopyJobs<'o, 'c> {
    out: &'o mut dyn Write,
    change: &'c mut dyn FnMut(&RawValue) -> Result<Element, String>,
    append: &'c [Value],
    borrowed: bool,
}

impl<'de> DeserializeSeed<'de> for CopyJobs<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for CopyJobs<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of jobs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let io = |e: io::Error| de::Error::custom(e);
        let mut first = true;
        self.out.write_all(b"[").map_err(io)?;
        loop {
            let raw: Cow<'de, RawValue> = if self.borrowed {
                match seq.next_element::<&'de RawValue>()? {
                    Some(raw) => Cow::Borrowed(raw),
                    None => break,
                }
            } else {
                match seq.next_element::<Box<RawValue>>()? {
                    Some(raw) => Cow::Owned(raw),
                    None => break,
                }
            };
            let text = match (self.change)(&raw).map_err(de::Error::custom)? {
                Element::Keep => Cow::Borrowed(raw.get()),
                Element::Replace(value) => Cow::Owned(pretty_at(&value, 2)),
                Element::Drop => continue,
            };
            element(self.out, &mut first, &text).map_err(io)?;
        }
        for value in self.append {
            element(self.out, &mut first, &pretty_at(value, 2)).map_err(io)?;
        }
        let end: &[u8] = if first { b"]" } else { b"\n  ]" };
        self.out.write_all(end).map_err(io)?;
        Ok(())
    }
}

/// One element of the `jobs` list, after the one before it if any.
fn element(out: &mut dyn Write, first: &mut bool, text: &str) -> io::Result<()> {
    let lead: &[u8] = if *first { b"\n    " } else { b",\n    " };
    *first = false;
    out.write_all(lead)?;
    out.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The copy from a reader, checked against the copy from memory: the
    /// same bytes, or both refuse.
    fn rewrite(
        source: &[u8],
        out: &mut Vec<u8>,
        change: &mut dyn FnMut(&RawValue) -> Result<Element, String>,
        append: &[Value],
    ) -> io::Result<()> {
        let mut held = Vec::new();
        let from_memory = super::rewrite_bytes(source, &mut held, change, append);
        let streamed = super::rewrite(source, out, change, append);
        assert_eq!(streamed.is_ok(), from_memory.is_ok());
        if streamed.is_ok() {
            assert_eq!(String::from_utf8_lossy(out), String::from_utf8_lossy(&held));
        }
        streamed
    }

    #[test]
    fn each_job_hands_over_every_element_and_refuses_other_shapes() {
        let doc = br#"{"version": 1, "other": {"a": [1, 2]}, "jobs": [{"id": "a"}, 7, {"id": "b", "x": [1]}]}"#;
        let mut seen = Vec::new();
        each_job(&doc[..], &mut |raw| {
            seen.push(raw.get().to_string());
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [r#"{"id": "a"}"#, "7", r#"{"id": "b", "x": [1]}"#]);
        for bad in [
            &br#"{"version": 1}"#[..],
            br#"{"jobs": {}}"#,
            br#"[1]"#,
            br#"{"jobs": [1]"#,
            br#"{"jobs": [], "jobs": []}"#,
            b"{jobs: []}",
        ] {
            assert!(
                each_job(bad, &mut |_| Ok(())).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let stop = each_job(&br#"{"jobs": [1, 2]}"#[..], &mut |_| Err("enough".into()));
        assert!(stop.unwrap_err().contains("enough"));
    }

    /// The store's written form: what serde_json's pretty printer makes of
    /// the document (untouched elements verbatim).
    fn written(doc: &Value) -> String {
        serde_json::to_string_pretty(doc).unwrap()
    }

    #[test]
    fn rewrite_gives_the_written_form_with_changed_jobs_only() {
        let source = "{\n  \"version\": 1,\n  \"meta\": {\"k\": [1, {\"z\": null}]},\n  \"jobs\": [\n    {\n      \"id\": \"a\",\n      \"state\": {}\n    },\n    {\"id\":\"b\",   \"keep\": \"as written\"}\n  ],\n  \"after\": []\n}\n";
        let mut out = Vec::new();
        rewrite(
            source.as_bytes(),
            &mut out,
            &mut |raw| {
                let v: Value = serde_json::from_str(raw.get()).unwrap();
                Ok(if v["id"] == "a" {
                    Element::Replace(
                        serde_json::json!({"id": "a", "state": {"lastRunAtMs": 5, "nested": {"x": [1, 2]}}}),
                    )
                } else {
                    Element::Keep
                })
            },
            &[],
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        // The untouched job as written, byte for byte.
        assert!(
            text.contains("{\"id\":\"b\",   \"keep\": \"as written\"}"),
            "{text}"
        );
        // The same as the full path would write: parse, change, pretty.
        let mut full: Value = serde_json::from_str(source).unwrap();
        full["jobs"][0] =
            serde_json::json!({"id": "a", "state": {"lastRunAtMs": 5, "nested": {"x": [1, 2]}}});
        full["jobs"][1] = serde_json::json!("PLACEHOLDER");
        let expected = written(&full).replace(
            "\"PLACEHOLDER\"",
            "{\"id\":\"b\",   \"keep\": \"as written\"}",
        ) + "\n";
        assert_eq!(text, expected);
        // Without a trailing newline in, none out; empty lists and objects.
        let mut out = Vec::new();
        rewrite(
            &br#"{"jobs":[],"x":{}}"#[..],
            &mut out,
            &mut |_| Ok(Element::Keep),
            &[],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\n  \"jobs\": [],\n  \"x\": {}\n}"
        );
        // A damaged document is an error, never a partial copy taken as done.
        for damaged in [
            &br#"{"jobs": [{"id": 1}"#[..],
            br#"{"jobs": [], "jobs": []}"#,
            br#"{"jobs": [], "x": 1, "x": 2}"#,
        ] {
            let mut out = Vec::new();
            assert!(
                rewrite(damaged, &mut out, &mut |_| Ok(Element::Keep), &[]).is_err(),
                "{}",
                String::from_utf8_lossy(damaged)
            );
        }
    }

    #[test]
    fn rewrite_leaves_out_and_adds_elements_as_the_full_path_writes_them() {
        let source = written(
            &serde_json::json!({"jobs": [{"id": "a"}, {"id": "b", "n": [1]}, {"id": "c"}]}),
        ) + "\n";
        let added = serde_json::json!({"id": "d", "schedule": {"kind": "every", "everyMs": 60000}});
        for left_out in ["a", "b", "c", "none"] {
            let mut out = Vec::new();
            rewrite(
                source.as_bytes(),
                &mut out,
                &mut |raw| {
                    let v: Value = serde_json::from_str(raw.get()).unwrap();
                    Ok(if v["id"] == left_out {
                        Element::Drop
                    } else {
                        Element::Keep
                    })
                },
                std::slice::from_ref(&added),
            )
            .unwrap();
            let mut full: Value = serde_json::from_str(&source).unwrap();
            let jobs = full["jobs"].as_array_mut().unwrap();
            jobs.retain(|j| j["id"] != left_out);
            jobs.push(added.clone());
            assert_eq!(String::from_utf8(out).unwrap(), written(&full) + "\n");
        }
        // Every element left out: an empty list, as the full path writes it.
        let mut out = Vec::new();
        rewrite(source.as_bytes(), &mut out, &mut |_| Ok(Element::Drop), &[]).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "{\n  \"jobs\": []\n}\n");
    }
}
