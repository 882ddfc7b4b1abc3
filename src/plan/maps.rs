//! Every map of a compiled script by id, with its role: compile hands out
//! the ids here (the script's maps first, then rtrace's own: the rings,
//! the loss counters, the wake flag, stack maps as probes ask for them,
//! the `-c` pid set and the stop flag), and the runtime creates the maps
//! from the same table, so neither side knows the id scheme.

use probes_ebpf::ir::{AggKind, MapId, MapLayout, Ty, ValueKind};

use crate::plan::site::MapShape;
use crate::symbols::stacks::StackMode;

/// What one map is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapRole {
    /// The script's map number `i` (`Plan::shapes[i]`).
    Script(usize),
    /// Control messages (`exit()`, `print(m)` from a probe).
    ControlRing,
    /// Records for userspace statements.
    DataRing,
    /// Per-probe counts of records the data ring had no room for.
    Lost,
    /// Per-CPU counts of failed stack captures (slot 0 collisions, 1 map full).
    StackLost,
    /// One slot the reader raises before it sleeps: the next record wakes it.
    Wake,
    /// A stack trace map for stacks of this shape.
    Stack { depth: u32, user: bool, mode: StackMode },
    /// `-c`: the followed pids (the command and its descendants).
    Follow,
    /// A one-slot array every program checks first: non-zero = stopped
    /// (a kernel `exit()` writes [`EXIT_MARK`] | status there).
    Stop,
    /// `-k`: per-CPU counts and last errors of failed helper calls, one
    /// slot per checked call site (`probes_ebpf::record`).
    HelperErrors,
}

/// Set in the stop flag by a kernel `exit()`; the low 8 bits hold the status.
pub const EXIT_MARK: u64 = 0x100;

/// The status a kernel `exit()` left in the stop flag, if it did.
pub fn exit_status_in_stop_flag(flag: u64) -> Option<i32> {
    (flag & EXIT_MARK != 0).then_some((flag & 0xff) as i32)
}

/// The maps of one plan, indexed by map id.
#[derive(Clone, Debug, Default)]
pub struct MapTable {
    roles: Vec<MapRole>,
}

impl MapTable {
    /// The script's `script_maps` maps, then the rings, the loss counters
    /// and the wake flag. Stack maps, the pid set and the stop flag follow
    /// as compile asks for them.
    pub fn new(script_maps: usize) -> MapTable {
        let mut roles: Vec<MapRole> = (0..script_maps).map(MapRole::Script).collect();
        roles.extend([MapRole::ControlRing, MapRole::DataRing, MapRole::Lost, MapRole::StackLost, MapRole::Wake]);
        MapTable { roles }
    }

    fn push(&mut self, role: MapRole) -> MapId {
        self.roles.push(role);
        self.roles.len() as MapId - 1
    }

    /// The id of the first map with `role`.
    pub fn id(&self, role: MapRole) -> Option<MapId> {
        self.roles.iter().position(|r| *r == role).map(|i| i as MapId)
    }

    fn fixed(&self, role: MapRole) -> MapId {
        self.id(role).expect("MapTable::new adds the rings, counters and wake flag")
    }

    pub fn control_ring(&self) -> MapId {
        self.fixed(MapRole::ControlRing)
    }
    pub fn data_ring(&self) -> MapId {
        self.fixed(MapRole::DataRing)
    }
    pub fn lost(&self) -> MapId {
        self.fixed(MapRole::Lost)
    }
    pub fn stack_lost(&self) -> MapId {
        self.fixed(MapRole::StackLost)
    }
    pub fn wake(&self) -> MapId {
        self.fixed(MapRole::Wake)
    }
    /// The stop flag (compile allocates it last, [`MapTable::alloc_stop`]).
    pub fn stop(&self) -> Option<MapId> {
        self.id(MapRole::Stop)
    }
    pub fn follow(&self) -> Option<MapId> {
        self.id(MapRole::Follow)
    }
    /// The failed-helper counters (`-k`), when compile added them.
    pub fn helper_errors(&self) -> Option<MapId> {
        self.id(MapRole::HelperErrors)
    }

