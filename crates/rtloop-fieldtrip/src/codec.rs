//! Every FieldTrip buffer message, parsed and encoded without I/O.
//!
//! A message is an 8-byte prefix (`version: u16, command: u16, bufsize: u32`) and `bufsize`
//! payload bytes of packed structs. Integers are in the *sender's* byte order: the reference
//! server recognises a foreign-endian client by reading the version as `0x0100`, converts
//! the request to its own order and converts the reply back. We do the same; everything a
//! [`Request`] holds is in native order.
//!
//! Chunks of a header are opaque and pass through byte-exact. The one exception, as in the
//! reference, is the resolutions chunk (type 3), whose float64 values are swapped for a
//! foreign-endian client.

use std::borrow::Cow;

use rtloop_stream::DType;

/// The only protocol version.
pub const VERSION: u16 = 1;
/// Size of the message prefix.
pub const PREFIX_BYTES: usize = 8;
/// Size of `headerdef_t`.
pub const HEADERDEF_BYTES: usize = 24;
/// Size of `datadef_t`.
pub const DATADEF_BYTES: usize = 16;
/// Size of `eventdef_t`.
pub const EVENTDEF_BYTES: usize = 32;
/// Size of `datasel_t` / `eventsel_t`.
pub const SELECTION_BYTES: usize = 8;
/// Size of `waitdef_t`.
pub const WAITDEF_BYTES: usize = 12;

/// Command codes (message.h). Responses are the request's family with a low byte of 4 or 5.
pub mod cmd {
    /// Store a header (resets data and events).
    pub const PUT_HDR: u16 = 0x0101;
    /// Append samples.
    pub const PUT_DAT: u16 = 0x0102;
    /// Append events.
    pub const PUT_EVT: u16 = 0x0103;
    /// A PUT succeeded.
    pub const PUT_OK: u16 = 0x0104;
    /// A PUT failed.
    pub const PUT_ERR: u16 = 0x0105;
    /// Read the header.
    pub const GET_HDR: u16 = 0x0201;
    /// Read samples.
    pub const GET_DAT: u16 = 0x0202;
    /// Read events.
    pub const GET_EVT: u16 = 0x0203;
    /// A GET succeeded.
    pub const GET_OK: u16 = 0x0204;
    /// A GET failed.
    pub const GET_ERR: u16 = 0x0205;
    /// Delete header, samples and events.
    pub const FLUSH_HDR: u16 = 0x0301;
    /// Delete the samples (keeps header and events).
    pub const FLUSH_DAT: u16 = 0x0302;
    /// Delete the events.
    pub const FLUSH_EVT: u16 = 0x0303;
    /// A FLUSH succeeded.
    pub const FLUSH_OK: u16 = 0x0304;
    /// A FLUSH failed.
    pub const FLUSH_ERR: u16 = 0x0305;
    /// Wait for samples or events.
    pub const WAIT_DAT: u16 = 0x0402;
    /// The wait ended (counts follow).
    pub const WAIT_OK: u16 = 0x0404;
    /// The wait could not be done.
    pub const WAIT_ERR: u16 = 0x0405;
    /// PUT_HDR without a reply.
    pub const PUT_HDR_NORESPONSE: u16 = 0x0501;
    /// PUT_DAT without a reply.
    pub const PUT_DAT_NORESPONSE: u16 = 0x0502;
    /// PUT_EVT without a reply.
    pub const PUT_EVT_NORESPONSE: u16 = 0x0503;

    /// Every command code, requests and replies (what front ends export by [`name`]).
    pub const ALL: [u16; 21] = [
        PUT_HDR,
        PUT_DAT,
        PUT_EVT,
        PUT_OK,
        PUT_ERR,
        GET_HDR,
        GET_DAT,
        GET_EVT,
        GET_OK,
        GET_ERR,
        FLUSH_HDR,
        FLUSH_DAT,
        FLUSH_EVT,
        FLUSH_OK,
        FLUSH_ERR,
        WAIT_DAT,
        WAIT_OK,
        WAIT_ERR,
        PUT_HDR_NORESPONSE,
        PUT_DAT_NORESPONSE,
        PUT_EVT_NORESPONSE,
    ];

    /// The name of a command code, for logs and errors.
    #[must_use]
    pub fn name(code: u16) -> &'static str {
        match code {
            PUT_HDR => "PUT_HDR",
            PUT_DAT => "PUT_DAT",
            PUT_EVT => "PUT_EVT",
            PUT_OK => "PUT_OK",
            PUT_ERR => "PUT_ERR",
            GET_HDR => "GET_HDR",
            GET_DAT => "GET_DAT",
            GET_EVT => "GET_EVT",
            GET_OK => "GET_OK",
            GET_ERR => "GET_ERR",
            FLUSH_HDR => "FLUSH_HDR",
            FLUSH_DAT => "FLUSH_DAT",
            FLUSH_EVT => "FLUSH_EVT",
            FLUSH_OK => "FLUSH_OK",
            FLUSH_ERR => "FLUSH_ERR",
            WAIT_DAT => "WAIT_DAT",
            WAIT_OK => "WAIT_OK",
            WAIT_ERR => "WAIT_ERR",
            PUT_HDR_NORESPONSE => "PUT_HDR_NORESPONSE",
            PUT_DAT_NORESPONSE => "PUT_DAT_NORESPONSE",
            PUT_EVT_NORESPONSE => "PUT_EVT_NORESPONSE",
            _ => "unknown",
        }
    }

    /// The error reply of a request's family (PUT_ERR for 0x01xx and 0x05xx, GET_ERR for
    /// 0x02xx, FLUSH_ERR for 0x03xx, WAIT_ERR for 0x04xx); `None` outside those families.
    #[must_use]
    pub fn error_reply(code: u16) -> Option<u16> {
        match code >> 8 {
            0x01 | 0x05 => Some(PUT_ERR),
            0x02 => Some(GET_ERR),
            0x03 => Some(FLUSH_ERR),
            0x04 => Some(WAIT_ERR),
            _ => None,
        }
    }
}

/// Chunk type codes of a header (message.h `FT_CHUNK_*`).
pub mod chunk {
    /// An opaque blob.
    pub const UNSPECIFIED: u32 = 0;
    /// One NUL-terminated name per channel.
    pub const CHANNEL_NAMES: u32 = 1;
    /// A description string, then one byte per channel.
    pub const CHANNEL_FLAGS: u32 = 2;
    /// One float64 per channel (A/D units to physical units).
    pub const RESOLUTIONS: u32 = 3;
    /// NUL-terminated key, value, ..., ending in an empty key.
    pub const ASCII_KEYVAL: u32 = 4;
    /// A NIfTI-1 header (fMRI).
    pub const NIFTI1: u32 = 5;
    /// Siemens protocol text (fMRI).
    pub const SIEMENS_AP: u32 = 6;
    /// A CTF `.res4` file.
    pub const CTF_RES4: u32 = 7;
    /// A Neuromag header (FIF).
    pub const NEUROMAG_HEADER: u32 = 8;
    /// Neuromag digitiser points (FIF).
    pub const NEUROMAG_ISOTRAK: u32 = 9;
    /// Neuromag head-position results (FIF).
    pub const NEUROMAG_HPIRESULT: u32 = 10;

