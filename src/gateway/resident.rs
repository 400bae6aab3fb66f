//! What an idle gateway keeps resident: after work that built and dropped
//! a lot (a memory refresh, a job store read) it gives back the
//! allocator's free pages; once its start has settled, and when an idle
//! component drops what it held, it also unmaps the executable's pages
//! that work mapped.
//!
//! Why the executable's pages: the kernel maps 64 KiB of the binary around
//! every page a process first runs, so start-up alone (argument parsing,
//! config, SQLite, the HTTP stack) leaves about 10 MB of code mapped that
//! an idle gateway never runs again. Unmapping them is always safe for a
//! read-only mapping that holds only the file's own pages (no private
//! copies): the next use maps the same bytes again from the page cache.

/// Returns the allocators' free memory to the OS, after work that built
/// and dropped a lot (a memory refresh, a job store read): mimalloc's (the
/// gateway's allocator, `host::allocator`) and glibc's (SQLite's, and
/// what was allocated before the gateway started).
pub(crate) fn release_free_memory() {
    // SAFETY: mi_collect only frees and returns the calling thread's and
    // abandoned free pages; other threads' are returned by mimalloc itself
    // once they stay free.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the OS.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// What a gateway that goes idle gives back (once start-up has settled,
/// and when idle components drop what they held): the allocator's free
/// pages and the executable's mapped pages (see the module doc). Returns
/// the kilobytes of executable pages unmapped. Blocking (it reads
/// `/proc/self/smaps`).
pub(crate) fn release_unused_memory() -> u64 {
    release_free_memory();
    unmap_executable_pages()
}

/// Keeps glibc's allocator (SQLite's) to a few arenas: glibc gives each
/// busy thread one (the blocking pool has many), and what one frees is
/// kept in it, so a long-running daemon's resident memory would grow with
/// its thread count.
pub(crate) fn limit_allocator_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator; called before the runtime
    // starts its threads.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// One mapping of `/proc/self/smaps`, as far as unmapping needs it.
#[derive(Debug, Default, PartialEq)]
struct Mapping {
    start: usize,
    end: usize,
    perms: String,
    /// `major:minor inode`: which file is mapped.
    file: String,
    rss_kb: u64,
    /// Private copies (unknown until the line is read).
    anonymous_kb: Option<u64>,
}

impl Mapping {
    /// Read-only and private, with every resident page the file's own: its
    /// pages can be dropped and mapped again unchanged.
    fn droppable(&self) -> bool {
        let perms = self.perms.as_bytes();
        perms.len() == 4
            && perms[0] == b'r'
            && perms[1] != b'w'
            && perms[3] == b'p'
            && self.anonymous_kb == Some(0)
            && self.rss_kb > 0
    }
}

/// The mappings of an smaps text; a line it does not understand is
/// skipped.
fn parse_smaps(text: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            )
        {
            let perms = fields.next().unwrap_or_default().to_string();
            let _offset = fields.next();
            let dev = fields.next().unwrap_or_default();
            let inode = fields.next().unwrap_or_default();
            out.push(Mapping {
                start,
                end,
                perms,
                file: format!("{dev} {inode}"),
                ..Mapping::default()
            });
            continue;
        }
        let Some(current) = out.last_mut() else {
            continue;
        };
        let value = || fields.clone().next().and_then(|v| v.parse::<u64>().ok());
        match first {
            "Rss:" => current.rss_kb = value().unwrap_or(0),
            // Unreadable means possibly private copies: never dropped.
            "Anonymous:" => current.anonymous_kb = value(),
            _ => {}
        }
    }
    out
}

