//! An LSL inlet and outlet as owned values (the bridge and the runtime's `lsl_in` /
//! `lsl_out` drivers use them).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rtloop_stream::DType;

use crate::bridge::{dtype_of, format_of};
use crate::ffi::{self, format};
use crate::{cstr, Lsl, LslError, Meta};

fn ec_err(call: &'static str, code: i32) -> LslError {
    LslError::Liblsl { call, code }
}

/// An open inlet of a resolved outlet.
pub struct Inlet {
    lsl: Arc<Lsl>,
    ptr: ffi::Inlet,
    /// The outlet's full description.
    pub meta: Meta,
    /// Its rtloop dtype (None for a string stream).
    pub dtype: Option<DType>,
}

// SAFETY: liblsl inlets may be used from any one thread at a time; `Inlet` is not Sync.
unsafe impl Send for Inlet {}

impl Inlet {
    /// Resolve an outlet whose `name` (else `type`, unless `by` says which) is `query`
    /// within `timeout` seconds, open an inlet to it (recovery on) and read its description.
    /// No match: the error lists every outlet that was visible.
    pub fn open(
        lsl: Arc<Lsl>,
        query: &str,
        by: Option<&str>,
        timeout: f64,
        stop: &dyn Fn() -> bool,
    ) -> Result<Inlet, LslError> {
        let props: Vec<&str> = by.map_or_else(|| vec!["name", "type"], |p| vec![p]);
        let deadline = Instant::now() + Duration::from_secs_f64(timeout);
        let mut found = None;
        'search: while Instant::now() < deadline && !stop() {
            for p in &props {
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .as_secs_f64();
                if let Some(i) = lsl.resolve_one(p, query, (left / props.len() as f64).min(1.0)) {
                    found = Some(i);
                    break 'search;
                }
            }
        }
        let Some(info) = found else {
            let seen = lsl.resolve_all(0.5);
            return Err(LslError::NoOutlet {
                prop: props.join(" or "),
                value: query.to_string(),
                timeout,
                found: if seen.is_empty() {
                    "none".into()
                } else {
                    seen.iter()
                        .map(Meta::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            });
        };
        let a = lsl.api();
        // SAFETY: `info` came from resolve; the inlet takes its own copy (360 s buffer,
        // default chunking, recover = 1: reconnect to the same source id after an outage).
        let ptr = unsafe { (a.lsl_create_inlet)(info, 360, 0, 1) };
        lsl.destroy_info(info);
        if ptr.is_null() {
            return Err(LslError::NotCreated("an inlet"));
        }
        let mut inlet = Inlet {
            lsl: lsl.clone(),
            ptr,
            meta: Meta {
                name: String::new(),
                kind: String::new(),
                source_id: String::new(),
                channels: 0,
                rate: 0.0,
                format: 0,
                labels: Vec::new(),
                units: Vec::new(),
            },
            dtype: None,
        };
        let mut ec = 0;
        // SAFETY: a live inlet; `ec` receives the error code.
        let full = unsafe { (a.lsl_get_fullinfo)(ptr, timeout.max(1.0), &mut ec) };
        if ec != 0 || full.is_null() {
            return Err(ec_err("get_fullinfo", ec));
        }
        inlet.meta = lsl.meta(full);
        lsl.destroy_info(full);
        if inlet.meta.channels == 0 {
            return Err(LslError::Unmappable(format!(
                "{} has no channels",
                inlet.meta
            )));
        }
        inlet.dtype = dtype_of(inlet.meta.format);
        if inlet.dtype.is_none() && inlet.meta.format != format::STRING {
            return Err(LslError::Unmappable(format!(
                "{}: channel format {} has no rtloop dtype",
                inlet.meta, inlet.meta.format
            )));
        }
        // SAFETY: a live inlet.
        unsafe { (a.lsl_open_stream)(ptr, timeout.max(1.0), &mut ec) };
        if ec != 0 {
            return Err(ec_err("open_stream", ec));
        }
        Ok(inlet)
    }

    /// The inlet's current time correction (remote LSL clock → local), if known.
    #[must_use]
    pub fn time_correction(&self, timeout: f64) -> Option<f64> {
        let mut ec = 0;
        // SAFETY: a live inlet.
        let c = unsafe { (self.lsl.api().lsl_time_correction)(self.ptr, timeout, &mut ec) };
        (ec == 0 && c.is_finite()).then_some(c)
    }

    /// Pull up to `max` samples (waiting at most `timeout` s) into `data` (native bytes of
    /// the dtype, `max * channels` values) and `ts` (their remote timestamps).
    pub fn pull(
        &mut self,
        data: &mut [u8],
        ts: &mut [f64],
        max: usize,
        timeout: f64,
    ) -> Result<usize, LslError> {
        let n_ch = self.meta.channels;
        let d = self
            .dtype
            .ok_or_else(|| LslError::Unmappable("a string stream: use pull_string".into()))?;
        assert!(data.len() >= max * n_ch * d.itemsize() && ts.len() >= max);
        assert!(
            data.as_ptr().align_offset(d.itemsize()) == 0,
            "data aligned for the dtype"
        );
        let a = self.lsl.api();
        let mut ec = 0;
        let elems = (max * n_ch) as std::ffi::c_ulong;
        let tse = max as std::ffi::c_ulong;
        let (p, t) = (data.as_mut_ptr(), ts.as_mut_ptr());
        // SAFETY: `data` holds max*n_ch values of the dtype (checked above, aligned), `ts`
        // max f64s; liblsl writes at most the element counts it is given.
        let n = unsafe {
            match self.meta.format {
                format::FLOAT32 => {
                    (a.lsl_pull_chunk_f)(self.ptr, p.cast(), t, elems, tse, timeout, &mut ec)
                }
                format::DOUBLE64 => {
                    (a.lsl_pull_chunk_d)(self.ptr, p.cast(), t, elems, tse, timeout, &mut ec)
                }
                format::INT32 => {
                    (a.lsl_pull_chunk_i)(self.ptr, p.cast(), t, elems, tse, timeout, &mut ec)
                }
                format::INT16 => {
                    (a.lsl_pull_chunk_s)(self.ptr, p.cast(), t, elems, tse, timeout, &mut ec)
                }
                format::INT8 => {
                    (a.lsl_pull_chunk_c)(self.ptr, p.cast(), t, elems, tse, timeout, &mut ec)
                }
                _ => (a.lsl_pull_chunk_l)(self.ptr, p.cast(), t, elems, tse, timeout, &mut ec),
            }
        };
        // -1 timeout and -2 lost (recovery reconnects) are not errors here
        if ec != 0 && ec != -1 && ec != -2 {
            return Err(ec_err("pull_chunk", ec));
        }
        Ok(n as usize / n_ch)
    }

    /// Pull one string sample (a marker): `(remote timestamp, text)`.
    pub fn pull_string(&mut self, timeout: f64) -> Option<(f64, String)> {
        let a = self.lsl.api();
        let mut p: *mut std::ffi::c_char = std::ptr::null_mut();
        let mut ec = 0;
        // SAFETY: a live inlet of a one-channel string stream; liblsl allocates the string.
        let t = unsafe { (a.lsl_pull_sample_str)(self.ptr, &mut p, 1, timeout, &mut ec) };
        if t == 0.0 || p.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string from liblsl, copied then destroyed once.
        let text = unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: as above.
        unsafe { (a.lsl_destroy_string)(p) };
        Some((t, text))
    }
}

impl Drop for Inlet {
    fn drop(&mut self) {
        // SAFETY: the inlet we created, destroyed once.
        unsafe { (self.lsl.api().lsl_destroy_inlet)(self.ptr) };
    }
}

/// What an outlet announces.
#[derive(Debug, Clone)]
pub struct OutletSpec {
    /// Name.
    pub name: String,
    /// Content type.
    pub kind: String,
    /// Source id.
    pub source_id: String,
    /// Channels.
    pub channels: usize,
    /// Nominal rate (0 = irregular).
    pub rate: f64,
    /// Value type (must have an LSL format) — or None for a one-channel string outlet.
    pub dtype: Option<DType>,
    /// Channel labels (may be empty).
    pub labels: Vec<String>,
    /// Channel units (may be empty).
    pub units: Vec<String>,
}

/// An outlet on the network.
pub struct Outlet {
    lsl: Arc<Lsl>,
    ptr: ffi::Outlet,
    fmt: i32,
    channels: usize,
    /// Its description as announced.
    pub meta: Meta,
}

// SAFETY: liblsl outlets are thread-safe for pushing; `Outlet` is moved, not shared.
unsafe impl Send for Outlet {}

impl Outlet {
    /// Announce an outlet (metadata in `desc/channels/channel/{label,unit}` and
    /// `desc/acquisition/manufacturer = rtloop`).
    pub fn create(lsl: Arc<Lsl>, s: &OutletSpec) -> Result<Outlet, LslError> {
        let a = lsl.api();
        let fmt = match s.dtype {
            Some(d) => format_of(d)?,
            None => format::STRING,
        };
        let (cn, ck, cs) = (cstr(&s.name), cstr(&s.kind), cstr(&s.source_id));
        // SAFETY: NUL-terminated strings that live for the call; the info is ours.
        let si = unsafe {
            (a.lsl_create_streaminfo)(
                cn.as_ptr(),
                ck.as_ptr(),
                s.channels as i32,
                s.rate,
                fmt,
                cs.as_ptr(),
            )
        };
        if si.is_null() {
            return Err(LslError::NotCreated("a stream info"));
        }
        let names = [
            "channels",
            "channel",
            "label",
            "unit",
            "acquisition",
            "manufacturer",
            "rtloop",
        ]
        .map(cstr);
        // SAFETY: building the description with liblsl's XML calls on nodes it returned;
        // every string is NUL-terminated and lives for its call.
        unsafe {
            let desc = (a.lsl_get_desc)(si);
            if !s.labels.is_empty() {
                let chans = (a.lsl_append_child)(desc, names[0].as_ptr());
                for i in 0..s.channels {
                    let ch = (a.lsl_append_child)(chans, names[1].as_ptr());
                    let label = cstr(s.labels.get(i).map_or("", String::as_str));
                    (a.lsl_append_child_value)(ch, names[2].as_ptr(), label.as_ptr());
                    if let Some(u) = s.units.get(i).filter(|u| !u.is_empty()) {
                        let u = cstr(u);
                        (a.lsl_append_child_value)(ch, names[3].as_ptr(), u.as_ptr());
                    }
                }
            }
            let acq = (a.lsl_append_child)(desc, names[4].as_ptr());
            (a.lsl_append_child_value)(acq, names[5].as_ptr(), names[6].as_ptr());
        }
        let meta = lsl.meta(si);
        // SAFETY: the info is complete; the outlet copies it (chunks as pushed, 360 s kept
        // for slow inlets).
        let ptr = unsafe { (a.lsl_create_outlet)(si, 0, 360) };
        lsl.destroy_info(si);
        if ptr.is_null() {
            return Err(LslError::NotCreated("an outlet"));
        }
        Ok(Outlet {
            lsl,
            ptr,
            fmt,
            channels: s.channels,
            meta,
        })
    }

