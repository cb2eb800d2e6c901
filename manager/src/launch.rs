//! `shine-manager launch-script`: the commands that start a worker fleet for this
//! manager, on Google Compute Engine, AWS EC2 or Kubernetes, as one bash script on
//! stdout (`shine-manager launch-script ... > launch.sh && bash launch.sh`).
//!
//! What is printed comes from files in `configs/`, compiled in with `include_str!`, so
//! it is exactly what is committed (and tested: `manager/tests/fleet.rs` starts
//! workers from it). The script itself is `configs/launch/gcp.sh`, `aws.sh` or `k8s.sh`,
//! each valid bash as committed; the file it writes or applies (the cloud-init user-data,
//! which holds the systemd unit, or the Kubernetes manifests) goes into its quoted
//! heredoc, byte for byte, at the line `{{cloud_init}}`, `{{user_data}}` or
//! `{{manifests}}`.
//!
//! Only these values are filled in: the manager's URL and token, the worker binary's URL
//! (VMs), the number of workers, the images (Kubernetes). One function,
//! `replace_exactly`, fills each at the spots its file marks for it, and fails if the
//! file does not mark it exactly as many times as this module expects: `{{workers}}` and
//! `{{manager}}` in the launch scripts; a `KEY=''` line in the GCP script and in
//! cloud-init's setup script (AWS), filled with the value shell-quoted; the committed
//! default values in the Kubernetes manifests (token, manager URL, replicas, images) and,
//! with `--manager-url`, the in-cluster manager's two lines of `k8s.sh` (dropped) and the
//! comment line naming what is applied (reworded). Values are checked first, so that no
//! value can break out of its quoting in YAML, a shell script or systemd's environment
//! file.

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

/// `configs/cloud-init/worker.yaml`: a worker VM's user-data.
pub const CLOUD_INIT: &str = include_str!("../../configs/cloud-init/worker.yaml");
/// `configs/systemd/shine-worker.service` (also inside [`CLOUD_INIT`], verbatim).
pub const SYSTEMD_UNIT: &str = include_str!("../../configs/systemd/shine-worker.service");
/// `configs/k8s/*.yaml`, in the order they are applied.
pub const K8S_NAMESPACE: &str = include_str!("../../configs/k8s/namespace.yaml");
pub const K8S_SECRET: &str = include_str!("../../configs/k8s/secret.yaml");
pub const K8S_WORKER_CONFIG: &str = include_str!("../../configs/k8s/worker-config.yaml");
pub const K8S_MANAGER: &str = include_str!("../../configs/k8s/manager.yaml");
pub const K8S_WORKERS: &str = include_str!("../../configs/k8s/workers.yaml");
/// `configs/launch/*.sh`: the scripts printed, before their values are filled in.
pub const LAUNCH_GCP: &str = include_str!("../../configs/launch/gcp.sh");
pub const LAUNCH_AWS: &str = include_str!("../../configs/launch/aws.sh");
pub const LAUNCH_K8S: &str = include_str!("../../configs/launch/k8s.sh");

/// Where the workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Cloud {
    /// Google Compute Engine VMs (Ubuntu, cloud-init; settings from instance metadata).
    Gcp,
    /// AWS EC2 instances (Ubuntu, cloud-init; settings in the user-data).
    Aws,
    /// A Kubernetes cluster (a worker Deployment; the manager too unless --manager-url).
    K8s,
}

/// `shine-manager launch-script`.
#[derive(Debug, Clone, Args)]
pub struct LaunchArgs {
    /// How many workers to start.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub workers: u32,
    /// Where: gcp, aws or k8s.
    #[arg(long, value_enum)]
    pub cloud: Cloud,
    /// The manager's URL as the workers reach it, e.g. http://203.0.113.7:8080. Required
    /// for gcp and aws; for k8s the default is the manager in the cluster
    /// (http://shine-manager:8080), whose manifests the script then applies too.
    #[arg(long, value_name = "URL")]
    pub manager_url: Option<String>,
    /// The manager's token (its --token), which the workers send.
    #[arg(long, env = "SHINE_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub token: String,
    /// gcp, aws: where the VMs download the shine-worker binary (https://, gs://,
    /// s3://). Build it with scripts/build-worker.sh and upload it there.
    #[arg(long, value_name = "URL")]
    pub worker_url: Option<String>,
    /// k8s: the worker image (built from configs/container/Containerfile.worker).
    #[arg(long, value_name = "IMAGE", default_value = "shine-worker:latest")]
    pub image: String,
    /// k8s: the manager image (built from configs/container/Containerfile.manager).
    #[arg(long, value_name = "IMAGE", default_value = "shine-manager:latest")]
    pub manager_image: String,
}

