//! The parser of the decomposer's reply (docs/decomposer.md#reading-the-reply): lenient about wrapping, strict about
//! content. It owns every rule a reply must pass before anything is written; the graph
//! rules themselves are [`board_core::plan::validate_fanout`]'s, called from here so the
//! parser and the commit can never disagree.

use board_core::graph::TITLE_MAX_CHARS;
use board_core::plan::{validate_fanout, CHILD_TITLE_MAX_CHARS};
use board_core::{clean_title, Plan, PlannedTask};
use serde_json::{Map, Value};

use crate::roster::Roster;

/// The longest reason a [`Rejection`] carries. Reasons end up in events and logs, and a
/// model's output must never flood them.
const REASON_MAX_CHARS: usize = 200;

/// Echoed values (only numbers, never model prose) are cut to this many characters.
const ECHO_MAX_CHARS: usize = 40;

/// Why a reply was refused. Its `Display` is one line of at most about 200 characters
/// that names the rule broken, and never more than a short number of the model's text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// No JSON object could be read from the reply: `malformed reply: ...`.
    #[error("malformed reply: {0}")]
    Malformed(String),
    /// A JSON object that breaks a rule, such as `tasks[3].parents: index 9 out of range`.
    #[error("{0}")]
    Invalid(String),
}

impl Rejection {
    fn malformed(reason: impl Into<String>) -> Rejection {
        Rejection::Malformed(one_line(&reason.into()))
    }

    fn invalid(reason: impl Into<String>) -> Rejection {
        Rejection::Invalid(one_line(&reason.into()))
    }

    /// The reason without the `malformed reply: ` prefix.
    pub fn reason(&self) -> &str {
        match self {
            Rejection::Malformed(reason) | Rejection::Invalid(reason) => reason,
        }
    }
}

/// Parses a model's reply into a validated plan, or says which rule it broke.
///
/// Code fences and prose around the JSON object are tolerated; any violation of the
/// content rules rejects the whole reply. Child titles longer than 200 characters are
/// cut, and every assignee that is not a profile of `roster` becomes its default
/// assignee; nothing else is changed.
///
/// ```
/// use board_core::Plan;
/// use decompose::{parse_reply, Roster};
///
/// let reply = r#"```json
/// {"fanout": true, "tasks": [{"title": "schema"}, {"title": "api", "parents": [0]}]}
/// ```"#;
/// let Ok(Plan::Fanout { tasks, .. }) = parse_reply(reply, &Roster::default()) else {
///     panic!("rejected");
/// };
/// assert_eq!(tasks[1].parents, vec![0]);
/// assert_eq!(tasks[1].assignee, "default");
///
/// let bad = parse_reply(r#"{"fanout": "yes"}"#, &Roster::default()).unwrap_err();
/// assert_eq!(bad.to_string(), "fanout must be true or false, got a string");
/// ```
pub fn parse_reply(text: &str, roster: &Roster) -> Result<Plan, Rejection> {
    let object = read_object(text)?;
    match object.get("fanout") {
        None => Err(Rejection::invalid("fanout is missing (expected true or false)")),
        Some(Value::Bool(true)) => parse_fanout(&object, roster),
        Some(Value::Bool(false)) => parse_single(&object, roster),
        Some(other) => Err(Rejection::invalid(format!(
            "fanout must be true or false, got {}",
            describe(other)
        ))),
    }
}

/// A reply that picks one of the team's templates (`{"fanout": true, "template": NAME,
/// "workers": N}`): the template made for `goal` as a plan, and the profile that does the
/// card itself last. `None` when the reply names no template (it is then read as a
/// plan of its own); a template not among `templates`, or one that cannot be made, is
/// rejected.
pub fn template_reply(
    text: &str,
    templates: &[(String, board_core::Template)],
    goal: &str,
    settings: &crate::DecomposerSettings,
) -> Option<Result<(Plan, Option<String>), Rejection>> {
    let object = read_object(text).ok()?;
    let chosen = object.get("template")?;
    Some(chosen_template(&object, chosen, templates, goal, settings))
}