    /// The stack map for stacks of this shape, added on first use.
    pub fn stack(&mut self, depth: u32, user: bool, mode: StackMode) -> MapId {
        let role = MapRole::Stack { depth, user, mode };
        self.id(role).unwrap_or_else(|| self.push(role))
    }

    /// The shape of stack map `map`, if it is one.
    pub fn stack_info(&self, map: MapId) -> Option<(u32, bool, StackMode)> {
        match self.roles.get(map as usize)? {
            MapRole::Stack { depth, user, mode } => Some((*depth, *user, *mode)),
            _ => None,
        }
    }

    /// Some probe captures stacks.
    pub fn has_stacks(&self) -> bool {
        self.roles.iter().any(|r| matches!(r, MapRole::Stack { .. }))
    }

    /// Some probe captures user stacks (their mappings must be followed).
    pub fn has_user_stacks(&self) -> bool {
        self.roles.iter().any(|r| matches!(r, MapRole::Stack { user: true, .. }))
    }

    pub fn alloc_follow(&mut self) -> MapId {
        self.push(MapRole::Follow)
    }

    pub fn alloc_stop(&mut self) -> MapId {
        self.push(MapRole::Stop)
    }

    pub fn alloc_helper_errors(&mut self) -> MapId {
        self.push(MapRole::HelperErrors)
    }

    /// Every map id with its role, in id order.
    pub fn roles(&self) -> impl Iterator<Item = (MapId, MapRole)> + '_ {
        self.roles.iter().enumerate().map(|(i, r)| (i as MapId, *r))
    }

    /// How many map ids there are.
    pub fn count(&self) -> usize {
        self.roles.len()
    }

    /// The layout of every map by id, as the code generator sees them
    /// (`shapes`: the script maps' unified shapes).
    pub fn layouts(&self, shapes: &[MapShape]) -> Vec<MapLayout> {
        let scalar = |value| MapLayout { key: vec![], value };
        self.roles
            .iter()
            .map(|role| match *role {
                MapRole::Script(i) => shapes.get(i).map_or_else(|| MapShape::unused().layout, |s| s.layout.clone()),
                MapRole::ControlRing | MapRole::DataRing => scalar(ValueKind::RingBuf),
                MapRole::Lost | MapRole::StackLost => scalar(ValueKind::Agg(AggKind::Sum)),
                MapRole::HelperErrors => scalar(ValueKind::Agg(AggKind::Avg)),
                MapRole::Wake | MapRole::Stop => scalar(ValueKind::Value(Ty::Int)),
                MapRole::Stack { depth, .. } => scalar(ValueKind::StackTrace { depth }),
                MapRole::Follow => MapLayout { key: vec![Ty::Int], value: ValueKind::Value(Ty::Int) },
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_flag_decodes_to_the_exit_status() {
        assert_eq!(exit_status_in_stop_flag(1), None, "a plain stop from userspace");
        assert_eq!(exit_status_in_stop_flag(0x100), Some(0));
        assert_eq!(exit_status_in_stop_flag(0x1ff), Some(255));
    }

    #[test]
    fn ids_follow_the_script_maps() {
        let mut t = MapTable::new(2);
        assert_eq!((t.control_ring(), t.data_ring(), t.lost(), t.stack_lost(), t.wake()), (2, 3, 4, 5, 6));
        let a = t.stack(127, false, StackMode::Bpftrace);
        let b = t.stack(127, true, StackMode::Bpftrace);
        assert_eq!((a, b), (7, 8));
        assert_eq!(t.stack(127, false, StackMode::Bpftrace), a, "one map per stack shape");
        assert_eq!(t.stack_info(b), Some((127, true, StackMode::Bpftrace)));
        assert_eq!(t.stack_info(t.wake()), None);
        assert!(t.has_user_stacks());
        assert_eq!(t.alloc_follow(), 9);
        assert_eq!(t.alloc_stop(), 10);
        assert_eq!((t.follow(), t.stop(), t.count()), (Some(9), Some(10), 11));
        let layouts = t.layouts(&[]);
        assert_eq!(layouts[0], MapShape::unused().layout);
        assert_eq!(layouts[7].value, ValueKind::StackTrace { depth: 127 });
        assert_eq!(layouts[9].key, vec![Ty::Int]);
    }
}
