//! The Containerfile, as far as `tests/fleet.rs` needs it: its stages and their
//! instructions (continuation lines joined, comments dropped), and what a container
//! started from a stage gets (ENV, ENTRYPOINT, WORKDIR along the stage's FROM chain).
//! The test replays the build stage's COPY and RUN lines itself.


#[derive(Debug)]
pub struct Stage {
    pub name: Option<String>,
    pub base: String,
    /// (instruction, arguments), continuation lines joined, comments dropped.
    pub steps: Vec<(String, String)>,
}

pub fn parse_containerfile(text: &str) -> Vec<Stage> {
    let mut logical = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || (t.is_empty() && cur.is_empty()) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(part) => cur.push_str(part),
            None => {
                cur.push_str(t);
                logical.push(std::mem::take(&mut cur));
            }
        }
    }
    let mut stages: Vec<Stage> = Vec::new();
    for l in logical.into_iter().filter(|l| !l.trim().is_empty()) {
        let (ins, rest) = l.split_once(char::is_whitespace).unwrap_or((&l, ""));
        let (ins, rest) = (ins.to_ascii_uppercase(), rest.trim().to_string());
        if ins == "FROM" {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let name = (words.len() == 3 && words[1].eq_ignore_ascii_case("as")).then(|| words[2].to_string());
            stages.push(Stage { name, base: words[0].to_string(), steps: Vec::new() });
        } else {
            stages.last_mut().expect("an instruction before the first FROM").steps.push((ins, rest));
        }
    }
    stages
}

/// `KEY=VALUE` pairs of an ENV line (this project's files keep them unquoted).
pub fn env_pairs(args: &str) -> Vec<(String, String)> {
    assert!(!args.contains(['"', '\'']), "ENV {args}: keep ENV values unquoted so this test reads them as Docker does");
    args.split_whitespace()
        .map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).unwrap_or_else(|| panic!("ENV {args}: use ENV KEY=VALUE")))
        .collect()
}

/// What a container started from the image gets: ENV (in order), ENTRYPOINT, WORKDIR,
/// following the stage's FROM chain within the file.
#[derive(Debug, Default, Clone)]
pub struct ImageConfig {
    pub env: Vec<(String, String)>,
    pub entrypoint: Vec<String>,
    pub workdir: String,
}

pub fn image_config(stages: &[Stage], stage: &Stage) -> ImageConfig {
    let mut c = match stages.iter().find(|s| s.name.as_deref() == Some(stage.base.as_str())) {
        Some(parent) => image_config(stages, parent),
        None => ImageConfig { workdir: "/".into(), ..Default::default() },
    };
    for (ins, args) in &stage.steps {
        match ins.as_str() {
            "ENV" => c.env.extend(env_pairs(args)),
            "ENTRYPOINT" => c.entrypoint = serde_json::from_str(args).unwrap_or_else(|e| panic!("ENTRYPOINT {args}: use the JSON form ({e})")),
            "WORKDIR" => c.workdir = args.clone(),
            _ => {}
        }
    }
    c
}
