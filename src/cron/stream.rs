//! A large job store read and rewritten as a stream: the runner of a
//! hundred thousand jobs must not hold the whole document (or a tree of
//! it) to learn its jobs or to write their runtime state back.
//!
//! * [`each_job`] hands over the text of every element of the `jobs` list
//!   in order; the rest of the document is skipped.
//! * [`rewrite`] copies a document to a writer in the store's written
//!   form (2-space indent, as [`super::store`] writes it), each element of
//!   `jobs` verbatim unless the caller gives a new value for it. The
//!   output is the same bytes a full read, change and write would give.
//! * Anything but a JSON object with a `jobs` list is an error: the
//!   caller then takes the full path, which copes with every shape.

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

/// Copies the document from `reader` to `out` in the store's written form;
/// `change` may give a job element a new value (`None` keeps its text).
/// Errors (of the reading, of `change`, of the writing) stop the copy.
pub(crate) fn rewrite(
    reader: impl Read,
    out: &mut dyn Write,
    change: &mut dyn FnMut(&RawValue) -> Result<Option<Value>, String>,
) -> io::Result<()> {
    let mut tail = LastByte {
        inner: reader,
        last: None,
    };
    {
        let mut de = serde_json::Deserializer::from_reader(io::BufReader::with_capacity(
            256 * 1024,
            &mut tail,
        ));
        let found = de
            .deserialize_map(CopyTop { out, change })
            .map_err(invalid)?;
        de.end().map_err(invalid)?;
        if !found {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "no `jobs` list"));
        }
    }
    if tail.last == Some(b'\n') {
        out.write_all(b"\n")?;
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
    change: &'c mut dyn FnMut(&RawValue) -> Result<Option<Value>, String>,
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
        self.out.write_all(b"{").map_err(io)?;
        while let Some(key) = map.next_key::<String>()? {
            let lead: &[u8] = if first { b"\n  " } else { b",\n  " };
            first = false;
            self.out.write_all(lead).map_err(io)?;
            let key_text = serde_json::to_string(&key).expect("a string serialises");
            self.out.write_all(key_text.as_bytes()).map_err(io)?;
            self.out.write_all(b": ").map_err(io)?;
            if key == "jobs" {
                if found {
                    return Err(de::Error::custom("two `jobs` lists"));
                }
                found = true;
                map.next_value_seed(CopyJobs {
                    out: &mut *self.out,
                    change: &mut *self.change,
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
    change: &'c mut dyn FnMut(&RawValue) -> Result<Option<Value>, String>,
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
        while let Some(raw) = seq.next_element::<Box<RawValue>>()? {
            let lead: &[u8] = if first { b"\n    " } else { b",\n    " };
            first = false;
            self.out.write_all(lead).map_err(io)?;
            match (self.change)(&raw).map_err(de::Error::custom)? {
                Some(value) => self.out.write_all(pretty_at(&value, 2).as_bytes()),
                None => self.out.write_all(raw.get().as_bytes()),
            }
            .map_err(io)?;
        }
        let end: &[u8] = if first { b"]" } else { b"\n  ]" };
        self.out.write_all(end).map_err(io)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        rewrite(source.as_bytes(), &mut out, &mut |raw| {
            let v: Value = serde_json::from_str(raw.get()).unwrap();
            Ok((v["id"] == "a").then(|| {
                serde_json::json!({"id": "a", "state": {"lastRunAtMs": 5, "nested": {"x": [1, 2]}}})
            }))
        })
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
        rewrite(&br#"{"jobs":[],"x":{}}"#[..], &mut out, &mut |_| Ok(None)).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\n  \"jobs\": [],\n  \"x\": {}\n}"
        );
        // A damaged document is an error, never a partial copy taken as done.
        let mut out = Vec::new();
        assert!(rewrite(&br#"{"jobs": [{"id": 1}"#[..], &mut out, &mut |_| Ok(None)).is_err());
    }
}
