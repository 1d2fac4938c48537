//! The shared-memory layout of a stream: a 4 KiB header, a control block of cache-line-
//! padded counters, channel labels, the stamp ring, the event ring and the sample data.
//! Offsets only (no pointers), so every process can map it anywhere.
//!
//! ```text
//! 0                 Header (4096 B, static after creation; magic written last)
//! 4096              ControlBlock (owner, sample RingSync, event RingSync, stats, 64 readers)
//! meta_offset       n_channels x ChannelLabel (48 B)
//! stamps_offset     capacity x u64 (CLOCK_MONOTONIC ns of each sample's commit)
//! events_offset     event_capacity x 512 B slots
//! data_offset       capacity x sample_bytes (mapped twice back to back)
//! ```

use std::mem::{offset_of, size_of};

use crate::ring::{ReaderCursor, RingSync};
use crate::sync::AtomicU64;

/// First 8 bytes of every stream file.
pub const MAGIC: [u8; 8] = *b"rtloopSM";
/// Layout version; a stream of another version is refused on open.
pub const LAYOUT_VERSION: u32 = 3;
/// Header size.
pub const HEADER_BYTES: usize = 4096;
/// Longest stream name.
pub const NAME_MAX: usize = 64;
/// Reader slots per stream.
pub const MAX_READERS: usize = if cfg!(loom) { 2 } else { 64 };
/// Most channels a stream may have.
pub const MAX_CHANNELS: u64 = 1 << 20;
/// Longest channel name, in bytes (UTF-8).
pub const CH_NAME_MAX: usize = 31;
/// Longest channel unit, in bytes (UTF-8).
pub const CH_UNIT_MAX: usize = 15;
/// Bytes per event slot.
pub const EVENT_SLOT_BYTES: usize = 512;
/// Longest content type ("EEG", "Markers", ...), in bytes (UTF-8).
pub const CONTENT_TYPE_MAX: usize = 31;
/// Longest source id, in bytes (UTF-8).
pub const SOURCE_ID_MAX: usize = 63;
/// Longest channel type ("EEG", "ACC", "MISC", ...), in bytes (UTF-8).
pub const CH_TYPE_MAX: usize = 31;
/// Bytes for channel types and the description together (the rest of the header).
pub const META_TEXT_MAX: usize = 3776;
/// Prefix of stream files in the shared-memory directory.
pub const FILE_PREFIX: &str = "rtloop-";

/// Static description of the stream, written once at creation.
#[repr(C)]
pub struct Header {
    /// [`MAGIC`], written last at creation.
    pub magic: [u8; 8],
    /// [`LAYOUT_VERSION`].
    pub layout_version: u32,
    /// [`HEADER_BYTES`].
    pub header_bytes: u32,
    /// Size of the file.
    pub file_bytes: u64,
    /// FieldTrip dtype code.
    pub dtype: u32,
    /// Channels per sample.
    pub n_channels: u32,
    /// Bytes per sample (`n_channels * itemsize`).
    pub sample_bytes: u64,
    /// Samples kept.
    pub capacity: u64,
    /// Nominal rate in Hz (0 = irregular).
    pub nominal_rate: f64,
    /// Creation time, Unix ns (CLOCK_REALTIME).
    pub created_unix_ns: u64,
    /// Creation time, CLOCK_MONOTONIC ns.
    pub created_mono_ns: u64,
    /// Control block offset.
    pub control_offset: u64,
    /// Channel labels offset.
    pub meta_offset: u64,
    /// Stamp ring offset.
    pub stamps_offset: u64,
    /// Event ring offset.
    pub events_offset: u64,
    /// Event slots.
    pub event_capacity: u64,
    /// Bytes per event slot.
    pub event_slot_bytes: u64,
    /// Sample data offset.
    pub data_offset: u64,
    /// Sample data bytes (`capacity * sample_bytes`, a whole number of pages).
    pub data_bytes: u64,
    /// Length of `name`.
    pub name_len: u32,
    /// Whether channel labels were given.
    pub has_labels: u32,
    /// Stream name (UTF-8, `name_len` bytes).
    pub name: [u8; NAME_MAX],
    /// Creator's pid.
    pub creator_pid: u32,
    /// Content type (LSL's stream type: "EEG", "Markers", ...), NUL-padded UTF-8.
    pub content_type: [u8; CONTENT_TYPE_MAX + 1],
    /// Source id (a serial number or rig name that survives restarts), NUL-padded UTF-8.
    pub source_id: [u8; SOURCE_ID_MAX + 1],
    /// Bytes of channel types at the start of `meta_text` (0: none given).
    pub types_len: u32,
    /// Bytes of the description after the channel types in `meta_text`.
    pub desc_len: u32,
    /// Channel types joined by `\n`, then the free-form description (UTF-8).
    pub meta_text: [u8; META_TEXT_MAX],
    /// [`header_flags`]: what the creator asked of the stream's life (zero in files made
    /// before the flags existed: not kept, not internal).
    pub flags: u32,
    _reserved: [u8; HEADER_BYTES - 320 - META_TEXT_MAX],
}

