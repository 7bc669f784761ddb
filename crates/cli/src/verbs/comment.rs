//! `comment`: notes on a card, from people or from its worker.

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
    desk.within_cap("the comment", &text)?;
    let (id, _) = target(id, None, worker.as_ref(), "comment")?;
    let comment = desk.comment(&id, a.author.as_deref(), &text)?;
    if desk.json {
        print_json(&comment_json(&comment));
    } else {
        println!("commented on {} (#{})", comment.task_id, comment.id);
    }
    Ok(())
}
