//! rtloop-dsp's blocks as Python classes (`rtloop.dsp`): each takes numpy chunks shaped
//! `(samples, channels)` of float32 or float64, keeps its state from call to call and returns
//! numpy arrays. Nothing here computes a signal: it checks what Python gives, copies the
//! chunk into memory Python cannot reach, runs the Rust block on it without the GIL and hands
//! the result back.
//!
//! The copy is why the GIL can be released: another Python thread could write into the
//! caller's array meanwhile, which would be a data race on memory Rust reads; the copy is
//! owned here until it becomes the returned array.

use numpy::ndarray::Array2;
use numpy::{
    Element, PyArray1, PyArray2, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use rtloop_dsp::{
    design, group_delay, Band, Decimator, MovingRms, PhaseConfig, PhaseTracker, Reference, Reref,
    RippleConfig, RippleDetector, Section, Sign, SosFilter, SpikeConfig, SpikeDetector,
};

/// A Rust block's refusal, its message unchanged.
fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A count parameter from Python: a whole number >= 0 (the block says if 0 is too few).
fn count(v: i64, what: &str) -> PyResult<usize> {
    usize::try_from(v).map_err(|_| {
        PyValueError::new_err(format!(
            "Invalid value for the '{what}' parameter. Allowed values are whole numbers >= 0, but got {v} instead."
        ))
    })
}

/// One of `allowed` (lower case), or a `ValueError` listing them.
fn choice<'a>(v: &str, what: &str, allowed: &[&'a str]) -> PyResult<&'a str> {
    let lower = v.to_ascii_lowercase();
    allowed.iter().copied().find(|a| *a == lower).ok_or_else(|| {
        PyValueError::new_err(format!(
            "Invalid value for the '{what}' parameter. Allowed values are {}, but got {v:?} instead.",
            allowed
                .iter()
                .map(|a| format!("{a:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
}

/// `repr(v)`, for messages.
fn repr(v: &Bound<'_, PyAny>) -> String {
    v.repr().map_or_else(|_| "?".to_owned(), |r| r.to_string())
}

/// A band's edges from Python: any sequence of two numbers (tuple, list, array), in Hz.
fn edges(v: &Bound<'_, PyAny>, what: &str) -> PyResult<(f64, f64)> {
    match v.extract::<Vec<f64>>() {
        Ok(e) if e.len() == 2 => Ok((e[0], e[1])),
        _ => Err(PyValueError::new_err(format!(
            "Invalid value for the '{what}' parameter. A band takes its edges {what}=(low, high) in Hz, but got {} instead.",
            repr(v)
        ))),
    }
}

/// A chunk copied out of Python, C-ordered, in its own precision.
enum Chunk {
    F32(Array2<f32>),
    F64(Array2<f64>),
}

/// The rows of a typed 2-D array, copied into a C-ordered array of our own.
fn copy_rows<T: Element + Clone>(arr: &Bound<'_, PyUntypedArray>) -> PyResult<Array2<T>> {
    let typed = arr.cast::<PyArray2<T>>()?;
    let ro = typed.try_readonly()?;
    Ok(ro.as_array().as_standard_layout().into_owned())
}

/// A shape as Python writes it: `(4,)`, `(3, 5)`.
fn py_shape(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Check that `chunk` is a `(samples, channels)` float32 or float64 numpy array and copy it.
fn take_chunk(chunk: &Bound<'_, PyAny>, channels: usize, block: &str) -> PyResult<Chunk> {
    let allowed = format!(
        "a numpy array shaped (samples, {channels}) of float32 or float64, as Reader.pull_chunk returns"
    );
    let Ok(arr) = chunk.cast::<PyUntypedArray>() else {
        return Err(PyTypeError::new_err(format!(
            "{block}: a chunk is {allowed}, but got a value of type {} instead.",
            chunk.get_type().name()?
        )));
    };
    let shape = arr.shape();
    if shape.len() != 2 {
        return Err(PyValueError::new_err(format!(
            "{block}: a chunk is {allowed}, but got an array of shape {} ({} dimensions) instead; one sample x is x[None, :].",
            py_shape(shape),
            shape.len()
        )));
    }
    if shape[1] != channels {
        return Err(PyValueError::new_err(format!(
            "{block} was made for {channels} channels, but the chunk has {} (shape ({}, {})): give chunks shaped (samples, {channels}).",
            shape[1], shape[0], shape[1]
        )));
    }
    let py = chunk.py();
    let d = arr.dtype();
    if d.is_equiv_to(&numpy::dtype::<f32>(py)) {
        Ok(Chunk::F32(copy_rows(arr)?))
    } else if d.is_equiv_to(&numpy::dtype::<f64>(py)) {
        Ok(Chunk::F64(copy_rows(arr)?))
    } else {
        Err(PyTypeError::new_err(format!(
            "{block}: a chunk is {allowed}, but got dtype {d} instead; convert it with chunk.astype(numpy.float32) or numpy.float64."
        )))
    }
}

/// The samples of an array made by `copy_rows` or `Array2::zeros`, row by row.
fn values<T>(a: &mut Array2<T>) -> &mut [T] {
    a.as_slice_mut().expect("the array was made C-ordered here")
}

/// A block in float32 or float64. It is made in float64 (which checks the parameters) and
/// remade in float32 if its first chunk is float32; from then on its state is of that type
/// and chunks of the other are refused (until `reset`).
enum Typed<A, B> {
    F32(A),
    F64(B),
}

/// A [`Typed`] block and whether a chunk fixed its type.
struct Pinned<A, B> {
    block: Typed<A, B>,
    pinned: bool,
}

impl<A, B> Pinned<A, B> {
    fn new(block64: B) -> Self {
        Pinned {
            block: Typed::F64(block64),
            pinned: false,
        }
    }

    fn refuse(block: &str, has: &str, got: &str) -> PyErr {
        PyTypeError::new_err(format!(
            "{block} runs in {has} since its first chunk (its state is {has}), but got a {got} chunk: give {has} chunks, or call reset() first."
        ))
    }

    /// The float32 block, made now if no chunk came yet.
    fn f32(&mut self, block: &str, make: impl FnOnce() -> PyResult<A>) -> PyResult<&mut A> {
        if let Typed::F64(_) = self.block {
            if self.pinned {
                return Err(Self::refuse(block, "float64", "float32"));
            }
            self.block = Typed::F32(make()?);
        }
        self.pinned = true;
        match &mut self.block {
            Typed::F32(a) => Ok(a),
            Typed::F64(_) => unreachable!("made float32 above"),
        }
    }

    /// The float64 block.
    fn f64(&mut self, block: &str) -> PyResult<&mut B> {
        match &mut self.block {
            Typed::F64(b) => {
                self.pinned = true;
                Ok(b)
            }
            Typed::F32(_) => Err(Self::refuse(block, "float32", "float64")),
        }
    }
}

/// Event arrays as one numpy structured array with these fields (in this order).
fn event_array<'py>(
    py: Python<'py>,
    n: usize,
    fields: Vec<(&'static str, Bound<'py, PyAny>)>,
) -> PyResult<Bound<'py, PyAny>> {
    let np = py.import("numpy")?;
    let mut spec = Vec::with_capacity(fields.len());
    for (name, a) in &fields {
        spec.push((*name, a.getattr("dtype")?));
    }
    let dtype = np.call_method1("dtype", (spec,))?;
    let out = np.call_method1("empty", (n, dtype))?;
    for (name, a) in fields {
        out.set_item(name, a)?;
    }
    Ok(out)
}

/// Sample numbers as int64 (numpy mixes uint64 with int64 into float64).
fn samples_i64(v: &[u64]) -> Vec<i64> {
    v.iter()
        .map(|&s| i64::try_from(s).unwrap_or(i64::MAX))
        .collect()
}

/// Channels as int64.
fn channels_i64(v: &[usize]) -> Vec<i64> {
    v.iter()
        .map(|&c| i64::try_from(c).unwrap_or(i64::MAX))
        .collect()
}

/// A detector's events as a structured array: `channel` (int64), then `names[0]` (a sample
/// number, int64), then `names[1]` (what `third` makes of the events' third values).
fn events_array<'py, V>(
    py: Python<'py>,
    names: [&'static str; 2],
    events: Vec<(usize, u64, V)>,
    third: impl FnOnce(Python<'py>, Vec<V>) -> Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let n = events.len();
    let mut channel = Vec::with_capacity(n);
    let mut sample = Vec::with_capacity(n);
    let mut value = Vec::with_capacity(n);
    for (c, s, v) in events {
        channel.push(c);
        sample.push(s);
        value.push(v);
    }
    event_array(
        py,
        n,
        vec![
            (
                "channel",
                PyArray1::from_vec(py, channels_i64(&channel)).into_any(),
            ),
            (
                names[0],
                PyArray1::from_vec(py, samples_i64(&sample)).into_any(),
            ),
            (names[1], third(py, value)),
        ],
    )
}

/// Values as a numpy array of their own dtype.
fn values_array<V: Element>(py: Python<'_>, v: Vec<V>) -> Bound<'_, PyAny> {
    PyArray1::from_vec(py, v).into_any()
}

/// Sample numbers as an int64 numpy array.
fn samples_array(py: Python<'_>, v: Vec<u64>) -> Bound<'_, PyAny> {
    PyArray1::from_vec(py, samples_i64(&v)).into_any()
}

// ---------------------------------------------------------------------------------------

/// An IIR filter (cascaded second-order sections, as ``scipy.signal.sosfilt``) with each
/// channel's state carried from chunk to chunk.
///
/// ``SosFilter(channels, rate, btype, freq, order=None, q=30.0)``: ``btype`` is
/// ``"lowpass"`` or ``"highpass"`` (``freq`` the -3 dB frequency, Hz), ``"bandpass"``
/// (``freq=(low, high)``), all Butterworth as ``scipy.signal.butter(order, freq, btype,
/// fs=rate, output="sos")`` designs them (``order`` 1 to 12, default 4), or ``"notch"``
/// (``freq`` removed, ``q`` its quality factor, as ``scipy.signal.iirnotch``; order 2).
/// ``process(chunk)`` returns the filtered chunk, same shape and dtype.
#[pyclass(module = "rtloop._rtloop", name = "SosFilter")]
pub(crate) struct PySosFilter {
    sections: Vec<Section>,
    channels: usize,
    rate: f64,
    /// Where `delay_samples` is taken: the pass band's reference frequency.
    reference: f64,
    block: Pinned<SosFilter<f32>, SosFilter<f64>>,
}

impl PySosFilter {
    fn make<T: num_traits::Float>(&self) -> PyResult<SosFilter<T>> {
        SosFilter::new(&self.sections, self.channels).map_err(value_error)
    }
}

#[pymethods]
impl PySosFilter {
    #[new]
    #[pyo3(signature = (channels, rate, btype, freq, order=None, q=30.0))]
    fn new(
        channels: i64,
        rate: f64,
        btype: &str,
        freq: &Bound<'_, PyAny>,
        order: Option<i64>,
        q: f64,
    ) -> PyResult<Self> {
        let channels = count(channels, "channels")?;
        let kind = choice(
            btype,
            "btype",
            &["lowpass", "highpass", "bandpass", "notch"],
        )?;
        let (band, reference) = if kind == "bandpass" {
            let (low, high) = edges(freq, "freq")?;
            (Band::Bandpass { low, high }, (low * high).abs().sqrt())
        } else {
            let f: f64 = freq.extract().map_err(|_| {
                PyValueError::new_err(format!(
                    "Invalid value for the 'freq' parameter. A {kind} takes one frequency in Hz, but got {} instead.",
                    repr(freq)
                ))
            })?;
            match kind {
                "lowpass" => (Band::Lowpass { cutoff: f }, 0.0),
                "highpass" => (Band::Highpass { cutoff: f }, rate / 2.0),
                _ => (Band::Notch { freq: f, q }, 0.0),
            }
        };
        let order = match order {
            Some(o) => count(o, "order")?,
            None if kind == "notch" => 2,
            None => 4,
        };
        let sections = design(band, order, rate).map_err(value_error)?;
        let block64 = SosFilter::new(&sections, channels).map_err(value_error)?;
        Ok(PySosFilter {
            sections,
            channels,
            rate,
            reference,
            block: Pinned::new(block64),
        })
    }

    /// Filter ``chunk`` (``(samples, channels)``, float32 or float64) and return the
    /// filtered chunk (a new array, same shape and dtype), the state carried to the next.
    fn process<'py>(
        &mut self,
        py: Python<'py>,
        chunk: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let what = "SosFilter";
        Ok(match take_chunk(chunk, self.channels, what)? {
            Chunk::F32(mut a) => {
                let (sections, ch) = (&self.sections, self.channels);
                let f = self
                    .block
                    .f32(what, || SosFilter::new(sections, ch).map_err(value_error))?;
                crate::exit::detach(py, || f.process(values(&mut a))).map_err(value_error)?;
                PyArray2::from_owned_array(py, a).into_any()
            }
            Chunk::F64(mut a) => {
                let f = self.block.f64(what)?;
                crate::exit::detach(py, || f.process(values(&mut a))).map_err(value_error)?;
                PyArray2::from_owned_array(py, a).into_any()
            }
        })
    }

    /// Back to rest (every state 0) and to no fixed dtype, as a new filter.
    fn reset(&mut self) -> PyResult<()> {
        self.block = Pinned::new(self.make::<f64>()?);
        Ok(())
    }

    /// The sections as scipy's ``sos`` array: ``(n_sections, 6)`` float64 rows ``b0, b1,
    /// b2, a0, a1, a2`` (``a0`` = 1).
    #[getter]
    fn sections<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        let mut a = Array2::zeros((self.sections.len(), 6));
        for (mut row, s) in a.rows_mut().into_iter().zip(&self.sections) {
            for (k, v) in s.b.iter().chain(&s.a).enumerate() {
                row[k] = *v;
            }
        }
        PyArray2::from_owned_array(py, a)
    }

    /// The group delay in samples at the pass band's reference frequency: 0 Hz for a
    /// low-pass and a notch, the Nyquist frequency for a high-pass, the geometric centre
    /// ``sqrt(low * high)`` for a band-pass (see :meth:`delay_at` for any other).
    #[getter]
    fn delay_samples(&self) -> f64 {
        group_delay(&self.sections, self.reference, self.rate)
    }

    /// The group delay in samples at ``freq`` Hz (0 to the Nyquist frequency).
    fn delay_at(&self, freq: f64) -> PyResult<f64> {
        let nyquist = self.rate / 2.0;
        if !(freq.is_finite() && (0.0..=nyquist).contains(&freq)) {
            return Err(PyValueError::new_err(format!(
                "Invalid value for the 'freq' parameter. Allowed values are 0 to the Nyquist frequency {nyquist} Hz, but got {freq} instead."
            )));
        }
        Ok(group_delay(&self.sections, freq, self.rate))
    }

    /// Channels per sample.
    #[getter]
    fn channels(&self) -> usize {
        self.channels
    }

    /// The sample rate, Hz.
    #[getter]
    fn rate(&self) -> f64 {
        self.rate
    }
}

// ---------------------------------------------------------------------------------------

/// Re-referencing: from every channel of each sample, subtract the mean (``"average"``,
/// CAR) or median (``"median"``, CMR) of the ``reference`` channels (all if ``None``) of
/// that sample. No state, no delay.
///
/// ``Reref(channels, reference=None, kind="average")``; ``process(chunk)`` returns the
/// re-referenced chunk, same shape and dtype.
#[pyclass(module = "rtloop._rtloop", name = "Reref")]
pub(crate) struct PyReref {
    channels: usize,
    reference: Option<Vec<usize>>,
    kind: Reference,
    block: Pinned<Reref<f32>, Reref<f64>>,
}

#[pymethods]
impl PyReref {
    #[new]
    #[pyo3(signature = (channels, reference=None, kind="average"))]
    fn new(channels: i64, reference: Option<Vec<i64>>, kind: &str) -> PyResult<Self> {
        let channels = count(channels, "channels")?;
        let reference = reference
            .map(|r| r.into_iter().map(|c| count(c, "reference")).collect())
            .transpose()?;
        let kind = match choice(kind, "kind", &["average", "median"])? {
            "average" => Reference::Average,
            _ => Reference::Median,
        };
        let block64 = Reref::new(channels, reference.as_deref(), kind).map_err(value_error)?;
        Ok(PyReref {
            channels,
            reference,
            kind,
            block: Pinned::new(block64),
        })
    }

    /// Re-reference ``chunk`` and return the result (a new array, same shape and dtype).
    fn process<'py>(
        &mut self,
        py: Python<'py>,
        chunk: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let what = "Reref";
        Ok(match take_chunk(chunk, self.channels, what)? {
            Chunk::F32(mut a) => {
                let (ch, r, k) = (self.channels, self.reference.as_deref(), self.kind);
                let b = self
                    .block
                    .f32(what, || Reref::new(ch, r, k).map_err(value_error))?;
                crate::exit::detach(py, || b.process(values(&mut a))).map_err(value_error)?;
                PyArray2::from_owned_array(py, a).into_any()
            }
            Chunk::F64(mut a) => {
                let b = self.block.f64(what)?;
                crate::exit::detach(py, || b.process(values(&mut a))).map_err(value_error)?;
                PyArray2::from_owned_array(py, a).into_any()
            }
        })
    }

    /// Back to no fixed dtype (a re-reference has no other state).
    fn reset(&mut self) -> PyResult<()> {
        let b =
            Reref::new(self.channels, self.reference.as_deref(), self.kind).map_err(value_error)?;
        self.block = Pinned::new(b);
        Ok(())
    }

    /// 0: each sample is re-referenced with its own values.
    #[getter]
    fn delay_samples(&self) -> usize {
        0
    }

    /// Channels per sample.
    #[getter]
    fn channels(&self) -> usize {
        self.channels
    }
}

// ---------------------------------------------------------------------------------------

/// Threshold-crossing spike detection per channel on a running robust noise estimate
/// (sigma = median(|x|) / 0.6745 over the last ``noise_window`` samples, renewed every
/// ``noise_window`` samples, what is not noise left out: NaN, infinities, exact zeros, a
/// value repeating one of the channel's last 24 kept and values below a thousandth of its lowest
/// recent level, a held or dead input); a spike crosses ``k`` sigma (``sign`` ``"negative"``,
/// ``"positive"`` or ``"both"``) at least ``refractory`` samples after its channel's last;
/// its event comes when its peak is known, at most ``peak_window`` samples after the
/// crossing. Nothing is detected in the first ``noise_window`` samples.
///
/// ``SpikeDetector(channels, *, noise_window, peak_window, refractory, k=5.0,
/// sign="negative")``; ``process(chunk)`` returns the spikes found as a structured array
/// with fields ``channel`` (int64), ``sample`` (int64, the peak's sample counted from the
/// detector's first) and ``peak`` (the value there, the chunk's dtype).
#[pyclass(module = "rtloop._rtloop", name = "SpikeDetector")]
pub(crate) struct PySpikeDetector {
    cfg: SpikeConfig,
    block: Pinned<SpikeDetector<f32>, SpikeDetector<f64>>,
}

/// The spikes whose peak `chunk` made known, as (channel, sample, peak).
fn spikes_of<T: num_traits::Float + Send>(
    py: Python<'_>,
    d: &mut SpikeDetector<T>,
    a: &mut Array2<T>,
) -> PyResult<Vec<(usize, u64, T)>> {
    crate::exit::detach(py, || {
        let mut found = Vec::new();
        d.process(values(a), |s| found.push((s.channel, s.sample, s.peak)))
            .map(|()| found)
    })
    .map_err(value_error)
}

#[pymethods]
impl PySpikeDetector {
    #[new]
    #[pyo3(signature = (channels, *, noise_window, peak_window, refractory, k=5.0, sign="negative"))]
    fn new(
        channels: i64,
        noise_window: i64,
        peak_window: i64,
        refractory: i64,
        k: f64,
        sign: &str,
    ) -> PyResult<Self> {
        let sign = match choice(sign, "sign", &["negative", "positive", "both"])? {
            "negative" => Sign::Negative,
            "positive" => Sign::Positive,
            _ => Sign::Both,
        };
        let cfg = SpikeConfig {
            channels: count(channels, "channels")?,
            k,
            sign,
            refractory: count(refractory, "refractory")?,
            peak_window: count(peak_window, "peak_window")?,
            noise_window: count(noise_window, "noise_window")?,
        };
        let block64 = SpikeDetector::new(cfg).map_err(value_error)?;
        Ok(PySpikeDetector {
            cfg,
            block: Pinned::new(block64),
        })
    }

    /// Look at ``chunk`` and return the spikes whose peak is now known (a structured array:
    /// ``channel``, ``sample``, ``peak``; empty if none).
    fn process<'py>(
        &mut self,
        py: Python<'py>,
        chunk: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let what = "SpikeDetector";
        match take_chunk(chunk, self.cfg.channels, what)? {
            Chunk::F32(mut a) => {
                let cfg = self.cfg;
                let d = self
                    .block
                    .f32(what, || SpikeDetector::new(cfg).map_err(value_error))?;
                let found = spikes_of(py, d, &mut a)?;
                events_array(py, ["sample", "peak"], found, values_array)
            }
            Chunk::F64(mut a) => {
                let d = self.block.f64(what)?;
                let found = spikes_of(py, d, &mut a)?;
                events_array(py, ["sample", "peak"], found, values_array)
            }
        }
    }

    /// Back to before the first sample (no noise estimate, samples counted from 0 again,
    /// no fixed dtype).
    fn reset(&mut self) -> PyResult<()> {
        self.block = Pinned::new(SpikeDetector::new(self.cfg).map_err(value_error)?);
        Ok(())
    }

    /// Each channel's threshold now, in the signal's units (float64; ``inf`` before the
    /// first noise estimate and on a channel held, flat or dead for four windows).
    #[getter]
    fn thresholds<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        let t: Vec<f64> = match &self.block.block {
            Typed::F32(d) => d.thresholds().iter().map(|&v| f64::from(v)).collect(),
            Typed::F64(d) => d.thresholds().to_vec(),
        };
        PyArray1::from_vec(py, t)
    }

    /// The most samples between a spike's peak and its event (``peak_window``).
    #[getter]
    fn delay_samples(&self) -> usize {
        self.cfg.peak_window
    }

    /// Channels per sample.
    #[getter]
    fn channels(&self) -> usize {
        self.cfg.channels
    }
}

// ---------------------------------------------------------------------------------------

/// The envelope: each channel's moving root mean square over the last ``window`` samples
/// (samples before the first count as 0). On a band-passed signal its square is the band
/// power. Delay: ``(window - 1) / 2`` samples.
///
/// ``MovingRms(channels, window)``; ``process(chunk)`` returns the envelope, same shape and
/// dtype.
#[pyclass(module = "rtloop._rtloop", name = "MovingRms")]
pub(crate) struct PyMovingRms {
    channels: usize,
    window: usize,
    block: Pinned<MovingRms<f32>, MovingRms<f64>>,
}

#[pymethods]
impl PyMovingRms {
    #[new]
    #[pyo3(signature = (channels, window))]
    fn new(channels: i64, window: i64) -> PyResult<Self> {
        let (channels, window) = (count(channels, "channels")?, count(window, "window")?);
        let block64 = MovingRms::new(channels, window).map_err(value_error)?;
        Ok(PyMovingRms {
            channels,
            window,
            block: Pinned::new(block64),
        })
    }

    /// Return each value of ``chunk`` replaced by its channel's moving RMS (a new array).
    fn process<'py>(
        &mut self,
        py: Python<'py>,
        chunk: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let what = "MovingRms";
        Ok(match take_chunk(chunk, self.channels, what)? {
            Chunk::F32(mut a) => {
                let (ch, w) = (self.channels, self.window);
                let b = self
                    .block
                    .f32(what, || MovingRms::new(ch, w).map_err(value_error))?;
                crate::exit::detach(py, || b.process(values(&mut a))).map_err(value_error)?;
                PyArray2::from_owned_array(py, a).into_any()
            }
            Chunk::F64(mut a) => {
                let b = self.block.f64(what)?;
                crate::exit::detach(py, || b.process(values(&mut a))).map_err(value_error)?;
                PyArray2::from_owned_array(py, a).into_any()
            }
        })
    }

    /// Back to before the first sample.
    fn reset(&mut self) -> PyResult<()> {
        let b = MovingRms::new(self.channels, self.window).map_err(value_error)?;
        self.block = Pinned::new(b);
        Ok(())
    }

    /// ``(window - 1) / 2``: the centre of the window.
    #[getter]
    fn delay_samples(&self) -> f64 {
        match &self.block.block {
            Typed::F32(b) => b.delay_samples(),
            Typed::F64(b) => b.delay_samples(),
        }
    }

    /// Channels per sample.
    #[getter]
    fn channels(&self) -> usize {
        self.channels
    }
}

// ---------------------------------------------------------------------------------------

/// Anti-aliased decimation by a whole ``factor``, causal: an order-8 Butterworth low-pass
/// at 0.8 of the new Nyquist frequency, then every ``factor``-th sample counted across
/// chunks (``sosfilt(butter(8, 0.8 / factor, output="sos"), x)[::factor]``).
///
/// ``Decimator(channels, factor)``; ``process(chunk)`` returns the kept samples (fewer
/// rows, possibly none), same dtype.
#[pyclass(module = "rtloop._rtloop", name = "Decimator")]
pub(crate) struct PyDecimator {
    channels: usize,
    factor: usize,
    block: Pinned<Decimator<f32>, Decimator<f64>>,
}

fn decimate<T: num_traits::Float + Send>(
    py: Python<'_>,
    d: &mut Decimator<T>,
    mut a: Array2<T>,
    channels: usize,
) -> PyResult<Array2<T>> {
    let mut out = Array2::zeros((d.kept(a.nrows()), channels));
    crate::exit::detach(py, || d.process(values(&mut a), values(&mut out))).map_err(value_error)?;
    Ok(out)
}

#[pymethods]
impl PyDecimator {
    #[new]
    #[pyo3(signature = (channels, factor))]
    fn new(channels: i64, factor: i64) -> PyResult<Self> {
        let (channels, factor) = (count(channels, "channels")?, count(factor, "factor")?);
        let block64 = Decimator::new(channels, factor).map_err(value_error)?;
        Ok(PyDecimator {
            channels,
            factor,
            block: Pinned::new(block64),
        })
    }

    /// Filter ``chunk`` and return its kept samples (every ``factor``-th counted from the
    /// first sample ever given; a new array of fewer rows, same dtype).
    fn process<'py>(
        &mut self,
        py: Python<'py>,
        chunk: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let what = "Decimator";
        let ch = self.channels;
        Ok(match take_chunk(chunk, ch, what)? {
            Chunk::F32(a) => {
                let f = self.factor;
                let d = self
                    .block
                    .f32(what, || Decimator::new(ch, f).map_err(value_error))?;
                PyArray2::from_owned_array(py, decimate(py, d, a, ch)?).into_any()
            }
            Chunk::F64(a) => {
                let d = self.block.f64(what)?;
                PyArray2::from_owned_array(py, decimate(py, d, a, ch)?).into_any()
            }
        })
    }

    /// Back to before the first sample.
    fn reset(&mut self) -> PyResult<()> {
        let b = Decimator::new(self.channels, self.factor).map_err(value_error)?;
        self.block = Pinned::new(b);
        Ok(())
    }

    /// The low-pass's group delay at 0 Hz, in input samples.
    #[getter]
    fn delay_samples(&self) -> f64 {
        match &self.block.block {
            Typed::F32(b) => b.delay_samples(),
            Typed::F64(b) => b.delay_samples(),
        }
    }

    /// One sample in ``factor`` is kept.
    #[getter]
    fn factor(&self) -> usize {
        self.factor
    }

    /// Channels per sample.
    #[getter]
    fn channels(&self) -> usize {
        self.channels
    }
}

