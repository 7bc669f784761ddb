//! Files on cards (`kanban attach`, Hermes' verb): a file's bytes live in the board
//! itself (a `task_attachments` row on every backend), with their SHA-256, so every host
//! of a shared board reads the same file and a copy of the board carries it. Names are
//! plain file names the board chose from the caller's (Hermes' rules: the last path
//! component, no control characters, no leading dot, at most 200 characters; a name
//! already on the card gets ` (1)`, ` (2)`, ...), never paths.

use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::kinds::EventKind;
use crate::refusal::Refusal;
use crate::store::StoreResult;
use crate::transition::NewEvent;
use crate::types::{TaskId, Timestamp};

/// Hermes' cap on one file, the default of `kanban.attachment_max_bytes`.
pub const DEFAULT_MAX_BYTES: u64 = 25 * 1024 * 1024;
/// The most `kanban.attachment_max_bytes` may allow, and what the board takes whatever
/// a caller's cap says.
pub const HARD_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// The longest name, in characters (Hermes').
pub const NAME_MAX_CHARS: usize = 200;

/// A file on a card, as listed: everything but its bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub id: i64,
    pub task_id: TaskId,
    pub name: String,
    pub content_type: Option<String>,
    pub size: i64,
    /// The bytes' SHA-256, lowercase hex.
    pub sha256: String,
    pub created_by: Option<String>,
    pub created_at: Timestamp,
}

/// A file to attach: the caller's name for it, its type and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewAttachment {
    pub name: String,
    pub content_type: Option<String>,
    pub created_by: Option<String>,
    pub content: Vec<u8>,
}

impl NewAttachment {
    /// The name the board keeps (see [`file_name`]), the bytes' SHA-256, and the checks
    /// every store runs before it writes: the size under [`HARD_MAX_BYTES`], a content
    /// type of the form `type/subtype`, a short author.
    pub fn admit(&self) -> Result<(String, String), Refusal> {
        within_hard_cap(self.content.len() as u64)?;
        if let Some(kind) = &self.content_type {
            content_type(kind)?;
        }
        crate::limits::some_short("the author", &self.created_by)?;
        Ok((file_name(&self.name)?, digest(&self.content)))
    }
}

/// Refuses a file of more than [`HARD_MAX_BYTES`].
pub fn within_hard_cap(size: u64) -> Result<(), Refusal> {
    match size > HARD_MAX_BYTES {
        true => Err(Refusal::Invalid(format!(
            "the file is {size} bytes, over the board's {HARD_MAX_BYTES}"
        ))),
        false => Ok(()),
    }
}

/// The SHA-256 of `bytes`, lowercase hex.
pub fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Files on cards: what a backend keeps of each and their bytes. Every write is one
/// transaction with its event on the task.
pub trait AttachmentShelf: Send + Sync {
    /// Attaches `file` to task `id` under the name the board makes of the caller's
    /// ([`file_name`], then [`unique_name`] among the card's), with its `attached`
    /// event. Refused for an unknown task or a file [`NewAttachment::admit`] refuses.
    fn attach(&self, id: &TaskId, file: &NewAttachment, now: Timestamp) -> StoreResult<Attachment>;
    /// A task's files, oldest first, without their bytes; an unknown task is refused.
    fn attachments(&self, id: &TaskId) -> StoreResult<Vec<Attachment>>;
    /// One file with its bytes; an unknown id is refused.
    fn attachment(&self, attachment_id: i64) -> StoreResult<(Attachment, Vec<u8>)>;
    /// Removes one file, with a `detached` event on its task; an unknown id is refused.
    fn detach(&self, attachment_id: i64, now: Timestamp) -> StoreResult<Attachment>;
}

/// A caller's name for a file reduced to a plain file name (Hermes' rules): its last
/// component after `/` or `\`, control characters dropped, leading dots and blanks
/// trimmed, at most [`NAME_MAX_CHARS`]; refused when nothing is left.
pub fn file_name(raw: &str) -> Result<String, Refusal> {
    let leaf = raw.replace('\\', "/");
    let leaf = leaf.rsplit('/').next().unwrap_or_default();
    let kept: String = leaf.chars().filter(|c| !c.is_control()).collect();
    let name: String = kept
        .trim()
        .trim_start_matches('.')
        .trim()
        .chars()
        .take(NAME_MAX_CHARS)
        .collect();
    match name.trim_end() {
        "" => Err(Refusal::Invalid(format!(
            "not a usable file name: {:?}",
            raw.chars().take(80).collect::<String>()
        ))),
        name => Ok(name.to_owned()),
    }
}

