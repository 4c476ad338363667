// SPDX-License-Identifier: GPL-2.0-only
//! One CPU's frequency limits (`<sysfs>/devices/system/cpu/cpuN/cpufreq/`),
//! and the record of the limits we found, kept on disk while we change them.

use std::io;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Where a record is kept by default: beside the learned state.
pub const DEFAULT_RECORD_FILE: &str = "/var/lib/scx_esn/cpufreq-restore.json";

/// The cpufreq directory of `cpu` under the sysfs root.
pub fn cpufreq_dir(sysfs: &Path, cpu: u32) -> PathBuf {
    sysfs.join(format!("devices/system/cpu/cpu{cpu}/cpufreq"))
}

fn read_khz(dir: &Path, file: &str) -> Result<u64> {
    let path = dir.join(file);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.trim().parse().with_context(|| {
        format!(
            "{}: not a frequency in kHz: {:?}",
            path.display(),
            text.trim()
        )
    })
}

/// One CPU's limits: the hardware range and, where the driver lists them
/// (acpi-cpufreq), the frequencies it can run at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuFreq {
    pub cpu: u32,
    dir: PathBuf,
    pub min_khz: u64,
    pub max_khz: u64,
    /// Ascending, within [min_khz, max_khz]; empty where the driver sets any
    /// frequency in the range (intel_pstate, amd-pstate).
    pub table: Vec<u64>,
}

impl CpuFreq {
    /// `cpu`'s limits; `Ok(None)` if it has no cpufreq directory (no driver,
    /// a VM, an offline CPU).
    pub fn read(sysfs: &Path, cpu: u32) -> Result<Option<CpuFreq>> {
        let dir = cpufreq_dir(sysfs, cpu);
        if !dir.is_dir() {
            return Ok(None);
        }
        let min_khz = read_khz(&dir, "cpuinfo_min_freq")?;
        let max_khz = read_khz(&dir, "cpuinfo_max_freq")?;
        if min_khz == 0 || min_khz > max_khz {
            anyhow::bail!(
                "{}: cpuinfo_min_freq {min_khz} kHz above cpuinfo_max_freq {max_khz} kHz",
                dir.display()
            );
        }
        let mut table: Vec<u64> =
            std::fs::read_to_string(dir.join("scaling_available_frequencies"))
                .map(|text| {
                    text.split_whitespace()
                        .filter_map(|f| f.parse().ok())
                        .filter(|f| (min_khz..=max_khz).contains(f))
                        .collect()
                })
                .unwrap_or_default();
        table.sort_unstable();
        table.dedup();
        Ok(Some(CpuFreq {
            cpu,
            dir,
            min_khz,
            max_khz,
            table,
        }))
    }

    /// The limit in force now (`scaling_max_freq`).
    pub fn limit(&self) -> Result<u64> {
        read_khz(&self.dir, "scaling_max_freq")
    }

    /// Set `scaling_max_freq`. The error is the kernel's (permission denied
    /// without root, EINVAL off the driver's range) with the path.
    pub fn set_limit(&self, khz: u64) -> Result<()> {
        write_limit(&self.dir, khz)
    }

    /// The next limit below `from`: the driver's next lower frequency where
    /// it lists them, else `from - step_khz`; never below the hardware
    /// minimum.
    pub fn step_down(&self, from: u64, step_khz: u64) -> u64 {
        let lower = match self.table.iter().rev().find(|&&f| f < from) {
            Some(&f) => f,
            None if !self.table.is_empty() => self.min_khz,
            None => from.saturating_sub(step_khz),
        };
        lower.max(self.min_khz)
    }
}

fn write_limit(dir: &Path, khz: u64) -> Result<()> {
    let path = dir.join("scaling_max_freq");
    std::fs::write(&path, format!("{khz}\n"))
        .with_context(|| format!("writing {khz} to {}", path.display()))
}

/// Is this error one that no retry will cure (no permission, read-only sysfs)?
pub fn is_permission_error(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.downcast_ref::<io::Error>().is_some_and(|e| {
            e.kind() == io::ErrorKind::PermissionDenied || e.raw_os_error() == Some(libc::EROFS)
        })
    })
}

