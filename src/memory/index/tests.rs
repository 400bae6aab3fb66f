use super::indexing::{FTS_TABLES, MAX_SEGMENTS, segments};
use super::*;
use crate::durable::atomic_replace;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

pub(crate) struct Fixture {
    _dir: tempfile::TempDir,
    pub(crate) root: PathBuf,
    db: PathBuf,
}

pub(crate) fn fixture(files: &[(&str, &str)]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir_all(&root).unwrap();
    for (rel, text) in files {
        atomic_replace(&root.join(rel), text.as_bytes(), 0o600).unwrap();
    }
    let db = dir.path().join("index.sqlite");
    Fixture {
        _dir: dir,
        root,
        db,
    }
}

fn tz() -> TimeZone {
    TimeZone::get("Europe/Paris").unwrap()
}

pub(crate) fn open(f: &Fixture) -> Index {
    Index::open(&f.db, files::Layout::new(&f.root), tz()).unwrap()
}

pub(crate) fn wall_ns() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

fn paths_lines(hits: &[Hit]) -> Vec<String> {
    hits.iter()
        .map(|h| format!("{}:{}", h.path, h.start_line))
        .collect()
}

/// Makes a file look untouched for a month (outside the quick-sync window).
fn age(path: &Path) {
    let old = SystemTime::now() - Duration::from_secs(30 * 24 * 3600);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(old)
        .unwrap();
}

const DAY1: &str = "# 2026-11-01\n\n- [2026-11-01 09:00] Alice booked the dentist\n- [2026-11-01 10:00] Standup moved to 9am\n";
const DAY2: &str = "# 2026-11-02\n\n- [2026-11-02 09:00] Standup moved to 9am\n- [2026-11-02 11:00] 用户喜欢早上九点开站会\n";
const LONG: &str = "# Long-term memory\n\n## Preferences\n- Always use dark terminal theme\n- Standup moved to 9am\n";

#[test]
fn full_sync_indexes_items_with_dates_headings_and_lines() {
    let f = fixture(&[("memory/2026-11-01.md", DAY1), ("MEMORY.md", LONG)]);
    let mut idx = open(&f);
    let report = idx.sync(SyncMode::Quick, wall_ns()).unwrap();
    assert_eq!(report.mode, "full", "an empty index is built in full");
    assert_eq!(report.files_indexed, 2);
    assert_eq!(report.items_indexed, 4);
    let hits = idx.search("dentist", 5, None).unwrap();
    assert_eq!(paths_lines(&hits), vec!["memory/2026-11-01.md:3"]);
    let h = &hits[0];
    assert_eq!(h.stamp.as_deref(), Some("2026-11-01 09:00"));
    assert_eq!(h.day.as_deref(), Some("2026-11-01"));
    assert_eq!(h.body, "Alice booked the dentist");
    assert_eq!(h.kind, FileKind::Daily);
    let theme = idx.search("terminal theme", 5, None).unwrap();
    assert_eq!(theme[0].heading, "Long-term memory > Preferences");
    assert_eq!(theme[0].kind, FileKind::LongTerm);
}

