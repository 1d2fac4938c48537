//! Named shared-memory streams: create, open, list, remove, and the mapping that puts the
//! sample data twice back to back so every window is one contiguous slice.
//!
//! # Who may touch the file
//!
//! A stream file is created 0600 with `O_EXCL | O_NOFOLLOW`, and opened (or removed) only if
//! it is a regular file, not a symbolic link, owned by this user; `remove` also wants the
//! stream magic. Nobody else can therefore replace it under a process. The owner still can:
//! if the file of a live stream is **truncated** (`truncate`, `ftruncate`, an editor saving
//! over it), every process that has it mapped gets **SIGBUS** on its next touch of a page
//! past the new end, which ends it. `rtloop stream remove` (or deleting the file) is safe: it
//! only removes the name, and processes that have the stream mapped keep their memory.

use std::ffi::c_void;
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

use rustix::mm::{MapFlags, ProtFlags};

use crate::backing::{Backing, ZeroCopy};
use crate::error::{CreateError, OpenError, RemoveError};
use crate::layout::header_flags;
use crate::layout::{
    self, ChannelLabel, ControlBlock, Header, HeaderError, Regions, CH_NAME_MAX, CH_TYPE_MAX,
    CH_UNIT_MAX, CONTENT_TYPE_MAX, EVENT_SLOT_BYTES, FILE_PREFIX, HEADER_BYTES, LAYOUT_VERSION,
    MAGIC, MAX_CHANNELS, META_TEXT_MAX, SOURCE_ID_MAX,
};
use crate::ring;
use crate::stream::{Stream, StreamConfig, StreamInfo};
use crate::sync::{fence, Ordering};
use crate::{sys, DType};

/// The mapping of one stream file (the product's [`Backing`]). Shared (Arc) by the stream,
/// its writer, readers and any zero-copy views, so the memory outlives every user.
pub struct SharedMemory {
    base: NonNull<u8>,
    reserved_len: usize,
    pub(crate) regions: Regions,
    pub(crate) capacity: u64,
    pub(crate) sample_bytes: usize,
    pub(crate) event_capacity: u64,
    /// Device and inode of the mapped file: whether the stream's name still leads here.
    file_id: (u64, u64),
}

// SAFETY: the mapping is plain shared memory; all shared mutable state in it is accessed
// through atomics (control block) or under the ring protocol (data, stamps, events), which
// is designed for concurrent access from many threads and processes.
unsafe impl Send for SharedMemory {}
// SAFETY: as above.
unsafe impl Sync for SharedMemory {}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        // SAFETY: `base..base+reserved_len` is the address range this SharedMemory reserved and
        // mapped; nothing borrows it any more (every borrower holds the Arc we are dropping).
        unsafe {
            let _ = rustix::mm::munmap(self.base.as_ptr().cast(), self.reserved_len);
        }
    }
}

