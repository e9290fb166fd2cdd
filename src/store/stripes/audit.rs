//! Walking the rows of every stripe together, in name order, a page at a
//! time ([`MergeWalk`]), and the audit built on it: names that have a row on
//! some stripes and not on others ([`audit_rows`]). docs/design.md,
//! "Stripes: records and checks".

use std::collections::VecDeque;
use std::sync::Arc;

use crate::domain::SeqName;
use crate::store::{SequenceRow, Store, StoreError, MAX_PAGE};

/// A name missing from some stripes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingRow {
    /// The sequence.
    pub name: SeqName,
    /// The stripes (indexes from 0) that have no row of it.
    pub missing_on: Vec<u32>,
}

/// One stripe's side of a [`MergeWalk`]: the rest of its last page, and
/// where the next page starts.
struct Cursor {
    store: Arc<dyn Store>,
    rows: VecDeque<SequenceRow>,
    after: Option<SeqName>,
    more: bool,
}

impl Cursor {
    /// The stripe's next row, reading its next page when the last one is
    /// used up.
    async fn head(&mut self, page: u32) -> Result<Option<&SequenceRow>, StoreError> {
        if self.rows.is_empty() && self.more {
            let read = self
                .store
                .list_page(None, self.after.as_ref(), page)
                .await?;
            // A page of rows all with invalid names leaves no name to go on
            // from; such rows are never served, and the walk ends there.
            self.more = read.more && !read.rows.is_empty();
            if let Some(last) = read.rows.last() {
                self.after = Some(last.name.clone());
            }
            self.rows.extend(read.rows);
        }
        Ok(self.rows.front())
    }
}

/// The rows of several stores merged by name (byte order): each step gives
/// one name and, per store, its row or `None`. Every store is read one page
/// at a time through [`Catalog::list_page`](crate::store::Catalog::list_page), so memory holds at most one page
/// per store whatever the number of rows.
///
/// Pages are separate reads: a row created or deleted on a stripe during
/// the walk may or may not show, every other row shows once. A row created
/// under a name the walk has passed is not seen again.
pub struct MergeWalk {
    cursors: Vec<Cursor>,
    page: u32,
}

impl MergeWalk {
    /// A walk over `stores` reading pages of [`MAX_PAGE`] rows.
    pub fn new(stores: &[Arc<dyn Store>]) -> Self {
        Self::with_page(stores, MAX_PAGE)
    }

    /// A walk reading pages of `page` rows (tests use small ones to cross
    /// page boundaries).
    pub fn with_page(stores: &[Arc<dyn Store>], page: u32) -> Self {
        MergeWalk {
            cursors: stores
                .iter()
                .map(|store| Cursor {
                    store: store.clone(),
                    rows: VecDeque::new(),
                    after: None,
                    more: true,
                })
                .collect(),
            page: page.clamp(1, MAX_PAGE),
        }
    }

    /// The next name, with each store's row of it (`None` where it has
    /// none); `None` when every store is done. A read error names the
    /// stripe (counted from 1).
    pub async fn next(
        &mut self,
    ) -> Result<Option<(SeqName, Vec<Option<SequenceRow>>)>, StoreError> {
        let mut least: Option<SeqName> = None;
        for (i, cursor) in self.cursors.iter_mut().enumerate() {
            let head = cursor.head(self.page).await.map_err(|e| match e {
                StoreError::Unavailable(m) => {
                    StoreError::Unavailable(format!("reading stripe {}: {m}", i + 1))
                }
                other => other,
            })?;
            if let Some(row) = head {
                if least.as_ref().is_none_or(|l| row.name < *l) {
                    least = Some(row.name.clone());
                }
            }
        }
        let Some(name) = least else {
            return Ok(None);
        };
        let rows = self
            .cursors
            .iter_mut()
            .map(|c| match c.rows.front() {
                Some(row) if row.name == name => c.rows.pop_front(),
                _ => None,
            })
            .collect();
        Ok(Some((name, rows)))
    }
}

/// The names that have a row on some of `stores` (the stripes, in order)
/// and not on others, in name order, at most `limit` of them: a merge walk
/// ([`MergeWalk`]) over every stripe's pages, never every row at once.
pub async fn audit_rows(
    stores: &[Arc<dyn Store>],
    limit: usize,
) -> Result<Vec<MissingRow>, StoreError> {
    audit_with_page(stores, limit, MAX_PAGE).await
}

/// [`audit_rows`] reading pages of `page` rows.
async fn audit_with_page(
    stores: &[Arc<dyn Store>],
    limit: usize,
    page: u32,
) -> Result<Vec<MissingRow>, StoreError> {
    let mut found = Vec::new();
    let mut walk = MergeWalk::with_page(stores, page);
    while found.len() < limit {
        let Some((name, rows)) = walk.next().await? else {
            break;
        };
        let missing_on: Vec<u32> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_none())
            .map(|(i, _)| i as u32)
            .collect();
        if !missing_on.is_empty() {
            found.push(MissingRow { name, missing_on });
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    fn store(names: &[&str]) -> Arc<dyn Store> {
        let s = MemoryStore::new();
        for n in names {
            s.insert(n, 0, 1);
        }
        Arc::new(s)
    }

    fn found(rows: &[MissingRow]) -> Vec<(&str, Vec<u32>)> {
        rows.iter()
            .map(|r| (r.name.as_str(), r.missing_on.clone()))
            .collect()
    }

    #[tokio::test]
    async fn the_walk_finds_every_name_missing_somewhere_across_page_boundaries() {
        let stores = [
            store(&["a", "b", "c", "d", "e", "f", "g"]),
            store(&["b", "c", "e", "f", "g", "h"]),
            store(&["a", "b", "c", "d", "e", "f", "g", "h", "i"]),
        ];
        let want = vec![
            ("a", vec![1]),
            ("d", vec![1]),
            ("h", vec![0]),
            ("i", vec![0, 1]),
        ];
        for page in [1, 2, 3, 1000] {
            let got = audit_with_page(&stores, 100, page).await.unwrap();
            assert_eq!(found(&got), want, "pages of {page}");
        }
    }

    #[tokio::test]
    async fn the_walk_stops_after_the_limit() {
        let stores = [store(&["a", "b", "c", "d"]), store(&[])];
        let got = audit_with_page(&stores, 2, 1).await.unwrap();
        assert_eq!(found(&got), vec![("a", vec![1]), ("b", vec![1])]);
    }

    #[tokio::test]
    async fn identical_stripes_have_nothing_missing() {
        let names = ["x", "x.1", "x:2", "y"];
        let stores = [store(&names), store(&names)];
        assert!(audit_rows(&stores, 10).await.unwrap().is_empty());
        assert!(audit_rows(&[store(&[]), store(&[])], 10)
            .await
            .unwrap()
            .is_empty());
    }

    #[tokio::test]
    async fn the_walk_gives_each_name_once_with_every_stores_row() {
        let stores = [store(&["a", "c"]), store(&["b", "c"])];
        let mut walk = MergeWalk::with_page(&stores, 1);
        let mut seen = Vec::new();
        while let Some((name, rows)) = walk.next().await.unwrap() {
            seen.push((
                name.to_string(),
                rows.iter().map(Option::is_some).collect::<Vec<_>>(),
            ));
        }
        assert_eq!(
            seen,
            vec![
                ("a".to_string(), vec![true, false]),
                ("b".to_string(), vec![false, true]),
                ("c".to_string(), vec![true, true]),
            ]
        );
    }
}
