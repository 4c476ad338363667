//! Prints the topology of this machine (or of the sysfs tree given as the first
//! argument) as text and as JSON.

use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let root = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/sys"));
    let topo = esn_topology::Topology::discover(&root)?;
    print!("{}", topo.render_text());
    println!("\n{}", serde_json::to_string_pretty(&topo)?);
    Ok(())
}
