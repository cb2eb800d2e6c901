//! The worker image, replayed (`tests/fleet.rs`): the build stage of
//! `configs/container/Containerfile.worker` run on a clean copy of exactly the files it
//! COPYs (from git's list of the working tree), running its RUN line
//! (`scripts/build-worker.sh`) as the container would; the runtime stage's
//! `COPY --from=build`, ENV, WORKDIR and ENTRYPOINT applied to a folder standing in for
//! the image's root (its RUN lines install Debian packages and add a user: skipped,
//! this machine has them). The copy and its own target dir sit at a fixed place in
//! cargo's target dir, with the files' times kept: a rerun rebuilds only what changed
//! (the first run builds the worker in release, a few minutes on two cores).

use super::containerfile::{image_config, parse_containerfile, ImageConfig};
use super::{on, read, tail, workspace, CONTAINERFILE};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

/// Cargo's target dir, whatever CARGO_TARGET_DIR is: this test runs as
/// `<target>/<profile>/deps/fleet-<hash>`.
pub fn target_dir() -> PathBuf {
    std::env::current_exe().unwrap().ancestors().nth(3).unwrap().to_path_buf()
}

/// Copy a file keeping its mode and modification time (so that cargo, comparing times,
/// sees an unchanged copy as unchanged).
pub fn copy_file(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copying {} to {}: {e}", from.display(), to.display()));
    let modified = std::fs::metadata(from).unwrap().modified().unwrap();
    std::fs::File::options().write(true).open(to).unwrap().set_modified(modified).unwrap();
}

/// The worker image, replayed (see the top of the file).
pub struct Image {
    /// Stands in for the image's root: /usr/local/bin/shine-worker is in it.
    pub root: PathBuf,
    pub config: ImageConfig,
    _dir: tempfile::TempDir,
}

impl Image {
    pub fn binary(&self) -> PathBuf {
        on(&self.root, "/usr/local/bin/shine-worker")
    }
}

/// The files of the working tree as git lists them (tracked and new, minus ignored),
/// relative to the workspace: what a fresh clone plus the uncommitted work holds.
pub fn source_files() -> Vec<String> {
    let out = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(workspace())
        .output()
        .expect("running git: this test copies the source files git lists, so it needs git and a git checkout");
    assert!(out.status.success(), "git ls-files: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().split('\0').filter(|f| !f.is_empty() && workspace().join(f).is_file()).map(String::from).collect()
}

pub fn worker_image() -> &'static Image {
    static IMAGE: OnceLock<Image> = OnceLock::new();
    IMAGE.get_or_init(build_worker_image)
}

