//! The client's tests against a real seqd server started in process on
//! SQLite: one test binary, each former file a module (`client::...`,
//! `errors::...`, `tls::...`).

#[path = "../support/mod.rs"]
mod support;

/// The server's test PKI (certificates made with rcgen, a rustls client).
#[path = "../../../../tests/support/pki/mod.rs"]
mod pki;

mod client;
mod errors;
mod tls;