impl SharedMemory {
    /// Map `file` (of `regions.file_bytes`) with the data region doubled. The pages are
    /// populated now (MAP_POPULATE), so neither writer nor readers take a page fault on
    /// the hot path.
    fn map(
        file: &File,
        regions: Regions,
        capacity: u64,
        sample_bytes: usize,
        event_capacity: u64,
    ) -> std::io::Result<SharedMemory> {
        let meta = file.metadata()?;
        let file_id = (
            std::os::unix::fs::MetadataExt::dev(&meta),
            std::os::unix::fs::MetadataExt::ino(&meta),
        );
        let head_len = usize::try_from(regions.data + regions.data_bytes)
            .map_err(|_| std::io::ErrorKind::OutOfMemory)?;
        let data_len = regions.data_bytes as usize;
        let reserved_len = head_len + data_len;
        // SAFETY: a fresh anonymous PROT_NONE reservation at an address the kernel picks;
        // it aliases nothing.
        let base = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                reserved_len,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )?
        };
        let release = |e: rustix::io::Errno| {
            // SAFETY: unmapping the reservation made above, which nothing else uses yet.
            unsafe {
                let _ = rustix::mm::munmap(base, reserved_len);
            }
            std::io::Error::from(e)
        };
        let rw = ProtFlags::READ | ProtFlags::WRITE;
        // SAFETY: MAP_FIXED over our own reservation (base..base+head_len lies inside it),
        // so it replaces only pages we own. The file is at least head_len long.
        unsafe {
            rustix::mm::mmap(
                base,
                head_len,
                rw,
                MapFlags::SHARED | MapFlags::FIXED | MapFlags::POPULATE,
                file.as_fd(),
                0,
            )
        }
        .map_err(release)?;
        // SAFETY: the second view of the data region, again MAP_FIXED inside our own
        // reservation (head_len..head_len+data_len), file offset `regions.data` (page
        // aligned) of a file that is `regions.data + data_len` long.
        unsafe {
            rustix::mm::mmap(
                base.cast::<u8>().add(head_len).cast::<c_void>(),
                data_len,
                rw,
                MapFlags::SHARED | MapFlags::FIXED | MapFlags::POPULATE,
                file.as_fd(),
                regions.data,
            )
        }
        .map_err(release)?;
        Ok(SharedMemory {
            base: NonNull::new(base.cast()).ok_or(std::io::ErrorKind::Other)?,
            reserved_len,
            regions,
            capacity,
            sample_bytes,
            event_capacity,
            file_id,
        })
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: offset 0 holds a Header (HEADER_BYTES, 8-aligned because the mapping is
        // page aligned); after creation it is never written again, so shared refs are fine.
        unsafe { &*self.base.as_ptr().cast::<Header>() }
    }

    pub(crate) fn control(&self) -> &ControlBlock {
        // SAFETY: `regions.control` (page aligned, so aligned for ControlBlock's 128) holds a
        // ControlBlock initialised to zeros (a valid all-atomics value); it is only accessed
        // through its atomics.
        unsafe {
            &*self
                .base
                .as_ptr()
                .add(self.regions.control as usize)
                .cast::<ControlBlock>()
        }
    }

    fn labels(&self, n: usize) -> &[ChannelLabel] {
        // SAFETY: `regions.meta` holds `n` ChannelLabels (align 1), written once at creation
        // before the magic was published and never again.
        unsafe {
            std::slice::from_raw_parts(self.base.as_ptr().add(self.regions.meta as usize).cast(), n)
        }
    }

    /// Pointer to the first byte of sample `index`'s slot (in the first data view).
    #[inline]
    pub(crate) fn sample_ptr(&self, index: u64) -> *mut u8 {
        let off = ring::slot_offset(index, self.capacity, self.sample_bytes);
        // SAFETY: off < data_bytes, inside the first data view.
        unsafe { self.base.as_ptr().add(self.regions.data as usize + off) }
    }

    /// Pointer to the stamp of sample `index`.
    #[inline]
    pub(crate) fn stamp_ptr(&self, index: u64) -> *mut u64 {
        let off = ring::slot_offset(index, self.capacity, 8);
        // SAFETY: inside the stamp region (capacity * 8 bytes); 8-aligned (page-aligned base).
        unsafe {
            self.base
                .as_ptr()
                .add(self.regions.stamps as usize + off)
                .cast()
        }
    }

    /// Pointer to event slot `index`.
    #[inline]
    pub(crate) fn event_ptr(&self, index: u64) -> *mut u8 {
        let off = ring::slot_offset(index, self.event_capacity, EVENT_SLOT_BYTES);
        // SAFETY: inside the event region (event_capacity * 512 bytes).
        unsafe { self.base.as_ptr().add(self.regions.events as usize + off) }
    }
}