// ---------------------------------------------------------------------------------------

/// Sharp-wave ripple detection per channel: the signal band-passed (Butterworth ``band``,
/// ``order``), its moving RMS over ``rms_window`` samples, z-scored against a running
/// baseline (time constant ``baseline`` samples); a ripple is reported at its
/// ``min_duration``-th sample above ``z_start`` and ends below ``z_end``; nothing in the
/// first ``warmup`` samples. Parameters left ``None`` take the usual values for ``rate``:
/// a 150-250 Hz band, an 8 ms RMS window, 15 ms minimum duration, a 2 s baseline and 2 s
/// warm-up.
///
/// ``process(chunk)`` (float32 or float64; computed in float64) returns the ripples detected
/// as a structured array with fields ``channel``, ``onset`` (where the z-score rose above
/// ``z_start``) and ``detected`` (the event's sample), all int64, counted from the
/// detector's first sample.
#[pyclass(module = "rtloop._rtloop", name = "RippleDetector")]
pub(crate) struct PyRippleDetector {
    cfg: RippleConfig,
    block: RippleDetector,
}

#[pymethods]
impl PyRippleDetector {
    #[new]
    #[pyo3(signature = (channels, rate, *, band=None, order=3, rms_window=None, z_start=3.0, z_end=1.0, min_duration=None, baseline=None, warmup=None))]
    #[allow(clippy::too_many_arguments)] // the detector's settings, each a keyword in Python
    fn new(
        channels: i64,
        rate: f64,
        band: Option<&Bound<'_, PyAny>>,
        order: i64,
        rms_window: Option<i64>,
        z_start: f64,
        z_end: f64,
        min_duration: Option<i64>,
        baseline: Option<f64>,
        warmup: Option<i64>,
    ) -> PyResult<Self> {
        let mut cfg = RippleConfig::usual(count(channels, "channels")?, rate);
        if let Some(b) = band {
            cfg.band = edges(b, "band")?;
        }
        cfg.order = count(order, "order")?;
        cfg.z_start = z_start;
        cfg.z_end = z_end;
        if let Some(w) = rms_window {
            cfg.rms_window = count(w, "rms_window")?;
        }
        if let Some(m) = min_duration {
            cfg.min_duration = count(m, "min_duration")?;
        }
        if let Some(b) = baseline {
            cfg.baseline = b;
        }
        if let Some(w) = warmup {
            cfg.warmup = count(w, "warmup")? as u64;
        }
        let block = RippleDetector::new(cfg).map_err(value_error)?;
        Ok(PyRippleDetector { cfg, block })
    }

