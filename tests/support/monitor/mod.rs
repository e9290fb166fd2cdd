//! Helpers of the monitor page's browser tests (tests/browser/monitor_browser.rs):
//! the browser, and the page compared with the API.

pub mod browser;
pub mod page;
