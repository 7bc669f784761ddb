//! The config file as YAML text: the file read with its checks, one document parsed with
//! few aliases, and a tree written back as block YAML.

use std::io::Read;
use std::path::Path;

use serde_json::Value;
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::{Yaml, YamlEmitter, YamlLoader};

use super::{ConfigError, MAX_ALIASES, MAX_FILE_BYTES};

/// The config's text and metadata; `None` when there is no file.
pub(super) fn read_file(path: &Path) -> Result<Option<(String, std::fs::Metadata)>, ConfigError> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            })
        }
    };
    if meta.is_dir() {
        return Err(ConfigError::NotAFile {
            path: path.to_owned(),
            what: "a directory",
        });
    }
    // A FIFO would block the read forever.
    if !meta.is_file() {
        return Err(ConfigError::NotAFile {
            path: path.to_owned(),
            what: "not a regular file",
        });
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ConfigError::TooBig { bytes: meta.len() });
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        ConfigError::NotUtf8 {
            line: 1 + valid.iter().filter(|&&b| b == b'\n').count(),
        }
    })?;
    Ok(Some((text, meta)))
}

/// One YAML document as a tree: no BOM, few aliases, null for an empty file.
pub(super) fn yaml_root(text: &str) -> Result<Yaml, ConfigError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    check_aliases(text)?;
    let docs = YamlLoader::load_from_str(text).map_err(|e| ConfigError::Syntax {
        line: e.marker().line(),
        column: e.marker().col() + 1,
        message: syntax_message(e.info()),
    })?;
    if docs.len() > 1 {
        return Err(ConfigError::Shape(format!(
            "expected one YAML document, got {}",
            docs.len()
        )));
    }
    Ok(docs.into_iter().next().unwrap_or(Yaml::Null))
}

/// A tree as block YAML, without the document marker.
pub(super) fn emit(value: &Value) -> String {
    emit_yaml(&json_to_yaml(value))
}

/// A YAML tree as block YAML, without the document marker.
pub(super) fn emit_yaml(doc: &Yaml) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail, and the tree holds no unrepresentable value.
    let _ = YamlEmitter::new(&mut out).dump(doc);
    let body = out.strip_prefix("---\n").unwrap_or(&out);
    format!("{body}\n")
}

fn json_to_yaml(value: &Value) -> Yaml {
    match value {
        Value::Null => Yaml::Null,
        Value::Bool(b) => Yaml::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Yaml::Integer(i),
            None => Yaml::Real(n.to_string()),
        },
        Value::String(s) => Yaml::String(s.clone()),
        Value::Array(items) => Yaml::Array(items.iter().map(json_to_yaml).collect()),
        Value::Object(map) => Yaml::Hash(
            map.iter()
                .map(|(k, v)| (Yaml::String(k.clone()), json_to_yaml(v)))
                .collect(),
        ),
    }
}

/// Refuses a file with more aliases than a config could need, before the loader copies them.
fn check_aliases(text: &str) -> Result<(), ConfigError> {
    let mut parser = Parser::new_from_str(text);
    let mut aliases = 0;
    // A syntax error stops the count; the loader reports it with its position.
    while let Ok((event, _)) = parser.next_token() {
        match event {
            Event::StreamEnd => break,
            Event::Alias(_) => aliases += 1,
            _ => {}
        }
        if aliases > MAX_ALIASES {
            return Err(ConfigError::Shape(format!(
                "more than {MAX_ALIASES} YAML aliases; a config needs few"
            )));
        }
    }
    Ok(())
}

/// The parser's words, with its duplicate-key message (which quotes the key as Rust
/// debug output, `String("max_spawn")`) made readable.
fn syntax_message(info: &str) -> String {
    let duplicate = info.strip_suffix(": duplicated key in mapping").map(|key| {
        key.strip_prefix("String(")
            .and_then(|k| k.strip_suffix(')'))
            .unwrap_or(key)
    });
    match duplicate {
        Some(key) => format!("duplicate key {key}"),
        None => info.to_owned(),
    }
}
