//! Launching a worker fleet from the files in `configs/`, against a real manager.
//!
//! No cloud, container engine or init system here, so each launch path is replayed as
//! far as this machine allows, from the files themselves rather than from a re-typed
//! copy of them:
//! - the image: the build stage of `configs/container/Containerfile.worker` is
//!   replayed on a clean copy of exactly the files it COPYs (from git's list of the
//!   working tree), running its RUN line (`scripts/build-worker.sh`) as the container
//!   would; the runtime
//!   stage's `COPY --from=build`, ENV, WORKDIR and ENTRYPOINT are applied to a folder
//!   standing in for the image's root (its RUN lines install Debian packages and add a
//!   user: skipped, this machine has them). The copy and its own target dir sit at a
//!   fixed place in cargo's target dir, with the files' times kept: a rerun rebuilds
//!   only what changed (the first run builds the worker in release, a few minutes on
//!   two cores).
//! - a VM: the setup script from the AWS user-data that `shine-manager launch-script`
//!   prints, run with its paths moved into a folder (SHINE_ETC_DIR, SHINE_BIN_DIR) and
//!   the binary's URL a file:// one; then the systemd unit's ExecStart with its
//!   Environment= lines and the EnvironmentFile the script wrote.
//! - a Kubernetes pod: the worker Deployment's command and env (ConfigMap and Secret
//!   resolved) on top of the image's ENV, from the manifests launch-script prints.
//! - a container: the image's ENV and ENTRYPOINT with `docker run -e SHINE_MANAGER -e
//!   SHINE_TOKEN`.
//!
//! Absolute paths in those settings (the spool) are moved under each machine's folder,
//! the only change made to them.
//!
//! Also: `systemd-analyze verify` on the unit and `cloud-init schema` on the cloud-init
//! files (Debian packages `systemd` and `cloud-init`; SHINE_SKIP_SYSTEMD_VERIFY=1 or
//! SHINE_SKIP_CLOUD_INIT_SCHEMA=1 skip a check where they cannot be installed).

mod common;
#[path = "fleet/containerfile.rs"]
mod containerfile;

