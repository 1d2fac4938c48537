//! The evidence the sources and docs cite exists: every loom model a comment, a doc page or a
//! script names is a model in `src/loom_tests.rs`, and docs/memory-ordering.md counts the
//! models there are. (Comments once cited models that were never written.)

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The identifiers in `text` that start with `loom_` (at a word start).
fn loom_names(text: &str) -> Vec<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut rest = text;
    let mut before = None;
    while let Some(at) = rest.find("loom_") {
        let prev = rest[..at].chars().next_back().or(before);
        let tail = &rest[at..];
        let len = tail.find(|c: char| !ident(c)).unwrap_or(tail.len());
        if !prev.is_some_and(ident) {
            out.push(tail[..len].to_owned());
        }
        before = tail[..len].chars().next_back();
        rest = &tail[len..];
    }
    out
}

/// The models: `#[test] fn loom_...` in src/loom_tests.rs.
fn models() -> Vec<String> {
    let src = read(&root().join("crates/rtloop-stream/src/loom_tests.rs"));
    let lines: Vec<&str> = src.lines().collect();
    let mut models = Vec::new();
    for (k, line) in lines.iter().enumerate() {
        if let Some(rest) = line.trim_start().strip_prefix("fn loom_") {
            assert!(
                k > 0 && lines[k - 1].trim() == "#[test]",
                "loom_{rest} is not a #[test]"
            );
            let name = format!("loom_{}", rest.split('(').next().unwrap_or_default());
            models.push(name);
        }
    }
    models
}

/// Source, doc and script files of the repository (not build output or environments).
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        if path.is_dir() {
            files(&path, out);
        } else if ["rs", "md", "sh", "py", "toml", "yml", "yaml", "pyi"]
            .iter()
            .any(|ext| path.extension().is_some_and(|e| e == *ext))
        {
            out.push(path);
        }
    }
}

#[test]
fn every_loom_model_named_in_sources_docs_and_scripts_exists() {
    let models = models();
    assert!(models.len() >= 10, "found only {models:?}");
    let mut paths = Vec::new();
    for top in [
        "crates", "docs", "scripts", "python", "tests", "examples", "bench", "fuzz",
    ] {
        let dir = root().join(top);
        if dir.is_dir() {
            files(&dir, &mut paths);
        }
    }
    for f in ["README.md", "CHANGELOG.md", "Makefile", "Cargo.toml"] {
        paths.push(root().join(f));
    }
    let mut missing = Vec::new();
    let mut cited = 0;
    for path in &paths {
        if path.ends_with("rtloop-stream/tests/evidence.rs") {
            continue; // this file's own examples
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            continue; // not text
        };
        for name in loom_names(&text) {
            // the module's name, and the bare prefix scripts/loom.sh filters by
            if name == "loom_tests" || name == "loom_" {
                continue;
            }
            cited += 1;
            if !models.contains(&name) {
                missing.push(format!("{}: {name}", path.display()));
            }
        }
    }
    assert!(
        cited > models.len(),
        "the scan found only {cited} citations"
    );
    assert!(
        missing.is_empty(),
        "these cite loom models that do not exist (the models are {models:?}):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_memory_ordering_page_counts_the_loom_models_there_are() {
    let n = models().len();
    let page = read(&root().join("docs/memory-ordering.md"));
    let counts: Vec<&str> = page
        .match_indices(" loom models")
        .filter_map(|(at, _)| page[..at].split_whitespace().next_back())
        .filter(|w| w.chars().all(|c| c.is_ascii_digit()))
        .collect();
    assert!(!counts.is_empty(), "the page gives no count of loom models");
    for c in counts {
        assert_eq!(
            c,
            n.to_string(),
            "the page counts {c} loom models, there are {n}"
        );
    }
}

#[test]
fn names_are_found_at_word_starts_only() {
    assert_eq!(
        loom_names("see `loom_a_b`, loom_c(); not xloom_d, cfg_loom_e"),
        ["loom_a_b", "loom_c"]
    );
}
