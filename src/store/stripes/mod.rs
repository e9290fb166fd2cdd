//! One sequence over several databases (stripes). docs/design.md, "Stripes".

pub mod layout;

pub use layout::{LayoutError, StripeLayout, DEFAULT_BLOCK};
