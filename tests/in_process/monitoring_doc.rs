//! docs/monitoring.md names every metric the code defines: each string literal of the
//! server's code (`src/`, `crates/`) that is a metric name (`seqd_...` or `process_...`
//! in lower-case letters and `_`, not a table name) appears in the page as `` `name` ``
//! or `` `name{labels}` ``.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// Every `"seqd_..."` and `"process_..."` literal in the Rust files under `dir`, comments
/// left out.
fn literals(dir: &Path, found: &mut BTreeSet<String>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            literals(&path, found);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        for line in fs::read_to_string(&path).unwrap().lines() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            let code = code.split(" // ").next().unwrap_or_default();
            for prefix in ["\"seqd_", "\"process_"] {
                for (at, _) in code.match_indices(prefix) {
                    let name: String = code[at + 1..]
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    let closed = code[at + 1 + name.len()..].starts_with('"');
                    if closed && !name.ends_with('_') {
                        found.insert(name);
                    }
                }
            }
        }
    }
}

/// The tables seqd creates: names that look like metrics and are not.
fn tables(root: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::from([seqd::store::migrator::HISTORY_TABLE.to_owned()]);
    for dialect in fs::read_dir(root.join("migrations")).unwrap() {
        for file in fs::read_dir(dialect.unwrap().path()).unwrap() {
            let sql = fs::read_to_string(file.unwrap().path()).unwrap();
            for part in sql.split("CREATE TABLE ").skip(1) {
                let name: String = part
                    .trim_start_matches("IF NOT EXISTS ")
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                names.insert(name);
            }
        }
    }
    names
}

#[test]
fn monitoring_md_names_every_metric_the_code_defines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut names = BTreeSet::new();
    literals(&root.join("src"), &mut names);
    literals(&root.join("crates"), &mut names);
    let tables = tables(root);
    assert!(tables.contains("seqd_tokens"), "tables read: {tables:?}");
    let metrics: Vec<&String> = names.iter().filter(|n| !tables.contains(*n)).collect();
    assert!(
        metrics.len() > 30 && metrics.iter().any(|m| *m == "seqd_ids_drawn_total"),
        "metric names read from the code: {metrics:?}"
    );
    let page = fs::read_to_string(root.join("docs/monitoring.md")).unwrap();
    let missing: Vec<&&String> = metrics
        .iter()
        .filter(|m| !page.contains(&format!("`{m}`")) && !page.contains(&format!("`{m}{{")))
        .collect();
    assert!(
        missing.is_empty(),
        "metrics the code defines that docs/monitoring.md does not name: {missing:?}"
    );
}
