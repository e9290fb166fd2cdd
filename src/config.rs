//! Typed settings from flags and environment variables (`clap`).
//!
//! Every flag of `seqd serve` has an environment variable (docs/design.md,
//! "Configuration"). Secrets are redacted in `Debug`.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::{Args, Parser, Subcommand};

mod settings;

pub use crate::domain::Secret;
pub use crate::telemetry::LogFormat;
pub use settings::Settings;

use crate::service::ClientAuth;
use crate::store::migrator::SchemaSetup;
use crate::store::{Dialect, FenceOptions, MigrateMode};

/// The default database: an SQLite file in the working directory.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://seqd.db?mode=rwc";

/// The default of `--metrics-top`: sequences given per-sequence series on
/// `/metrics`.
pub const DEFAULT_METRICS_TOP: usize = crate::http::metrics::DEFAULT_TOP;

/// seqd: unique 64-bit IDs per named sequence, over HTTP.
#[derive(Debug, Parser)]
#[command(name = "seqd", version, about, long_about = None, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Flags of `serve` when no subcommand is given.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server (the default).
    Serve(Box<ServeArgs>),
    /// Apply the database migrations and exit (whatever --migrate says).
    Migrate(MigrateArgs),
    /// Print seqd's complete DDL (every migration, in order, with its
    /// seqd_migrations row) for an operator's own migration tool.
    Schema(SchemaArgs),
    /// Manage sequences directly in the database (operators).
    #[command(subcommand)]
    Sequences(SequencesCommand),
    /// Import Leaf's `leaf_alloc` table into seqd's `sequences` (migrating from Leaf).
    ImportLeaf(ImportLeafArgs),
    /// Import Tinyid's `tiny_id_info` and `tiny_id_token` (migrating from Tinyid).
    ImportTinyid(ImportTinyidArgs),
    /// Set up stripes: one sequence over several databases (operators).
    #[command(subcommand)]
    Stripes(StripesCommand),
    /// Client tokens: who may draw IDs from which sequences (operators).
    #[command(subcommand)]
    Tokens(TokensCommand),
}

/// Operators' commands on the client tokens (`--client-auth on`).
#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Make a token and print it, once (only its SHA-256 is stored).
    Create {
        /// Its unique label: 1 to 64 characters of A-Z a-z 0-9 . _ -.
        #[arg(long)]
        label: String,
        /// A name prefix it covers (repeat for several); `*` covers every name.
        #[arg(long = "prefix", required = true)]
        prefixes: Vec<String>,
        /// Its rights: draw, read or draw,read.
        #[arg(long, default_value = "draw")]
        can: String,
        /// How long it works, e.g. 90d or 12h; forever when absent.
        #[arg(long)]
        expires: Option<String>,
        #[allow(missing_docs)] // flattened: documented by its own fields
        #[command(flatten)]
        db: DatabaseArgs,
    },
    /// List every token (never its text): label, prefixes, rights, state.
    List {
        #[allow(missing_docs)] // flattened: documented by its own fields
        #[command(flatten)]
        db: DatabaseArgs,
    },
    /// Revoke a token: refused within 5 s by every instance that can read the token table.
    ///
    /// An instance that cannot read the table (cut from the database, or with stripes from
    /// the first stripe) keeps the set it read last, so the revoked token keeps drawing
    /// there until it can read the table again: cut from its only database, for as long as
    /// the IDs it holds in memory last; with stripes, while the first stripe is out of reach.
    Revoke {
        /// The token's label.
        label: String,
        #[allow(missing_docs)] // flattened: documented by its own fields
        #[command(flatten)]
        db: DatabaseArgs,
    },
}

/// Operators' commands on the stripe set.
#[derive(Debug, Subcommand)]
pub enum StripesCommand {
    /// Turn a database into stripe 1 of N, or a set of stripes into a larger
    /// set, never reissuing an ID (stop every seqd instance first).
    #[command(long_about = STRIPES_INIT_ABOUT)]
    Init(StripesInitArgs),
}

const STRIPES_INIT_ABOUT: &str = "Turn a database into stripe 1 of N, or a set of stripes into \
a larger set, never reissuing an ID.