#[test]
fn search_handles_stems_case_accents_cjk_and_hostile_queries() {
    let f = fixture(&[
        ("memory/2026-11-01.md", DAY1),
        ("memory/2026-11-02.md", DAY2),
        (
            "memory/notes.md",
            "- Meeting at the Café Straße\n- the theme park trip\n",
        ),
    ]);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let first = |q: &str| {
        idx.search(q, 5, None)
            .unwrap()
            .first()
            .map(|h| h.body.clone())
    };
    assert_eq!(
        first("meetings").as_deref(),
        Some("Meeting at the Café Straße")
    );
    assert_eq!(
        first("CAFE strasse").as_deref(),
        Some("Meeting at the Café Straße")
    );
    assert_eq!(first("喜欢站会").as_deref(), Some("用户喜欢早上九点开站会"));
    assert_eq!(first("站会").as_deref(), Some("用户喜欢早上九点开站会"));
    // `the` no longer matches `theme`: it is a stop word, not a substring.
    assert!(idx.search("the", 5, None).unwrap().is_empty());
    for hostile in [
        "\"",
        "(",
        "AND OR NOT",
        "*",
        "^",
        "NEAR(",
        "a:b",
        "!!!",
        "'",
        "-",
        "\\",
    ] {
        let hits = idx.search(hostile, 5, None).unwrap();
        assert!(hits.iter().all(|h| !h.body.is_empty()), "{hostile}");
    }
    assert!(
        idx.search("\"AND\" (OR) NOT *", 5, None)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn duplicates_are_returned_once_as_the_long_term_copy_and_ties_prefer_newer() {
    let f = fixture(&[
        ("memory/2026-11-01.md", DAY1),
        ("memory/2026-11-02.md", DAY2),
        ("MEMORY.md", LONG),
    ]);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let hits = idx.search("standup 9am", 10, None).unwrap();
    assert_eq!(
        paths_lines(&hits),
        vec!["MEMORY.md:5"],
        "one memory, three copies"
    );
    let no_lt = idx
        .search("standup 9am", 10, Some(&[FileKind::Daily]))
        .unwrap();
    assert_eq!(
        paths_lines(&no_lt),
        vec!["memory/2026-11-02.md:3"],
        "newer copy wins the tie"
    );
}

#[test]
fn recent_lists_the_newest_dated_items_first() {
    let f = fixture(&[
        ("memory/2026-11-01.md", DAY1),
        ("memory/2026-11-02.md", DAY2),
    ]);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let recent = idx.recent(2, None).unwrap();
    assert_eq!(
        paths_lines(&recent),
        vec!["memory/2026-11-02.md:4", "memory/2026-11-02.md:3"]
    );
}

#[test]
fn quick_sync_sees_added_removed_and_replaced_files_and_memory_md_edits() {
    let f = fixture(&[("memory/2026-11-01.md", DAY1), ("MEMORY.md", LONG)]);
    age(&f.root.join("memory/2026-11-01.md"));
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();

    // A new daily file (directory changes).
    atomic_replace(&f.root.join("memory/2026-11-02.md"), DAY2.as_bytes(), 0o600).unwrap();
    let r = idx.sync(SyncMode::Quick, wall_ns()).unwrap();
    assert_eq!((r.mode, r.files_indexed), ("quick", 1));
    assert!(!idx.search("站会", 5, None).unwrap().is_empty());

    // An old file saved by an editor that renames (new inode).
    atomic_replace(
        &f.root.join("memory/2026-11-01.md"),
        b"- [2026-11-01 09:00] Bob booked the vet\n",
        0o600,
    )
    .unwrap();
    age(&f.root.join("memory/2026-11-01.md"));
    idx.sync(SyncMode::Quick, wall_ns()).unwrap();
    assert!(idx.search("dentist", 5, None).unwrap().is_empty());
    assert_eq!(idx.search("vet", 5, None).unwrap().len(), 1);

    // MEMORY.md edited in place (same inode, same directory).
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(f.root.join("MEMORY.md"))
        .unwrap();
    std::io::Write::write_all(&mut file, b"- Loves hiking in the Alps\n").unwrap();
    drop(file);
    idx.sync(SyncMode::Quick, wall_ns()).unwrap();
    assert_eq!(idx.search("hiking", 5, None).unwrap().len(), 1);

    // A removed file.
    std::fs::remove_file(f.root.join("memory/2026-11-02.md")).unwrap();
    let r = idx.sync(SyncMode::Quick, wall_ns()).unwrap();
    assert_eq!(r.files_removed, 1);
    assert!(idx.search("站会", 5, None).unwrap().is_empty());

    // Nothing changed: a quick sync touches nothing.
    let r = idx.sync(SyncMode::Quick, wall_ns()).unwrap();
    assert_eq!((r.files_indexed, r.files_removed), (0, 0));
}

#[test]
fn in_place_edits_of_old_files_are_caught_by_the_periodic_full_scan() {
    let f = fixture(&[("memory/2026-11-01.md", DAY1)]);
    let path = f.root.join("memory/2026-11-01.md");
    age(&path);
    let mut idx = open(&f);
    let t0 = wall_ns();
    idx.sync(SyncMode::Full, t0).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut file, b"- [2026-11-01 12:00] Picked up the parcel\n").unwrap();
    drop(file);
    age(&path);
    idx.sync(SyncMode::Quick, t0 + 1).unwrap();
    assert!(
        idx.search("parcel", 5, None).unwrap().is_empty(),
        "quick sync does not stat old files"
    );
    let r = idx
        .sync(SyncMode::Quick, t0 + FULL_SCAN_INTERVAL_NS + 1)
        .unwrap();
    assert_eq!(r.mode, "full");
    assert_eq!(idx.search("parcel", 5, None).unwrap().len(), 1);
}

#[test]
fn a_turn_can_leave_a_due_full_scan_for_later() {
    let f = fixture(&[("memory/2026-11-01.md", DAY1)]);
    let path = f.root.join("memory/2026-11-01.md");
    age(&path);
    let mut idx = open(&f);
    let t0 = wall_ns();
    // Never scanned in full: scanned now whatever the mode.
    let r = idx.sync(SyncMode::QuickOnly, t0).unwrap();
    assert_eq!((r.mode, r.full_scan_due), ("full", false));
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut file, b"- [2026-11-01 12:00] Picked up the parcel\n").unwrap();
    drop(file);
    age(&path);
    let later = t0 + FULL_SCAN_INTERVAL_NS + 1;
    // Due, but left to the caller, who is told.
    let r = idx.sync(SyncMode::QuickOnly, later).unwrap();
    assert_eq!((r.mode, r.full_scan_due), ("quick", true));
    assert!(idx.search("parcel", 5, None).unwrap().is_empty());
    // The caller's scan catches the edit.
    let r = idx.sync(SyncMode::Quick, later).unwrap();
    assert_eq!((r.mode, r.full_scan_due), ("full", false));
    assert_eq!(idx.search("parcel", 5, None).unwrap().len(), 1);
    let r = idx.sync(SyncMode::QuickOnly, later + 1).unwrap();
    assert_eq!((r.mode, r.full_scan_due), ("quick", false));
}

