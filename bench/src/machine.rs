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

/// Sockets this process holds open (entries of `/proc/self/fd` that are sockets); 0 when
/// unreadable.
pub fn own_sockets() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|target| target.to_string_lossy().starts_with("socket:"))
                .count()
        })
        .unwrap_or(0)
}

/// CPU time (user + system) this process has used so far, in seconds, from `/proc/self/stat`
/// (clock ticks of 1/100 s, Linux's `USER_HZ`); 0 when unreadable. The Go peer reads it the
/// same way.
pub fn own_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    cpu_seconds_of(&stat).unwrap_or(0.0)
}

/// CPU time (user + system) of process `pid` so far, in seconds; 0 when unreadable.
pub fn pid_cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    cpu_seconds_of(&stat).unwrap_or(0.0)
}

/// `VmRSS` of process `pid` in KiB; 0 when unreadable.
pub fn pid_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    kib_field(&status, "VmRSS:").unwrap_or(0)
}

/// `VmHWM` (peak resident set) of process `pid` in KiB; 0 when unreadable.
pub fn pid_peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    kib_field(&status, "VmHWM:").unwrap_or(0)
}

/// `utime + stime` of a `/proc/<pid>/stat` line, in seconds.
fn cpu_seconds_of(stat: &str) -> Option<f64> {
    // The command name may hold spaces and parentheses: count fields after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some((ticks(11)? + ticks(12)?) as f64 / 100.0)
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
    fn parses_cpu_ticks() {
        let stat = "42 (a b) c) S 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0 1";
        assert_eq!(cpu_seconds_of(stat), Some(2.0));
        assert_eq!(cpu_seconds_of("42 (x) S 1"), None);
        // Burn CPU until this process has used some (bounded by wall time).
        let start = std::time::Instant::now();
        let mut spent = 0u64;
        while own_cpu_seconds() < 0.02 && start.elapsed().as_secs() < 10 {
            spent = spent.wrapping_add(std::hint::black_box(spent) | 1);
        }
        assert!(
            own_cpu_seconds() >= 0.02,
            "no CPU time read from /proc/self/stat"
        );
    }

    #[test]
    fn counts_open_sockets() {
        let listeners: Vec<_> = (0..3)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        assert!(own_sockets() >= listeners.len());
    }

    #[test]
    fn reads_this_process() {
        let (rss, hwm) = own_memory();
        assert!(rss > 0 && hwm >= rss);
        let m = Machine::current();
        assert!(m.cores >= 1 && m.mem_total_kib > 0);
    }
}