/// This executable's droppable mappings, as `/proc/self/smaps` lists them
/// now (none where it cannot be read).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn droppable_executable_mappings() -> Vec<Mapping> {
    let Ok(text) = std::fs::read_to_string("/proc/self/smaps") else {
        return Vec::new();
    };
    let mappings = parse_smaps(&text);
    // The executable is the file mapped where this function's code is.
    let here = droppable_executable_mappings as *const () as usize;
    let Some(exe) = mappings
        .iter()
        .find(|m| m.start <= here && here < m.end)
        .map(|m| m.file.clone())
    else {
        return Vec::new();
    };
    mappings
        .into_iter()
        .filter(|m| m.file == exe && m.droppable())
        .collect()
}

/// Unmaps the resident pages of this executable's droppable mappings;
/// returns their kilobytes.
fn unmap_executable_pages() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let mut released = 0;
        for m in droppable_executable_mappings() {
            // SAFETY: the range is one whole mapping of this process, read
            // only and holding no private copies, so dropping its pages
            // loses nothing: a later access maps the file's bytes again.
            let rc = unsafe {
                libc::madvise(
                    m.start as *mut libc::c_void,
                    m.end - m.start,
                    libc::MADV_DONTNEED,
                )
            };
            if rc == 0 {
                released += m.rss_kb;
            }
        }
        released
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0000000-55d0c0594000 r--p 00000000 fe:00 5313061                    /opt/almanac
Size:               5712 kB
Rss:                2004 kB
Anonymous:             0 kB
55d0c0595000-55d0c16d6000 r-xp 00594000 fe:00 5313061                    /opt/almanac
Size:              17668 kB
Rss:               10468 kB
Anonymous:             0 kB
55d0c16d6000-55d0c17a1000 r--p 016d4000 fe:00 5313061                    /opt/almanac
Size:                812 kB
Rss:                 812 kB
Anonymous:           812 kB
55d0c17a1000-55d0c17aa000 rw-p 0179e000 fe:00 5313061                    /opt/almanac
Rss:                  36 kB
Anonymous:            36 kB
7f0000000000-7f0000100000 rw-p 00000000 00:00 0                          [heap]
Rss:                 760 kB
Anonymous:           760 kB
";

    #[test]
    fn smaps_mappings_are_read_with_their_resident_and_private_pages() {
        let maps = parse_smaps(SMAPS);
        assert_eq!(maps.len(), 5);
        assert_eq!(maps[1].start, 0x55d0c0595000);
        assert_eq!(maps[1].end, 0x55d0c16d6000);
        assert_eq!(maps[1].perms, "r-xp");
        assert_eq!(maps[1].file, "fe:00 5313061");
        assert_eq!((maps[1].rss_kb, maps[1].anonymous_kb), (10468, Some(0)));
        assert_eq!(maps[4].file, "00:00 0");
    }

    #[test]
    fn only_read_only_mappings_holding_just_the_files_pages_are_dropped() {
        let droppable: Vec<bool> = parse_smaps(SMAPS).iter().map(Mapping::droppable).collect();
        // Code and read-only data: yes. Relocated read-only data (private
        // copies), writable data and the heap: never.
        assert_eq!(droppable, [true, true, false, false, false]);
        // A mapping whose private pages are not stated is kept.
        for text in [
            "1000-2000 r--p 0 fe:00 1 /x\nRss: 4 kB\nAnonymous: ? kB\n",
            "1000-2000 r--p 0 fe:00 1 /x\nRss: 4 kB\n",
        ] {
            assert!(!parse_smaps(text)[0].droppable(), "{text}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_executables_mapped_code_is_given_back_and_runs_on() {
        let resident_code_kb = || -> u64 {
            droppable_executable_mappings()
                .iter()
                .map(|m| m.rss_kb)
                .sum()
        };
        let before = resident_code_kb();
        let released = release_unused_memory();
        let after = resident_code_kb();
        assert!(
            released > 0 && before > 0,
            "released {released} kB of {before} kB"
        );
        // Other tests run meanwhile and map some code again, far less than
        // the test binary's start mapped.
        assert!(
            after < before,
            "{after} kB resident after, {before} kB before"
        );
        // The code that was unmapped still runs.
        assert_eq!(parse_smaps(SMAPS).len(), 5);
    }
}
