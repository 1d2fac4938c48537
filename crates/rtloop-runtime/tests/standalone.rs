//! A program that links rtloop-runtime runs a model on its own, without the `rtloop`
//! executable: the runtime starts each driver process from this program, whose `main` plays
//! the role with `rtloop_launch::play_if_child` (the runtime registered it).
//!
//! A test without the harness, because the harness's `main` would not play the children.

use std::process::ExitCode;

use rtloop_runtime::run::{run, RunOptions};

fn main() -> ExitCode {
    if let Some(code) = rtloop_launch::play_if_child() {
        return code;
    }
    // no other rtloop to fall back on: the children must be this program
    std::env::remove_var("RTLOOP_EXE");
    let dir = std::env::temp_dir().join(format!("rtloop-standalone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("model.yaml");
    let name = format!("standalone{}", std::process::id());
    std::fs::write(
        &model,
        format!(
            "config: {{name: {name}, tick_us: 1000}}\n\
             signals:\n  raw: {{shape: [30, 4], dtype: float32}}\n\
             sources:\n  gen: {{driver: synthetic, out: [raw], options: {{frequency: 100, amplitude: 2}}}}\n\
             sinks:\n  out: {{driver: stream_out, in: [raw], options: {{stream: {name}-out}}}}\n"
        ),
    )
    .unwrap();
    let opts = RunOptions {
        ticks: Some(200),
        out_dir: Some(dir.join("out")),
        ..RunOptions::default()
    };
    let result = run(&model, &opts);
    let _ = std::fs::remove_dir_all(&dir);
    let report = result.unwrap_or_else(|e| panic!("the model did not run: {e}"));
    assert!(report.problem.is_none(), "{:?}", report.problem);
    assert_eq!(report.ticks, 200);
    for p in ["gen", "out"] {
        let pr = report
            .processes
            .iter()
            .find(|x| x.name == p)
            .unwrap_or_else(|| panic!("no process {p} in the report"));
        assert_eq!(pr.ticks, 200, "{p}: {pr:?}");
    }
    // and a role this program does not play is refused, naming the ones it does
    let e = rtloop_launch::play("demo-reader", "{}").unwrap_err();
    assert!(
        e.to_string().contains("runtime-process"),
        "{e}: the runtime's role should be registered"
    );
    println!("standalone: a program linking only rtloop-runtime ran 200 ticks of a model");
    ExitCode::SUCCESS
}