/// The manager URL the Kubernetes manifests use when none is given.
pub const IN_CLUSTER_MANAGER: &str = "http://shine-manager:8080";

/// Ends every heredoc in the launch scripts; no embedded file may hold it as a line.
const EOF_MARK: &str = "SHINE_EOF";

/// The script for `args`.
pub fn render(args: &LaunchArgs) -> anyhow::Result<String> {
    check_token(&args.token)?;
    if let Some(url) = &args.manager_url {
        check_url("--manager-url", url, &["http://", "https://"])?;
    }
    match args.cloud {
        Cloud::Gcp | Cloud::Aws => {
            let cloud = if args.cloud == Cloud::Gcp { "gcp" } else { "aws" };
            let manager = args
                .manager_url
                .as_deref()
                .with_context(|| format!("--cloud {cloud} needs --manager-url URL: the manager's address as the VMs reach it, e.g. http://203.0.113.7:8080"))?;
            let worker_url = args.worker_url.as_deref().with_context(|| {
                format!(
                    "--cloud {cloud} needs --worker-url URL: where the VMs download shine-worker. Build it with \
                     `scripts/build-worker.sh /tmp/shine` and upload /tmp/shine/bin/shine-worker, e.g. {}",
                    if cloud == "gcp" {
                        "`gcloud storage cp /tmp/shine/bin/shine-worker gs://BUCKET/` (then --worker-url gs://BUCKET/shine-worker)"
                    } else {
                        "to S3, then `aws s3 presign s3://BUCKET/shine-worker --expires-in 604800` gives an https:// URL"
                    }
                )
            })?;
            check_url("--worker-url", worker_url, &["https://", "http://", "gs://", "s3://", "file://"])?;
            if args.cloud == Cloud::Gcp {
                gcp(args.workers, manager, &args.token, worker_url)
            } else {
                aws(args.workers, manager, &args.token, worker_url)
            }
        }
        Cloud::K8s => {
            check_image("--image", &args.image)?;
            check_image("--manager-image", &args.manager_image)?;
            k8s(args)
        }
    }
}

/// Tokens go into YAML strings, shell single quotes, gcloud's `k=v,k=v` metadata and
/// systemd's environment file unquoted: keep them to characters safe in all four.
fn check_token(token: &str) -> anyhow::Result<()> {
    if token.is_empty() {
        bail!("--token is empty");
    }
    if let Some(c) = token.chars().find(|c| !(c.is_ascii_alphanumeric() || "._~+/=-".contains(*c))) {
        bail!("--token holds {c:?}: use letters, digits and . _ ~ + / = - only (e.g. `openssl rand -hex 32`)");
    }
    Ok(())
}

fn check_url(flag: &str, url: &str, schemes: &[&str]) -> anyhow::Result<()> {
    if !schemes.iter().any(|s| url.starts_with(s) && url.len() > s.len()) {
        bail!("{flag} {url:?} must start with one of {}", schemes.join(", "));
    }
    // Quotes, backslashes and spaces would need quoting somewhere; commas separate
    // gcloud's metadata entries.
    if let Some(c) = url.chars().find(|c| c.is_whitespace() || c.is_control() || "'\"\\,`$".contains(*c)) {
        bail!("{flag} {url:?} holds {c:?}, which the launch files cannot carry");
    }
    Ok(())
}

fn check_image(flag: &str, image: &str) -> anyhow::Result<()> {
    if image.is_empty() || image.chars().any(|c| !(c.is_ascii_alphanumeric() || "._-/:@".contains(c))) {
        bail!("{flag} {image:?} is not an image reference (registry/name:tag)");
    }
    Ok(())
}

/// `text` with the `times` occurrences of `from` replaced: the spots of each value are
/// counted here, so a committed file that lost (or gained) one is an error, not a silent
/// no-op or a mark left in the output.
fn replace_exactly(file: &str, text: &str, from: &str, to: &str, times: usize) -> anyhow::Result<String> {
    match text.matches(from).count() {
        n if n == times => Ok(text.replace(from, to)),
        n => bail!("{file}: expected {from:?} exactly {times} time(s), found it {n}"),
    }
}