#[test]
fn a_deleted_index_is_rebuilt_with_identical_results() {
    let f = fixture(&[
        ("memory/2026-11-01.md", DAY1),
        ("memory/2026-11-02.md", DAY2),
        ("MEMORY.md", LONG),
    ]);
    let queries = ["standup", "dentist Alice", "站会", "theme", ""];
    let run = |f: &Fixture| -> Vec<Vec<(String, usize, String)>> {
        let mut idx = open(f);
        idx.sync(SyncMode::Quick, wall_ns()).unwrap();
        queries
            .iter()
            .map(|q| {
                let hits = if q.is_empty() {
                    idx.recent(10, None)
                } else {
                    idx.search(q, 10, None)
                }
                .unwrap();
                hits.into_iter()
                    .map(|h| (h.path, h.start_line, format!("{:.6}", h.score)))
                    .collect()
            })
            .collect()
    };
    let before = run(&f);
    crate::store::remove_database_files(&f.db);
    assert!(!f.db.exists());
    assert_eq!(run(&f), before);
}

#[test]
fn a_kept_connection_is_current_only_while_its_file_and_settings_are() {
    let f = fixture(&[("memory/2026-11-01.md", DAY1)]);
    let layout = files::Layout::new(&f.root);
    let mut kept = open(&f);
    kept.sync(SyncMode::Full, wall_ns()).unwrap();
    assert!(kept.is_current(&f.db, &layout, &tz()));
    // Other settings: another time zone, another layout, another file.
    assert!(!kept.is_current(&f.db, &layout, &TimeZone::UTC));
    let other_root = f.root.join("memory");
    assert!(!kept.is_current(&f.db, &files::Layout::new(&other_root), &tz()));
    assert!(!kept.is_current(&f.db.with_extension("other"), &layout, &tz()));
    // Another process opened it for another zone (and cleared it).
    drop(Index::open(&f.db, layout.clone(), TimeZone::UTC).unwrap());
    assert!(!kept.is_current(&f.db, &layout, &tz()));
    let mut kept = open(&f);
    kept.sync(SyncMode::Full, wall_ns()).unwrap();
    assert!(kept.is_current(&f.db, &layout, &tz()));
    // Deleted, or deleted and built again: a new file, not this one.
    crate::store::remove_database_files(&f.db);
    assert!(!kept.is_current(&f.db, &layout, &tz()));
    let mut rebuilt = open(&f);
    rebuilt.sync(SyncMode::Full, wall_ns()).unwrap();
    assert!(!kept.is_current(&f.db, &layout, &tz()));
    assert!(rebuilt.is_current(&f.db, &layout, &tz()));
    assert!(
        !Index::open_in_memory(layout.clone(), tz())
            .unwrap()
            .is_current(&f.db, &layout, &tz())
    );
}

#[test]
fn non_utf8_files_are_indexed_with_a_warning_not_dropped() {
    let f = fixture(&[]);
    crate::durable::atomic_replace(
        &f.root.join("memory/2026-11-03.md"),
        b"- caf\xe9 latte with Bob\n",
        0o600,
    )
    .unwrap();
    let mut idx = open(&f);
    let r = idx.sync(SyncMode::Full, wall_ns()).unwrap();
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("not valid UTF-8"));
    assert_eq!(idx.search("latte", 5, None).unwrap().len(), 1);
}

#[test]
fn timestamps_follow_the_user_zone_and_a_zone_change_rebuilds() {
    let f = fixture(&[("memory/2026-11-01.md", DAY1)]);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let hit = idx.search("dentist", 1, None).unwrap().remove(0);
    // 09:00 in Paris (UTC+1 in November) is 08:00 UTC.
    assert_eq!(hit.ts, Some(1_793_520_000));
    drop(idx);
    let mut utc = Index::open(&f.db, files::Layout::new(&f.root), TimeZone::UTC).unwrap();
    assert_eq!(
        utc.stats().unwrap().files,
        0,
        "a different zone clears the index"
    );
    utc.sync(SyncMode::Quick, wall_ns()).unwrap();
    let hit = utc.search("dentist", 1, None).unwrap().remove(0);
    assert_eq!(hit.ts, Some(1_793_523_600));
}

#[test]
fn refresh_indexes_just_written_files_immediately() {
    let f = fixture(&[("memory/2026-11-01.md", DAY1)]);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    crate::durable::locked_append(
        &f.root.join("memory/2026-11-01.md"),
        b"- [2026-11-01 18:00] Quillfeather hotel QF-5521\n",
        0o600,
        false,
    )
    .unwrap();
    idx.refresh(&["memory/2026-11-01.md".to_string()]).unwrap();
    let hits = idx.search("Quillfeather", 5, None).unwrap();
    assert_eq!(paths_lines(&hits), vec!["memory/2026-11-01.md:5"]);
}

