//! Another session's lock on a sequence row, as an operator's SQL session or
//! a stuck transaction holds it: `FOR UPDATE` on the row (PostgreSQL,
//! MariaDB) or, SQLite having no row locks, the database's write lock.

use sqlx::{Connection, Executor, MySqlConnection, PgConnection, SqliteConnection};

use super::{Backend, TestDb};

/// The open transaction holding the lock; [`HeldLock::release`] commits it.
pub enum HeldLock {
    Postgres(PgConnection),
    Mysql(MySqlConnection),
    Sqlite(SqliteConnection),
}

impl HeldLock {
    /// Takes the lock on row `name` of `db` in a new session.
    pub async fn take(db: &TestDb, name: &str) -> HeldLock {
        let lock = format!("SELECT max_id FROM sequences WHERE name = '{name}' FOR UPDATE");
        match db.backend {
            Backend::Postgres => {
                let mut c = PgConnection::connect(&db.url).await.unwrap();
                c.execute("BEGIN").await.unwrap();
                c.execute(lock.as_str()).await.unwrap();
                HeldLock::Postgres(c)
            }
            Backend::Mysql => {
                let mut c = MySqlConnection::connect(&db.url).await.unwrap();
                c.execute("BEGIN").await.unwrap();
                c.execute(lock.as_str()).await.unwrap();
                HeldLock::Mysql(c)
            }
            Backend::Sqlite => {
                let mut c = SqliteConnection::connect(&db.url).await.unwrap();
                c.execute("BEGIN IMMEDIATE").await.unwrap();
                HeldLock::Sqlite(c)
            }
        }
    }

    /// Commits the transaction: the lock is gone.
    pub async fn release(self) {
        match self {
            HeldLock::Postgres(mut c) => c.execute("COMMIT").await.map(|_| ()).unwrap(),
            HeldLock::Mysql(mut c) => c.execute("COMMIT").await.map(|_| ()).unwrap(),
            HeldLock::Sqlite(mut c) => c.execute("COMMIT").await.map(|_| ()).unwrap(),
        }
    }
}
