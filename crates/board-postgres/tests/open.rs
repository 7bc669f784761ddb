//! Opening a board: a fresh schema is migrated and stamped, a board reopens without a
//! write, a schema of another application or of a newer version is refused with one
//! line and left row for row as it was, and the password never shows.

mod common;

use board_core::{BoardReads, BoardWrites, NewTask};
use board_postgres::{OpenError, Options, PgStore, APPLICATION_ID, SCHEMA_VERSION};
use common::{url, TestSchema};

fn stamp(schema: &TestSchema) -> Vec<String> {
    schema
        .dump()
        .into_iter()
        .find(|(table, _)| table == "kanban_meta")
        .map(|(_, rows)| rows)
        .unwrap_or_default()
}

fn refusal(schema: &TestSchema) -> OpenError {
    match PgStore::open(&url(), &schema.options()) {
        Ok(store) => panic!("{} was opened", store.target()),
        Err(e) => e,
    }
}

#[test]
fn a_fresh_schema_is_migrated_and_stamped() {
    let schema = TestSchema::new();
    let store = schema.open();
    assert_eq!(
        stamp(&schema),
        vec![format!("({APPLICATION_ID},{SCHEMA_VERSION})")]
    );
    let tables: Vec<String> = schema.dump().into_iter().map(|(table, _)| table).collect();
    for table in [
        "llm_calls",
        "task_comments",
        "task_events",
        "task_links",
        "task_runs",
        "tasks",
    ] {
        assert!(
            tables.contains(&table.to_owned()),
            "{table} missing from {tables:?}"
        );
    }
    let task = store.create(&NewTask::titled("first"), 1).unwrap();
    assert_eq!(store.get(&task.id).unwrap(), task);
}

#[test]
fn reopening_a_current_board_writes_nothing() {
    let schema = TestSchema::new();
    let store = schema.open();
    store.create(&NewTask::titled("kept"), 1).unwrap();
    let before = schema.dump();
    let again = schema.open();
    assert_eq!(schema.dump(), before);
    assert_eq!(again.list(&Default::default()).unwrap().len(), 1);
}

#[test]
fn concurrent_opens_of_a_fresh_schema_migrate_once() {
    let schema = TestSchema::new();
    std::thread::scope(|scope| {
        let opens: Vec<_> = (0..4).map(|_| scope.spawn(|| schema.open())).collect();
        for open in opens {
            open.join().expect("open");
        }
    });
    assert_eq!(
        stamp(&schema),
        vec![format!("({APPLICATION_ID},{SCHEMA_VERSION})")]
    );
}

#[test]
fn a_schema_stamped_by_another_application_is_refused_untouched() {
    let schema = TestSchema::new();
    schema.execute(
        "CREATE TABLE kanban_meta (application_id BIGINT NOT NULL, schema_version BIGINT NOT NULL);
         INSERT INTO kanban_meta VALUES (4660, 1);
         CREATE TABLE tasks (id TEXT PRIMARY KEY, title TEXT);
         INSERT INTO tasks VALUES ('a', 'not ours')",
    );
    let before = schema.dump();
    let e = refusal(&schema);
    assert!(matches!(e, OpenError::Foreign { .. }), "{e:?}");
    let message = e.to_string();
    assert!(
        message.contains("another application (application id 0x1234)"),
        "{message}"
    );
    assert!(!message.contains('\n'), "one line: {message}");
    assert_eq!(schema.dump(), before, "a refused schema is not written");
}

/// A schema of tables without our stamp is another application's, refused untouched;
/// so is one whose `kanban_meta` table is empty (no stamp; its tables are counted).
#[test]
fn a_schema_with_tables_and_no_stamp_is_refused_untouched() {
    for (tables, counted) in [
        (
            "CREATE TABLE customers (id INT); INSERT INTO customers VALUES (1), (2)",
            1,
        ),
        (
            "CREATE TABLE kanban_meta (application_id BIGINT, schema_version BIGINT)",
            1,
        ),
    ] {
        let schema = TestSchema::new();
        schema.execute(tables);
        let before = schema.dump();
        let e = refusal(&schema);
        assert!(matches!(e, OpenError::Foreign { .. }), "{e:?}");
        let said = format!("({counted} tables, no kanban stamp)");
        assert!(e.to_string().contains(&said), "{e}");
        assert_eq!(schema.dump(), before);
    }
}