#[test]
fn appends_add_only_new_items_and_continuations_reindex_the_file() {
    let f = fixture(&[("memory/2026-11-01.md", DAY1)]);
    let path = f.root.join("memory/2026-11-01.md");
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let ids_before: Vec<i64> = idx
        .items_of("memory/2026-11-01.md")
        .unwrap()
        .iter()
        .map(|h| h.id)
        .collect();
    crate::durable::locked_append(
        &path,
        b"- [2026-11-01 12:00] lunch with Grace\n",
        0o600,
        false,
    )
    .unwrap();
    let r = idx.refresh(&["memory/2026-11-01.md".to_string()]).unwrap();
    assert_eq!(r.items_indexed, 1, "only the new note is indexed");
    let items = idx.items_of("memory/2026-11-01.md").unwrap();
    assert_eq!(
        items.iter().map(|h| h.id).take(2).collect::<Vec<_>>(),
        ids_before,
        "old items kept"
    );
    assert_eq!(items.len(), 3);
    assert_eq!(items[2].start_line, 5);
    // A continuation line extends the last item: the file is re-indexed.
    crate::durable::locked_append(&path, b"  and dessert\n", 0o600, false).unwrap();
    let r = idx.refresh(&["memory/2026-11-01.md".to_string()]).unwrap();
    assert_eq!(r.items_indexed, 3);
    let hits = idx.search("dessert", 5, None).unwrap();
    assert_eq!(hits[0].body, "lunch with Grace\nand dessert");
    assert_eq!(
        idx.search("lunch", 5, None).unwrap().len(),
        1,
        "no stale copy"
    );
}