    /// Look at ``chunk`` and return the ripples detected in it (a structured array:
    /// ``channel``, ``onset``, ``detected``; empty if none).
    fn process<'py>(
        &mut self,
        py: Python<'py>,
        chunk: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let chunk = take_chunk(chunk, self.cfg.channels, "RippleDetector")?;
        let b = &mut self.block;
        let mut found = Vec::new();
        let mut emit = |r: rtloop_dsp::Ripple| found.push((r.channel, r.onset, r.detected));
        crate::exit::detach(py, || match chunk {
            Chunk::F32(mut a) => b.process(values(&mut a), &mut emit),
            Chunk::F64(mut a) => b.process(values(&mut a), &mut emit),
        })
        .map_err(value_error)?;
        events_array(py, ["onset", "detected"], found, samples_array)
    }

    /// Back to before the first sample.
    fn reset(&mut self) -> PyResult<()> {
        self.block = RippleDetector::new(self.cfg).map_err(value_error)?;
        Ok(())
    }

    /// The envelope's lag behind the ripple, in samples (the band-pass's group delay at the
    /// band's centre plus half the RMS window); an event comes ``min_duration - 1`` samples
    /// after that.
    #[getter]
    fn delay_samples(&self) -> f64 {
        self.block.delay_samples()
    }

    /// Channels per sample.
    #[getter]
    fn channels(&self) -> usize {
        self.cfg.channels
    }
}

