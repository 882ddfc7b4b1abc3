//! The values a probe closure captured from the script's top level, as the
//! split (`split.rs`) and lowering (`lower/`) both see them: maps become map
//! references, integers, booleans and strings constants; anything else is
//! only in userspace.

use std::collections::HashMap;

use rhai::Dynamic;

use crate::script::MapHandle;

/// A value captured from the script's top level.
#[derive(Clone)]
pub(crate) enum CapturedValue {
    Map(MapHandle),
    Int(i64),
    Str(String),
    Other(&'static str),
}

/// The captured values by parameter name (`curry` matched to the first `params`).
pub(crate) fn captured(params: &[String], curry: &[Dynamic]) -> HashMap<String, CapturedValue> {
    let mut captures = HashMap::new();
    for (name, value) in params.iter().zip(curry) {
        let v = value.flatten_clone();
        let c = if let Some(m) = v.clone().try_cast::<MapHandle>() {
            CapturedValue::Map(m)
        } else if let Ok(i) = v.as_int() {
            CapturedValue::Int(i)
        } else if let Ok(b) = v.as_bool() {
            CapturedValue::Int(b as i64)
        } else if let Ok(s) = v.clone().into_string() {
            CapturedValue::Str(s)
        } else {
            CapturedValue::Other(v.type_name())
        };
        captures.insert(name.clone(), c);
    }
    captures
}