#[test]
fn corpus_totals_and_postings_stay_consistent_through_changes() {
    let f = fixture(&[
        ("memory/2026-11-01.md", DAY1),
        ("memory/2026-11-02.md", DAY2),
        ("MEMORY.md", LONG),
    ]);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let check = |idx: &Index| {
        let (items, terms): (i64, i64) = idx
            .store
            .conn
            .query_row(
                "SELECT count(*), coalesce(sum(nterms), 0) FROM items",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let corpus = idx.corpus().unwrap();
        assert_eq!((corpus.items as i64, corpus.terms as i64), (items, terms));
        // Every posting points at a live item.
        for term in ["standup", "dentist", "alic", "站会", "prefer"] {
            for id in idx.postings("items_fts", term).unwrap() {
                let live: i64 = idx
                    .store
                    .conn
                    .query_row("SELECT count(*) FROM items WHERE id = ?1", [id], |r| {
                        r.get(0)
                    })
                    .unwrap();
                assert_eq!(live, 1, "stale posting for {term}");
            }
        }
    };
    check(&idx);
    atomic_replace(
        &f.root.join("memory/2026-11-01.md"),
        b"# 2026-11-01\n\n- [2026-11-01 09:00] Standup cancelled\n",
        0o600,
    )
    .unwrap();
    std::fs::remove_file(f.root.join("memory/2026-11-02.md")).unwrap();
    idx.sync(SyncMode::Full, wall_ns() + 1).unwrap();
    check(&idx);
    assert!(idx.search("dentist", 5, None).unwrap().is_empty());
    idx.sync(SyncMode::Rebuild, wall_ns() + 2).unwrap();
    check(&idx);
    assert_eq!(idx.search("cancelled", 5, None).unwrap().len(), 1);
}

#[test]
fn bm25_prefers_more_matched_terms_then_shorter_items() {
    let f = fixture(&[(
        "memory/topics.md",
        "- garden tomatoes\n- garden tomatoes basil\n- garden notes about many unrelated things like fences and paint and tools\n- garden\n",
    )]);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let hits = idx.search("garden tomatoes basil", 4, None).unwrap();
    let bodies: Vec<&str> = hits.iter().map(|h| h.body.as_str()).collect();
    assert_eq!(bodies[0], "garden tomatoes basil");
    assert_eq!(bodies[1], "garden tomatoes");
    assert_eq!(
        bodies[2], "garden",
        "a short item beats a long one with the same match"
    );
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    assert!(hits.iter().all(|h| h.score > 0.0 && h.score < 1.0));
}

fn ranked(idx: &Index, q: search::Query<'_>) -> Vec<String> {
    paths_lines(&idx.search_with(&q).unwrap().hits)
}

const CHAT: &str = "# 2026-03-02\n\n## Lunch\n\n- [12:00] Ana: Where did you eat on Friday?\n- [12:01] Bo: The ramen place by the river.\n- [12:02] Ana: Was it good?\n\n## Later\n\n- [18:00] Bo: Paid the electricity bill.\n";

#[test]
fn neighbours_lend_context_under_the_same_heading() {
    let f = fixture(&[("memory/2026-03-02.md", CHAT)]);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let q = |context_hits| search::Query {
        text: "where did Ana eat on Friday",
        limit: 10,
        context_hits,
        ..search::Query::default()
    };
    // The answer (line 6) shares no word with the question but follows it.
    let with = ranked(&idx, q(true));
    assert_eq!(with[0], "memory/2026-03-02.md:5");
    assert!(
        with.contains(&"memory/2026-03-02.md:6".to_string()),
        "{with:?}"
    );
    // Another heading is another conversation: no context across it.
    assert!(
        !with.contains(&"memory/2026-03-02.md:11".to_string()),
        "{with:?}"
    );
    // Off, only items with a query term are hits.
    let without = ranked(&idx, q(false));
    assert_eq!(
        without,
        vec!["memory/2026-03-02.md:5", "memory/2026-03-02.md:7"]
    );
    // Context attached to a hit.
    let hits = idx
        .search_with(&search::Query {
            text: "ramen river",
            context: 1,
            ..search::Query::default()
        })
        .unwrap()
        .hits;
    assert_eq!(hits[0].before[0].body, "Ana: Where did you eat on Friday?");
    assert_eq!(hits[0].after[0].body, "Ana: Was it good?");
}

#[test]
fn entities_the_query_names_are_preferred_and_phrases_count() {
    let f = fixture(&[(
        "memory/2026-03-03.md",
        "- talked to Ana about the garden plan\n- talked about the garden plan with the neighbours\n- the plan for the garden\n",
    )]);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let out = idx
        .search_with(&search::Query {
            text: "what did Ana say about the garden plan",
            ..search::Query::default()
        })
        .unwrap();
    assert_eq!(out.entities, vec!["ana"]);
    assert_eq!(paths_lines(&out.hits)[0], "memory/2026-03-03.md:1");
    // `garden plan` in that order beats the same words apart.
    let hits = ranked(
        &idx,
        search::Query {
            text: "garden plan",
            ..search::Query::default()
        },
    );
    assert_eq!(hits[2], "memory/2026-03-03.md:3", "{hits:?}");
}

#[test]
fn time_phrases_filter_or_fall_back_to_words() {
    let f = fixture(&[
        ("memory/2026-03-02.md", "- paid the electricity bill\n"),
        ("memory/2026-04-02.md", "- paid the water bill this week\n"),
    ]);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let today = jiff::civil::date(2026, 4, 20);
    let q = |text| search::Query {
        text,
        today: Some(today),
        ..search::Query::default()
    };
    let march = idx.search_with(&q("bill in March")).unwrap();
    assert_eq!(paths_lines(&march.hits), vec!["memory/2026-03-02.md:1"]);
    assert_eq!(march.time_phrase.as_deref(), Some("in March"));
    // No note from this week (2026-04-20): the phrase is words in a note.
    let week = idx.search_with(&q("bill this week")).unwrap();
    assert_eq!(week.unmatched_time_phrase.as_deref(), Some("this week"));
    assert_eq!(paths_lines(&week.hits)[0], "memory/2026-04-02.md:1");
    // An explicit range is strict.
    let strict = idx
        .search_with(&search::Query {
            text: "bill",
            range: crate::memory::when::DayRange {
                since: Some(jiff::civil::date(2026, 4, 1)),
                until: None,
            },
            ..search::Query::default()
        })
        .unwrap();
    assert_eq!(paths_lines(&strict.hits), vec!["memory/2026-04-02.md:1"]);
}

#[test]
fn reading_only_the_newest_postings_of_a_common_word_changes_nothing() {
    // 2,600 notes hold "plan", "note" and "number" (more than the partial
    // read takes); a few also hold rarer words.
    let mut text = String::from("# Log\n\n");
    for i in 0..2600 {
        let extra = match i % 97 {
            0 => " with the garden crew",
            13 => " near the garden",
            29 => " about the roof",
            _ => "",
        };
        text.push_str(&format!("- plan note number {i}{extra}\n"));
    }
    let f = fixture(&[
        ("memory/notes.md", &text),
        ("memory/2026-01-01.md", "- plan the roof garden\n"),
        ("memory/2026-01-02.md", "# Plan\n\n- the garden again\n"),
    ]);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    // "number" and "note" are in no heading (the shortcut applies);
    // "plan" is in one.
    for query in [
        "plan",
        "garden plan",
        "number",
        "garden number",
        "roof number crew",
        "number of the garden",
        "note number",
        "crew note number",
    ] {
        for limit in [1, 5, 20] {
            let q = |exhaustive| search::Query {
                text: query,
                limit,
                exhaustive,
                ..search::Query::default()
            };
            let fast = idx.search_with(&q(false)).unwrap().hits;
            let full = idx.search_with(&q(true)).unwrap().hits;
            let key = |hits: &[Hit]| {
                hits.iter()
                    .map(|h| (h.id, (h.score * 1e9).round() as i64))
                    .collect::<Vec<_>>()
            };
            assert_eq!(key(&fast), key(&full), "{query} / {limit}");
        }
    }
}

/// Limits from a caller (the model's tool arguments, a config value) are
/// capped, never a panic or an unbounded read.
#[test]
fn huge_limits_are_capped() {
    let f = fixture(&[
        ("memory/2026-11-01.md", DAY1),
        ("memory/2026-11-02.md", DAY2),
    ]);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let q = search::Query {
        text: "standup",
        limit: usize::MAX,
        context: usize::MAX,
        ..search::Query::default()
    };
    let hits = idx.search_with(&q).unwrap().hits;
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|h| h.before.len() + h.after.len() <= 4));
    assert_eq!(idx.search("alice", usize::MAX, None).unwrap().len(), 1);
    assert!(idx.recent(usize::MAX, None).unwrap().len() >= 3);
    assert!(idx.entity("Alice", usize::MAX).unwrap().is_some());
}