/// `'value'` for bash (values are checked to hold no single quote; this escapes anyway).
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `text` for a launch script's quoted heredoc (`<<'SHINE_EOF'`, which expands nothing,
/// so the file arrives byte for byte): it must not hold the end marker as a line, and
/// ends with a newline (the mark's line ends with one too).
fn heredoc_body(text: &str) -> &str {
    assert!(!text.lines().any(|l| l == EOF_MARK), "an embedded file holds the heredoc end marker {EOF_MARK}");
    assert!(text.ends_with('\n'), "embedded files end with a newline");
    text
}

/// The cloud-init file with the settings written into its setup script (for clouds
/// without GCP's metadata keys).
pub fn cloud_init_filled(manager: &str, token: &str, worker_url: &str) -> anyhow::Result<String> {
    let mut text = CLOUD_INIT.to_string();
    for (key, value) in [("SHINE_MANAGER", manager), ("SHINE_TOKEN", token), ("SHINE_WORKER_URL", worker_url)] {
        text = replace_exactly("configs/cloud-init/worker.yaml", &text, &format!("\n      {key}=''\n"), &format!("\n      {key}={}\n", sh_quote(value)), 1)?;
    }
    Ok(text)
}

/// `configs/launch/gcp.sh`: the cloud-init file as committed (each VM reads its settings
/// from its metadata, which the script sets from the `KEY=''` lines).
fn gcp(workers: u32, manager: &str, token: &str, worker_url: &str) -> anyhow::Result<String> {
    const FILE: &str = "configs/launch/gcp.sh";
    let text = replace_exactly(FILE, LAUNCH_GCP, "{{workers}}", &workers.to_string(), 4)?;
    let mut text = replace_exactly(FILE, &text, "{{manager}}", manager, 3)?;
    for (key, value) in [("MANAGER", manager), ("TOKEN", token), ("WORKER_URL", worker_url)] {
        text = replace_exactly(FILE, &text, &format!("\n{key}=''\n"), &format!("\n{key}={}\n", sh_quote(value)), 1)?;
    }
    // The embedded file last: it is never searched for marks.
    replace_exactly(FILE, &text, "{{cloud_init}}\n", heredoc_body(CLOUD_INIT), 1)
}

/// `configs/launch/aws.sh`: the cloud-init file with the settings filled in.
fn aws(workers: u32, manager: &str, token: &str, worker_url: &str) -> anyhow::Result<String> {
    const FILE: &str = "configs/launch/aws.sh";
    let user_data = cloud_init_filled(manager, token, worker_url)?;
    let text = replace_exactly(FILE, LAUNCH_AWS, "{{workers}}", &workers.to_string(), 4)?;
    let text = replace_exactly(FILE, &text, "{{manager}}", manager, 3)?;
    replace_exactly(FILE, &text, "{{user_data}}\n", heredoc_body(&user_data), 1)
}

