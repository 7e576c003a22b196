//! Where a scenario writes: `--out DIR` (default `bench-out/{scenario}`), holding report.md
//! and results.json.

use anyhow::Context;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The output directory, created if missing.
pub fn out_dir(given: Option<&Path>, scenario: &str) -> anyhow::Result<PathBuf> {
    let dir = given.map_or_else(
        || PathBuf::from("bench-out").join(scenario),
        Path::to_path_buf,
    );
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Writes `results` as results.json and `markdown` as report.md into `dir`.
pub fn write_report<T: Serialize>(dir: &Path, results: &T, markdown: &str) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(results).context("encoding results.json")?;
    std::fs::write(dir.join("results.json"), json)
        .with_context(|| format!("writing {}/results.json", dir.display()))?;
    std::fs::write(dir.join("report.md"), markdown)
        .with_context(|| format!("writing {}/report.md", dir.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_both_files_into_a_created_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = out_dir(Some(&tmp.path().join("a/b")), "clients").unwrap();
        write_report(&dir, &serde_json::json!({"scenario": "clients"}), "# hi\n").unwrap();
        let json = std::fs::read_to_string(dir.join("results.json")).unwrap();
        assert!(json.contains("\"clients\""));
        assert_eq!(
            std::fs::read_to_string(dir.join("report.md")).unwrap(),
            "# hi\n"
        );
    }
}
