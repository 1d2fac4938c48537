//! The FieldTrip buffer's semantics over one rtloop stream.
//!
//! The reference server keeps one header, one sample ring and one event ring per process.
//! Here the rings are an rtloop stream: PUT_HDR (re)creates the stream, PUT_DAT writes into
//! it (so local readers see the samples zero-copy), and a stream written locally by another
//! process is served as it is. FieldTrip's sample and event indices count from the last
//! PUT_HDR / FLUSH_DAT / FLUSH_EVT; the stream's count from its creation, so a flush moves a
//! base instead of touching shared memory.
//!
//! [`Buffer::handle`] takes one parsed message and appends the reply. It does no socket
//! I/O, so the in-process client (the FieldTrip FAQ's "dma") calls it directly.

use std::borrow::Cow;
use std::io::{IoSlice, Write};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rtloop_stream::{
    stream_path, CreateError, DType, Event, EventValue, Liveness, Stream, StreamConfig, Writer,
    CHAR_CODE,
};
use rtloop_sys as sys;

use crate::codec::{
    self, cmd, put_chunks, put_event, put_headerdef, put_prefix, put_status, put_wait_ok, wordsize,
    ByteOrder, DataDef, HeaderDef, Parsed, Prefix, Request, Selection, WaitDef, WireEvent,
};

/// What a buffer keeps. The reference keeps 600000 samples (or 512 MiB when there are more
/// than 256 channels) and 100 events.
#[derive(Clone, Debug)]
pub struct BufferConfig {
    /// The stream's name (`/dev/shm/rtloop-<name>`).
    pub stream: String,
    /// Samples kept at most.
    pub capacity: u64,
    /// Bytes of sample data kept at most (the capacity shrinks to fit).
    pub max_bytes: u64,
    /// Events kept.
    pub events: u64,
    /// Remove the streams this buffer created when it is dropped.
    pub remove_on_drop: bool,
    /// Longest a WAIT_DAT may block, whatever its timeout asks (the protocol allows 49 days).
    pub max_wait: Duration,
}

impl BufferConfig {
    /// The reference's sizes (600000 samples, 512 MiB) and 1024 events, for `stream`.
    #[must_use]
    pub fn new(stream: &str) -> Self {
        BufferConfig {
            stream: stream.to_owned(),
            capacity: 600_000,
            max_bytes: 512 << 20,
            events: 1024,
            remove_on_drop: false,
            max_wait: Duration::from_millis(u64::from(u32::MAX)),
        }
    }
}

/// What the connection does after a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    /// Keep reading requests.
    Continue,
    /// Send the reply (if any), then close the connection.
    Close,
}

/// GET_DAT replies of at least this many value bytes are sent from the ring in place;
/// smaller ones are copied. The held-back tail costs a second write, after which a client
/// that already read the rest is woken once more (about 20 µs on a VM): measured over a
/// UNIX socket, a 256 KiB reply took 17 % longer from the ring than copied, a 1 MiB one
/// 14 % less. Measured again on a quiet machine, 256 KiB replies from the ring were 7-13 %
/// faster, but with two spinning processes beside them 4-8 % slower (128 KiB: 18 %): the
/// threshold favours the busy machine.
pub const RING_REPLY_MIN: usize = 1 << 20;

/// Bytes at the end of a reply sent from the ring that are copied beforehand and sent only
/// once the ring's part is known intact.
const TAIL_MIN: usize = 1024;

/// The values of a GET_DAT reply left in the stream's ring, to be sent from there after the
/// reply's head (see [`Buffer::handle_for_socket`]): all but the last samples in place, the
/// last ones copied and validated already.
pub struct RingReply {
    window: rtloop_stream::Window,
    tail: Vec<u8>,
}

impl std::fmt::Debug for RingReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingReply")
            .field("window", &self.window)
            .field("tail_bytes", &self.tail.len())
            .finish()
    }
}

/// Why a reply sent from the ring did not go out whole.
#[derive(Debug)]
pub enum RingSendError {
    /// The socket failed.
    Io(std::io::Error),
    /// The writer reached the samples while the kernel was taking them: the reply was cut
    /// short before its last bytes, and the connection must be closed.
    Lapped(rtloop_stream::ReadError),
}

impl std::fmt::Display for RingSendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RingSendError::Io(e) => write!(f, "{e}"),
            RingSendError::Lapped(e) => write!(
                f,
                "the writer overwrote the samples while they were sent ({e}); the reply was cut short"
            ),
        }
    }
}

/// One served stream and the FieldTrip view of it.
struct Served {
    stream: Stream,
    nchans: u32,
    fsample: f32,
    data_type: u32,
    chunks: Vec<u8>,
    /// Our writer; `None` while a local process writes the stream.
    writer: Mutex<Option<Writer>>,
    /// Created by a PUT_HDR of this buffer (so FLUSH_HDR may remove it).
    owned: bool,
    /// The stream file's inode, to notice a local re-creation.
    inode: u64,
    // Ordering: the bases and the PUT time are plain values read and written under no other
    // lock; Relaxed suffices because no other memory is published through them.
    sample_base: AtomicU64,
    event_base: AtomicU64,
    last_put_ns: AtomicU64,
    /// Replaced by PUT_HDR or removed by FLUSH_HDR; ends waits on it. Release/Acquire so a
    /// waiter that sees it also sees the new state's publication under the state lock.
    retired: AtomicBool,
    /// Events a stream slot cannot hold exactly (larger than a slot, or text that is not
    /// UTF-8), kept whole here by their stream event index; the stream holds a stand-in.
    wide: Mutex<WideEvents>,
}