#[test]
fn quick_sync_and_refresh_never_read_through_a_link_leaving_the_root() {
    let f = fixture(&[("memory/2026-11-01.md", DAY1)]);
    let outside = f.root.parent().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.md"), "- the vault code is 4321\n").unwrap();
    let mut index = open(&f);
    index.sync(SyncMode::Full, wall_ns()).unwrap();
    // Links made after the full scan: found by the quick sync (the folder
    // changed) or named to refresh (as after an append).
    std::os::unix::fs::symlink(outside.join("secret.md"), f.root.join("memory/leak.md")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.md"), f.root.join("MEMORY.md")).unwrap();
    let report = index.sync(SyncMode::Quick, wall_ns()).unwrap();
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.starts_with("skipping memory/leak.md: symlink leaves")),
        "{:?}",
        report.warnings
    );
    let report = index.refresh(&["MEMORY.md".to_string()]).unwrap();
    assert!(
        report.warnings[0].starts_with("skipping MEMORY.md: symlink leaves"),
        "{:?}",
        report.warnings
    );
    assert!(index.search("vault code", 10, None).unwrap().is_empty());
    // Allowed, the same files are indexed (the index starts over).
    let layout = files::Layout::new(&f.root)
        .with_allowed_targets(&[std::fs::canonicalize(&outside).unwrap()]);
    let mut allowed = Index::open(&f.db, layout, tz()).unwrap();
    allowed.sync(SyncMode::Quick, wall_ns()).unwrap();
    for rel in ["MEMORY.md", "memory/leak.md"] {
        let items = allowed.items_of(rel).unwrap();
        assert_eq!(items.len(), 1, "{rel}");
        assert!(items[0].body.contains("vault code"), "{rel}");
    }
}

#[test]
fn the_index_answers_retention_only_when_it_listed_the_daily_folders() {
    let f = fixture(&[
        ("memory/2026-10-01.md", DAY1),
        ("memory/2026-11-02.md", DAY2),
        ("memory/2024/2024-01-01.md", DAY1),
    ]);
    let mut index = open(&f);
    // A fresh index that was only asked to refresh one file cannot tell.
    index
        .refresh(&["memory/2026-11-02.md".to_string()])
        .unwrap();
    assert_eq!(index.has_daily_before("2026-11-01").unwrap(), None);
    index.sync(SyncMode::Full, wall_ns()).unwrap();
    assert_eq!(index.has_daily_before("2026-11-01").unwrap(), Some(true));
    // Files in subfolders are not retention's (clear moves only the top
    // level), so nothing is due before October.
    assert_eq!(index.has_daily_before("2026-10-01").unwrap(), Some(false));
    // A file added by hand since the listing: the index cannot tell again.
    std::fs::write(f.root.join("memory/2020-01-01.md"), "- old\n").unwrap();
    let later = SystemTime::now() + Duration::from_secs(5);
    std::fs::File::open(f.root.join("memory"))
        .unwrap()
        .set_modified(later)
        .unwrap();
    assert_eq!(index.has_daily_before("2026-10-01").unwrap(), None);
}

/// The items of `rel` as a fresh index built from the files gives them.
fn rebuilt_items(f: &Fixture, rel: &str) -> Vec<(usize, usize, String, String, Option<String>)> {
    let dir = tempfile::tempdir().unwrap();
    let mut idx = Index::open(
        &dir.path().join("fresh.sqlite"),
        files::Layout::new(&f.root),
        tz(),
    )
    .unwrap();
    idx.sync(SyncMode::Rebuild, wall_ns()).unwrap();
    item_summary(&idx, rel)
}

fn item_summary(idx: &Index, rel: &str) -> Vec<(usize, usize, String, String, Option<String>)> {
    idx.items_of(rel)
        .unwrap()
        .into_iter()
        .map(|h| (h.start_line, h.end_line, h.heading, h.body, h.stamp))
        .collect()
}

/// A long day file: `n` notes under two headings.
fn long_day(n: usize) -> String {
    let mut text = String::from("# 2026-11-01\n\n## Work\n");
    for i in 0..n {
        if i == n / 2 {
            text.push_str("## Home\n");
        }
        text.push_str(&format!(
            "- [2026-11-01 09:{:02}] note {i} about the roadmap\n",
            i % 60
        ));
    }
    text
}

#[test]
fn a_refresh_after_an_append_reads_only_the_new_bytes() {
    let rel = "memory/2026-11-01.md";
    let f = fixture(&[(rel, &long_day(3000))]);
    let path = f.root.join(rel);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size > 100_000);
    for (i, note) in [
        "- [2026-11-01 18:00] Quillfeather hotel QF-5521\n",
        "- [2026-11-01 18:05] second\n  with a continuation\n\n```\n# not a heading\n",
        "- [2026-11-01 18:06] inside the fence\n```\n### Later\n- [2026-11-01 18:07] after it\n",
    ]
    .iter()
    .enumerate()
    {
        crate::durable::locked_append(&path, note.as_bytes(), 0o600, false).unwrap();
        let r = idx.refresh(&[rel.to_string()]).unwrap();
        assert!(
            r.bytes_read <= TAIL_WINDOW + note.len() as u64,
            "append {i}: read {} bytes of a {size}-byte file",
            r.bytes_read
        );
        assert_eq!(
            item_summary(&idx, rel),
            rebuilt_items(&f, rel),
            "append {i}"
        );
    }
    let hits = idx.search("Quillfeather", 5, None).unwrap();
    assert_eq!(hits[0].heading, "2026-11-01 > Home");
    assert_eq!(hits[0].start_line, 3005);
    // The totals are those of a rebuilt index.
    let corpus = idx.corpus().unwrap();
    let terms: i64 = idx
        .store
        .conn
        .query_row("SELECT sum(nterms) FROM items", [], |r| r.get(0))
        .unwrap();
    assert_eq!(corpus.terms as i64, terms);
    // The next full scan reads the grown file whole once to confirm it.
    let r = idx.sync(SyncMode::Full, wall_ns()).unwrap();
    assert_eq!(r.bytes_read, std::fs::metadata(&path).unwrap().len());
    assert_eq!(r.items_indexed, 0, "confirmed, nothing re-indexed");
    let r = idx.sync(SyncMode::Full, wall_ns()).unwrap();
    assert_eq!(r.bytes_read, 0);
}

