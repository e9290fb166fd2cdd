//! What every backend's [`Catalog::bump`] shares: the checks of a request,
//! the plan (all rows or none), and the transaction that runs a backend's
//! statements ([`BumpStatements`]).

#![allow(unused_imports)]

use std::borrow::Cow;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::engine::SqlDb;
use super::retry::retrying;
use super::sequences::{begin_bump, BumpStatements};
use super::*;
use crate::domain::{IdOrdering, NamePrefix, NewSequence, SeqName};

/// Rejects a bump no backend should run: `by` below 1, or an empty list of
/// names (which would be an empty SQL `IN ()`).
pub(crate) fn check_bump_request(names: Option<&[SeqName]>, by: i64) -> Result<(), StoreError> {
    if by < 1 {
        return Err(StoreError::Config(format!(
            "invalid bump {by}: must be from 1 to {}",
            i64::MAX
        )));
    }
    if names.is_some_and(|n| n.is_empty()) {
        return Err(StoreError::Config("a bump needs at least one name".into()));
    }
    Ok(())
}

/// Checks a bump of `by` against the rows read for it (`(name, max_id)`,
/// in any order) and returns the plan in name order, or the refusal naming
/// every requested name without a row and every row that would pass
/// `i64::MAX`.
pub(crate) fn plan_bump(
    names: Option<&[SeqName]>,
    rows: Vec<(String, i64)>,
    by: i64,
) -> Result<Vec<Bumped>, StoreError> {
    let rows: std::collections::BTreeMap<String, i64> = rows.into_iter().collect();
    let missing: std::collections::BTreeSet<&str> = names
        .unwrap_or_default()
        .iter()
        .map(SeqName::as_str)
        .filter(|n| !rows.contains_key(*n))
        .collect();
    let refusal = BumpRefusal {
        missing: missing.into_iter().map(str::to_string).collect(),
        overflow: rows
            .iter()
            .filter(|(_, max_id)| max_id.checked_add(by).is_none())
            .map(|(name, _)| name.clone())
            .collect(),
    };
    if refusal != BumpRefusal::default() {
        return Err(StoreError::BumpRefused(refusal));
    }
    Ok(rows
        .into_iter()
        .map(|(name, old_max_id)| Bumped {
            name,
            old_max_id,
            new_max_id: old_max_id + by,
        })
        .collect())
}

/// Checks that the bump's `UPDATE` changed exactly the planned rows; any
/// other count (a row created meanwhile under `--all`) must roll it back.
pub(crate) fn check_bumped(plan: &[Bumped], affected: u64) -> Result<(), StoreError> {
    if affected == plan.len() as u64 {
        Ok(())
    } else {
        Err(StoreError::Unavailable(format!(
            "bump changed {affected} rows where {} were planned; rolled back, nothing changed",
            plan.len()
        )))
    }
}

/// The statement bound inside a bump's transaction (see
/// `BumpStatements::widen_bound`).
pub(crate) const BUMP_STATEMENT_BOUND: std::time::Duration = std::time::Duration::from_secs(120);

/// [`Catalog::bump`] on a backend's pool: a dry run plans from a plain read; a
/// bump reads under row locks, plans (or refuses), updates, checks the count
/// and commits, all in one transaction (dropped, hence rolled back, on error).
/// A conflict runs the whole transaction again ([`retrying!`]); a refusal or
/// a miscount ends it, rolled back, with that error.
pub(crate) async fn run_bump<DB: SqlDb>(
    pool: &sqlx::Pool<DB>,
    names: Option<&[SeqName]>,
    by: i64,
    mode: BumpMode,
) -> Result<Vec<Bumped>, StoreError> {
    check_bump_request(names, by)?;
    let backend = DB::DIALECT.name();
    if mode == BumpMode::DryRun {
        let rows = retrying!(
            backend,
            async {
                let mut conn = pool.acquire().await?;
                BumpStatements::read_bump::<DB>(&mut conn, names, false).await
            }
            .await
        )
        .map_err(unavailable)?;
        return plan_bump(names, rows, by);
    }
    retrying!(
        backend,
        async {
            let mut tx = pool.begin_with(begin_bump(DB::DIALECT)).await?;
            BumpStatements::widen_bound::<DB>(&mut tx).await?;
            let rows = BumpStatements::read_bump::<DB>(&mut tx, names, true).await?;
            let plan = match plan_bump(names, rows, by) {
                Ok(plan) => plan,
                refused => return Ok(refused),
            };
            let counted = check_bumped(
                &plan,
                BumpStatements::add_bump::<DB>(&mut tx, names, by).await?,
            );
            if counted.is_ok() {
                tx.commit().await?;
            }
            Ok(counted.map(|()| plan))
        }
        .await
    )
    .map_err(unavailable)?
}