/// Bits of [`Header::flags`].
pub mod header_flags {
    /// Keep the stream's name when its writer closes cleanly (by default a clean close
    /// removes the name, and the memory comes back once the last reader unmaps it).
    pub const KEEP: u32 = 1;
    /// A stream rtloop uses inside one tool (the lab's transport, ...): hidden from
    /// listings and resolution unless asked for.
    pub const INTERNAL: u32 = 2;
}

const _: () = assert!(size_of::<Header>() == HEADER_BYTES);
const _: () = assert!(offset_of!(Header, capacity) == 40);
const _: () = assert!(offset_of!(Header, name) == 144);
const _: () = assert!(offset_of!(Header, content_type) == 212);
const _: () = assert!(offset_of!(Header, source_id) == 244);
const _: () = assert!(offset_of!(Header, types_len) == 308);
const _: () = assert!(offset_of!(Header, meta_text) == 316);
const _: () = assert!(offset_of!(Header, flags) == 316 + META_TEXT_MAX);

/// Who writes, and whether they are alive.
#[repr(C, align(128))]
#[derive(Default)]
pub struct OwnerLine {
    /// The writer in one word: [`writer_word::NEVER`], [`writer_word::CLOSED`], or the
    /// holder's `sys::ProcessId` word (pid and start time together, so a claim is one
    /// compare-and-swap).
    pub writer: AtomicU64,
    /// How the holder orders its `written` store before its `waiters` load:
    /// [`publish_barrier::FENCE`] or [`publish_barrier::LIGHT`] (a sleeping reader must then
    /// issue the heavy half, `membarrier`, before its last check). Set at each claim.
    pub publish_barrier: AtomicU64,
    /// CLOCK_MONOTONIC ns of the last commit or explicit heartbeat.
    pub heartbeat_ns: AtomicU64,
    /// Commits so far.
    pub commits: AtomicU64,
    /// Writers that held this stream so far.
    pub generation: AtomicU64,
}

/// Values of [`OwnerLine::publish_barrier`].
pub mod publish_barrier {
    /// The writer issues a SeqCst fence after every publication (the word's value in a
    /// stream no writer has held yet, and when the kernel refused `membarrier`).
    pub const FENCE: u64 = 0;
    /// The writer issues only a compiler barrier; sleepers issue `membarrier` first.
    pub const LIGHT: u64 = 1;
}

/// Values of [`OwnerLine::writer`] that name no process (a held word has bit 63 set).
pub mod writer_word {
    /// Never had a writer.
    pub const NEVER: u64 = 0;
    /// The last writer closed cleanly.
    pub const CLOSED: u64 = 1;
}

/// Stream-wide statistics (written by readers; rarely).
#[repr(C, align(128))]
#[derive(Default)]
pub struct StatsLine {
    /// Overruns reported to any reader.
    pub overruns: AtomicU64,
    /// Samples lost by any reader.
    pub lost_samples: AtomicU64,
    /// Highest occupancy (samples) a reader saw when it pulled.
    pub high_water: AtomicU64,
    /// Lossless readers registered (the writer skips the cursor scan while this is 0).
    pub lossless_readers: AtomicU64,
}

/// Where the writer word ([`OwnerLine::writer`]) sits from the start of the control block:
/// a listing reads it from the file without mapping the stream.
#[cfg(not(loom))]
pub const WRITER_WORD_IN_CONTROL: usize =
    offset_of!(ControlBlock, owner) + offset_of!(OwnerLine, writer);