Give every URL with --database-url: the existing database (or the existing stripes, in their \
order) first, then the new databases. Stop every seqd instance first: a running instance keeps \
the old stripe set and would reserve with the old layout. Init migrates every database, then, \
for every sequence on any stripe, creates its row where it is missing and raises every row to \
the highest max_id the sequence has on any stripe (so every stripe starts above every ID ever \
handed out), and last records each database as stripe i of N. Running it again is harmless. \
--dry-run prints what it would do and writes nothing (docs/operations.md, \"Adding stripes\").";

/// Flags of `seqd stripes init`.
#[derive(Debug, Clone, Args)]
pub struct StripesInitArgs {
    /// IDs per block of the layout [default: the existing set's, else 1000000000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
    pub block: Option<i64>,
    /// Print what would be done and write nothing (no migration either).
    #[arg(long)]
    pub dry_run: bool,
    #[allow(missing_docs)] // flattened: documented by its own fields
    #[command(flatten)]
    pub db: DatabaseArgs,
}

/// Flags of `seqd import-leaf`.
#[derive(Clone, Args)]
#[command(
    long_about = "Import Leaf's `leaf_alloc` table into seqd's `sequences` (migrating from Leaf).

Each row becomes a seqd sequence that continues where Leaf left off: Leaf's max_id is the next ID \
Leaf has not issued, so the seqd row gets max_id = leaf.max_id - 1 and serves leaf.max_id first. \
Stop Leaf's servers before importing: a Leaf fetch after the import would issue IDs seqd issues too.

Rows whose biz_tag is not a valid seqd name (or whose max_id/step are out of range) are reported \
and skipped; the command then exits non-zero unless --skip-invalid. Names that already exist in \
seqd are left as they are; one whose max_id is below Leaf's max_id - 1 is a conflict unless \
--raise lifts it, and a name that is a serial sequence in seqd is always one. Every row is checked \
before anything is written: a conflict refuses the whole import (nothing written, each problem \
row named, non-zero exit). The same import in plain SQL, when both tables share a database: \
docs/import-leaf.md."
)]
pub struct ImportLeafArgs {
    /// URL of Leaf's database, holding `leaf_alloc`: postgres://, mysql:// or mariadb://.
    #[arg(
        long,
        value_name = "URL",
        env = "SEQD_LEAF_DATABASE_URL",
        hide_env_values = true
    )]
    pub from: String,
    /// Print the plan and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Exit 0 even if some rows are not valid seqd sequences (they are still skipped).
    #[arg(long)]
    pub skip_invalid: bool,
    /// Raise the max_id of sequences that already exist in seqd to at least Leaf's max_id - 1
    /// (IDs in between are never issued).
    #[arg(long)]
    pub raise: bool,
    /// The seqd database to import into.
    #[allow(missing_docs)] // flattened: documented by its own fields
    #[command(flatten)]
    pub db: DatabaseArgs,
}

impl fmt::Debug for ImportLeafArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImportLeafArgs")
            .field("from", &crate::store::redact_url(&self.from))
            .field("dry_run", &self.dry_run)
            .field("skip_invalid", &self.skip_invalid)
            .field("raise", &self.raise)
            .field("db", &self.db)
            .finish()
    }
}

/// Flags of `seqd import-tinyid`.
#[derive(Clone, Args)]
#[command(
    long_about = "Import Tinyid's `tiny_id_info` and `tiny_id_token` into seqd (migrating from Tinyid).

Every biz_type becomes a seqd sequence that continues above every ID any of the Tinyid databases \
given handed out (its max_id is the largest max_id of them, whatever their delta and remainder). \
Every Tinyid token becomes a client token with the same text (only its SHA-256 stored) that may \
draw from names beginning with its biz types. Stop Tinyid's servers and clients first. Conflicts, \
invalid rows and --raise as for import-leaf: docs/import-tinyid.md."
)]
pub struct ImportTinyidArgs {
    /// URL of a Tinyid database, holding `tiny_id_info` and `tiny_id_token`: postgres://,
    /// mysql:// or mariadb://. Give every Tinyid database (repeat the flag).
    #[arg(long, value_name = "URL", required = true)]
    pub from: Vec<String>,
    /// Print the plan and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Exit 0 even if some rows or tokens are not usable in seqd (they are still skipped).
    #[arg(long)]
    pub skip_invalid: bool,
    /// Raise the max_id of sequences that already exist in seqd to at least Tinyid's largest
    /// max_id (IDs in between are never issued).
    #[arg(long)]
    pub raise: bool,
    /// The seqd database to import into.
    #[allow(missing_docs)] // flattened: documented by its own fields
    #[command(flatten)]
    pub db: DatabaseArgs,
}

