//! Sentence embeddings on the CPU, and the int8 vectors they are kept as.
//!
//! [`Encoder`] runs a BERT-family sentence model (all-MiniLM-L6-v2 and
//! its kin) from a folder holding `config.json`, `model.safetensors` and
//! `tokenizer.json`: WordPiece tokens, the transformer, mean pooling over
//! the real tokens, L2 normalisation — what sentence-transformers does for
//! these models, so the vectors match theirs to float rounding.
//!
//! Invariants:
//! * Nothing is downloaded: a model is only ever read from its folder.
//! * The weights are memory-mapped, not read: a process that loads the
//!   model pays for the pages it touches. [`Encoder::load_fast`] reads the
//!   compact copy ([`COMPACT_FILE`]) instead when the folder has one made
//!   from its weights, and touches only the word-table rows of its text.
//! * Loading never writes: the compact copy is made by
//!   [`Encoder::build_compact`] as bytes, for the installer to write.
//! * Every vector [`Encoder::embed`] returns has unit length (a text the
//!   tokenizer finds nothing in gives the zero vector, never NaN).
//! * [`Quantized`] keeps a vector as int8 with one scale; the dot product
//!   of two quantized vectors is within about 1% of the float one.

mod bert;
mod blocks;
mod compact;
mod crew;
mod kernels;
mod ops;
mod quantize;
#[cfg(test)]
mod test_model;
mod tokenizer;
mod wide;

use std::path::Path;

pub use compact::COMPACT_FILE;
pub use quantize::{Quantized, dot_i8, dots_i8};

/// Why a model folder cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0} is missing")]
    Missing(String),
    #[error("config.json: {0}")]
    Config(String),
    #[error("model.safetensors: {0}")]
    Weights(String),
    #[error("tokenizer.json: {0}")]
    Tokenizer(String),
    #[error("{COMPACT_FILE}: {0}")]
    Compact(String),
}

/// Why a batch could not be embedded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("embedding failed: {0}")]
pub struct EmbedError(String);

/// The files a model folder must hold.
pub const MODEL_FILES: [&str; 3] = ["config.json", "model.safetensors", "tokenizer.json"];

/// The most tokens of a text the encoder reads (the rest is cut), unless
/// the folder's `sentence_bert_config.json` says otherwise.
const DEFAULT_MAX_TOKENS: usize = 256;
/// Texts per forward pass: batches of similar length waste little on
/// padding, and a batch this size keeps both cores' matrix work large.
const BATCH_TEXTS: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Weights {
    Full,
    Compact,
}

/// The length of `dir`'s `model.safetensors`, which a compact file names.
fn source_bytes(dir: &Path) -> Result<u64, LoadError> {
    std::fs::metadata(dir.join("model.safetensors"))
        .map(|m| m.len())
        .map_err(|e| LoadError::Weights(e.to_string()))
}

/// The tokenizer in a `tokenizer.json`, read the fast way when its model
/// is WordPiece (see the `tokenizer` module), with the file's own
/// truncation and padding.
pub fn read_tokenizer(path: &Path) -> Result<tokenizers::Tokenizer, LoadError> {
    tokenizer::read(path)
}

/// A loaded sentence model.
pub struct Encoder {
    model: bert::Bert,
    tokenizer: tokenizers::Tokenizer,
    max_tokens: usize,
    compact: bool,
    /// The one thread a compact encoder's forward passes run on (see
    /// [`Encoder::embed`]); `None`: the shared pool.
    own_thread: Option<rayon::ThreadPool>,
    /// The helper a compact encoder's plain pass shares its products with.
    crew: Option<crew::Crew>,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("dims", &self.dims())
            .field("max_tokens", &self.max_tokens)
            .field("compact", &self.compact)
            .finish()
    }
}

impl Encoder {
    /// Loads the model in `dir` (see [`MODEL_FILES`]) with its f32
    /// weights: the vectors a model's users compare theirs with.
    pub fn load(dir: &Path) -> Result<Encoder, LoadError> {
        Encoder::open(dir, Weights::Full)
    }

