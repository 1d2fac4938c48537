//! Block modules in a model: parsed, and every kind of bad option or signal refused at its
//! line with what is allowed.

use super::*;

/// 30 samples per 1 ms tick: 30 kHz (Nyquist 15 kHz).
const BLOCKS: &str = "\
config: {tick_us: 1000}
signals:
  raw: {shape: [30, 4], dtype: float32}
  filt: {shape: [30, 4], dtype: float32}
  ev: {shape: [16, 3], dtype: float64, variable: true}
sources:
  gen: {driver: synthetic, out: [raw]}
modules:
  bp:
    block: bandpass
    options: {low: 300, high: 3000, order: 2}
    in: [raw]
    out: [filt]
  det:
    block: spikes
    options: {k: 4.5, sign: both}
    in: [filt]
    out: [ev]
";

/// [`BLOCKS`] with `from` replaced by `to` (which must be there).
fn with(from: &str, to: &str) -> String {
    assert!(BLOCKS.contains(from), "{from}");
    BLOCKS.replace(from, to)
}

#[test]
fn a_block_module_is_parsed_with_its_options() {
    let m = parse_with(BLOCKS, &[]).0.unwrap();
    let bp = &m.processes[1];
    assert_eq!(
        (bp.name.as_str(), bp.kind, bp.every),
        ("bp", Kind::Module, 1)
    );
    match &bp.body {
        Body::Block { block, options } => {
            assert_eq!(block, "bandpass");
            assert_eq!(
                *options,
                serde_json::json!({"low": 300, "high": 3000, "order": 2})
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        (bp.inputs.as_slice(), bp.outputs.as_slice()),
        (&["raw".to_string()][..], &["filt".to_string()][..])
    );
    // options may be left out where every one has a default
    let m = parse_with(&with("    options: {k: 4.5, sign: both}\n", ""), &[])
        .0
        .unwrap();
    match &m.processes[2].body {
        Body::Block { block, options } => {
            assert_eq!(
                (block.as_str(), options),
                ("spikes", &serde_json::json!({}))
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unknown_block_lists_the_blocks() {
    one(
        &with("block: bandpass", "block: bandpas"),
        &[],
        10,
        &["module 'bp': block: unknown block 'bandpas'; blocks: lowpass, highpass, bandpass, notch, reref, envelope, decimate, spikes, ripples, phase"],
    );
    one(
        &with("block: bandpass", "block: [1]"),
        &[],
        10,
        &["module 'bp': block: expected a non-empty string, got a list"],
    );
}

#[test]
fn an_unknown_option_is_named_at_its_line_with_the_options_there_are() {
    one(
        &with(
            "options: {low: 300, high: 3000, order: 2}",
            "options:\n      low: 300\n      high: 3000\n      poles: 2",
        ),
        &[],
        14,
        &["module 'bp': block 'bandpass': options: unknown option 'poles'; block 'bandpass' takes low, high, order"],
    );
}

#[test]
fn a_missing_option_is_named_at_the_block() {
    one(
        &with("{low: 300, high: 3000, order: 2}", "{low: 300}"),
        &[],
        10,
        &["module 'bp': block 'bandpass': options: missing option 'high' (the upper -3 dB frequency in Hz); block 'bandpass' needs it"],
    );
}

#[test]
fn an_option_of_the_wrong_type_or_range_is_refused_at_its_line() {
    let multi = |o: &str| {
        with(
            "options: {low: 300, high: 3000, order: 2}",
            &format!("options:\n      low: 300\n      high: 3000\n      {o}"),
        )
    };
    one(
        &multi("order: two"),
        &[],
        14,
        &["block 'bandpass': order: \"two\" is not allowed; give a whole number >= 1 (the Butterworth order, 1 to 12)"],
    );
    one(
        &multi("order: 13"),
        &[],
        14,
        &["block 'bandpass': order 13: a Butterworth filter's order must be 1 to 12"],
    );
    one(
        &with("high: 3000", "high: -3"),
        &[],
        11,
        &["high: -3 is not allowed; give a frequency in Hz > 0"],
    );
}

#[test]
fn a_frequency_the_sample_rate_cannot_carry_is_refused_with_the_nyquist_frequency() {
    // 30 rows per 1 ms tick: 30 kHz
    one(
        &with(
            "options: {low: 300, high: 3000, order: 2}",
            "options:\n      low: 300\n      high: 20000",
        ),
        &[],
        13,
        &["block 'bandpass': high edge 20000 Hz: must lie strictly between 0 and the Nyquist frequency 15000 Hz"],
    );
    one(
        &with("{low: 300, high: 3000, order: 2}", "{low: 3000, high: 300}"),
        &[],
        11,
        &["band 3000..300 Hz: the low edge must be below the high edge"],
    );
    one(
        &with(
            "block: bandpass\n    options: {low: 300, high: 3000, order: 2}",
            "block: notch\n    options: {freq: 50, q: 0}",
        ),
        &[],
        11,
        &["block 'notch': q: 0 is not allowed; give a quality factor > 0"],
    );
    one(
        &with("block: bandpass\n    options: {low: 300, high: 3000, order: 2}", "block: lowpass\n    options: {cutoff: 15000}"),
        &[],
        11,
        &["block 'lowpass': cutoff 15000 Hz: must lie strictly between 0 and the Nyquist frequency 15000 Hz"],
    );
}

#[test]
fn a_block_reads_a_fixed_float_signal() {
    one(
        &with("raw: {shape: [30, 4], dtype: float32}", "raw: {shape: [30, 4], dtype: int16}"),
        &[],
        12,
        &["module 'bp': block 'bandpass': reads 'raw' of dtype int16; a block reads float32 or float64 signals"],
    );
    one(
        &with(
            "raw: {shape: [30, 4], dtype: float32}",
            "raw: {shape: [30, 4], dtype: float32, variable: true}",
        ),
        &[],
        12,
        &["reads 'raw', a variable signal; a block reads a fixed number of samples per tick"],
    );
}

#[test]
fn a_filters_output_is_its_inputs_shape_and_dtype() {
    one(
        &with("filt: {shape: [30, 4], dtype: float32}", "filt: {shape: [30, 4], dtype: float64}"),
        &[],
        13,
        &["module 'bp': block 'bandpass': writes 'filt' (4 values per row of float64); block 'bandpass' writes what it reads: 4 values per row of float32, not variable"],
    );
    one(
        &with("filt: {shape: [30, 4], dtype: float32}", "filt: {shape: [10, 4], dtype: float32}"),
        &[],
        13,
        &["writes 'filt' with 10 rows per tick; block 'bandpass' writes as many rows as it reads (30 per tick of 'raw')"],
    );
}

#[test]
fn an_event_blocks_output_is_variable_float64_rows_of_three() {
    one(
        &with("ev: {shape: [16, 3], dtype: float64, variable: true}", "ev: {shape: [16, 3], dtype: float64}"),
        &[],
        18,
        &["module 'det': block 'spikes': writes 'ev' (3 values per row of float64, not variable); block 'spikes' writes events: a variable float64 signal of 3 values per row [channel, sample, value]"],
    );
}

#[test]
fn decimation_keeps_whole_samples_per_tick() {
    let dec = |factor: &str, rows: usize| {
        with(
            "block: bandpass\n    options: {low: 300, high: 3000, order: 2}",
            &format!("block: decimate\n    options: {{factor: {factor}}}"),
        )
        .replace(
            "filt: {shape: [30, 4]",
            &format!("filt: {{shape: [{rows}, 4]"),
        )
        .replace("filt: {{", "filt: {")
    };
    assert!(parse_with(&dec("3", 10), &[]).0.is_ok());
    one(
        &dec("4", 10),
        &[],
        11,
        &["block 'decimate': factor 4 does not divide the 30 rows per tick of 'raw': each tick must keep whole samples; factors that do: 2, 3, 5, 6, 10, 15, 30"],
    );
    one(
        &dec("3", 30),
        &[],
        13,
        &["writes 'filt' with 30 rows per tick; decimating 30 rows by 3 keeps 10: give it shape [10, 4]"],
    );
    one(
        &dec("1", 30),
        &[],
        11,
        &["factor: 1 is not allowed; give a whole number >= 2 (keep one sample in this many)"],
    );
}

#[test]
fn every_other_than_one_is_refused_for_a_block() {
    one(
        &with("    in: [raw]\n", "    every: 2\n    in: [raw]\n"),
        &[],
        12,
        &["module 'bp': every: 2; a block runs every tick (its state follows the signal sample by sample): leave 'every' out or give 1"],
    );
    assert!(parse_with(
        &with("    in: [raw]\n", "    every: 1\n    in: [raw]\n"),
        &[]
    )
    .0
    .is_ok());
}

#[test]
fn a_block_has_no_language_or_code() {
    one(
        &with("    block: bandpass\n", "    block: bandpass\n    language: rust\n"),
        &[],
        11,
        &["module 'bp': 'language' is for python and rust modules; a block module has 'block' and 'options'"],
    );
    // neither: the hint names blocks too
    has(
        &errors(&with("    block: bandpass\n", ""), &[]),
        9,
        &["module 'bp': missing required key 'language' (python or rust), or 'block' for a built-in block (lowpass, highpass"],
    );
}

#[test]
fn a_block_reads_one_signal_and_writes_one() {
    one(
        &with("    in: [filt]\n", "    in: [filt, raw]\n"),
        &[],
        17,
        &["module 'det': in: block 'spikes' reads exactly one signal, got 2"],
    );
}

#[test]
fn each_blocks_own_checks_are_at_their_options() {
    let block = |b: &str| {
        with(
            "block: bandpass\n    options: {low: 300, high: 3000, order: 2}",
            b,
        )
    };
    one(
        &block("block: reref\n    options: {reference: mean}"),
        &[],
        11,
        &["block 'reref': reference: \"mean\" is not allowed; give one of average, median"],
    );
    one(
        &block("block: reref\n    options: {channels: [0, 4]}"),
        &[],
        11,
        &["block 'reref': reference channel 4: channels are 0 to 3"],
    );
    one(
        &block("block: envelope\n    options: {window: 0}"),
        &[],
        11,
        &["block 'envelope': window: 0 is not allowed; give a whole number >= 1 (the RMS window in samples)"],
    );
    one(
        &with("{k: 4.5, sign: both}", "{k: 0}"),
        &[],
        16,
        &["block 'spikes': k: 0 is not allowed; give a threshold in noise sigmas > 0 (typically 4 to 6)"],
    );
    one(
        &with("{k: 4.5, sign: both}", "{sign: up}"),
        &[],
        16,
        &["block 'spikes': sign: \"up\" is not allowed; give one of negative, positive, both"],
    );
    let det = |b: &str| with("block: spikes\n    options: {k: 4.5, sign: both}", b);
    one(
        &det("block: ripples\n    options: {z_start: 1, z_end: 3}"),
        &[],
        16,
        &["block 'ripples': z_start 1 and z_end 3: give finite thresholds with z_end <= z_start"],
    );
    one(
        &det("block: ripples\n    options: {band: [150]}"),
        &[],
        16,
        &["block 'ripples': band: [150] is not allowed; give [low, high] in Hz, two numbers"],
    );
    one(
        &det("block: phase\n    options: {band: [8, 12], window: 100}"),
        &[],
        16,
        &["block 'phase': window of 100 samples: it must hold at least one cycle of 8 Hz (3750 samples at 30000 Hz)"],
    );
    one(
        &det("block: phase\n    options: {}"),
        &[],
        15,
        &["block 'phase': options: missing option 'band' ([low, high] in Hz); block 'phase' needs it"],
    );
    assert!(parse_with(
        &det("block: phase\n    options: {band: [8, 12], target: -1.5708}"),
        &[]
    )
    .0
    .is_ok());
    assert!(
        parse_with(&det("block: ripples\n    options: {band: [150, 250]}"), &[])
            .0
            .is_ok()
    );
}

#[test]
fn a_blocks_signal_and_option_problems_are_reported_together() {
    let errs = errors(
        &with("{k: 4.5, sign: both}", "{sign: up}").replace(
            "ev: {shape: [16, 3], dtype: float64, variable: true}",
            "ev: {shape: [16, 2], dtype: float64, variable: true}",
        ),
        &[],
    );
    assert_eq!(errs.len(), 2, "{errs:#?}");
    has(&errs, 16, &["block 'spikes': sign: \"up\" is not allowed"]);
    has(
        &errs,
        18,
        &["block 'spikes': writes 'ev' (2 values per row of float64, variable)"],
    );
    // a filter's output is not compared with an input it cannot read
    one(
        &with(
            "raw: {shape: [30, 4], dtype: float32}",
            "raw: {shape: [30, 4], dtype: float64, variable: true}",
        ),
        &[],
        12,
        &["reads 'raw', a variable signal"],
    );
}