/// Overwrites bytes of `path` at `offset` in place (same inode).
fn write_in_place(path: &Path, offset: u64, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(bytes).unwrap();
}

#[test]
fn an_in_place_edit_of_a_grown_file_is_still_caught() {
    let rel = "memory/2026-11-01.md";
    let text = long_day(3000);
    let f = fixture(&[(rel, &text)]);
    let path = f.root.join(rel);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let append = |n: usize| {
        let note = format!("- [2026-11-01 19:00] appended {n}\n");
        crate::durable::locked_append(&path, note.as_bytes(), 0o600, false).unwrap();
    };
    // Near the old end (within the bytes compared): seen at once.
    let last = text.rfind("note 2999").unwrap() as u64;
    write_in_place(&path, last, b"node");
    append(1);
    let r = idx.refresh(&[rel.to_string()]).unwrap();
    assert!(
        r.bytes_read > TAIL_WINDOW * 10,
        "read whole: {}",
        r.bytes_read
    );
    assert_eq!(item_summary(&idx, rel), rebuilt_items(&f, rel));
    // Far before it, same length, then an append: the refresh cannot see
    // it, the next full scan does.
    let early = text.find("note 7 ").unwrap() as u64;
    write_in_place(&path, early, b"zork");
    append(2);
    idx.refresh(&[rel.to_string()]).unwrap();
    let r = idx.sync(SyncMode::Full, wall_ns()).unwrap();
    assert_eq!(r.files_indexed, 1);
    assert_eq!(item_summary(&idx, rel), rebuilt_items(&f, rel));
    assert_eq!(idx.search("zork", 5, None).unwrap().len(), 1);
    // A file replaced by one that starts the same (a new inode) and a file
    // that shrank are read whole.
    let now = std::fs::read_to_string(&path).unwrap();
    atomic_replace(
        &path,
        format!("{now}- [2026-11-01 20:00] renamed over\n").as_bytes(),
        0o600,
    )
    .unwrap();
    let r = idx.refresh(&[rel.to_string()]).unwrap();
    assert!(r.bytes_read > TAIL_WINDOW * 10);
    assert_eq!(item_summary(&idx, rel), rebuilt_items(&f, rel));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(now.len() as u64 - 40)
        .unwrap();
    append(3);
    idx.refresh(&[rel.to_string()]).unwrap();
    assert_eq!(item_summary(&idx, rel), rebuilt_items(&f, rel));
}

#[test]
fn appended_notes_do_not_pile_up_index_segments() {
    let rel = "memory/2026-11-01.md";
    let f = fixture(&[(rel, &long_day(2000))]);
    let path = f.root.join(rel);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    for table in FTS_TABLES {
        assert_eq!(segments(&idx.store.conn, table), 1, "{table} after a build");
    }
    for i in 0..300 {
        let note = format!("- [2026-11-01 20:00] appended note {i} about the budget\n");
        crate::durable::locked_append(&path, note.as_bytes(), 0o600, false).unwrap();
        idx.refresh(&[rel.to_string()]).unwrap();
    }
    for table in FTS_TABLES {
        let n = segments(&idx.store.conn, table);
        assert!(n <= 3, "{table}: {n} segments after 300 appends");
    }
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    for table in FTS_TABLES {
        assert!(
            segments(&idx.store.conn, table) <= MAX_SEGMENTS,
            "{table} after a full scan"
        );
    }
    assert_eq!(item_summary(&idx, rel), rebuilt_items(&f, rel));
    assert_eq!(
        idx.search("appended note 299", 1, None).unwrap()[0].start_line,
        2304
    );
}

/// Notes in which "plan", "note" and "budget" are very common.
fn common_words_day(day: u32, n: usize) -> String {
    let mut text = format!("# 2026-10-{day:02}\n\n");
    for i in 0..n {
        let words = match i % 7 {
            0 => "plan note budget",
            1 | 2 => "plan note",
            3 => "note budget",
            4 => "plan budget",
            5 => "budget review",
            _ => "plan",
        };
        let rare = if i % 211 == 0 { " with Zephyrine" } else { "" };
        text.push_str(&format!(
            "- [2026-10-{day:02} 09:{:02}] {words} {day}-{i}{rare}\n",
            i % 60
        ));
    }
    text
}