/// Refuses a content type that is not `type/subtype` in printable ASCII with no spaces
/// (parameters such as `; charset=utf-8` are allowed after it), or over 127 bytes.
pub fn content_type(kind: &str) -> Result<(), Refusal> {
    let essence = kind.split(';').next().unwrap_or_default().trim();
    let token = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic() && b != b'/');
    let shaped = essence.split_once('/').is_some_and(|(a, b)| token(a) && token(b));
    if !shaped || kind.len() > 127 || kind.chars().any(|c| c.is_control() || !c.is_ascii()) {
        return Err(Refusal::Invalid(format!(
            "not a content type: {:?} (expected e.g. text/plain or image/png)",
            kind.chars().take(80).collect::<String>()
        )));
    }
    Ok(())
}

/// `name`, or the first of `stem (1).ext`, `stem (2).ext`, ... that `taken` does not
/// hold (Hermes' rule: the extension is what follows the first dot).
pub fn unique_name(name: &str, taken: &[String]) -> String {
    if !taken.iter().any(|t| t == name) {
        return name.to_owned();
    }
    let (stem, ext) = match name.split_once('.') {
        Some((stem, ext)) => (stem, format!(".{ext}")),
        None => (name, String::new()),
    };
    (1..)
        .map(|n| format!("{stem} ({n}){ext}"))
        .find(|candidate| !taken.iter().any(|t| t == candidate))
        .unwrap_or_default()
}

/// The `attached` event of a file just written.
pub fn attached(a: &Attachment) -> NewEvent {
    NewEvent::new(
        EventKind::Attached,
        None,
        json!({ "attachment_id": a.id, "name": a.name, "size": a.size, "sha256": a.sha256, "by": a.created_by }),
    )
}

/// The `detached` event of a file just removed.
pub fn detached(a: &Attachment) -> NewEvent {
    NewEvent::new(
        EventKind::Detached,
        None,
        json!({ "attachment_id": a.id, "name": a.name, "size": a.size, "sha256": a.sha256 }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_leaf_without_control_characters_or_leading_dots() {
        for (raw, kept) in [
            ("report.pdf", "report.pdf"),
            ("../../etc/passwd", "passwd"),
            ("C:\\Users\\x\\notes.txt", "notes.txt"),
            ("  .hidden  ", "hidden"),
            ("a\u{0}b\nc.txt", "abc.txt"),
            ("...", ""),
            ("dir/", ""),
        ] {
            match file_name(raw) {
                Ok(name) => assert_eq!(name, kept, "{raw:?}"),
                Err(e) => assert!(
                    kept.is_empty() && e.to_string().contains("file name"),
                    "{raw:?}: {e}"
                ),
            }
        }
        assert_eq!(
            file_name(&"x".repeat(300)).unwrap().chars().count(),
            NAME_MAX_CHARS
        );
    }

    #[test]
    fn a_taken_name_gets_the_first_free_number() {
        let taken = vec!["a.tar.gz".to_owned(), "a (1).tar.gz".to_owned(), "b".to_owned()];
        assert_eq!(unique_name("a.tar.gz", &taken), "a (2).tar.gz");
        assert_eq!(unique_name("b", &taken), "b (1)");
        assert_eq!(unique_name("c.txt", &taken), "c.txt");
    }

    #[test]
    fn content_types_and_sizes_are_checked_and_bytes_digested() {
        for ok in ["text/plain", "image/png", "text/plain; charset=utf-8"] {
            assert!(content_type(ok).is_ok(), "{ok}");
        }
        for bad in [
            "text",
            "text/",
            "/png",
            "text/pl ain",
            "text/plain\n",
            "tëxt/plain",
        ] {
            assert!(content_type(bad).is_err(), "{bad:?}");
        }
        let long = format!("text/{}", "x".repeat(122));
        assert!(content_type(&long).is_ok(), "127 bytes");
        assert!(content_type(&format!("{long}x")).is_err(), "128 bytes");
        assert!(within_hard_cap(HARD_MAX_BYTES).is_ok());
        assert!(within_hard_cap(HARD_MAX_BYTES + 1).is_err());
        assert_eq!(
            digest(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let file = NewAttachment {
            name: "../x.txt".into(),
            content_type: None,
            created_by: None,
            content: b"abc".to_vec(),
        };
        assert_eq!(file.admit().unwrap().0, "x.txt");
    }
}
