//! `attach`, `attachments`, `attach-get`, `attach-rm`: files on cards (Hermes' verbs and
//! lines). A file is read through a descriptor opened without following a link and
//! taken only when it is a regular file within `kanban.attachment_max_bytes`; its bytes
//! go into the board, never into a path a name could steer.

use std::io::{IsTerminal, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use board_core::{Attachment, NewAttachment, TaskId};

use crate::args::AttachArgs;
use crate::failure::Failure;
use crate::output::{local_time, plain, print_json};
use crate::verbs::identity::caller;
use crate::verbs::Ctx;

/// `kanban attach ID PATH [--name NAME] [--content-type TYPE] [--author WHO]`.
pub fn attach(ctx: &Ctx, a: AttachArgs) -> Result<(), Failure> {
    let cap = ctx.config.kanban.attachment_max_bytes as u64;
    let content = read_regular_file(&a.path, cap)?;
    let given = a.name.unwrap_or_else(|| {
        a.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let content_type = a.content_type.or_else(|| {
        mime_guess::from_path(&given)
            .first()
            .map(|m| m.essence_str().to_owned())
    });
    let file = NewAttachment {
        name: given,
        content_type,
        created_by: Some(a.author.unwrap_or_else(caller)),
        content,
    };
    let made = ctx.store.attach(&a.id, &file, ctx.now)?;
    if ctx.json {
        print_json(&serde_json::json!(made));
    } else {
        println!(
            "Attached {} to {} (attachment {}, {} bytes)",
            plain(&made.name, false),
            made.task_id,
            made.id,
            made.size
        );
    }
    Ok(())
}

/// `kanban attachments ID`: Hermes' list, each file's digest where Hermes shows its path.
pub fn list(ctx: &Ctx, id: &TaskId) -> Result<(), Failure> {
    let files = ctx.store.attachments(id)?;
    if ctx.json {
        print_json(&serde_json::json!(files));
        return Ok(());
    }
    if files.is_empty() {
        println!("No attachments on {id}");
        return Ok(());
    }
    println!("Attachments on {id}:");
    for f in &files {
        println!("  {}", line(f));
        println!("        sha256 {} · {}", f.sha256, local_time(f.created_at));
    }
    Ok(())
}

/// One file as Hermes lists it: `[ID] NAME  (SIZE bytes, TYPE, by WHO)`.
pub fn line(f: &Attachment) -> String {
    format!(
        "[{}] {}  ({} bytes, {}, by {})",
        f.id,
        plain(&f.name, false),
        f.size,
        plain(f.content_type.as_deref().unwrap_or("-"), false),
        plain(f.created_by.as_deref().unwrap_or("-"), false)
    )
}

/// `kanban attach-get ATTACHMENT [--out FILE]`: the bytes to a new file, or to stdout
/// when it is not a terminal (a file's bytes never reach a terminal).
pub fn get(ctx: &Ctx, attachment_id: i64, out: Option<&Path>) -> Result<(), Failure> {
    let (file, bytes) = ctx.store.attachment(attachment_id)?;
    let written = match out {
        Some(path) => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .and_then(|mut f| f.write_all(&bytes).and_then(|()| f.sync_all()))
            .map_err(|e| Failure::Refused(format!("cannot write {}: {e}", path.display()))),
        None if std::io::stdout().is_terminal() => {
            return Err(Failure::Usage(format!(
                "attachment {attachment_id} ({}) is {} bytes of a file: name a file with --out, or pipe it",
                plain(&file.name, false),
                file.size
            )))
        }
        None => std::io::stdout()
            .lock()
            .write_all(&bytes)
            .map_err(|e| Failure::Refused(format!("cannot write the file: {e}"))),
    };
    written?;
    if let Some(path) = out {
        println!(
            "Wrote attachment {attachment_id} ({}, {} bytes) to {}",
            plain(&file.name, false),
            file.size,
            plain(&path.display().to_string(), false)
        );
    }
    Ok(())
}

/// `kanban attach-rm ATTACHMENT`.
pub fn remove(ctx: &Ctx, attachment_id: i64) -> Result<(), Failure> {
    let gone = ctx.store.detach(attachment_id, ctx.now)?;
    if ctx.json {
        print_json(&serde_json::json!(gone));
    } else {
        println!(
            "Deleted attachment {attachment_id} ({}) from {}",
            plain(&gone.name, false),
            gone.task_id
        );
    }
    Ok(())
}

/// The bytes of the regular file at `path`, at most `cap` of them. A link, a directory,
/// a device or a pipe is refused (opened without following a link, and without waiting
/// on a pipe's writer), as is a file over the cap, before or while it is read.
fn read_regular_file(path: &Path, cap: u64) -> Result<Vec<u8>, Failure> {
    let shown = plain(&path.display().to_string(), false);
    let refused = |why: String| Failure::Refused(format!("cannot attach {shown}: {why}"));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refused("it is a symbolic link; attach the file it points to".into()),
            Some(libc::ENOENT) => refused("no such file".into()),
            _ => refused(e.to_string()),
        })?;
    let meta = file.metadata().map_err(|e| refused(e.to_string()))?;
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file (a device, a pipe or a socket)"
        };
        return Err(refused(format!("it is {kind}")));
    }
    let over = |size: u64| {
        refused(format!(
            "it is {size} bytes, over kanban.attachment_max_bytes ({cap})"
        ))
    };
    if meta.len() > cap {
        return Err(over(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refused(e.to_string()))?;
    if bytes.len() as u64 > cap {
        return Err(over(bytes.len() as u64));
    }
    Ok(bytes)
}