/// A limit as we found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedLimit {
    pub cpu: u32,
    pub khz: u64,
}

/// What `scx_esn --dvfs` found before its first change, on disk until every
/// limit is back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub limits: Vec<SavedLimit>,
}

impl Record {
    /// Write it whole or not at all (a temporary file renamed into place), in
    /// a directory created if missing.
    pub fn write(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let tmp = path.with_extension("tmp");
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(&tmp, text + "\n").with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
    }

    /// The record at `path`; `Ok(None)` if there is none.
    pub fn read(path: &Path) -> Result<Option<Record>> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text).map(Some).with_context(|| {
                format!(
                    "{}: not a CPU frequency record (left as it is)",
                    path.display()
                )
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }
}

/// What a restore did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// CPUs whose limit was written back.
    pub restored: Vec<u32>,
    /// CPUs that could not be, with why; they stay in the record.
    pub failed: Vec<(u32, String)>,
}

impl Restored {
    /// The CPUs not put back, with why, on one line.
    pub fn failures(&self) -> String {
        self.failed
            .iter()
            .map(|(cpu, why)| format!("cpu{cpu}: {why}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Put back every limit of the record at `path` and remove it; `Ok(None)` if
/// there was no record. A CPU that cannot be written (offline now, no
/// permission) stays in the record, so a later restore can finish the job;
/// nothing it holds is lost.
pub fn restore_from_record(sysfs: &Path, path: &Path) -> Result<Option<Restored>> {
    let Some(record) = Record::read(path)? else {
        return Ok(None);
    };
    let mut done = Restored::default();
    let mut left = Vec::new();
    for saved in &record.limits {
        match write_limit(&cpufreq_dir(sysfs, saved.cpu), saved.khz) {
            Ok(()) => done.restored.push(saved.cpu),
            Err(err) => {
                done.failed.push((saved.cpu, format!("{err:#}")));
                left.push(saved.clone());
            }
        }
    }
    if left.is_empty() {
        std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
    } else {
        Record { limits: left }.write(path)?;
    }
    Ok(Some(done))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fake cpufreq directory for `cpu`.
    pub fn fake_cpu(sysfs: &Path, cpu: u32, min: u64, max: u64, limit: u64, table: Option<&[u64]>) {
        let dir = cpufreq_dir(sysfs, cpu);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cpuinfo_min_freq"), format!("{min}\n")).unwrap();
        std::fs::write(dir.join("cpuinfo_max_freq"), format!("{max}\n")).unwrap();
        std::fs::write(dir.join("scaling_max_freq"), format!("{limit}\n")).unwrap();
        if let Some(table) = table {
            let text: Vec<String> = table.iter().rev().map(|f| f.to_string()).collect();
            std::fs::write(
                dir.join("scaling_available_frequencies"),
                text.join(" ") + " \n",
            )
            .unwrap();
        }
    }

    pub fn limit_of(sysfs: &Path, cpu: u32) -> u64 {
        std::fs::read_to_string(cpufreq_dir(sysfs, cpu).join("scaling_max_freq"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    #[test]
    fn no_cpufreq_directory_is_none() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(CpuFreq::read(tmp.path(), 0).unwrap(), None);
    }

    #[test]
    fn steps_follow_the_driver_table() {
        let tmp = tempfile::tempdir().unwrap();
        fake_cpu(
            tmp.path(),
            0,
            800_000,
            3_000_000,
            3_000_000,
            Some(&[800_000, 1_600_000, 2_400_000, 3_000_000]),
        );
        let cpu = CpuFreq::read(tmp.path(), 0).unwrap().unwrap();
        assert_eq!(cpu.table, vec![800_000, 1_600_000, 2_400_000, 3_000_000]);
        assert_eq!(cpu.step_down(3_000_000, 100_000), 2_400_000);
        assert_eq!(cpu.step_down(2_500_000, 100_000), 2_400_000);
        assert_eq!(cpu.step_down(1_600_000, 100_000), 800_000);
        assert_eq!(cpu.step_down(800_000, 100_000), 800_000);
    }

    #[test]
    fn steps_of_fixed_size_without_a_table_stop_at_the_minimum() {
        let tmp = tempfile::tempdir().unwrap();
        fake_cpu(tmp.path(), 3, 1_000_000, 1_250_000, 1_250_000, None);
        let cpu = CpuFreq::read(tmp.path(), 3).unwrap().unwrap();
        assert!(cpu.table.is_empty());
        assert_eq!(cpu.step_down(1_250_000, 100_000), 1_150_000);
        assert_eq!(cpu.step_down(1_050_000, 100_000), 1_000_000);
        assert_eq!(cpu.step_down(1_000_000, 100_000), 1_000_000);
    }

    #[test]
    fn a_missing_or_garbled_limit_file_is_an_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        fake_cpu(tmp.path(), 0, 800_000, 3_000_000, 3_000_000, None);
        let dir = cpufreq_dir(tmp.path(), 0);
        std::fs::write(dir.join("cpuinfo_max_freq"), "fast\n").unwrap();
        let err = format!("{:#}", CpuFreq::read(tmp.path(), 0).unwrap_err());
        assert!(
            err.contains("cpuinfo_max_freq") && err.contains("fast"),
            "{err}"
        );
        std::fs::remove_file(dir.join("cpuinfo_max_freq")).unwrap();
        let err = format!("{:#}", CpuFreq::read(tmp.path(), 0).unwrap_err());
        assert!(err.contains("cpuinfo_max_freq"), "{err}");
    }

    #[test]
    fn restore_writes_every_limit_back_and_removes_the_record() {
        let tmp = tempfile::tempdir().unwrap();
        fake_cpu(tmp.path(), 0, 800_000, 3_000_000, 1_600_000, None);
        fake_cpu(tmp.path(), 1, 800_000, 3_000_000, 800_000, None);
        let record = tmp.path().join("state/cpufreq-restore.json");
        Record {
            limits: vec![
                SavedLimit {
                    cpu: 0,
                    khz: 3_000_000,
                },
                SavedLimit {
                    cpu: 1,
                    khz: 2_400_000,
                },
            ],
        }
        .write(&record)
        .unwrap();
        let done = restore_from_record(tmp.path(), &record).unwrap().unwrap();
        assert_eq!(done.restored, vec![0, 1]);
        assert!(done.failed.is_empty());
        assert_eq!(limit_of(tmp.path(), 0), 3_000_000);
        assert_eq!(limit_of(tmp.path(), 1), 2_400_000);
        assert!(!record.exists());
        assert_eq!(restore_from_record(tmp.path(), &record).unwrap(), None);
    }

    #[test]
    fn a_cpu_that_cannot_be_restored_stays_in_the_record() {
        let tmp = tempfile::tempdir().unwrap();
        fake_cpu(tmp.path(), 0, 800_000, 3_000_000, 1_600_000, None);
        let record = tmp.path().join("cpufreq-restore.json");
        Record {
            limits: vec![
                SavedLimit {
                    cpu: 0,
                    khz: 3_000_000,
                },
                SavedLimit {
                    cpu: 7,
                    khz: 2_000_000,
                },
            ],
        }
        .write(&record)
        .unwrap();
        let done = restore_from_record(tmp.path(), &record).unwrap().unwrap();
        assert_eq!(done.restored, vec![0]);
        assert_eq!(done.failed.len(), 1);
        assert_eq!(done.failed[0].0, 7);
        assert_eq!(
            Record::read(&record).unwrap().unwrap().limits,
            vec![SavedLimit {
                cpu: 7,
                khz: 2_000_000
            }]
        );
    }

    #[test]
    fn a_garbled_record_is_an_error_and_stays_on_disk() {
        let tmp = tempfile::tempdir().unwrap();
        let record = tmp.path().join("cpufreq-restore.json");
        std::fs::write(&record, "{ not json").unwrap();
        let err = format!(
            "{:#}",
            restore_from_record(tmp.path(), &record).unwrap_err()
        );
        assert!(err.contains("not a CPU frequency record"), "{err}");
        assert!(record.exists());
    }
}