use common::{config, metric, Manager, HANG, TOKEN};
use containerfile::{image_config, parse_containerfile, ImageConfig};
use serde::Deserialize;
use serde_json::Value;
use serde_yaml_ng::Value as Yaml;
use shine_testkit::Proc;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const MANAGER_BIN: &str = env!("CARGO_BIN_EXE_shine-manager");
const CONTAINERFILE: &str = "configs/container/Containerfile.worker";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(workspace().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Cargo's target dir, whatever CARGO_TARGET_DIR is: this test runs as
/// `<target>/<profile>/deps/fleet-<hash>`.
fn target_dir() -> PathBuf {
    std::env::current_exe().unwrap().ancestors().nth(3).unwrap().to_path_buf()
}

/// `abs` (an absolute path inside a machine or image) under the folder standing in for
/// that machine's root.
fn on(root: &Path, abs: &str) -> PathBuf {
    assert!(abs.starts_with('/'), "{abs:?} is not an absolute path");
    root.join(abs.trim_start_matches('/'))
}

/// Copy a file keeping its mode and modification time (so that cargo, comparing times,
/// sees an unchanged copy as unchanged).
fn copy_file(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copying {} to {}: {e}", from.display(), to.display()));
    let modified = std::fs::metadata(from).unwrap().modified().unwrap();
    std::fs::File::options().write(true).open(to).unwrap().set_modified(modified).unwrap();
}

/// The worker image, replayed (see the top of the file).
struct Image {
    /// Stands in for the image's root: /usr/local/bin/shine-worker is in it.
    root: PathBuf,
    config: ImageConfig,
    _dir: tempfile::TempDir,
}

impl Image {
    fn binary(&self) -> PathBuf {
        on(&self.root, "/usr/local/bin/shine-worker")
    }
}

/// The files of the working tree as git lists them (tracked and new, minus ignored),
/// relative to the workspace: what a fresh clone plus the uncommitted work holds.
fn source_files() -> Vec<String> {
    let out = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(workspace())
        .output()
        .expect("running git: this test copies the source files git lists, so it needs git and a git checkout");
    assert!(out.status.success(), "git ls-files: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().split('\0').filter(|f| !f.is_empty() && workspace().join(f).is_file()).map(String::from).collect()
}

fn worker_image() -> &'static Image {
    static IMAGE: OnceLock<Image> = OnceLock::new();
    IMAGE.get_or_init(build_worker_image)
}

fn build_worker_image() -> Image {
    // One build at a time, across processes: two tests here use the image, and under
    // cargo-nextest each runs in a process of its own, so the OnceLock above does not
    // share it. The builds share the source copy and its target dir below; the second
    // waits here, then finds cargo's outputs fresh.
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

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

// ---------------------------------------------------------------------------------
// launch-script's output and the files in it.

fn launch_script(args: &[&str]) -> String {
    let out = Command::new(MANAGER_BIN).arg("launch-script").args(args).env_remove("SHINE_TOKEN").output().unwrap();
    assert!(out.status.success(), "shine-manager launch-script {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The text of the heredoc that starts with the line `command <<'SHINE_EOF'`.
fn heredoc<'a>(script: &'a str, command: &str) -> &'a str {
    let start = format!("{command} <<'SHINE_EOF'\n");
    let i = script.find(&start).unwrap_or_else(|| panic!("no `{command}` heredoc in:\n{script}")) + start.len();
    &script[i..i + script[i..].find("\nSHINE_EOF\n").expect("the heredoc's end") + 1]
}

fn yaml_docs(text: &str) -> Vec<Yaml> {
    serde_yaml_ng::Deserializer::from_str(text).map(|d| Yaml::deserialize(d).unwrap_or_else(|e| panic!("not YAML: {e}"))).filter(|v| !v.is_null()).collect()
}

fn write_file_content(cloud_init: &Yaml, path: &str) -> String {
    let files = cloud_init["write_files"].as_sequence().expect("write_files");
    let f = files.iter().find(|f| f["path"] == path).unwrap_or_else(|| panic!("cloud-init writes no {path}"));
    f["content"].as_str().unwrap().to_string()
}

/// A systemd unit's [Service] settings, in order (repeated keys kept).
fn unit_service(unit: &str) -> Vec<(String, String)> {
    let mut section = "";
    let mut out = Vec::new();
    for line in unit.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';')) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[Service]" {
            let (k, v) = line.split_once('=').unwrap_or_else(|| panic!("unit line {line:?}"));
            out.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

/// `KEY=VALUE` lines of an environment file (systemd's EnvironmentFile=).
fn env_file(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).unwrap_or_else(|| panic!("env file line {l:?}")))
        .collect()
}

/// Later entries win, as in every one of these formats.
fn merged(layers: &[&[(String, String)]]) -> BTreeMap<String, String> {
    layers.iter().flat_map(|l| l.iter().cloned()).collect()
}

// ---------------------------------------------------------------------------------
// Workers as processes.

struct Worker {
    what: &'static str,
    argv: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: PathBuf,
    log: PathBuf,
    /// Once started (killed when dropped).
    proc: Option<Proc>,
}

impl Worker {
    /// A machine's worker: `argv[0]` and the environment's absolute paths already
    /// point into its folder; the process gets that environment and nothing else
    /// (plus PATH, which finds nothing the worker needs). At the lowest CPU priority:
    /// three workers play flat out, and on a 2-core machine the manager in this test
    /// process (and its clock for heartbeats) must still get the CPU when it needs it;
    /// a VM or pod has its cores to itself.
    fn start(&mut self) {
        let file = std::fs::File::create(&self.log).unwrap();
        // Not testkit's spawn: that sets RUST_LOG, and the machine's environment is
        // what is under test.
        let child = Command::new("nice")
            .args(["-n", "19"])
            .args(&self.argv)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(&self.env)
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: starting {:?}: {e}", self.what, self.argv));
        self.proc = Some(Proc { child, log: self.log.clone() });
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, sig: &str) {
        self.proc.as_ref().expect("started").signal(sig);
    }