/// Where the samples' `written` counter sits from the start of the control block.
#[cfg(not(loom))]
pub const SAMPLES_WRITTEN_IN_CONTROL: usize = offset_of!(ControlBlock, samples)
    + offset_of!(RingSync, publish)
    + offset_of!(crate::ring::PublishLine, written);

/// All shared counters (created as zero bytes in the new file: every field is an atomic
/// whose zero is its initial value).
#[repr(C)]
pub struct ControlBlock {
    /// Writer ownership and liveness.
    pub owner: OwnerLine,
    /// Sample ring synchronisation.
    pub samples: RingSync,
    /// Event ring synchronisation.
    pub events: RingSync,
    /// Statistics.
    pub stats: StatsLine,
    /// Registered readers.
    pub readers: [ReaderCursor; MAX_READERS],
}

impl Default for ControlBlock {
    /// The control block of a new stream (all zeros), for heap-backed streams; a stream
    /// file gets the same as zero bytes.
    fn default() -> Self {
        ControlBlock {
            owner: OwnerLine::default(),
            samples: RingSync::default(),
            events: RingSync::default(),
            stats: StatsLine::default(),
            readers: std::array::from_fn(|_| ReaderCursor::default()),
        }
    }
}

// the shared-memory layout (loom's model types are larger and never in a file)
#[cfg(not(loom))]
const _: () = assert!(size_of::<RingSync>() == 384);
#[cfg(not(loom))]
const _: () = assert!(size_of::<ReaderCursor>() == 128);
#[cfg(not(loom))]
const _: () = assert!(offset_of!(ControlBlock, samples) == 128);
#[cfg(not(loom))]
const _: () = assert!(offset_of!(ControlBlock, readers) == 1024);
#[cfg(not(loom))]
const _: () = assert!(size_of::<ControlBlock>() == 1024 + 128 * MAX_READERS);

/// One channel's name and unit, NUL-padded UTF-8.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ChannelLabel {
    /// Name, NUL-padded.
    pub name: [u8; CH_NAME_MAX + 1],
    /// Unit, NUL-padded.
    pub unit: [u8; CH_UNIT_MAX + 1],
}
const _: () = assert!(size_of::<ChannelLabel>() == 48);

/// Fixed part of an event slot; `type` and `value` bytes follow it.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct EventSlotHeader {
    /// FieldTrip type code of `type` (0 = char).
    pub type_code: u32,
    /// Bytes of `type`.
    pub type_bytes: u32,
    /// FieldTrip type code of `value`.
    pub value_code: u32,
    /// Bytes of `value`.
    pub value_bytes: u32,
    /// Sample the event refers to.
    pub sample: u64,
    /// Offset in samples from `sample`.
    pub offset: i64,
    /// Duration in samples.
    pub duration: u64,
    /// CLOCK_MONOTONIC ns when it was pushed.
    pub stamp_ns: u64,
}
/// Bytes of type + value that fit one event.
pub const EVENT_PAYLOAD_MAX: usize = EVENT_SLOT_BYTES - size_of::<EventSlotHeader>();
const _: () = assert!(size_of::<EventSlotHeader>() == 48);

/// Offsets of every region, computed from the stream's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regions {
    /// Control block.
    pub control: u64,
    /// Channel labels.
    pub meta: u64,
    /// Stamps.
    pub stamps: u64,
    /// Events.
    pub events: u64,
    /// Sample data.
    pub data: u64,
    /// Sample data bytes.
    pub data_bytes: u64,
    /// File size.
    pub file_bytes: u64,
}

fn page_up(x: u64, page: u64) -> Option<u64> {
    Some(x.checked_add(page - 1)? / page * page)
}