impl Backing for SharedMemory {
    fn control(&self) -> &ControlBlock {
        SharedMemory::control(self)
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn sample_bytes(&self) -> usize {
        self.sample_bytes
    }
    fn event_capacity(&self) -> u64 {
        self.event_capacity
    }
    fn file_id(&self) -> Option<(u64, u64)> {
        Some(self.file_id)
    }
    #[inline]
    fn load_samples_uninit(&self, first: u64, out: &mut [std::mem::MaybeUninit<u8>]) {
        // a real check, not a debug one: the copy below is only in bounds because of it
        assert!(
            out.len() as u64 <= self.capacity * self.sample_bytes as u64,
            "a copy of {} bytes from the ring is longer than the {} samples of {} B it holds",
            out.len(),
            self.capacity,
            self.sample_bytes
        );
        // SAFETY: the window starts inside the first data view and is at most `capacity`
        // samples long (asserted above), so it ends inside the second view: readable for
        // out.len() bytes. `out` is this call's own writable slice of out.len() bytes (set
        // or not: the copy sets every one), not inside the mapping.
        // The bytes may be concurrently overwritten by the writer process; we treat the
        // shared mapping as external memory (like a device buffer), never form a reference
        // to it, and the caller discards the copy unless `validate_after_copy` proves no
        // overwrite overlapped it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.sample_ptr(first),
                out.as_mut_ptr().cast::<u8>(),
                out.len(),
            )
        }
    }
    #[inline]
    fn store_samples(&self, first: u64, src: &[u8]) {
        debug_assert!(src.len() as u64 <= self.capacity * self.sample_bytes as u64);
        // SAFETY: as in `load_samples`, the window is contiguous in the doubled view; only
        // the single writer stores, after `begin_overwrite`.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.sample_ptr(first), src.len()) }
    }
    #[inline]
    fn load_stamp(&self, i: u64) -> u64 {
        // SAFETY: an aligned u64 slot inside the stamp region; racy with the writer like the
        // samples and validated with them (volatile: a copy of external memory).
        unsafe { self.stamp_ptr(i).read_volatile() }
    }
    #[inline]
    fn store_stamp(&self, i: u64, stamp_ns: u64) {
        // SAFETY: an aligned u64 slot inside the stamp region; only the writer stores there,
        // after `begin_overwrite` covered sample `i`.
        unsafe { self.stamp_ptr(i).write_volatile(stamp_ns) }
    }
    fn load_event(&self, i: u64, out: &mut [u8; EVENT_SLOT_BYTES]) {
        // SAFETY: a 512-byte slot inside the event region; racy with the writer and
        // validated after the copy.
        unsafe {
            std::ptr::copy_nonoverlapping(self.event_ptr(i), out.as_mut_ptr(), EVENT_SLOT_BYTES)
        }
    }
    fn store_event(&self, i: u64, src: &[u8; EVENT_SLOT_BYTES]) {
        // SAFETY: a 512-byte slot inside the event region; only the writer stores there,
        // after `begin_overwrite` of the event ring.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.event_ptr(i), EVENT_SLOT_BYTES) }
    }
}

impl ZeroCopy for SharedMemory {
    #[inline]
    fn sample_ptr(&self, index: u64) -> *mut u8 {
        SharedMemory::sample_ptr(self, index)
    }
}

/// Path of the shared-memory file of stream `name`.
#[must_use]
pub fn stream_path(name: &str) -> PathBuf {
    sys::shm_dir().join(format!("{FILE_PREFIX}{name}"))
}

/// A complete new stream under a hidden name, waiting to take the place of another
/// ([`Stream::prepare_replacement`]).
pub struct Replacement {
    stream: Option<Stream<SharedMemory>>,
    tmp: PathBuf,
    path: PathBuf,
}

impl Replacement {
    /// Rename the new stream over its name (one `rename`, atomic for openers): new opens get
    /// it; processes that have the old one open keep their mapping of it.
    pub fn install(mut self) -> Result<Stream<SharedMemory>, CreateError> {
        if let Err(source) = std::fs::rename(&self.tmp, &self.path) {
            return Err(CreateError::Io {
                op: "rename",
                path: self.path.clone(),
                source,
            });
        }
        let mut made = self.stream.take().expect("installed once");
        made.set_path(self.path.clone());
        Ok(made)
    }
}