    /// Loads the model in `dir` the fastest way it can be: from its
    /// compact weights ([`COMPACT_FILE`], see [`Encoder::build_compact`])
    /// when the folder has a usable one, else as [`Encoder::load`] does.
    /// The vectors are within float noise of the f32 ones (cosine above
    /// 0.99), which is what a query compared with them needs.
    pub fn load_fast(dir: &Path) -> Result<Encoder, LoadError> {
        if dir.join(compact::COMPACT_FILE).is_file() {
            match Encoder::open(dir, Weights::Compact) {
                Ok(encoder) => return Ok(encoder),
                // A compact file that cannot be used is only a lost
                // shortcut; the f32 weights say whether the model loads.
                Err(LoadError::Compact(_)) => {}
                Err(other) => return Err(other),
            }
        }
        Encoder::load(dir)
    }

    /// Loads as [`Encoder::load_fast`] does, then, for a process that
    /// embeds many queries, copies the compact weights into the layout
    /// this CPU's fastest kernel reads in one stream: faster queries for
    /// the weights' size in private memory (about 11 MB for
    /// all-MiniLM-L6-v2) and a few milliseconds, once.
    pub fn load_for_serving(dir: &Path) -> Result<Encoder, LoadError> {
        let mut encoder = Encoder::load_fast(dir)?;
        if encoder.compact {
            encoder.model.pack();
        }
        Ok(encoder)
    }

    /// Whether the compact file in `dir` would be used by
    /// [`Encoder::load_fast`]: `Ok(false)` when there is none, an error
    /// saying what is wrong with one that is there. Reads only its header.
    pub fn compact_usable(dir: &Path) -> Result<bool, LoadError> {
        let path = dir.join(compact::COMPACT_FILE);
        if !path.is_file() {
            return Ok(false);
        }
        compact::Compact::open(&path, source_bytes(dir)?)?;
        Ok(true)
    }

    /// The bytes of the compact file ([`COMPACT_FILE`]) for the model in
    /// `dir`, made from its f32 weights. Writing it into the folder is
    /// the caller's business.
    pub fn build_compact(dir: &Path) -> Result<Vec<u8>, LoadError> {
        // The model must load as it is before a copy of it is made.
        bert::Config::read(&dir.join("config.json"))?;
        compact::build(&dir.join("model.safetensors"))
    }

    /// Whether the weights in use are the compact ones.
    pub fn is_compact(&self) -> bool {
        self.compact
    }

    fn open(dir: &Path, weights: Weights) -> Result<Encoder, LoadError> {
        for file in MODEL_FILES {
            if !dir.join(file).is_file() {
                return Err(LoadError::Missing(file.to_string()));
            }
        }
        let config = bert::Config::read(&dir.join("config.json"))?;
        let model = match weights {
            Weights::Full => bert::Bert::load(
                &bert::Safetensors::open(&dir.join("model.safetensors"))?,
                &config,
            )?,
            Weights::Compact => {
                let file =
                    compact::Compact::open(&dir.join(compact::COMPACT_FILE), source_bytes(dir)?)?;
                bert::Bert::load(&file, &config)?
            }
        };
        let mut tokenizer = tokenizer::read(&dir.join("tokenizer.json"))?;
        let max_tokens = std::fs::read(dir.join("sentence_bert_config.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            .and_then(|v| v["max_seq_length"].as_u64())
            .map_or(DEFAULT_MAX_TOKENS, |n| n as usize)
            .clamp(8, config.max_position_embeddings);
        // The file may pad every text to a fixed length; padding is done
        // here, per batch, and masked out of the mean.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(|e| LoadError::Tokenizer(e.to_string()))?;
        // Compact weights that are not all int8 blocks run the tensor pass
        // on a thread of their own; the plain pass needs none.
        let own_thread = match weights {
            Weights::Compact if !model.has_plain_pass() => rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .thread_name(|_| "almanac-embed-query".into())
                .build()
                // A failure to start a thread only loses the shortcut.
                .ok(),
            _ => None,
        };
        let crew = match weights {
            Weights::Compact if model.has_plain_pass() => crew::Crew::new(),
            _ => None,
        };
        Ok(Encoder {
            model,
            tokenizer,
            max_tokens,
            compact: weights == Weights::Compact,
            own_thread,
            crew,
        })
    }

    /// The length of the vectors.
    pub fn dims(&self) -> usize {
        self.model.hidden()
    }

    /// One unit vector per text, in order.
    ///
    /// A compact encoder serves queries: a few tokens each. Its texts go
    /// one by one through the pass without tensors, on the calling thread
    /// (at that size, tensor set-up and handing work to other threads cost
    /// more than they save); compact weights that cannot take that pass
    /// run the tensor pass on a thread of their own, apart from the pool
    /// the f32 encoder of the same process keeps busy. The f32 encoder
    /// runs texts in batches of similar length.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if self.model.has_plain_pass() {
            // No tensors and no thread pool: each text on this thread, its
            // matrix products shared with the crew's helper.
            return texts.iter().map(|text| self.embed_one(text)).collect();
        }
        match &self.own_thread {
            Some(pool) => pool.install(|| self.embed_here(texts)),
            None => self.embed_here(texts),
        }
    }