fn chosen_template(
    object: &Map<String, Value>,
    chosen: &Value,
    templates: &[(String, board_core::Template)],
    goal: &str,
    settings: &crate::DecomposerSettings,
) -> Result<(Plan, Option<String>), Rejection> {
    let Some(name) = chosen.as_str() else {
        return Err(Rejection::invalid(format!(
            "template must be a name, got {}",
            describe(chosen)
        )));
    };
    let Some((_, template)) = templates.iter().find(|(n, _)| n == name) else {
        return Err(Rejection::invalid(format!(
            "template {:?} is not one of the team's",
            name.chars().take(ECHO_MAX_CHARS).collect::<String>()
        )));
    };
    let workers = match object.get("workers") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(
            n.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| Rejection::invalid("workers must be a whole number from 1 to 32"))?,
        ),
        Some(other) => {
            return Err(Rejection::invalid(format!(
                "workers must be a number, got {}",
                describe(other)
            )))
        }
    };
    let made = template
        .instantiate(goal, workers, settings.plan.max_children)
        .map_err(|e| Rejection::invalid(e.to_string()))?;
    // The template's profiles are the team's own choice, kept as written.
    let Plan::Fanout { tasks, .. } = made.plan else {
        return Err(Rejection::invalid("a template makes a graph"));
    };
    let rationale = object.get("rationale").and_then(Value::as_str).map(one_line);
    Ok((Plan::Fanout { rationale, tasks }, Some(made.root_assignee)))
}

/// Finds the one JSON object in the reply.
fn read_object(text: &str) -> Result<Map<String, Value>, Rejection> {
    let text = strip_fences(text);
    // A reply that is JSON as a whole but not an object (`[{...}]`, `"{...}"`) is refused
    // rather than mined for an object inside it: only prose and fences count as wrapping.
    if let Ok(whole) = serde_json::from_str::<Value>(text) {
        return match whole {
            Value::Object(object) => Ok(object),
            other => Err(Rejection::malformed(format!(
                "expected a JSON object, got {}",
                describe(&other)
            ))),
        };
    }
    let (Some(start), Some(end)) = (text.find('{'), text.rfind('}')) else {
        return Err(Rejection::malformed("no JSON object found"));
    };
    if end < start {
        return Err(Rejection::malformed("no JSON object found"));
    }
    // Both braces are ASCII, so these byte offsets are character boundaries.
    match serde_json::from_str::<Value>(&text[start..=end]) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(other) => Err(Rejection::malformed(format!(
            "expected a JSON object, got {}",
            describe(&other)
        ))),
        Err(err) => Err(Rejection::malformed(err.to_string())),
    }
}

/// Drops an opening fence line (```` ``` ```` or ```` ```json ````) and a closing fence.
/// Fences inside the object are left alone: they may be part of a task's body.
fn strip_fences(text: &str) -> &str {
    let mut text = text.trim();
    if text.starts_with("```") {
        text = match text.find('\n') {
            Some(newline) => &text[newline + 1..],
            None => text.trim_start_matches('`'),
        };
    }
    if let Some(inner) = text.trim_end().strip_suffix("```") {
        text = inner.trim_end_matches('`');
    }
    text.trim()
}

fn parse_single(object: &Map<String, Value>, roster: &Roster) -> Result<Plan, Rejection> {
    let title = clean_title(optional_string(object, "title", "title")?);
    let body = optional_string(object, "body", "body")?.to_owned();
    optional_string(object, "rationale", "rationale")?;
    if title.is_empty() && body.trim().is_empty() {
        return Err(Rejection::invalid(
            "a single task needs a non-blank title or body",
        ));
    }
    // The commit refuses such a title; refusing here keeps "accepted" meaning "committable".
    if title.chars().count() > TITLE_MAX_CHARS {
        return Err(Rejection::invalid(format!(
            "title is longer than {TITLE_MAX_CHARS} characters"
        )));
    }
    Ok(Plan::Single {
        title,
        body,
        assignee: Some(roster.resolve_assignee(assignee_of(object))),
    })
}

