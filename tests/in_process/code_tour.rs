//! docs/code-tour.md is the one description of the layout: its trees name
//! every Rust file of the workspace's sources and tests, and nothing that is
//! not there. Read from the trees (the fenced blocks, one entry per line,
//! a folder's entries indented under it), so a file added, moved or removed
//! without the tour fails here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The folders whose `.rs` files the tour lists one by one.
const LISTED: &[&str] = &[
    "src",
    "crates",
    "clients/rust/src",
    "clients/rust/tests",
    "tests",
];

/// The folders whose files the tour names on one line each (`benches/`,
/// `examples/`): every file's name appears on that line.
const NAMED_ON_ONE_LINE: &[&str] = &["benches", "examples"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tour() -> String {
    std::fs::read_to_string(root().join("docs/code-tour.md")).unwrap()
}

/// The paths the tour's trees name: each entry's path is its folders'
/// paths joined with its own first word; a word ending in `/` is a folder.
fn tour_paths(tour: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_block = false;
    // (indent, folder path) of the folders enclosing the current line.
    let mut folders: Vec<(usize, String)> = Vec::new();
    for line in tour.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
            folders.clear();
            continue;
        }
        if !in_block || line.trim().is_empty() {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let word = line.split_whitespace().next().unwrap();
        while folders.last().is_some_and(|(i, _)| *i >= indent) {
            folders.pop();
        }
        let path = match folders.last() {
            Some((_, folder)) => format!("{folder}{word}"),
            None => word.to_string(),
        };
        if path.ends_with('/') {
            folders.push((indent, path.clone()));
        }
        out.insert(path.trim_end_matches('/').to_string());
    }
    out
}

/// Every `.rs` file under `dir` (relative to the root), skipping build output.
fn rust_files(dir: &Path, out: &mut BTreeSet<String>) {
    let Ok(entries) = std::fs::read_dir(root().join(dir)) else {
        return;
    };
    for entry in entries {
        let path = dir.join(entry.unwrap().file_name());
        if path.components().any(|c| c.as_os_str() == "target") {
            continue;
        }
        if root().join(&path).is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.insert(path.to_string_lossy().into_owned());
        }
    }
}

#[test]
fn the_tour_names_every_source_and_test_file() {
    let named = tour_paths(&tour());
    let mut files = BTreeSet::new();
    for dir in LISTED {
        rust_files(Path::new(dir), &mut files);
    }
    let missing: Vec<_> = files.iter().filter(|f| !named.contains(*f)).collect();
    assert!(
        missing.is_empty(),
        "docs/code-tour.md does not list: {missing:#?}"
    );
}

#[test]
fn the_tour_names_no_file_that_does_not_exist() {
    let gone: Vec<_> = tour_paths(&tour())
        .into_iter()
        .filter(|p| !root().join(p).exists())
        .collect();
    assert!(
        gone.is_empty(),
        "docs/code-tour.md names what does not exist: {gone:#?}"
    );
}

#[test]
fn the_tour_names_every_bench_and_example() {
    let tour = tour();
    for dir in NAMED_ON_ONE_LINE {
        let line = tour
            .lines()
            .find(|l| l.starts_with(&format!("{dir}/")))
            .unwrap_or_else(|| panic!("docs/code-tour.md has no line for {dir}/"));
        let mut files = BTreeSet::new();
        rust_files(Path::new(dir), &mut files);
        assert!(!files.is_empty(), "no files under {dir}/");
        for file in files {
            let stem = Path::new(&file)
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            assert!(
                line.contains(&stem),
                "docs/code-tour.md's {dir}/ line does not name {file}"
            );
        }
    }
}

/// Paths of the repository named in the comments of Cargo.toml exist (a
/// moved file leaves no stale pointer there).
#[test]
fn the_manifest_names_files_that_exist() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let stale: Vec<_> = manifest
        .lines()
        .filter(|l| l.trim_start().starts_with('#'))
        .flat_map(|l| l.split(|c: char| c.is_whitespace() || "(),:;`".contains(c)))
        .filter(|w| w.ends_with(".rs") || w.ends_with(".md") || w.ends_with(".sh"))
        .filter(|w| w.contains('/') && !root().join(w).exists())
        .collect();
    assert!(
        stale.is_empty(),
        "Cargo.toml names what does not exist: {stale:?}"
    );
}

#[test]
fn tour_paths_nest_by_indent() {
    let text = "```\nsrc/\n  a.rs   x\n  b/\n    c.rs  y\n  d.rs\nREADME.md  z\n```\n";
    let got: Vec<_> = tour_paths(text).into_iter().collect();
    assert_eq!(
        got,
        [
            "README.md",
            "src",
            "src/a.rs",
            "src/b",
            "src/b/c.rs",
            "src/d.rs"
        ]
    );
}