impl fmt::Debug for ImportTinyidArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImportTinyidArgs")
            .field(
                "from",
                &self
                    .from
                    .iter()
                    .map(|u| crate::store::redact_url(u))
                    .collect::<Vec<_>>(),
            )
            .field("dry_run", &self.dry_run)
            .field("skip_invalid", &self.skip_invalid)
            .field("raise", &self.raise)
            .field("db", &self.db)
            .finish()
    }
}

/// Operators' commands on the `sequences` table.
#[derive(Debug, Subcommand)]
pub enum SequencesCommand {
    /// Create a sequence.
    Create {
        /// Its name: letters, digits and `._:-`, up to 128 characters.
        name: String,
        /// The first ID it will issue.
        #[arg(long, default_value_t = 1)]
        start: i64,
        /// Its base segment size (IDs reserved per database round trip, at least).
        #[arg(long, default_value_t = 1000)]
        step: i64,
        /// Free text.
        #[arg(long, default_value = "")]
        description: String,
        /// `instance` (segments in memory, IDs increasing per instance) or
        /// `global` (every ID from the database at request time, increasing
        /// across instances; one database only).
        #[arg(long, default_value = "instance", value_parser = ["instance", "global"])]
        ordering: String,
        #[allow(missing_docs)] // flattened: documented by its own fields
        #[command(flatten)]
        serial: SerialArgs,
        #[allow(missing_docs)] // flattened: documented by its own fields
        #[command(flatten)]
        db: DatabaseArgs,
    },
    /// List every sequence, or those whose name starts with --prefix, by name
    /// (byte order), reading one page of 1000 at a time.
    List {
        /// Only the sequences whose name starts with this (case-sensitive).
        #[arg(long, value_name = "PREFIX")]
        prefix: Option<String>,
        #[allow(missing_docs)] // flattened: documented by its own fields
        #[command(flatten)]
        db: DatabaseArgs,
    },
    /// Change a sequence's base step (takes effect at each instance's next fetch).
    SetStep {
        /// The sequence.
        name: String,
        /// The new base step.
        step: i64,
        #[allow(missing_docs)] // flattened: documented by its own fields
        #[command(flatten)]
        db: DatabaseArgs,
    },
    /// Raise max_id by N on the named sequences, or on all, in one transaction
    /// (the fence after an unplanned failover).
    #[command(long_about = BUMP_ABOUT)]
    Bump(BumpArgs),
    /// Delete a serial sequence's period rows whose period ended longer ago
    /// than --older-than (never the current period's).
    #[command(long_about = PURGE_ABOUT)]
    PurgePeriods {
        /// The serial sequence.
        name: String,
        /// How long ago a period must have ended, e.g. `400d`, `90days`, `12h`.
        #[arg(long, value_name = "AGE", value_parser = humantime::parse_duration)]
        older_than: std::time::Duration,
        /// List what would be deleted and delete nothing.
        #[arg(long)]
        dry_run: bool,
        #[allow(missing_docs)] // flattened: documented by its own fields
        #[command(flatten)]
        db: DatabaseArgs,
    },
}

/// The serial-number flags of `seqd sequences create`.
#[derive(Debug, Clone, Args)]
pub struct SerialArgs {
    /// Issue serial numbers in this format: literal text (letters, digits,
    /// `-_./:#`) and `{yyyy}` `{yy}` `{MM}` `{dd}` `{seq}` `{seq:0N}`, e.g.
    /// `ORD{yyyy}{MM}{dd}{seq:06}`.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
    /// When the counter starts again: never, day, month, year (needs --format).
    #[arg(long, value_name = "PERIOD")]
    pub reset: Option<String>,
    /// The IANA time zone of the periods, e.g. `Asia/Shanghai` (default UTC;
    /// needs --format).
    #[arg(long, value_name = "ZONE")]
    pub time_zone: Option<String>,
    /// A counter wider than {seq:0N}: refuse (default) or widen (needs --format).
    #[arg(long, value_name = "RULE")]
    pub overflow: Option<String>,
}

