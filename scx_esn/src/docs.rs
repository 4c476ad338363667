// SPDX-License-Identifier: GPL-2.0-only
//! Shell completions and man pages, generated from the one CLI definition
//! (`cli::Opts`) so that they can never disagree with `--help`.

use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::Opts;
use crate::output;

/// Administration commands (it loads a scheduler into the kernel, as root).
const MAN_SECTION: &str = "8";

/// The completion script for `shell`, on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Opts::command(), "scx_esn", &mut script);
    output::write(&String::from_utf8(script).context("the completion script is not UTF-8")?)
}

/// `scx_esn.8` and `scx_esn-<subcommand>.8` for every subcommand a user
/// runs, written into `dir` (created if missing). Returns nothing but
/// errors: the files are the product.
pub fn man_pages(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let top = Opts::command();
    write_page(dir, "scx_esn", top.clone())?;
    for sub in top.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        let name = format!("scx_esn-{}", sub.get_name());
        write_page(dir, &name, sub.clone().name(name.clone()))?;
    }
    Ok(())
}

fn write_page(dir: &Path, name: &str, cmd: clap::Command) -> Result<()> {
    let path = dir.join(format!("{name}.{MAN_SECTION}"));
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd)
        .section(MAN_SECTION)
        .render(&mut page)
        .with_context(|| format!("rendering {name}({MAN_SECTION})"))?;
    std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subcommand_a_user_runs_gets_a_page_and_the_top_page_lists_the_options() {
        let dir = std::env::temp_dir().join(format!("scx_esn-man-{}", std::process::id()));
        man_pages(&dir).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let top = std::fs::read_to_string(dir.join("scx_esn.8")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            names,
            [
                "scx_esn-completions.8",
                "scx_esn-energy.8",
                "scx_esn-observe.8",
                "scx_esn-profile.8",
                "scx_esn-restore-freq.8",
                "scx_esn-top.8",
                "scx_esn-topology.8",
                "scx_esn.8"
            ]
        );
        assert!(
            top.starts_with(".ie \\n(.g .ds Aq"),
            "not roff: {}",
            &top[..40]
        );
        for option in [
            "threshold",
            "numa\\-penalty",
            "state\\-file",
            "kconfig",
            "dvfs",
            "energy\\-watts",
        ] {
            assert!(
                top.contains(&format!("\\-\\-{option}")),
                "--{option} missing"
            );
        }
    }
}
