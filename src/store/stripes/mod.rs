//! One sequence over several databases (stripes): which IDs each stripe
//! owns ([`layout`]) and the store that spreads reservations over them
//! ([`striped`]). docs/design.md, "Stripes".

pub mod audit;
pub mod init;
pub mod layout;
pub mod record;
pub mod striped;

pub use layout::{LayoutError, StripeLayout, DEFAULT_BLOCK};
pub use record::{bind_stripes, StripeRecord};
pub use striped::{StripeStatus, StripedStore, DEFAULT_FAILOVER_AFTER};