    /// Wait for the process to exit within `within`; its status. (Not `Proc::wait`,
    /// which blocks: the manager under test runs on this thread's runtime.)
    async fn wait(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        let child = &mut self.proc.as_mut().expect("started").child;
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "{} did not exit within {within:?}; log:\n{}", self.what, tail(&self.log(), 40));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `name` as a container's PATH (Debian's default) finds it in the image.
fn in_image_path(root: &Path, name: &str) -> PathBuf {
    if name.starts_with('/') {
        return on(root, name);
    }
    ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        .iter()
        .map(|d| on(root, d).join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is not in the image's PATH"))
}

/// Environment values that are absolute paths (the spool) moved into the machine's folder.
fn rebased(root: &Path, env: BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.into_iter().map(|(k, v)| if v.starts_with('/') { (k, on(root, &v).display().to_string()) } else { (k, v) }).collect()
}

/// A machine's folder with the image's files in it (a pod or a container of the image).
fn image_machine(image: &Image, root: &Path) {
    copy_file(&image.binary(), &on(root, "/usr/local/bin/shine-worker"));
}

/// The worker as a VM runs it: cloud-init's setup script (from the AWS user-data
/// launch-script prints), then the systemd unit's ExecStart and environment.
fn vm_worker(dir: &Path, manager_url: &str, image: &Image) -> Worker {
    let root = dir.join("vm");
    let binary_url = format!("file://{}", image.binary().display());
    let script = launch_script(&["--cloud", "aws", "--workers", "3", "--manager-url", manager_url, "--token", TOKEN, "--worker-url", &binary_url]);
    let user_data = yaml_docs(heredoc(&script, "cat > shine-worker-user-data.yaml")).remove(0);
    let setup = on(&root, "/usr/local/sbin/shine-worker-setup");
    std::fs::create_dir_all(setup.parent().unwrap()).unwrap();
    std::fs::write(&setup, write_file_content(&user_data, "/usr/local/sbin/shine-worker-setup")).unwrap();
    let out = Command::new("sh").arg(&setup).env("SHINE_ETC_DIR", on(&root, "/etc/shine")).env("SHINE_BIN_DIR", on(&root, "/usr/local/bin")).output().unwrap();
    assert!(out.status.success(), "cloud-init's setup script failed: {}", String::from_utf8_lossy(&out.stderr));
    let env_path = on(&root, "/etc/shine/worker.env");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&env_path).unwrap().permissions().mode() & 0o777, 0o600, "worker.env holds the token: root only");

    let unit = write_file_content(&user_data, "/etc/systemd/system/shine-worker.service");
    assert_eq!(unit, read("configs/systemd/shine-worker.service"), "the user-data installs the committed unit");
    let service = unit_service(&unit);
    let mut env = Vec::new();
    let mut files = Vec::new();
    let mut exec = None;
    for (k, v) in &service {
        match k.as_str() {
            "Environment" => {
                assert!(!v.contains(['"', '\'']), "Environment={v}: keep it unquoted, one assignment a line");
                env.push(v.split_once('=').map(|(a, b)| (a.to_string(), b.to_string())).unwrap());
            }
            "EnvironmentFile" => files.push(env_file(&std::fs::read_to_string(on(&root, v.trim_start_matches('-'))).unwrap())),
            "ExecStart" => exec = Some(v.clone()),
            _ => {}
        }
    }
    // systemd: the files' settings override Environment= lines.
    let mut layers: Vec<&[(String, String)]> = vec![&env];
    layers.extend(files.iter().map(Vec::as_slice));
    let env = merged(&layers);
    assert_eq!(env.get("SHINE_MANAGER").map(String::as_str), Some(manager_url), "the setup script wrote the manager's URL");
    let mut argv: Vec<String> = exec.expect("ExecStart=").split_whitespace().map(String::from).collect();
    argv[0] = on(&root, &argv[0]).display().to_string();
    Worker { what: "the VM's worker (cloud-init + systemd)", argv, env: rebased(&root, env), cwd: root.clone(), log: dir.join("vm.log"), proc: None }
}

