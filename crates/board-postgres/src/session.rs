//! One database session used from blocking code: a tokio-postgres client on a runtime of
//! the session's own, polled only while a call waits on it.
//!
//! The blocking `postgres` crate sends one statement and waits for its answer before the
//! next can go. A board's write is a handful of statements, each a round trip, and on
//! this machine a round trip costs as much as a quarter of a commit's flush. Statements
//! that do not depend on each other's results can go together: [`Session::pipeline`]
//! sends them in one write and reads their answers in order, so a transaction's `BEGIN`
//! rides with its first statement and its `COMMIT` with its last. The server runs them
//! one after the other exactly as if each had waited for the one before (each statement
//! still takes its own snapshot), so nothing a statement decides on changes.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::future::try_join_all;
use futures_util::TryStreamExt;
use postgres::{Error, Row, Statement};
use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinHandle;
use tokio_postgres::{Client, Config, NoTls, ToStatement};

use crate::tx::Params;

/// How long a closing session waits for its goodbye to the server to be sent.
const CLOSE_WAIT: Duration = Duration::from_millis(200);

/// One statement of a [`Session::pipeline`].
#[derive(Clone, Copy)]
pub(crate) enum Step<'a> {
    /// Statements without parameters or rows, in the simple protocol (`BEGIN`, `COMMIT`).
    Simple(&'a str),
    /// A prepared statement and its parameters, answered with its rows.
    Query(&'a Statement, Params<'a>),
    /// A prepared statement and its parameters, answered with the rows it changed.
    Execute(&'a Statement, Params<'a>),
}

/// What a [`Step`] was answered.
pub(crate) enum Answer {
    Rows(Vec<Row>),
    Count(u64),
}

impl Answer {
    /// The rows of a query (none for any other step).
    pub fn rows(self) -> Vec<Row> {
        match self {
            Answer::Rows(rows) => rows,
            Answer::Count(_) => Vec::new(),
        }
    }

    /// The rows an executed statement changed (0 for any other step).
    pub fn count(self) -> u64 {
        match self {
            Answer::Count(n) => n,
            Answer::Rows(_) => 0,
        }
    }
}

pub(crate) struct Session {
    runtime: Runtime,
    /// Taken only when the session is dropped, to close it.
    client: Option<Client>,
    /// The task reading and writing the socket; it ends when the session closes.
    connection: Option<JoinHandle<()>>,
}

type Answering<'a> = Pin<Box<dyn Future<Output = Result<Answer, Error>> + 'a>>;

impl Session {
    pub fn connect(config: &Config) -> Result<Session, String> {
        let runtime = Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a database session's runtime: {e}"))?;
        let (client, connection) = runtime
            .block_on(config.connect(NoTls))
            .map_err(|e| crate::describe(&e))?;
        // A failed connection ends the task; the client then reports itself closed,
        // and each call the error.
        let connection = runtime.spawn(async move {
            let _ = connection.await;
        });
        Ok(Session {
            runtime,
            client: Some(client),
            connection: Some(connection),
        })
    }

    fn client(&self) -> &Client {
        self.client.as_ref().expect("the client is taken only on drop")
    }

    fn wait<T>(&self, answer: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
        self.runtime.block_on(answer)
    }

    pub fn is_closed(&self) -> bool {
        self.client().is_closed()
    }

    pub fn batch_execute(&mut self, sql: &str) -> Result<(), Error> {
        self.wait(self.client().batch_execute(sql))
    }

    pub fn prepare(&mut self, sql: &str) -> Result<Statement, Error> {
        self.wait(self.client().prepare(sql))
    }

    pub fn execute<T>(&mut self, statement: &T, params: Params<'_>) -> Result<u64, Error>
    where
        T: ?Sized + ToStatement,
    {
        self.wait(self.client().execute(statement, params))
    }

    pub fn query<T>(&mut self, statement: &T, params: Params<'_>) -> Result<Vec<Row>, Error>
    where
        T: ?Sized + ToStatement,
    {
        self.wait(self.client().query(statement, params))
    }

    pub fn query_one<T>(&mut self, statement: &T, params: Params<'_>) -> Result<Row, Error>
    where
        T: ?Sized + ToStatement,
    {
        self.wait(self.client().query_one(statement, params))
    }

    /// Runs `sql` and hands `each` its rows one at a time as the server sends them,
    /// until `each` says stop (`false`): the client holds one row at a time, and the
    /// connection's bounded channel holds back the rest. `each` runs outside the
    /// runtime, so it may use other sessions.
    pub fn each_row(
        &mut self,
        sql: &str,
        params: Params<'_>,
        mut each: impl FnMut(&Row) -> bool,
    ) -> Result<(), Error> {
        let rows = self.wait(self.client().query_raw(sql, params.iter().copied()))?;
        let mut rows = std::pin::pin!(rows);
        while let Some(row) = self.wait(rows.try_next())? {
            if !each(&row) {
                break;
            }
        }
        Ok(())
    }

    /// Sends every step at once and waits for all their answers, in order. The first
    /// failure is returned; the server skips nothing after it, so in a transaction the
    /// later steps fail too (the transaction is aborted; a `COMMIT` rolls it back) and
    /// outside one they still run.
    pub fn pipeline(&mut self, steps: &[Step<'_>]) -> Result<Vec<Answer>, Error> {
        let client = self.client();
        let answers = steps.iter().map(|&step| -> Answering<'_> {
            match step {
                Step::Simple(sql) => Box::pin(async move {
                    client.batch_execute(sql).await?;
                    Ok(Answer::Count(0))
                }),
                Step::Query(statement, params) => {
                    Box::pin(async move { client.query(statement, params).await.map(Answer::Rows) })
                }
                Step::Execute(statement, params) => {
                    Box::pin(async move { client.execute(statement, params).await.map(Answer::Count) })
                }
            }
        });
        // The requests are sent in the order the futures are first polled, which is
        // their order here.
        self.wait(try_join_all(answers))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Dropping the client tells the connection to say goodbye and close; run it
        // until it has, briefly (a silent server costs no more than the wait).
        drop(self.client.take());
        if let Some(connection) = self.connection.take() {
            let _ = self
                .runtime
                .block_on(async { tokio::time::timeout(CLOSE_WAIT, connection).await });
        }
    }
}
