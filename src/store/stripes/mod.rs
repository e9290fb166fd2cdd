//! One sequence over several databases (stripes). docs/design.md, "Stripes".

pub mod audit;
pub mod init;
pub mod layout;
pub mod record;

pub use layout::{LayoutError, StripeLayout, DEFAULT_BLOCK};
pub use record::{bind_stripes, StripeRecord};
