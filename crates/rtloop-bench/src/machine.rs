//! What machine a benchmark ran on (also `rtloop sys-info`'s lines).

use rtloop_sys as sys;

/// A file's text, trimmed (None if it cannot be read).
#[must_use]
pub fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The CPU's model name from /proc/cpuinfo ("unknown" if it has none).
#[must_use]
pub fn cpu_model() -> String {
    read("/proc/cpuinfo")
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Bytes of memory (MemTotal of /proc/meminfo).
#[must_use]
pub fn mem_total() -> Option<u64> {
    let s = read("/proc/meminfo")?;
    let kb: u64 = s
        .lines()
        .find(|l| l.starts_with("MemTotal:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// One line that says what machine a benchmark ran on: CPUs, model, whether virtual,
/// kernel, memory.
#[must_use]
pub fn machine_line() -> String {
    let virt = read("/proc/cpuinfo").is_some_and(|s| s.contains(" hypervisor"));
    format!(
        "{} x {}{}, Linux {}, {:.0} GiB",
        sys::online_cpus(),
        cpu_model(),
        if virt { " (virtual machine)" } else { "" },
        read("/proc/sys/kernel/osrelease").unwrap_or_default(),
        mem_total().unwrap_or(0) as f64 / 1073741824.0
    )
}
