//! The tests that run the `seqd` binary: `seqd serve` processes driven through
//! real sockets (HTTP, RESP, TLS), the command line, database servers of
//! their own (replication, TLS peers), faults and failover. One test binary,
//! each former file a module (so test names read `failover::...`); the
//! helpers of `tests/support` it uses are compiled once, here.

/// The helpers of `tests/support` this binary uses.
#[macro_use]
#[path = "../support"]
mod support {
    #[macro_use]
    pub mod common;
    pub mod db_servers;
    pub mod metrics_text;
    pub mod pki;
    pub mod proxy;
    pub mod replicas;
    pub mod resp_support;
    pub mod roles;
    pub mod server;
    pub mod tls_peers;
}

mod cli;
mod client_chaos;
mod clients_doc;
mod db_tls;
mod deploy;
mod durability;
mod failover;
mod faults;
mod fence;
mod give_back;
mod grants;
mod harness;
mod leaf_import;
mod limits;
mod log_plain;
mod metrics;
mod multi_instance;
mod pool_size;
mod replicas;
mod request_log;
mod resp;
mod resp_clients;
mod resp_snowflake;
mod schema;
mod serial_clock;
mod serial_purge;
mod stripes_chaos;
mod stripes_safety;
mod stripes_startup;
mod tinyid_import;
mod tls_clients;
mod tls_reload;
mod tokens_secrets;