const PURGE_ABOUT: &str =
    "Delete a serial sequence's period rows whose period ended longer ago than --older-than \
(never the current period's).

Whatever --older-than says, a period that ended less than 24 hours ago is kept, and the report \
says so: an instance whose clock is behind still serves that period, and would create its row \
again and print its serials a second time. --dry-run lists what would be deleted and deletes \
nothing.";

const BUMP_ABOUT: &str =
    "Raise max_id by N on the named sequences, or on all, in one transaction: \
all or nothing.

Run it after a restore from an old backup, or a failover with --failover-fence off (seqd \
fences a promoted replica by itself otherwise), before any instance reaches the database (stop \
the instances or keep them cut from it until then; restart one that reached it first): every \
instance that reserves from it before the bump, a running one included, can hand lost IDs out \
again. N must exceed the most IDs that could have been reserved \
in the lost window (docs/operations.md). A serial sequence is fenced by its period counter \
rows (NAME@KEY): a bump of NAME raises them too, in the same transaction, and lists each one. \
A missing name, or a row (a counter too) that would pass 9223372036854775807, refuses the whole \
bump and changes nothing. --dry-run prints the plan and writes nothing.";

/// Flags of `seqd sequences bump`.
#[derive(Debug, Clone, Args)]
#[command(group = clap::ArgGroup::new("target").required(true).args(["names", "all"]))]
pub struct BumpArgs {
    /// The sequences to bump, each with its period counter rows (a name
    /// given twice counts once).
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
    /// Bump every sequence.
    #[arg(long)]
    pub all: bool,
    /// How much to add to each max_id: 1 to 9223372036854775807.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
    pub by: i64,
    /// Print the plan (each row's max_id now and after) and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[allow(missing_docs)] // flattened: documented by its own fields
    #[command(flatten)]
    pub db: DatabaseArgs,
}

/// Flags of `seqd schema`.
#[derive(Debug, Clone, Args)]
pub struct SchemaArgs {
    /// The SQL dialect of the DDL.
    #[arg(long, default_value = "postgres", value_parser = clap::builder::PossibleValuesParser::new(Dialect::NAMES)
        .map(|s| s.parse::<Dialect>().expect("a listed dialect")))]
    pub dialect: Dialect,
}

/// Where the database is, and what seqd does with its schema. `Debug` shows
/// the URL with its password redacted.
#[derive(Clone, Args)]
pub struct DatabaseArgs {
    /// Database URL: `postgres://`, `mysql://` (MariaDB too) or `sqlite://`; when not given,
    /// `$DATABASE_URL`, else `sqlite://seqd.db?mode=rwc`. Given several times (in the variable:
    /// several URLs separated by spaces), each URL is a stripe, in this order: every sequence spans
    /// all of them (docs/high-availability.md#high-availability-stripes).
    #[arg(
        long,
        env = "SEQD_DATABASE_URL",
        hide_env_values = true,
        value_delimiter = ' '
    )]
    pub database_url: Vec<String>,
    /// Largest adapted step, and largest step a sequence may be created with (the row's `step` is
    /// the floor the adapted step never goes below).
    #[arg(long, env = "SEQD_MAX_STEP", default_value_t = 1_000_000)]
    pub max_step: i64,
    /// Schema at start: `auto` applies missing migrations, `check` refuses to start (exit 2) when
    /// one is missing, `off` runs no DDL (a role with row rights only is enough); `seqd migrate`
    /// always applies (docs/operations.md#schema-and-migrations).
    #[arg(long = "migrate", value_name = "MODE", env = "SEQD_MIGRATE", default_value = "auto",
        value_parser = clap::builder::PossibleValuesParser::new(MigrateMode::NAMES)
            .map(|s| s.parse::<MigrateMode>().expect("a listed mode")))]
    pub migrate: MigrateMode,
    /// PostgreSQL: the schema of seqd's tables and migration history, set as `search_path` on every
    /// connection and created by `--migrate auto` if missing (one named in the URL's
    /// `options=-csearch_path%3D...` is not); `seqd schema` for a named schema:
    /// docs/operations.md#schema-and-migrations.
    #[arg(long, value_name = "NAME", env = "SEQD_SCHEMA", value_parser = parse_schema)]
    pub schema: Option<String>,
    /// `on`: the database server's identity is recorded and checked on every new connection; a
    /// different one (a promoted replica) is fenced before anything is reserved from it: every
    /// sequence raised past what the failover may have lost
    /// (docs/high-availability.md#failover-of-the-database). `off` only where replication is
    /// synchronous. No effect on SQLite.
    #[arg(long, value_name = "ON|OFF", env = "SEQD_FAILOVER_FENCE", value_enum,
        default_value_t = FenceSwitch::On)]
    pub failover_fence: FenceSwitch,
    /// The least a fence raises every sequence by; seqd raises by 1,000 times the largest
    /// reservation in force (`--max-step`, `--max-lease`, a batch) when that is more.
    #[arg(long, value_name = "IDS", env = "SEQD_FAILOVER_MARGIN",
        default_value_t = crate::store::migrator::DEFAULT_MARGIN,
        value_parser = clap::value_parser!(i64).range(1..))]
    pub failover_margin: i64,
    /// Connections of the pool to each database (each stripe has its own), plus one for the
    /// snowflake worker leases; two in ten serve the unauthenticated reads (`GET
    /// /v1/sequences...`), the rest the segment fetches
    /// (docs/operations.md#sizing-the-database-pool).
    #[arg(long, value_name = "N", env = "SEQD_DB_MAX_CONNECTIONS", default_value_t = 10,
        value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub db_max_connections: u32,
}

