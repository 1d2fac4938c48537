//! `rtloop replay` as a real process on SpikeGLX and Open Ephys files written here, read back
//! from the real stream: every sample, names, units, gains in the description, TTL events at
//! their samples, and bad input named. (tests/test_replay.py holds the same formats against
//! neo and pynwb.)

use std::path::Path;
use std::process::{Command, Output};

use rtloop_stream::{EventValue, ReaderMode, Stream};
use rtloop_testkit::{unique_name, StreamGuard, TempDir};

fn rtloop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rtloop"))
        .args(args)
        .output()
        .expect("rtloop runs")
}

fn samples(rows: usize, channels: usize) -> Vec<i16> {
    (0..rows * channels)
        .map(|i| ((i * 7919) % 65536) as u16 as i16)
        .collect()
}

fn bytes(x: &[i16]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Replay `path` as fast as possible into `name` (kept: it is read after the replay ended);
/// the stream's samples and events.
fn replay(path: &Path, name: &str, extra: &[&str]) -> (Stream, Vec<u8>, Vec<rtloop_stream::Event>) {
    let mut args = vec![
        "replay",
        path.to_str().unwrap(),
        "--fast",
        "--keep",
        "--stream",
        name,
    ];
    args.extend_from_slice(extra);
    let o = rtloop(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = Stream::open(name).unwrap();
    let r = s.reader(ReaderMode::Latest).unwrap();
    let n = s.written();
    let w = r.window(0, n).unwrap();
    let mut data = vec![0u8; n as usize * s.info().sample_bytes];
    w.copy_to(&mut data).unwrap();
    let ev = r.read_events(0, s.events_written()).unwrap();
    (s, data, ev)
}

fn npy(path: &Path, descr: &str, data: &[u8], n: usize) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let b = rtloop_record::formats::npy::encode(descr, &format!("({n},)"), data);
    std::fs::write(path, b).unwrap();
}

#[test]
fn spikeglx_file_replays_every_sample_with_names_and_gains() {
    let dir = TempDir::new("replay-sglx");
    let name = StreamGuard::new(&unique_name("replay-sglx"));
    let (rows, ch) = (3000, 5);
    let x = samples(rows, ch);
    let bin = dir.path().join("run_g0_t0.imec0.ap.bin");
    std::fs::write(&bin, bytes(&x)).unwrap();
    let mut imro = "(0,384)".to_string();
    for c in 0..384 {
        imro += &format!("({c} 0 0 500 250 1)");
    }
    let meta = format!(
        "imAiRangeMax=0.6\nimMaxInt=512\nimSampRate=30000\nnSavedChans={ch}\nsnsApLfSy=4,0,1\n\
         typeThis=imec\nfileSizeBytes={}\n~imroTbl={imro}\n\
         ~snsChanMap=(4,0,1)(AP0;0:0)(AP1;1:1)(AP2;2:2)(AP3;3:3)(SY0;768:768)\n",
        rows * ch * 2
    );
    std::fs::write(bin.with_extension("meta"), meta).unwrap();
    let (s, data, events) = replay(&bin, name.name(), &[]);
    assert_eq!(data, bytes(&x));
    assert!(events.is_empty());
    let info = s.info();
    assert_eq!(info.dtype, rtloop_stream::DType::I16);
    assert_eq!(info.nominal_rate, 30000.0);
    assert_eq!(info.ch_names, ["AP0", "AP1", "AP2", "AP3", "SY0"]);
    assert_eq!(info.ch_units, ["uV", "uV", "uV", "uV", ""]);
    let desc: serde_json::Value = serde_json::from_str(&info.description).unwrap();
    assert_eq!(desc["gain"], serde_json::json!([[2.34375, 4], [1.0, 1]]));
    assert_eq!(desc["replay"]["format"], "spikeglx");

    // the .meta gone: said so, with what it is for
    std::fs::remove_file(bin.with_extension("meta")).unwrap();
    let o = rtloop(&["replay", bin.to_str().unwrap(), "--stream", name.name()]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("run_g0_t0.imec0.ap.meta: missing: SpikeGLX writes a .meta beside every .bin"),
        "{e}"
    );
}

#[test]
fn openephys_recording_replays_with_ttl_events_at_their_samples() {
    let dir = TempDir::new("replay-oe");
    let name = StreamGuard::new(&unique_name("replay-oe"));
    let rec = dir.path().join("Record Node 101/experiment1/recording1");
    let folder = "Acquisition_Board-100.Rhythm Data";
    let (rows, ch) = (2000, 3);
    let x = samples(rows, ch);
    let cont = rec.join("continuous").join(folder);
    std::fs::create_dir_all(&cont).unwrap();
    std::fs::write(cont.join("continuous.dat"), bytes(&x)).unwrap();
    let first = 5000i64;
    let sn: Vec<u8> = (first..first + rows as i64)
        .flat_map(i64::to_le_bytes)
        .collect();
    npy(&cont.join("sample_numbers.npy"), "<i8", &sn, rows);
    let oebin = serde_json::json!({
        "GUI version": "0.6.7",
        "continuous": [{"folder_name": format!("{folder}/"), "sample_rate": 30000.0, "stream_name": "Rhythm Data",
            "num_channels": ch, "channels": [
                {"channel_name": "CH1", "bit_volts": 0.195, "units": "uV"},
                {"channel_name": "CH2", "bit_volts": 0.195, "units": "uV"},
                {"channel_name": "ADC1", "bit_volts": 0.000_152_587_89, "units": "V"}]}],
        "events": [{"folder_name": format!("{folder}/TTL/"), "stream_name": "Rhythm Data"}],
    });
    std::fs::write(rec.join("structure.oebin"), oebin.to_string()).unwrap();
    let ttl = rec.join("events").join(folder).join("TTL");
    let at: Vec<u8> = [first + 10, first + 40, first + 1500]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    npy(&ttl.join("sample_numbers.npy"), "<i8", &at, 3);
    let st: Vec<u8> = [3i16, -3, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
    npy(&ttl.join("states.npy"), "<i2", &st, 3);

    // the session directory, three levels above the recording
    let (s, data, events) = replay(dir.path(), name.name(), &[]);
    assert_eq!(data, bytes(&x));
    assert_eq!(s.info().ch_names, ["CH1", "CH2", "ADC1"]);
    assert_eq!(s.info().ch_units, ["uV", "uV", "V"]);
    let got: Vec<(u64, Option<Vec<f64>>, u64)> = events
        .iter()
        .map(|e| (e.sample, e.value.to_f64s(), e.duration))
        .collect();
    assert_eq!(got, [(10, Some(vec![3.0]), 30), (1500, Some(vec![3.0]), 0)]);
    assert!(events
        .iter()
        .all(|e| e.kind == EventValue::Text("TTL".into())));

    // a truncated continuous.dat: named, with the counts
    let dat = cont.join("continuous.dat");
    let f = std::fs::OpenOptions::new().write(true).open(&dat).unwrap();
    f.set_len((rows as u64 - 1) * ch as u64 * 2).unwrap();
    let o = rtloop(&["replay", rec.to_str().unwrap(), "--stream", name.name()]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("holds 1999 samples but") && e.contains("continuous.dat is truncated"),
        "{e}"
    );
}

#[test]
fn unknown_paths_and_formats_are_named() {
    let dir = TempDir::new("replay-bad");
    let o = rtloop(&["replay", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("a directory with no recording in it"), "{e}");
    assert!(e.contains("SpikeGLX (.bin with its .meta"), "{e}");
    let f = dir.path().join("notes.txt");
    std::fs::write(&f, "hello").unwrap();
    let o = rtloop(&["replay", f.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("a file of no format rtloop knows"));
}

#[test]
fn every_probe_of_a_spikeglx_run_plays_into_its_own_stream() {
    let dir = TempDir::new("replay-all");
    let (rows, ch) = (600, 2);
    let mut want = Vec::new();
    for probe in 0..2 {
        let d = dir.path().join(format!("run_g0_imec{probe}"));
        std::fs::create_dir_all(&d).unwrap();
        let x: Vec<i16> = samples(rows, ch)
            .iter()
            .map(|v| v.wrapping_add(probe))
            .collect();
        let bin = d.join(format!("run_g0_t0.imec{probe}.ap.bin"));
        std::fs::write(&bin, bytes(&x)).unwrap();
        std::fs::write(
            bin.with_extension("meta"),
            "imAiRangeMax=0.62\nimMaxInt=8192\nimSampRate=30000\nnSavedChans=2\ntypeThis=imec\n\
             ~snsChanMap=(1,0,1)(AP0;0:0)(SY0;384:384)\n",
        )
        .unwrap();
        want.push((format!("run_g0_t0.imec{probe}.ap"), bytes(&x)));
    }
    let guards: Vec<StreamGuard> = want.iter().map(|(n, _)| StreamGuard::new(n)).collect();
    let o = rtloop(&[
        "--json",
        "replay",
        dir.path().to_str().unwrap(),
        "--all",
        "--speed",
        "8",
        "--keep",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let reports: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(reports.as_array().unwrap().len(), 2);
    for (name, x) in &want {
        let s = Stream::open(name).unwrap();
        let r = s.reader(ReaderMode::Latest).unwrap();
        let mut data = vec![0u8; x.len()];
        r.window(0, rows as u64)
            .unwrap()
            .copy_to(&mut data)
            .unwrap();
        assert_eq!(&data, x, "{name}");
    }
    // one --stream for several series is refused before anything plays
    let o = rtloop(&[
        "replay",
        dir.path().to_str().unwrap(),
        "--all",
        "--stream",
        "x",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--stream names one stream"));
    drop(guards);
}
