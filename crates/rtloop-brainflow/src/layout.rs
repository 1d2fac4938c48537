//! A board's description (BrainFlow's `get_board_descr` JSON, one per preset) as rtloop
//! streams: one stream per kind of data (`eeg`, `accel`, ...), each with its rows of
//! BrainFlow's data table, channel names, types and units, and one `board` stream per preset
//! with BrainFlow's bookkeeping rows (package number, timestamp, marker).

use crate::ffi::preset;
use crate::BrainFlowError;

/// Kinds of data in the order rows are claimed: a row BrainFlow lists under several kinds
/// (its ExG rows are EEG, EMG, ECG and EOG alike) goes to the first, and the others are
/// noted as what the rows may also be.
/// (descriptor key, stream suffix, channel type, unit, content type, channel name stem)
const KINDS: &[(&str, &str, &str, &str, &str, &str)] = &[
    ("eeg_channels", "eeg", "EEG", "µV", "EEG", ""),
    ("emg_channels", "emg", "EMG", "µV", "EMG", "EMG"),
    ("ecg_channels", "ecg", "ECG", "µV", "ECG", "ECG"),
    ("eog_channels", "eog", "EOG", "µV", "EOG", "EOG"),
    (
        "accel_channels",
        "accel",
        "ACC",
        "",
        "Accelerometer",
        "accel_",
    ),
    ("gyro_channels", "gyro", "GYRO", "", "Gyroscope", "gyro_"),
    (
        "magnetometer_channels",
        "mag",
        "MAG",
        "",
        "Magnetometer",
        "mag_",
    ),
    (
        "rotation_channels",
        "rotation",
        "ROTATION",
        "",
        "Rotation",
        "rotation",
    ),
    ("ppg_channels", "ppg", "PPG", "", "PPG", "ppg"),
    (
        "optical_channels",
        "optical",
        "OPTICAL",
        "",
        "Optical",
        "optical",
    ),
    ("eda_channels", "eda", "EDA", "", "EDA", "eda"),
    (
        "temperature_channels",
        "temperature",
        "TEMP",
        "",
        "Temperature",
        "temperature",
    ),
    (
        "resistance_channels",
        "resistance",
        "RESISTANCE",
        "",
        "Resistance",
        "resistance",
    ),
    (
        "analog_channels",
        "analog",
        "ANALOG",
        "",
        "Analog",
        "analog",
    ),
    (
        "battery_channel",
        "battery",
        "BATTERY",
        "",
        "Battery",
        "battery",
    ),
    ("other_channels", "other", "MISC", "", "Other", "other"),
];

/// One stream of a preset: which rows of BrainFlow's data table it holds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct KindStream {
    /// The stream name's suffix after the prefix (`eeg`, `accel`, `board`, `aux.board`).
    pub suffix: String,
    /// The kind (`eeg`, ..., `board` for the bookkeeping rows).
    pub kind: &'static str,
    /// The rows of BrainFlow's data table, in channel order.
    pub rows: Vec<usize>,
    /// Channel names.
    pub names: Vec<String>,
    /// Channel type (`EEG`, `ACC`, ...).
    pub ch_type: &'static str,
    /// Unit of every channel (`µV` for ExG, which BrainFlow gives in µV; empty when BrainFlow
    /// does not say).
    pub unit: &'static str,
    /// The stream's content type.
    pub content_type: &'static str,
    /// Other kinds BrainFlow lists for the same rows (an ExG row is EEG, EMG, ECG or EOG by
    /// where the electrode sits).
    pub also: Vec<&'static str>,
}

/// One preset (buffer) of a board: its rate, rows and streams.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PresetLayout {
    /// `BrainFlowPresets` value.
    pub preset: i32,
    /// `default`, `auxiliary`, `ancillary`.
    pub preset_name: &'static str,
    /// The device name BrainFlow gives (`Synthetic`, `Cyton`).
    pub device: String,
    /// Samples per second.
    pub rate: f64,
    /// Rows of BrainFlow's data table.
    pub num_rows: usize,
    /// The package (sample) number row.
    pub package_row: Option<usize>,
    /// The timestamp row (UNIX seconds).
    pub timestamp_row: Option<usize>,
    /// The marker row.
    pub marker_row: Option<usize>,
    /// Its streams: the kinds of data, then `board`.
    pub streams: Vec<KindStream>,
}