/// `--failover-fence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FenceSwitch {
    /// Server identities checked, a change fenced (the default).
    On,
    /// Nothing checked: for synchronous replication only.
    Off,
}

/// `--schema`: a name [`crate::store::migrator::check_schema_name`]
/// accepts; an empty one is refused, not taken as no schema.
fn parse_schema(name: &str) -> Result<String, String> {
    crate::store::migrator::check_schema_name(name)
        .map(|()| name.to_owned())
        .map_err(|e| match e {
            crate::store::StoreError::Config(why) => why,
            other => other.to_string(),
        })
}

impl fmt::Debug for DatabaseArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseArgs")
            .field(
                "database_url",
                &self
                    .database_url
                    .iter()
                    .map(|u| crate::store::redact_url(u))
                    .collect::<Vec<_>>(),
            )
            .field("max_step", &self.max_step)
            .field("migrate", &self.migrate)
            .field("schema", &self.schema)
            .field("failover_fence", &self.failover_fence)
            .field("failover_margin", &self.failover_margin)
            .field("db_max_connections", &self.db_max_connections)
            .finish()
    }
}

impl DatabaseArgs {
    /// The URLs in force, one per stripe (usually one): the flags,
    /// `SEQD_DATABASE_URL`, `DATABASE_URL`, or the default. Empty entries
    /// (doubled spaces) are dropped.
    pub fn urls(&self) -> Vec<String> {
        let given: Vec<String> = self
            .database_url
            .iter()
            .filter(|u| !u.is_empty())
            .cloned()
            .collect();
        if !given.is_empty() {
            return given;
        }
        match std::env::var("DATABASE_URL") {
            Ok(u) if !u.trim().is_empty() => u.split_whitespace().map(str::to_string).collect(),
            _ => vec![DEFAULT_DATABASE_URL.to_string()],
        }
    }

    /// The first URL in force (stripe 0): what commands that work on one
    /// database use.
    pub fn url(&self) -> String {
        self.urls().swap_remove(0)
    }

    /// The `--migrate` mode, `--schema` and the failover fence (its margin
    /// for the largest reservation `--max-step` allows; `seqd serve` adds
    /// its leases with [`SchemaSetup::with_reservation`]).
    pub fn schema_setup(&self) -> SchemaSetup {
        SchemaSetup {
            mode: self.migrate,
            schema: self.schema.clone(),
            fence: FenceOptions {
                enabled: self.failover_fence == FenceSwitch::On,
                margin: self.failover_margin,
                new_database: false,
            },
        }
        .with_reservation(self.max_step)
    }
}

/// Flags of `seqd migrate`.
#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    #[allow(missing_docs)] // flattened: documented by its own fields
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The database is new: create seqd's tables even on a server that was
    /// promoted from a replica (a PostgreSQL timeline above 1, a MariaDB
    /// replication position), where seqd otherwise refuses because they may
    /// have been lost with a failover (docs/high-availability.md). Only for
    /// an empty database made after the promotion; instances keep the fence.
    #[arg(long)]
    pub new_database: bool,
}

