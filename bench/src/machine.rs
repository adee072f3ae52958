//! What we know about the machine and a process's memory, read from `/proc` (no unsafe).

use serde::Serialize;

/// The machine a report was measured on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// Logical CPUs available to this process.
    pub cores: usize,
    /// `MemTotal` from `/proc/meminfo`, in KiB.
    pub mem_total_kib: u64,
    /// `MemAvailable` from `/proc/meminfo` when the run started, in KiB.
    pub mem_available_kib: u64,
    /// `model name` of the first CPU in `/proc/cpuinfo`, if any.
    pub cpu: Option<String>,
    /// The kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: Option<String>,
}

impl Machine {
    /// Reads the current machine.
    pub fn current() -> Machine {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            mem_total_kib: kib_field(&meminfo, "MemTotal:").unwrap_or(0),
            mem_available_kib: kib_field(&meminfo, "MemAvailable:").unwrap_or(0),
            cpu: cpuinfo
                .lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string()),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .map(|s| s.trim().to_string()),
        }
    }
}

/// A `Key:   1234 kB` field of a `/proc` file, in KiB.
pub fn kib_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Memory of this process: `(VmRSS, VmHWM)` in KiB.
pub fn own_memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (
        kib_field(&status, "VmRSS:").unwrap_or(0),
        kib_field(&status, "VmHWM:").unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_fields() {
        let text = "Name:\tx\nVmHWM:\t   2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(kib_field(text, "VmHWM:"), Some(2048));
        assert_eq!(kib_field(text, "VmRSS:"), Some(1024));
        assert_eq!(kib_field(text, "VmSwap:"), None);
    }

    #[test]
    fn reads_this_process() {
        let (rss, hwm) = own_memory();
        assert!(rss > 0 && hwm >= rss);
        let m = Machine::current();
        assert!(m.cores >= 1 && m.mem_total_kib > 0);
    }
}