/// The worker as a Kubernetes pod runs it: the image's ENV, the Deployment's envFrom
/// (the ConfigMap) and env (the Secret), its command.
fn pod_worker(dir: &Path, manager_url: &str, image: &Image) -> Worker {
    let root = dir.join("pod");
    image_machine(image, &root);
    let script = launch_script(&["--cloud", "k8s", "--workers", "3", "--manager-url", manager_url, "--token", TOKEN]);
    let docs = yaml_docs(heredoc(&script, "kubectl apply -f -"));
    let find = |kind: &str, name: &str| {
        docs.iter().find(|d| d["kind"] == kind && d["metadata"]["name"] == name).unwrap_or_else(|| panic!("no {kind} {name} in the manifests"))
    };
    let deployment = find("Deployment", "shine-worker");
    assert_eq!(deployment["spec"]["replicas"].as_u64(), Some(3));
    let c = &deployment["spec"]["template"]["spec"]["containers"][0];
    let strings = |v: &Yaml| -> Vec<(String, String)> {
        v.as_mapping()
            .map(|m| m.iter().map(|(k, v)| (k.as_str().unwrap().to_string(), v.as_str().expect("ConfigMap values are strings").to_string())).collect())
            .unwrap_or_default()
    };
    let mut from = Vec::new();
    for source in c["envFrom"].as_sequence().into_iter().flatten() {
        let name = source["configMapRef"]["name"].as_str().expect("envFrom: configMapRef only");
        from.extend(strings(&find("ConfigMap", name)["data"]));
    }
    let mut env = Vec::new();
    for e in c["env"].as_sequence().into_iter().flatten() {
        let name = e["name"].as_str().unwrap().to_string();
        let value = match (e["value"].as_str(), &e["valueFrom"]["secretKeyRef"]) {
            (Some(v), _) => v.to_string(),
            (None, r) if !r.is_null() => {
                find("Secret", r["name"].as_str().unwrap())["stringData"][r["key"].as_str().unwrap()].as_str().expect("the Secret's key").to_string()
            }
            _ => panic!("env {name}: only value and secretKeyRef are supported here"),
        };
        env.push((name, value));
    }
    let env = merged(&[&image.config.env, &from, &env]);
    assert_eq!(env.get("SHINE_TOKEN").map(String::as_str), Some(TOKEN), "the token comes from the Secret");
    // Each pod plays as many games as the CPUs it asks for.
    assert_eq!(env.get("SHINE_ENVS").map(String::as_str), c["resources"]["requests"]["cpu"].as_str(), "SHINE_ENVS matches the pod's CPU request");
    let mut argv: Vec<String> = c["command"].as_sequence().expect("the container's command").iter().map(|a| a.as_str().unwrap().to_string()).collect();
    argv[0] = in_image_path(&root, &argv[0]).display().to_string();
    let cwd = on(&root, &image.config.workdir);
    std::fs::create_dir_all(&cwd).unwrap();
    Worker { what: "the Kubernetes pod's worker", argv, env: rebased(&root, env), cwd, log: dir.join("pod.log"), proc: None }
}

/// The worker as `docker run -e SHINE_MANAGER=... -e SHINE_TOKEN=... shine-worker` runs it.
fn container_worker(dir: &Path, manager_url: &str, image: &Image) -> Worker {
    let root = dir.join("container");
    image_machine(image, &root);
    let run_env = [("SHINE_MANAGER".to_string(), manager_url.to_string()), ("SHINE_TOKEN".to_string(), TOKEN.to_string())];
    let env = merged(&[&image.config.env, &run_env]);
    let mut argv = image.config.entrypoint.clone();
    assert!(!argv.is_empty(), "the image has an ENTRYPOINT");
    argv[0] = in_image_path(&root, &argv[0]).display().to_string();
    let cwd = on(&root, &image.config.workdir);
    std::fs::create_dir_all(&cwd).unwrap();
    Worker { what: "the container's worker", argv, env: rebased(&root, env), cwd, log: dir.join("container.log"), proc: None }
}

// ---------------------------------------------------------------------------------
// The manager's view.