    /// Every chunk type with its name (message.h's without `FT_CHUNK_`).
    pub const ALL: [(&str, u32); 11] = [
        ("UNSPECIFIED", UNSPECIFIED),
        ("CHANNEL_NAMES", CHANNEL_NAMES),
        ("CHANNEL_FLAGS", CHANNEL_FLAGS),
        ("RESOLUTIONS", RESOLUTIONS),
        ("ASCII_KEYVAL", ASCII_KEYVAL),
        ("NIFTI1", NIFTI1),
        ("SIEMENS_AP", SIEMENS_AP),
        ("CTF_RES4", CTF_RES4),
        ("NEUROMAG_HEADER", NEUROMAG_HEADER),
        ("NEUROMAG_ISOTRAK", NEUROMAG_ISOTRAK),
        ("NEUROMAG_HPIRESULT", NEUROMAG_HPIRESULT),
    ];
}

/// Data type codes (message.h `DATATYPE_*`): 0 is `char`, 1..=10 are the sample types.
pub const DATATYPE_CHAR: u32 = 0;
/// The largest valid data type code (float64).
pub const DATATYPE_MAX: u32 = 10;
/// What the type codes are, for error messages.
pub const DATATYPES_ALLOWED: &str = "0 char, 1 uint8, 2 uint16, 3 uint32, 4 uint64, 5 int8, \
     6 int16, 7 int32, 8 int64, 9 float32, 10 float64";

/// Bytes per value of a FieldTrip data type code, `None` for an unknown code.
#[must_use]
pub fn wordsize(code: u32) -> Option<usize> {
    match code {
        0 | 1 | 5 => Some(1),
        2 | 6 => Some(2),
        3 | 7 | 9 => Some(4),
        4 | 8 | 10 => Some(8),
        _ => None,
    }
}

/// The name of a FieldTrip data type code (`"char"`, `"uint8"`, ..., `"float64"`), `None` for
/// an unknown code. The sample types' names are numpy's.
#[must_use]
pub fn datatype_name(code: u32) -> Option<&'static str> {
    if code == DATATYPE_CHAR {
        return Some("char");
    }
    DType::from_code(code).map(DType::name)
}

/// An event's type or value read through its type code: FieldTrip's `char` as text bytes
/// (UTF-8 by convention, but old clients send Latin-1 or binary), or whole values of one
/// sample type. Bytes are in native order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventField<'a> {
    /// `char` (code 0).
    Text(Cow<'a, [u8]>),
    /// Values of a sample type (codes 1..=10).
    Numbers {
        /// Their type.
        dtype: DType,
        /// Their bytes, a whole number of values.
        bytes: Cow<'a, [u8]>,
    },
}

impl<'a> EventField<'a> {
    /// The field that `code` and `bytes` carry; `None` if the code is no FieldTrip type or
    /// the bytes are not whole values of it.
    #[must_use]
    pub fn decode(code: u32, bytes: Cow<'a, [u8]>) -> Option<EventField<'a>> {
        if code == DATATYPE_CHAR {
            return Some(EventField::Text(bytes));
        }
        let dtype = DType::from_code(code)?;
        (bytes.len() % dtype.itemsize() == 0).then_some(EventField::Numbers { dtype, bytes })
    }

    /// The type code and bytes that carry this field on the wire.
    #[must_use]
    pub fn encode(self) -> (u32, Cow<'a, [u8]>) {
        match self {
            EventField::Text(b) => (DATATYPE_CHAR, b),
            EventField::Numbers { dtype, bytes } => (dtype.code(), bytes),
        }
    }
}

/// The byte order of one peer's messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// Little-endian (every x86 and ARM client in practice).
    Little,
    /// Big-endian.
    Big,
}

impl ByteOrder {
    /// This machine's order.
    #[must_use]
    pub const fn native() -> ByteOrder {
        if cfg!(target_endian = "little") {
            ByteOrder::Little
        } else {
            ByteOrder::Big
        }
    }

    /// Whether values must be swapped to or from native order.
    #[must_use]
    pub fn is_foreign(self) -> bool {
        self != ByteOrder::native()
    }

    fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            ByteOrder::Little => u16::from_le_bytes(b),
            ByteOrder::Big => u16::from_be_bytes(b),
        }
    }

    fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            ByteOrder::Little => u32::from_le_bytes(b),
            ByteOrder::Big => u32::from_be_bytes(b),
        }
    }

    fn u16_bytes(self, v: u16) -> [u8; 2] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }

    fn u32_bytes(self, v: u32) -> [u8; 4] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }
}

/// Reverse the bytes of every `word`-sized value in `data` (in place).
pub fn swap_words(data: &mut [u8], word: usize) {
    if word > 1 {
        for w in data.chunks_exact_mut(word) {
            w.reverse();
        }
    }
}

/// `data` in native order: borrowed as is for a native client, swapped per `word` otherwise.
fn to_native(order: ByteOrder, data: &[u8], word: usize) -> Cow<'_, [u8]> {
    if order.is_foreign() && word > 1 {
        let mut v = data.to_vec();
        swap_words(&mut v, word);
        Cow::Owned(v)
    } else {
        Cow::Borrowed(data)
    }
}

/// Append `data` (native order) to `out` in `order`.
pub fn put_words(order: ByteOrder, data: &[u8], word: usize, out: &mut Vec<u8>) {
    let at = out.len();
    out.extend_from_slice(data);
    if order.is_foreign() {
        swap_words(&mut out[at..], word);
    }
}

/// A cursor over a payload in one byte order. Every read is bounds-checked.
struct Rd<'a> {
    b: &'a [u8],
    pos: usize,
    order: ByteOrder,
}

impl<'a> Rd<'a> {
    fn new(b: &'a [u8], order: ByteOrder) -> Self {
        Rd { b, pos: 0, order }
    }
    fn left(&self) -> usize {
        self.b.len() - self.pos
    }
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.b.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(self.order.u32(self.bytes(4)?.try_into().ok()?))
    }
    fn i32(&mut self) -> Option<i32> {
        self.u32().map(|v| v as i32)
    }
    fn f32(&mut self) -> Option<f32> {
        self.u32().map(f32::from_bits)
    }
}

/// Appends fields in one byte order.
struct Wr<'a> {
    out: &'a mut Vec<u8>,
    order: ByteOrder,
}

impl Wr<'_> {
    fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&self.order.u16_bytes(v));
    }
    fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&self.order.u32_bytes(v));
    }
    fn i32(&mut self, v: i32) {
        self.u32(v as u32);
    }
    fn f32(&mut self, v: f32) {
        self.u32(v.to_bits());
    }
}

/// The 8-byte message prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    /// The sender's byte order (recognised from the version field).
    pub order: ByteOrder,
    /// Command code.
    pub command: u16,
    /// Payload bytes that follow.
    pub bufsize: u32,
}

/// A prefix whose version is neither 1 nor 1 byte-swapped. The reference server closes the
/// connection without a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("protocol version bytes {0:02x?} are not version 1 (01 00 little-endian or 00 01 big-endian); closing the connection as the reference server does")]
pub struct BadVersion(pub [u8; 2]);

/// Parse a message prefix.
pub fn parse_prefix(b: &[u8; PREFIX_BYTES]) -> Result<Prefix, BadVersion> {
    let v = [b[0], b[1]];
    let order = if ByteOrder::Little.u16(v) == VERSION {
        ByteOrder::Little
    } else if ByteOrder::Big.u16(v) == VERSION {
        ByteOrder::Big
    } else {
        return Err(BadVersion(v));
    };
    Ok(Prefix {
        order,
        command: order.u16([b[2], b[3]]),
        bufsize: order.u32([b[4], b[5], b[6], b[7]]),
    })
}

/// Append a message prefix.
pub fn put_prefix(order: ByteOrder, command: u16, bufsize: u32, out: &mut Vec<u8>) {
    let mut w = Wr { out, order };
    w.u16(VERSION);
    w.u16(command);
    w.u32(bufsize);
}