impl Drop for Replacement {
    fn drop(&mut self) {
        if self.stream.is_some() {
            // never installed: the hidden file goes
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

fn put_label(dst: &mut [u8], s: &str) {
    dst[..s.len()].copy_from_slice(s.as_bytes());
}

fn get_label(src: &[u8]) -> String {
    let end = src.iter().position(|&b| b == 0).unwrap_or(src.len());
    String::from_utf8_lossy(&src[..end]).into_owned()
}

fn check_labels(cfg: &StreamConfig) -> Result<(), CreateError> {
    for (what, list, max) in [
        ("names", &cfg.ch_names, CH_NAME_MAX),
        ("units", &cfg.ch_units, CH_UNIT_MAX),
    ] {
        if !list.is_empty() && list.len() != cfg.n_channels {
            return Err(CreateError::Labels(format!(
                "{} channel {what} given for {} channels; give one per channel or none",
                list.len(),
                cfg.n_channels
            )));
        }
        if let Some(bad) = list.iter().find(|s| s.len() > max || s.contains('\0')) {
            return Err(CreateError::Labels(format!(
                "channel {} {bad:?} is not allowed: at most {max} bytes of UTF-8 without NUL",
                &what[..what.len() - 1]
            )));
        }
    }
    if !cfg.ch_types.is_empty() && cfg.ch_types.len() != cfg.n_channels {
        return Err(CreateError::Labels(format!(
            "{} channel types given for {} channels; give one per channel or none",
            cfg.ch_types.len(),
            cfg.n_channels
        )));
    }
    if let Some(bad) = cfg
        .ch_types
        .iter()
        .find(|s| s.len() > CH_TYPE_MAX || s.contains(['\0', '\n']))
    {
        return Err(CreateError::Labels(format!(
            "channel type {bad:?} is not allowed: at most {CH_TYPE_MAX} bytes of UTF-8 without NUL or newline"
        )));
    }
    for (what, value, max) in [
        ("content type", &cfg.content_type, CONTENT_TYPE_MAX),
        ("source id", &cfg.source_id, SOURCE_ID_MAX),
    ] {
        if value.len() > max || value.contains('\0') {
            return Err(CreateError::Labels(format!(
                "{what} {value:?} is not allowed: at most {max} bytes of UTF-8 without NUL"
            )));
        }
    }
    let types = joined_types(cfg).len();
    if types + cfg.description.len() > META_TEXT_MAX {
        return Err(CreateError::Labels(format!(
            "the channel types ({types} bytes) and the description ({} bytes) do not fit the \
             stream header: at most {META_TEXT_MAX} bytes together; shorten the description \
             (keep large documents next to the recording instead)",
            cfg.description.len()
        )));
    }
    Ok(())
}

/// Channel types as stored: joined by newlines (empty when none were given).
fn joined_types(cfg: &StreamConfig) -> String {
    cfg.ch_types.join("\n")
}

impl Stream<SharedMemory> {
    /// Create a new stream. The file is owner-only (0600) and fully allocated up front, so
    /// a stream that does not fit in memory fails here rather than later.
    ///
    /// Streams whose writer died are reclaimed first (see [`crate::lifecycle`]), so a name
    /// left by a crashed run is free again.
    pub fn create(name: &str, cfg: &StreamConfig) -> Result<Self, CreateError> {
        let freed = Stream::collect_ended();
        if !freed.is_empty() {
            tracing::info!(?freed, "reclaimed ended streams");
        }
        Self::create_at(name, cfg, &stream_path(name))
    }

    /// Create a stream that replaces the one named `name`, if any, only once it is complete:
    /// it is built under a hidden name beside it and renamed over the old file in one step.
    /// If anything fails (it does not fit, ...) the old stream is untouched and keeps
    /// serving. Processes that have the old stream open keep their mapping of it.
    pub fn create_or_replace(name: &str, cfg: &StreamConfig) -> Result<Self, CreateError> {
        Self::prepare_replacement(name, cfg)?.install()
    }

    /// The slow half of [`Stream::create_or_replace`]: make the complete new stream (file
    /// allocated, mapped, header written) under a hidden name beside `name`, touching
    /// nothing that is served. [`Replacement::install`] then renames it over `name` in one
    /// step; dropping the replacement instead removes it. A server can make a stream this way
    /// without holding the lock its other clients need.
    pub fn prepare_replacement(name: &str, cfg: &StreamConfig) -> Result<Replacement, CreateError> {
        layout::validate_name(name)?;
        static N: crate::sync::AtomicU32 = crate::sync::AtomicU32::new(0);
        // SYNC: Relaxed: a counter for unique temporary names, nothing published through it.
        let k = N.fetch_add(1, Ordering::Relaxed);
        let tmp = sys::shm_dir().join(format!(".{FILE_PREFIX}new-{}-{k}-{name}", sys::pid()));
        let made = Self::create_at(name, cfg, &tmp)?;
        Ok(Replacement {
            stream: Some(made),
            tmp,
            path: stream_path(name),
        })
    }

    /// Create `name`, replacing a stream of that name that nobody writes any more (its
    /// writer closed or died, or it never had one; or it was made by another layout
    /// version), as a crashed run leaves it. A stream whose writer is alive is refused
    /// ([`CreateError::InUse`]), and so is a file that is not an rtloop stream.
    ///
    /// A stream that no writer has claimed yet is not dead: while its creator lives it is
    /// refused too ([`CreateError::NotYetWritten`]). The old stream's writer is claimed for
    /// the time of the swap, so nobody can start writing it in between and end up writing
    /// to an unlinked file; its waiting readers are told it closed.
    pub fn create_replacing(name: &str, cfg: &StreamConfig) -> Result<Self, CreateError> {
        layout::validate_name(name)?;
        match Self::open(name) {
            Err(OpenError::NotFound { .. }) => Self::create(name, cfg),
            Err(OpenError::LayoutVersion { .. }) => Self::create_or_replace(name, cfg),
            Ok(old) => {
                let creator = old.info().creator_pid;
                if old.writer_liveness() == crate::Liveness::NoWriter
                    && creator != sys::pid()
                    && crate::lifecycle::pid_alive(creator)
                {
                    return Err(CreateError::NotYetWritten {
                        name: name.to_owned(),
                        pid: creator,
                    });
                }
                // hold the old stream's writer through the swap: a live writer refuses us
                let _held = old.writer().map_err(|e| match e {
                    crate::ClaimError::WriterBusy { pid, .. } => CreateError::InUse {
                        name: name.to_owned(),
                        pid,
                    },
                    _ => CreateError::AlreadyExists {
                        name: name.to_owned(),
                    },
                })?;
                // `_held` drops after the swap: the name is the new stream's by then, so its
                // close removes nothing and wakes the old stream's readers
                Self::create_or_replace(name, cfg)
            }
            Err(_) if Stream::is_half_made(name) => Self::create_or_replace(name, cfg),
            Err(_) => Err(CreateError::AlreadyExists {
                name: name.to_owned(),
            }),
        }
    }

    fn create_at(name: &str, cfg: &StreamConfig, path: &Path) -> Result<Self, CreateError> {
        layout::validate_name(name)?;
        if cfg.capacity == 0 {
            return Err(CreateError::ZeroCapacity);
        }
        if cfg.n_channels == 0 {
            return Err(CreateError::ZeroChannels);
        }
        if cfg.n_channels as u64 > MAX_CHANNELS {
            return Err(CreateError::TooManyChannels {
                n_channels: cfg.n_channels as u64,
                max: MAX_CHANNELS,
            });
        }
        if cfg.event_capacity == 0 {
            return Err(CreateError::ZeroEventCapacity);
        }
        if !cfg.nominal_rate.is_finite() || cfg.nominal_rate < 0.0 {
            return Err(CreateError::InvalidRate(cfg.nominal_rate));
        }
        check_labels(cfg)?;
        let page = sys::page_size() as u64;
        let sample_bytes = (cfg.n_channels * cfg.dtype.itemsize()) as u64;
        // a stream is a file in the shared-memory file system (tmpfs: 64 MiB in a default
        // container) and its pages are memory: the smaller of the two bounds it
        let dir = sys::shm_dir();
        let fs_free = sys::fs_space(&dir).map_or(u64::MAX, |(_, free)| free);
        let mem = sys::mem_available().unwrap_or(u64::MAX);
        let (available, limit, advice) = if fs_free <= mem {
            (
                fs_free,
                format!("free space of {}", dir.display()),
                format!(
                    "ask for a smaller capacity, remove streams you no longer need, or make {} larger (e.g. `mount -o remount,size=2G {}`, or `docker run --shm-size=2g`)",
                    dir.display(),
                    dir.display()
                ),
            )
        } else {
            (
                mem,
                "MemAvailable".to_owned(),
                "ask for a smaller capacity".to_owned(),
            )
        };
        let too_large = |requested_bytes: u64| CreateError::TooLarge {
            capacity: cfg.capacity,
            sample_bytes,
            requested_bytes,
            available_bytes: available,
            limit: limit.clone(),
            advice: advice.clone(),
        };
        let capacity = ring::round_capacity(cfg.capacity, sample_bytes, page)
            .ok_or_else(|| too_large(u64::MAX))?;
        let regions = layout::regions(
            cfg.n_channels as u64,
            sample_bytes,
            capacity,
            cfg.event_capacity,
            page,
        )
        .ok_or_else(|| too_large(u64::MAX))?;
        if regions.file_bytes > available {
            return Err(too_large(regions.file_bytes));
        }
        let path = path.to_owned();
        let io = |op, source| CreateError::Io {
            op,
            path: path.clone(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            // O_EXCL already refuses an existing symlink; say so explicitly anyway
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => CreateError::AlreadyExists {
                    name: name.to_owned(),
                },
                _ => io("create", e),
            })?;
        // Held while the file is being made: a file without magic and without this lock was
        // left by a creator that died (`lifecycle`). Released when `file` closes below.
        let _ = rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive);
        // from here on, a failure removes the half-made file
        let fail = |e: CreateError| {
            let _ = std::fs::remove_file(&path);
            e
        };
        // umask may only remove bits; make owner-only explicit anyway
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| fail(io("chmod", e)))?;
        file.set_len(regions.file_bytes)
            .map_err(|e| fail(io("resize", e)))?;
        // allocate every page now: ENOSPC here instead of SIGBUS on first touch later
        rustix::fs::fallocate(
            &file,
            rustix::fs::FallocateFlags::empty(),
            0,
            regions.file_bytes,
        )
        .map_err(|e| {
            let e = std::io::Error::from(e);
            fail(match e.raw_os_error() {
                Some(c)
                    if c == rustix::io::Errno::NOSPC.raw_os_error()
                        || c == rustix::io::Errno::FBIG.raw_os_error() =>
                {
                    too_large(regions.file_bytes)
                }
                _ => io("allocate", e),
            })
        })?;
        let map = SharedMemory::map(
            &file,
            regions,
            capacity,
            sample_bytes as usize,
            cfg.event_capacity,
        )
        .map_err(|e| fail(io("map", e)))?;
        let base = map.base.as_ptr();
        let created_unix_ns = sys::realtime_ns();
        // SAFETY: the file is new (O_EXCL) and only this process has it mapped until the
        // magic is published below; writing the header through a raw pointer is exclusive.
        unsafe {
            let h = &mut *base.cast::<Header>();
            h.layout_version = LAYOUT_VERSION;
            h.header_bytes = HEADER_BYTES as u32;
            h.file_bytes = regions.file_bytes;
            h.dtype = cfg.dtype.code();
            h.n_channels = cfg.n_channels as u32;
            h.sample_bytes = sample_bytes;
            h.capacity = capacity;
            h.nominal_rate = cfg.nominal_rate;
            h.created_unix_ns = created_unix_ns;
            h.created_mono_ns = sys::monotonic_ns();
            h.control_offset = regions.control;
            h.meta_offset = regions.meta;
            h.stamps_offset = regions.stamps;
            h.events_offset = regions.events;
            h.event_capacity = cfg.event_capacity;
            h.event_slot_bytes = EVENT_SLOT_BYTES as u64;
            h.data_offset = regions.data;
            h.data_bytes = regions.data_bytes;
            h.name_len = name.len() as u32;
            h.name[..name.len()].copy_from_slice(name.as_bytes());
            h.has_labels = u32::from(!cfg.ch_names.is_empty() || !cfg.ch_units.is_empty());
            h.creator_pid = sys::pid();
            h.flags = if cfg.keep { header_flags::KEEP } else { 0 }
                | if cfg.internal {
                    header_flags::INTERNAL
                } else {
                    0
                };
            put_label(&mut h.content_type, &cfg.content_type);
            put_label(&mut h.source_id, &cfg.source_id);
            let types = joined_types(cfg);
            h.types_len = types.len() as u32;
            h.desc_len = cfg.description.len() as u32;
            h.meta_text[..types.len()].copy_from_slice(types.as_bytes());
            h.meta_text[types.len()..types.len() + cfg.description.len()]
                .copy_from_slice(cfg.description.as_bytes());
            let labels = std::slice::from_raw_parts_mut(
                base.add(regions.meta as usize).cast::<ChannelLabel>(),
                cfg.n_channels,
            );
            for (i, l) in labels.iter_mut().enumerate() {
                if let Some(n) = cfg.ch_names.get(i) {
                    put_label(&mut l.name, n);
                }
                if let Some(u) = cfg.ch_units.get(i) {
                    put_label(&mut l.unit, u);
                }
            }
            // SYNC: Release fence: everything above is visible to an opener that sees the
            // magic (it reads the magic, then fences Acquire in `open`).
            fence(Ordering::Release);
            std::ptr::write_volatile(base.cast::<[u8; 8]>(), MAGIC);
        }
        tracing::trace!(name, capacity, sample_bytes, "stream created");
        Ok(Stream::from_mapping(map, path))
    }

    /// Open an existing stream, checking its magic and layout version.
    pub fn open(name: &str) -> Result<Self, OpenError> {
        layout::validate_name(name)?;
        Self::open_path(&stream_path(name)).map_err(|e| match e {
            OpenError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                OpenError::NotFound {
                    name: name.to_owned(),
                    path: stream_path(name),
                }
            }
            other => other,
        })
    }

