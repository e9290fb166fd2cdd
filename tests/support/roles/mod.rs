//! The runtime role of docs/operations.md ("The runtime grants"): a fresh
//! role (PostgreSQL) or user (MariaDB) given exactly the statements the
//! document shows, read from the document itself, so that a test of them
//! and the document cannot drift apart. Dropped with its guard.

use crate::support::common::{self, Backend, TestDb};

/// The document whose fenced SQL blocks hold the grants.
const OPERATIONS: &str = include_str!("../../../docs/operations.md");
/// The role's name in the documented statements.
const ROLE: &str = "seqd_app";
/// The schema's (PostgreSQL) or database's (MariaDB) name in them.
const NAMESPACE: &str = "seqd";
/// The password in them, as an SQL string.
const PASSWORD: &str = "'change-me'";

/// A role or user with the documented runtime grants on a test database;
/// dropped (with its privileges) when the guard is.
pub struct RuntimeRole {
    backend: Backend,
    /// The administrator's URL (the test database's), which drops it.
    admin_url: String,
    name: String,
    /// The URL of the test database that logs in as the role.
    pub url: String,
    /// The tables of seqd's schema or database when the grants were given.
    pub tables: Vec<String>,
}

impl RuntimeRole {
    /// Runs the documented statements of `db`'s backend on `db` as its
    /// administrator, for a fresh role and password and `db`'s schema or
    /// database. Run it once seqd's tables are made (PostgreSQL grants on
    /// tables that exist).
    pub async fn grant(db: &TestDb) -> RuntimeRole {
        let (namespace, tables) = namespace_and_tables(db).await;
        let name = unique(ROLE);
        let password = unique("pw");
        let mut url = url::Url::parse(&db.url).unwrap();
        url.set_username(&name).unwrap();
        url.set_password(Some(&password)).unwrap();
        let role = RuntimeRole {
            backend: db.backend,
            admin_url: db.url.clone(),
            name: name.clone(),
            url: url.to_string(),
            tables,
        };
        let block = documented_block(db.backend);
        assert!(
            block.contains(PASSWORD),
            "no password {PASSWORD} in the documented block:\n{block}"
        );
        let block = block.replace(PASSWORD, &format!("'{password}'"));
        let sql = rename(&block, &[(ROLE, &name), (NAMESPACE, &namespace)]);
        for statement in statements(&sql) {
            common::execute(db, statement).await;
        }
        role
    }
}

impl Drop for RuntimeRole {
    /// Drops the role and what it was granted, even after a failed test: a
    /// role belongs to the server, not to the test's schema or database.
    fn drop(&mut self) {
        let (backend, url, name) = (self.backend, self.admin_url.clone(), self.name.clone());
        common::cleanup(async move {
            let drops = match backend {
                Backend::Postgres => vec![
                    format!("DROP OWNED BY {name}"),
                    format!("DROP ROLE IF EXISTS {name}"),
                ],
                _ => vec![format!("DROP USER IF EXISTS '{name}'@'%'")],
            };
            for sql in drops {
                let _ = common::try_execute_at(backend, &url, &sql).await;
            }
        });
    }
}

/// The one fenced `sql` block of docs/operations.md for `backend` that
/// grants: its first line names the backend (`-- PostgreSQL:`,
/// `-- MariaDB / MySQL:`).
fn documented_block(backend: Backend) -> &'static str {
    let first_line = match backend {
        Backend::Postgres => "-- PostgreSQL:",
        Backend::Mysql => "-- MariaDB / MySQL:",
        Backend::Sqlite => panic!("SQLite has no roles"),
    };
    let blocks: Vec<&str> = OPERATIONS
        .split("```sql\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("```").map(|(block, _)| block))
        .filter(|block| block.starts_with(first_line) && block.contains("GRANT"))
        .collect();
    assert_eq!(
        blocks.len(),
        1,
        "docs/operations.md: one fenced sql block starting {first_line:?} with GRANT: {blocks:?}"
    );
    blocks[0]
}

/// `sql` with each identifier (a run of letters, digits and `_`) that is
/// one of `names` replaced by its new name; asserting that each occurs.
fn rename(sql: &str, names: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut seen = vec![false; names.len()];
    let mut rest = sql;
    while let Some(c) = rest.chars().next() {
        let word = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if word == 0 {
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let (ident, after) = rest.split_at(word);
        match names.iter().position(|(from, _)| *from == ident) {
            Some(i) => {
                seen[i] = true;
                out.push_str(names[i].1);
            }
            None => out.push_str(ident),
        }
        rest = after;
    }
    for ((from, _), seen) in names.iter().zip(seen) {
        assert!(seen, "no {from} in the documented statements:\n{sql}");
    }
    out
}

/// The statements of `sql`: comment lines left out, split at `;`.
fn statements(sql: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in sql.lines().filter(|l| !l.trim_start().starts_with("--")) {
        out.extend(line.split(';').map(str::trim).filter(|s| !s.is_empty()));
    }
    out
}

/// The name of `db`'s schema (PostgreSQL) or database (MariaDB), and its
/// tables (asserted to be some).
async fn namespace_and_tables(db: &TestDb) -> (String, Vec<String>) {
    use sqlx::Connection;
    let rows: Vec<(String, String)> = match db.backend {
        Backend::Postgres => {
            let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
            sqlx::query_as(
                "SELECT current_schema()::text, table_name::text FROM information_schema.tables \
                 WHERE table_schema = current_schema()",
            )
            .fetch_all(&mut c)
            .await
            .unwrap()
        }
        Backend::Mysql => {
            let mut c = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
            sqlx::query_as(
                "SELECT CAST(DATABASE() AS CHAR), CAST(TABLE_NAME AS CHAR) \
                 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()",
            )
            .fetch_all(&mut c)
            .await
            .unwrap()
        }
        Backend::Sqlite => panic!("SQLite has no roles"),
    };
    let namespace = rows
        .first()
        .unwrap_or_else(|| panic!("no tables in the {:?} test database", db.backend))
        .0
        .clone();
    (namespace, rows.into_iter().map(|(_, t)| t).collect())
}

/// A unique role, user or schema name starting with `prefix`.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}_{}_{:x}", std::process::id(), nanos & 0xffff_ffff)
}
