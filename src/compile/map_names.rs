//! Two maps declared with the same name print under one `@name`; when their
//! shapes differ (other key parts, another aggregation or value) the output
//! can't be read, so that is an error at the second `map("name")` call.
//! Maps of the same shape may share a name (a module that declares its map
//! each time it is imported).

use probes_ebpf::ir::{Ty, ValueKind};
use rhai::Position;

use crate::plan::site::MapShape;
use crate::script::api::MapHandle;

/// What decides how a map prints: its key parts' kinds (not string sizes),
/// its value kind and its aggregation.
fn printed_form(shape: &MapShape) -> (Vec<bool>, ValueKind, String) {
    let key = shape.layout.key.iter().map(|t| matches!(t, Ty::Int)).collect();
    (key, shape.layout.value, format!("{:?}", shape.agg))
}

/// The first map that reuses an earlier map's name with another shape:
/// where it was declared, and the error.
pub fn check(maps: &[MapHandle], shapes: &[MapShape]) -> Option<(Position, String)> {
    let unused = MapShape::unused();
    for (i, (m, shape)) in maps.iter().zip(shapes).enumerate() {
        if *shape == unused {
            continue;
        }
        let name = m.name();
        let earlier = maps[..i]
            .iter()
            .zip(shapes)
            .find(|(e, s)| e.name() == name && **s != unused && printed_form(s) != printed_form(shape));
        if let Some((first, _)) = earlier {
            let was = match first.options().pos.line() {
                Some(line) => format!(" (line {line})"),
                None => String::new(),
            };
            return Some((
                m.options().pos,
                format!(
                    "a map named '{name}' is already declared{was} and used with another shape; \
                     both would print as @{name}: give this one another name"
                ),
            ));
        }
    }
    None
}