/// `headerdef_t`: the stream's shape and counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeaderDef {
    /// Channels.
    pub nchans: u32,
    /// Samples written since the last PUT_HDR or FLUSH_DAT (ignored in PUT_HDR).
    pub nsamples: u32,
    /// Events written since the last PUT_HDR or FLUSH_EVT (ignored in PUT_HDR).
    pub nevents: u32,
    /// Sample rate in Hz.
    pub fsample: f32,
    /// Data type code.
    pub data_type: u32,
    /// Bytes of chunks that follow.
    pub bufsize: u32,
}

/// `datadef_t`: the shape of a block of samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataDef {
    /// Channels.
    pub nchans: u32,
    /// Samples.
    pub nsamples: u32,
    /// Data type code.
    pub data_type: u32,
    /// Bytes of sample data that follow.
    pub bufsize: u32,
}

/// `datasel_t` / `eventsel_t`: `begin..=end`, 0-based (end `u32::MAX` = up to the newest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selection {
    /// First index.
    pub begin: u32,
    /// Last index (inclusive).
    pub end: u32,
}

/// `waitdef_t`: wait until more than `nsamples` samples or more than `nevents` events exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct WaitDef {
    /// Sample threshold (strictly greater).
    pub nsamples: u32,
    /// Event threshold (strictly greater).
    pub nevents: u32,
    /// Milliseconds; 0 = answer at once.
    pub timeout_ms: u32,
}

/// One event: `eventdef_t` and its type and value bytes, in native order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireEvent<'a> {
    /// Type code of `type`.
    pub type_type: u32,
    /// Number of `type` values.
    pub type_numel: u32,
    /// Type code of `value`.
    pub value_type: u32,
    /// Number of `value` values.
    pub value_numel: u32,
    /// Sample index (-1 = the server fills it in).
    pub sample: i32,
    /// Offset in samples.
    pub offset: i32,
    /// Duration in samples.
    pub duration: i32,
    /// The type's bytes (native order).
    pub type_bytes: Cow<'a, [u8]>,
    /// The value's bytes (native order).
    pub value_bytes: Cow<'a, [u8]>,
}

impl<'a> WireEvent<'a> {
    /// A text type and a text value (the usual trigger event).
    #[must_use]
    pub fn text(kind: &str, value: &str, sample: i32) -> WireEvent<'static> {
        WireEvent {
            type_type: DATATYPE_CHAR,
            type_numel: kind.len() as u32,
            value_type: DATATYPE_CHAR,
            value_numel: value.len() as u32,
            sample,
            offset: 0,
            duration: 0,
            type_bytes: Cow::Owned(kind.as_bytes().to_vec()),
            value_bytes: Cow::Owned(value.as_bytes().to_vec()),
        }
    }

    /// An event whose type and value are `(type code, native-order bytes)`; the element
    /// counts follow from the bytes. `None` if a code is not a FieldTrip type or its bytes are
    /// not whole values of it.
    #[must_use]
    pub fn new(
        (type_type, type_bytes): (u32, Cow<'a, [u8]>),
        (value_type, value_bytes): (u32, Cow<'a, [u8]>),
        sample: i32,
        offset: i32,
        duration: i32,
    ) -> Option<WireEvent<'a>> {
        let numel = |code: u32, bytes: &[u8]| {
            let word = wordsize(code)?;
            (bytes.len() % word == 0).then(|| u32::try_from(bytes.len() / word).ok())?
        };
        Some(WireEvent {
            type_type,
            type_numel: numel(type_type, &type_bytes)?,
            value_type,
            value_numel: numel(value_type, &value_bytes)?,
            sample,
            offset,
            duration,
            type_bytes,
            value_bytes,
        })
    }

    /// An event of a type and a value (see [`EventField`]); `None` if a field's bytes are not
    /// whole values of its type.
    #[must_use]
    pub fn from_fields(
        kind: EventField<'a>,
        value: EventField<'a>,
        sample: i32,
        offset: i32,
        duration: i32,
    ) -> Option<WireEvent<'a>> {
        WireEvent::new(kind.encode(), value.encode(), sample, offset, duration)
    }

    /// The event's type, decoded (`None` only if it was built with an unknown type code).
    #[must_use]
    pub fn type_field(&self) -> Option<EventField<'_>> {
        EventField::decode(self.type_type, Cow::Borrowed(&self.type_bytes))
    }

    /// The event's value, decoded (`None` only if it was built with an unknown type code).
    #[must_use]
    pub fn value_field(&self) -> Option<EventField<'_>> {
        EventField::decode(self.value_type, Cow::Borrowed(&self.value_bytes))
    }

    /// An owned copy.
    #[must_use]
    pub fn into_owned(self) -> WireEvent<'static> {
        WireEvent {
            type_bytes: Cow::Owned(self.type_bytes.into_owned()),
            value_bytes: Cow::Owned(self.value_bytes.into_owned()),
            ..self
        }
    }

    /// Bytes this event takes on the wire.
    #[must_use]
    pub fn wire_bytes(&self) -> usize {
        EVENTDEF_BYTES + self.type_bytes.len() + self.value_bytes.len()
    }
}

/// A parsed request, in native order.
#[derive(Clone, Debug, PartialEq)]
pub enum Request<'a> {
    /// PUT_HDR: the header and its chunks (native order, otherwise byte-exact).
    PutHdr {
        /// The header (its `nsamples`/`nevents` are ignored).
        def: HeaderDef,
        /// The chunk bytes.
        chunks: Cow<'a, [u8]>,
    },
    /// PUT_DAT: exactly `nchans × nsamples × wordsize` bytes of samples.
    PutDat {
        /// The block's shape.
        def: DataDef,
        /// The samples, sample-major, native order.
        data: Cow<'a, [u8]>,
    },
    /// PUT_EVT: one or more events.
    PutEvt(Vec<WireEvent<'a>>),
    /// GET_HDR.
    GetHdr,
    /// GET_DAT, with or without a selection.
    GetDat(Option<Selection>),
    /// GET_EVT, with or without a selection.
    GetEvt(Option<Selection>),
    /// FLUSH_HDR.
    FlushHdr,
    /// FLUSH_DAT.
    FlushDat,
    /// FLUSH_EVT.
    FlushEvt,
    /// WAIT_DAT.
    WaitDat(WaitDef),
}

impl Request<'_> {
    /// The command code of this request (`respond = false`: the NORESPONSE variant of a PUT;
    /// ignored for other requests).
    #[must_use]
    pub fn command(&self, respond: bool) -> u16 {
        let (command, put) = match self {
            Request::PutHdr { .. } => (cmd::PUT_HDR, true),
            Request::PutDat { .. } => (cmd::PUT_DAT, true),
            Request::PutEvt(_) => (cmd::PUT_EVT, true),
            Request::GetHdr => (cmd::GET_HDR, false),
            Request::GetDat(_) => (cmd::GET_DAT, false),
            Request::GetEvt(_) => (cmd::GET_EVT, false),
            Request::FlushHdr => (cmd::FLUSH_HDR, false),
            Request::FlushDat => (cmd::FLUSH_DAT, false),
            Request::FlushEvt => (cmd::FLUSH_EVT, false),
            Request::WaitDat(_) => (cmd::WAIT_DAT, false),
        };
        if put && !respond {
            command + 0x0400
        } else {
            command
        }
    }
}

