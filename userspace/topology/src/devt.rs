//! Block device numbers as the kernel keeps them internally, and the table that
//! names them.
//!
//! Inside the kernel (and so in every BPF map) a `dev_t` is `major << 20 | minor` in
//! 32 bits: 12 bits of major, 20 of minor. That is not the userspace encoding
//! `stat(2)` returns (glibc's `makedev` splits the bits differently), so the two
//! must never be mixed; [`DevT`] only ever holds the kernel form.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Bits of the minor number in the kernel's `dev_t` (`MINORBITS`).
pub const MINOR_BITS: u32 = 20;
/// Largest minor number a kernel `dev_t` can hold.
pub const MAX_MINOR: u32 = (1 << MINOR_BITS) - 1;
/// Largest major number a kernel `dev_t` can hold.
pub const MAX_MAJOR: u32 = (1 << (32 - MINOR_BITS)) - 1;

/// A kernel-internal device number, `major << 20 | minor`.
///
/// Ordered by the raw value, which is major first, then minor. Shown and serialized
/// as "MAJ:MIN" ("259:0"), the way `/sys/block/*/dev` and `lsblk` print it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DevT(pub u32);

impl DevT {
    /// Bits above the field widths are dropped, as they cannot be represented; use
    /// [`DevT::try_new`] (or parse a string) to have them rejected instead.
    pub fn new(major: u32, minor: u32) -> DevT {
        DevT(((major & MAX_MAJOR) << MINOR_BITS) | (minor & MAX_MINOR))
    }

    /// `None` when `major` or `minor` does not fit the kernel's encoding.
    pub fn try_new(major: u32, minor: u32) -> Option<DevT> {
        (major <= MAX_MAJOR && minor <= MAX_MINOR).then(|| DevT::new(major, minor))
    }

    pub fn major(self) -> u32 {
        self.0 >> MINOR_BITS
    }

    pub fn minor(self) -> u32 {
        self.0 & MAX_MINOR
    }
}

impl fmt::Display for DevT {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Through pad so that width and alignment flags work in tables.
        f.pad(&format!("{}:{}", self.major(), self.minor()))
    }
}

/// Why a string is not a "MAJ:MIN" device number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseDevTError {
    /// No colon, or more than one.
    Format {
        input: String,
    },
    /// A side that is empty or not a decimal number.
    NotANumber {
        input: String,
        part: String,
    },
    MajorOutOfRange {
        input: String,
        major: u64,
    },
    MinorOutOfRange {
        input: String,
        minor: u64,
    },
}

impl fmt::Display for ParseDevTError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseDevTError::Format { input } => write!(
                f,
                "{input:?} is not a device number; expected MAJ:MIN such as \"259:0\""
            ),
            ParseDevTError::NotANumber { input, part } => write!(
                f,
                "{part:?} is not a decimal number (in device number {input:?}, \
                 expected MAJ:MIN such as \"259:0\")"
            ),
            ParseDevTError::MajorOutOfRange { input, major } => write!(
                f,
                "major {major} out of range in device number {input:?}; \
                 the kernel's dev_t holds majors 0 to {MAX_MAJOR}"
            ),
            ParseDevTError::MinorOutOfRange { input, minor } => write!(
                f,
                "minor {minor} out of range in device number {input:?}; \
                 the kernel's dev_t holds minors 0 to {MAX_MINOR}"
            ),
        }
    }
}

impl std::error::Error for ParseDevTError {}

impl FromStr for DevT {
    type Err = ParseDevTError;

    /// Parses "MAJ:MIN" in decimal; surrounding whitespace (a trailing newline from
    /// a sysfs `dev` file) is ignored.
    fn from_str(s: &str) -> Result<DevT, ParseDevTError> {
        let text = s.trim();
        let Some((maj, min)) = text.split_once(':') else {
            return Err(ParseDevTError::Format { input: s.into() });
        };
        if min.contains(':') {
            return Err(ParseDevTError::Format { input: s.into() });
        }
        let number = |part: &str| -> Result<u64, ParseDevTError> {
            let not_a_number = || ParseDevTError::NotANumber {
                input: s.into(),
                part: part.into(),
            };
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(not_a_number());
            }
            // Only too many digits can fail here; saturating makes that an
            // out-of-range value, which is the more useful message.
            Ok(part.parse::<u64>().unwrap_or(u64::MAX))
        };
        let major = number(maj)?;
        let minor = number(min)?;
        if major > u64::from(MAX_MAJOR) {
            return Err(ParseDevTError::MajorOutOfRange {
                input: s.into(),
                major,
            });
        }
        if minor > u64::from(MAX_MINOR) {
            return Err(ParseDevTError::MinorOutOfRange {
                input: s.into(),
                minor,
            });
        }
        Ok(DevT::new(major as u32, minor as u32))
    }
}