#[test]
fn a_newer_schema_version_is_refused_untouched() {
    let schema = TestSchema::new();
    let store = schema.open();
    let task = store.create(&NewTask::titled("from the future"), 1).unwrap();
    store.claim(&task.id, 60, 2).unwrap();
    drop(store);
    schema.execute(&format!(
        "UPDATE kanban_meta SET schema_version = {}",
        SCHEMA_VERSION + 1
    ));
    let before = schema.dump();
    let e = refusal(&schema);
    match &e {
        OpenError::Newer { found, supported, .. } => {
            assert_eq!((*found, *supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
        }
        other => panic!("expected Newer, got {other:?}"),
    }
    let message = e.to_string();
    assert!(
        message.contains("upgrade kanban") && !message.contains('\n'),
        "{message}"
    );
    assert_eq!(schema.dump(), before, "row for row unchanged");
}

const PASSWORD: &str = "Sup3r-S3cret-pw";

fn assert_hidden(text: &str) {
    assert!(!text.contains(PASSWORD), "the password leaked: {text}");
}

#[test]
fn the_password_never_shows_when_the_server_is_unreachable() {
    let urls = [
        format!("postgres://kanban:{PASSWORD}@127.0.0.1:1/test"),
        format!("postgres://kanban@127.0.0.1:1/test?password={PASSWORD}"),
        format!("host=127.0.0.1 port=1 user=kanban password={PASSWORD} dbname=test"),
    ];
    for url in urls {
        let e = PgStore::open(&url, &Options::default()).expect_err("nothing listens on port 1");
        let (shown, debug) = (e.to_string(), format!("{e:?}"));
        assert!(matches!(e, OpenError::Connect { .. }), "{debug}");
        assert_hidden(&shown);
        assert_hidden(&debug);
        assert!(shown.contains("***") && shown.contains("127.0.0.1"), "{shown}");
        assert!(!shown.contains('\n'), "one line: {shown}");
    }
}

#[test]
fn the_password_never_shows_in_debug_or_storage_errors() {
    let schema = TestSchema::new();
    // The test server trusts local connections, so any password is accepted.
    let base = url();
    let Some((scheme, rest)) = base.split_once("://") else {
        panic!("KANBAN_TEST_DATABASE_URL must be a postgres:// URL to test redaction, got another form");
    };
    let (user, host) = match rest.split_once('@') {
        Some((user_info, host)) => (user_info.split(':').next().unwrap_or_default(), host),
        None => ("postgres", rest),
    };
    let with_password = format!("{scheme}://{user}:{PASSWORD}@{host}");
    let store = PgStore::open(&with_password, &schema.options()).expect("open with a password");
    assert_hidden(&format!("{store:?}"));
    assert_hidden(store.target());
    schema.execute("DROP TABLE task_comments, task_events, task_links, task_runs, tasks CASCADE");
    let e = store
        .create(&NewTask::titled("nowhere to go"), 1)
        .expect_err("the tables are gone");
    assert_hidden(&e.to_string());
    assert!(e.to_string().contains("***"), "{e}");
}

#[test]
fn the_url_can_name_the_schema_through_search_path() {
    let schema = TestSchema::new();
    let base = url();
    let separator = if base.contains('?') { '&' } else { '?' };
    let with_path = format!("{base}{separator}options=-csearch_path%3D{}", schema.name);
    let store = PgStore::open(&with_path, &Options::default()).expect("open through the URL");
    store.create(&NewTask::titled("placed by the URL"), 1).unwrap();
    assert_eq!(
        stamp(&schema),
        vec![format!("({APPLICATION_ID},{SCHEMA_VERSION})")]
    );
    let tasks = schema
        .dump()
        .into_iter()
        .find(|(table, _)| table == "tasks")
        .unwrap()
        .1;
    assert_eq!(tasks.len(), 1);
}

#[test]
fn a_malformed_url_is_refused_in_one_line_without_its_password() {
    let url = format!("postgres://kanban:{PASSWORD}@127.0.0.1:not-a-port/test");
    let e = PgStore::open(&url, &Options::default()).expect_err("the port is not a number");
    assert!(matches!(e, OpenError::Url { .. }), "{e:?}");
    let shown = e.to_string();
    assert_hidden(&shown);
    assert_hidden(&format!("{e:?}"));
    assert!(
        shown.contains("not a usable database URL") && !shown.contains('\n'),
        "{shown}"
    );
}
