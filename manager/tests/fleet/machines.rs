//! The worker as each launch path runs it (`tests/fleet.rs`), from the files
//! `shine-manager launch-script` prints and the replayed image: a VM (cloud-init's setup
//! script, then the systemd unit), a Kubernetes pod (the Deployment with its ConfigMap
//! and Secret), a container (`docker run -e ...`). Each is a [`Worker`]: a process in a
//! folder standing in for its machine, absolute paths in its settings (the spool) moved
//! under that folder, the only change made to them.

use super::common::TOKEN;
use super::image::{copy_file, Image};
use super::{on, read, tail, MANAGER_BIN};
use serde::Deserialize;
use serde_yaml_ng::Value as Yaml;
use shine_testkit::Proc;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------
// launch-script's output and the files in it.

pub fn launch_script(args: &[&str]) -> String {
    let out = Command::new(MANAGER_BIN).arg("launch-script").args(args).env_remove("SHINE_TOKEN").output().unwrap();
    assert!(out.status.success(), "shine-manager launch-script {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The text of the heredoc that starts with the line `command <<'SHINE_EOF'`.
pub fn heredoc<'a>(script: &'a str, command: &str) -> &'a str {
    let start = format!("{command} <<'SHINE_EOF'\n");
    let i = script.find(&start).unwrap_or_else(|| panic!("no `{command}` heredoc in:\n{script}")) + start.len();
    &script[i..i + script[i..].find("\nSHINE_EOF\n").expect("the heredoc's end") + 1]
}

pub fn yaml_docs(text: &str) -> Vec<Yaml> {
    serde_yaml_ng::Deserializer::from_str(text).map(|d| Yaml::deserialize(d).unwrap_or_else(|e| panic!("not YAML: {e}"))).filter(|v| !v.is_null()).collect()
}

pub fn write_file_content(cloud_init: &Yaml, path: &str) -> String {
    let files = cloud_init["write_files"].as_sequence().expect("write_files");
    let f = files.iter().find(|f| f["path"] == path).unwrap_or_else(|| panic!("cloud-init writes no {path}"));
    f["content"].as_str().unwrap().to_string()
}

/// A systemd unit's [Service] settings, in order (repeated keys kept).
pub fn unit_service(unit: &str) -> Vec<(String, String)> {
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
pub fn env_file(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).unwrap_or_else(|| panic!("env file line {l:?}")))
        .collect()
}

/// Later entries win, as in every one of these formats.
pub fn merged(layers: &[&[(String, String)]]) -> BTreeMap<String, String> {
    layers.iter().flat_map(|l| l.iter().cloned()).collect()
}

// ---------------------------------------------------------------------------------
// Workers as processes.

pub struct Worker {
    pub what: &'static str,
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
    pub fn start(&mut self) {
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

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, sig: &str) {
        self.proc.as_ref().expect("started").signal(sig);
    }

    /// Wait for the process to exit within `within`; its status. (Not `Proc::wait`,
    /// which blocks: the manager under test runs on this thread's runtime.)
    pub async fn wait(&mut self, within: Duration) -> std::process::ExitStatus {
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
pub fn in_image_path(root: &Path, name: &str) -> PathBuf {
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
pub fn rebased(root: &Path, env: BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.into_iter().map(|(k, v)| if v.starts_with('/') { (k, on(root, &v).display().to_string()) } else { (k, v) }).collect()
}

/// A machine's folder with the image's files in it (a pod or a container of the image).
pub fn image_machine(image: &Image, root: &Path) {
    copy_file(&image.binary(), &on(root, "/usr/local/bin/shine-worker"));
}

/// The worker as a VM runs it: cloud-init's setup script (from the AWS user-data
/// launch-script prints), then the systemd unit's ExecStart and environment.
pub fn vm_worker(dir: &Path, manager_url: &str, image: &Image) -> Worker {
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
pub fn pod_worker(dir: &Path, manager_url: &str, image: &Image) -> Worker {
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
pub fn container_worker(dir: &Path, manager_url: &str, image: &Image) -> Worker {
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