#[test]
fn common_words_are_counted_without_reading_their_lists_and_match_a_full_read() {
    let files: Vec<(String, String)> = (1..=6)
        .map(|d| {
            (
                format!("memory/2026-10-{d:02}.md"),
                common_words_day(d, 700),
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let f = fixture(&refs);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let kept = |idx: &Index, term: &str| -> Option<i64> {
        idx.store
            .conn
            .query_row("SELECT docs FROM term_docs WHERE term = ?1", [term], |r| {
                r.get(0)
            })
            .optional()
            .unwrap()
    };
    let counted = |idx: &Index, term: &str| idx.count_docs(term).unwrap() as i64;
    let same = |idx: &Index, label: &str| {
        for query in [
            "plan",
            "plan note",
            "plan note budget",
            "budget review plan",
            "Zephyrine plan note",
            "note 3-350",
        ] {
            for limit in [1, 10, 40] {
                let q = |exhaustive| search::Query {
                    text: query,
                    limit,
                    exhaustive,
                    ..search::Query::default()
                };
                let fast = idx.search_with(&q(false)).unwrap().hits;
                let full = idx.search_with(&q(true)).unwrap().hits;
                let key = |hits: &[Hit]| {
                    hits.iter()
                        .map(|h| (h.id, (h.score * 1e9).round() as i64))
                        .collect::<Vec<_>>()
                };
                assert_eq!(key(&fast), key(&full), "{label}: {query} / {limit}");
            }
        }
    };
    assert_eq!(kept(&idx, "plan"), None);
    same(&idx, "built");
    for term in ["plan", "note", "budget"] {
        assert_eq!(
            kept(&idx, term),
            Some(counted(&idx, term)),
            "{term} kept once found"
        );
    }
    // The kept counts follow appends, replaced and removed files, and a
    // search reads them instead of counting.
    let day6 = f.root.join("memory/2026-10-06.md");
    crate::durable::locked_append(
        &day6,
        b"- [2026-10-06 18:00] plan note budget again\n",
        0o600,
        false,
    )
    .unwrap();
    idx.refresh(&["memory/2026-10-06.md".to_string()]).unwrap();
    atomic_replace(
        &f.root.join("memory/2026-10-02.md"),
        common_words_day(2, 300).as_bytes(),
        0o600,
    )
    .unwrap();
    std::fs::remove_file(f.root.join("memory/2026-10-03.md")).unwrap();
    idx.sync(SyncMode::Full, wall_ns() + 1).unwrap();
    for term in ["plan", "note", "budget"] {
        assert_eq!(
            kept(&idx, term),
            Some(counted(&idx, term)),
            "{term} after changes"
        );
    }
    let score = |idx: &Index| idx.search("plan", 1, None).unwrap()[0].score;
    let real = score(&idx);
    idx.store
        .conn
        .execute("UPDATE term_docs SET docs = 3000 WHERE term = 'plan'", [])
        .unwrap();
    assert!(score(&idx) < real, "the kept count is what a search uses");
    idx.store
        .conn
        .execute(
            "UPDATE term_docs SET docs = ?1 WHERE term = 'plan'",
            [counted(&idx, "plan")],
        )
        .unwrap();
    same(&idx, "changed");
    idx.sync(SyncMode::Rebuild, wall_ns() + 2).unwrap();
    assert_eq!(kept(&idx, "plan"), None, "a rebuild starts over");
}

#[test]
fn a_search_does_not_wait_for_another_writer_to_keep_a_count() {
    let files: Vec<(String, String)> = (1..=2)
        .map(|d| {
            (
                format!("memory/2026-10-{d:02}.md"),
                common_words_day(d, 700),
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let f = fixture(&refs);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let writer = rusqlite::Connection::open(&f.db).unwrap();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = std::time::Instant::now();
    let hits = idx.search("plan", 3, None).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "waited for the writer"
    );
    assert_eq!(hits.len(), 3);
    let kept: i64 = idx
        .store
        .conn
        .query_row("SELECT count(*) FROM term_docs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(kept, 0, "nothing kept while another process writes");
    writer.execute_batch("ROLLBACK").unwrap();
    idx.search("plan", 3, None).unwrap();
    let kept: i64 = idx
        .store
        .conn
        .query_row("SELECT count(*) FROM term_docs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(kept, 1);
}

#[test]
fn a_search_reads_in_one_transaction_while_another_process_writes() {
    use super::search::{LateVector, Query, QueryVector};
    let f = fixture(&[(
        "memory/2026-11-02.md",
        "- the gate code for the storage unit is 7719\n- the car goes to the doctor on Tuesday\n",
    )]);
    let mut idx = open(&f);
    idx.sync(SyncMode::Full, wall_ns()).unwrap();
    let idx = idx;
    let db = f.db.clone();
    let seen = std::sync::Mutex::new(None);
    // Asked for the query's vector halfway, after the words' candidates
    // were read, another process writes and checkpoints: it does not wait
    // for the search, and cannot copy back what the search's snapshot
    // still reads around (a search reading statement by statement holds
    // no snapshot between them).
    let late = LateVector::new(
        || {
            let writer = rusqlite::Connection::open(&db).unwrap();
            writer.busy_timeout(Duration::ZERO).unwrap();
            writer
                .execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('probe', 'x')",
                    [],
                )
                .unwrap();
            let (log, copied): (i64, i64) = writer
                .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                    Ok((r.get(1)?, r.get(2)?))
                })
                .unwrap();
            *seen.lock().unwrap() = Some((log, copied));
            None::<QueryVector>
        },
        Option::as_ref,
    );
    let found = idx
        .search_with(&Query {
            text: "gate code",
            vector: Some(&late),
            ..Query::default()
        })
        .unwrap();
    assert_eq!(found.hits.len(), 1);
    let (log, copied) = seen.lock().unwrap().expect("the vector was asked for");
    assert!(
        copied < log,
        "the search held no snapshot: {copied} of {log} copied"
    );
    assert!(idx.store.conn.is_autocommit(), "the transaction was ended");
}
