//! `rtloop sys-info`: what this machine offers a realtime stream (CI runs it as a smoke test).

use rtloop_bench::machine::{cpu_model, mem_total, read};
use rtloop_sys as sys;
use serde_json::json;

use crate::Global;

/// Options of `rtloop sys-info`.
#[derive(Debug, Clone, clap::Args)]
pub struct SysInfoArgs {}

/// Try each realtime facility and undo it; report what is permitted.
fn permissions() -> Vec<(&'static str, Result<(), String>)> {
    let mut v = Vec::new();
    v.push(("cpu pinning", sys::pin_to_cpu(0).map_err(|e| e.to_string())));
    // undo: allow every CPU again
    let _ = sys::allow_all_cpus();
    v.push((
        "SCHED_FIFO",
        sys::try_sched_fifo().map_err(|e| e.to_string()),
    ));
    v.push(("mlockall", sys::lock_memory().map_err(|e| e.to_string())));
    let _ = sys::unlock_memory();
    v.push((
        "/dev/cpu_dma_latency",
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/cpu_dma_latency")
            .map(drop)
            .map_err(|e| e.to_string()),
    ));
    v
}

/// Print machine facts.
pub fn run(_a: &SysInfoArgs, g: &Global) -> anyhow::Result<()> {
    let uname = std::process::Command::new("uname")
        .arg("-srvm")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .unwrap_or_default();
    let shm = sys::fs_space(&sys::shm_dir());
    let perms = permissions();
    let facts = json!({
        "rtloop": env!("CARGO_PKG_VERSION"),
        "stream_layout_version": rtloop_stream::LAYOUT_VERSION,
        "kernel": uname.trim(),
        "cpu": cpu_model(),
        "cpus": sys::online_cpus(),
        "memory_bytes": mem_total(),
        "memory_available_bytes": sys::mem_available(),
        "page_size": sys::page_size(),
        "shm_dir": sys::shm_dir(),
        "shm_total_bytes": shm.map(|s| s.0),
        "shm_available_bytes": shm.map(|s| s.1),
        "clocksource": read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "virtualised": read("/proc/cpuinfo").is_some_and(|s| s.contains(" hypervisor")),
        "permissions": perms.iter().map(|(k, r)| (k.to_string(), json!(r.as_ref().map(|()| "ok").unwrap_or_else(|e| e)))).collect::<serde_json::Map<_, _>>(),
    });
    if g.json {
        println!("{facts}");
        return Ok(());
    }
    let gib = |b: Option<u64>| {
        b.map_or_else(
            || "?".into(),
            |b| format!("{:.1} GiB", b as f64 / 1073741824.0),
        )
    };
    println!(
        "rtloop        {} (stream layout {})",
        env!("CARGO_PKG_VERSION"),
        rtloop_stream::LAYOUT_VERSION
    );
    println!("kernel        {}", uname.trim());
    println!(
        "cpu           {} x {}{}",
        sys::online_cpus(),
        cpu_model(),
        if facts["virtualised"] == true {
            " (virtual machine)"
        } else {
            ""
        }
    );
    println!(
        "memory        {} ({} available)",
        gib(mem_total()),
        gib(sys::mem_available())
    );
    println!(
        "shm           {} ({} of {} free)",
        sys::shm_dir().display(),
        gib(shm.map(|s| s.1)),
        gib(shm.map(|s| s.0))
    );
    println!("page size     {} B", sys::page_size());
    println!(
        "clocksource   {}",
        facts["clocksource"].as_str().unwrap_or("?")
    );
    for (k, r) in &perms {
        match r {
            Ok(()) => println!("{k:<13} permitted"),
            Err(e) => println!("{k:<13} not permitted ({e})"),
        }
    }
    Ok(())
}
