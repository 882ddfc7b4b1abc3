//! BPF helper function ids used by generated code (from the kernel's
//! `enum bpf_func_id`).

pub const MAP_LOOKUP_ELEM: u32 = 1;
pub const MAP_UPDATE_ELEM: u32 = 2;
pub const MAP_DELETE_ELEM: u32 = 3;
pub const PROBE_READ: u32 = 4;
pub const KTIME_GET_NS: u32 = 5;
pub const TRACE_PRINTK: u32 = 6;
pub const GET_PRANDOM_U32: u32 = 7;
pub const GET_SMP_PROCESSOR_ID: u32 = 8;
pub const GET_CURRENT_PID_TGID: u32 = 14;
pub const GET_CURRENT_UID_GID: u32 = 15;
pub const GET_CURRENT_COMM: u32 = 16;
pub const GET_STACKID: u32 = 27;
pub const GET_CURRENT_TASK: u32 = 35;
pub const PROBE_READ_STR: u32 = 45;
pub const GET_CURRENT_CGROUP_ID: u32 = 80;
pub const SEND_SIGNAL: u32 = 109;
pub const JIFFIES64: u32 = 118;
pub const PROBE_READ_USER: u32 = 112;
pub const PROBE_READ_KERNEL: u32 = 113;
pub const PROBE_READ_USER_STR: u32 = 114;
pub const PROBE_READ_KERNEL_STR: u32 = 115;
pub const RINGBUF_OUTPUT: u32 = 130;
pub const RINGBUF_RESERVE: u32 = 131;
pub const RINGBUF_SUBMIT: u32 = 132;
pub const RINGBUF_DISCARD: u32 = 133;
pub const RINGBUF_QUERY: u32 = 134;
pub const MAP_LOOKUP_PERCPU_ELEM: u32 = 195;

/// A helper's name for disassembly.
pub fn name(id: u32) -> &'static str {
    match id {
        MAP_LOOKUP_ELEM => "map_lookup_elem",
        MAP_UPDATE_ELEM => "map_update_elem",
        MAP_DELETE_ELEM => "map_delete_elem",
        PROBE_READ => "probe_read",
        KTIME_GET_NS => "ktime_get_ns",
        TRACE_PRINTK => "trace_printk",
        GET_PRANDOM_U32 => "get_prandom_u32",
        GET_SMP_PROCESSOR_ID => "get_smp_processor_id",
        GET_CURRENT_PID_TGID => "get_current_pid_tgid",
        GET_CURRENT_UID_GID => "get_current_uid_gid",
        GET_CURRENT_COMM => "get_current_comm",
        GET_STACKID => "get_stackid",
        GET_CURRENT_TASK => "get_current_task",
        SEND_SIGNAL => "send_signal",
        JIFFIES64 => "jiffies64",
        PROBE_READ_STR => "probe_read_str",
        GET_CURRENT_CGROUP_ID => "get_current_cgroup_id",
        PROBE_READ_USER => "probe_read_user",
        PROBE_READ_KERNEL => "probe_read_kernel",
        PROBE_READ_USER_STR => "probe_read_user_str",
        PROBE_READ_KERNEL_STR => "probe_read_kernel_str",
        RINGBUF_OUTPUT => "ringbuf_output",
        RINGBUF_RESERVE => "ringbuf_reserve",
        RINGBUF_SUBMIT => "ringbuf_submit",
        RINGBUF_DISCARD => "ringbuf_discard",
        RINGBUF_QUERY => "ringbuf_query",
        MAP_LOOKUP_PERCPU_ELEM => "map_lookup_percpu_elem",
        _ => "helper",
    }
}
