use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use super::*;

const NOW: i64 = 1_796_000_000_000;
const DAY: i64 = 24 * 60 * 60 * 1000;

fn item(text: &str) -> Item {
    Item {
        source: Source::Heartbeat,
        session_key: "agent:main:main".into(),
        agent_id: "main".into(),
        text: text.into(),
        task_id: None,
        to: None,
        channel: None,
        account_id: None,
    }
}

#[test]
fn ids_follow_the_clock_and_always_go_up() {
    assert_eq!(next_id(0, NOW), NOW as u64 * 1000);
    assert_eq!(next_id(NOW as u64 * 1000 + 5, NOW), NOW as u64 * 1000 + 6);
    // The clock went back: still after the last one.
    assert_eq!(
        next_id(NOW as u64 * 1000, NOW - 60_000),
        NOW as u64 * 1000 + 1
    );
    assert_eq!(next_id(7, -5), 8);
}

#[test]
fn appended_entries_read_back_oldest_first_in_private_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("outbox");
    let outbox = Outbox::open(&out).unwrap();
    let mut with_task = item("second\nwith a second line");
    with_task.source = Source::Cron;
    with_task.task_id = Some("t-1".into());
    let a = outbox.append(&item("first"), NOW, 0).unwrap().entry;
    let b = outbox.append(&with_task, NOW, 0).unwrap().entry;
    let c = outbox.append(&item("third"), NOW + 5, 0).unwrap().entry;
    assert_eq!(a.id, (NOW as u64 * 1000).to_string());
    assert_eq!(b.seq(), a.seq() + 1, "same millisecond: the next number");
    assert_eq!(c.seq(), (NOW as u64 + 5) * 1000);
    let (entries, unreadable) = read_all(&out).unwrap();
    assert_eq!(unreadable, 0);
    assert_eq!(entries, vec![a.clone(), b.clone(), c]);
    let text = std::fs::read_to_string(out.join(FILE_NAME)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            r#"{{"id":"{}","ts":{NOW},"source":"heartbeat","sessionKey":"agent:main:main","agentId":"main","text":"first"}}"#,
            a.id
        ),
        "taskId is left out when there is none"
    );
    assert!(lines[1].contains(r#""source":"cron""#) && lines[1].ends_with(r#""taskId":"t-1"}"#));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&out), 0o700);
    assert_eq!(mode(&out.join(FILE_NAME)), 0o600);
    // A writer that comes later continues the numbering from the file.
    let later = Outbox::open(&out).unwrap();
    assert_eq!(later.last_id().unwrap(), (NOW as u64 + 5) * 1000);
    let d = later.append(&item("fourth"), NOW, 0).unwrap().entry;
    assert_eq!(d.seq(), (NOW as u64 + 5) * 1000 + 1);
}

#[test]
fn two_writers_never_tear_lines_and_ids_are_unique_and_in_file_order() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("outbox");
    const EACH: usize = 300;
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let out = out.clone();
            std::thread::spawn(move || {
                // Each writer opens the files itself, as another process does.
                let outbox = Outbox::open(&out).unwrap();
                for n in 0..EACH {
                    let text = format!("w{w} n{n} {}", "x".repeat((n * 37) % 900));
                    outbox.append(&item(&text), NOW, 0).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let (entries, unreadable) = read_all(&out).unwrap();
    assert_eq!(unreadable, 0, "no torn or glued line");
    assert_eq!(entries.len(), 2 * EACH);
    let ids: Vec<u64> = entries.iter().map(Entry::seq).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids strictly increase in file order"
    );
    for w in 0..2 {
        let mine: Vec<usize> = entries
            .iter()
            .filter_map(|e| e.text.strip_prefix(&format!("w{w} n")))
            .map(|rest| rest.split(' ').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(mine, (0..EACH).collect::<Vec<_>>(), "writer {w} in order");
    }
}

#[test]
fn a_torn_last_line_is_skipped_and_the_next_entry_starts_a_line_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("outbox");
    let writer = Outbox::open(&out).unwrap();
    let a = writer.append(&item("kept"), NOW, 0).unwrap().entry;
    // Another writer killed mid-line.
    std::fs::OpenOptions::new()
        .append(true)
        .open(out.join(FILE_NAME))
        .unwrap()
        .write_all(br#"{"id":"99999999999999999","ts":1,"sou"#)
        .unwrap();
    let (entries, unreadable) = read_all(&out).unwrap();
    assert_eq!((entries.len(), unreadable), (1, 1));
    let b = writer
        .append(&item("after the crash"), NOW, 0)
        .unwrap()
        .entry;
    assert_eq!(b.seq(), a.seq() + 1, "the torn line's id does not count");
    // A command's writer (its own open, synced) continues the same way.
    let c = append_synced(&out, &item("from a command"), NOW).unwrap();
    assert_eq!(c.seq(), b.seq() + 1);
    let (entries, unreadable) = read_all(&out).unwrap();
    assert_eq!(entries, vec![a, b, c]);
    assert_eq!(unreadable, 1);
}

#[test]
fn pruning_drops_only_old_entries_and_keeps_the_rest_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("outbox");
    let outbox = Outbox::open(&out).unwrap();
    for (age, text) in [
        (40 * DAY, "forty days"),
        (30 * DAY + 1, "just over thirty"),
        (30 * DAY, "exactly thirty"),
        (DAY, "yesterday"),
    ] {
        outbox.append(&item(text), NOW - age, 0).unwrap();
    }
    let path = out.join(FILE_NAME);
    let before = std::fs::read(&path).unwrap();
    let kept_from = before
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(1)
        .unwrap()
        .0
        + 1;
    assert_eq!(prune(&out, NOW).unwrap(), 2);
    assert_eq!(std::fs::read(&path).unwrap(), &before[kept_from..]);
    let (entries, _) = read_all(&out).unwrap();
    assert_eq!(
        entries.iter().map(|e| e.text.as_str()).collect::<Vec<_>>(),
        ["exactly thirty", "yesterday"]
    );
    // Nothing old: the file is left alone (not even rewritten).
    let inode = std::fs::metadata(&path).unwrap().ino();
    assert_eq!(prune(&out, NOW).unwrap(), 0);
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
    // The writer opened before the rewrite appends to the new file.
    let e = outbox.append(&item("today"), NOW, 0).unwrap().entry;
    let (entries, _) = read_all(&out).unwrap();
    assert_eq!(entries.last(), Some(&e));
    assert_eq!(entries.len(), 3);
    // Everything old: an empty file; ids keep going up.
    assert_eq!(prune(&out, NOW + 60 * DAY).unwrap(), 3);
    assert_eq!(std::fs::read(&path).unwrap(), b"");
    let next = outbox
        .append(&item("much later"), NOW + 60 * DAY, 0)
        .unwrap();
    assert!(next.entry.seq() > e.seq());
    // No outbox at all: nothing to do, nothing created.
    let none = dir.path().join("none");
    assert_eq!(prune(&none, NOW).unwrap(), 0);
    assert!(!none.exists());
}

#[test]
fn unreadable_lines_at_the_head_go_with_the_old_entries() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("outbox");
    std::fs::create_dir_all(&out).unwrap();
    let recent = serde_json::to_string(&Entry {
        id: "5".into(),
        ts: NOW,
        source: Source::Hook,
        session_key: "hook:x".into(),
        agent_id: "main".into(),
        text: "recent".into(),
        task_id: None,
        to: None,
        channel: None,
        account_id: None,
    })
    .unwrap();
    std::fs::write(
        out.join(FILE_NAME),
        format!("not json\n{recent}\ngarbage in the middle\n"),
    )
    .unwrap();
    assert_eq!(prune(&out, NOW).unwrap(), 0, "no entry dropped");
    assert_eq!(
        std::fs::read_to_string(out.join(FILE_NAME)).unwrap(),
        format!("{recent}\ngarbage in the middle\n"),
        "the unreadable head went; the rest is as it was"
    );
}

#[test]
fn a_reader_follows_appends_and_rewrites_without_repeating_or_skipping() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("outbox");
    let mut reader = Reader::new(out.join(FILE_NAME), None);
    assert!(reader.poll().unwrap().entries.is_empty(), "no file yet");
    assert!(!out.exists(), "reading created nothing");
    let writer = Outbox::open(&out).unwrap();
    let other = Outbox::open(&out).unwrap();
    let a = writer.append(&item("a"), NOW - 40 * DAY, 0).unwrap();
    let b = other.append(&item("b"), NOW, 0).unwrap();
    let texts = |p: Polled| p.entries.into_iter().map(|e| e.text).collect::<Vec<_>>();
    assert_eq!(texts(reader.poll().unwrap()), ["a", "b"]);
    assert!(reader.poll().unwrap().entries.is_empty());
    // Announced in order: the next one needs no read.
    let c = writer.append(&item("c"), NOW, 0).unwrap();
    assert_eq!(
        reader.announced(&c),
        Announced::Next(Box::new(c.entry.clone()))
    );
    assert_eq!(reader.announced(&a), Announced::Seen);
    // Another writer wrote in between: the reader must look at the file.
    let _d = other.append(&item("d"), NOW, 0).unwrap();
    let e = writer.append(&item("e"), NOW, 0).unwrap();
    assert_eq!(reader.announced(&e), Announced::Gap);
    assert_eq!(texts(reader.poll().unwrap()), ["d", "e"]);
    assert_eq!(reader.announced(&e), Announced::Seen);
    // Pruning replaced the file: read from its start, only what is new.
    assert_eq!(prune(&out, NOW).unwrap(), 1);
    let f = other.append(&item("f"), NOW, 0).unwrap();
    assert_eq!(reader.announced(&f), Announced::Gap);
    assert_eq!(texts(reader.poll().unwrap()), ["f"]);
    // Starting after an id returns only what follows it.
    let mut resumed = Reader::new(out.join(FILE_NAME), Some(b.entry.seq()));
    assert_eq!(texts(resumed.poll().unwrap()), ["c", "d", "e", "f"]);
    assert_eq!(resumed.last(), Some(f.entry.seq()));
}