    /// Open the stream file at `path` (any file: a foreign one is refused with the reason).
    pub fn open_path(path: &Path) -> Result<Self, OpenError> {
        let io = |op, source| OpenError::Io {
            op,
            path: path.to_owned(),
            source,
        };
        let not = |reason: String| OpenError::NotAStream {
            path: path.to_owned(),
            reason,
        };
        let file = open_own_file(path, true).map_err(|e| match e {
            OwnFileError::Io(op, source) => io(op, source),
            OwnFileError::Refused(reason) => OpenError::Refused {
                path: path.to_owned(),
                reason,
            },
        })?;
        let len = file.metadata().map_err(|e| io("stat", e))?.len();
        if len < HEADER_BYTES as u64 {
            return Err(not(format!(
                "it is {len} bytes, smaller than a stream header ({HEADER_BYTES} B)"
            )));
        }
        let mut head = [0u8; HEADER_BYTES];
        // a stream being created publishes its magic last: give a creator a moment
        for attempt in 0..=50 {
            std::os::unix::fs::FileExt::read_exact_at(&file, &mut head, 0)
                .map_err(|e| io("read", e))?;
            if head[..8] != [0u8; 8] || attempt == 50 {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        fence(Ordering::Acquire);
        let page = sys::page_size() as u64;
        let parsed = layout::parse_header(&head, len, page).map_err(|e| match e {
            HeaderError::Version { found } => OpenError::LayoutVersion {
                path: path.to_owned(),
                found,
                expected: LAYOUT_VERSION,
            },
            HeaderError::Invalid(reason) => not(reason),
        })?;
        let (regions, capacity, sample_bytes, event_capacity) = (
            parsed.regions,
            parsed.capacity,
            parsed.sample_bytes,
            parsed.event_capacity,
        );
        let map = SharedMemory::map(
            &file,
            regions,
            capacity,
            sample_bytes as usize,
            event_capacity,
        )
        .map_err(|e| io("map", e))?;
        Ok(Stream::from_mapping(map, path.to_owned()))
    }

    fn from_mapping(map: SharedMemory, path: PathBuf) -> Self {
        let h = map.header();
        let n = h.n_channels as usize;
        let labels = map.labels(n);
        let has = h.has_labels != 0;
        let info = StreamInfo {
            name: String::from_utf8_lossy(&h.name[..(h.name_len as usize).min(h.name.len())])
                .into_owned(),
            dtype: DType::from_code(h.dtype).unwrap_or(DType::U8),
            n_channels: n,
            sample_bytes: h.sample_bytes as usize,
            capacity: h.capacity,
            event_capacity: h.event_capacity,
            nominal_rate: h.nominal_rate,
            ch_names: labels
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    let s = get_label(&l.name);
                    if has && !s.is_empty() {
                        s
                    } else {
                        format!("ch{i}")
                    }
                })
                .collect(),
            ch_units: labels.iter().map(|l| get_label(&l.unit)).collect(),
            // lengths checked by `parse_header` on open (and by `check_labels` at create)
            ch_types: {
                let t = &h.meta_text[..(h.types_len as usize).min(META_TEXT_MAX)];
                if t.is_empty() {
                    Vec::new()
                } else {
                    String::from_utf8_lossy(t)
                        .split('\n')
                        .map(str::to_owned)
                        .collect()
                }
            },
            content_type: get_label(&h.content_type),
            source_id: get_label(&h.source_id),
            description: {
                let start = (h.types_len as usize).min(META_TEXT_MAX);
                let end = (start + h.desc_len as usize).min(META_TEXT_MAX);
                String::from_utf8_lossy(&h.meta_text[start..end]).into_owned()
            },
            creator_pid: h.creator_pid,
            created_unix_ns: h.created_unix_ns,
            file_bytes: h.file_bytes,
            path,
            keep: h.flags & header_flags::KEEP != 0,
            internal: h.flags & header_flags::INTERNAL != 0,
        };
        Stream::from_parts(Arc::new(map), info)
    }

