//! A file in shared memory, mapped read-write: what the small shared structures beside the
//! stream are made of (the runtime's board, the cache-line reference, the bare ring of the
//! throughput reference). One mapper for all of them; the stream's own double mapping is the
//! product and stays in rtloop-stream.

use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use rustix::mm::{MapFlags, ProtFlags};

/// A shared mapping of a whole file; the creator removes the file when it drops.
pub struct SharedFile {
    base: NonNull<u8>,
    len: usize,
    path: PathBuf,
    owner: bool,
}

// SAFETY: the mapping is plain shared memory; what is stored in it, and how it is reached
// across threads (atomics), is the holder's to say.
unsafe impl Send for SharedFile {}
// SAFETY: as above.
unsafe impl Sync for SharedFile {}

impl SharedFile {
    /// Create `path` (mode 0600, refused if it exists) of `len` zero bytes and map it, with
    /// every page faulted in up front (`populate`) or on first touch.
    pub fn create(path: &Path, len: usize, populate: bool) -> std::io::Result<SharedFile> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        let mapped = f
            .set_len(len as u64)
            .and_then(|()| Self::map(&f, path, len, true, populate));
        if mapped.is_err() {
            let _ = std::fs::remove_file(path);
        }
        mapped
    }

    /// Map the whole of an existing `path`, refused when it is shorter than `min_len`, when
    /// it is a symbolic link or not a regular file, or when another user owns it (a file
    /// another user can truncate would hand them this process: a page past a truncated end
    /// raises SIGBUS), as stream files are.
    pub fn open(path: &Path, min_len: usize, populate: bool) -> std::io::Result<SharedFile> {
        use std::io::{Error, ErrorKind};
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::ELOOP) {
                    let why = "is a symbolic link; rtloop maps only the file itself";
                    Error::new(
                        ErrorKind::PermissionDenied,
                        format!("{} {why}", path.display()),
                    )
                } else {
                    e
                }
            })?;
        let meta = f.metadata()?;
        if !meta.is_file() {
            let why = format!("{} is not a regular file", path.display());
            return Err(Error::new(ErrorKind::PermissionDenied, why));
        }
        let (owner, me) = (
            std::os::unix::fs::MetadataExt::uid(&meta),
            rustix::process::geteuid().as_raw(),
        );
        if owner != me {
            let why = format!(
                "{} is owned by user {owner}, not by this user ({me}); rtloop maps only its own user's files",
                path.display()
            );
            return Err(Error::new(ErrorKind::PermissionDenied, why));
        }
        let len = meta.len() as usize;
        if len < min_len || len == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{} holds {len} bytes, fewer than the {min_len} it must have",
                    path.display()
                ),
            ));
        }
        Self::map(&f, path, len, false, populate)
    }

    fn map(
        f: &std::fs::File,
        path: &Path,
        len: usize,
        owner: bool,
        populate: bool,
    ) -> std::io::Result<SharedFile> {
        let flags = if populate {
            MapFlags::SHARED | MapFlags::POPULATE
        } else {
            MapFlags::SHARED
        };
        // SAFETY: a fresh shared mapping of `len` bytes of a file at least that long, at an
        // address the kernel picks; it aliases no Rust object.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                flags,
                f.as_fd(),
                0,
            )?
        };
        let base = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| std::io::Error::other("mmap returned null"))?;
        Ok(SharedFile {
            base,
            len,
            path: path.to_owned(),
            owner,
        })
    }

    /// The first byte (page-aligned).
    #[must_use]
    pub fn base(&self) -> NonNull<u8> {
        self.base
    }

    /// Bytes mapped.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is mapped (never: a mapping has at least one byte).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SharedFile {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once; whatever borrows from it borrows `self`.
        unsafe {
            let _ = rustix::mm::munmap(self.base.as_ptr().cast(), self.len);
        }
        if self.owner {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

// miri cannot map a file
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn two_mappings_share_bytes_and_the_creator_removes_the_file() {
        let path = crate::shm_dir().join(format!("rtloop-sharedfile-test-{}", std::process::id()));
        let a = SharedFile::create(&path, 4096, false).unwrap();
        let b = SharedFile::open(&path, 4096, true).unwrap();
        // SAFETY: both map the same 4096 bytes; one byte written, then read.
        unsafe {
            a.base().as_ptr().add(100).write_volatile(42);
            assert_eq!(b.base().as_ptr().add(100).read_volatile(), 42);
        }
        assert!(SharedFile::create(&path, 4096, false).is_err(), "exists");
        let e = SharedFile::open(&path, 8192, false).err().unwrap();
        assert!(
            e.to_string()
                .ends_with("holds 4096 bytes, fewer than the 8192 it must have"),
            "{e}"
        );
        drop(b);
        drop(a);
        assert!(!path.exists());
    }

    #[test]
    fn a_link_or_another_users_file_is_refused_by_name() {
        let dir = crate::shm_dir();
        let path = dir.join(format!("rtloop-sharedfile-own-{}", std::process::id()));
        let link = dir.join(format!("rtloop-sharedfile-link-{}", std::process::id()));
        let a = SharedFile::create(&path, 4096, false).unwrap();
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let e = SharedFile::open(&link, 4096, false).err().unwrap();
        let _ = std::fs::remove_file(&link);
        assert!(
            e.to_string()
                .ends_with("is a symbolic link; rtloop maps only the file itself"),
            "{e}"
        );
        // another user's file: only root can make one here
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
            let e = SharedFile::open(&path, 4096, false).err().unwrap();
            assert!(
                e.to_string()
                    .contains("is owned by user 65534, not by this user (0)"),
                "{e}"
            );
        }
        drop(a);
        assert!(!path.exists());
    }
}