/// Why a request was refused by the codec. The server answers the family's error reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The command code is none of the protocol's.
    #[error("unknown command 0x{0:04x}; requests are PUT_HDR/DAT/EVT (0x0101-0x0103), GET_HDR/DAT/EVT (0x0201-0x0203), FLUSH_HDR/DAT/EVT (0x0301-0x0303), WAIT_DAT (0x0402) and PUT_*_NORESPONSE (0x0501-0x0503)")]
    UnknownCommand(u16),
    /// The payload is shorter than the request's fixed part.
    #[error("{command}: payload of {got} bytes is shorter than the {need} bytes of its {what}")]
    Short {
        /// Request name.
        command: &'static str,
        /// What was expected.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes sent.
        got: usize,
    },
    /// A length field disagrees with the payload.
    #[error("{command}: {detail}")]
    Inconsistent {
        /// Request name.
        command: &'static str,
        /// What disagrees.
        detail: String,
    },
    /// A type code is not one of FieldTrip's.
    #[error(
        "{command}: data type code {code} is not a FieldTrip type; allowed: {DATATYPES_ALLOWED}"
    )]
    BadType {
        /// Request name.
        command: &'static str,
        /// The code.
        code: u32,
    },
}

/// A parsed request and whether the sender expects a reply (the NORESPONSE variants do not).
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed<'a> {
    /// The request.
    pub request: Request<'a>,
    /// False for PUT_*_NORESPONSE.
    pub respond: bool,
}

fn short(command: &'static str, what: &'static str, need: usize, got: usize) -> RequestError {
    RequestError::Short {
        command,
        what,
        need,
        got,
    }
}

fn parse_headerdef(rd: &mut Rd<'_>) -> Option<HeaderDef> {
    Some(HeaderDef {
        nchans: rd.u32()?,
        nsamples: rd.u32()?,
        nevents: rd.u32()?,
        fsample: rd.f32()?,
        data_type: rd.u32()?,
        bufsize: rd.u32()?,
    })
}

fn parse_datadef(rd: &mut Rd<'_>) -> Option<DataDef> {
    Some(DataDef {
        nchans: rd.u32()?,
        nsamples: rd.u32()?,
        data_type: rd.u32()?,
        bufsize: rd.u32()?,
    })
}

/// Parse a request payload. `prefix.order` says how to read it.
pub fn parse_request<'a>(prefix: &Prefix, payload: &'a [u8]) -> Result<Parsed<'a>, RequestError> {
    let order = prefix.order;
    let respond = !matches!(
        prefix.command,
        cmd::PUT_HDR_NORESPONSE | cmd::PUT_DAT_NORESPONSE | cmd::PUT_EVT_NORESPONSE
    );
    let request = match prefix.command {
        cmd::PUT_HDR | cmd::PUT_HDR_NORESPONSE => {
            let (def, chunks) = parse_header_payload(order, payload, "PUT_HDR")?;
            Request::PutHdr { def, chunks }
        }
        cmd::PUT_DAT | cmd::PUT_DAT_NORESPONSE => {
            let (def, data) = parse_data_payload(order, payload, "PUT_DAT")?;
            Request::PutDat { def, data }
        }
        cmd::PUT_EVT | cmd::PUT_EVT_NORESPONSE => {
            Request::PutEvt(parse_events(order, payload, "PUT_EVT")?)
        }
        cmd::GET_HDR => Request::GetHdr,
        cmd::GET_DAT => Request::GetDat(parse_selection(order, payload, "GET_DAT")?),
        cmd::GET_EVT => Request::GetEvt(parse_selection(order, payload, "GET_EVT")?),
        cmd::FLUSH_HDR => Request::FlushHdr,
        cmd::FLUSH_DAT => Request::FlushDat,
        cmd::FLUSH_EVT => Request::FlushEvt,
        cmd::WAIT_DAT => {
            if payload.len() != WAITDEF_BYTES {
                return Err(RequestError::Inconsistent {
                    command: "WAIT_DAT",
                    detail: format!(
                        "payload must be exactly the {WAITDEF_BYTES}-byte waitdef (nsamples, nevents, timeout_ms), got {} bytes",
                        payload.len()
                    ),
                });
            }
            let mut rd = Rd::new(payload, order);
            Request::WaitDat(WaitDef {
                nsamples: rd.u32().expect("12 bytes"),
                nevents: rd.u32().expect("12 bytes"),
                timeout_ms: rd.u32().expect("12 bytes"),
            })
        }
        other => return Err(RequestError::UnknownCommand(other)),
    };
    Ok(Parsed { request, respond })
}

fn parse_selection(
    order: ByteOrder,
    payload: &[u8],
    command: &'static str,
) -> Result<Option<Selection>, RequestError> {
    if payload.is_empty() {
        return Ok(None);
    }
    let mut rd = Rd::new(payload, order);
    match (rd.u32(), rd.u32()) {
        (Some(begin), Some(end)) => Ok(Some(Selection { begin, end })),
        _ => Err(short(
            command,
            "selection (begin, end)",
            SELECTION_BYTES,
            payload.len(),
        )),
    }
}

/// Parse a headerdef and its chunks (PUT_HDR request or GET_HDR reply). The chunks come back
/// in native order.
pub fn parse_header_payload<'a>(
    order: ByteOrder,
    payload: &'a [u8],
    command: &'static str,
) -> Result<(HeaderDef, Cow<'a, [u8]>), RequestError> {
    let mut rd = Rd::new(payload, order);
    let def = parse_headerdef(&mut rd)
        .ok_or_else(|| short(command, "headerdef", HEADERDEF_BYTES, payload.len()))?;
    let chunks = rd
        .bytes(def.bufsize as usize)
        .ok_or_else(|| RequestError::Inconsistent {
            command,
            detail: format!(
                "headerdef says {} bytes of chunks follow but only {} do",
                def.bufsize,
                rd.left()
            ),
        })?;
    let chunks = chunks_to_native(order, chunks)
        .map_err(|detail| RequestError::Inconsistent { command, detail })?;
    Ok((def, chunks))
}

/// Parse a datadef and its samples (PUT_DAT request or GET_DAT reply). The samples come back
/// in native order, exactly `nchans × nsamples × wordsize` bytes (extra bytes are ignored,
/// as the reference does).
pub fn parse_data_payload<'a>(
    order: ByteOrder,
    payload: &'a [u8],
    command: &'static str,
) -> Result<(DataDef, Cow<'a, [u8]>), RequestError> {
    let def = parse_datadef_head(order, payload, command)?;
    let samples = &payload[DATADEF_BYTES..];
    let need = check_datadef(&def, samples.len(), command)?;
    let word = wordsize(def.data_type).unwrap_or(1);
    Ok((def, to_native(order, &samples[..need], word)))
}

/// Parse only the datadef at the start of a PUT_DAT request or GET_DAT reply (a client
/// reads the samples after it straight into its own memory; [`check_datadef`] them first).
pub fn parse_datadef_head(
    order: ByteOrder,
    payload: &[u8],
    command: &'static str,
) -> Result<DataDef, RequestError> {
    parse_datadef(&mut Rd::new(payload, order))
        .ok_or_else(|| short(command, "datadef", DATADEF_BYTES, payload.len()))
}

/// Check a datadef followed by `left` payload bytes; returns the bytes of its samples
/// (`nchans × nsamples × wordsize`, at most `bufsize`, which is at most `left`).
pub fn check_datadef(
    def: &DataDef,
    left: usize,
    command: &'static str,
) -> Result<usize, RequestError> {
    let word = wordsize(def.data_type).ok_or(RequestError::BadType {
        command,
        code: def.data_type,
    })?;
    if def.bufsize as usize > left {
        return Err(RequestError::Inconsistent {
            command,
            detail: format!(
                "datadef says {} bytes of samples follow but only {left} do",
                def.bufsize
            ),
        });
    }
    // u128: nchans x nsamples x 8 overflows u64 (found by the fuzzer)
    let need = u128::from(def.nchans) * u128::from(def.nsamples) * word as u128;
    if need > u128::from(def.bufsize) {
        return Err(RequestError::Inconsistent {
            command,
            detail: format!(
                "{} channels x {} samples x {word} bytes = {need} bytes, but datadef.bufsize is {}",
                def.nchans, def.nsamples, def.bufsize
            ),
        });
    }
    Ok(need as usize)
}

