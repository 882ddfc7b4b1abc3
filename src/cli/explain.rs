//! `--explain`: print the plan's explanation (`compile::explain`) instead
//! of running it.

use std::io::Write;

use crate::compile::{explain, Plan};
use crate::script::Session;

pub fn print(session: &Session, plan: &Plan, source: &str) {
    // Write errors (a closed pipe: `--explain | head`) just end the listing.
    let _ = std::io::stdout().lock().write_all(explain::render(session, plan, source).as_bytes());
}