fn parse_fanout(object: &Map<String, Value>, roster: &Roster) -> Result<Plan, Rejection> {
    let rationale = optional_string(object, "rationale", "rationale")?.trim();
    let rationale = (!rationale.is_empty()).then(|| rationale.to_owned());
    let items = match object.get("tasks") {
        None | Some(Value::Null) => {
            return Err(Rejection::invalid(
                "tasks is missing (a fan-out needs a non-empty array of tasks)",
            ))
        }
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(Rejection::invalid(format!(
                "tasks must be an array, got {}",
                describe(other)
            )))
        }
    };
    // Checked before walking the elements so a huge reply costs nothing more; the
    // wording is validate_fanout's, which checks it again on the result.
    let limit = roster.max_children();
    if items.len() > limit {
        return Err(Rejection::invalid(format!(
            "reply has {} tasks, limit is {limit}",
            items.len()
        )));
    }
    let tasks = items
        .iter()
        .enumerate()
        .map(|(i, item)| parse_child(i, item, roster))
        .collect::<Result<Vec<_>, _>>()?;
    validate_fanout(&tasks, limit).map_err(|e| Rejection::invalid(e.to_string()))?;
    Ok(Plan::Fanout { rationale, tasks })
}

/// Checks one child's field types; ranges, blanks and the graph are validate_fanout's.
fn parse_child(i: usize, item: &Value, roster: &Roster) -> Result<PlannedTask, Rejection> {
    let Value::Object(task) = item else {
        return Err(Rejection::invalid(format!(
            "tasks[{i}] must be an object, got {}",
            describe(item)
        )));
    };
    let title = match task.get("title") {
        None | Some(Value::Null) => return Err(Rejection::invalid(format!("tasks[{i}].title is missing"))),
        Some(Value::String(title)) => cut_title(title),
        Some(other) => {
            return Err(Rejection::invalid(format!(
                "tasks[{i}].title must be a string, got {}",
                describe(other)
            )))
        }
    };
    let body = optional_string(task, "body", &format!("tasks[{i}].body"))?.to_owned();
    let parents = match task.get("parents") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(parents)) => parents
            .iter()
            .enumerate()
            .map(|(k, parent)| parent_index(i, k, parent))
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => {
            return Err(Rejection::invalid(format!(
                "tasks[{i}].parents must be an array of indices, got {}",
                describe(other)
            )))
        }
    };
    Ok(PlannedTask {
        title,
        body,
        assignee: roster.resolve_assignee(assignee_of(task)),
        parents,
    })
}

/// One entry of `parents`: a JSON integer that fits an index. `1.0` is refused: the model
/// was asked for indices, and a float means it is not following the format.
fn parent_index(i: usize, k: usize, parent: &Value) -> Result<usize, Rejection> {
    let Value::Number(number) = parent else {
        return Err(Rejection::invalid(format!(
            "tasks[{i}].parents[{k}] must be an integer index, got {}",
            describe(parent)
        )));
    };
    if let Some(index) = number.as_u64() {
        return usize::try_from(index)
            .map_err(|_| Rejection::invalid(format!("tasks[{i}].parents: index {index} out of range")));
    }
    if number.as_i64().is_some() {
        return Err(Rejection::invalid(format!(
            "tasks[{i}].parents[{k}]: index {} is negative",
            echo(&number.to_string())
        )));
    }
    Err(Rejection::invalid(format!(
        "tasks[{i}].parents[{k}] must be an integer index, got {}",
        describe(parent)
    )))
}

/// Cleans a child's title and cuts it to 200 characters.
fn cut_title(title: &str) -> String {
    let title = clean_title(title);
    let title = title.as_str();
    match title.char_indices().nth(CHILD_TITLE_MAX_CHARS) {
        Some((end, _)) => title[..end].trim_end().to_owned(),
        None => title.to_owned(),
    }
}

/// An optional string field: missing or null reads as empty, anything else but a string
/// rejects the reply. `path` is how the reason names the field.
fn optional_string<'a>(object: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a str, Rejection> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(text)) => Ok(text),
        Some(other) => Err(Rejection::invalid(format!(
            "{path} must be a string, got {}",
            describe(other)
        ))),
    }
}