/// Lay out a stream; `None` if any size overflows.
#[must_use]
pub fn regions(
    n_channels: u64,
    sample_bytes: u64,
    capacity: u64,
    event_capacity: u64,
    page: u64,
) -> Option<Regions> {
    let control = HEADER_BYTES as u64;
    let meta = page_up(control + size_of::<ControlBlock>() as u64, page)?;
    let stamps = page_up(
        meta.checked_add(n_channels.checked_mul(size_of::<ChannelLabel>() as u64)?)?,
        page,
    )?;
    let events = page_up(stamps.checked_add(capacity.checked_mul(8)?)?, page)?;
    let data = page_up(
        events.checked_add(event_capacity.checked_mul(EVENT_SLOT_BYTES as u64)?)?,
        page,
    )?;
    let data_bytes = capacity.checked_mul(sample_bytes)?;
    let file_bytes = data.checked_add(data_bytes)?;
    // the double mapping needs twice the data in address space
    file_bytes.checked_add(data_bytes)?.checked_add(page)?;
    if data_bytes % page != 0 {
        return None;
    }
    Some(Regions {
        control,
        meta,
        stamps,
        events,
        data,
        data_bytes,
        file_bytes,
    })
}

/// Why a header was refused by [`parse_header`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// A stream of another layout version.
    Version {
        /// The version in the file.
        found: u32,
    },
    /// Not a stream (or a damaged one): the reason.
    Invalid(String),
}

/// What [`parse_header`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedHeader {
    /// Sample dtype.
    pub dtype: crate::DType,
    /// Channels per sample.
    pub n_channels: u64,
    /// Bytes per sample.
    pub sample_bytes: u64,
    /// Samples kept.
    pub capacity: u64,
    /// Events kept.
    pub event_capacity: u64,
    /// Region offsets, consistent with the shape and the file length.
    pub regions: Regions,
}

/// Parse and check a stream header read from a file of `file_len` bytes: I/O-free, so it
/// can be fuzzed. Every field later code relies on (shape, offsets, sizes) is checked
/// against the others and against the file length; anything else is refused with a reason.
pub fn parse_header(head: &[u8], file_len: u64, page: u64) -> Result<ParsedHeader, HeaderError> {
    let invalid = |r: String| Err(HeaderError::Invalid(r));
    if head.len() < HEADER_BYTES || file_len < HEADER_BYTES as u64 {
        return invalid(format!(
            "it is {} bytes, smaller than a stream header ({HEADER_BYTES} B)",
            file_len.min(head.len() as u64)
        ));
    }
    if head[..8] != MAGIC {
        return invalid(format!(
            "its first bytes are {:02x?}, not the stream magic {MAGIC:02x?}",
            &head[..8]
        ));
    }
    let u32_at = |o: usize| u32::from_ne_bytes([head[o], head[o + 1], head[o + 2], head[o + 3]]);
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[o..o + 8]);
        u64::from_ne_bytes(b)
    };
    let version = u32_at(offset_of!(Header, layout_version));
    if version != LAYOUT_VERSION {
        return Err(HeaderError::Version { found: version });
    }
    let code = u32_at(offset_of!(Header, dtype));
    let Some(dtype) = crate::DType::from_code(code) else {
        return invalid(format!("unknown dtype code {code}"));
    };
    let n_channels = u64::from(u32_at(offset_of!(Header, n_channels)));
    let sample_bytes = u64_at(offset_of!(Header, sample_bytes));
    let capacity = u64_at(offset_of!(Header, capacity));
    let event_capacity = u64_at(offset_of!(Header, event_capacity));
    if n_channels == 0
        || n_channels > MAX_CHANNELS
        || sample_bytes != n_channels * dtype.itemsize() as u64
        || capacity == 0
        || event_capacity == 0
        || u64_at(offset_of!(Header, event_slot_bytes)) != EVENT_SLOT_BYTES as u64
        || u32_at(offset_of!(Header, name_len)) as usize > NAME_MAX
        || u64::from(u32_at(offset_of!(Header, types_len)))
            + u64::from(u32_at(offset_of!(Header, desc_len)))
            > META_TEXT_MAX as u64
    {
        return invalid("its header describes an impossible shape".into());
    }
    let Some(regions) = regions(n_channels, sample_bytes, capacity, event_capacity, page) else {
        return invalid("its header describes sizes that overflow".into());
    };
    let stored = [
        u64_at(offset_of!(Header, control_offset)),
        u64_at(offset_of!(Header, meta_offset)),
        u64_at(offset_of!(Header, stamps_offset)),
        u64_at(offset_of!(Header, events_offset)),
        u64_at(offset_of!(Header, data_offset)),
        u64_at(offset_of!(Header, data_bytes)),
        u64_at(offset_of!(Header, file_bytes)),
    ];
    let expect = [
        regions.control,
        regions.meta,
        regions.stamps,
        regions.events,
        regions.data,
        regions.data_bytes,
        regions.file_bytes,
    ];
    if stored != expect {
        return invalid("its region offsets do not match its shape".into());
    }
    if file_len < regions.file_bytes {
        return invalid(format!(
            "it is {file_len} bytes, its header says {}",
            regions.file_bytes
        ));
    }
    Ok(ParsedHeader {
        dtype,
        n_channels,
        sample_bytes,
        capacity,
        event_capacity,
        regions,
    })
}

