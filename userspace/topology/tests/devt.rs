//! Kernel dev_t encoding, "MAJ:MIN" parsing and the device table.

use esn_topology::devt::{DevT, DeviceInfo, DeviceTable, ParseDevTError};

#[test]
fn encode_decode() {
    let d = DevT::new(259, 0);
    assert_eq!(d.0, 259 << 20);
    assert_eq!((d.major(), d.minor()), (259, 0));
    let d = DevT::new(8, 17);
    assert_eq!(d.0, (8 << 20) | 17);
    assert_eq!((d.major(), d.minor()), (8, 17));
    let d = DevT((4095 << 20) | 0xfffff);
    assert_eq!((d.major(), d.minor()), (4095, 1_048_575));
    assert_eq!(DevT::new(4095, 1_048_575), d);
    // Ordered by major, then minor.
    assert!(DevT::new(8, 999) < DevT::new(259, 0));
    assert!(DevT::new(259, 0) < DevT::new(259, 1));
}

#[test]
fn display_and_parse_round_trip() {
    for (maj, min) in [(0, 0), (8, 0), (259, 0), (259, 12), (4095, 1_048_575)] {
        let d = DevT::new(maj, min);
        let s = d.to_string();
        assert_eq!(s, format!("{maj}:{min}"));
        assert_eq!(s.parse::<DevT>(), Ok(d));
    }
    assert_eq!(" 259:3\n".parse::<DevT>(), Ok(DevT::new(259, 3)));
}

#[test]
fn parse_errors_say_what_is_wrong() {
    let err = |s: &str| s.parse::<DevT>().unwrap_err();
    assert!(matches!(err("259"), ParseDevTError::Format { .. }));
    assert!(matches!(err(""), ParseDevTError::Format { .. }));
    assert!(matches!(err("1:2:3"), ParseDevTError::Format { .. }));
    assert!(matches!(err("nvme0n1"), ParseDevTError::Format { .. }));
    assert!(matches!(err(":0"), ParseDevTError::NotANumber { .. }));
    assert!(matches!(err("259:"), ParseDevTError::NotANumber { .. }));
    assert!(matches!(err("a:0"), ParseDevTError::NotANumber { .. }));
    assert!(matches!(err("-1:0"), ParseDevTError::NotANumber { .. }));
    assert!(matches!(err("259:+1"), ParseDevTError::NotANumber { .. }));
    assert!(matches!(err("259: 1"), ParseDevTError::NotANumber { .. }));
    assert_eq!(
        err("4096:0"),
        ParseDevTError::MajorOutOfRange {
            input: "4096:0".into(),
            major: 4096
        }
    );
    assert_eq!(
        err("8:1048576"),
        ParseDevTError::MinorOutOfRange {
            input: "8:1048576".into(),
            minor: 1 << 20
        }
    );
    assert!(matches!(
        err("99999999999999999999999:0"),
        ParseDevTError::MajorOutOfRange { .. }
    ));

    let msg = err("8:1048576").to_string();
    assert!(
        msg.contains("minor 1048576") && msg.contains("1048575"),
        "{msg}"
    );
    let msg = err("4096:0").to_string();
    assert!(msg.contains("major 4096") && msg.contains("4095"), "{msg}");
    let msg = err("x:1").to_string();
    assert!(msg.contains("\"x\"") && msg.contains("MAJ:MIN"), "{msg}");
}

#[test]
fn serializes_as_maj_min_string() {
    let v = serde_json::to_value(DevT::new(259, 0)).unwrap();
    assert_eq!(v, serde_json::json!("259:0"));
    let back: DevT = serde_json::from_value(v).unwrap();
    assert_eq!(back, DevT::new(259, 0));
    assert!(serde_json::from_value::<DevT>(serde_json::json!("259")).is_err());
}

fn table() -> DeviceTable {
    DeviceTable::new(vec![
        DeviceInfo {
            name: "nvme0n1".into(),
            dev: DevT::new(259, 0),
            node: Some(1),
            partitions: vec![DevT::new(259, 1), DevT::new(259, 2)],
        },
        DeviceInfo {
            name: "sda".into(),
            dev: DevT::new(8, 0),
            node: None,
            partitions: vec![DevT::new(8, 1)],
        },
    ])
}

#[test]
fn partitions_resolve_to_their_disk() {
    let t = table();
    assert_eq!(t.len(), 2);
    assert_eq!(t.lookup(DevT::new(259, 0)).unwrap().name, "nvme0n1");
    assert_eq!(t.lookup(DevT::new(259, 2)).unwrap().name, "nvme0n1");
    assert_eq!(t.lookup(DevT::new(8, 1)).unwrap().dev, DevT::new(8, 0));
    assert!(t.lookup(DevT::new(259, 3)).is_none());
    assert_eq!(t.disk_of(DevT::new(259, 1)), DevT::new(259, 0));
    assert_eq!(t.disk_of(DevT::new(7, 3)), DevT::new(7, 3));
    assert_eq!(t.name_of(DevT::new(259, 1)), "nvme0n1");
    assert_eq!(t.name_of(DevT::new(8, 0)), "sda");
    assert_eq!(t.name_of(DevT::new(7, 3)), "7:3");
}

#[test]
fn names_with_and_without_dev_prefix() {
    let t = table();
    assert_eq!(t.by_name("nvme0n1").unwrap().dev, DevT::new(259, 0));
    assert_eq!(t.by_name("/dev/nvme0n1").unwrap().dev, DevT::new(259, 0));
    assert_eq!(t.by_name("/dev/sda").unwrap().node, None);
    assert!(t.by_name("nvme1n1").is_none());
    assert!(t.by_name("/dev/").is_none());
    assert!(t.by_name("dev/sda").is_none());

    assert_eq!(t.resolve("/dev/nvme0n1"), Some(DevT::new(259, 0)));
    assert_eq!(t.resolve("259:2"), Some(DevT::new(259, 0)));
    assert_eq!(t.resolve("7:3"), Some(DevT::new(7, 3)));
    assert_eq!(t.resolve("nosuch"), None);
}

#[test]
fn overlapping_entries_keep_the_first_and_prefer_disks() {
    let t = DeviceTable::new(vec![
        DeviceInfo {
            name: "a".into(),
            dev: DevT::new(1, 0),
            node: Some(0),
            // Claims b's disk number as a partition: b's own entry must still win.
            partitions: vec![DevT::new(2, 0), DevT::new(1, 1)],
        },
        DeviceInfo {
            name: "b".into(),
            dev: DevT::new(2, 0),
            node: Some(1),
            partitions: vec![DevT::new(1, 1)],
        },
        DeviceInfo {
            name: "a".into(),
            dev: DevT::new(3, 0),
            node: None,
            partitions: vec![],
        },
    ]);
    assert_eq!(t.name_of(DevT::new(2, 0)), "b");
    assert_eq!(t.name_of(DevT::new(1, 1)), "a");
    assert_eq!(t.by_name("a").unwrap().dev, DevT::new(1, 0));
    assert_eq!(t.name_of(DevT::new(3, 0)), "a");
}
