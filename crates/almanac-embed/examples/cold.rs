//! What a cold process pays to embed one short query: loading the
//! tokenizer, loading the weights, the first query.
//!
//!   cargo run --release -p almanac-embed --example cold -- <model dir> [runs]
//!
//! The folder should hold the compact file (`almanac memory model
//! install` writes it). Every run is a fresh process (this program started
//! again with `--once`), so nothing is warm but the page cache; the
//! medians are printed.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

const QUERY: &str = "when is the dentist appointment";

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// One cold run of `mode`; prints `load query` in ms.
fn once(dir: &Path, mode: &str) {
    let tokenizer = dir.join("tokenizer.json");
    let t = Instant::now();
    let encoder = match mode {
        "tokenizer-crate" => {
            tokenizers::Tokenizer::from_file(&tokenizer).unwrap();
            None
        }
        "tokenizer" => {
            almanac_embed::read_tokenizer(&tokenizer).unwrap();
            None
        }
        "f32" => Some(almanac_embed::Encoder::load(dir).unwrap()),
        _ => Some(almanac_embed::Encoder::load_fast(dir).unwrap()),
    };
    let load = ms(t);
    let t = Instant::now();
    if let Some(encoder) = encoder {
        assert_eq!(encoder.is_compact(), mode == "fast", "{mode}");
        let v = encoder.embed(&[QUERY]).unwrap();
        assert_eq!(v[0].len(), encoder.dims());
    }
    println!("{load:.2} {:.2}", ms(t));
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = Path::new(args.get(1).expect("usage: cold <model dir> [runs]"));
    if args.get(2).map(String::as_str) == Some("--once") {
        once(dir, &args[3]);
        return;
    }
    let runs: usize = args.get(2).map_or(11, |n| n.parse().unwrap());
    let me = std::env::current_exe().unwrap();
    let mut medians = Vec::new();
    for mode in ["tokenizer-crate", "tokenizer", "f32", "fast"] {
        let (mut load, mut query) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let out = Command::new(&me)
                .arg(dir)
                .args(["--once", mode])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let line = String::from_utf8(out.stdout).unwrap();
            let mut parts = line.split_whitespace().map(|x| x.parse::<f64>().unwrap());
            load.push(parts.next().unwrap());
            query.push(parts.next().unwrap());
        }
        let (load, query) = (median(load), median(query));
        println!(
            "{mode:>16}: load {load:6.1} ms, first query {query:5.1} ms (median of {runs} processes)"
        );
        medians.push((load, query));
    }
    let [
        (tok_crate, _),
        (tok, _),
        (f32_load, f32_query),
        (fast_load, fast_query),
    ] = medians[..]
    else {
        unreachable!()
    };
    println!(
        "before (tokenizers' reader, f32 weights): tokenizer {tok_crate:.1} + weights {:.1} + query {f32_query:.1} = {:.1} ms",
        f32_load - tok,
        tok_crate + f32_load - tok + f32_query
    );
    println!(
        "after (load_fast): tokenizer {tok:.1} + weights {:.1} + query {fast_query:.1} = {:.1} ms",
        fast_load - tok,
        fast_load + fast_query
    );
}
