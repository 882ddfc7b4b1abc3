//! Map and event output in bpftrace 0.17's formats.
//!
//! [`format_map_text`] renders a map the way `print(@m)` and the exit dump do;
//! the `*_json` functions render one NDJSON record each, as `bpftrace -f json`
//! does. Callers decode BPF maps into a [`MapDump`] first; these functions
//! only sort and format. [`sink`] writes the result to stdout or a file.

pub mod audit;
pub mod baseline;
pub mod bytes;
pub mod ci_report;
pub mod dist;
#[cfg(test)]
mod fixtures;
pub mod helper_error;
mod json;
pub mod junit;
mod layout;
mod maps;
pub mod metrics;
pub mod overhead;
pub mod printf;
pub mod records;
pub mod sink;
mod value;

pub use json::{
    format_attached_json, format_diagnostic_json, format_lost_events_json, format_map_json, format_printf_json,
};
pub use layout::{lhist_len, HIST_LEN};
pub use maps::{format_attached_text, format_map_text};
pub use value::{KeyPart, MapDump, MapValue};