/// The rows a bump of `names` touches, as a condition: `" <keyword> (name IN
/// (p, ...) OR (n >= p AND n < p) OR ...)"`, the named rows and, per name,
/// the byte range of its period counters
/// ([`period_rows_range`](crate::domain::period_rows_range); ranges, not
/// `LIKE`, whose `_` would match any character). One placeholder per value
/// of [`bump_binds`], in its order: `?`, or on PostgreSQL `$first`,
/// `$first+1`, ... with the ranges compared on `name COLLATE "C"` (byte
/// order, which the index of migration 0003 serves). Nothing for all rows.
pub(crate) fn names_in(
    names: Option<&[SeqName]>,
    keyword: &str,
    dialect: Dialect,
    first: usize,
) -> String {
    let Some(names) = names else {
        return String::new();
    };
    let mut next = first;
    let mut placeholder = || match dialect {
        Dialect::Postgres => {
            next += 1;
            format!("${}", next - 1)
        }
        Dialect::Mysql | Dialect::Sqlite => "?".to_string(),
    };
    let bytes = match dialect {
        Dialect::Postgres => "name COLLATE \"C\"",
        Dialect::Mysql | Dialect::Sqlite => "name",
    };
    let named: Vec<String> = names.iter().map(|_| placeholder()).collect();
    let mut terms = vec![format!("name IN ({})", named.join(", "))];
    for _ in names {
        let (low, high) = (placeholder(), placeholder());
        terms.push(format!("({bytes} >= {low} AND {bytes} < {high})"));
    }
    format!(" {keyword} ({})", terms.join(" OR "))
}

