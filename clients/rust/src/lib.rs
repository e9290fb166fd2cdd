#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

mod buffer;
mod client;
mod error;
mod names;
mod transport;

pub use client::{
    Client, ClientBuilder, CloseSummary, Sequence, DEFAULT_MAX_BATCH, DEFAULT_PREFETCH_AT,
    DEFAULT_RETRY_AFTER, DEFAULT_TIMEOUT,
};
pub use error::{Attempt, Error};