    /// A query is about to come ([`Encoder::embed_alongside`]): wakes the
    /// crew's helper now, so that it is awake to take it.
    pub fn expect_query(&self) {
        if let Some(crew) = &self.crew {
            crew.wake();
        }
    }

    /// Runs `meanwhile` on this thread while `text` is embedded on the
    /// crew's helper; `meanwhile` gets the vector from the function it is
    /// handed, which waits for it there (this thread then shares the last
    /// products). Where the helper cannot take it (one core, a model
    /// without the plain pass, another thread's query on it), the vector
    /// is made when first asked for, on the thread that asks.
    ///
    /// A search looks its words up while its query goes through the
    /// model: on two cores the two overlap instead of following each
    /// other.
    pub fn embed_alongside<R>(
        &self,
        text: &str,
        meanwhile: impl FnOnce(&(dyn Fn() -> Result<Vec<f32>, EmbedError> + Sync)) -> R,
    ) -> R {
        // Asked for twice, the vector is made once.
        let made = std::sync::Mutex::new(None::<Result<Vec<f32>, EmbedError>>);
        let once = |make: &dyn Fn() -> Result<Vec<f32>, EmbedError>| {
            let mut made = made.lock().unwrap_or_else(|p| p.into_inner());
            made.get_or_insert_with(make).clone()
        };
        match &self.crew {
            Some(crew) if self.model.has_plain_pass() => crew.lead(
                || self.embed_one(text),
                |led| {
                    meanwhile(&|| {
                        once(&|| {
                            led.wait()
                                .unwrap_or_else(|| Err(EmbedError("no vector was made".into())))
                        })
                    })
                },
            ),
            _ => meanwhile(&|| {
                once(&|| {
                    let mut vectors = self.embed(&[text])?;
                    vectors
                        .pop()
                        .ok_or_else(|| EmbedError("no vector was made".into()))
                })
            }),
        }
    }

