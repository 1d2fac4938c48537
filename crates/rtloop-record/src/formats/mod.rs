//! The recorded formats rtloop replays, each opened as a [`FlatSource`] that
//! [`crate::replay::play`] plays: rtloop recordings, XDF, SpikeGLX, Open Ephys binary, NWB.

use std::path::Path;

use crate::replay::{FlatSource, SourceError};

pub mod npy;
pub mod nwb;
pub mod openephys;
pub mod spikeglx;

/// The formats [`open`] tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A directory `rtloop record` wrote (`header.json`).
    Recording,
    /// An `.xdf` file.
    Xdf,
    /// SpikeGLX `.bin` + `.meta`.
    SpikeGlx,
    /// Open Ephys binary (`structure.oebin`).
    OpenEphys,
    /// NWB (`.nwb`, HDF5).
    Nwb,
}

/// Which format `path` is, from its name and what is in it.
///
/// # Errors
/// [`SourceError::Io`] when the path does not exist, [`SourceError::Unrecognised`] when it
/// is none of the formats (saying which are allowed).
pub fn detect(path: &Path) -> Result<Format, SourceError> {
    // a regular file or a directory, before anything opens it: opening a FIFO would block
    crate::replay::regular(path, true)?;
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let by_ext = match ext.as_deref() {
        Some("xdf" | "xdfz") => Some(Format::Xdf),
        Some("nwb") => Some(Format::Nwb),
        Some("oebin") => Some(Format::OpenEphys),
        Some("bin" | "meta") if path.is_file() => Some(Format::SpikeGlx),
        _ => None,
    };
    if let Some(f) = by_ext {
        return Ok(f);
    }
    if path.is_dir() {
        if path.join("header.json").is_file() {
            return Ok(Format::Recording);
        }
        if openephys::detect(path) {
            return Ok(Format::OpenEphys);
        }
        if spikeglx::detect(path) {
            return Ok(Format::SpikeGlx);
        }
    } else {
        let mut magic = [0u8; 8];
        if let Ok(mut f) = std::fs::File::open(path) {
            use std::io::Read;
            let _ = f.read(&mut magic);
        }
        if &magic[..4] == b"XDF:" {
            return Ok(Format::Xdf);
        }
        if magic == *b"\x89HDF\r\n\x1a\n" {
            return Ok(Format::Nwb);
        }
    }
    Err(SourceError::Unrecognised {
        path: path.to_owned(),
        detail: if path.is_dir() {
            "a directory with no recording in it (no header.json, no structure.oebin, no SpikeGLX .bin with its .meta)".into()
        } else {
            "a file of no format rtloop knows".into()
        },
    })
}

/// The series `path` holds: all of them when it holds several (an XDF file: its first
/// numeric stream).
///
/// # Errors
/// As [`open`], but for several series.
pub fn series(path: &Path) -> Result<Vec<String>, SourceError> {
    match open(path, None) {
        Ok(src) => Ok(vec![src.info_series().to_owned()]),
        Err(SourceError::Ambiguous { series, .. }) => Ok(series),
        Err(e) => Err(e),
    }
}

/// Open `path` in whatever format it is; `series` picks the series (an NWB
/// TimeSeries, an Open Ephys stream, a SpikeGLX `.bin`, an XDF stream) when it holds
/// several.
///
/// # Errors
/// An unknown format, a malformed file (what is wrong), several series and none picked
/// (listing them), or an unknown series (listing them).
pub fn open(path: &Path, series: Option<&str>) -> Result<FlatSource, SourceError> {
    match detect(path)? {
        Format::Recording => {
            let src = crate::replay::open_recording(path)?;
            if let Some(w) = series.filter(|w| *w != src.info_series()) {
                return Err(SourceError::UnknownSeries {
                    path: path.to_owned(),
                    wanted: w.to_owned(),
                    series: vec![src.info_series().to_owned()],
                });
            }
            Ok(src)
        }
        Format::Xdf => {
            // converted to a recording in a private temporary directory, which can go as
            // soon as its files are mapped
            let tmp = std::env::temp_dir().join(format!(
                "rtloop-xdf-{}-{}",
                std::process::id(),
                rtloop_sys::monotonic_ns()
            ));
            let r = crate::xdf::to_recording(path, series, &tmp)
                .map_err(SourceError::from)
                .and_then(|_| crate::replay::open_recording(&tmp));
            let _ = std::fs::remove_dir_all(&tmp);
            let mut src = r?;
            src.set_origin("xdf", path);
            Ok(src)
        }
        Format::SpikeGlx => spikeglx::open(path, series),
        Format::OpenEphys => openephys::open(path, series),
        Format::Nwb => nwb::open(path, series),
    }
}