/// The assignee the reply asks for, if it is a string at all; anything else is treated
/// as no request, since the roster's default stands in for it.
fn assignee_of(object: &Map<String, Value>) -> Option<&str> {
    object.get("assignee").and_then(Value::as_str)
}

/// Names a JSON value's kind for a reason. Only booleans and numbers are echoed (cut
/// short): strings, arrays and objects are model text and are never repeated.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => echo(&n.to_string()),
        Value::String(_) => "a string".to_owned(),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

fn echo(text: &str) -> String {
    cut_chars(text, ECHO_MAX_CHARS)
}

/// Makes a reason safe for a log line: no control characters, bounded length.
fn one_line(reason: &str) -> String {
    let flat: String = reason
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    cut_chars(&flat, REASON_MAX_CHARS)
}

fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_are_stripped_only_at_the_edges() {
        assert_eq!(strip_fences("```json\n{}\n```"), "{}");
        assert_eq!(strip_fences("```\n{}\n```\n"), "{}");
        assert_eq!(strip_fences("```{}```"), "{}");
        assert_eq!(
            strip_fences("{\"body\": \"```rust\\nx\\n```\"}"),
            "{\"body\": \"```rust\\nx\\n```\"}"
        );
        assert_eq!(strip_fences("```"), "");
        assert_eq!(strip_fences(""), "");
    }

    #[test]
    fn titles_are_cut_on_character_boundaries() {
        let long = "é".repeat(300);
        assert_eq!(cut_title(&long).chars().count(), CHILD_TITLE_MAX_CHARS);
        assert_eq!(cut_title("  short  "), "short");
    }

    #[test]
    fn reasons_are_one_bounded_line() {
        let reason = one_line(&format!("a\nb{}", "x".repeat(1000)));
        assert!(!reason.contains('\n'));
        assert!(reason.chars().count() <= REASON_MAX_CHARS + 3);
    }
}

#[cfg(test)]
mod template_tests {
    use super::*;
    use board_core::template::{Repeat, Role, Step, Template};

    fn templates() -> Vec<(String, Template)> {
        let step = |name: &str, assignee: &str, repeat: Option<Repeat>, after: &[&str]| Step {
            name: name.into(),
            title: format!("{name} {{n}}: {{goal}}"),
            body: String::new(),
            assignee: assignee.into(),
            repeat,
            after: after.iter().map(|a| (*a).to_owned()).collect(),
        };
        let t = Template {
            description: "research, then check".into(),
            workers: Some(2),
            steps: vec![
                step(
                    "research",
                    "researcher",
                    Some(Repeat::Word("workers".into())),
                    &[],
                ),
                step("verify", "reviewer", None, &["research"]),
            ],
            root: Role {
                title: "Write up".into(),
                body: String::new(),
                assignee: "writer".into(),
            },
        };
        vec![("research".to_owned(), t)]
    }

    #[test]
    fn a_reply_naming_a_template_gets_its_graph_and_root_profile() {
        let settings = crate::DecomposerSettings::default();
        let reply = r#"{"fanout": true, "rationale": "a known shape", "template": "research", "workers": 3}"#;
        let (plan, root) = template_reply(reply, &templates(), "cheaper CI", &settings)
            .unwrap()
            .unwrap();
        let Plan::Fanout { tasks, rationale } = plan else {
            panic!()
        };
        assert_eq!(tasks.len(), 4);
        assert_eq!(tasks[0].title, "research 1: cheaper CI");
        assert_eq!(tasks[3].parents, vec![0, 1, 2]);
        assert_eq!(
            (root.as_deref(), rationale.as_deref()),
            (Some("writer"), Some("a known shape"))
        );
        assert!(template_reply(r#"{"fanout": true, "tasks": []}"#, &templates(), "x", &settings).is_none());
        for (bad, why) in [
            (r#"{"template": "other"}"#, "not one of the team's"),
            (r#"{"template": 7}"#, "must be a name"),
            (r#"{"template": "research", "workers": 0}"#, "workers is"),
            (
                r#"{"template": "research", "workers": "many"}"#,
                "must be a number",
            ),
        ] {
            let e = template_reply(bad, &templates(), "x", &settings)
                .unwrap()
                .unwrap_err();
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
    }
}
