//! What a warm process pays to embed one short query (the compact
//! weights, as a search uses them), also after sitting idle, and to
//! compare it with many stored int8 vectors; medians in ms.
//!
//!   cargo run --release -p almanac-embed --example warm -- <model dir> [runs] [vectors]
//!
//! `vectors` defaults to 73 000, the items of a 10-year memory.

use std::path::Path;
use std::time::Instant;

const QUERIES: [&str; 4] = [
    "when is the dentist appointment",
    "hotel booking for Portugal",
    "where is the gate code for my storage",
    "Zephyrine Labs badge number",
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = Path::new(
        args.get(1)
            .expect("usage: warm <model dir> [runs] [vectors]"),
    );
    let runs: usize = args.get(2).map_or(50, |n| n.parse().unwrap());
    let count: usize = args.get(3).map_or(73_000, |n| n.parse().unwrap());
    // As the gateway loads it.
    let encoder = almanac_embed::Encoder::load_for_serving(dir).unwrap();
    let mut times = Vec::new();
    for i in 0..runs {
        let t = Instant::now();
        encoder.embed(&[QUERIES[i % QUERIES.len()]]).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!("query embedding: median {:.2} ms", median(times));
    let q = almanac_embed::Quantized::new(&encoder.embed(&[QUERIES[0]]).unwrap()[0]);
    let stored: Vec<almanac_embed::Quantized> = (0..count)
        .map(|i| {
            let v: Vec<f32> = (0..encoder.dims())
                .map(|d| (((i * 31 + d * 17) % 97) as f32 - 48.0) / 48.0)
                .collect();
            almanac_embed::Quantized::new(&v)
        })
        .collect();
    let mut times = Vec::new();
    let mut sink = 0.0f32;
    for _ in 0..runs.min(20) {
        let t = Instant::now();
        for s in &stored {
            sink += q.dot(s);
        }
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "{count} dot products: median {:.2} ms ({sink:.0})",
        median(times)
    );
    // As a search does it: a query, then every stored vector compared
    // (which evicts the weights from the caches).
    let mut times = Vec::new();
    for i in 0..runs {
        let t = Instant::now();
        let v = encoder.embed(&[QUERIES[i % QUERIES.len()]]).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        let q = almanac_embed::Quantized::new(&v[0]);
        for s in &stored {
            sink += q.dot(s);
        }
    }
    println!(
        "query embedding after a scan: median {:.2} ms ({sink:.0})",
        median(times)
    );
    // After the caches were filled with other data (as another process
    // running between two queries leaves them): no idle time.
    let mut other = vec![0u8; 64 << 20];
    let mut times = Vec::new();
    for i in 0..runs {
        for (k, b) in other.iter_mut().enumerate().step_by(64) {
            *b = b.wrapping_add(k as u8);
        }
        let t = Instant::now();
        encoder.embed(&[QUERIES[i % QUERIES.len()]]).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "query embedding after 64 MB of other data: median {:.2} ms ({})",
        median(times),
        other[4096]
    );
    // As a server meets queries: each after the process sat idle a while
    // (the crew's helper parked, the CPUs maybe asleep).
    for idle_ms in [3, 10] {
        let mut times = Vec::new();
        for i in 0..runs {
            std::thread::sleep(std::time::Duration::from_millis(idle_ms));
            let t = Instant::now();
            encoder.embed(&[QUERIES[i % QUERIES.len()]]).unwrap();
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        println!(
            "query embedding after {idle_ms} ms idle: median {:.2} ms",
            median(times)
        );
    }
}