    /// Remove a stream's name. Processes that have it open keep their mapping until they
    /// close it; new opens fail.
    pub fn remove(name: &str) -> Result<(), RemoveError> {
        layout::validate_name(name)?;
        let path = stream_path(name);
        let refuse = |reason: String| RemoveError::NotAStream {
            path: path.clone(),
            reason,
        };
        let file = open_own_file(&path, false).map_err(|e| match e {
            OwnFileError::Io(_, source) if source.kind() == std::io::ErrorKind::NotFound => {
                RemoveError::NotFound {
                    name: name.to_owned(),
                }
            }
            OwnFileError::Io(_, source) => RemoveError::Io {
                path: path.clone(),
                source,
            },
            OwnFileError::Refused(reason) => refuse(reason),
        })?;
        // only a file that carries the stream magic (any layout version) is removed
        let mut magic = [0u8; 8];
        if std::os::unix::fs::FileExt::read_exact_at(&file, &mut magic, 0).is_err()
            || magic != MAGIC
        {
            if Stream::is_half_made(name) {
                return crate::lifecycle::remove_half_made(name);
            }
            return Err(refuse(
                "it does not begin with the rtloop stream magic".into(),
            ));
        }
        std::fs::remove_file(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => RemoveError::NotFound {
                name: name.to_owned(),
            },
            _ => RemoveError::Io { path, source: e },
        })
    }

    /// Names of the streams in the shared-memory directory (sorted).
    #[must_use]
    pub fn list() -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(sys::shm_dir())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_prefix(FILE_PREFIX)
                    .map(str::to_owned)
            })
            .filter(|n| layout::validate_name(n).is_ok())
            .collect();
        names.sort();
        names
    }
}

/// Why [`open_own_file`] failed.
enum OwnFileError {
    Io(&'static str, std::io::Error),
    Refused(String),
}

/// Open a stream file only if it is a regular file (not a symbolic link: `O_NOFOLLOW`)
/// owned by this process's user. SharedMemory a file another user can truncate or replace would
/// hand them this process: touching a page past a truncated end raises SIGBUS.
fn open_own_file(path: &Path, write: bool) -> Result<File, OwnFileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                OwnFileError::Refused(
                    "it is a symbolic link; rtloop opens only the stream file itself".into(),
                )
            } else {
                OwnFileError::Io("open", e)
            }
        })?;
    let meta = file.metadata().map_err(|e| OwnFileError::Io("stat", e))?;
    if !meta.is_file() {
        return Err(OwnFileError::Refused("it is not a regular file".to_owned()));
    }
    let me = rustix::process::geteuid().as_raw();
    let owner = std::os::unix::fs::MetadataExt::uid(&meta);
    if owner != me {
        return Err(OwnFileError::Refused(format!(
            "it is owned by user {owner}, not by this user ({me}); streams are private to the user who made them"
        )));
    }
    Ok(file)
}
