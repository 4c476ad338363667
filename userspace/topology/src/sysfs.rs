//! Small, forgiving readers for sysfs attribute files.

use std::fs;
use std::path::{Path, PathBuf};

/// The file's contents without surrounding whitespace, or `None` if it cannot be read
/// (missing, permission denied, not UTF-8). Callers decide what absence means.
pub(crate) fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// What a `numa_node` file said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NumaNodeFile {
    Missing,
    /// The kernel's NUMA_NO_NODE (-1), or any other negative number.
    NoNode,
    Node(u32),
    Garbage(String),
}

pub(crate) fn read_numa_node(path: &Path) -> NumaNodeFile {
    match read_trimmed(path) {
        None => NumaNodeFile::Missing,
        Some(s) => match s.parse::<i64>() {
            Ok(n) if n < 0 => NumaNodeFile::NoNode,
            Ok(n) => u32::try_from(n)
                .map(NumaNodeFile::Node)
                .unwrap_or(NumaNodeFile::Garbage(s)),
            Err(_) => NumaNodeFile::Garbage(s),
        },
    }
}

/// Parses a `dev` attribute ("259:0").
pub(crate) fn parse_dev(s: &str) -> Option<(u32, u32)> {
    let (maj, min) = s.trim().split_once(':')?;
    Some((maj.trim().parse().ok()?, min.trim().parse().ok()?))
}

pub(crate) fn read_dev(path: &Path) -> Option<(u32, u32)> {
    parse_dev(&read_trimmed(path)?)
}

/// Names of the entries of a directory, sorted; empty if it cannot be read.
pub(crate) fn dir_names(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = match fs::read_dir(path) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

/// Resolves every symlink in `path`; `None` when it does not lead anywhere.
pub(crate) fn resolve(path: &Path) -> Option<PathBuf> {
    fs::canonicalize(path).ok()
}

/// Final component of a path as a string.
pub(crate) fn base_name(path: &Path) -> Option<String> {
    path.file_name()?.to_str().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_parsing() {
        assert_eq!(parse_dev("259:0\n"), Some((259, 0)));
        assert_eq!(parse_dev("8:17"), Some((8, 17)));
        assert_eq!(parse_dev("259"), None);
        assert_eq!(parse_dev("a:b"), None);
        assert_eq!(parse_dev(""), None);
    }
}
