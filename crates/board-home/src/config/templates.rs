//! Team templates in the home's `templates/` (`NAME.yaml`, one per template): read by
//! name (a plain word, never a path), opened without following a link, at most 64 KiB of
//! UTF-8 YAML, checked by `board_core::template` before anything uses them.

use std::io::Read;
use std::path::Path;

use board_core::Template;

use super::text::yaml_root;
use super::yaml;
use crate::safety::open_read;
use crate::Home;

/// The directory of a home that holds its templates.
pub const TEMPLATES_DIR: &str = "templates";
/// The largest template file.
const MAX_TEMPLATE_BYTES: u64 = 64 * 1024;
/// The most templates `all` reads.
const MAX_TEMPLATES: usize = 256;

/// Whether `name` can name a template: 1 to 64 letters, digits, `-` and `_`.
pub fn is_template_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The template `name` of `home`, checked; or why not, in one line.
pub fn template(home: &Home, name: &str) -> Result<Template, String> {
    if !is_template_name(name) {
        return Err(format!(
            "not a template name: {:?} (letters, digits, - and _; the file is templates/NAME.yaml)",
            name.chars().take(80).collect::<String>()
        ));
    }
    let path = home.dir().join(TEMPLATES_DIR).join(format!("{name}.yaml"));
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("no template {name} (no file {})", path.display()))
        }
        Ok(meta) if !meta.is_file() => {
            return Err(format!(
                "template {name}: {} is not a regular file",
                path.display()
            ))
        }
        _ => {}
    }
    read(&path).map_err(|why| format!("template {name}: {why}"))
}

fn read(path: &Path) -> Result<Template, String> {
    let mut bytes = Vec::new();
    open_read(path)
        .and_then(|f| f.take(MAX_TEMPLATE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_TEMPLATE_BYTES {
        return Err(format!("over {MAX_TEMPLATE_BYTES} bytes"));
    }
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let root = yaml_root(&text).map_err(|e| e.to_string())?;
    let node = yaml::Node {
        value: &root,
        root: true,
    };
    let template: Template = serde_path_to_error::deserialize(node).map_err(|e| {
        let key = e.path().to_string();
        format!("{key}: {}", e.into_inner())
    })?;
    template.check().map_err(|e| e.to_string())?;
    Ok(template)
}

/// Every template of `home` by name, each checked (at most 256, in name order); none
/// when the home has no `templates/`.
pub fn templates(home: &Home) -> Vec<(String, Result<Template, String>)> {
    let Ok(entries) = std::fs::read_dir(home.dir().join(TEMPLATES_DIR)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".yaml").map(str::to_owned))
        .collect();
    names.sort();
    names.truncate(MAX_TEMPLATES);
    names
        .into_iter()
        .map(|name| {
            let read = template(home, &name);
            (name, read)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWARM: &str = "description: research, check, write up\nsteps:\n  - name: research\n    title: \"Research {n}: {goal}\"\n    assignee: researcher\n    repeat: workers\n  - name: verify\n    title: Check the findings\n    assignee: reviewer\n    after: [research]\nroot:\n  title: \"Write up: {goal}\"\n  assignee: writer\n";

    #[test]
    fn templates_are_read_by_name_checked_and_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path()).unwrap();
        let files = dir.path().join(TEMPLATES_DIR);
        std::fs::create_dir(&files).unwrap();
        std::fs::write(files.join("swarm.yaml"), SWARM).unwrap();
        std::fs::write(
            files.join("typo.yaml"),
            SWARM.replace("assignee: reviewer", "asignee: reviewer"),
        )
        .unwrap();
        std::fs::write(
            files.join("loop.yaml"),
            SWARM.replace("after: [research]", "after: [verify]"),
        )
        .unwrap();
        std::os::unix::fs::symlink(files.join("swarm.yaml"), files.join("linked.yaml")).unwrap();
        let swarm = template(&home, "swarm").unwrap();
        assert_eq!((swarm.steps.len(), swarm.root.assignee.as_str()), (2, "writer"));
        for (name, why) in [
            ("typo", "unknown field"),
            ("loop", "not a step before it"),
            ("linked", "not a regular file"),
            ("missing", "no template missing"),
            ("../swarm", "not a template name"),
        ] {
            let e = template(&home, name).unwrap_err();
            assert!(e.contains(why) && !e.contains('\n'), "{name}: {e}");
        }
        let all: Vec<(String, bool)> = templates(&home)
            .into_iter()
            .map(|(n, t)| (n, t.is_ok()))
            .collect();
        assert_eq!(
            all,
            [
                ("linked".into(), false),
                ("loop".into(), false),
                ("swarm".into(), true),
                ("typo".into(), false)
            ]
        );
    }
}
