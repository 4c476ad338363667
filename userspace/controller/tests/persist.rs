//! Saving and loading the learned state: round trip, atomicity, and files that must
//! be refused without a panic.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use esn_controller::persist::{lock, STATE_VERSION};
use esn_controller::{
    load, save, ControllerConfig, Decision, LearnedState, LoadOutcome, NodeController,
    LATENCY_TASKS_PER_CPU,
};

const TOPO: &str = "2 nodes: 0=cpu0-15,nvme0 1=cpu16-31";

/// A fresh directory for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("esn_controller-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Two nodes learning, one of them mid-way (fit usable, hysteresis in progress).
fn learning() -> (Vec<NodeController>, Vec<SimNode>) {
    let cfg = ControllerConfig::default();
    let mut nodes = Vec::new();
    let mut sims = Vec::new();
    for (id, p_numa, intervals) in [(0, 3.0, 47), (1, 1.3, 300)] {
        let mut sim = SimNode::new(p_numa, 0.05);
        let mut ctrl = NodeController::new(id, 1, DEMAND, &cfg);
        run(&mut ctrl, &mut sim, intervals);
        nodes.push(ctrl);
        sims.push(sim);
    }
    (nodes, sims)
}

fn next_decisions(nodes: &mut [NodeController], sims: &mut [SimNode], n: usize) -> Vec<Decision> {
    nodes
        .iter_mut()
        .zip(sims.iter_mut())
        .flat_map(|(c, s)| run(c, s, n))
        .collect()
}

