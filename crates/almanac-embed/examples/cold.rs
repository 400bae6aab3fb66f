//! What a cold process pays to embed one short query: loading the
//! tokenizer, loading the weights, the first query.
//!
//!   cargo run --release -p almanac-embed --example cold -- <model dir> [runs]
//!
//! Every run is a fresh process (this program started again with `--once`),
//! so nothing is warm but the page cache; the medians are printed.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

const QUERY: &str = "when is the dentist appointment";

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// One cold run: `tokenizer weights+tokenizer query total` in ms.
fn once(dir: &Path, mode: &str) {
    let start = Instant::now();
    let t = Instant::now();
    let tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    let tokenizer_json = ms(t);
    drop(tokenizer);
    let t = Instant::now();
    let encoder = match mode {
        "f32" => almanac_embed::Encoder::load(dir).unwrap(),
        _ => almanac_embed::Encoder::load_fast(dir).unwrap(),
    };
    let load = ms(t);
    let t = Instant::now();
    let v = encoder.embed(&[QUERY]).unwrap();
    let query = ms(t);
    assert_eq!(v[0].len(), encoder.dims());
    println!(
        "{tokenizer_json:.2} {load:.2} {query:.2} {:.2}",
        ms(start) - tokenizer_json
    );
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
    for mode in ["f32", "fast"] {
        let mut columns: [Vec<f64>; 4] = Default::default();
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
            for (c, x) in columns.iter_mut().zip(line.split_whitespace()) {
                c.push(x.parse::<f64>().unwrap());
            }
        }
        let [tok, load, query, total] = columns.map(median);
        println!(
            "{mode:>4}: tokenizer.json alone {tok:.1} ms | load {load:.1} ms | first query {query:.1} ms | load+query {total:.1} ms (median of {runs})"
        );
    }
}
