//! A blocking FieldTrip buffer client over TCP, a UNIX-domain socket, or in-process (the
//! FAQ's "dma": requests go straight to a [`Buffer`] in this process, no socket, no
//! encoding).

use std::borrow::Cow;
use std::io::{self, IoSlice, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use rtloop_stream::Sample;

use crate::buffer::Buffer;
use crate::codec::{
    self, cmd, encode_request, parse_data_payload, parse_events, parse_header_payload,
    parse_samples_events, put_datadef, put_prefix, ByteOrder, DataDef, HeaderDef, Parsed, Request,
    Selection, WaitDef, WireEvent,
};
use crate::framing::{FrameError, MessageReader, SpinRead};

/// Errors of a client call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The connection failed.
    #[error("{addr}: {source}")]
    Io {
        /// The server.
        addr: String,
        /// What failed.
        source: io::Error,
    },
    /// The server answered with an error reply.
    #[error("{request} refused by {addr} ({reply})")]
    Refused {
        /// The server.
        addr: String,
        /// The request.
        request: &'static str,
        /// The reply (GET_ERR, PUT_ERR, ...).
        reply: &'static str,
    },
    /// The reply broke the protocol.
    #[error("{addr}: bad reply to {request}: {detail}")]
    Protocol {
        /// The server.
        addr: String,
        /// The request.
        request: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A bad argument, refused before anything was sent.
    #[error("{0}")]
    Argument(String),
}

/// A header as GET_HDR returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// The header fields (counts are current).
    pub def: HeaderDef,
    /// The chunks, native order.
    pub chunks: Vec<u8>,
}

impl Header {
    /// Channel names from the CHANNEL_NAMES chunk, if present.
    #[must_use]
    pub fn labels(&self) -> Option<Vec<String>> {
        codec::channel_names(&self.chunks, self.def.nchans as usize)
    }
}

enum Transport {
    Tcp(TcpStream),
    Unix(UnixStream),
    InProcess(Arc<Buffer>),
}

/// One connection to a FieldTrip buffer.
pub struct Client {
    t: Transport,
    addr: String,
    head: Vec<u8>,
    reply: Vec<u8>,
    rd: MessageReader,
    spin: std::time::Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("addr", &self.addr).finish()
    }
}

/// Largest reply accepted (GET_DAT of a whole 512 MiB ring fits).
const MAX_REPLY: usize = 1 << 31;

impl Client {
    /// Connect to `addr`: `HOST:PORT`, `tcp://HOST:PORT`, `buffer://HOST:PORT` (FieldTrip's
    /// spelling) or `unix:PATH`.
    pub fn connect(addr: &str) -> Result<Client, ClientError> {
        let io = |source| ClientError::Io {
            addr: addr.to_owned(),
            source,
        };
        let t = if let Some(path) = addr.strip_prefix("unix:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            let s = UnixStream::connect(path).map_err(io)?;
            crate::server::unix_buffers(&s);
            Transport::Unix(s)
        } else {
            let hp = addr
                .strip_prefix("tcp://")
                .or_else(|| addr.strip_prefix("buffer://"))
                .unwrap_or(addr);
            let s = TcpStream::connect(hp).map_err(io)?;
            s.set_nodelay(true).map_err(io)?;
            Transport::Tcp(s)
        };
        Ok(Client::with(t, addr.to_owned()))
    }

    /// A client calling `buffer` directly in this process.
    #[must_use]
    pub fn in_process(buffer: Arc<Buffer>) -> Client {
        Client::with(Transport::InProcess(buffer), "in-process".into())
    }

    fn with(t: Transport, addr: String) -> Client {
        Client {
            t,
            addr,
            head: Vec::with_capacity(64),
            reply: Vec::new(),
            rd: MessageReader::new(MAX_REPLY),
            spin: std::time::Duration::ZERO,
        }
    }