// ---------------------------------------------------------------------------------------

/// Causal phase estimation of ``band`` (Hz) by the endpoint-corrected Hilbert transform
/// (ecHT) over the last ``window`` samples, and a trigger when a channel's phase passes
/// ``target`` (radians; 0 the peak, -pi/2 the rising zero crossing) going forward with an
/// amplitude of at least ``min_amplitude``, at least ``refractory`` samples after its last.
/// The phase is of the newest sample: delay 0.
///
/// ``process(chunk)`` (float32 or float64; computed in float64) returns the triggers as a
/// structured array with fields ``channel``, ``sample`` (int64, counted from the tracker's
/// first sample) and ``phase`` (float64, radians).
#[pyclass(module = "rtloop._rtloop", name = "PhaseTracker")]
pub(crate) struct PyPhaseTracker {
    cfg: PhaseConfig,
    block: PhaseTracker,
}

#[pymethods]
impl PyPhaseTracker {
    #[new]
    #[pyo3(signature = (channels, rate, band, window, *, target=0.0, min_amplitude=0.0, refractory=0))]
    fn new(
        channels: i64,
        rate: f64,
        band: &Bound<'_, PyAny>,
        window: i64,
        target: f64,
        min_amplitude: f64,
        refractory: i64,
    ) -> PyResult<Self> {
        let cfg = PhaseConfig {
            channels: count(channels, "channels")?,
            rate,
            band: edges(band, "band")?,
            window: count(window, "window")?,
            target,
            min_amplitude,
            refractory: count(refractory, "refractory")?,
        };
        let block = PhaseTracker::new(cfg).map_err(value_error)?;
        Ok(PyPhaseTracker { cfg, block })
    }