fn loaded(path: &Path) -> LearnedState {
    match load(path, TOPO) {
        LoadOutcome::Loaded(s) => s,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_restored_controller_decides_as_the_saved_one_would() {
    let dir = TempDir::new("roundtrip");
    let path = dir.file("learned.json");
    let (mut nodes, sims) = learning();
    let state = LearnedState::new(TOPO, nodes.iter().map(NodeController::export).collect());
    save(&path, &state).unwrap();

    let back = loaded(&path);
    assert_eq!(back, state);
    let cfg = ControllerConfig::default();
    let mut restored: Vec<NodeController> = [0, 1]
        .iter()
        .map(|&id| NodeController::restore(back.node(id).unwrap(), &cfg, DEMAND))
        .collect();
    assert_eq!(restored, nodes);

    // The same samples give the same decisions, for long enough to cover a move,
    // explorations and the hysteresis that was in progress.
    let mut sims_copy: Vec<SimNode> = sims
        .iter()
        .map(|s| SimNode {
            lcg: Lcg(s.lcg.0),
            ..*s
        })
        .collect();
    let mut sims = sims;
    let original = next_decisions(&mut nodes, &mut sims, 100);
    let again = next_decisions(&mut restored, &mut sims_copy, 100);
    assert_eq!(original, again);
}

#[test]
fn a_pending_exploration_survives_the_round_trip() {
    let cfg = ControllerConfig::default();
    let mut sim = SimNode::new(3.0, 0.05);
    let mut ctrl = NodeController::new(0, DEMAND, DEMAND, &cfg);
    let mut d = ctrl.step(&sim.sample(DEMAND));
    for _ in 0..200 {
        if d.exploring {
            break;
        }
        d = ctrl.step(&sim.sample(d.threshold));
    }
    assert!(d.exploring);
    let json = serde_json::to_string(&ctrl.export()).unwrap();
    let mut restored = NodeController::restore(&serde_json::from_str(&json).unwrap(), &cfg, DEMAND);
    // An idle interval repeats the last answer: the exploration is still asked for.
    let idle = esn_controller::NodeSample::default();
    assert_eq!(restored.step(&idle), ctrl.step(&idle));
    assert!(restored.step(&idle).exploring);
}

#[test]
fn restoring_under_a_smaller_bound_clamps_the_threshold() {
    let (nodes, _) = learning();
    let state = nodes[0].export();
    assert!(
        state.threshold > LATENCY_TASKS_PER_CPU,
        "{}",
        state.threshold
    );
    // One CPU: at most LATENCY_TASKS_PER_CPU tasks.
    let ctrl = NodeController::restore(&state, &ControllerConfig::default(), 1);
    assert_eq!(ctrl.threshold(), LATENCY_TASKS_PER_CPU);
}

#[test]
fn restore_starts_afresh_from_a_state_that_is_not_sound() {
    let cfg = ControllerConfig::default();
    let (nodes, _) = learning();
    let good = nodes[1].export();
    let mut broken = Vec::new();
    let mut s = good.clone();
    s.fit.theta[0] = f64::NAN;
    broken.push(s);
    let mut s = good.clone();
    s.fit.information[1][1] = f64::INFINITY;
    broken.push(s);
    let mut s = good.clone();
    // Not positive definite.
    s.fit.information = [[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    broken.push(s);
    let mut s = good.clone();
    s.fit.scale = 0.0;
    broken.push(s);
    for s in broken {
        let mut ctrl = NodeController::restore(&s, &cfg, DEMAND);
        let d = ctrl.step(&SimNode::new(1.3, 0.0).sample(2));
        // The fit starts over: no curve until three distinct n again.
        assert_eq!(d.curve, None);
        assert_eq!(d.threshold, good.threshold);
    }
    // A NaN penalty average falls back to the prior.
    let mut s = good.clone();
    s.numa.ewma = Some(f64::NAN);
    let mut ctrl = NodeController::restore(&s, &cfg, DEMAND);
    let mut sample = SimNode::new(1.3, 0.0).sample(2);
    sample.remote_lat.count = 0;
    let d = ctrl.step(&sample);
    assert_eq!(d.p_numa, 1.3);
}

#[test]
fn save_replaces_atomically_and_leaves_nothing_behind() {
    let dir = TempDir::new("atomic");
    let path = dir.file("learned.json");
    let (nodes, _) = learning();
    let first = LearnedState::new(TOPO, vec![nodes[0].export()]);
    let second = LearnedState::new(TOPO, nodes.iter().map(NodeController::export).collect());

    save(&path, &first).unwrap();
    assert_eq!(dir.entries(), ["learned.json"]);
    save(&path, &second).unwrap();
    assert_eq!(dir.entries(), ["learned.json"]);
    assert_eq!(loaded(&path), second);

    // A file or symlink at a name a temporary file once had (a crashed save, or
    // planted) is neither opened nor followed: each save creates a new file.
    let stale = dir.file(&format!(".learned.json.tmp.{}.0", std::process::id()));
    let victim = dir.file("victim");
    fs::write(&victim, b"not ours").unwrap();
    std::os::unix::fs::symlink(&victim, &stale).unwrap();
    save(&path, &first).unwrap();
    assert_eq!(loaded(&path), first);
    assert_eq!(fs::read(&victim).unwrap(), b"not ours");
    let name = format!(".learned.json.tmp.{}.0", std::process::id());
    assert_eq!(dir.entries(), [name.as_str(), "learned.json", "victim"]);
}

#[test]
fn the_state_file_is_0644_and_a_symlink_is_neither_read_nor_written_through() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("symlink");
    let (nodes, _) = learning();
    let state = LearnedState::new(TOPO, vec![nodes[0].export()]);

    let path = dir.file("learned.json");
    save(&path, &state).unwrap();
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode & 0o133,
        0,
        "no exec bit, no write for group/other: {mode:o}"
    );

    // A state file that is a symlink: not read...
    let target = dir.file("elsewhere.json");
    save(&target, &state).unwrap();
    let link = dir.file("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    match load(&link, TOPO) {
        LoadOutcome::Ignored(why) => assert!(why.contains("symbolic link"), "{why}"),
        other => panic!("a symlinked state file was used: {other:?}"),
    }
    // ...and a save replaces the link, never writing through it.
    let before = fs::read(&target).unwrap();
    let other = LearnedState::new(TOPO, nodes.iter().map(NodeController::export).collect());
    save(&link, &other).unwrap();
    assert!(!fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read(&target).unwrap(), before);
    assert_eq!(loaded(&link), other);
}

#[test]
fn one_process_owns_a_state_file_until_it_lets_go() {
    let dir = TempDir::new("lock");
    let path = dir.file("learned.json");
    let held = lock(&path).unwrap();
    let err = lock(&path).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    assert!(err.to_string().contains("in use"), "{err}");
    // Another file in the same directory is another lock.
    let _other = lock(&dir.file("other.json")).unwrap();
    drop(held);
    let _again = lock(&path).unwrap();
    // No directory: an error, not a panic.
    assert!(lock(&dir.file("missing/learned.json")).is_err());
}

#[test]
fn a_failed_save_keeps_the_old_file_and_leaves_nothing_behind() {
    let dir = TempDir::new("failed");
    let path = dir.file("learned.json");
    let (nodes, _) = learning();
    let state = LearnedState::new(TOPO, vec![nodes[0].export()]);
    save(&path, &state).unwrap();

    // The target is a directory: the rename fails after the temporary file was
    // written.
    let blocked = dir.file("blocked");
    fs::create_dir(&blocked).unwrap();
    fs::write(blocked.join("x"), b"x").unwrap();
    assert!(save(&blocked, &state).is_err());
    assert_eq!(dir.entries(), ["blocked", "learned.json"]);
    assert_eq!(loaded(&path), state);

    // A state that could not be read back.
    let mut nan = state.clone();
    nan.nodes[0].fit.theta[1] = f64::NAN;
    let err = save(&path, &nan).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    assert_eq!(loaded(&path), state);

    // No directory to write into at all.
    assert!(save(&dir.file("missing/learned.json"), &state).is_err());
    // No file name.
    assert!(save(Path::new("/"), &state).is_err());
}

#[test]
fn a_missing_file_is_missing() {
    let dir = TempDir::new("missing");
    assert_eq!(load(&dir.file("nothing.json"), TOPO), LoadOutcome::Missing);
}

fn ignored(dir: &TempDir, content: &[u8]) -> String {
    let path = dir.file("state.json");
    fs::write(&path, content).unwrap();
    match load(&path, TOPO) {
        LoadOutcome::Ignored(reason) => reason,
        other => panic!(
            "{:?} was not ignored: {other:?}",
            String::from_utf8_lossy(content)
        ),
    }
}

#[test]
fn unusable_files_are_ignored_with_a_reason() {
    let dir = TempDir::new("ignored");
    let (nodes, _) = learning();
    let good = LearnedState::new(TOPO, nodes.iter().map(NodeController::export).collect());
    let json = serde_json::to_string_pretty(&good).unwrap();

    assert!(ignored(&dir, b"").contains("JSON"));
    assert!(ignored(&dir, b"\x00\xff\xfe garbage \x80").contains("JSON"));
    assert!(ignored(&dir, &json.as_bytes()[..json.len() / 2]).contains("JSON"));
    assert!(ignored(&dir, b"[1, 2, 3]").contains("version"));
    assert!(ignored(&dir, b"{}").contains("version"));
    assert!(ignored(&dir, b"null").contains("version"));

    let other_version = json.replacen(
        &format!("\"version\": {STATE_VERSION}"),
        "\"version\": 999",
        1,
    );
    assert!(ignored(&dir, other_version.as_bytes()).contains("version 999"));

    let other_topology = json.replacen(TOPO, "1 node: 0=cpu0-7", 1);
    assert!(ignored(&dir, other_topology.as_bytes()).contains("topology"));

    // A number too large for f64 would be infinite; JSON has no NaN, and this is
    // the nearest a file gets to one.
    let scale = format!("\"scale\": {:?}", good.nodes[0].fit.scale);
    assert!(json.contains(&scale), "{scale} not in {json}");
    let huge = json.replacen(&scale, "\"scale\": 1e999", 1);
    let reason = ignored(&dir, huge.as_bytes());
    println!("1e999: {reason}");
    assert!(reason.contains("out of range"), "{reason}");
    let huge = json.replacen(&scale, "\"scale\": -1e999", 1);
    assert!(ignored(&dir, huge.as_bytes()).contains("out of range"));

    // Right shape, wrong types.
    let wrong_type = json.replacen("\"threshold\": ", "\"threshold\": \"many\", \"x\": ", 1);
    assert!(ignored(&dir, wrong_type.as_bytes()).contains("malformed"));

    let mut twice = good.clone();
    twice.nodes[1].node = twice.nodes[0].node;
    let reason = ignored(&dir, serde_json::to_string(&twice).unwrap().as_bytes());
    assert!(reason.contains("twice"), "{reason}");
}

#[test]
fn no_file_content_makes_load_panic() {
    let dir = TempDir::new("fuzz");
    let (nodes, _) = learning();
    let good = LearnedState::new(TOPO, nodes.iter().map(NodeController::export).collect());
    let json = serde_json::to_vec(&good).unwrap();
    let mut lcg = Lcg(7);
    let path = dir.file("state.json");
    // Every prefix, and random byte flips.
    for len in (0..json.len()).step_by(7) {
        fs::write(&path, &json[..len]).unwrap();
        assert!(matches!(load(&path, TOPO), LoadOutcome::Ignored(_)));
    }
    for _ in 0..300 {
        let mut bytes = json.clone();
        for _ in 0..3 {
            let i = (lcg.next_u64() % bytes.len() as u64) as usize;
            bytes[i] = (lcg.next_u64() & 0xff) as u8;
        }
        fs::write(&path, &bytes).unwrap();
        if let LoadOutcome::Loaded(state) = load(&path, TOPO) {
            // A flip that still parses must still restore into a working controller.
            let cfg = ControllerConfig::default();
            for n in &state.nodes {
                let mut ctrl = NodeController::restore(n, &cfg, DEMAND);
                let d = ctrl.step(&SimNode::new(1.3, 0.0).sample(2));
                assert!((1..=DEMAND).contains(&d.threshold));
            }
        }
    }
    // A directory where the file should be.
    let sub = dir.file("sub");
    fs::create_dir(&sub).unwrap();
    assert!(matches!(load(&sub, TOPO), LoadOutcome::Ignored(_)));
}
