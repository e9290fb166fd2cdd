//! The SQL dialects seqd speaks: [`Dialect`], its name and the one parser
//! of database URL schemes. What each dialect writes for the migrations is
//! in [`super::migrator`].

/// An SQL dialect seqd has a backend and migrations for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// PostgreSQL.
    Postgres,
    /// MariaDB / MySQL.
    Mysql,
    /// SQLite.
    Sqlite,
}

impl Dialect {
    /// The names accepted by [`str::parse`], in order.
    pub const NAMES: [&'static str; 3] = ["postgres", "mysql", "sqlite"];

    /// The dialect of a database URL, by its scheme (any case):
    /// `postgres://` or `postgresql://`, `mysql://` or `mariadb://` (one wire
    /// protocol), `sqlite:`; with the URL as the driver takes it (`mariadb`
    /// is spelled `mysql` for sqlx). The one parser of URL schemes: opening a
    /// store and reading Leaf's table both use it. An unknown scheme is
    /// returned as the error.
    pub fn of_url(url: &str) -> Result<(Dialect, std::borrow::Cow<'_, str>), String> {
        let scheme = url
            .split_once(':')
            .map(|(s, _)| s.to_ascii_lowercase())
            .unwrap_or_default();
        let dialect = match scheme.as_str() {
            "postgres" | "postgresql" => Dialect::Postgres,
            "mysql" => Dialect::Mysql,
            "mariadb" => {
                let url = format!("mysql{}", &url[scheme.len()..]);
                return Ok((Dialect::Mysql, std::borrow::Cow::Owned(url)));
            }
            "sqlite" => Dialect::Sqlite,
            _ => return Err(scheme),
        };
        Ok((dialect, std::borrow::Cow::Borrowed(url)))
    }

    /// Its name, as [`str::parse`] accepts it: the backend's name in logs,
    /// metrics' labels and the retry counts.
    pub const fn name(self) -> &'static str {
        match self {
            Dialect::Postgres => "postgres",
            Dialect::Mysql => "mysql",
            Dialect::Sqlite => "sqlite",
        }
    }
}

impl std::str::FromStr for Dialect {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "postgres" | "postgresql" => Ok(Dialect::Postgres),
            "mysql" | "mariadb" => Ok(Dialect::Mysql),
            "sqlite" => Ok(Dialect::Sqlite),
            _ => Err(format!(
                "invalid dialect {s:?}: expected postgres, mysql or sqlite"
            )),
        }
    }
}