    /// One text through the pass without tensors.
    fn embed_one(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| EmbedError(e.to_string()))?;
        match self.model.embed_one(encoding.get_ids(), self.crew.as_ref()) {
            Some(vector) => vector.map_err(|e| EmbedError(e.to_string())),
            None => Err(EmbedError("this model has no pass without tensors".into())),
        }
    }

    fn embed_here(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError(e.to_string()))?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| encodings[i].get_ids().len());
        let mut out = vec![Vec::new(); texts.len()];
        for batch in order.chunks(BATCH_TEXTS) {
            let ids: Vec<&[u32]> = batch.iter().map(|&i| encodings[i].get_ids()).collect();
            let vectors = self
                .model
                .embed(&ids)
                .map_err(|e| EmbedError(e.to_string()))?;
            for (&i, v) in batch.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_without_its_files_names_the_first_missing_one() {
        let dir = std::env::temp_dir().join(format!("almanac-embed-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = Encoder::load(&dir).unwrap_err();
        assert_eq!(err.to_string(), "config.json is missing");
        std::fs::write(dir.join("config.json"), "{not json").unwrap();
        std::fs::write(dir.join("model.safetensors"), b"").unwrap();
        std::fs::write(dir.join("tokenizer.json"), "{}").unwrap();
        let err = Encoder::load(&dir).unwrap_err();
        assert!(err.to_string().starts_with("config.json: "), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    const SENTENCES: [&str; 8] = [
        "This is an example sentence",
        "The printer on the second floor jams on A3 paper",
        "Booked flights to Lisbon for the conference in March",
        "when is my trip to Portugal",
        "Café au lait, crème brûlée et naïveté",
        "東京タワーは高い",
        "",
        "Peter joined Acme Robotics last spring as a mechanical designer",
    ];

    /// A folder with the model and its compact file, made by `build_compact`.
    fn with_compact() -> tempfile::TempDir {
        let tmp = test_model::copy();
        let bytes = Encoder::build_compact(tmp.path()).unwrap();
        std::fs::write(tmp.path().join(COMPACT_FILE), bytes).unwrap();
        tmp
    }

    #[test]
    fn a_query_embedded_alongside_other_work_is_the_query_embedded_alone() {
        let tmp = with_compact();
        let fast = Encoder::load_for_serving(tmp.path()).unwrap();
        for text in SENTENCES {
            let alone = fast.embed(&[text]).unwrap().remove(0);
            let ran = std::sync::atomic::AtomicBool::new(false);
            let (first, again) = fast.embed_alongside(text, |vector| {
                ran.store(true, std::sync::atomic::Ordering::Relaxed);
                (vector().unwrap(), vector().unwrap())
            });
            assert!(ran.into_inner());
            assert_eq!(first, alone, "{text:?}");
            assert_eq!(again, alone, "{text:?}: asked twice");
        }
        // Not asked for: the work meanwhile still runs, and nothing waits.
        assert_eq!(fast.embed_alongside("unused", |_| 3), 3);
    }

    #[test]
    fn compact_vectors_stay_within_float_noise_of_the_f32_ones() {
        let tmp = with_compact();
        let full = Encoder::load(tmp.path()).unwrap();
        let fast = Encoder::load_fast(tmp.path()).unwrap();
        assert!(!full.is_compact());
        assert!(fast.is_compact());
        let exact = full.embed(&SENTENCES).unwrap();
        let near = fast.embed(&SENTENCES).unwrap();
        // The f32 path is sentence-transformers' model (NumPy reference).
        let want = [0.0677, 0.0635, 0.0487, 0.0793, 0.0374];
        for (got, want) in exact[0].iter().zip(want) {
            assert!((got - want).abs() < 5e-4, "{:?}", &exact[0][..5]);
        }
        for ((text, a), b) in SENTENCES.iter().zip(&exact).zip(&near) {
            assert_eq!(b.len(), 384);
            if text.is_empty() {
                // Only [CLS] [SEP]: still a unit vector.
                assert!((cosine(b, b) - 1.0).abs() < 1e-4);
            }
            let c = cosine(a, b);
            assert!(c >= 0.99, "{text:?}: cosine {c}");
        }
        // A query by either path ranks the f32 items the same way.
        let items = full.embed(&SENTENCES[1..3]).unwrap();
        for (query, best) in [
            ("paper stuck in the office printer", 0),
            ("when is my trip to Portugal", 1),
            ("flying to a meeting abroad", 1),
            ("the copier keeps jamming", 0),
        ] {
            let by = |encoder: &Encoder| {
                let q = encoder.embed(&[query]).unwrap().remove(0);
                (cosine(&q, &items[0]), cosine(&q, &items[1]))
            };
            let (exact, near) = (by(&full), by(&fast));
            let pick = |(a, b): (f32, f32)| if a > b { 0 } else { 1 };
            assert_eq!(pick(exact), best, "{query:?}: {exact:?}");
            assert_eq!(pick(near), best, "{query:?}: {near:?}");
            assert!((exact.0 - near.0).abs() < 0.02 && (exact.1 - near.1).abs() < 0.02);
        }
    }

    #[test]
    fn one_text_without_tensors_gives_the_batch_pass_vector() {
        let tmp = with_compact();
        let fast = Encoder::load_fast(tmp.path()).unwrap();
        assert!(fast.model.has_plain_pass());
        assert!(!Encoder::load(tmp.path()).unwrap().model.has_plain_pass());
        // The tensor pass over the same int8 blocks, texts padded to the
        // longest of the batch.
        let batch = fast.embed_here(&SENTENCES).unwrap();
        let longest = SENTENCES.iter().map(|t| t.len()).max().unwrap();
        let single = fast.embed(&SENTENCES).unwrap();
        for ((text, b), s) in SENTENCES.iter().zip(&batch).zip(&single) {
            assert_eq!(s.len(), 384);
            assert!((cosine(s, s) - 1.0).abs() < 1e-4, "{text:?}");
            let c = cosine(b, s);
            // Padding changes the order of the float additions, which
            // can tip an activation to the next int8 step: a hair apart.
            // The longest text, not padded, differs only by the two
            // passes' own float rounding.
            let bound = if text.len() == longest {
                0.99995
            } else {
                0.9995
            };
            assert!(c > bound, "{text:?}: cosine {c}");
        }
    }

    #[test]
    fn passes_on_kept_buffers_give_what_passes_on_new_ones_give() {
        let tmp = with_compact();
        let kept = Encoder::load_fast(tmp.path()).unwrap();
        let long = SENTENCES.join(" and ").repeat(3);
        // Short, long, shorter, longer: each pass finds the buffers of a
        // text of another length.
        let mut texts: Vec<&str> = vec![SENTENCES[0], &long];
        texts.extend(SENTENCES.iter().rev());
        texts.push(&long);
        texts.push(SENTENCES[1]);
        for text in &texts {
            let got = kept.embed(&[text]).unwrap();
            let fresh = Encoder::load_fast(tmp.path()).unwrap();
            assert_eq!(got, fresh.embed(&[text]).unwrap(), "{text:?}");
            let tokens = kept.tokenizer.encode(*text, true).unwrap().get_ids().len();
            let slot = kept.model.buffers_kept();
            assert_eq!(slot, tokens <= 64, "{tokens} tokens: buffers kept {slot}");
        }
    }

    #[test]
    fn weights_laid_out_for_serving_give_the_fast_load_vectors() {
        let tmp = with_compact();
        let fast = Encoder::load_fast(tmp.path()).unwrap();
        let serving = Encoder::load_for_serving(tmp.path()).unwrap();
        assert!(serving.is_compact() && serving.model.has_plain_pass());
        for (text, (f, s)) in SENTENCES.iter().zip(
            fast.embed(&SENTENCES)
                .unwrap()
                .iter()
                .zip(serving.embed(&SENTENCES).unwrap()),
        ) {
            // The same products; only the float additions may round apart.
            let c = cosine(f, &s);
            assert!(c > 0.99999, "{text:?}: cosine {c}");
        }
    }

    #[test]
    fn without_a_usable_compact_file_the_fast_load_is_the_f32_one() {
        let tmp = test_model::copy();
        assert!(!Encoder::compact_usable(tmp.path()).unwrap());
        let fast = Encoder::load_fast(tmp.path()).unwrap();
        assert!(!fast.is_compact());
        let full = Encoder::load(tmp.path()).unwrap();
        assert_eq!(
            fast.embed(&SENTENCES).unwrap(),
            full.embed(&SENTENCES).unwrap()
        );
        let compact = Encoder::build_compact(tmp.path()).unwrap();
        let path = tmp.path().join(COMPACT_FILE);
        // Cut short, or not a GGUF file at all: not used, and said why.
        for bad in [&compact[..compact.len() / 2], b"not gguf".as_slice()] {
            std::fs::write(&path, bad).unwrap();
            assert!(matches!(
                Encoder::compact_usable(tmp.path()),
                Err(LoadError::Compact(_))
            ));
            assert!(!Encoder::load_fast(tmp.path()).unwrap().is_compact());
        }
        std::fs::write(&path, &compact).unwrap();
        assert!(Encoder::compact_usable(tmp.path()).unwrap());
        assert!(Encoder::load_fast(tmp.path()).unwrap().is_compact());
    }

    #[test]
    fn a_compact_file_made_from_other_weights_is_not_used() {
        let tmp = test_model::copy();
        let compact = Encoder::build_compact(tmp.path()).unwrap();
        std::fs::write(tmp.path().join(COMPACT_FILE), &compact).unwrap();
        // Weights of another length: the same tensors behind a header
        // padded with 8 more spaces (a new file, not the shared one).
        let weights = tmp.path().join("model.safetensors");
        let bytes = std::fs::read(&weights).unwrap();
        std::fs::remove_file(&weights).unwrap();
        let header = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let mut other = (header as u64 + 8).to_le_bytes().to_vec();
        other.extend_from_slice(&bytes[8..8 + header]);
        other.extend_from_slice(&[b' '; 8]);
        other.extend_from_slice(&bytes[8 + header..]);
        std::fs::write(&weights, other).unwrap();
        let err = Encoder::compact_usable(tmp.path()).unwrap_err();
        assert!(
            err.to_string().contains("another model.safetensors"),
            "{err}"
        );
        assert!(!Encoder::load_fast(tmp.path()).unwrap().is_compact());
    }
}