impl Serialize for DevT {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DevT {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<DevT, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A whole disk as the report shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Kernel name without "/dev/": "nvme0n1".
    pub name: String,
    pub dev: DevT,
    /// Local node (`Plan::local_node`: its requests from there are local);
    /// `None` when it has none.
    pub node: Option<u32>,
    pub partitions: Vec<DevT>,
}

/// The disks of the machine, looked up by device number (partitions included) or
/// by name.
///
/// When entries overlap, the first one wins, and a disk's own number always wins
/// over the same number listed as another disk's partition, so a lookup is never
/// ambiguous.
#[derive(Clone, Debug, Default)]
pub struct DeviceTable {
    devices: Vec<DeviceInfo>,
    /// Disk and partition numbers -> index into `devices`.
    by_dev: HashMap<DevT, usize>,
}

impl DeviceTable {
    pub fn new(devices: Vec<DeviceInfo>) -> DeviceTable {
        let mut by_dev = HashMap::new();
        for (i, d) in devices.iter().enumerate() {
            by_dev.entry(d.dev).or_insert(i);
        }
        for (i, d) in devices.iter().enumerate() {
            for &p in &d.partitions {
                by_dev.entry(p).or_insert(i);
            }
        }
        DeviceTable { devices, by_dev }
    }

    /// In the order given to [`DeviceTable::new`].
    pub fn devices(&self) -> &[DeviceInfo] {
        &self.devices
    }

    pub fn len(&self) -> usize {
        self.devices.len()
    }

    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// The disk that `dev` is, or is a partition of.
    pub fn lookup(&self, dev: DevT) -> Option<&DeviceInfo> {
        self.by_dev.get(&dev).map(|&i| &self.devices[i])
    }

    /// The disk's number for a partition; `dev` itself for a disk or an unknown
    /// device.
    pub fn disk_of(&self, dev: DevT) -> DevT {
        self.lookup(dev).map_or(dev, |d| d.dev)
    }

    /// The disk's name ("nvme0n1" also for a partition of it), or "MAJ:MIN" for a
    /// device the table does not know.
    pub fn name_of(&self, dev: DevT) -> String {
        self.lookup(dev)
            .map_or_else(|| dev.to_string(), |d| d.name.clone())
    }

    /// Accepts "nvme0n1" and "/dev/nvme0n1".
    pub fn by_name(&self, name: &str) -> Option<&DeviceInfo> {
        let name = name.strip_prefix("/dev/").unwrap_or(name);
        self.devices.iter().find(|d| d.name == name)
    }

    /// What a user may type to pick a device: a disk name (with or without
    /// "/dev/"), or "MAJ:MIN". A number of a partition gives its disk; a number the
    /// table does not know is taken as is, since its requests still get a row.
    pub fn resolve(&self, spec: &str) -> Option<DevT> {
        if let Some(d) = self.by_name(spec.trim()) {
            return Some(d.dev);
        }
        spec.parse::<DevT>().ok().map(|dev| self.disk_of(dev))
    }
}

impl From<Vec<DeviceInfo>> for DeviceTable {
    fn from(devices: Vec<DeviceInfo>) -> DeviceTable {
        DeviceTable::new(devices)
    }
}

impl FromIterator<DeviceInfo> for DeviceTable {
    fn from_iter<I: IntoIterator<Item = DeviceInfo>>(iter: I) -> DeviceTable {
        DeviceTable::new(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's MKDEV, which BPF's kernel_mkdev() and every map key use.
    #[test]
    fn encodes_as_the_kernel_does() {
        assert_eq!(DevT::new(259, 3).0, (259 << 20) | 3);
        assert_eq!(DevT::new(8, 16).0, 0x0080_0010);
    }

    #[test]
    fn new_masks_what_does_not_fit() {
        assert_eq!(DevT::new(MAX_MAJOR + 1, 5), DevT::new(0, 5));
        assert_eq!(DevT::new(1, MAX_MINOR + 1), DevT::new(1, 0));
        assert_eq!(DevT::try_new(MAX_MAJOR + 1, 0), None);
        assert_eq!(DevT::try_new(0, MAX_MINOR + 1), None);
        assert_eq!(DevT::try_new(MAX_MAJOR, MAX_MINOR), Some(DevT(u32::MAX)));
    }

    #[test]
    fn display_honours_width() {
        assert_eq!(format!("[{:>7}]", DevT::new(8, 1)), "[    8:1]");
        assert_eq!(format!("[{:<7}]", DevT::new(8, 1)), "[8:1    ]");
    }
}
