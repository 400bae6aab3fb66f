//! Reading `tokenizer.json`.
//!
//! The tokenizers crate reads a file's model through an untagged enum, so
//! serde first buffers the whole vocabulary as generic values and then
//! tries each model type on them: for BERT's 30 000 WordPiece entries that
//! is most of the time a cold process spends on its tokenizer. A file
//! whose model is WordPiece is read here straight into the WordPiece type,
//! and the tokenizer is assembled the way the crate's own reader does it
//! (the same normalizer, pre-tokenizer, post-processor and added tokens,
//! added in one call), so the token ids are the same. Any other file is
//! read by the crate.

use std::path::Path;

use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::processors::PostProcessorWrapper;
use tokenizers::{AddedToken, ModelWrapper, PaddingParams, Tokenizer, TruncationParams};

use crate::LoadError;

/// A `tokenizer.json` whose model is WordPiece.
#[derive(serde::Deserialize)]
struct WordPieceFile {
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    truncation: Option<TruncationParams>,
    #[serde(default)]
    padding: Option<PaddingParams>,
    #[serde(default)]
    added_tokens: Vec<AddedTokenWithId>,
    #[serde(default)]
    normalizer: Option<NormalizerWrapper>,
    #[serde(default)]
    pre_tokenizer: Option<PreTokenizerWrapper>,
    #[serde(default)]
    post_processor: Option<PostProcessorWrapper>,
    #[serde(default)]
    decoder: Option<DecoderWrapper>,
    model: WordPiece,
}

#[derive(serde::Deserialize)]
struct AddedTokenWithId {
    // The id is the vocabulary's business; the crate only warns on a
    // mismatch, and so the token is added the same way here.
    #[allow(dead_code)]
    id: u32,
    #[serde(flatten)]
    token: AddedToken,
}

/// The tokenizer in `path`.
pub(crate) fn read(path: &Path) -> Result<Tokenizer, LoadError> {
    let bytes = std::fs::read(path).map_err(|e| LoadError::Tokenizer(e.to_string()))?;
    if let Some(tokenizer) = word_piece(&bytes) {
        return Ok(tokenizer);
    }
    Tokenizer::from_bytes(&bytes).map_err(|e| LoadError::Tokenizer(e.to_string()))
}

/// `bytes` as a WordPiece tokenizer, or `None` when they are anything else
/// (the crate's reader then has the last word, and the error message).
fn word_piece(bytes: &[u8]) -> Option<Tokenizer> {
    let file: WordPieceFile = serde_json::from_slice(bytes).ok()?;
    if file.version.as_deref().is_some_and(|v| v != "1.0") {
        return None;
    }
    let mut tokenizer = Tokenizer::new(ModelWrapper::WordPiece(file.model));
    tokenizer.with_normalizer(file.normalizer).ok()?;
    tokenizer.with_pre_tokenizer(file.pre_tokenizer);
    tokenizer.with_post_processor(file.post_processor);
    tokenizer.with_decoder(file.decoder);
    tokenizer.with_truncation(file.truncation).ok()?;
    tokenizer.with_padding(file.padding);
    tokenizer
        .add_tokens(file.added_tokens.into_iter().map(|t| t.token))
        .ok()?;
    Some(tokenizer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_word_piece_is_left_to_the_crate() {
        let bpe = br#"{"version":"1.0","added_tokens":[],"normalizer":null,
            "pre_tokenizer":null,"post_processor":null,"decoder":null,
            "model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}"#;
        assert!(word_piece(bpe).is_none());
        let tokenizer = Tokenizer::from_bytes(bpe).unwrap();
        assert_eq!(tokenizer.encode("ab", false).unwrap().get_ids(), [2]);
        assert!(word_piece(b"{not json").is_none());
    }

    #[test]
    fn a_small_word_piece_file_reads_the_same_both_ways() {
        let file = br###"{"version":"1.0",
            "added_tokens":[{"id":0,"content":"[UNK]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},
                            {"id":1,"content":"[CLS]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},
                            {"id":2,"content":"[SEP]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],
            "normalizer":{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true},
            "pre_tokenizer":{"type":"BertPreTokenizer"},
            "post_processor":{"type":"BertProcessing","sep":["[SEP]",2],"cls":["[CLS]",1]},
            "decoder":null,
            "model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":100,
                     "vocab":{"[UNK]":0,"[CLS]":1,"[SEP]":2,"hello":3,"wor":4,"##ld":5,"!":6}}}"###;
        let ours = word_piece(file).expect("a WordPiece file");
        let theirs = Tokenizer::from_bytes(file).unwrap();
        for text in ["Hello world!", "HELLO [SEP] wor", "zebra", ""] {
            assert_eq!(
                ours.encode(text, true).unwrap().get_ids(),
                theirs.encode(text, true).unwrap().get_ids(),
                "{text:?}"
            );
        }
        assert_eq!(
            ours.encode("Hello world!", true).unwrap().get_ids(),
            [1, 3, 4, 5, 6, 2]
        );
    }

    #[test]
    fn the_model_s_tokenizer_gives_the_crate_s_ids_on_any_text() {
        let path = crate::test_model::dir().join("tokenizer.json");
        let bytes = std::fs::read(&path).unwrap();
        let mut ours = word_piece(&bytes).expect("BERT's file is WordPiece");
        let mut theirs = Tokenizer::from_file(&path).unwrap();
        let long = "The quick brown fox jumps over the lazy dog near Zürich. ".repeat(60);
        let texts = [
            "This is an example sentence",
            "Café au lait, crème brûlée, naïveté, Ångström, São Paulo",
            "e\u{301}le\u{300}ve and façade",
            "東京タワーは高い；北京欢迎你。한국어 텍스트",
            "Ελληνικά, русский текст, العربية",
            "emoji 🙂👍🏽 and symbols ©®™ ½ ≠ ∞",
            "[CLS] a literal [SEP] and [MASK] and [unk] in text",
            "tabs\tnew\nlines\r\u{0}control\u{7}chars\u{200b}zero-width",
            "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
            &"x".repeat(150),
            "UCM6308 at 192.168.1.148, e-mail me@example.com!",
            "",
            "   ",
            &long,
        ];
        // As the file says (it pads to 128), then as the encoder sets them.
        for text in ["Café au lait", "x"] {
            let a = ours.encode(text, true).unwrap();
            let b = theirs.encode(text, true).unwrap();
            assert_eq!(a.get_ids(), b.get_ids(), "{text:?}");
            assert_eq!(a.get_ids().len(), 128);
        }
        for max_length in [256, 128] {
            for tokenizer in [&mut ours, &mut theirs] {
                tokenizer.with_padding(None);
                tokenizer
                    .with_truncation(Some(tokenizers::TruncationParams {
                        max_length,
                        ..Default::default()
                    }))
                    .unwrap();
            }
            for text in texts {
                let a = ours.encode(text, true).unwrap();
                let b = theirs.encode(text, true).unwrap();
                assert_eq!(a.get_ids(), b.get_ids(), "{text:?}");
                assert_eq!(a.get_attention_mask(), b.get_attention_mask());
            }
            let cut = ours.encode(long.as_str(), true).unwrap();
            assert_eq!(cut.get_ids().len(), max_length);
            assert_eq!(cut.get_ids()[max_length - 1], 102, "[SEP] ends a cut text");
        }
    }
}
