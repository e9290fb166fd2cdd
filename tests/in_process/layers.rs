//! The arrows of `src/` point down (src/lib.rs, "# Layout"): no module
//! imports from a layer above its own, and no files import each other in
//! a circle. Read from the source text (`crate::` and `super::` paths
//! outside `#[cfg(test)] mod tests`), so a new arrow up fails here. The core
//! crate (`crates/seqd-core/src`) is read as the modules seqd re-exports it
//! as (`allocator`, `domain`, `store`): the same table holds for it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module's layer: a module may import from its own layer
/// and those below, never from one above.
const LAYERS: &[(&str, u8)] = &[
    ("domain", 0),
    ("log_throttle", 0),
    ("telemetry", 0),
    ("store", 1),
    ("allocator", 2),
    ("serial", 3),
    ("snowflake", 3),
    ("service", 4),
    ("edge", 5),
    ("http", 5),
    ("resp", 5),
    ("tls", 5),
    ("config", 6),
    ("open", 6),
    ("cli", 7),
    ("leaf", 7),
    ("stripes_cli", 7),
    ("tokens_cli", 7),
    ("tinyid_import", 7),
    ("startup", 8),
];

/// Every `.rs` file under `src/` and the core crate's `src/` as (module
/// path, its text without tests and comments); a module of both (`domain`,
/// `store`) holds both texts.
fn modules() -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(root).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            if parts == ["lib"] || parts == ["main"] || parts.contains(&"model".to_string()) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text
                .split("#[cfg(test)]\nmod tests")
                .next()
                .unwrap()
                .lines()
                .map(|l| l.split("//").next().unwrap())
                .collect::<Vec<_>>()
                .join("\n");
            out.entry(parts.join("::")).or_default().push_str(&code);
        }
    }
    let mut out = BTreeMap::new();
    for root in ["src", "crates/seqd-core/src"] {
        walk(Path::new(root), Path::new(root), &mut out);
    }
    out
}

/// The paths after each `prefix` in `code` (`crate::a::b` gives `a::b`).
fn paths<'a>(code: &'a str, prefix: &'a str) -> impl Iterator<Item = Vec<&'a str>> + 'a {
    code.match_indices(prefix).filter_map(move |(i, _)| {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return None;
        }
        let rest = &code[i + prefix.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let path: Vec<&str> = rest[..end].split("::").filter(|s| !s.is_empty()).collect();
        (!path.is_empty()).then_some(path)
    })
}

/// The file-to-file arrows: for each module, the other modules it names.
fn arrows(mods: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let longest = |path: &[&str]| {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].join("::"))
            .find(|m| mods.contains_key(m))
    };
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, code) in mods {
        let parent: Vec<&str> = m.split("::").collect();
        let parent = &parent[..parent.len() - 1];
        let named = paths(code, "crate::").filter_map(|p| longest(&p)).chain(
            paths(code, "super::").filter_map(|p| {
                let full: Vec<&str> = parent.iter().copied().chain(p).collect();
                longest(&full)
            }),
        );
        for target in named {
            // A module naming its own parent is how a child reaches the
            // items of its folder's mod.rs: not an arrow between files.
            if &target != m && !m.starts_with(&format!("{target}::")) {
                out.entry(m.clone()).or_default().insert(target);
            }
        }
    }
    out
}

#[test]
fn no_module_imports_from_a_layer_above_its_own() {
    let layer = |m: &str| {
        let top = m.split("::").next().unwrap();
        LAYERS
            .iter()
            .find(|(name, _)| *name == top)
            .unwrap_or_else(|| panic!("src/{top} has no layer in tests/in_process/layers.rs"))
            .1
    };
    let mods = modules();
    assert!(mods.contains_key("service::issue"), "read {mods:?}");
    assert!(mods.contains_key("allocator::buffer"), "read {mods:?}");
    let mut up = Vec::new();
    for (m, targets) in arrows(&mods) {
        for t in targets {
            if layer(&t) > layer(&m) {
                up.push(format!("{m} -> {t}"));
            }
        }
    }
    assert!(up.is_empty(), "imports that point up a layer: {up:#?}");
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let arrows = arrows(&modules());
    // A circle is a module that reaches itself again along the arrows.
    let mut circles = BTreeSet::new();
    for start in arrows.keys() {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = arrows[start].iter().collect();
        while let Some(m) = todo.pop() {
            if m == start {
                circles.insert(start.clone());
                break;
            }
            if seen.insert(m) {
                todo.extend(arrows.get(m).into_iter().flatten());
            }
        }
    }
    assert!(
        circles.is_empty(),
        "modules that import themselves through others: {circles:#?}"
    );
}

/// The core crate is usable without a database driver or an HTTP stack
/// (what a client that holds segments itself builds on): its normal
/// dependencies, read by `cargo tree` from the lock file, name none.
#[test]
fn the_core_crate_needs_no_database_driver_and_no_http_stack() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["tree", "--offline", "-p", "seqd-core", "-e", "normal"])
        .args(["--prefix", "none", "--format", "{p}"])
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8(out.stdout).unwrap();
    let crates: BTreeSet<&str> = tree.lines().filter_map(|l| l.split(' ').next()).collect();
    assert!(
        crates.contains("seqd-core") && crates.contains("tokio"),
        "{crates:?}"
    );
    let heavy = [
        "sqlx",
        "sqlx-core",
        "axum",
        "hyper",
        "tower",
        "utoipa",
        "reqwest",
        "seqd",
    ];
    let found: Vec<&&str> = heavy.iter().filter(|c| crates.contains(**c)).collect();
    assert!(found.is_empty(), "seqd-core depends on {found:?}:\n{tree}");
}
