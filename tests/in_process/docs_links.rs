//! Every relative link of README.md and docs/*.md resolves: the file (or folder) it names
//! exists inside the repository, and its `#anchor`, in the same page or another Markdown
//! page, names a heading there by GitHub's rule (lower case, spaces to `-`, punctuation
//! dropped, `-1`, `-2`, ... for repeated headings). Links with a scheme (`https:`,
//! `mailto:`) are not followed. The Markdown is read by pulldown-cmark, so links in
//! code blocks and code spans are not links, as on GitHub.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

fn parser(text: &str) -> Parser<'_> {
    Parser::new_ext(
        text,
        Options::ENABLE_TABLES | Options::ENABLE_HEADING_ATTRIBUTES,
    )
}

/// GitHub's anchor for a heading's text.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings (a heading's explicit `{#id}` too).
fn anchors(text: &str) -> HashSet<String> {
    let mut found = HashSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut heading: Option<(String, Option<String>)> = None;
    for event in parser(text) {
        match event {
            Event::Start(Tag::Heading { id, .. }) => {
                heading = Some((String::new(), id.map(|id| id.to_string())));
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((words, _)) = heading.as_mut() {
                    words.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let (words, id) = heading.take().expect("a heading ends after it starts");
                if let Some(id) = id {
                    found.insert(id);
                }
                let base = slug(&words);
                let n = seen.entry(base.clone()).or_insert(0);
                found.insert(if *n == 0 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                });
                *n += 1;
            }
            _ => {}
        }
    }
    found
}

/// Each link and image destination of a page, with its line.
fn links(text: &str) -> Vec<(usize, String)> {
    parser(text)
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                let line = text[..range.start].matches('\n').count() + 1;
                Some((line, dest_url.to_string()))
            }
            _ => None,
        })
        .collect()
}

/// `https:`, `mailto:` and the like: not checked.
fn has_scheme(dest: &str) -> bool {
    match dest.split_once(':') {
        Some((scheme, _)) => {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

/// `base/rel` with `.` and `..` taken apart, or None if it climbs above the root.
fn join_inside(root: &Path, base: &Path, rel: &str) -> Option<PathBuf> {
    let start = if rel.starts_with('/') { root } else { base };
    let mut parts: Vec<Component> = start.strip_prefix(root).ok()?.components().collect();
    for part in Path::new(rel.trim_start_matches('/')).components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(parts.iter().fold(root.to_path_buf(), |p, c| p.join(c)))
}

/// What is wrong with the relative links of `pages` (paths under `root`), one line each.
fn broken_links(root: &Path, pages: &[PathBuf]) -> Vec<String> {
    let mut anchors_of: BTreeMap<PathBuf, HashSet<String>> = BTreeMap::new();
    let mut anchors_in = |page: &Path| -> HashSet<String> {
        anchors_of
            .entry(page.to_path_buf())
            .or_insert_with(|| anchors(&fs::read_to_string(page).unwrap_or_default()))
            .clone()
    };
    let mut broken = Vec::new();
    for page in pages {
        let text = fs::read_to_string(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        let shown = page
            .strip_prefix(root)
            .unwrap_or(page)
            .display()
            .to_string();
        for (line, dest) in links(&text) {
            if has_scheme(&dest) {
                continue;
            }
            let (path, fragment) = match dest.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (dest.as_str(), None),
            };
            let target = if path.is_empty() {
                page.clone()
            } else {
                let base = page.parent().expect("a page is in a folder");
                match join_inside(root, base, path) {
                    Some(target) if target.exists() => target,
                    _ => {
                        broken.push(format!("{shown}:{line}: ({dest}): no file {path}"));
                        continue;
                    }
                }
            };
            let Some(fragment) = fragment else { continue };
            if target.extension().is_some_and(|e| e == "md")
                && !anchors_in(&target).contains(fragment)
            {
                broken.push(format!("{shown}:{line}: ({dest}): no heading #{fragment}"));
            }
        }
    }
    broken
}

/// README.md and every page of docs/.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

#[test]
fn every_relative_link_and_anchor_of_the_readme_and_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pages = documents(root);
    assert!(pages.len() > 5, "README.md and docs/*.md found: {pages:?}");
    let linked: usize = pages
        .iter()
        .map(|p| links(&fs::read_to_string(p).unwrap()).len())
        .sum();
    assert!(linked > 100, "links read: {linked}");
    let broken = broken_links(root, &pages);
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_check_reports_a_missing_file_a_missing_anchor_and_a_path_out_of_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir(root.join("docs")).unwrap();
    fs::write(root.join("OTHER.md"), "# Top\n").unwrap();
    fs::write(
        root.join("docs/b.md"),
        "# B page\n\n## Tinyid's routes (v1)\n\n## Twice\n\n## Twice\n",
    )
    .unwrap();
    fs::write(
        root.join("docs/a.md"),
        "# A `code` heading\n\n\
         [ok](b.md) [ok](b.md#tinyids-routes-v1) [ok](#a-code-heading) [ok](b.md#twice-1)\n\
         [ok](../OTHER.md#top) [ok](/OTHER.md) [ok](https://example.com/x.md#nowhere)\n\
         `[not a link](nowhere.md)`\n\n\
         | table | [gone](../serial-numbers.md#serial-numbers) |\n|---|---|\n\n\
         [bad anchor](b.md#twice-2) [bad in page](#b-page) [bad file](c.md)\n\
         [out](../../etc/passwd)\n",
    )
    .unwrap();
    let broken = broken_links(root, &[root.join("docs/a.md")]);
    assert_eq!(
        broken,
        [
            "docs/a.md:7: (../serial-numbers.md#serial-numbers): no file ../serial-numbers.md",
            "docs/a.md:10: (b.md#twice-2): no heading #twice-2",
            "docs/a.md:10: (#b-page): no heading #b-page",
            "docs/a.md:10: (c.md): no file c.md",
            "docs/a.md:11: (../../etc/passwd): no file ../../etc/passwd",
        ]
    );
}

#[test]
fn anchors_follow_github_rules() {
    assert_eq!(
        slug("High availability (stripes)"),
        "high-availability-stripes"
    );
    assert_eq!(
        slug("Distributed SQL (CockroachDB, YugabyteDB, TiDB)"),
        "distributed-sql-cockroachdb-yugabytedb-tidb"
    );
    assert_eq!(
        slug("Conflicts: SQLSTATE 40001 and 40P01"),
        "conflicts-sqlstate-40001-and-40p01"
    );
    assert_eq!(slug("seqd_tokens and a -- b"), "seqd_tokens-and-a----b");
}
