//! Spike detection on SpikeInterface's ground-truth generator data, beside SpikeInterface's
//! own `detect_peaks` (by channel, the same threshold in noise sigmas) on the same data, run in
//! the same test: recall and precision of each against the ground-truth spikes.
//!
//! A detection is right when a ground-truth spike (of any unit) lies within 0.4 ms of it; a
//! ground-truth spike is found when a detection (on any channel) lies within 0.4 ms. Both are
//! counted after rtloop's first noise estimate (1 s), for both detectors alike.
//!
//! SpikeInterface runs in the Python that runs rtloop (`$RTLOOP_PYTHON`, else `python3`).

use std::process::Command;

use rtloop_dsp::{Sign, SpikeConfig, SpikeDetector};

const GENERATE: &str = r#"
import json, sys, numpy as np
import spikeinterface.core as sc
from spikeinterface.sortingcomponents.peak_detection import detect_peaks
out, seed = sys.argv[1], int(sys.argv[2])
rec, sorting = sc.generate_ground_truth_recording(durations=[10.0], sampling_frequency=30000.0,
                                                  num_channels=8, num_units=5, seed=seed)
x = rec.get_traces().astype(np.float32)
x.tofile(out)
gt = np.sort(np.concatenate([sorting.get_unit_spike_train(u) for u in sorting.unit_ids]))
peaks = detect_peaks(rec, method="by_channel",
                     method_kwargs=dict(peak_sign="neg", detect_threshold=5, exclude_sweep_ms=0.5),
                     job_kwargs=dict(n_jobs=1, progress_bar=False))
print(json.dumps({"channels": int(x.shape[1]), "gt": gt.tolist(),
                  "si": peaks["sample_index"].tolist()}))
"#;

const RATE: f64 = 30_000.0;
const TOLERANCE: u64 = 12; // 0.4 ms
const WARMUP: u64 = 30_000; // rtloop's first noise estimate: 1 s

fn python() -> String {
    rtloop_sys::python().display().to_string()
}

/// (recall, precision) of `found` (sorted) against `truth` (sorted), after the warm-up.
fn score(truth: &[u64], found: &[u64]) -> (f64, f64) {
    let near = |set: &[u64], s: u64| {
        let i = set.partition_point(|&t| t + TOLERANCE < s);
        set.get(i).is_some_and(|&t| t <= s + TOLERANCE)
    };
    let truth: Vec<u64> = truth.iter().copied().filter(|&t| t >= WARMUP).collect();
    let found: Vec<u64> = found.iter().copied().filter(|&t| t >= WARMUP).collect();
    let hit = truth.iter().filter(|&&t| near(&found, t)).count();
    let right = found.iter().filter(|&&s| near(&truth, s)).count();
    (
        hit as f64 / truth.len().max(1) as f64,
        right as f64 / found.len().max(1) as f64,
    )
}

#[test]
fn detection_against_ground_truth_beside_spikeinterface() {
    let dir = rtloop_testkit::TempDir::new("dsp-si");
    for seed in [7u64, 11] {
        let traces = dir.path().join(format!("traces-{seed}.bin"));
        let run = Command::new(python())
            .args(["-c", GENERATE])
            .arg(&traces)
            .arg(seed.to_string())
            .output()
            .expect("run Python");
        assert!(
            run.status.success(),
            "SpikeInterface ({}): {}",
            python(),
            String::from_utf8_lossy(&run.stderr)
        );
        let meta: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        let ch = meta["channels"].as_u64().unwrap() as usize;
        let list = |k: &str| -> Vec<u64> {
            let mut v: Vec<u64> = meta[k]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            v.sort_unstable();
            v
        };
        let (truth, si) = (list("gt"), list("si"));
        let data: Vec<f32> = std::fs::read(&traces)
            .unwrap()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let mut d = SpikeDetector::<f32>::new(SpikeConfig {
            channels: ch,
            k: 5.0,
            sign: Sign::Negative,
            refractory: (RATE * 0.5e-3) as usize,
            peak_window: (RATE * 0.5e-3) as usize,
            noise_window: WARMUP as usize,
        })
        .unwrap();
        let mut found = Vec::new();
        // 1 ms chunks, as a tick would hand them over
        for chunk in data.chunks(30 * ch) {
            d.process(chunk, |s| found.push(s.sample)).unwrap();
        }
        found.sort_unstable();
        let (r, p) = score(&truth, &found);
        let (sr, sp) = score(&truth, &si);
        println!(
            "seed {seed}: {} ground-truth spikes after 1 s; rtloop: {} detections, recall {r:.3}, precision {p:.3}; SpikeInterface detect_peaks: {} detections, recall {sr:.3}, precision {sp:.3}",
            truth.iter().filter(|&&t| t >= WARMUP).count(),
            found.iter().filter(|&&t| t >= WARMUP).count(),
            si.iter().filter(|&&t| t >= WARMUP).count(),
        );
        // on its own too: most ground-truth spikes found, almost nothing else
        assert!(
            r >= 0.75 && p >= 0.95,
            "seed {seed}: recall {r:.3}, precision {p:.3}"
        );
        assert!(
            r >= sr - 0.05 && p >= sp - 0.05,
            "seed {seed}: rtloop recall {r:.3} / precision {p:.3} against SpikeInterface's {sr:.3} / {sp:.3}"
        );
    }
}