/// Flags of `seqd serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    #[allow(missing_docs)] // flattened: documented by its own fields
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// Address to bind.
    #[arg(long, env = "SEQD_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Bearer token for admin calls (creating and changing sequences, client tokens); it may also
    /// draw and read. Without it, admin calls are open on a loopback listener only.
    #[arg(long, env = "SEQD_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<Secret>,
    /// `on`: drawing IDs (every route) needs a client token with `draw` covering the name, listing
    /// and reading sequences one with `read` (`seqd tokens create`, docs/api.md#client-tokens); the
    /// admin token may do everything. `off`: anyone who reaches the port may draw from and list
    /// every sequence.
    #[arg(long, env = "SEQD_CLIENT_AUTH", value_enum, default_value_t = ClientAuth::Off)]
    pub client_auth: ClientAuth,
    /// Largest range one lease may hold (`POST /v1/sequences/{name}/lease?size=N`,
    /// docs/api.md#leases).
    #[arg(long, env = "SEQD_MAX_LEASE", default_value_t = crate::service::lease::DEFAULT_MAX_LEASE,
        value_parser = clap::value_parser!(i64).range(1..))]
    pub max_lease: i64,
    /// Where Tinyid's routes are served (`{prefix}/id/nextSegmentIdSimple`, ...;
    /// docs/api.md#tinyids-routes): Tinyid's clients reach seqd unchanged. Empty: at the root.
    #[arg(long, env = "SEQD_TINYID_PREFIX", default_value = crate::http::tinyid::DEFAULT_PREFIX,
        value_parser = crate::http::tinyid::parse_prefix)]
    pub tinyid_prefix: String,
    /// Address of the RESP listener (Redis clients: `INCR name`, `INCRBY name n`, `SEQD.NEXT`,
    /// `SEQD.BATCH`; docs/api.md#the-resp-door); off when not set.
    #[arg(long, env = "SEQD_RESP_LISTEN")]
    pub resp_listen: Option<String>,
    /// Address of the health listener: plain HTTP serving only `/healthz`, `/readyz` and
    /// `/metrics`, without TLS or client certificates, for probes and scrapers when the doors
    /// require client certificates (`--tls-client-ca`); off when not set.
    #[arg(long, env = "SEQD_HEALTH_LISTEN")]
    pub health_listen: Option<String>,
    /// A RESP connection with no command for this long is closed.
    #[arg(long, env = "SEQD_RESP_IDLE_TIMEOUT", default_value = "5m", value_parser = humantime::parse_duration)]
    pub resp_idle_timeout: Duration,
    /// Most open RESP connections; one more is answered `-ERR max number of clients reached` and
    /// closed. Lowered at start when the open-file limit cannot hold both doors' caps.
    #[arg(long, env = "SEQD_RESP_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub resp_max_connections: usize,
    /// How long a segment should last at the measured rate.
    #[arg(long, env = "SEQD_SEGMENT_TARGET", default_value = "10m", value_parser = humantime::parse_duration)]
    pub segment_target: Duration,
    /// Longest a request waits for a segment before answering 503.
    #[arg(long, env = "SEQD_WAIT_TIMEOUT", default_value = "3s", value_parser = humantime::parse_duration)]
    pub wait_timeout: Duration,
    /// Longest a request may take (body upload included) before a 408 `request_timeout`.
    #[arg(long, env = "SEQD_REQUEST_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub request_timeout: Duration,
    /// Most requests in flight at once; beyond it requests are shed at once with 503 `overloaded`
    /// (not queued).
    #[arg(long, env = "SEQD_MAX_CONCURRENCY", default_value_t = 10_000)]
    pub max_concurrency: usize,
    /// Longest a client may take to send a request head (a RESP command), from its first byte;
    /// slower clients are disconnected.
    #[arg(long, env = "SEQD_HEADER_READ_TIMEOUT", default_value = "5s", value_parser = humantime::parse_duration)]
    pub header_read_timeout: Duration,
    /// A connection with no byte read or written for this long (an idle keep-alive, a client that
    /// stopped reading) is closed.
    #[arg(long, env = "SEQD_IDLE_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    pub idle_timeout: Duration,
    /// Most open connections; past it, new connections wait in the listen backlog. Lowered at start
    /// when the open-file limit cannot hold both doors' caps.
    #[arg(long, env = "SEQD_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,
    /// Largest request body accepted, in bytes; a larger one, or a `Content-Length` announcing one,
    /// gets 413 `payload_too_large` on every route.
    #[arg(long, env = "SEQD_MAX_BODY", default_value_t = 64 * 1024)]
    pub max_body: usize,
    /// Longest a graceful shutdown waits for in-flight requests.
    #[arg(long, env = "SEQD_SHUTDOWN_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub shutdown_timeout: Duration,
    /// Per-sequence series on `/metrics` for at most this many sequences: those in trouble first,
    /// then those with the most IDs issued; 0 for none. Totals always cover every sequence
    /// (docs/monitoring.md#monitoring).
    #[arg(long, value_name = "N", env = "SEQD_METRICS_TOP", default_value_t = DEFAULT_METRICS_TOP)]
    pub metrics_top: usize,
    /// With several database URLs (stripes): a fetch that a stripe has not answered within this
    /// long is raced on the next stripe, and the slow one is marked down until a probe finds it
    /// answering.
    #[arg(long, env = "SEQD_FAILOVER_AFTER", default_value = "200ms", value_parser = humantime::parse_duration)]
    pub failover_after: Duration,
    /// How often each instance reads the settings of the sequences it holds
    /// in memory again, so a change made elsewhere (PATCH on another
    /// instance, SQL) is in force here within this interval. The default
    /// keeps the 5 s promise; shorter is for tests.
    #[arg(long, env = "SEQD_SETTINGS_REFRESH", default_value = "2s", value_parser = humantime::parse_duration, hide = true)]
    pub settings_refresh: Duration,
    /// How often the database is checked in the background; `/readyz`
    /// answers from the last check, never waiting on the database. Longer
    /// is for tests that count connection attempts.
    #[arg(long, env = "SEQD_HEALTH_CHECK_INTERVAL", default_value = "1s", value_parser = humantime::parse_duration, hide = true)]
    pub health_check_interval: Duration,
    /// Serve HTTP and RESP over TLS only, with this certificate (PEM; the chain after it, in the
    /// same file). Needs `--tls-key`. The files are read again for new handshakes when they
    /// change (within seconds) and on SIGHUP; a certificate expired or not yet valid is refused,
    /// at start and at reload (docs/operations.md#tls-on-the-doors).
    #[arg(long, value_name = "PATH", env = "SEQD_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "PATH", env = "SEQD_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Ask every client, on both doors (not the health listener), for a certificate signed by
    /// a CA of this PEM file (mutual TLS); a client without one is refused.
    #[arg(
        long,
        value_name = "PATH",
        env = "SEQD_TLS_CLIENT_CA",
        requires = "tls_cert"
    )]
    pub tls_client_ca: Option<PathBuf>,
    /// How often the TLS files are read to see whether they changed (a
    /// renewed certificate is in force within this interval). Longer is for
    /// tests of SIGHUP alone; shorter for tests of the watch.
    #[arg(long, env = "SEQD_TLS_WATCH_INTERVAL", default_value = "2s", value_parser = humantime::parse_duration, hide = true)]
    pub tls_watch_interval: Duration,
    /// `text` or `json`, on stderr; text is coloured only on a terminal (plain in a file or pipe);
    /// the level comes from `RUST_LOG` (default `info`).
    #[arg(long, env = "SEQD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Snowflake IDs: `--snowflake`, `--snowflake-epoch`, `--snowflake-bits`, ...
    #[command(flatten)]
    pub snowflake: crate::snowflake::SnowflakeArgs,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bump_needs_names_or_all_but_not_both_and_a_positive_by() {
        for args in [
            &["bump", "--by", "5"][..],
            &["bump", "a", "--all", "--by", "5"],
            &["bump", "a"],
            &["bump", "a", "--by", "0"],
            &["bump", "a", "--by=-5"],
            &["bump", "a", "--by", "9223372036854775808"],
        ] {
            let all = ["seqd", "sequences"].iter().chain(args);
            assert!(Cli::try_parse_from(all).is_err(), "{args:?} accepted");
        }
        let c = Cli::parse_from([
            "seqd",
            "sequences",
            "bump",
            "--all",
            "--by",
            "9223372036854775807",
            "--dry-run",
        ]);
        match c.command {
            Some(Command::Sequences(SequencesCommand::Bump(b))) => {
                assert!(b.all && b.dry_run && b.names.is_empty());
                assert_eq!(b.by, i64::MAX);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn secret_is_redacted_in_debug() {
        let args = Cli::parse_from(["seqd", "--admin-token", "hunter2"]);
        let shown = format!("{args:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(args.serve.admin_token.unwrap().expose(), "hunter2");
    }

    #[test]
    fn database_urls_are_redacted_in_debug() {
        let url = "postgres://seqd:pa/ss@db.example/seqd";
        let args = Cli::parse_from(["seqd", "--database-url", url]);
        let shown = format!("{args:?} {:?}", args.serve.db);
        assert!(!shown.contains("pa/ss"), "{shown}");
        assert!(
            shown.contains("postgres://seqd:***@db.example/seqd"),
            "{shown}"
        );
        let c = Cli::parse_from(["seqd", "sequences", "list", "--database-url", url]);
        let shown = format!("{c:?}");
        assert!(!shown.contains("pa/ss") && shown.contains("***"), "{shown}");
    }

    #[test]
    fn defaults_match_the_design() {
        let args = Cli::parse_from(["seqd"]);
        assert!(args.command.is_none());
        assert_eq!(args.serve.listen, "127.0.0.1:8080");
        assert_eq!(args.serve.segment_target, Duration::from_secs(600));
        assert_eq!(args.serve.wait_timeout, Duration::from_secs(3));
        assert_eq!(args.serve.db.max_step, 1_000_000);
        assert_eq!(args.serve.log_format, LogFormat::Text);
        assert_eq!(args.serve.metrics_top, 100);
        assert_eq!(args.serve.max_lease, 1_000_000);
        assert_eq!(
            Cli::parse_from(["seqd", "--max-lease", "500"])
                .serve
                .max_lease,
            500
        );
        assert!(Cli::try_parse_from(["seqd", "--max-lease", "0"]).is_err());
        assert_eq!(args.serve.tinyid_prefix, "/tinyid");
        assert_eq!(
            Cli::parse_from(["seqd", "--tinyid-prefix", "/ids/tinyid"])
                .serve
                .tinyid_prefix,
            "/ids/tinyid"
        );
        assert!(Cli::try_parse_from(["seqd", "--tinyid-prefix", "tinyid/"]).is_err());
    }

    #[test]
    fn subcommands_parse() {
        let c = Cli::parse_from(["seqd", "sequences", "create", "order", "--step", "50"]);
        match c.command {
            Some(Command::Sequences(SequencesCommand::Create {
                name, step, start, ..
            })) => {
                assert_eq!((name.as_str(), step, start), ("order", 50, 1));
            }
            other => panic!("unexpected {other:?}"),
        }
        let c = Cli::parse_from([
            "seqd",
            "import-leaf",
            "--from",
            "mysql://u:pw@h/leaf",
            "--dry-run",
        ]);
        match c.command {
            Some(Command::ImportLeaf(a)) => {
                assert!(a.dry_run && !a.skip_invalid && !a.raise);
                assert!(!format!("{a:?}").contains("pw"), "{a:?}");
            }
            other => panic!("unexpected {other:?}"),
        }
        let c = Cli::parse_from(["seqd", "sequences", "bump", "a", "b", "--by", "7"]);
        match c.command {
            Some(Command::Sequences(SequencesCommand::Bump(b))) => {
                assert_eq!(
                    (b.names, b.all, b.by, b.dry_run),
                    (vec!["a".into(), "b".into()], false, 7, false)
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        let c = Cli::parse_from(["seqd", "serve", "--segment-target", "90s"]);
        match c.command {
            Some(Command::Serve(s)) => assert_eq!(s.segment_target, Duration::from_secs(90)),
            other => panic!("unexpected {other:?}"),
        }
        let c = Cli::parse_from(["seqd", "serve", "--metrics-top", "0"]);
        match c.command {
            Some(Command::Serve(s)) => {
                assert_eq!(s.metrics_top, 0);
                assert_eq!(Settings::from_args(&s).metrics_top, 0);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(Cli::try_parse_from(["seqd", "--metrics-top", "-1"]).is_err());
    }
}