/// Parse concatenated events (PUT_EVT request or GET_EVT reply), into native order.
pub fn parse_events<'a>(
    order: ByteOrder,
    payload: &'a [u8],
    command: &'static str,
) -> Result<Vec<WireEvent<'a>>, RequestError> {
    let mut rd = Rd::new(payload, order);
    let mut out = Vec::new();
    while rd.left() > 0 {
        let i = out.len();
        let at = rd.pos;
        let fields = (|| {
            Some((
                rd.u32()?,
                rd.u32()?,
                rd.u32()?,
                rd.u32()?,
                rd.i32()?,
                rd.i32()?,
                rd.i32()?,
                rd.u32()?,
            ))
        })();
        let Some((tt, tn, vt, vn, sample, offset, duration, bufsize)) = fields else {
            return Err(RequestError::Inconsistent {
                command,
                detail: format!(
                    "event {i} at byte {at}: only {} bytes left, an eventdef needs {EVENTDEF_BYTES}",
                    payload.len() - at
                ),
            });
        };
        let tw = wordsize(tt).ok_or(RequestError::BadType { command, code: tt })?;
        let vw = wordsize(vt).ok_or(RequestError::BadType { command, code: vt })?;
        let tbytes = u64::from(tn) * tw as u64;
        let vbytes = u64::from(vn) * vw as u64;
        if tbytes + vbytes > u64::from(bufsize) {
            return Err(RequestError::Inconsistent {
                command,
                detail: format!(
                    "event {i}: type ({tn} x {tw} B) + value ({vn} x {vw} B) = {} bytes, more than its bufsize {bufsize}",
                    tbytes + vbytes
                ),
            });
        }
        let Some(body) = rd.bytes(bufsize as usize) else {
            return Err(RequestError::Inconsistent {
                command,
                detail: format!(
                    "event {i}: bufsize {bufsize} runs past the end of the payload ({} bytes left)",
                    rd.left()
                ),
            });
        };
        let (t, rest) = body.split_at(tbytes as usize);
        let v = &rest[..vbytes as usize];
        out.push(WireEvent {
            type_type: tt,
            type_numel: tn,
            value_type: vt,
            value_numel: vn,
            sample,
            offset,
            duration,
            type_bytes: to_native(order, t, tw),
            value_bytes: to_native(order, v, vw),
        });
    }
    Ok(out)
}

/// Walk a chunk list; `f(type, data_range)` for each. Errors name the bad chunk.
fn walk_chunks(
    order: ByteOrder,
    bytes: &[u8],
    mut f: impl FnMut(u32, std::ops::Range<usize>),
) -> Result<(), String> {
    let mut rd = Rd::new(bytes, order);
    let mut i = 0;
    while rd.left() > 0 {
        let at = rd.pos;
        let (Some(ty), Some(size)) = (rd.u32(), rd.u32()) else {
            return Err(format!(
                "chunk {i} at byte {at}: {} bytes left, a chunk header needs 8",
                bytes.len() - at
            ));
        };
        let start = rd.pos;
        if rd.bytes(size as usize).is_none() {
            return Err(format!(
                "chunk {i} (type {ty}) says {size} bytes but only {} are left",
                bytes.len() - start
            ));
        }
        f(ty, start..start + size as usize);
        i += 1;
    }
    Ok(())
}

/// Chunks (type, data) in native order.
pub fn chunk_list(chunks: &[u8]) -> Vec<(u32, &[u8])> {
    let mut v = Vec::new();
    let _ = walk_chunks(ByteOrder::native(), chunks, |ty, r| {
        v.push((ty, &chunks[r]))
    });
    v
}

/// A chunk list in `order` converted to native order. Native lists are kept byte-exact (even
/// malformed ones: chunks are opaque to the server); foreign ones must be well formed.
fn chunks_to_native(order: ByteOrder, bytes: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    if !order.is_foreign() {
        return Ok(Cow::Borrowed(bytes));
    }
    let mut out = Vec::with_capacity(bytes.len());
    walk_chunks(order, bytes, |ty, r| {
        let mut w = Wr {
            out: &mut out,
            order: ByteOrder::native(),
        };
        w.u32(ty);
        w.u32(r.len() as u32);
        let word = if ty == chunk::RESOLUTIONS { 8 } else { 1 };
        put_words(order, &bytes[r], word, &mut out);
    })?;
    Ok(Cow::Owned(out))
}

/// Append native-order chunks in `order` (resolutions swapped for a foreign client).
pub fn put_chunks(order: ByteOrder, chunks: &[u8], out: &mut Vec<u8>) {
    if !order.is_foreign() {
        out.extend_from_slice(chunks);
        return;
    }
    let at = out.len();
    let ok = walk_chunks(ByteOrder::native(), chunks, |ty, r| {
        let mut w = Wr { out, order };
        w.u32(ty);
        w.u32(r.len() as u32);
        let word = if ty == chunk::RESOLUTIONS { 8 } else { 1 };
        put_words(order, &chunks[r], word, out);
    });
    if ok.is_err() {
        // a malformed native list (opaque): send it as stored
        out.truncate(at);
        out.extend_from_slice(chunks);
    }
}

/// Append one chunk (native order) to a chunk list.
pub fn push_chunk(chunks: &mut Vec<u8>, ty: u32, data: &[u8]) {
    chunks.extend_from_slice(&ty.to_ne_bytes());
    chunks.extend_from_slice(&(data.len() as u32).to_ne_bytes());
    chunks.extend_from_slice(data);
}

/// Channel names from a CHANNEL_NAMES chunk, if there is one with exactly `nchans` names.
#[must_use]
pub fn channel_names(chunks: &[u8], nchans: usize) -> Option<Vec<String>> {
    let (_, data) = chunk_list(chunks)
        .into_iter()
        .find(|(ty, _)| *ty == chunk::CHANNEL_NAMES)?;
    let data = data.strip_suffix(&[0]).unwrap_or(data);
    let names: Vec<String> = data
        .split(|b| *b == 0)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    (names.len() == nchans).then_some(names)
}