    /// Push samples (native bytes of the dtype, whole samples) with one timestamp each
    /// (local LSL clock = CLOCK_MONOTONIC seconds).
    pub fn push(&self, data: &[u8], ts: &[f64]) -> Result<(), LslError> {
        if ts.is_empty() {
            return Ok(());
        }
        let elems = (ts.len() * self.channels) as std::ffi::c_ulong;
        let w = match self.fmt {
            format::FLOAT32 | format::INT32 => 4,
            format::INT16 => 2,
            format::INT8 => 1,
            _ => 8,
        };
        assert!(data.len() >= ts.len() * self.channels * w && data.as_ptr().align_offset(w) == 0);
        let a = self.lsl.api();
        let (d, t) = (data.as_ptr(), ts.as_ptr());
        // SAFETY: `data` holds ts.len() samples of the outlet's format (checked above),
        // `ts` one timestamp per sample; liblsl copies them.
        let rc = unsafe {
            match self.fmt {
                format::FLOAT32 => (a.lsl_push_chunk_ftnp)(self.ptr, d.cast(), elems, t, 1),
                format::DOUBLE64 => (a.lsl_push_chunk_dtnp)(self.ptr, d.cast(), elems, t, 1),
                format::INT32 => (a.lsl_push_chunk_itnp)(self.ptr, d.cast(), elems, t, 1),
                format::INT16 => (a.lsl_push_chunk_stnp)(self.ptr, d.cast(), elems, t, 1),
                format::INT8 => (a.lsl_push_chunk_ctnp)(self.ptr, d.cast(), elems, t, 1),
                _ => (a.lsl_push_chunk_ltnp)(self.ptr, d.cast(), elems, t, 1),
            }
        };
        if rc != 0 {
            return Err(ec_err("push_chunk", rc));
        }
        Ok(())
    }

    /// Push one string sample (a string outlet).
    pub fn push_string(&self, text: &str, ts: f64) {
        let c = cstr(text);
        let ptrs = [c.as_ptr()];
        // SAFETY: one NUL-terminated string for the one channel; liblsl copies it.
        unsafe { (self.lsl.api().lsl_push_sample_strtp)(self.ptr, ptrs.as_ptr(), ts, 1) };
    }
}

impl Drop for Outlet {
    fn drop(&mut self) {
        // SAFETY: the outlet we created, destroyed once.
        unsafe { (self.lsl.api().lsl_destroy_outlet)(self.ptr) };
    }
}