    /// Look at ``chunk`` and return the triggers in it (a structured array: ``channel``,
    /// ``sample``, ``phase``; empty if none).
    fn process<'py>(
        &mut self,
        py: Python<'py>,
        chunk: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let chunk = take_chunk(chunk, self.cfg.channels, "PhaseTracker")?;
        let b = &mut self.block;
        let mut found = Vec::new();
        let mut emit = |t: rtloop_dsp::PhaseTrigger| found.push((t.channel, t.sample, t.phase));
        crate::exit::detach(py, || match chunk {
            Chunk::F32(mut a) => b.process(values(&mut a), &mut emit),
            Chunk::F64(mut a) => b.process(values(&mut a), &mut emit),
        })
        .map_err(value_error)?;
        events_array(py, ["sample", "phase"], found, values_array)
    }

    /// Back to before the first sample.
    fn reset(&mut self) -> PyResult<()> {
        self.block = PhaseTracker::new(self.cfg).map_err(value_error)?;
        Ok(())
    }

    /// Each channel's latest estimate: ``(phase, amplitude)``, two float64 arrays (phase in
    /// radians; both 0 until the first window is full).
    #[getter]
    fn latest<'py>(
        &self,
        py: Python<'py>,
    ) -> (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>) {
        let (p, a): (Vec<f64>, Vec<f64>) = self.block.latest().iter().copied().unzip();
        (PyArray1::from_vec(py, p), PyArray1::from_vec(py, a))
    }

    /// 0: the phase is of the newest sample (its error is against the offline phase).
    #[getter]
    fn delay_samples(&self) -> f64 {
        0.0
    }

    /// Channels per sample.
    #[getter]
    fn channels(&self) -> usize {
        self.cfg.channels
    }
}

/// Add the classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySosFilter>()?;
    m.add_class::<PyReref>()?;
    m.add_class::<PySpikeDetector>()?;
    m.add_class::<PyMovingRms>()?;
    m.add_class::<PyDecimator>()?;
    m.add_class::<PyRippleDetector>()?;
    m.add_class::<PyPhaseTracker>()?;
    Ok(())
}
