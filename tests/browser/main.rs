//! The monitor page in headless Chromium through chromedriver: a test binary
//! of its own, as it needs a browser and takes its time.

/// The helpers of `tests/support` this binary uses.
#[macro_use]
#[path = "../support"]
mod support {
    #[macro_use]
    pub mod common;
    pub mod monitor;
    pub mod server;
}

mod monitor_browser;
mod monitor_layout;
