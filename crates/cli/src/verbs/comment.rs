//! `comment`: notes on a card, from people or from its worker.

use board_core::{Comment, TaskId};

use crate::args::CommentArgs;
use crate::failure::Failure;
use crate::output::{comment_json, print_json};
use crate::verbs::{parse_id, target, Desk, Worker};

pub fn comment(desk: &Desk, a: CommentArgs) -> Result<(), Failure> {
    let worker = Worker::from_env()?;
    let mut words = a.words.into_iter();
    let (id, text) = match (words.next(), words.next()) {
        (Some(id), Some(text)) => (Some(parse_id(&id)?), text),
        (Some(text), None) => (None, text),
        (None, _) => return Err(Failure::Usage("comment needs TEXT".to_owned())),
    };
    let comment = add_comment(desk, id, &text, a.author.as_deref(), worker.as_ref())?;
    if desk.json {
        print_json(&comment_json(&comment));
    } else {
        println!("commented on {} (#{})", comment.task_id, comment.id);
    }
    Ok(())
}

/// Comments on a task (a worker's own by default).
pub fn add_comment(
    desk: &Desk,
    id: Option<TaskId>,
    text: &str,
    author: Option<&str>,
    worker: Option<&Worker>,
) -> Result<Comment, Failure> {
    desk.within_cap("the comment", text)?;
    let (id, _) = target(id, None, worker, "comment")?;
    desk.comment(&id, author, text)
}
