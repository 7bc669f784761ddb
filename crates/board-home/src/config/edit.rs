//! `kanban config get` and `set`: the effective value of one dotted key, and one key
//! written into `config.yaml`. A new file is checked whole by the loader before it
//! replaces the old one, and replaces it by a rename, so a refused or interrupted
//! `set` leaves the old file as it was.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde_json::Value;
use yaml_rust2::yaml::Hash;
use yaml_rust2::{Yaml, YamlLoader};

use super::text::{emit_yaml, read_file, yaml_root};
use super::{Config, ConfigError, EnvLookup};

impl Config {
    /// The effective value of a dotted key (`kanban.max_spawn`, `profiles.coder`), as
    /// `config check` shows it (the API key and the URLs' credentials redacted); `None`
    /// for a key the config does not have.
    pub fn effective_value(&self, key: &str) -> Option<Value> {
        let mut value = self.effective_json();
        for part in key.split('.') {
            value = value.as_object_mut()?.remove(part)?;
        }
        Some(value)
    }
}

/// A value as `config check` writes values: block YAML.
pub fn as_yaml(value: &Value) -> String {
    super::text::emit(value)
}

/// Sets `key` in `<home>/config.yaml` to `value` (read as YAML) and returns the key's new
/// effective value. The new file must load as the old one would (the same checks, and
/// the key must be one the config has); it is written beside the old one and renamed
/// over it, mode 0600. The file is written anew from its tree: comments are not kept.
pub fn set_key(home: &Path, key: &str, value: &str, env: EnvLookup<'_>) -> Result<Value, ConfigError> {
    let path = Config::path(home);
    let text = read_file(&path)?.map(|(text, _)| text).unwrap_or_default();
    let mut root = yaml_root(&text)?;
    place(&mut root, key, parse_value(key, value)?)?;
    let new_text = emit_yaml(&root);
    let loaded = Config::parse(&new_text, env)?;
    let effective = loaded
        .config
        .effective_value(key)
        .ok_or_else(|| ConfigError::UnknownKey(key.to_owned()))?;
    write_atomically(&path, &new_text)?;
    Ok(effective)
}

/// A value given on the command line, as YAML: `8` a number, `true` a flag, `[a, b]` a
/// list; nothing at all is the empty text.
fn parse_value(key: &str, value: &str) -> Result<Yaml, ConfigError> {
    let docs = YamlLoader::load_from_str(value)
        .map_err(|e| ConfigError::invalid(key, format!("not a YAML value: {}", e.info())))?;
    match docs.len() {
        0 => Ok(Yaml::String(String::new())),
        1 => Ok(docs.into_iter().next().unwrap_or(Yaml::Null)),
        _ => Err(ConfigError::invalid(key, "one value, not several YAML documents")),
    }
}

/// Puts `value` at the dotted `key` of the tree, making the sections on the way.
fn place(root: &mut Yaml, key: &str, value: Yaml) -> Result<(), ConfigError> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.trim().is_empty()) {
        return Err(ConfigError::UnknownKey(key.to_owned()));
    }
    let mut node = root;
    for (i, part) in parts.iter().enumerate() {
        if matches!(node, Yaml::Null) {
            *node = Yaml::Hash(Hash::new());
        }
        let Yaml::Hash(map) = node else {
            let section = parts[..i].join(".");
            return Err(ConfigError::invalid(
                &section,
                "is a value, not a section of keys",
            ));
        };
        let entry = map.entry(Yaml::String((*part).to_owned())).or_insert(Yaml::Null);
        if i + 1 == parts.len() {
            *entry = value;
            return Ok(());
        }
        node = entry;
    }
    Ok(())
}

/// Writes `text` to a temporary file in the home, flushed to disk, then renames it over
/// `path`.
fn write_atomically(path: &Path, text: &str) -> Result<(), ConfigError> {
    let failed = |source| ConfigError::Write {
        path: path.to_owned(),
        source,
    };
    let temporary = path.with_extension(format!("yaml.{}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temporary, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(failed(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_key_is_set_in_its_section_and_the_rest_kept() {
        let home = tempfile::tempdir().expect("tmp");
        std::fs::write(
            Config::path(home.path()),
            "kanban:\n  max_spawn: 2\nmodel:\n  default: m\n",
        )
        .expect("write");
        let value = set_key(home.path(), "kanban.claim_ttl_seconds", "60", &no_env).expect("set");
        assert_eq!(value, Value::from(60));
        let loaded = Config::load_with_env(home.path(), &no_env).expect("loads");
        assert_eq!(loaded.config.kanban.claim_ttl_seconds, 60);
        assert_eq!(loaded.config.kanban.max_spawn, 2);
        assert_eq!(loaded.config.model.default, "m");
    }

    #[test]
    fn an_unknown_key_or_a_bad_value_leaves_the_file_alone() {
        let home = tempfile::tempdir().expect("tmp");
        let original = "# mine\nkanban:\n  max_spawn: 2\n";
        std::fs::write(Config::path(home.path()), original).expect("write");
        for (key, value, says) in [
            ("kanban.max_spwan", "3", "unknown key kanban.max_spwan"),
            ("kanban.max_spawn", "many", "kanban.max_spawn"),
            ("kanban.max_spawn.deeper", "1", "kanban.max_spawn: is a value"),
            ("kanban..max_spawn", "1", "unknown key"),
        ] {
            let e = set_key(home.path(), key, value, &no_env).expect_err(key);
            assert!(e.to_string().contains(says), "{key}: {e}");
            let text = std::fs::read_to_string(Config::path(home.path())).expect("read");
            assert_eq!(text, original, "{key}");
        }
        let names: Vec<_> = std::fs::read_dir(home.path()).expect("dir").collect();
        assert_eq!(names.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn an_effective_value_is_found_by_its_dotted_key() {
        let config = Config::default();
        assert_eq!(
            config.effective_value("kanban.max_spawn"),
            Some(Value::from(config.kanban.max_spawn))
        );
        assert!(config.effective_value("kanban").is_some_and(|v| v.is_object()));
        assert_eq!(config.effective_value("kanban.nothing"), None);
        assert_eq!(config.effective_value(""), None);
    }
}