    /// Poll for each reply this long before sleeping (lower latency on a VM, at the cost of
    /// a busy CPU while waiting; see [`crate::framing::SpinRead`]).
    pub fn set_spin(&mut self, spin: std::time::Duration) {
        self.spin = spin;
    }

    /// The address this client talks to.
    #[must_use]
    pub fn addr(&self) -> &str {
        &self.addr
    }

    fn io(&self, source: io::Error) -> ClientError {
        ClientError::Io {
            addr: self.addr.clone(),
            source,
        }
    }

    /// Send `req` and return the reply's command and payload (`None` for NORESPONSE).
    fn call(
        &mut self,
        req: &Request<'_>,
        respond: bool,
    ) -> Result<Option<(u16, &[u8])>, ClientError> {
        let order = ByteOrder::native();
        if let Transport::InProcess(b) = &self.t {
            self.reply.clear();
            let parsed = Parsed {
                request: req.clone(),
                respond,
            };
            b.handle_request(order, &parsed, &mut self.reply, "in-process");
            if !respond {
                return Ok(None);
            }
            let p = codec::parse_prefix(self.reply[..8].try_into().expect("a reply"))
                .expect("our own reply");
            return Ok(Some((p.command, &self.reply[8..])));
        }
        self.head.clear();
        // samples go out from the caller's memory: prefix + datadef, then the data
        let data: &[u8] = match req {
            Request::PutDat { def, data } => {
                let command = if respond {
                    cmd::PUT_DAT
                } else {
                    cmd::PUT_DAT_NORESPONSE
                };
                put_prefix(
                    order,
                    command,
                    (codec::DATADEF_BYTES + data.len()) as u32,
                    &mut self.head,
                );
                put_datadef(
                    order,
                    &DataDef {
                        bufsize: data.len() as u32,
                        ..*def
                    },
                    &mut self.head,
                );
                data
            }
            other => {
                encode_request(order, other, respond, &mut self.head);
                &[]
            }
        };
        let sent = match &mut self.t {
            Transport::Tcp(s) => write_all_vectored(s, &self.head, data),
            Transport::Unix(s) => write_all_vectored(s, &self.head, data),
            Transport::InProcess(_) => unreachable!(),
        };
        sent.map_err(|e| self.io(e))?;
        if !respond {
            return Ok(None);
        }
        let got = match &mut self.t {
            Transport::Tcp(s) => self.rd.next(&mut SpinRead::new(s, self.spin)),
            Transport::Unix(s) => self.rd.next(&mut SpinRead::new(s, self.spin)),
            Transport::InProcess(_) => unreachable!(),
        };
        match got {
            Ok(Some(p)) => Ok(Some((p.command, self.rd.payload()))),
            Ok(None) => Err(self.io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection without a reply",
            ))),
            Err(FrameError::Io(e)) => Err(self.io(e)),
            Err(e) => Err(self.io(io::Error::new(io::ErrorKind::InvalidData, e.to_string()))),
        }
    }

    fn expect(
        &mut self,
        req: &Request<'_>,
        name: &'static str,
        ok: u16,
    ) -> Result<&[u8], ClientError> {
        let addr = self.addr.clone();
        match self.call(req, true)? {
            Some((c, payload)) if c == ok => Ok(payload),
            Some((c, _)) if c == ok + 1 => Err(ClientError::Refused {
                addr,
                request: name,
                reply: cmd::name(c),
            }),
            Some((c, _)) => Err(ClientError::Protocol {
                addr,
                request: name,
                detail: format!("unexpected reply 0x{c:04x}"),
            }),
            None => unreachable!("a reply was asked for"),
        }
    }

    /// PUT_HDR: (re)start the buffer with this shape; `chunks` as built by
    /// [`codec::push_chunk`].
    pub fn put_header(
        &mut self,
        nchans: u32,
        fsample: f32,
        data_type: u32,
        chunks: &[u8],
    ) -> Result<(), ClientError> {
        let req = Request::PutHdr {
            def: HeaderDef {
                nchans,
                nsamples: 0,
                nevents: 0,
                fsample,
                data_type,
                bufsize: chunks.len() as u32,
            },
            chunks: Cow::Borrowed(chunks),
        };
        self.expect(&req, "PUT_HDR", cmd::PUT_OK).map(|_| ())
    }

    /// GET_HDR.
    pub fn get_header(&mut self) -> Result<Header, ClientError> {
        let addr = self.addr.clone();
        let p = self.expect(&Request::GetHdr, "GET_HDR", cmd::GET_OK)?;
        let (def, chunks) =
            parse_header_payload(ByteOrder::native(), p, "GET_HDR").map_err(|e| {
                ClientError::Protocol {
                    addr,
                    request: "GET_HDR",
                    detail: e.to_string(),
                }
            })?;
        Ok(Header {
            def,
            chunks: chunks.into_owned(),
        })
    }

    /// PUT_DAT of raw sample-major bytes (`nsamples × nchans` values of `data_type`).
    /// `respond = false` sends PUT_DAT_NORESPONSE (fire and forget).
    pub fn put_data_bytes(
        &mut self,
        nchans: u32,
        data_type: u32,
        data: &[u8],
        respond: bool,
    ) -> Result<(), ClientError> {
        let word = codec::wordsize(data_type).ok_or_else(|| {
            ClientError::Argument(format!(
                "data type {data_type} is not a FieldTrip type; allowed: {}",
                codec::DATATYPES_ALLOWED
            ))
        })?;
        let per = nchans as usize * word;
        if per == 0 || data.len() % per != 0 {
            return Err(ClientError::Argument(format!(
                "{} bytes are not a whole number of samples of {nchans} channels x {word} bytes",
                data.len()
            )));
        }
        let req = Request::PutDat {
            def: DataDef {
                nchans,
                nsamples: (data.len() / per) as u32,
                data_type,
                bufsize: data.len() as u32,
            },
            data: Cow::Borrowed(data),
        };
        if respond {
            self.expect(&req, "PUT_DAT", cmd::PUT_OK).map(|_| ())
        } else {
            self.call(&req, false).map(|_| ())
        }
    }

    /// PUT_DAT of typed values, sample-major.
    pub fn put_data<T: Sample>(&mut self, nchans: u32, data: &[T]) -> Result<(), ClientError> {
        self.put_data_bytes(nchans, T::DTYPE.code(), as_bytes(data), true)
    }

    /// GET_DAT of samples `begin..=end` (`None`: everything kept) into `out` (replaced).
    /// Returns the datadef.
    pub fn get_data_into(
        &mut self,
        sel: Option<(u32, u32)>,
        out: &mut Vec<u8>,
    ) -> Result<DataDef, ClientError> {
        let addr = self.addr.clone();
        let req = Request::GetDat(sel.map(|(begin, end)| Selection { begin, end }));
        let p = self.expect(&req, "GET_DAT", cmd::GET_OK)?;
        let (def, data) = parse_data_payload(ByteOrder::native(), p, "GET_DAT").map_err(|e| {
            ClientError::Protocol {
                addr,
                request: "GET_DAT",
                detail: e.to_string(),
            }
        })?;
        out.clear();
        out.extend_from_slice(&data);
        Ok(def)
    }

    /// GET_DAT of samples `begin..=end` as typed values (sample-major).
    pub fn get_data<T: Sample>(&mut self, begin: u32, end: u32) -> Result<Vec<T>, ClientError> {
        let mut bytes = Vec::new();
        let def = self.get_data_into(Some((begin, end)), &mut bytes)?;
        if def.data_type != T::DTYPE.code() {
            return Err(ClientError::Argument(format!(
                "the buffer holds data type {}, asked for {}",
                def.data_type,
                T::DTYPE
            )));
        }
        let n = bytes.len() / T::DTYPE.itemsize();
        let mut v: Vec<T> = Vec::with_capacity(n);
        // SAFETY: `v` has room for `n` values = `bytes.len()` bytes (parse_data_payload
        // returned exactly nchans x nsamples x itemsize bytes of T's dtype); every bit
        // pattern is a valid `Sample` value, so after the copy all `n` are initialised.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                v.as_mut_ptr().cast::<u8>(),
                n * T::DTYPE.itemsize(),
            );
            v.set_len(n);
        }
        Ok(v)
    }

    /// PUT_EVT.
    pub fn put_events(&mut self, events: &[WireEvent<'_>]) -> Result<(), ClientError> {
        let req = Request::PutEvt(events.to_vec());
        self.expect(&req, "PUT_EVT", cmd::PUT_OK).map(|_| ())
    }

    /// GET_EVT of events `begin..=end` (`None`: every event kept).
    pub fn get_events(
        &mut self,
        sel: Option<(u32, u32)>,
    ) -> Result<Vec<WireEvent<'static>>, ClientError> {
        let addr = self.addr.clone();
        let req = Request::GetEvt(sel.map(|(begin, end)| Selection { begin, end }));
        let p = self.expect(&req, "GET_EVT", cmd::GET_OK)?;
        let evs =
            parse_events(ByteOrder::native(), p, "GET_EVT").map_err(|e| ClientError::Protocol {
                addr,
                request: "GET_EVT",
                detail: e.to_string(),
            })?;
        Ok(evs.into_iter().map(WireEvent::into_owned).collect())
    }

    /// WAIT_DAT: until more than `nsamples` samples or `nevents` events exist, or
    /// `timeout_ms` passes. Returns the current (samples, events).
    pub fn wait(
        &mut self,
        nsamples: u32,
        nevents: u32,
        timeout_ms: u32,
    ) -> Result<(u32, u32), ClientError> {
        let addr = self.addr.clone();
        let req = Request::WaitDat(WaitDef {
            nsamples,
            nevents,
            timeout_ms,
        });
        let p = self.expect(&req, "WAIT_DAT", cmd::WAIT_OK)?;
        parse_samples_events(ByteOrder::native(), p).map_err(|e| ClientError::Protocol {
            addr,
            request: "WAIT_DAT",
            detail: e.to_string(),
        })
    }

    /// The current (samples, events) without waiting.
    pub fn poll(&mut self) -> Result<(u32, u32), ClientError> {
        self.wait(0, 0, 0)
    }

    /// FLUSH_HDR: delete header, samples and events.
    pub fn flush_header(&mut self) -> Result<(), ClientError> {
        self.expect(&Request::FlushHdr, "FLUSH_HDR", cmd::FLUSH_OK)
            .map(|_| ())
    }

    /// FLUSH_DAT: delete the samples.
    pub fn flush_data(&mut self) -> Result<(), ClientError> {
        self.expect(&Request::FlushDat, "FLUSH_DAT", cmd::FLUSH_OK)
            .map(|_| ())
    }

    /// FLUSH_EVT: delete the events.
    pub fn flush_events(&mut self) -> Result<(), ClientError> {
        self.expect(&Request::FlushEvt, "FLUSH_EVT", cmd::FLUSH_OK)
            .map(|_| ())
    }
}

fn as_bytes<T: Sample>(data: &[T]) -> &[u8] {
    // SAFETY: `Sample` types are plain numbers with no padding and no invalid bit
    // patterns; the slice covers exactly `size_of_val(data)` initialised bytes.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// Write `head` then `data` with as few syscalls as the kernel allows (writev).
fn write_all_vectored<W: Write>(w: &mut W, head: &[u8], data: &[u8]) -> io::Result<()> {
    let mut bufs = [IoSlice::new(head), IoSlice::new(data)];
    let mut bufs: &mut [IoSlice<'_>] = &mut bufs;
    if data.is_empty() {
        return w.write_all(head);
    }
    while !bufs.is_empty() {
        match w.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