/// A valid stream name made from any text (an LSL name, a recorded series): characters a
/// stream name may not hold become `_`, an empty name or one starting with `.` gets
/// `prefix` before it, and it is cut to [`NAME_MAX`] bytes.
#[must_use]
pub fn sanitize_name(text: &str, prefix: &str) -> String {
    let mut s: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_-.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        s = format!("{prefix}{s}");
    }
    s.truncate(NAME_MAX);
    s
}

/// Check a stream name: 1..=[`NAME_MAX`] of `A-Za-z0-9_-.`, not starting with `.`.
pub fn validate_name(name: &str) -> Result<(), crate::NameError> {
    let err = |reason| {
        Err(crate::NameError {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return err("it is empty");
    }
    if name.len() > NAME_MAX {
        return err("it is too long");
    }
    if name.contains('/') {
        return err("it contains '/'");
    }
    if name.starts_with('.') {
        return err("it starts with '.'");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
    {
        return err("it contains a character that is not allowed");
    }
    Ok(())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A header as `Stream::create` writes it, for the parser tests.
    fn valid_header(n_channels: u32, capacity: u64) -> (Vec<u8>, u64) {
        let sb = u64::from(n_channels) * 4;
        let r = regions(u64::from(n_channels), sb, capacity, 16, 4096).unwrap();
        let mut h = vec![0u8; HEADER_BYTES];
        let mut put = |o: usize, b: &[u8]| h[o..o + b.len()].copy_from_slice(b);
        put(0, &MAGIC);
        put(
            offset_of!(Header, layout_version),
            &LAYOUT_VERSION.to_ne_bytes(),
        );
        put(
            offset_of!(Header, dtype),
            &crate::DType::F32.code().to_ne_bytes(),
        );
        put(offset_of!(Header, n_channels), &n_channels.to_ne_bytes());
        put(offset_of!(Header, sample_bytes), &sb.to_ne_bytes());
        put(offset_of!(Header, capacity), &capacity.to_ne_bytes());
        put(offset_of!(Header, event_capacity), &16u64.to_ne_bytes());
        put(
            offset_of!(Header, event_slot_bytes),
            &(EVENT_SLOT_BYTES as u64).to_ne_bytes(),
        );
        put(offset_of!(Header, control_offset), &r.control.to_ne_bytes());
        put(offset_of!(Header, meta_offset), &r.meta.to_ne_bytes());
        put(offset_of!(Header, stamps_offset), &r.stamps.to_ne_bytes());
        put(offset_of!(Header, events_offset), &r.events.to_ne_bytes());
        put(offset_of!(Header, data_offset), &r.data.to_ne_bytes());
        put(offset_of!(Header, data_bytes), &r.data_bytes.to_ne_bytes());
        put(offset_of!(Header, file_bytes), &r.file_bytes.to_ne_bytes());
        (h, r.file_bytes)
    }

    #[test]
    fn a_valid_header_parses_and_a_short_file_is_refused() {
        let (h, len) = valid_header(8, 1024);
        let p = parse_header(&h, len, 4096).unwrap();
        assert_eq!((p.n_channels, p.capacity, p.sample_bytes), (8, 1024, 32));
        let e = parse_header(&h, len - 1, 4096).unwrap_err();
        assert!(
            matches!(&e, HeaderError::Invalid(r) if r.contains("its header says")),
            "{e:?}"
        );
        // a file of the previous layout (one-word claims came with version 2) is refused
        let mut v1 = h.clone();
        v1[8] = 1;
        assert_eq!(
            parse_header(&v1, len, 4096),
            Err(HeaderError::Version { found: 1 })
        );
        // metadata lengths that overrun the header's text area are a damaged header
        let mut long = h.clone();
        long[offset_of!(Header, types_len)..][..4].copy_from_slice(&3000u32.to_ne_bytes());
        long[offset_of!(Header, desc_len)..][..4].copy_from_slice(&777u32.to_ne_bytes());
        assert!(matches!(
            parse_header(&long, len, 4096),
            Err(HeaderError::Invalid(_))
        ));
        long[offset_of!(Header, desc_len)..][..4].copy_from_slice(&776u32.to_ne_bytes());
        assert!(parse_header(&long, len, 4096).is_ok());
    }

    proptest! {
        /// The header parser is the one parser of untrusted bytes here: any input is
        /// answered with a value or a reason, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic_the_header_parser(
            bytes in proptest::collection::vec(any::<u8>(), 0..5000), file_len in any::<u64>()
        ) {
            let _ = parse_header(&bytes, file_len, 4096);
            let mut with_magic = bytes.clone();
            if with_magic.len() >= 8 { with_magic[..8].copy_from_slice(&MAGIC); }
            let _ = parse_header(&with_magic, file_len, 4096);
        }

        /// A damaged valid header either still describes a consistent stream that fits the
        /// file, or is refused.
        #[test]
        fn damaged_headers_are_refused_or_consistent(
            n in 1u32..512, cap in 1u64..100_000, flips in proptest::collection::vec((0usize..HEADER_BYTES, any::<u8>()), 1..8)
        ) {
            let (mut h, len) = valid_header(n, cap.next_multiple_of(1024));
            for (i, b) in flips { h[i] = b; }
            if let Ok(p) = parse_header(&h, len, 4096) {
                prop_assert!(p.regions.file_bytes <= len);
                prop_assert_eq!(p.sample_bytes, p.n_channels * p.dtype.itemsize() as u64);
                prop_assert_eq!(p.regions.data_bytes, p.capacity * p.sample_bytes);
            }
        }
    }

    #[test]
    fn regions_are_page_aligned_and_in_order() {
        let r = regions(384, 768, 30_000, 1024, 4096).unwrap();
        for off in [r.meta, r.stamps, r.events, r.data] {
            assert_eq!(off % 4096, 0);
        }
        assert!(
            r.control < r.meta && r.meta < r.stamps && r.stamps < r.events && r.events < r.data
        );
        assert_eq!(r.data_bytes, 30_000 * 768);
        assert_eq!(r.file_bytes, r.data + r.data_bytes);
    }

    #[test]
    fn regions_refuse_overflowing_or_unaligned_sizes() {
        assert_eq!(regions(1, 8, u64::MAX / 4, 1, 4096), None);
        assert_eq!(
            regions(1, 7, 5, 1, 4096),
            None,
            "data must be a whole number of pages"
        );
    }

    #[test]
    fn names_are_checked_with_the_reason() {
        assert!(validate_name("eeg-1.raw_A").is_ok());
        for (bad, why) in [
            ("", "empty"),
            ("a/b", "'/'"),
            (".hidden", "'.'"),
            ("sp ace", "not allowed"),
            (&"x".repeat(65), "too long"),
        ] {
            let e = validate_name(bad).unwrap_err();
            assert!(e.to_string().contains(why), "{bad:?}: {e}");
            assert!(e.to_string().contains("allowed: 1 to 64"), "{e}");
        }
    }

    #[test]
    fn any_text_sanitizes_to_a_valid_name() {
        assert_eq!(sanitize_name("Rhythm Data/TTL", "p"), "Rhythm_Data_TTL");
        assert_eq!(sanitize_name("imec0.ap", "p"), "imec0.ap");
        assert_eq!(sanitize_name("", "lsl"), "lsl");
        assert_eq!(sanitize_name(".x", "lsl"), "lsl.x");
        for text in ["", ".", "é/ü", &"x".repeat(200), "Record Node 101/exp"] {
            let n = sanitize_name(text, "replay");
            validate_name(&n).unwrap_or_else(|e| panic!("{text:?} -> {n:?}: {e}"));
        }
    }
}
