//! Times the page reads of `GET /v1/sequences` at the store, exactly as the
//! server runs them (`Catalog::list_page`: the same statement, binds and row
//! decoding), on a scratch database that already holds 1,000,000 rows named
//! `t<i % 10>:merchant-<i, 7 digits>`:
//!
//! ```sql
//! -- PostgreSQL (in a scratch schema, after seqd's migrations or 0001 alone)
//! INSERT INTO sequences (name, max_id, step)
//! SELECT 't' || (i % 10) || ':merchant-' || lpad(i::text, 7, '0'), 0, 1000
//! FROM generate_series(1, 1000000) i;
//! ANALYZE sequences;
//! -- MariaDB
//! SET SESSION max_recursive_iterations = 2000000;
//! INSERT INTO sequences (name, max_id, step)
//! WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000)
//! SELECT CONCAT('t', i % 10, ':merchant-', LPAD(i, 7, '0')), 0, 1000 FROM n;
//! -- SQLite
//! WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000)
//! INSERT INTO sequences (name, max_id, step)
//! SELECT 't' || (i % 10) || ':merchant-' || substr('0000000' || i, -7), 0, 1000 FROM n;
//! ```
//!
//! ```text
//! cargo run --release --example page_times -- URL [ROUNDS]
//! ```
//!
//! `URL` is a `--database-url` (PostgreSQL: select the scratch schema with
//! `?options=-csearch_path%3D<schema>`); nothing is migrated or written.
//! Without PostgreSQL's index of migration 3 (`DROP INDEX
//! sequences_name_bytes`) it shows what each page cost before it.
//! Each read runs 3 times to warm up, then `ROUNDS` times (default 50); the
//! median, 90th percentile and maximum are printed in milliseconds, with the
//! rows each read returned.

use std::time::{Duration, Instant};

use seqd::domain::{NamePrefix, SeqName};
use seqd::store::{connect, StoreOptions};

/// One read to time: a label, the prefix and the `after` of the page.
struct Read {
    label: &'static str,
    prefix: Option<&'static str>,
    after: Option<&'static str>,
}

const READS: [Read; 5] = [
    Read {
        label: "first page",
        prefix: None,
        after: None,
    },
    Read {
        label: "page after t5:merchant-0500005 (middle)",
        prefix: None,
        after: Some("t5:merchant-0500005"),
    },
    Read {
        label: "last page (after t9:merchant-0999949)",
        prefix: None,
        after: Some("t9:merchant-0999949"),
    },
    Read {
        label: "prefix t3:merchant-01, first page",
        prefix: Some("t3:merchant-01"),
        after: None,
    },
    Read {
        label: "prefix t3:merchant-01, page after t3:merchant-0150003",
        prefix: Some("t3:merchant-01"),
        after: Some("t3:merchant-0150003"),
    },
];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: page_times URL [ROUNDS]"))?;
    let rounds: usize = args.next().map_or(Ok(50), |r| r.parse())?;
    let store = connect(&url, &StoreOptions::default()).await?.sequences();
    println!(
        "{} store, {rounds} rounds, limit 100 (ms: median / p90 / max)",
        store.backend()
    );
    for read in &READS {
        let prefix = read.prefix.map(NamePrefix::parse).transpose()?;
        let after = read.after.map(SeqName::parse).transpose()?;
        let mut times = Vec::with_capacity(rounds);
        let mut rows = 0;
        for round in 0..rounds + 3 {
            let start = Instant::now();
            let page = store
                .list_page(prefix.as_ref(), after.as_ref(), 100)
                .await?;
            if round >= 3 {
                times.push(start.elapsed());
            }
            rows = page.rows.len();
        }
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "{:<55} {:>9.3} {:>9.3} {:>9.3}  ({rows} rows)",
            read.label,
            ms(times[times.len() / 2]),
            ms(times[times.len() * 9 / 10]),
            ms(*times.last().unwrap()),
        );
    }
    Ok(())
}