/// The name of a preset.
#[must_use]
pub fn preset_name(p: i32) -> &'static str {
    match p {
        preset::DEFAULT => "default",
        preset::AUXILIARY => "auxiliary",
        _ => "ancillary",
    }
}

fn preset_short(p: i32) -> &'static str {
    match p {
        preset::DEFAULT => "",
        preset::AUXILIARY => "aux",
        _ => "anc",
    }
}

fn rows_of(v: &serde_json::Value, key: &str) -> Vec<usize> {
    match v.get(key) {
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .filter_map(serde_json::Value::as_u64)
            .map(|r| r as usize)
            .collect(),
        Some(serde_json::Value::Number(n)) => {
            n.as_u64().map(|r| vec![r as usize]).unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

fn names_for(stem: &str, kind: &str, n: usize, eeg_names: Option<&str>) -> Vec<String> {
    if kind == "eeg" {
        if let Some(names) = eeg_names {
            let v: Vec<String> = names.split(',').map(|s| s.trim().to_string()).collect();
            if v.len() == n && v.iter().all(|s| !s.is_empty()) {
                return v;
            }
        }
        return (1..=n).map(|i| format!("EEG{i}")).collect();
    }
    if n == 1 {
        return vec![kind.to_string()];
    }
    if stem.ends_with('_') && n == 3 {
        return ["x", "y", "z"]
            .iter()
            .map(|a| format!("{stem}{a}"))
            .collect();
    }
    let stem = stem.trim_end_matches('_');
    (1..=n).map(|i| format!("{stem}{i}")).collect()
}

/// The layout of one preset from its descriptor JSON. `taken` holds the suffixes earlier
/// presets used: a kind already named there gets the preset before it (`aux.accel`).
pub fn preset_layout(
    preset: i32,
    descr: &serde_json::Value,
    taken: &mut Vec<String>,
) -> Result<PresetLayout, BrainFlowError> {
    let bad =
        |what: &str| BrainFlowError::Descriptor(format!("preset {}: {what}", preset_name(preset)));
    let num_rows = descr
        .get("num_rows")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| bad("no num_rows"))? as usize;
    let rate = descr
        .get("sampling_rate")
        .and_then(serde_json::Value::as_f64)
        .ok_or_else(|| bad("no sampling_rate"))?;
    let one = |k: &str| {
        descr
            .get(k)
            .and_then(serde_json::Value::as_u64)
            .map(|r| r as usize)
    };
    let (package_row, timestamp_row, marker_row) = (
        one("package_num_channel"),
        one("timestamp_channel"),
        one("marker_channel"),
    );
    let eeg_names = descr.get("eeg_names").and_then(serde_json::Value::as_str);
    let mut claimed = vec![false; num_rows];
    for r in [package_row, timestamp_row, marker_row]
        .into_iter()
        .flatten()
    {
        if r < num_rows {
            claimed[r] = true;
        }
    }
    let mut streams: Vec<KindStream> = Vec::new();
    let suffix_of = |kind: &str, taken: &mut Vec<String>| {
        let s =
            if preset == preset::DEFAULT || (kind != "board" && !taken.iter().any(|t| t == kind)) {
                kind.to_string()
            } else {
                format!("{}.{kind}", preset_short(preset))
            };
        taken.push(s.clone());
        s
    };
    for &(key, kind, ch_type, unit, content_type, stem) in KINDS {
        let all = rows_of(descr, key);
        if all.iter().any(|&r| r >= num_rows) {
            return Err(bad(&format!("{key} beyond num_rows {num_rows}")));
        }
        let rows: Vec<usize> = all.iter().copied().filter(|&r| !claimed[r]).collect();
        if rows.is_empty() {
            if !all.is_empty() {
                // the same rows as an earlier kind: note it there
                if let Some(s) = streams
                    .iter_mut()
                    .find(|s| all.iter().all(|r| s.rows.contains(r)))
                {
                    s.also.push(kind);
                }
            }
            continue;
        }
        for &r in &rows {
            claimed[r] = true;
        }
        let names = names_for(stem, kind, rows.len(), eeg_names);
        streams.push(KindStream {
            suffix: suffix_of(kind, taken),
            kind,
            rows,
            names,
            ch_type,
            unit,
            content_type,
            also: Vec::new(),
        });
    }
    let mut board = KindStream {
        suffix: suffix_of("board", taken),
        kind: "board",
        rows: Vec::new(),
        names: Vec::new(),
        ch_type: "MISC",
        unit: "",
        content_type: "BrainFlow",
        also: Vec::new(),
    };
    for (row, name) in [
        (package_row, "package_num"),
        (timestamp_row, "timestamp"),
        (marker_row, "marker"),
    ] {
        if let Some(r) = row.filter(|&r| r < num_rows) {
            board.rows.push(r);
            board.names.push(name.to_string());
        }
    }
    if !board.rows.is_empty() {
        streams.push(board);
    }
    Ok(PresetLayout {
        preset,
        preset_name: preset_name(preset),
        device: descr
            .get("name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string(),
        rate,
        num_rows,
        package_row,
        timestamp_row,
        marker_row,
        streams,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // the synthetic board's descriptions as BrainFlow 5.23 gives them
    const DEFAULT: &str = r#"{"accel_channels": [17, 18, 19], "battery_channel": 29, "ecg_channels": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16], "eda_channels": [23], "eeg_channels": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16], "eeg_names": "Fz,C3,Cz,C4,Pz,PO7,Oz,PO8,F5,F7,F3,F1,F2,F4,F6,F8", "emg_channels": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16], "eog_channels": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16], "gyro_channels": [20, 21, 22], "marker_channel": 31, "name": "Synthetic", "num_rows": 32, "package_num_channel": 0, "ppg_channels": [24, 25], "resistance_channels": [27, 28], "sampling_rate": 250, "temperature_channels": [26], "timestamp_channel": 30}"#;
    const AUX: &str = r#"{"accel_channels": [2, 3, 4], "battery_channel": 1, "eda_channels": [8], "gyro_channels": [5, 6, 7], "marker_channel": 19, "name": "SyntheticAux", "num_rows": 20, "other_channels": [14, 15, 16, 17], "package_num_channel": 0, "ppg_channels": [9, 10], "resistance_channels": [12, 13], "sampling_rate": 250, "temperature_channels": [11], "timestamp_channel": 18}"#;

    #[test]
    fn brainflow_keeps_ten_minutes_of_the_fastest_preset_and_at_least_45000_samples() {
        let mut taken = Vec::new();
        let main = preset_layout(0, &serde_json::from_str(DEFAULT).unwrap(), &mut taken).unwrap();
        let mut slow = main.clone();
        slow.rate = 50.0;
        assert_eq!(
            crate::buffer_samples(&[slow.clone(), main.clone()]),
            150_000
        );
        assert_eq!(crate::buffer_samples(&[slow]), 45_000);
        assert_eq!(crate::buffer_samples(&[]), 45_000);
    }

    #[test]
    fn every_row_of_the_synthetic_board_lands_in_one_stream() {
        let mut taken = Vec::new();
        let d = preset_layout(0, &serde_json::from_str(DEFAULT).unwrap(), &mut taken).unwrap();
        let suffixes: Vec<&str> = d.streams.iter().map(|s| s.suffix.as_str()).collect();
        assert_eq!(
            suffixes,
            [
                "eeg",
                "accel",
                "gyro",
                "ppg",
                "eda",
                "temperature",
                "resistance",
                "battery",
                "board"
            ]
        );
        let eeg = &d.streams[0];
        assert_eq!(eeg.names[..3], ["Fz", "C3", "Cz"]);
        assert_eq!((eeg.unit, eeg.ch_type, eeg.rows.len()), ("µV", "EEG", 16));
        assert_eq!(eeg.also, ["emg", "ecg", "eog"]);
        assert_eq!(d.streams[1].names, ["accel_x", "accel_y", "accel_z"]);
        assert_eq!(d.streams[8].names, ["package_num", "timestamp", "marker"]);
        assert_eq!(d.streams[8].rows, [0, 30, 31]);
        let mut rows: Vec<usize> = d.streams.iter().flat_map(|s| s.rows.clone()).collect();
        rows.sort_unstable();
        assert_eq!(rows, (0..32).collect::<Vec<_>>());
        let a = preset_layout(1, &serde_json::from_str(AUX).unwrap(), &mut taken).unwrap();
        let suffixes: Vec<&str> = a.streams.iter().map(|s| s.suffix.as_str()).collect();
        assert_eq!(
            suffixes,
            [
                "aux.accel",
                "aux.gyro",
                "aux.ppg",
                "aux.eda",
                "aux.temperature",
                "aux.resistance",
                "aux.battery",
                "other",
                "aux.board"
            ]
        );
    }
}