async fn workers(m: &Manager) -> Vec<Value> {
    m.get_json("/api/v1/workers").await["workers"].as_array().unwrap().clone()
}

fn by_id(list: &[Value], id: u64) -> Option<&Value> {
    list.iter().find(|w| w["worker_id"] == id)
}

/// Poll GET /api/v1/workers until `ok` holds (or panic after [`HANG`]); the last list.
async fn wait_workers(m: &Manager, what: &str, procs: &[&Worker], ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + HANG;
    loop {
        let list = workers(m).await;
        if ok(&list) {
            return list;
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = procs.iter().map(|p| format!("--- {} ---\n{}", p.what, tail(&p.log(), 15))).collect();
            panic!("timed out waiting for {what}; workers: {}\n{}", serde_json::to_string_pretty(&list).unwrap(), logs.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Start `w` and wait for it to register and be listed live: its worker id (the one
/// new in the list). (Live: heard from within 2.5 heartbeats, which a loaded machine
/// may miss for a moment, so that is waited for too rather than read once.)
async fn start_and_register(m: &Manager, w: &mut Worker) -> u64 {
    let before: Vec<u64> = workers(m).await.iter().map(|w| w["worker_id"].as_u64().unwrap()).collect();
    w.start();
    let what = format!("{} to register", w.what);
    let is_new = |x: &Value| !before.contains(&x["worker_id"].as_u64().unwrap());
    let list = wait_workers(m, &what, &[w], |l| l.iter().any(|x| is_new(x) && x["state"] == "live")).await;
    let new = list.iter().find(|x| is_new(x)).unwrap();
    assert_eq!(new["state"], "live", "{new}");
    assert_eq!(new["backend"], "sim");
    new["worker_id"].as_u64().unwrap()
}

// ---------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_launched_from_the_fleet_files_register_heartbeat_and_are_dropped_when_killed() {
    let image = tokio::task::spawn_blocking(worker_image).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir.path().join("data"));
    // Fast cadence so that liveness shows within seconds: heartbeats every 0.5 s (told
    // to the workers at registration), gone after 30 s of silence: the killed worker's
    // wait, and so long that no live worker at the lowest priority on a loaded 2-core
    // machine (held up for seconds at a time) reaches it.
    cfg.workers.heartbeat_secs = 0.5;
    cfg.workers.worker_timeout_secs = 30.0;
    cfg.workers.model_poll_secs = 1.0;
    cfg.workers.upload_every_secs = 1.0;
    // A learner that barely trains: this test is about the fleet, and on a small
    // machine the workers' games need the CPU (a busy trainer here stalled the API).
    cfg.trainer.samples_per_insert = 1e-4;
    let m = Manager::start(cfg).await;

    // These run launch-script and cloud-init's setup script: blocking work, off the
    // runtime that serves the manager.
    let (path, url) = (dir.path().to_path_buf(), m.url.clone());
    let (mut vm, mut pod, mut ctr) =
        tokio::task::spawn_blocking(move || (vm_worker(&path, &url, image), pod_worker(&path, &url, image), container_worker(&path, &url, image)))
            .await
            .unwrap();
    // One at a time, so each new id in the list is that worker's.
    let vm_id = start_and_register(&m, &mut vm).await;
    let pod_id = start_and_register(&m, &mut pod).await;
    let ctr_id = start_and_register(&m, &mut ctr).await;
    let ids = [vm_id, pod_id, ctr_id];

    // Heartbeating: every worker's reported frame count keeps growing, and all are live.
    let first = wait_workers(&m, "a heartbeat with frames from each worker", &[&vm, &pod, &ctr], |l| {
        ids.iter().all(|&id| by_id(l, id).is_some_and(|w| w["frames"].as_u64().unwrap_or(0) > 0))
    })
    .await;
    let frames = |l: &[Value], id| by_id(l, id).unwrap()["frames"].as_u64().unwrap();
    let list = wait_workers(&m, "newer heartbeats from each worker", &[&vm, &pod, &ctr], |l| {
        ids.iter().all(|&id| by_id(l, id).is_some_and(|w| w["state"] == "live" && w["frames"].as_u64().unwrap_or(0) > frames(&first, id)))
    })
    .await;
    assert_eq!(list.len(), 3, "{list:?}");
    assert_eq!(by_id(&list, pod_id).unwrap()["envs"], 2, "the pod plays SHINE_ENVS from the ConfigMap");
    let mut slots: Vec<u64> = list.iter().map(|w| w["slot"].as_u64().unwrap()).collect();
    slots.sort();
    assert_eq!(slots, [0, 1, 2], "one epsilon-ladder slot each");
    assert_eq!(metric(&m.metrics().await, "shine_workers{run=\"default\"}"), Some(3.0), "/metrics shows the fleet size");

    // A machine vanishes (SIGKILL: no goodbye): after the timeout the manager lists its
    // worker as gone, keeps the others, and counts 2.
    let ctr_slot = by_id(&list, ctr_id).unwrap()["slot"].as_u64().unwrap();
    ctr.signal("KILL");
    ctr.wait(HANG).await;
    let list = wait_workers(&m, "the killed worker to be marked gone", &[&vm, &pod, &ctr], |l| by_id(l, ctr_id).is_some_and(|w| w["state"] == "gone")).await;
    for id in [vm_id, pod_id] {
        assert_ne!(by_id(&list, id).unwrap()["state"], "gone", "only the killed worker is gone: {list:?}");
    }
    let deadline = Instant::now() + HANG;
    while metric(&m.metrics().await, "shine_workers{run=\"default\"}") != Some(2.0) {
        assert!(Instant::now() < deadline, "shine_workers did not drop to 2:\n{}", m.metrics().await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(m.current().await["workers"], 2, "the stats count 2 live workers");

    // Restarted (Restart=always, a pod's restart, docker --restart): a new id, and the
    // freed ladder slot.
    let again = start_and_register(&m, &mut ctr).await;
    assert_ne!(again, ctr_id, "a gone worker comes back under a new id");
    let list = workers(&m).await;
    assert_eq!(by_id(&list, again).unwrap()["slot"].as_u64(), Some(ctr_slot), "the gone worker's slot is reused: {list:?}");

    // Stopping (systemctl stop, pod deletion, docker stop: SIGTERM) ends each cleanly,
    // by itself. (That its own limits on a stop fit in the unit's TimeoutStopSec, after
    // which systemd would kill it, is checked against the numbers, not this machine's
    // speed: worker/src/run/mod.rs, a_stop_fits_in_the_units_stop_timeout.)
    for w in [&mut vm, &mut pod, &mut ctr] {
        w.signal("TERM");
        let status = w.wait(HANG).await;
        assert!(status.success(), "{} exited with {status} after SIGTERM:\n{}", w.what, tail(&w.log(), 30));
    }
    m.stop().await.unwrap();
}

#[test]
fn the_systemd_unit_passes_systemd_analyze_verify() {
    if std::env::var_os("SHINE_SKIP_SYSTEMD_VERIFY").is_some_and(|v| v == "1") {
        eprintln!("SHINE_SKIP_SYSTEMD_VERIFY=1: not checking the unit");
        return;
    }
    let tool = Command::new("systemd-analyze").arg("--version").output();
    assert!(
        tool.is_ok_and(|o| o.status.success()),
        "systemd-analyze not found: install Debian's `systemd` package (it checks configs/systemd/shine-worker.service), or set SHINE_SKIP_SYSTEMD_VERIFY=1"
    );
    // verify insists that ExecStart's binary exists: point it at a freshly built one
    // (the image's), in a copy of the unit; nothing else changes.
    let image = worker_image();
    let unit = read("configs/systemd/shine-worker.service");
    let exec = "ExecStart=/usr/local/bin/shine-worker run";
    assert_eq!(unit.matches(exec).count(), 1, "the unit runs {exec}");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("shine-worker.service");
    std::fs::write(&copy, unit.replace(exec, &format!("ExecStart={} run", image.binary().display()))).unwrap();
    let out = Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&copy).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // verify exits 0 on settings it ignores (a typo, a bad value) but names the file or
    // the unit in a warning: any such line fails the test.
    let complaints: Vec<&str> = text.lines().filter(|l| l.contains("shine-worker.service")).collect();
    assert!(out.status.success() && complaints.is_empty(), "systemd-analyze verify ({}):\n{text}", out.status);
}

#[test]
fn the_cloud_init_files_pass_cloud_inits_schema_check() {
    if std::env::var_os("SHINE_SKIP_CLOUD_INIT_SCHEMA").is_some_and(|v| v == "1") {
        eprintln!("SHINE_SKIP_CLOUD_INIT_SCHEMA=1: not checking the cloud-init files");
        return;
    }
    let tool = Command::new("cloud-init").arg("--version").output();
    assert!(tool.is_ok_and(|o| o.status.success()), "cloud-init not found: install Debian's `cloud-init` package (its schema check validates configs/cloud-init/worker.yaml), or set SHINE_SKIP_CLOUD_INIT_SCHEMA=1");
    let dir = tempfile::tempdir().unwrap();
    // The committed file (GCP uses it as it is) and the AWS user-data with values filled in.
    let script = launch_script(&[
        "--cloud",
        "aws",
        "--workers",
        "2",
        "--manager-url",
        "https://manager.example.com:8443",
        "--token",
        "t0k-en",
        "--worker-url",
        "https://example.com/shine-worker",
    ]);
    let filled = dir.path().join("user-data.yaml");
    std::fs::write(&filled, heredoc(&script, "cat > shine-worker-user-data.yaml")).unwrap();
    for file in [workspace().join("configs/cloud-init/worker.yaml"), filled] {
        let out = Command::new("cloud-init").args(["schema", "--config-file"]).arg(&file).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && text.contains("Valid cloud-config"), "cloud-init schema {}:\n{text}", file.display());
    }
}

#[test]
fn the_launch_script_command_leaves_the_service_flags_alone() {
    // `shine-manager --config X --listen Y` still means the service.
    let out = Command::new(MANAGER_BIN)
        .arg("--config")
        .arg(workspace().join("configs/manager.toml"))
        .args(["--listen", "127.0.0.1:9999", "--token", "t", "--print-config"])
        .env_remove("SHINE_TOKEN")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("listen = \"127.0.0.1:9999\""));
    // And launch-script's mistakes are explained.
    let out = Command::new(MANAGER_BIN)
        .args(["launch-script", "--cloud", "gcp", "--workers", "2", "--token", "t", "--manager-url", "http://m:8080"])
        .env_remove("SHINE_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--worker-url") && err.contains("build-worker.sh"), "{err}");
    let out = Command::new(MANAGER_BIN).args(["launch-script", "--cloud", "k8s", "--workers", "0", "--token", "t"]).env_remove("SHINE_TOKEN").output().unwrap();
    assert!(!out.status.success(), "0 workers is refused");
}

#[test]
fn the_build_script_is_what_the_containerfile_runs() {
    // The image and the docs build the worker with one script: the Containerfile's only
    // RUN in its build stage runs it.
    let stages = parse_containerfile(&read(CONTAINERFILE));
    let build = stages.iter().find(|s| s.name.as_deref() == Some("build")).unwrap();
    let runs: Vec<&str> = build.steps.iter().filter(|(i, _)| i == "RUN").map(|(_, a)| a.as_str()).collect();
    assert_eq!(runs, ["scripts/build-worker.sh \"$PREFIX\""]);
    let dolphin = stages.iter().find(|s| s.name.as_deref() == Some("worker-dolphin")).expect("a worker-dolphin target");
    assert!(dolphin.steps.iter().any(|(i, a)| i == "RUN" && a.contains("dolphin-emu")), "the dolphin target installs Debian's dolphin-emu");
    assert_eq!(image_config(&stages, dolphin).env.iter().rev().find(|(k, _)| k == "SHINE_BACKEND").map(|(_, v)| v.as_str()), Some("dolphin"));
    let worker = image_config(&stages, stages.last().unwrap());
    assert_eq!(worker.entrypoint, ["shine-worker", "run"]);
    assert!(worker.env.contains(&("SHINE_BACKEND".into(), "sim".into())));
}
