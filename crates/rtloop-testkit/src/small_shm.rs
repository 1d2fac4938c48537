//! A small shared-memory file system for tests of "does not fit" (as in a default container,
//! whose /dev/shm is 64 MiB): a tmpfs of a few MiB mounted on a temporary directory, which
//! `RTLOOP_SHM_DIR` points streams at. Needs root; `None` (with the reason) otherwise.

use std::process::Command;

use crate::TempDir;

/// A mounted tmpfs; unmounted (lazily) and removed on drop.
#[derive(Debug)]
pub struct SmallShm {
    dir: TempDir,
}

impl SmallShm {
    /// Mount a tmpfs of `mib` MiB and point this process's streams at it
    /// (`RTLOOP_SHM_DIR`). Call it from a test binary of its own: the variable is
    /// process-wide.
    #[must_use]
    pub fn mount(mib: u64) -> Option<SmallShm> {
        if !rustix_is_root() {
            eprintln!("skipped: mounting a small tmpfs needs root");
            return None;
        }
        let dir = TempDir::new("small-shm");
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={mib}m,mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: mount -t tmpfs failed here");
            return None;
        }
        std::env::set_var("RTLOOP_SHM_DIR", dir.path());
        Some(SmallShm { dir })
    }

    /// The mount point.
    #[must_use]
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for SmallShm {
    fn drop(&mut self) {
        std::env::remove_var("RTLOOP_SHM_DIR");
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

fn rustix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}
