//! One sequence over several databases (stripes): which IDs each stripe
//! owns ([`layout`]) and the store that spreads reservations over them
//! ([`striped`]). docs/design.md, "Stripes".

pub mod audit;
pub mod bind;
pub mod init;
pub mod layout;
pub mod record;
pub mod striped;

pub use bind::bind_stripes;
pub use layout::{LayoutError, StripeLayout, DEFAULT_BLOCK};
pub use record::StripeRecord;
pub use striped::{StripeStatus, StripedStore, DEFAULT_FAILOVER_AFTER};
