//! `comment`: notes on a card, from people or from its worker.

use board_core::{Comment, TaskId};

use crate::args::CommentArgs;
use crate::failure::Failure;
use crate::output::{comment_json, print_json};
use crate::verbs::{caller, id_and_words, target, Desk, Worker};

pub fn comment(desk: &Desk, a: CommentArgs) -> Result<(), Failure> {
    let worker = Worker::from_env()?;
    // A lone word is the text, on the worker's own task (outside one, `target` asks for an id).
    let (id, text) = match a.words.as_slice() {
        [] => return Err(Failure::Usage("comment needs TEXT".to_owned())),
        // A task id alone outside a worker is a comment with its text left out.
        [text] if worker.is_none() && text.parse::<TaskId>().is_ok() => {
            return Err(Failure::Usage(format!(
                "comment {text} needs the comment's text after the id: kanban comment {text} \"TEXT\""
            )))
        }
        [text] => (None, text.clone()),
        // Two words or more: after an id there is text.
        words => {
            let (id, text) = id_and_words(words, worker.is_some())?;
            (id, text.join(" "))
        }
    };
    let comment = add_comment(desk, id, &text, a.author.as_deref(), worker.as_ref())?;
    if desk.json {
        print_json(&comment_json(&comment));
    } else {
        println!("Comment added to {}", comment.task_id);
    }
    Ok(())
}

/// Comments on a task (a worker's own by default), as `author`, else the caller; a
/// worker's comment on its own task is guarded by its run, so a stale worker's is refused.
pub fn add_comment(
    desk: &Desk,
    id: Option<TaskId>,
    text: &str,
    author: Option<&str>,
    worker: Option<&Worker>,
) -> Result<Comment, Failure> {
    desk.within_cap("the comment", text)?;
    let (id, guard) = target(id, None, worker, "comment")?;
    let author = author.map_or_else(caller, str::to_owned);
    desk.comment(&id, Some(&author), text, guard)
}