/// `configs/launch/k8s.sh`: the manifests with the values filled in. The script as
/// committed applies the in-cluster manager too; with `--manager-url` its lines go.
fn k8s(args: &LaunchArgs) -> anyhow::Result<String> {
    const FILE: &str = "configs/launch/k8s.sh";
    let manager = args.manager_url.as_deref().unwrap_or(IN_CLUSTER_MANAGER);
    let in_cluster = args.manager_url.is_none();
    let secret = replace_exactly("configs/k8s/secret.yaml", K8S_SECRET, "token: \"REPLACE-WITH-YOUR-TOKEN\"", &format!("token: \"{}\"", args.token), 1)?;
    let config = replace_exactly(
        "configs/k8s/worker-config.yaml",
        K8S_WORKER_CONFIG,
        &format!("SHINE_MANAGER: \"{IN_CLUSTER_MANAGER}\""),
        &format!("SHINE_MANAGER: \"{manager}\""),
        1,
    )?;
    let workers = replace_exactly("configs/k8s/workers.yaml", K8S_WORKERS, "\n  replicas: 3\n", &format!("\n  replicas: {}\n", args.workers), 1)?;
    let workers = replace_exactly("configs/k8s/workers.yaml", &workers, "image: \"shine-worker:latest\"", &format!("image: \"{}\"", args.image), 1)?;
    let manager_yaml =
        replace_exactly("configs/k8s/manager.yaml", K8S_MANAGER, "image: \"shine-manager:latest\"", &format!("image: \"{}\"", args.manager_image), 1)?;
    let mut docs = vec![K8S_NAMESPACE, &secret, &config];
    if in_cluster {
        docs.push(&manager_yaml);
    }
    docs.push(&workers);

    let text = replace_exactly(FILE, LAUNCH_K8S, "{{workers}}", &args.workers.to_string(), 3)?;
    let mut text = replace_exactly(FILE, &text, "{{manager}}", manager, 1)?;
    if !in_cluster {
        for (line, instead) in [
            ("# the manager (GPU pod, volume, Service) and the worker Deployment.\n", "# and the worker Deployment (the manager runs outside the cluster).\n"),
            ("kubectl -n shine rollout status deployment/shine-manager --timeout=15m\n", ""),
            ("echo \"Dashboard: kubectl -n shine port-forward service/shine-manager 8080:8080, then http://localhost:8080/\" >&2\n", ""),
        ] {
            text = replace_exactly(FILE, &text, &format!("\n{line}"), &format!("\n{instead}"), 1)?;
        }
    }
    replace_exactly(FILE, &text, "{{manifests}}\n", heredoc_body(&docs.join("---\n")), 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_yaml_ng::Value;
    use std::path::Path;
    use std::process::Command;

    const URL: &str = "http://203.0.113.7:8080";
    const TOKEN: &str = "0123abcd-tok.en";

    fn args(cloud: Cloud, workers: u32) -> LaunchArgs {
        LaunchArgs {
            workers,
            cloud,
            manager_url: Some(URL.into()),
            token: TOKEN.into(),
            worker_url: Some("https://example.com/bin/shine-worker".into()),
            image: "registry.example.com/shine/worker:7".into(),
            manager_image: "registry.example.com/shine/manager:7".into(),
        }
    }

    /// The text of the heredoc that starts with the line `command <<'SHINE_EOF'`.
    fn heredoc_of<'a>(script: &'a str, command: &str) -> &'a str {
        let start = format!("{command} <<'{EOF_MARK}'\n");
        let i = script.find(&start).unwrap_or_else(|| panic!("no heredoc for {command:?} in:\n{script}")) + start.len();
        let end = script[i..].find(&format!("\n{EOF_MARK}\n")).expect("heredoc end") + 1;
        &script[i..i + end]
    }

    fn yaml_docs(text: &str) -> Vec<Value> {
        use serde::Deserialize;
        serde_yaml_ng::Deserializer::from_str(text)
            .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("not YAML: {e}\n{text}")))
            .filter(|v| !v.is_null())
            .collect()
    }

    fn bash_syntax_ok(script: &str) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("launch.sh");
        std::fs::write(&path, script).unwrap();
        let out = Command::new("bash").arg("-n").arg(&path).output().expect("bash");
        assert!(out.status.success(), "bash -n: {}\n{script}", String::from_utf8_lossy(&out.stderr));
    }

    /// Run the script with `cli` (gcloud, aws or kubectl) replaced by a stand-in that
    /// records its arguments and stdin (there is no cloud here): proves the quoting and
    /// the files the real command would get. Returns (arguments, stdin, the folder).
    fn run_with_stand_in(script: &str, cli: &str) -> (Vec<String>, String, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let stand_in = bin.join(cli);
        std::fs::write(&stand_in, format!("#!/bin/sh\nprintf '%s\\n' \"$@\" >> \"$RECORD/{cli}.args\"\ncat >> \"$RECORD/{cli}.stdin\"\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("launch.sh"), script).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let out = Command::new("bash")
            .arg("launch.sh")
            .current_dir(dir.path())
            .env("PATH", path)
            .env("RECORD", dir.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "the script failed: {}\n{script}", String::from_utf8_lossy(&out.stderr));
        let read = |ext: &str| std::fs::read_to_string(dir.path().join(format!("{cli}.{ext}"))).unwrap_or_default();
        let argv = read("args").lines().map(String::from).collect();
        let stdin = read("stdin");
        (argv, stdin, dir)
    }

    fn setup_script(cloud_init: &Value) -> String {
        let files = cloud_init["write_files"].as_sequence().expect("write_files");
        let f = files.iter().find(|f| f["path"] == "/usr/local/sbin/shine-worker-setup").expect("the setup script");
        f["content"].as_str().unwrap().to_string()
    }

    #[test]
    fn the_cloud_init_file_is_cloud_config_and_embeds_the_unit_verbatim() {
        assert!(CLOUD_INIT.starts_with("#cloud-config\n"), "cloud-init needs the #cloud-config first line");
        let docs = yaml_docs(CLOUD_INIT);
        assert_eq!(docs.len(), 1);
        let c = &docs[0];
        let files = c["write_files"].as_sequence().expect("write_files");
        let unit = files.iter().find(|f| f["path"] == "/etc/systemd/system/shine-worker.service").expect("the unit is installed");
        assert_eq!(unit["content"].as_str(), Some(SYSTEMD_UNIT), "cloud-init's copy of the unit differs from configs/systemd/shine-worker.service");
        let setup = setup_script(c);
        assert!(setup.starts_with("#!/bin/sh\n"));
        assert!(setup.contains("metadata.google.internal/computeMetadata/v1/instance/attributes/$1") && setup.contains("Metadata-Flavor: Google"));
        for key in ["shine-manager", "shine-token", "shine-worker-url"] {
            assert!(setup.contains(&format!("gcp_metadata {key})")), "the setup script reads {key} from GCP metadata");
        }
        let runcmd = format!("{:?}", c["runcmd"]);
        assert!(runcmd.contains("shine-worker-setup") && runcmd.contains("enable --now shine-worker.service"), "{runcmd}");
        // The unit: restarts, reads worker.env, runs `shine-worker run` at boot.
        for line in [
            "EnvironmentFile=/etc/shine/worker.env",
            "ExecStart=/usr/local/bin/shine-worker run",
            "Restart=always",
            "RestartSec=5",
            "WantedBy=multi-user.target",
        ] {
            assert!(SYSTEMD_UNIT.lines().any(|l| l == line), "the unit lacks {line}");
        }
    }

    #[test]
    fn k8s_manifests_have_the_expected_objects() {
        let all = [K8S_NAMESPACE, K8S_SECRET, K8S_WORKER_CONFIG, K8S_MANAGER, K8S_WORKERS].join("---\n");
        let docs = yaml_docs(&all);
        let kinds: Vec<(&str, &str)> = docs.iter().map(|d| (d["kind"].as_str().unwrap(), d["metadata"]["name"].as_str().unwrap())).collect();
        assert_eq!(
            kinds,
            [
                ("Namespace", "shine"),
                ("Secret", "shine-token"),
                ("ConfigMap", "shine-worker"),
                ("PersistentVolumeClaim", "shine-manager-data"),
                ("Deployment", "shine-manager"),
                ("Service", "shine-manager"),
                ("Deployment", "shine-worker")
            ]
        );
        for d in &docs[1..] {
            assert_eq!(d["metadata"]["namespace"], "shine", "{:?} outside the namespace", d["metadata"]["name"]);
        }
        let by = |kind: &str, name: &str| docs.iter().find(|d| d["kind"] == kind && d["metadata"]["name"] == name).unwrap();
        let manager = &by("Deployment", "shine-manager")["spec"]["template"]["spec"];
        assert_eq!(manager["containers"][0]["resources"]["limits"]["nvidia.com/gpu"].as_u64(), Some(1), "the manager asks for one GPU");
        assert_eq!(manager["volumes"][0]["persistentVolumeClaim"]["claimName"], "shine-manager-data");
        let svc = by("Service", "shine-manager");
        assert_eq!(svc["spec"]["ports"][0]["port"].as_u64(), Some(8080));
        let pod_label = &by("Deployment", "shine-manager")["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"];
        assert_eq!(svc["spec"]["selector"]["app.kubernetes.io/name"], *pod_label, "the Service selects the manager's pod");
        let workers = by("Deployment", "shine-worker");
        assert_eq!(workers["spec"]["replicas"].as_u64(), Some(3));
        let c = &workers["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["envFrom"][0]["configMapRef"]["name"], "shine-worker");
        let token = c["env"].as_sequence().unwrap().iter().find(|e| e["name"] == "SHINE_TOKEN").expect("SHINE_TOKEN");
        assert_eq!(token["valueFrom"]["secretKeyRef"]["name"], "shine-token");
        assert_eq!(by("ConfigMap", "shine-worker")["data"]["SHINE_MANAGER"], IN_CLUSTER_MANAGER, "workers find the in-cluster manager by its Service");
    }

    #[test]
    fn gcp_script_passes_the_committed_cloud_init_and_the_values_as_metadata() {
        let script = render(&args(Cloud::Gcp, 5)).unwrap();
        bash_syntax_ok(&script);
        assert_eq!(heredoc_of(&script, "cat > shine-worker-cloud-init.yaml"), CLOUD_INIT, "the committed file, unchanged");
        let (argv, _, dir) = run_with_stand_in(&script, "gcloud");
        let names: Vec<&str> = argv.iter().map(String::as_str).filter(|a| a.starts_with("shine-worker-")).collect();
        assert_eq!(names, ["shine-worker-1", "shine-worker-2", "shine-worker-3", "shine-worker-4", "shine-worker-5"], "{argv:?}");
        assert_eq!(&argv[..3], ["compute", "instances", "create"]);
        assert!(
            argv.contains(&format!("--metadata=shine-manager={URL},shine-token={TOKEN},shine-worker-url=https://example.com/bin/shine-worker")),
            "{argv:?}"
        );
        assert!(argv.contains(&"--metadata-from-file=user-data=shine-worker-cloud-init.yaml".to_string()), "{argv:?}");
        assert_eq!(std::fs::read_to_string(dir.path().join("shine-worker-cloud-init.yaml")).unwrap(), CLOUD_INIT);
    }

    #[test]
    fn aws_script_fills_the_user_data_and_asks_for_n_instances() {
        let script = render(&args(Cloud::Aws, 7)).unwrap();
        bash_syntax_ok(&script);
        let (argv, _, dir) = run_with_stand_in(&script, "aws");
        assert_eq!(&argv[..2], ["ec2", "run-instances"]);
        let at = argv.iter().position(|a| a == "--count").expect("--count");
        assert_eq!(argv[at + 1], "7");
        let at = argv.iter().position(|a| a == "--user-data").expect("--user-data");
        assert_eq!(argv[at + 1], "file://shine-worker-user-data.yaml");
        let user_data = std::fs::read_to_string(dir.path().join("shine-worker-user-data.yaml")).unwrap();
        assert!(user_data.starts_with("#cloud-config\n"));
        // EC2 refuses user-data over 16 KiB.
        assert!(user_data.len() < 16 * 1024, "user-data is {} bytes; EC2 takes at most 16 KiB", user_data.len());
        let c = &yaml_docs(&user_data)[0];
        let setup = setup_script(c);
        assert!(setup.contains(&format!("\nSHINE_MANAGER='{URL}'\n")), "{setup}");
        assert!(setup.contains(&format!("\nSHINE_TOKEN='{TOKEN}'\n")));
        assert!(setup.contains("\nSHINE_WORKER_URL='https://example.com/bin/shine-worker'\n"));
        // Nothing else changed: the committed file with three lines filled in.
        let differing: Vec<(&str, &str)> = CLOUD_INIT.lines().zip(user_data.lines()).filter(|(a, b)| a != b).collect();
        assert_eq!(differing.len(), 3, "{differing:?}");
        assert_eq!(CLOUD_INIT.lines().count(), user_data.lines().count());
    }

    #[test]
    fn k8s_script_applies_the_manifests_with_the_values_filled_in() {
        let script = render(&LaunchArgs { manager_url: None, ..args(Cloud::K8s, 12) }).unwrap();
        bash_syntax_ok(&script);
        let (argv, stdin, _dir) = run_with_stand_in(&script, "kubectl");
        assert_eq!(&argv[..3], ["apply", "-f", "-"], "{argv:?}");
        let docs = yaml_docs(&stdin);
        let by =
            |kind: &str, name: &str| docs.iter().find(|d| d["kind"] == kind && d["metadata"]["name"] == name).unwrap_or_else(|| panic!("no {kind} {name}"));
        assert_eq!(docs.len(), 7, "namespace, secret, config, manager (3), workers");
        assert_eq!(by("Secret", "shine-token")["stringData"]["token"], TOKEN);
        assert_eq!(by("ConfigMap", "shine-worker")["data"]["SHINE_MANAGER"], IN_CLUSTER_MANAGER);
        let w = by("Deployment", "shine-worker");
        assert_eq!(w["spec"]["replicas"].as_u64(), Some(12));
        assert_eq!(w["spec"]["template"]["spec"]["containers"][0]["image"], "registry.example.com/shine/worker:7");
        assert_eq!(by("Deployment", "shine-manager")["spec"]["template"]["spec"]["containers"][0]["image"], "registry.example.com/shine/manager:7");
        assert!(argv.windows(3).any(|w| w == ["rollout", "status", "deployment/shine-worker"]), "{argv:?}");

        // A manager outside the cluster: its URL in the ConfigMap, no manager objects.
        let script = render(&args(Cloud::K8s, 2)).unwrap();
        let docs = yaml_docs(heredoc_of(&script, "kubectl apply -f -"));
        assert!(!docs.iter().any(|d| d["metadata"]["name"] == "shine-manager"), "no in-cluster manager when --manager-url is given");
        assert_eq!(docs.iter().find(|d| d["kind"] == "ConfigMap").unwrap()["data"]["SHINE_MANAGER"], URL);
    }

    #[test]
    fn the_launch_templates_are_bash_and_every_mark_gets_filled() {
        // As committed (marks and all) and as printed, for each cloud.
        for template in [LAUNCH_GCP, LAUNCH_AWS, LAUNCH_K8S] {
            bash_syntax_ok(template);
        }
        for a in [args(Cloud::Gcp, 3), args(Cloud::Aws, 3), args(Cloud::K8s, 3), LaunchArgs { manager_url: None, ..args(Cloud::K8s, 3) }] {
            let script = render(&a).unwrap();
            bash_syntax_ok(&script);
            assert!(!script.contains("{{"), "a mark left in the {:?} script:\n{script}", a.cloud);
            for key in ["MANAGER", "TOKEN", "WORKER_URL"] {
                assert!(!script.contains(&format!("\n{key}=''\n")), "{key} left empty:\n{script}");
            }
        }
        // A file with a spot lost or added is refused, naming the file and the mark.
        assert_eq!(replace_exactly("f", "a {{x}} b {{x}}", "{{x}}", "1", 2).unwrap(), "a 1 b 1");
        let e = replace_exactly("configs/launch/x.sh", "a {{x}} b {{x}}", "{{x}}", "1", 1).unwrap_err().to_string();
        assert!(e.contains("configs/launch/x.sh") && e.contains("{{x}}") && e.contains("found it 2"), "{e}");
    }

    #[test]
    fn values_that_would_break_the_files_are_refused_with_the_reason() {
        let err = |a: LaunchArgs| render(&a).unwrap_err().to_string();
        assert!(err(LaunchArgs { token: "a b".into(), ..args(Cloud::Gcp, 1) }).contains("--token holds ' '"));
        assert!(err(LaunchArgs { token: "x'; rm -rf /".into(), ..args(Cloud::Aws, 1) }).contains("--token holds"));
        assert!(err(LaunchArgs { token: String::new(), ..args(Cloud::K8s, 1) }).contains("empty"));
        assert!(err(LaunchArgs { manager_url: Some("203.0.113.7:8080".into()), ..args(Cloud::Gcp, 1) }).contains("must start with"));
        assert!(err(LaunchArgs { manager_url: Some("http://a,b".into()), ..args(Cloud::Gcp, 1) }).contains("','"));
        assert!(err(LaunchArgs { manager_url: None, ..args(Cloud::Aws, 1) }).contains("needs --manager-url"));
        let e = err(LaunchArgs { worker_url: None, ..args(Cloud::Gcp, 1) });
        assert!(e.contains("needs --worker-url") && e.contains("build-worker.sh"), "{e}");
        assert!(err(LaunchArgs { image: "bad image".into(), ..args(Cloud::K8s, 1) }).contains("--image"));
    }

    #[test]
    fn every_fleet_file_is_embedded() {
        // A new file under configs/k8s must be printed by the k8s script too.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/k8s");
        let mut files: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        files.sort();
        assert_eq!(files, ["manager.yaml", "namespace.yaml", "secret.yaml", "worker-config.yaml", "workers.yaml"]);
        // And every launch script is one of the three compiled in.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/launch");
        let mut files: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        files.sort();
        assert_eq!(files, ["aws.sh", "gcp.sh", "k8s.sh"]);
    }
}