/// The labels a reader shows for a header: the CHANNEL_NAMES chunk's NUL-separated names,
/// at most `nchans` of them (fewer if the chunk names fewer), empty without the chunk. More
/// lenient than [`channel_names`]: a client shows what the writer sent.
#[must_use]
pub fn channel_labels(chunks: &[u8], nchans: usize) -> Vec<String> {
    chunk_list(chunks)
        .into_iter()
        .find(|(ty, _)| *ty == chunk::CHANNEL_NAMES)
        .map(|(_, data)| {
            data.split(|b| *b == 0)
                .take(nchans)
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A CHANNEL_NAMES chunk's data for `names`.
#[must_use]
pub fn channel_names_chunk(names: &[String]) -> Vec<u8> {
    let mut v = Vec::new();
    for n in names {
        v.extend_from_slice(n.as_bytes());
        v.push(0);
    }
    v
}

/// Append a headerdef.
pub fn put_headerdef(order: ByteOrder, d: &HeaderDef, out: &mut Vec<u8>) {
    let mut w = Wr { out, order };
    w.u32(d.nchans);
    w.u32(d.nsamples);
    w.u32(d.nevents);
    w.f32(d.fsample);
    w.u32(d.data_type);
    w.u32(d.bufsize);
}

/// Append a datadef.
pub fn put_datadef(order: ByteOrder, d: &DataDef, out: &mut Vec<u8>) {
    let mut w = Wr { out, order };
    w.u32(d.nchans);
    w.u32(d.nsamples);
    w.u32(d.data_type);
    w.u32(d.bufsize);
}

/// Append the head of a GET_DAT reply: the GET_OK prefix announcing the data definition
/// and `d.bufsize` bytes of samples, then the data definition. The samples follow it.
pub fn put_data_reply_head(order: ByteOrder, d: &DataDef, out: &mut Vec<u8>) {
    put_prefix(
        order,
        cmd::GET_OK,
        (DATADEF_BYTES as u32).saturating_add(d.bufsize),
        out,
    );
    put_datadef(order, d, out);
}

/// Append one event (eventdef, type bytes, value bytes; no slack).
pub fn put_event(order: ByteOrder, e: &WireEvent<'_>, out: &mut Vec<u8>) {
    let mut w = Wr { out, order };
    w.u32(e.type_type);
    w.u32(e.type_numel);
    w.u32(e.value_type);
    w.u32(e.value_numel);
    w.i32(e.sample);
    w.i32(e.offset);
    w.i32(e.duration);
    w.u32((e.type_bytes.len() + e.value_bytes.len()) as u32);
    put_words(
        order,
        &e.type_bytes,
        wordsize(e.type_type).unwrap_or(1),
        out,
    );
    put_words(
        order,
        &e.value_bytes,
        wordsize(e.value_type).unwrap_or(1),
        out,
    );
}

/// Append a selection.
pub fn put_selection(order: ByteOrder, s: &Selection, out: &mut Vec<u8>) {
    let mut w = Wr { out, order };
    w.u32(s.begin);
    w.u32(s.end);
}

/// Append a whole request message (prefix and payload) in `order`. `respond = false` sends
/// the NORESPONSE variant of a PUT (ignored for other requests).
pub fn encode_request(order: ByteOrder, req: &Request<'_>, respond: bool, out: &mut Vec<u8>) {
    let start = out.len();
    put_prefix(order, req.command(respond), 0, out);
    let body = out.len();
    match req {
        Request::PutHdr { def, chunks } => {
            let def = HeaderDef {
                bufsize: chunks.len() as u32,
                ..*def
            };
            put_headerdef(order, &def, out);
            put_chunks(order, chunks, out);
        }
        Request::PutDat { def, data } => {
            let def = DataDef {
                bufsize: data.len() as u32,
                ..*def
            };
            put_datadef(order, &def, out);
            put_words(order, data, wordsize(def.data_type).unwrap_or(1), out);
        }
        Request::PutEvt(evs) => {
            for e in evs {
                put_event(order, e, out);
            }
        }
        Request::GetDat(Some(s)) | Request::GetEvt(Some(s)) => put_selection(order, s, out),
        Request::WaitDat(w) => {
            let mut wr = Wr { out, order };
            wr.u32(w.nsamples);
            wr.u32(w.nevents);
            wr.u32(w.timeout_ms);
        }
        Request::GetHdr
        | Request::GetDat(None)
        | Request::GetEvt(None)
        | Request::FlushHdr
        | Request::FlushDat
        | Request::FlushEvt => {}
    }
    let n = out.len() - body;
    set_bufsize(order, &mut out[start..], n);
}

/// Patch the bufsize of the message starting at `msg[0]`.
pub fn set_bufsize(order: ByteOrder, msg: &mut [u8], bufsize: usize) {
    msg[4..8].copy_from_slice(&order.u32_bytes(bufsize as u32));
}

/// Append a reply carrying only a command (PUT_OK, GET_ERR, ...).
pub fn put_status(order: ByteOrder, command: u16, out: &mut Vec<u8>) {
    put_prefix(order, command, 0, out);
}

/// Append a WAIT_OK reply.
pub fn put_wait_ok(order: ByteOrder, nsamples: u32, nevents: u32, out: &mut Vec<u8>) {
    put_prefix(order, cmd::WAIT_OK, 8, out);
    let mut w = Wr { out, order };
    w.u32(nsamples);
    w.u32(nevents);
}

/// Parse a WAIT_OK reply's payload: (nsamples, nevents).
pub fn parse_samples_events(order: ByteOrder, payload: &[u8]) -> Result<(u32, u32), RequestError> {
    let mut rd = Rd::new(payload, order);
    match (rd.u32(), rd.u32()) {
        (Some(s), Some(e)) => Ok((s, e)),
        _ => Err(short("WAIT_OK", "samples_events", 8, payload.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn msg(order: ByteOrder, req: &Request<'_>, respond: bool) -> Vec<u8> {
        let mut out = Vec::new();
        encode_request(order, req, respond, &mut out);
        out
    }

    fn parse(bytes: &[u8]) -> Result<Parsed<'_>, RequestError> {
        let p = parse_prefix(bytes[..8].try_into().unwrap()).unwrap();
        assert_eq!(p.bufsize as usize, bytes.len() - 8);
        parse_request(&p, &bytes[8..])
    }

    #[test]
    fn golden_get_hdr_and_status_replies() {
        assert_eq!(
            msg(ByteOrder::Little, &Request::GetHdr, true),
            [0x01, 0x00, 0x01, 0x02, 0, 0, 0, 0]
        );
        assert_eq!(
            msg(ByteOrder::Big, &Request::GetHdr, true),
            [0x00, 0x01, 0x02, 0x01, 0, 0, 0, 0]
        );
        let mut out = Vec::new();
        put_status(ByteOrder::Little, cmd::GET_ERR, &mut out);
        assert_eq!(out, [0x01, 0x00, 0x05, 0x02, 0, 0, 0, 0]);
        let mut out = Vec::new();
        put_wait_ok(ByteOrder::Little, 20, 3, &mut out);
        assert_eq!(out, [1, 0, 4, 4, 8, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0]);
    }

    #[test]
    fn golden_get_dat_reply_head() {
        let def = DataDef {
            nchans: 2,
            nsamples: 3,
            data_type: 9, // FLOAT32
            bufsize: 24,
        };
        let mut out = Vec::new();
        put_data_reply_head(ByteOrder::Little, &def, &mut out);
        // version 1, GET_OK (0x0204), bufsize 16 + 24 = 40; then the data definition
        assert_eq!(
            out,
            [1, 0, 4, 2, 40, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 9, 0, 0, 0, 24, 0, 0, 0]
        );
        let mut out = Vec::new();
        put_data_reply_head(ByteOrder::Big, &def, &mut out);
        assert_eq!(
            out,
            [0, 1, 2, 4, 0, 0, 0, 40, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 9, 0, 0, 0, 24]
        );
    }

    #[test]
    fn golden_put_dat_bytes() {
        let data: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let req = Request::PutDat {
            def: DataDef {
                nchans: 2,
                nsamples: 1,
                data_type: 9,
                bufsize: 8,
            },
            data: Cow::Borrowed(&data),
        };
        let m = msg(ByteOrder::Little, &req, true);
        let want: Vec<u8> = [
            &[1u8, 0, 2, 1, 24, 0, 0, 0][..],
            &[2, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0, 8, 0, 0, 0],
            &[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40],
        ]
        .concat();
        assert_eq!(m, want);
        // big-endian: every field and every float swapped
        let m = msg(ByteOrder::Big, &req, false);
        let want: Vec<u8> = [
            &[0u8, 1, 5, 2, 0, 0, 0, 24][..],
            &[0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0, 8],
            &[0x3f, 0x80, 0, 0, 0x40, 0, 0, 0],
        ]
        .concat();
        assert_eq!(m, want);
        let p = parse(&m).unwrap();
        assert!(!p.respond);
        assert_eq!(p.request, req);
    }

    #[test]
    fn golden_event_bytes() {
        let e = WireEvent::text("trigger", "go", 5);
        let m = msg(ByteOrder::Little, &Request::PutEvt(vec![e.clone()]), true);
        let mut want = vec![1u8, 0, 3, 1, 41, 0, 0, 0];
        for v in [0u32, 7, 0, 2, 5, 0, 0, 9] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        want.extend_from_slice(b"triggergo");
        assert_eq!(m, want);
        assert_eq!(parse(&m).unwrap().request, Request::PutEvt(vec![e]));
    }

    #[test]
    fn labels_are_the_names_chunk_split_at_nul_at_most_one_per_channel() {
        let mut chunks = Vec::new();
        push_chunk(&mut chunks, chunk::RESOLUTIONS, &[0; 8]);
        push_chunk(&mut chunks, chunk::CHANNEL_NAMES, b"Fz\0Cz\0Pz\0");
        assert_eq!(channel_labels(&chunks, 2), ["Fz", "Cz"]);
        assert_eq!(channel_labels(&chunks, 3), ["Fz", "Cz", "Pz"]);
        // a chunk naming fewer: what it names (and the empty rest after the last NUL)
        assert_eq!(channel_labels(&chunks, 5), ["Fz", "Cz", "Pz", ""]);
        assert!(
            channel_labels(&chunks[..16], 2).is_empty(),
            "no names chunk"
        );
        let mut latin = Vec::new();
        push_chunk(&mut latin, chunk::CHANNEL_NAMES, b"F\xfcz\0");
        assert_eq!(channel_labels(&latin, 1), ["F\u{fffd}z"]);
    }

    #[test]
    fn every_code_has_one_name() {
        let mut seen = std::collections::BTreeSet::new();
        for c in cmd::ALL {
            assert_ne!(cmd::name(c), "unknown", "0x{c:04x}");
            assert!(seen.insert(cmd::name(c)), "{} twice", cmd::name(c));
        }
        assert_eq!(cmd::PUT_EVT_NORESPONSE, 0x0503);
        for (i, (name, code)) in chunk::ALL.iter().enumerate() {
            assert_eq!(*code as usize, i, "{name}");
        }
        // message.h's table: 0 char, then uint8..uint64, int8..int64, float32, float64
        let names: Vec<_> = (0..=DATATYPE_MAX + 1).map(datatype_name).collect();
        assert_eq!(
            names,
            [
                Some("char"),
                Some("uint8"),
                Some("uint16"),
                Some("uint32"),
                Some("uint64"),
                Some("int8"),
                Some("int16"),
                Some("int32"),
                Some("int64"),
                Some("float32"),
                Some("float64"),
                None
            ]
        );
    }

    #[test]
    fn event_fields_encode_and_decode() {
        let text = EventField::Text(Cow::Borrowed(b"\xe9t\xe9"));
        let nums = EventField::Numbers {
            dtype: DType::U16,
            bytes: Cow::Owned([1u16, 2, 3].iter().flat_map(|v| v.to_ne_bytes()).collect()),
        };
        let e = WireEvent::from_fields(text.clone(), nums.clone(), 7, -1, 2).unwrap();
        assert_eq!((e.type_type, e.type_numel), (DATATYPE_CHAR, 3));
        assert_eq!((e.value_type, e.value_numel), (2, 3));
        // through the wire in both byte orders and back to the same fields
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let m = msg(order, &Request::PutEvt(vec![e.clone()]), true);
            let Request::PutEvt(back) = parse(&m).unwrap().request else {
                panic!()
            };
            assert_eq!(back[0].type_field(), Some(text.clone()));
            assert_eq!(back[0].value_field(), Some(nums.clone()));
            assert_eq!(
                (back[0].sample, back[0].offset, back[0].duration),
                (7, -1, 2)
            );
        }
        // bytes that are not whole values, and unknown codes, are no field
        let half = EventField::Numbers {
            dtype: DType::F64,
            bytes: Cow::Borrowed(&[0; 4]),
        };
        assert_eq!(WireEvent::from_fields(half, text.clone(), 0, 0, 0), None);
        assert_eq!(EventField::decode(10, Cow::Borrowed(&[0; 12])), None);
        assert_eq!(EventField::decode(11, Cow::Borrowed(&[])), None);
        assert_eq!(
            EventField::decode(9, Cow::Borrowed(&[0; 8])),
            Some(EventField::Numbers {
                dtype: DType::F32,
                bytes: Cow::Borrowed(&[0; 8])
            })
        );
    }

    #[test]
    fn version_rule() {
        assert!(parse_prefix(&[1, 0, 1, 2, 0, 0, 0, 0]).is_ok());
        let be = parse_prefix(&[0, 1, 2, 1, 0, 0, 0, 4]).unwrap();
        assert_eq!(
            (be.order, be.command, be.bufsize),
            (ByteOrder::Big, cmd::GET_HDR, 4)
        );
        assert_eq!(
            parse_prefix(&[2, 0, 1, 2, 0, 0, 0, 0]),
            Err(BadVersion([2, 0]))
        );
    }

    #[test]
    fn refusals() {
        let p = |command, bufsize| Prefix {
            order: ByteOrder::Little,
            command,
            bufsize,
        };
        assert_eq!(
            parse_request(&p(0x0601, 0), &[]),
            Err(RequestError::UnknownCommand(0x0601))
        );
        assert!(matches!(
            parse_request(&p(cmd::WAIT_DAT, 0), &[]),
            Err(RequestError::Inconsistent { .. })
        ));
        assert!(matches!(
            parse_request(&p(cmd::GET_DAT, 4), &[0; 4]),
            Err(RequestError::Short { .. })
        ));
        assert!(matches!(
            parse_request(&p(cmd::PUT_DAT, 8), &[0; 8]),
            Err(RequestError::Short { .. })
        ));
        // 2 ch x 2 samples float32 needs 16 bytes; datadef says 8
        let mut b = Vec::new();
        put_datadef(
            ByteOrder::Little,
            &DataDef {
                nchans: 2,
                nsamples: 2,
                data_type: 9,
                bufsize: 8,
            },
            &mut b,
        );
        b.extend_from_slice(&[0; 8]);
        let e = parse_request(&p(cmd::PUT_DAT, b.len() as u32), &b).unwrap_err();
        assert!(e.to_string().contains("16 bytes"), "{e}");
        // unknown data type
        b[8] = 11;
        assert!(matches!(
            parse_request(&p(cmd::PUT_DAT, b.len() as u32), &b),
            Err(RequestError::BadType { code: 11, .. })
        ));
        // event whose type+value exceed its bufsize
        let mut b = Vec::new();
        for v in [0u32, 4, 0, 4, 0, 0, 0, 6] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&[b'a'; 6]);
        assert!(matches!(
            parse_request(&p(cmd::PUT_EVT, b.len() as u32), &b),
            Err(RequestError::Inconsistent { .. })
        ));
        // a header whose chunk bytes are missing
        let mut b = Vec::new();
        put_headerdef(
            ByteOrder::Little,
            &HeaderDef {
                nchans: 1,
                nsamples: 0,
                nevents: 0,
                fsample: 1.0,
                data_type: 9,
                bufsize: 100,
            },
            &mut b,
        );
        assert!(matches!(
            parse_request(&p(cmd::PUT_HDR, 24), &b),
            Err(RequestError::Inconsistent { .. })
        ));
    }

    #[test]
    fn huge_shapes_do_not_overflow() {
        // the fuzzer's crash: nchans x nsamples x 8 overflowed u64
        let b = [
            0u8, 1, 5, 3, 0, 0x21, 0xdc, 0xdc, 0xdc, 0xdc, 0xdc, 0xff, 0xef, 0xff, 0xff, 0xff, 0,
            0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98,
        ];
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let _ = parse_data_payload(order, &b[8..], "GET_DAT");
        }
        let mut d = Vec::new();
        put_datadef(
            ByteOrder::Little,
            &DataDef {
                nchans: u32::MAX,
                nsamples: u32::MAX,
                data_type: 10,
                bufsize: 0,
            },
            &mut d,
        );
        assert!(matches!(
            parse_data_payload(ByteOrder::Little, &d, "PUT_DAT"),
            Err(RequestError::Inconsistent { .. })
        ));
    }

    #[test]
    fn extra_trailing_data_is_ignored_as_the_reference_does() {
        let mut b = Vec::new();
        put_datadef(
            ByteOrder::Little,
            &DataDef {
                nchans: 1,
                nsamples: 1,
                data_type: 6,
                bufsize: 4,
            },
            &mut b,
        );
        b.extend_from_slice(&[7, 0, 9, 9]);
        let p = Prefix {
            order: ByteOrder::Little,
            command: cmd::PUT_DAT,
            bufsize: b.len() as u32,
        };
        let Request::PutDat { data, .. } = parse_request(&p, &b).unwrap().request else {
            panic!()
        };
        assert_eq!(&*data, &[7, 0]);
    }

    #[test]
    fn chunks_pass_through_and_resolutions_swap() {
        let mut chunks = Vec::new();
        push_chunk(&mut chunks, chunk::CHANNEL_NAMES, b"Fz\0Cz\0");
        push_chunk(&mut chunks, 77, &[1, 2, 3]);
        push_chunk(&mut chunks, chunk::RESOLUTIONS, &1.5f64.to_ne_bytes());
        let def = HeaderDef {
            nchans: 2,
            nsamples: 0,
            nevents: 0,
            fsample: 500.0,
            data_type: 9,
            bufsize: 0,
        };
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let req = Request::PutHdr {
                def,
                chunks: Cow::Borrowed(&chunks),
            };
            let m = msg(order, &req, true);
            if order == ByteOrder::Big {
                // the resolution went out big-endian, the unknown chunk byte-exact
                let tail = &m[m.len() - 8..];
                assert_eq!(tail, 1.5f64.to_be_bytes());
                assert!(m.windows(3).any(|w| w == [1, 2, 3]));
            }
            let Request::PutHdr { def: d, chunks: c } = parse(&m).unwrap().request else {
                panic!()
            };
            assert_eq!(&*c, &chunks[..]);
            assert_eq!(d.bufsize as usize, chunks.len());
        }
        assert_eq!(
            channel_names(&chunks, 2),
            Some(vec!["Fz".to_string(), "Cz".to_string()])
        );
        assert_eq!(channel_names(&chunks, 3), None);
    }

    fn arb_type() -> impl Strategy<Value = u32> {
        0u32..=10
    }

    fn arb_event() -> impl Strategy<Value = WireEvent<'static>> {
        (
            arb_type(),
            0u32..6,
            arb_type(),
            0u32..6,
            any::<i32>(),
            any::<i32>(),
            any::<i32>(),
        )
            .prop_flat_map(|(tt, tn, vt, vn, s, o, d)| {
                let tb = tn as usize * wordsize(tt).unwrap();
                let vb = vn as usize * wordsize(vt).unwrap();
                (
                    proptest::collection::vec(any::<u8>(), tb),
                    proptest::collection::vec(any::<u8>(), vb),
                )
                    .prop_map(move |(t, v)| WireEvent {
                        type_type: tt,
                        type_numel: tn,
                        value_type: vt,
                        value_numel: vn,
                        sample: s,
                        offset: o,
                        duration: d,
                        type_bytes: Cow::Owned(t),
                        value_bytes: Cow::Owned(v),
                    })
            })
    }

    fn arb_request() -> impl Strategy<Value = Request<'static>> {
        let sel = (any::<u32>(), any::<u32>()).prop_map(|(begin, end)| Selection { begin, end });
        prop_oneof![
            Just(Request::GetHdr),
            Just(Request::FlushHdr),
            Just(Request::FlushDat),
            Just(Request::FlushEvt),
            proptest::option::of(sel.clone()).prop_map(Request::GetDat),
            proptest::option::of(sel).prop_map(Request::GetEvt),
            (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(a, b, c)| Request::WaitDat(
                WaitDef {
                    nsamples: a,
                    nevents: b,
                    timeout_ms: c
                }
            )),
            proptest::collection::vec(arb_event(), 0..4).prop_map(Request::PutEvt),
            (1u32..5, 0u32..5, 1u32..=10).prop_flat_map(|(c, n, t)| {
                let bytes = (c * n) as usize * wordsize(t).unwrap();
                proptest::collection::vec(any::<u8>(), bytes).prop_map(move |d| Request::PutDat {
                    def: DataDef {
                        nchans: c,
                        nsamples: n,
                        data_type: t,
                        bufsize: d.len() as u32,
                    },
                    data: Cow::Owned(d),
                })
            }),
            (
                any::<u32>(),
                any::<f32>().prop_filter("NaN never equals itself", |f| !f.is_nan()),
                0u32..=10,
                proptest::collection::vec(
                    (0u32..8, proptest::collection::vec(any::<u8>(), 0..3)),
                    0..4
                )
            )
                .prop_map(|(c, fs, t, cl)| {
                    let mut chunks = Vec::new();
                    for (ty, d) in cl {
                        // resolutions hold whole float64s
                        let d = if ty == chunk::RESOLUTIONS {
                            vec![0u8; d.len() * 8]
                        } else {
                            d
                        };
                        push_chunk(&mut chunks, ty, &d);
                    }
                    Request::PutHdr {
                        def: HeaderDef {
                            nchans: c,
                            nsamples: 0,
                            nevents: 0,
                            fsample: fs,
                            data_type: t,
                            bufsize: chunks.len() as u32,
                        },
                        chunks: Cow::Owned(chunks),
                    }
                }),
        ]
    }

    proptest! {
        #[test]
        fn every_request_round_trips_in_both_byte_orders(
            req in arb_request(), big in any::<bool>(), respond in any::<bool>()
        ) {
            let order = if big { ByteOrder::Big } else { ByteOrder::Little };
            let m = msg(order, &req, respond);
            let p = parse(&m).unwrap();
            prop_assert_eq!(&p.request, &req);
            let is_put = matches!(req, Request::PutHdr{..} | Request::PutDat{..} | Request::PutEvt(_));
            prop_assert_eq!(p.respond, respond || !is_put);
        }

        #[test]
        fn arbitrary_payloads_never_panic(
            command in prop_oneof![0x0101u16..=0x0105, 0x0201u16..=0x0205, 0x0301u16..=0x0305,
                                   0x0401u16..=0x0405, 0x0501u16..=0x0503, any::<u16>()],
            big in any::<bool>(),
            payload in proptest::collection::vec(any::<u8>(), 0..256),
        ) {
            let order = if big { ByteOrder::Big } else { ByteOrder::Little };
            let p = Prefix { order, command, bufsize: payload.len() as u32 };
            let _ = parse_request(&p, &payload);
            let _ = parse_header_payload(order, &payload, "GET_HDR");
            let _ = parse_data_payload(order, &payload, "GET_DAT");
            let _ = parse_events(order, &payload, "GET_EVT");
            let _ = channel_names(&payload, 3);
            let mut out = Vec::new();
            put_chunks(ByteOrder::Big, &payload, &mut out);
        }
    }
}
