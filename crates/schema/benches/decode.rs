//! Decode throughput: 1M generated `Person` lines of the DESIGN schema (regex check,
//! enum, range, default, an embedding on every tenth line). Reports lines/s.

// bench code: a panic here is a failed bench, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use tributary_schema::{decode_str, Catalog};

const SCHEMA: &str = r#"
node Person @stream {
  name: String @key
  age: I32? @range(0..150)
  status: enum(active, inactive) = active
  email: String? @unique @check("^[^@]+@[^@]+$")
  bio: String? @index(fts)
  embedding: Vector(8)? @embed(bio)
}
"#;

const LINES: usize = 1_000_000;

fn generate_lines() -> String {
    let mut text = String::with_capacity(LINES * 120);
    for row in 0..LINES {
        let status = if row % 3 == 0 { "inactive" } else { "active" };
        let _ = write!(
            text,
            r#"{{"type":"Person","data":{{"name":"person-{row}","age":{age},"status":"{status}","email":"p{row}@example.com","bio":"likes graphs and rivers""#,
            age = row % 120,
        );
        if row % 10 == 0 {
            text.push_str(r#","embedding":[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8]"#);
        }
        text.push_str("}}\n");
    }
    text
}

fn decode_person_lines(c: &mut Criterion) {
    let catalog = match Catalog::parse(SCHEMA) {
        Ok(catalog) => catalog,
        Err(error) => panic!("bench schema: {error}"),
    };
    let text = generate_lines();
    let mut group = c.benchmark_group("decode");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(15));
    group.throughput(Throughput::Elements(LINES as u64));
    group.bench_function("person_lines_1m", |bencher| {
        bencher.iter(|| {
            let decoded = decode_str(&catalog, black_box(&text));
            assert!(decoded.rejects.is_empty(), "{:?}", decoded.rejects.first());
            decoded
        })
    });
    group.finish();
}

criterion_group!(benches, decode_person_lines);
criterion_main!(benches);