/// The values [`names_in`]'s placeholders take: the names, then each name's
/// counter range (low, high).
pub(crate) fn bump_binds(names: Option<&[SeqName]>) -> Vec<String> {
    let names = names.unwrap_or_default();
    let mut binds: Vec<String> = names.iter().map(|n| n.as_str().to_string()).collect();
    for name in names {
        let (low, high) = crate::domain::period_rows_range(name);
        binds.extend([low, high]);
    }
    binds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::{page_range, NAMES_END};

    fn names(list: &[&str]) -> Vec<SeqName> {
        list.iter().map(|n| SeqName::parse(n).unwrap()).collect()
    }

    fn rows(list: &[(&str, i64)]) -> Vec<(String, i64)> {
        list.iter().map(|(n, m)| (n.to_string(), *m)).collect()
    }

    #[test]
    fn plan_bump_refuses_missing_names_and_overflowing_rows_together() {
        let asked = names(&["z", "full", "a", "gone", "gone"]);
        let read = rows(&[("z", 1), ("full", i64::MAX - 4), ("a", 0)]);
        match plan_bump(Some(&asked), read, 5) {
            Err(StoreError::BumpRefused(r)) => {
                assert_eq!(r.missing, ["gone"]);
                assert_eq!(r.overflow, ["full"]);
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn plan_bump_orders_by_name_and_may_reach_i64_max_exactly() {
        let asked = names(&["b", "a", "b"]);
        let read = rows(&[("b", i64::MAX - 5), ("a", 10)]);
        let plan = plan_bump(Some(&asked), read, 5).unwrap();
        let got: Vec<(&str, i64, i64)> = plan
            .iter()
            .map(|b| (b.name.as_str(), b.old_max_id, b.new_max_id))
            .collect();
        assert_eq!(got, [("a", 10, 15), ("b", i64::MAX - 5, i64::MAX)]);
    }

    #[test]
    fn check_bump_request_rejects_a_by_below_one_and_an_empty_name_list() {
        assert!(check_bump_request(None, 1).is_ok());
        assert!(check_bump_request(None, i64::MAX).is_ok());
        assert!(matches!(
            check_bump_request(None, 0),
            Err(StoreError::Config(_))
        ));
        assert!(matches!(
            check_bump_request(None, -1),
            Err(StoreError::Config(_))
        ));
        assert!(matches!(
            check_bump_request(Some(&[]), 1),
            Err(StoreError::Config(_))
        ));
    }

    #[test]
    fn check_bumped_accepts_only_the_planned_count() {
        let plan = plan_bump(None, rows(&[("a", 0), ("b", 0)]), 1).unwrap();
        assert!(check_bumped(&plan, 2).is_ok());
        assert!(matches!(
            check_bumped(&plan, 1),
            Err(StoreError::Unavailable(_))
        ));
        assert!(matches!(
            check_bumped(&plan, 3),
            Err(StoreError::Unavailable(_))
        ));
    }

    #[test]
    fn bump_refusal_message_names_at_most_twenty_per_list() {
        let refusal = BumpRefusal {
            missing: (0..25).map(|i| format!("m{i:02}")).collect(),
            overflow: vec!["full".into()],
        };
        let msg = refusal.to_string();
        assert!(msg.starts_with("not found: 'm00', 'm01'"), "{msg}");
        assert!(msg.contains("'m19', ... and 5 more;"), "{msg}");
        assert!(!msg.contains("'m20'"), "{msg}");
        assert!(
            msg.ends_with("max_id would pass 9223372036854775807: 'full'"),
            "{msg}"
        );
    }

    #[test]
    fn names_in_matches_each_name_and_its_counter_range_one_placeholder_a_value() {
        assert_eq!(names_in(None, "WHERE", Dialect::Sqlite, 1), "");
        let asked = names(&["a", "b"]);
        assert_eq!(
            names_in(Some(&asked), "AND", Dialect::Mysql, 1),
            " AND (name IN (?, ?) OR (name >= ? AND name < ?) OR (name >= ? AND name < ?))"
        );
        assert_eq!(
            names_in(Some(&asked), "AND", Dialect::Postgres, 3),
            " AND (name IN ($3, $4) OR (name COLLATE \"C\" >= $5 AND name COLLATE \"C\" < $6) \
             OR (name COLLATE \"C\" >= $7 AND name COLLATE \"C\" < $8))"
        );
        assert_eq!(
            bump_binds(Some(&asked)),
            ["a", "b", "a@", "a@:", "b@", "b@:"]
        );
    }

    #[tokio::test]
    async fn memory_bump_is_all_or_nothing_and_a_dry_run_writes_nothing() {
        let store = memory::MemoryStore::new();
        store.insert("a", 10, 1);
        store.insert("b", 20, 1);
        let asked = names(&["a", "nope"]);
        let refused = store.bump(Some(&asked), 5, BumpMode::Apply).await;
        assert!(matches!(refused, Err(StoreError::BumpRefused(_))));
        let planned = store.bump(None, 5, BumpMode::DryRun).await.unwrap();
        assert_eq!(planned.len(), 2);
        assert_eq!((store.max_id("a"), store.max_id("b")), (Some(10), Some(20)));
        store.bump(None, 5, BumpMode::Apply).await.unwrap();
        assert_eq!((store.max_id("a"), store.max_id("b")), (Some(15), Some(25)));
    }

    #[tokio::test]
    async fn memory_list_page_reads_names_above_after_and_says_if_more_follow() {
        let store = memory::MemoryStore::new();
        for n in ["b", "a", "C", "a.b"] {
            store.insert(n, 0, 1);
        }
        let first = store.list_page(None, None, 2).await.unwrap();
        let got: Vec<&str> = first.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!((got, first.more), (vec!["C", "a"], true));
        let rest = store
            .list_page(None, Some(&names(&["a"])[0]), 2)
            .await
            .unwrap();
        let got: Vec<&str> = rest.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!((got, rest.more), (vec!["a.b", "b"], false));
    }

    fn prefix(p: &str) -> NamePrefix {
        NamePrefix::parse(p).unwrap()
    }

    #[test]
    fn the_names_end_is_the_character_above_every_name_character() {
        assert_eq!(NAMES_END, crate::domain::ABOVE_NAME_CHARS.to_string());
    }

    #[test]
    fn a_page_range_has_one_lower_bound_the_higher_of_after_and_prefix() {
        let (p, below, above) = (prefix("m"), names(&["a"]), names(&["m.x"]));
        let range = |prefix, after, limit| {
            let r = page_range(prefix, after, limit);
            (r.lower, r.lower_op(), r.upper.into_owned(), r.read)
        };
        assert_eq!(range(None, None, 100), ("", ">", "{".into(), 101));
        assert_eq!(range(None, Some(&above[0]), 5), ("m.x", ">", "{".into(), 6));
        assert_eq!(range(Some(&p), None, 1), ("m", ">=", "m{".into(), 2));
        assert_eq!(
            range(Some(&p), Some(&below[0]), 1),
            ("m", ">=", "m{".into(), 2)
        );
        assert_eq!(
            range(Some(&p), Some(&above[0]), 1),
            ("m.x", ">", "m{".into(), 2)
        );
        assert_eq!(range(None, None, 5000).3, i64::from(MAX_PAGE) + 1);
    }

    #[test]
    fn a_page_range_past_the_prefix_is_empty() {
        let p = prefix("m");
        let (inside, at_end, past) = (names(&["mz"]), names(&["m"]), names(&["n"]));
        assert!(!page_range(Some(&p), Some(&inside[0]), 10).is_empty());
        assert!(!page_range(Some(&p), Some(&at_end[0]), 10).is_empty());
        assert!(page_range(Some(&p), Some(&past[0]), 10).is_empty());
        assert!(!page_range(None, Some(&past[0]), 10).is_empty());
    }

    #[tokio::test]
    async fn memory_list_page_narrows_to_the_prefix_and_ends_with_it() {
        let store = memory::MemoryStore::new();
        for n in ["a", "a.b", "a-b", "a:b", "a_b", "ab", "b", "A"] {
            store.insert(n, 0, 1);
        }
        let read = |prefix: &'static str, after: Option<&'static str>, limit| {
            let store = &store;
            async move {
                let after = after.map(|a| names(&[a]).remove(0));
                let page = store
                    .list_page(Some(&self::prefix(prefix)), after.as_ref(), limit)
                    .await
                    .unwrap();
                let got: Vec<String> = page.rows.iter().map(|r| r.name.to_string()).collect();
                (got, page.more)
            }
        };
        let all_a = ["a", "a-b", "a.b", "a:b", "a_b", "ab"]
            .map(String::from)
            .to_vec();
        assert_eq!(read("a", None, 10).await, (all_a.clone(), false));
        assert_eq!(read("a", None, 6).await, (all_a.clone(), false));
        assert_eq!(read("a", None, 5).await, (all_a[..5].to_vec(), true));
        assert_eq!(
            read("a", Some("a:b"), 10).await,
            (all_a[4..].to_vec(), false)
        );
        assert_eq!(read("a", Some("ab"), 10).await, (vec![], false));
        assert_eq!(read("a", Some("b"), 10).await, (vec![], false));
        assert_eq!(read("a", Some("A"), 1).await, (vec!["a".into()], true));
        assert_eq!(read("a.", None, 10).await, (vec!["a.b".into()], false));
        assert_eq!(read("c", None, 10).await, (vec![], false));
    }

    #[test]
    fn reservation_rejects_inconsistent_values() {
        assert!(reservation(100, 10, 10, "instance").is_ok());
        assert!(reservation(100, 0, 10, "instance").is_err());
        assert!(reservation(100, 10, 0, "instance").is_err());
        assert!(reservation(i64::MIN, 10, 10, "instance").is_err());
    }
}