thread_local! {
    /// How many state locks this thread holds (0 or 1): the drop hook below reads it.
    static STATE_LOCKS_HELD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

// Ordering: a statistic read by tests; nothing is published through it.
static DROPS_UNDER_STATE_LOCK: AtomicU64 = AtomicU64::new(0);

/// How many served streams of this process were released (unmapped) while their thread held
/// a buffer's state lock. Releasing a large stream takes up to 150 ms, and every other
/// client waits for that lock, so it stays 0; tests check it.
#[doc(hidden)]
#[must_use]
pub fn drops_under_state_lock() -> u64 {
    DROPS_UNDER_STATE_LOCK.load(Ordering::Relaxed)
}

impl Drop for Served {
    fn drop(&mut self) {
        if STATE_LOCKS_HELD.with(std::cell::Cell::get) > 0 {
            DROPS_UNDER_STATE_LOCK.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The buffer's state lock, held: counts itself for the drop hook.
struct StateGuard<'a>(MutexGuard<'a, Option<Arc<Served>>>);

impl<'a> StateGuard<'a> {
    fn new(g: MutexGuard<'a, Option<Arc<Served>>>) -> Self {
        STATE_LOCKS_HELD.with(|n| n.set(n.get() + 1));
        StateGuard(g)
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        STATE_LOCKS_HELD.with(|n| n.set(n.get() - 1));
    }
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = Option<Arc<Served>>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// End a served stream that is no longer in force: waits on it end, its writer closes (local
/// readers see the stream closed), and this reference goes. Call it without the state lock:
/// the last reference unmaps the stream, which takes long for a large one.
fn release(old: Arc<Served>) {
    old.retired.store(true, Ordering::Release);
    *old.writer.lock().unwrap_or_else(|p| p.into_inner()) = None;
    drop(old);
}

/// The events kept beside the stream, and their bytes.
#[derive(Default)]
struct WideEvents {
    by_index: std::collections::BTreeMap<u64, OwnedEvent>,
    bytes: u64,
}

/// A FieldTrip event as it came over the wire (type and value bytes exactly).
#[derive(Clone)]
struct OwnedEvent {
    type_type: u32,
    type_numel: u32,
    value_type: u32,
    value_numel: u32,
    type_bytes: Vec<u8>,
    value_bytes: Vec<u8>,
}

/// Largest event (type + value bytes) the server keeps: the reference's only limit is the
/// message size; this one is generous and documented.
pub const WIDE_EVENT_MAX: usize = 1 << 20;
/// Bytes of such events kept at once; older ones go first, as the event ring's do.
pub const WIDE_EVENTS_BUDGET: u64 = 64 << 20;

impl Served {
    fn counts(&self) -> (u64, u64) {
        (
            self.stream
                .written()
                .saturating_sub(self.sample_base.load(Ordering::Relaxed)),
            self.stream
                .events_written()
                .saturating_sub(self.event_base.load(Ordering::Relaxed)),
        )
    }

    fn writer(&self) -> Result<MutexGuard<'_, Option<Writer>>, String> {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if w.is_none() {
            // a locally written stream: write to it once its writer is gone
            match self.stream.writer() {
                Ok(new) => *w = Some(new),
                Err(e) => return Err(format!("{e}; FieldTrip clients may only read it")),
            }
        }
        Ok(w)
    }
}

/// A FieldTrip buffer backed by one rtloop stream. Shared by every connection.
pub struct Buffer {
    cfg: BufferConfig,
    state: Mutex<Option<Arc<Served>>>,
    created: Mutex<Vec<String>>,
    /// PUT_HDRs one at a time; the state lock is held only to swap the finished stream in,
    /// so other clients are answered while a new stream is allocated.
    headers: Mutex<()>,
    /// A refusal for want of a header was logged as a warning; later ones (clients poll
    /// GET_HDR until a header comes) are logged at debug level until a header comes.
    // Ordering: a flag with no data published through it: Relaxed.
    said_no_header: AtomicBool,
    /// Set by [`Buffer::end_waits`]: every WAIT_DAT ends (refused) and none waits again.
    // Ordering: a flag with no data published through it: Relaxed.
    waits_ended: AtomicBool,
    /// GET_DAT replies sent from the ring in place, and those of them cut short because the
    /// writer reached their samples while they were sent.
    // Ordering: statistics; nothing is published through them: Relaxed.
    ring_replies: AtomicU64,
    cut_replies: AtomicU64,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer").field("cfg", &self.cfg).finish()
    }
}

type Refused = String;

fn inode(name: &str) -> Option<u64> {
    std::fs::metadata(stream_path(name)).ok().map(|m| m.ino())
}

impl Buffer {
    /// A buffer serving `cfg.stream`. If the stream exists it is served as it is.
    #[must_use]
    pub fn new(cfg: BufferConfig) -> Buffer {
        Buffer {
            cfg,
            state: Mutex::new(None),
            created: Mutex::new(Vec::new()),
            headers: Mutex::new(()),
            said_no_header: AtomicBool::new(false),
            waits_ended: AtomicBool::new(false),
            ring_replies: AtomicU64::new(0),
            cut_replies: AtomicU64::new(0),
        }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &BufferConfig {
        &self.cfg
    }

    fn lock(&self) -> StateGuard<'_> {
        StateGuard::new(self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The served stream: ours, or a local one found by name. `recheck` notices a local
    /// stream that was removed or re-created since (one `stat`).
    fn current(&self, recheck: bool) -> Option<Arc<Served>> {
        let mut st = self.lock();
        if let Some(s) = st.as_ref() {
            if !recheck || s.owned || inode(&self.cfg.stream) == Some(s.inode) {
                return Some(s.clone());
            }
            s.retired.store(true, Ordering::Release);
            let gone = st.take();
            drop(st);
            // released without the lock (unmapping a large stream is slow)
            drop(gone);
            st = self.lock();
            if let Some(s) = st.as_ref() {
                // another thread put one in place meanwhile
                return Some(s.clone());
            }
        }
        let stream = Stream::open(&self.cfg.stream).ok()?;
        let info = stream.info().clone();
        let mut chunks = Vec::new();
        if !info.ch_names.is_empty() {
            codec::push_chunk(
                &mut chunks,
                codec::chunk::CHANNEL_NAMES,
                &codec::channel_names_chunk(&info.ch_names),
            );
        }
        let served = Arc::new(Served {
            nchans: info.n_channels as u32,
            fsample: info.nominal_rate as f32,
            data_type: info.dtype.code(),
            chunks,
            writer: Mutex::new(None),
            owned: false,
            inode: inode(&self.cfg.stream).unwrap_or(0),
            sample_base: AtomicU64::new(0),
            event_base: AtomicU64::new(0),
            last_put_ns: AtomicU64::new(0),
            retired: AtomicBool::new(false),
            wide: Mutex::new(WideEvents::default()),
            stream,
        });
        tracing::info!(stream = %self.cfg.stream, "serving the local stream {}", self.cfg.stream);
        *st = Some(served.clone());
        Some(served)
    }

    /// Handle one request message and append the reply (nothing for the NORESPONSE puts).
    /// `peer` names the client in log lines.
    pub fn handle(&self, prefix: &Prefix, payload: &[u8], out: &mut Vec<u8>, peer: &str) -> After {
        self.handle_inner(prefix, payload, out, peer, None)
    }

    /// [`Buffer::handle`] for a server that writes the reply to a socket: a large GET_DAT
    /// reply may leave its samples in the ring, returned here to be sent from there after
    /// `out` by [`Buffer::send_ring_reply`].
    pub fn handle_for_socket(
        &self,
        prefix: &Prefix,
        payload: &[u8],
        out: &mut Vec<u8>,
        peer: &str,
    ) -> (After, Option<RingReply>) {
        let mut ring = None;
        let after = self.handle_inner(prefix, payload, out, peer, Some(&mut ring));
        (after, ring)
    }

    /// GET_DAT replies sent from the ring in place so far, and how many of them were cut
    /// short (connection closed) because the writer reached their samples while they were
    /// being sent.
    #[must_use]
    pub fn ring_replies(&self) -> (u64, u64) {
        (
            self.ring_replies.load(Ordering::Relaxed),
            self.cut_replies.load(Ordering::Relaxed),
        )
    }

    /// Write `head` and then `ring`'s values to `w` without copying them: head and the
    /// ring's part in one vectored write, then, once the ring's part is checked intact after
    /// the kernel took it, the held-back last samples. If the writer reached the samples
    /// meanwhile the last bytes are not sent ([`RingSendError::Lapped`]): the caller closes
    /// the connection, so its client sees a short reply, never one with overwritten values.
    pub fn send_ring_reply<W: Write>(
        &self,
        head: &[u8],
        ring: &RingReply,
        w: &mut W,
    ) -> Result<(), RingSendError> {
        self.ring_replies.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the slice is only copied out by `w` (by the kernel, for a socket) and
        // never acted on here. What was copied counts for the client only once the held-back
        // tail follows, and that is sent only if `check` below, after every write returned,
        // finds that the writer had not reserved these samples' slots: the speculative read
        // `Window::bytes` allows. The window keeps its mapping alive as long as `ring`.
        let body = unsafe { ring.window.bytes() };
        let mut parts = [IoSlice::new(head), IoSlice::new(body)];
        let mut parts = &mut parts[..];
        while !parts.is_empty() {
            match w.write_vectored(parts) {
                Ok(0) => {
                    return Err(RingSendError::Io(std::io::Error::new(
                        std::io::ErrorKind::WriteZero,
                        "the socket took no bytes",
                    )))
                }
                Ok(n) => IoSlice::advance_slices(&mut parts, n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(RingSendError::Io(e)),
            }
        }
        if let Err(e) = ring.window.check() {
            self.cut_replies.fetch_add(1, Ordering::Relaxed);
            return Err(RingSendError::Lapped(e));
        }
        w.write_all(&ring.tail).map_err(RingSendError::Io)
    }

    fn handle_inner(
        &self,
        prefix: &Prefix,
        payload: &[u8],
        out: &mut Vec<u8>,
        peer: &str,
        ring: Option<&mut Option<RingReply>>,
    ) -> After {
        let order = prefix.order;
        let parsed = match codec::parse_request(prefix, payload) {
            Ok(p) => p,
            Err(e) => {
                let quiet = prefix.command >> 8 == 0x05;
                return match cmd::error_reply(prefix.command) {
                    Some(reply) => {
                        tracing::warn!(%peer, "{e}; answering {}", cmd::name(reply));
                        if !quiet {
                            put_status(order, reply, out);
                        }
                        After::Continue
                    }
                    None => {
                        tracing::warn!(%peer, "{e}; closing the connection");
                        After::Close
                    }
                };
            }
        };
        self.handle_parsed(order, &parsed, out, peer, ring);
        After::Continue
    }

    /// Handle a request that is already parsed (the in-process client's path: no encoding,
    /// no socket) and append the reply in `order`.
    pub fn handle_request(
        &self,
        order: ByteOrder,
        parsed: &Parsed<'_>,
        out: &mut Vec<u8>,
        peer: &str,
    ) {
        self.handle_parsed(order, parsed, out, peer, None);
    }

    fn handle_parsed(
        &self,
        order: ByteOrder,
        parsed: &Parsed<'_>,
        out: &mut Vec<u8>,
        peer: &str,
        mut ring: Option<&mut Option<RingReply>>,
    ) {
        let start = out.len();
        let result = match &parsed.request {
            Request::PutHdr { def, chunks } => self.put_header(def, chunks).map(|()| {
                put_status(order, cmd::PUT_OK, out);
            }),
            Request::PutDat { def, data } => self.put_data(def, data).map(|()| {
                put_status(order, cmd::PUT_OK, out);
            }),
            Request::PutEvt(evs) => self.put_events(evs).map(|()| {
                put_status(order, cmd::PUT_OK, out);
            }),
            Request::GetHdr => self.get_header(order, out),
            Request::GetDat(sel) => self.get_data(order, *sel, out, ring.as_deref_mut()),
            Request::GetEvt(sel) => self.get_events(order, *sel, out),
            Request::FlushHdr => self.flush_header().map(|()| {
                put_status(order, cmd::FLUSH_OK, out);
            }),
            Request::FlushDat => self.flush(true).map(|()| {
                put_status(order, cmd::FLUSH_OK, out);
            }),
            Request::FlushEvt => self.flush(false).map(|()| {
                put_status(order, cmd::FLUSH_OK, out);
            }),
            Request::WaitDat(w) => self.wait(order, w, out),
        };
        if let Err(reason) = result {
            out.truncate(start);
            let (name, reply) = request_names(&parsed.request);
            if reason == self.no_header() && self.said_no_header.swap(true, Ordering::Relaxed) {
                // clients poll GET_HDR until a header comes: said once (below) is enough
                tracing::debug!(%peer, "{name} refused ({}): {reason}", cmd::name(reply));
            } else if reason == self.no_header() {
                tracing::warn!(%peer, "{name} refused ({}): {reason} (said once; until a header comes, further requests refused for want of one are logged at debug level)", cmd::name(reply));
            } else {
                tracing::warn!(%peer, "{name} refused ({}): {reason}", cmd::name(reply));
            }
            put_status(order, reply, out);
        }
        if !parsed.respond {
            out.truncate(start);
            if let Some(r) = ring {
                *r = None;
            }
        }
    }

    fn no_header(&self) -> Refused {
        format!(
            "no header yet: stream {:?} does not exist; send PUT_HDR first",
            self.cfg.stream
        )
    }

    fn put_header(&self, def: &HeaderDef, chunks: &[u8]) -> Result<(), Refused> {
        let dtype = DType::from_code(def.data_type).ok_or_else(|| {
            format!(
                "data type {} cannot hold samples; allowed: 1 uint8, 2 uint16, 3 uint32, 4 uint64, 5 int8, 6 int16, 7 int32, 8 int64, 9 float32, 10 float64",
                def.data_type
            )
        })?;
        if def.nchans == 0 {
            return Err("a header needs at least 1 channel, got 0".into());
        }
        if !(def.fsample.is_finite() && def.fsample >= 0.0) {
            return Err(format!(
                "fsample must be a finite number >= 0, got {}",
                def.fsample
            ));
        }
        let sample_bytes = u64::from(def.nchans) * dtype.itemsize() as u64;
        let capacity = self.cfg.capacity.min(self.cfg.max_bytes / sample_bytes);
        if capacity == 0 {
            return Err(format!(
                "one sample of {} channels x {} bytes is larger than the {} bytes the server keeps (--max-bytes)",
                def.nchans,
                dtype.itemsize(),
                self.cfg.max_bytes
            ));
        }
        let _one_at_a_time = self.headers.lock().unwrap_or_else(|p| p.into_inner());
        // a stream under the name with a live writer that is not this buffer's: another
        // process, or another server (or writer) of this process, whose writes would go on
        // into the replaced file and reach nobody
        if let Ok(existing) = Stream::open(&self.cfg.stream) {
            if let Liveness::Active { pid, .. } = existing.writer_liveness() {
                let on_disk = inode(&self.cfg.stream);
                let ours = self.lock().as_ref().is_some_and(|s| {
                    Some(s.inode) == on_disk
                        && s.writer.lock().unwrap_or_else(|p| p.into_inner()).is_some()
                });
                if !ours {
                    let who = if pid == std::process::id() {
                        format!("another writer in this process ({pid}), such as a second FieldTrip server on the same stream")
                    } else {
                        format!("local process {pid}")
                    };
                    return Err(format!(
                        "stream {:?} is being written by {who}; a PUT_HDR would replace it under that writer",
                        self.cfg.stream
                    ));
                }
            }
        }
        let mut scfg =
            StreamConfig::new(dtype, def.nchans as usize, f64::from(def.fsample), capacity);
        scfg.event_capacity = self.cfg.events;
        // a server that keeps its stream after it stops keeps it past its writer's close too
        scfg.keep = !self.cfg.remove_on_drop;
        if let Some(names) = codec::channel_names(chunks, def.nchans as usize) {
            scfg.ch_names = names;
        }
        // the new stream is made complete beside the old one, without the state lock (its
        // allocation is the slow part: other clients go on being served from the old one),
        // then takes its name under the lock: a PUT_HDR that fails (the new shape does not
        // fit, ...) leaves the old header and data served as they were
        let pending = match prepare(&self.cfg.stream, &mut scfg) {
            Ok(p) => p,
            Err(e @ CreateError::TooLarge { .. }) => self.make_room(e, &mut scfg)?,
            Err(e) => return Err(e.to_string()),
        };
        let mut st = self.lock();
        let stream = pending.install().map_err(|e| e.to_string())?;
        let old = st.take();
        if let Some(o) = &old {
            o.retired.store(true, Ordering::Release);
        }
        let writer = match stream.writer() {
            Ok(w) => w,
            Err(e) => {
                drop(st);
                if let Some(old) = old {
                    release(old);
                }
                return Err(e.to_string());
            }
        };
        tracing::info!(
            stream = %self.cfg.stream,
            "PUT_HDR: {} channels {} at {} Hz; keeping {} samples and {} events",
            def.nchans, dtype, def.fsample, stream.info().capacity, stream.info().event_capacity
        );
        {
            let mut created = self.created.lock().unwrap_or_else(|p| p.into_inner());
            if !created.contains(&self.cfg.stream) {
                created.push(self.cfg.stream.clone());
            }
        }
        *st = Some(Arc::new(Served {
            nchans: def.nchans,
            fsample: def.fsample,
            data_type: def.data_type,
            chunks: chunks.to_vec(),
            writer: Mutex::new(Some(writer)),
            owned: true,
            inode: inode(&self.cfg.stream).unwrap_or(0),
            sample_base: AtomicU64::new(0),
            event_base: AtomicU64::new(0),
            last_put_ns: AtomicU64::new(0),
            retired: AtomicBool::new(false),
            wide: Mutex::new(WideEvents::default()),
            stream,
        }));
        drop(st);
        // the old stream is released without the lock: unmapping a large one takes up to
        // 150 ms, which every other client would wait for
        if let Some(old) = old {
            release(old);
        }
        self.said_no_header.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// A new stream that does not fit beside the old one: if it fits in the old one's place
    /// (an acquisition program that restarts sends the same header again), end the old one
    /// first and make the new one in its space, as the reference does. Not while a local
    /// process maps the old stream: its memory would stay taken, and its readers go on
    /// reading it; the PUT_HDR is refused then and the old header stays served.
    fn make_room(
        &self,
        too_large: CreateError,
        scfg: &mut StreamConfig,
    ) -> Result<rtloop_stream::Replacement, Refused> {
        let CreateError::TooLarge {
            requested_bytes,
            available_bytes,
            ..
        } = too_large
        else {
            return Err(too_large.to_string());
        };
        let path = stream_path(&self.cfg.stream);
        let Some(old) = self.lock().clone() else {
            return Err(too_large.to_string());
        };
        let meta = std::fs::metadata(&path).ok();
        let on_disk = meta.as_ref().map(MetadataExt::ino);
        let old_bytes = meta.map_or(0, |m| m.blocks() * 512);
        if !old.owned || on_disk != Some(old.inode) {
            return Err(too_large.to_string());
        }
        if requested_bytes > available_bytes.saturating_add(old_bytes) {
            return Err(format!(
                "{too_large}; even in the place of the stream it replaces ({old_bytes} bytes) it would not fit"
            ));
        }
        let elsewhere = mapped_by_other_processes(&path, old.inode);
        if !elsewhere.is_empty() {
            return Err(format!(
                "{too_large}; it would fit in the place of the stream it replaces ({old_bytes} bytes), but local processes {elsewhere:?} still read that stream (their memory of it stays taken until they close it); the old header stays served"
            ));
        }
        drop(old);
        tracing::info!(
            stream = %self.cfg.stream,
            "PUT_HDR: the new stream does not fit beside the old one ({requested_bytes} bytes needed, {available_bytes} free); ending the old one to make room"
        );
        let old = self.take_and_remove();
        if let Some(old) = old {
            release(old);
        }
        // a request in progress may hold the old stream a moment longer: its memory comes
        // back when it lets go
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        loop {
            match prepare(&self.cfg.stream, scfg) {
                Ok(p) => return Ok(p),
                Err(CreateError::TooLarge { .. }) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => {
                    return Err(format!(
                        "{e}; the old header was ended to make room, but its memory is still held in this process (a reader of the stream?): the server has no header now"
                    ))
                }
            }
        }
    }

    /// Take the served stream out and remove its name, under the state lock (so no request
    /// finds the old file by name in between and serves it as a local stream); the caller
    /// releases what it returns without the lock.
    fn take_and_remove(&self) -> Option<Arc<Served>> {
        let mut st = self.lock();
        let old = st.take();
        if let Some(o) = &old {
            // its writer closes here (cheap; the stream stays mapped through `o`) so that
            // the removal below is not refused for a live writer
            o.retired.store(true, Ordering::Release);
            *o.writer.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        let _ = Stream::remove(&self.cfg.stream);
        drop(st);
        old
    }

    fn put_data(&self, def: &DataDef, data: &[u8]) -> Result<(), Refused> {
        let s = self.current(false).ok_or_else(|| self.no_header())?;
        if def.nchans != s.nchans {
            return Err(format!(
                "the block has {} channels, the header {}",
                def.nchans, s.nchans
            ));
        }
        if def.data_type != s.data_type {
            return Err(format!(
                "the block's data type is {}, the header's {}",
                def.data_type, s.data_type
            ));
        }
        let cap = s.stream.info().capacity;
        if u64::from(def.nsamples) > cap {
            return Err(format!(
                "{} samples in one PUT_DAT is more than the {cap} the buffer keeps",
                def.nsamples
            ));
        }
        if def.nsamples == 0 {
            return Ok(());
        }
        let mut w = s.writer()?;
        let w = w.as_mut().expect("claimed above");
        w.write_bytes(data, None).map_err(|e| e.to_string())?;
        s.last_put_ns.store(sys::monotonic_ns(), Ordering::Relaxed);
        Ok(())
    }

    fn put_events(&self, evs: &[WireEvent<'_>]) -> Result<(), Refused> {
        let s = self.current(false).ok_or_else(|| self.no_header())?;
        let (nsamples, _) = s.counts();
        let base = s.sample_base.load(Ordering::Relaxed);
        // convert every event first: one the protocol makes invalid stores none of them
        let mut events = Vec::with_capacity(evs.len());
        for (i, e) in evs.iter().enumerate() {
            for (what, code) in [("type", e.type_type), ("value", e.value_type)] {
                if code != CHAR_CODE && DType::from_code(code).is_none() {
                    return Err(format!("event {i}: {what} type code {code} is unknown"));
                }
            }
            let wide_bytes = e.type_bytes.len() + e.value_bytes.len();
            if wide_bytes > WIDE_EVENT_MAX {
                return Err(format!(
                    "event {i}: type and value take {wide_bytes} bytes; this server keeps events of up to {WIDE_EVENT_MAX} bytes"
                ));
            }
            let sample: i64 = if e.sample == -1 {
                // the reference: nsamples + fsample x (now - last PUT_DAT)
                let last = s.last_put_ns.load(Ordering::Relaxed);
                let extra = if last == 0 {
                    0
                } else {
                    let dt = sys::monotonic_ns().saturating_sub(last) as f64 * 1e-9;
                    (f64::from(s.fsample) * dt) as i64
                };
                nsamples as i64 + extra
            } else {
                i64::from(e.sample)
            };
            let exact = (
                event_value(e.type_type, &e.type_bytes),
                event_value(e.value_type, &e.value_bytes),
            );
            let mut ev = Event {
                kind: EventValue::Text(String::new()),
                value: EventValue::Text(String::new()),
                sample: (base as i64).wrapping_add(sample) as u64,
                offset: i64::from(e.offset),
                duration: i64::from(e.duration) as u64,
                stamp_ns: 0,
            };
            let mut wide = None;
            let slot_holds_it = if let (Some(kind), Some(value)) = exact {
                ev.kind = kind;
                ev.value = value;
                ev.payload_bytes() <= rtloop_stream::EVENT_PAYLOAD_MAX
            } else {
                false
            };
            if !slot_holds_it {
                // too large for a slot, or text that is not UTF-8: the server keeps it whole
                // and the stream gets a stand-in that says where it is
                ev.kind = EventValue::Text(stand_in_text(e.type_type, &e.type_bytes, 64));
                ev.value = EventValue::Text(format!(
                    "{} bytes kept whole by the FieldTrip server",
                    e.value_bytes.len()
                ));
                wide = Some(OwnedEvent {
                    type_type: e.type_type,
                    type_numel: e.type_numel,
                    value_type: e.value_type,
                    value_numel: e.value_numel,
                    type_bytes: e.type_bytes.to_vec(),
                    value_bytes: e.value_bytes.to_vec(),
                });
            }
            events.push((ev, wide));
        }
        if events.is_empty() {
            return Ok(());
        }
        let mut w = s.writer()?;
        let w = w.as_mut().expect("claimed above");
        let keep = s.stream.info().event_capacity;
        for (ev, wide) in events {
            // the index this event gets: this server's writer is the only one
            let index = s.stream.events_written();
            w.push_event(&ev).map_err(|e| e.to_string())?;
            if let Some(owned) = wide {
                let mut kept = s.wide.lock().unwrap_or_else(|p| p.into_inner());
                kept.bytes += (owned.type_bytes.len() + owned.value_bytes.len()) as u64;
                kept.by_index.insert(index, owned);
                // what the ring no longer keeps, and the oldest beyond the budget, go
                let oldest = (index + 1).saturating_sub(keep);
                while let Some((&first, _)) = kept.by_index.first_key_value() {
                    if first >= oldest && kept.bytes <= WIDE_EVENTS_BUDGET {
                        break;
                    }
                    let gone = kept.by_index.remove(&first).expect("present");
                    kept.bytes -= (gone.type_bytes.len() + gone.value_bytes.len()) as u64;
                }
            }
        }
        Ok(())
    }

    fn get_header(&self, order: ByteOrder, out: &mut Vec<u8>) -> Result<(), Refused> {
        let s = self.current(true).ok_or_else(|| self.no_header())?;
        let (ns, ne) = s.counts();
        let def = HeaderDef {
            nchans: s.nchans,
            nsamples: ns as u32,
            nevents: ne as u32,
            fsample: s.fsample,
            data_type: s.data_type,
            bufsize: s.chunks.len() as u32,
        };
        put_prefix(order, cmd::GET_OK, 0, out);
        let body = out.len();
        put_headerdef(order, &def, out);
        put_chunks(order, &s.chunks, out);
        let n = out.len() - body;
        codec::set_bufsize(order, &mut out[body - 8..], n);
        Ok(())
    }

    fn get_data(
        &self,
        order: ByteOrder,
        sel: Option<Selection>,
        out: &mut Vec<u8>,
        ring: Option<&mut Option<RingReply>>,
    ) -> Result<(), Refused> {
        let s = self.current(false).ok_or_else(|| self.no_header())?;
        let (n, _) = s.counts();
        let cap = s.stream.info().capacity;
        let (begin, end) = resolve(sel, n, cap, "samples", true)?;
        let count = end - begin;
        let info = s.stream.info();
        let bytes = count as usize * info.sample_bytes;
        let def = DataDef {
            nchans: s.nchans,
            nsamples: count as u32,
            data_type: s.data_type,
            bufsize: bytes as u32,
        };
        let base = s.sample_base.load(Ordering::Relaxed);
        if let Some(ring) = ring.filter(|_| bytes >= RING_REPLY_MIN && !order.is_foreign()) {
            // the last samples, at least TAIL_MIN bytes, are copied (and validated) now and
            // sent only once the ring's part is checked after the kernel took it
            let tail = (TAIL_MIN.div_ceil(info.sample_bytes) as u64).min(count);
            let mut held = Vec::with_capacity(tail as usize * info.sample_bytes);
            let made = s
                .stream
                .window(base + begin, base + end - tail)
                .and_then(|w| {
                    s.stream
                        .read_append(base + end - tail, base + end, &mut held)
                        .map(|()| w)
                })
                .map_err(|e| format!("samples [{begin}, {}]: {e}", end - 1))?;
            // far from the writer only: it must reserve more than half the ring before it
            // reaches these samples, which a send of at most the ring takes far less than
            if made.headroom() > cap / 2 {
                codec::put_data_reply_head(order, &def, out);
                *ring = Some(RingReply {
                    window: made,
                    tail: held,
                });
                return Ok(());
            }
        }
        codec::put_data_reply_head(order, &def, out);
        let at = out.len();
        if count > 0 {
            // appended, not zeroed then overwritten: each byte of a large reply is copied
            // once before the socket takes it
            s.stream
                .read_append(base + begin, base + end, out)
                .map_err(|e| format!("samples [{begin}, {}]: {e}", end - 1))?;
            if order.is_foreign() {
                codec::swap_words(&mut out[at..], info.dtype.itemsize());
            }
        }
        Ok(())
    }

    fn get_events(
        &self,
        order: ByteOrder,
        sel: Option<Selection>,
        out: &mut Vec<u8>,
    ) -> Result<(), Refused> {
        let s = self.current(false).ok_or_else(|| self.no_header())?;
        let (_, n) = s.counts();
        let cap = s.stream.info().event_capacity;
        let (begin, end) = resolve(sel, n, cap, "events", false)?;
        let ebase = s.event_base.load(Ordering::Relaxed);
        let sbase = s.sample_base.load(Ordering::Relaxed) as i64;
        let events = if begin == end {
            Vec::new()
        } else {
            s.stream
                .read_events(ebase + begin, ebase + end)
                .map_err(|e| format!("events [{begin}, {}]: {e}", end - 1))?
        };
        put_prefix(order, cmd::GET_OK, 0, out);
        let body = out.len();
        let wide = s.wide.lock().unwrap_or_else(|p| p.into_inner());
        for (k, e) in events.iter().enumerate() {
            let sample = (e.sample as i64).wrapping_sub(sbase) as i32;
            let (offset, duration) = (e.offset as i32, e.duration as i64 as i32);
            if let Some(w) = wide.by_index.get(&(ebase + begin + k as u64)) {
                // kept whole beside the stream: its bytes exactly as they came
                put_event(
                    order,
                    &WireEvent {
                        type_type: w.type_type,
                        type_numel: w.type_numel,
                        value_type: w.value_type,
                        value_numel: w.value_numel,
                        sample,
                        offset,
                        duration,
                        type_bytes: Cow::Borrowed(&w.type_bytes),
                        value_bytes: Cow::Borrowed(&w.value_bytes),
                    },
                    out,
                );
                continue;
            }
            let (tt, tn, tb) = wire_value(&e.kind);
            let (vt, vn, vb) = wire_value(&e.value);
            put_event(
                order,
                &WireEvent {
                    type_type: tt,
                    type_numel: tn,
                    value_type: vt,
                    value_numel: vn,
                    sample,
                    offset,
                    duration,
                    type_bytes: Cow::Borrowed(tb),
                    value_bytes: Cow::Borrowed(vb),
                },
                out,
            );
        }
        drop(wide);
        let n = out.len() - body;
        codec::set_bufsize(order, &mut out[body - 8..], n);
        Ok(())
    }

    fn flush_header(&self) -> Result<(), Refused> {
        let s = self.current(false).ok_or_else(|| self.no_header())?;
        if !s.owned {
            return Err(format!(
                "stream {:?} was created by a local process, not by a PUT_HDR; remove it with `rtloop stream remove {}`",
                self.cfg.stream, self.cfg.stream
            ));
        }
        drop(s);
        let old = self.take_and_remove();
        if let Some(old) = old {
            release(old);
        }
        Ok(())
    }

    fn flush(&self, samples: bool) -> Result<(), Refused> {
        let s = self.current(false).ok_or_else(|| self.no_header())?;
        if samples {
            s.sample_base.store(s.stream.written(), Ordering::Relaxed);
        } else {
            s.event_base
                .store(s.stream.events_written(), Ordering::Relaxed);
        }
        Ok(())
    }

    /// WAIT_DAT: until more than `nsamples` samples or `nevents` events, or the timeout. As
    /// the reference does, a PUT_HDR or FLUSH_HDR from another client during the wait does
    /// not end it: the wait goes on against the header in force, whose counts are reported.
    fn wait(&self, order: ByteOrder, w: &WaitDef, out: &mut Vec<u8>) -> Result<(), Refused> {
        let mut s = self.current(true).ok_or_else(|| self.no_header())?;
        let timeout = Duration::from_millis(u64::from(w.timeout_ms)).min(self.cfg.max_wait);
        let deadline = std::time::Instant::now() + timeout;
        let stopping = || "the server is stopping".to_owned();
        loop {
            if self.waits_ended.load(Ordering::Relaxed) {
                return Err(stopping());
            }
            let sb = s.sample_base.load(Ordering::Relaxed);
            let eb = s.event_base.load(Ordering::Relaxed);
            let live =
                || !s.retired.load(Ordering::Acquire) && !self.waits_ended.load(Ordering::Relaxed);
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let _ = s.stream.wait_for(
                sb + u64::from(w.nsamples) + 1,
                eb + u64::from(w.nevents) + 1,
                left,
                &live,
            );
            if self.waits_ended.load(Ordering::Relaxed) {
                return Err(stopping());
            }
            if !s.retired.load(Ordering::Acquire) {
                break;
            }
            // the header was replaced or flushed: wait on the one in force (polling for a
            // new one after a FLUSH_HDR), until the deadline; the old one is let go now, so a
            // PUT_HDR that needs its memory gets it
            drop(s);
            let next = loop {
                if self.waits_ended.load(Ordering::Relaxed) {
                    return Err(stopping());
                }
                if let Some(n) = self.current(true) {
                    break Some(n);
                }
                if std::time::Instant::now() >= deadline {
                    break None;
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            match next {
                Some(n) => s = n,
                None => {
                    put_wait_ok(order, 0, 0, out);
                    return Ok(());
                }
            }
            if std::time::Instant::now() >= deadline {
                break;
            }
        }
        let (ns, ne) = s.counts();
        put_wait_ok(order, ns as u32, ne as u32, out);
        Ok(())
    }

    /// `(samples, events)` as FieldTrip counts them, if there is a header.
    #[must_use]
    pub fn counts(&self) -> Option<(u64, u64)> {
        self.current(false).map(|s| s.counts())
    }
}

impl Buffer {
    /// End every WAIT_DAT now (each is answered WAIT_ERR, "the server is stopping") and
    /// refuse the ones that come later: what a server that closes its connections does first.
    pub fn end_waits(&self) {
        self.waits_ended.store(true, Ordering::Relaxed);
    }

    /// Stop serving: end every wait, and remove the streams this buffer created (if
    /// `remove_on_drop`). Also done on drop; call it when connection threads may still hold
    /// the buffer at process exit.
    pub fn close(&self) {
        self.end_waits();
        let old = self.lock().take();
        if let Some(s) = old {
            s.retired.store(true, Ordering::Release);
        }
        if self.cfg.remove_on_drop {
            for name in self
                .created
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .drain(..)
            {
                let _ = Stream::remove(&name);
            }
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.close();
    }
}

/// Resolve a GET_DAT / GET_EVT selection against `n` items of which the newest `cap` are
/// kept, into `[begin, end)`, with the reference's rules: no selection = everything kept;
/// 0-based inclusive indices; `end = u32::MAX` = up to the newest (samples only); both ends
/// must lie in what is kept, even for the empty selection `begin = end + 1`.
fn resolve(
    sel: Option<Selection>,
    n: u64,
    cap: u64,
    what: &str,
    open_end: bool,
) -> Result<(u64, u64), Refused> {
    let oldest = n.saturating_sub(cap);
    let Some(Selection { begin, end }) = sel else {
        return if n == 0 {
            Err(format!("the buffer holds no {what} yet"))
        } else {
            Ok((oldest, n))
        };
    };
    let b = u64::from(begin);
    let e = if open_end && end == u32::MAX {
        if n == 0 {
            return Err(format!("the buffer holds no {what} yet"));
        }
        n - 1
    } else {
        u64::from(end)
    };
    if b > e + 1 {
        Err(format!(
            "selection [{begin}, {end}] has begin > end + 1 (indices are 0-based and inclusive)"
        ))
    } else if e >= n || b >= n {
        Err(format!(
            "{what} [{b}, {e}] are not in the buffer: it holds [{oldest}, {}]",
            n as i64 - 1
        ))
    } else if b < oldest {
        Err(format!(
            "{what} from {b} are no longer in the buffer: it keeps {cap}, now [{oldest}, {}]",
            n - 1
        ))
    } else {
        Ok((b, e + 1))
    }
}

/// Make the new stream under a hidden name; channel names that do not fit the stream header
/// stay in the chunk only.
fn prepare(name: &str, scfg: &mut StreamConfig) -> Result<rtloop_stream::Replacement, CreateError> {
    match Stream::prepare_replacement(name, scfg) {
        Err(CreateError::Labels(_)) if !scfg.ch_names.is_empty() => {
            scfg.ch_names.clear();
            Stream::prepare_replacement(name, scfg)
        }
        r => r,
    }
}

/// Other processes that map the stream file `path` (inode `ino`), from /proc/<pid>/maps.
/// Processes this one may not inspect are not seen; streams are owner-only, so their readers
/// run as the same user (or root) and are.
fn mapped_by_other_processes(path: &std::path::Path, ino: u64) -> Vec<u32> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let path = path.to_string_lossy();
    let ino = ino.to_string();
    let mut pids = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        // address perms offset dev inode path
        let maps_it = maps
            .lines()
            .any(|l| l.split_whitespace().nth(4) == Some(ino.as_str()) && l.ends_with(&*path));
        if maps_it {
            pids.push(pid);
        }
    }
    pids
}

/// A FieldTrip type/value as an event value of the stream, if a slot can hold it exactly
/// (text must be UTF-8; the type code was checked).
fn event_value(code: u32, bytes: &[u8]) -> Option<EventValue> {
    if code == CHAR_CODE {
        return String::from_utf8(bytes.to_vec()).ok().map(EventValue::Text);
    }
    let dtype = DType::from_code(code)?;
    debug_assert_eq!(bytes.len() % wordsize(code).unwrap_or(1), 0);
    Some(EventValue::Array {
        dtype,
        bytes: bytes.to_vec(),
    })
}

/// The stream's stand-in type for an event kept beside it: its text type (made valid UTF-8,
/// cut to `max` bytes), or its numeric type's name.
fn stand_in_text(code: u32, bytes: &[u8], max: usize) -> String {
    if code != CHAR_CODE {
        return DType::from_code(code).map_or("?", |d| d.name()).to_owned();
    }
    let text = String::from_utf8_lossy(bytes);
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

fn wire_value(v: &EventValue) -> (u32, u32, &[u8]) {
    match v {
        EventValue::Text(s) => (CHAR_CODE, s.len() as u32, s.as_bytes()),
        EventValue::Array { dtype, bytes } => (
            dtype.code(),
            (bytes.len() / dtype.itemsize()) as u32,
            bytes.as_slice(),
        ),
    }
}

/// A request's name and its error reply.
fn request_names(r: &Request<'_>) -> (&'static str, u16) {
    match r {
        Request::PutHdr { .. } => ("PUT_HDR", cmd::PUT_ERR),
        Request::PutDat { .. } => ("PUT_DAT", cmd::PUT_ERR),
        Request::PutEvt(_) => ("PUT_EVT", cmd::PUT_ERR),
        Request::GetHdr => ("GET_HDR", cmd::GET_ERR),
        Request::GetDat(_) => ("GET_DAT", cmd::GET_ERR),
        Request::GetEvt(_) => ("GET_EVT", cmd::GET_ERR),
        Request::FlushHdr => ("FLUSH_HDR", cmd::FLUSH_ERR),
        Request::FlushDat => ("FLUSH_DAT", cmd::FLUSH_ERR),
        Request::FlushEvt => ("FLUSH_EVT", cmd::FLUSH_ERR),
        Request::WaitDat(_) => ("WAIT_DAT", cmd::WAIT_ERR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_events_say_what_is_allowed() {
        let name = format!("ft-unit-{}", sys::pid());
        let mut cfg = BufferConfig::new(&name);
        cfg.capacity = 100;
        cfg.events = 8;
        cfg.remove_on_drop = true;
        let b = Buffer::new(cfg);
        let def = HeaderDef {
            nchans: 1,
            nsamples: 0,
            nevents: 0,
            fsample: 10.0,
            data_type: 9,
            bufsize: 0,
        };
        b.put_header(&def, &[]).unwrap();
        let huge = "z".repeat(WIDE_EVENT_MAX + 1);
        let e = b
            .put_events(&[WireEvent::text("big", &huge, 0)])
            .unwrap_err();
        assert_eq!(
            e,
            format!(
                "event 0: type and value take {} bytes; this server keeps events of up to 1048576 bytes",
                WIDE_EVENT_MAX + 4
            )
        );
        let mut bad = WireEvent::text("a", "b", 0);
        bad.type_type = 42;
        assert_eq!(
            b.put_events(&[WireEvent::text("ok", "ok", 0), bad])
                .unwrap_err(),
            "event 1: type type code 42 is unknown"
        );
        // nothing of a refused batch was stored
        assert_eq!(b.counts(), Some((0, 0)));
        let _ = Stream::remove(&name);
    }
}
