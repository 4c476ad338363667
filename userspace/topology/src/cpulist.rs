//! The kernel's cpulist format ("0-3,8,10-11"), as printed by `%*pbl` in sysfs files
//! such as `cpu/online` and `node/nodeN/cpulist`.

use anyhow::{bail, Context, Result};

/// Largest CPU id accepted. Well above any real NR_CPUS (x86 tops out at 8192); the
/// cap exists so that a corrupt "0-4000000000" cannot make us allocate gigabytes.
const MAX_CPU_ID: u32 = 1 << 20;

/// Parses a cpulist into sorted, de-duplicated CPU ids.
///
/// Accepts what sysfs prints plus harmless variations: surrounding whitespace, a
/// trailing newline, spaces around commas and dashes, overlapping or unordered
/// items. An empty (or all-whitespace) string is the empty set. Anything else —
/// letters, empty items, reversed ranges, the `a-b:stride` syntax that only the
/// kernel command line uses — is rejected with an error naming the bad item.
pub fn parse_cpulist(s: &str) -> Result<Vec<u32>> {
    let text = s.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let mut cpus = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        if item.is_empty() {
            bail!("empty item in cpulist {text:?}");
        }
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (parse_id(a, text)?, parse_id(b, text)?),
            None => {
                let id = parse_id(item, text)?;
                (id, id)
            }
        };
        if lo > hi {
            bail!("reversed range {item:?} in cpulist {text:?}");
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

fn parse_id(s: &str, whole: &str) -> Result<u32> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        bail!("{s:?} is not a CPU number (in cpulist {whole:?})");
    }
    let id: u32 = s
        .parse()
        .with_context(|| format!("CPU number {s:?} too large (in cpulist {whole:?})"))?;
    if id > MAX_CPU_ID {
        bail!("CPU number {id} out of range (in cpulist {whole:?})");
    }
    Ok(id)
}

/// Formats CPU ids in the kernel's cpulist style: ascending, runs collapsed to
/// "a-b" (also for runs of two, as the kernel does), no spaces. Input order and
/// duplicates do not matter; the empty set is "".
pub fn format_cpulist(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();

    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sysfs_forms() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpulist("5").unwrap(), vec![5]);
        assert_eq!(parse_cpulist("0-0").unwrap(), vec![0]);
        assert_eq!(parse_cpulist("").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_cpulist(" \n").unwrap(), Vec::<u32>::new());
    }

    #[test]
    fn tolerates_spacing_order_and_overlap() {
        assert_eq!(
            parse_cpulist(" 8 , 0 - 2 ,1-3 ").unwrap(),
            vec![0, 1, 2, 3, 8]
        );
        assert_eq!(parse_cpulist("4,4,4").unwrap(), vec![4]);
    }

    #[test]
    fn rejects_garbage_with_the_bad_item_named() {
        for bad in [
            "abc", "0-", "-3", "1,,2", "0-3,", "3-1", "0-7:2", "1 2", "0x3", "+1", "1.5",
        ] {
            let err = parse_cpulist(bad).expect_err(bad).to_string();
            assert!(err.contains("cpulist"), "{bad:?}: {err}");
        }
        let err = parse_cpulist("0-3,x").unwrap_err().to_string();
        assert!(err.contains("\"x\""), "{err}");
        assert!(parse_cpulist("3-1")
            .unwrap_err()
            .to_string()
            .contains("reversed"));
    }

    #[test]
    fn rejects_huge_ids_instead_of_allocating() {
        assert!(parse_cpulist("0-4000000000").is_err());
        assert!(parse_cpulist("99999999999999999999").is_err());
        assert!(parse_cpulist(&(MAX_CPU_ID + 1).to_string()).is_err());
        assert_eq!(
            parse_cpulist(&MAX_CPU_ID.to_string()).unwrap(),
            vec![MAX_CPU_ID]
        );
    }

    #[test]
    fn formats_ranges() {
        assert_eq!(format_cpulist(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpulist(&[]), "");
        assert_eq!(format_cpulist(&[7]), "7");
        assert_eq!(format_cpulist(&[3, 1, 2, 2, 9]), "1-3,9");
        assert_eq!(format_cpulist(&[0, 2, 4]), "0,2,4");
    }

    #[test]
    fn format_then_parse_round_trips() {
        let cpus = vec![0, 1, 5, 6, 7, 9, 63, 64, 65, 200];
        assert_eq!(parse_cpulist(&format_cpulist(&cpus)).unwrap(), cpus);
    }
}