pub fn build_worker_image() -> Image {
    // One build at a time, across processes (two runs of the tests on one checkout at
    // once; under cargo-nextest each test is a process of its own, so the OnceLock above
    // shares nothing between them). The builds share the source copy and its target dir
    // below; the second waits here, then finds cargo's outputs fresh.
    let lock = std::fs::File::create(target_dir().join("shine-fleet-test.lock")).unwrap();
    lock.lock().expect("locking the fleet test's build");
    let t0 = Instant::now();
    let stages = parse_containerfile(&read(CONTAINERFILE));
    let build = stages.iter().find(|s| s.name.as_deref() == Some("build")).expect("a stage named build");
    let target = stages.last().expect("a stage");
    assert_eq!(target.name.as_deref(), Some("worker"), "the default target (the last stage) is the simulator worker");

    let dir = tempfile::tempdir().unwrap();
    let build_root = dir.path().join("build-root");
    let root = dir.path().join("image-root");
    // The build stage's WORKDIR: a fixed folder, so cargo can reuse its outputs.
    let src = target_dir().join("shine-fleet-test").join("src");
    let copy_target = target_dir().join("shine-fleet-test").join("target");
    if src.exists() {
        std::fs::remove_dir_all(&src).unwrap();
    }
    std::fs::create_dir_all(&src).unwrap();
    let listed = source_files();
    let mut workdir: Option<String> = None;
    // A path in the build stage: under WORKDIR is the copy; anything else under build_root.
    let in_build = |workdir: &Option<String>, p: &str| -> PathBuf {
        match workdir.as_deref().and_then(|w| p.strip_prefix(w)) {
            Some(rest) => src.join(rest.trim_start_matches('/')),
            None => on(&build_root, p),
        }
    };
    let mut args: Vec<(String, String)> = Vec::new();
    let mut ran = 0;
    for (ins, rest) in &build.steps {
        match ins.as_str() {
            "WORKDIR" => workdir = Some(rest.clone()),
            "COPY" => {
                let words: Vec<&str> = rest.split_whitespace().collect();
                assert!(!words[0].starts_with("--"), "COPY {rest}: the build stage copies from the build context only");
                let (dest, sources) = words.split_last().unwrap();
                assert!(dest.ends_with('/'), "COPY {rest}: end the destination with / (a folder)");
                for s in sources {
                    let s = s.trim_end_matches('/');
                    let files: Vec<&String> = listed.iter().filter(|f| *f == s || f.starts_with(&format!("{s}/"))).collect();
                    assert!(!files.is_empty(), "{CONTAINERFILE}: COPY {s}: not a file or folder of the source tree");
                    for f in files {
                        let rel = if f == s { Path::new(f).file_name().unwrap().to_str().unwrap() } else { &f[s.len() + 1..] };
                        copy_file(&workspace().join(f), &src.join(dest.trim_start_matches("./")).join(rel));
                    }
                }
            }
            "ARG" => {
                let (k, v) = rest.split_once('=').unwrap_or((rest.as_str(), ""));
                // An absolute path (the install prefix) lands in this stage's folder.
                let v = if v.starts_with('/') { in_build(&workdir, v).display().to_string() } else { v.to_string() };
                args.push((k.to_string(), v));
            }
            "RUN" => {
                // Docker runs RUN's shell form as `/bin/sh -c`, in WORKDIR, with the ARGs
                // in the environment. A clean environment apart from what finds the
                // toolchain, as in the rust image. The copy gets a target dir of its own
                // (kept for reruns): cargo names a path package's outputs by its place
                // in the workspace, not its absolute path, so a copy building into the
                // workspace's target dir would take over the workspace's fingerprints,
                // and later builds of the real tree would be judged against the copy's
                // files and wrongly found fresh.
                let log = dir.path().join(format!("run-{ran}.log"));
                let mut cmd = Command::new("/bin/sh");
                cmd.arg("-c").arg(rest).current_dir(in_build(&workdir, workdir.as_deref().unwrap_or("/"))).env_clear();
                for k in [
                    "PATH",
                    "HOME",
                    "CARGO_HOME",
                    "RUSTUP_HOME",
                    "RUSTUP_TOOLCHAIN",
                    "TMPDIR",
                    "http_proxy",
                    "https_proxy",
                    "no_proxy",
                    "HTTP_PROXY",
                    "HTTPS_PROXY",
                    "NO_PROXY",
                ] {
                    if let Some(v) = std::env::var_os(k) {
                        cmd.env(k, v);
                    }
                }
                cmd.env("CARGO_TARGET_DIR", copy_target.clone()).env("CARGO_TERM_COLOR", "never").envs(args.iter().map(|(k, v)| (k, v)));
                // The release profile made cheap to build (cargo reads profile settings
                // from the environment too): no optimisation, no LTO, many codegen units.
                // What this test checks is the build's steps and the image they make, not
                // the binary's speed, and the real profile (thin LTO, one codegen unit)
                // made this one build take minutes of the test command on two cores.
                cmd.envs([("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0"), ("CARGO_PROFILE_RELEASE_LTO", "off"), ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "256")]);
                let file = std::fs::File::create(&log).unwrap();
                let status = cmd.stdout(file.try_clone().unwrap()).stderr(file).status().expect("/bin/sh");
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                assert!(status.success(), "{CONTAINERFILE}: RUN {rest} failed ({status}):\n{}", tail(&text, 60));
                ran += 1;
            }
            other => panic!("{CONTAINERFILE}: the build stage uses {other}, which this test does not replay; extend it"),
        }
    }
    assert!(ran > 0, "the build stage runs something");

    // The runtime stages: their COPY --from=build, then ENV/ENTRYPOINT/WORKDIR.
    let mut chain = vec![target];
    while let Some(parent) = stages.iter().find(|s| s.name.as_deref() == Some(chain.last().unwrap().base.as_str())) {
        chain.push(parent);
    }
    for stage in chain.iter().rev() {
        for (ins, rest) in &stage.steps {
            if ins == "COPY" {
                let words: Vec<&str> = rest.split_whitespace().collect();
                assert_eq!(words.len(), 3, "COPY {rest}: expected COPY --from=build SRC DEST");
                assert_eq!(words[0], "--from=build", "COPY {rest}: the runtime copies only from the build stage");
                copy_file(&in_build(&workdir, words[1]), &on(&root, words[2]));
            }
        }
    }
    let config = image_config(&stages, target);
    let image = Image { root, config, _dir: dir };
    assert!(image.binary().is_file(), "the image has no /usr/local/bin/shine-worker");
    eprintln!("worker image replayed in {:.0} s (source copy in {})", t0.elapsed().as_secs_f64(), src.display());
    image
}
