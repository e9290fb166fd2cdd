//! The tests that call the library in process: the allocator and its core,
//! the stores' contracts on every backend, the router and in-process servers
//! (`support::server::TestServer`) on real sockets, and the checks of the
//! documents against the code. One test binary, each former file a module
//! (so test names read `allocator_core::...`); the helpers of `tests/support`
//! it uses are compiled once, here.

/// The helpers of `tests/support` this binary uses.
#[macro_use]
#[path = "../support"]
mod support {
    #[macro_use]
    pub mod common;
    pub mod metrics_text;
    pub mod openapi_doc;
    pub mod pki;
    pub mod proxy;
    pub mod recording;
    pub mod server;
}

mod allocator_core;
mod api;
mod api_router;
mod bump;
mod code_tour;
mod container;
mod db_failures;
mod direct_routes;
mod docs_links;
mod dynamic_step;
mod edge;
mod first_groups;
mod global_order;
mod hostile;
mod ids_as_string;
mod isolation;
mod layers;
mod leases;
mod lifecycle;
mod log_flood;
mod metrics_size;
mod monitoring_doc;
mod openapi;
mod openapi_codes;
mod prop_allocator;
mod readme_flags;
mod reads;
mod serial_api;
mod serial_capacity;
mod serial_core;
mod serial_store;
mod serializable;
mod slow_clients;
mod snowflake;
mod snowflake_api;
mod store_contract;
mod store_contract_reserve;
mod stress;
mod stripes_core;
mod tinyid;
mod tls;
mod tokens;
mod unusable_rows;
mod worker_leases_contract;
