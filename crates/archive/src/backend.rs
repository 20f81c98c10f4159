//! The two stores behind one archive: the embedded SQLite file (the default) and a PostgreSQL server
//! shared by many hosts and people (`--db postgres://...`). The archive's queries are written once, with
//! `?N` placeholders and portable SQL, against this small interface; each backend binds values its own
//! way, turns rows into `Val`s, keeps its schema version where its database keeps such things, and runs
//! the migration steps of its dialect (schema.rs) in one transaction.

use crate::ArchiveError;

/// A value going into or coming out of a query.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl Val {
    pub(crate) fn int(&self) -> Result<i64, ArchiveError> {
        match self {
            Val::Int(i) => Ok(*i),
            Val::Real(r) => Ok(*r as i64),
            v => Err(ArchiveError::Type(format!("expected an integer, got {v:?}"))),
        }
    }
    pub(crate) fn opt_int(&self) -> Result<Option<i64>, ArchiveError> {
        match self {
            Val::Null => Ok(None),
            v => v.int().map(Some),
        }
    }
    pub(crate) fn real(&self) -> Result<f64, ArchiveError> {
        match self {
            Val::Real(r) => Ok(*r),
            Val::Int(i) => Ok(*i as f64),
            v => Err(ArchiveError::Type(format!("expected a number, got {v:?}"))),
        }
    }
    pub(crate) fn opt_real(&self) -> Result<Option<f64>, ArchiveError> {
        match self {
            Val::Null => Ok(None),
            v => v.real().map(Some),
        }
    }
    pub(crate) fn text(&self) -> Result<String, ArchiveError> {
        match self {
            Val::Text(s) => Ok(s.clone()),
            v => Err(ArchiveError::Type(format!("expected text, got {v:?}"))),
        }
    }
    pub(crate) fn opt_text(&self) -> Result<Option<String>, ArchiveError> {
        match self {
            Val::Null => Ok(None),
            v => v.text().map(Some),
        }
    }
}

impl From<i64> for Val {
    fn from(v: i64) -> Val {
        Val::Int(v)
    }
}
impl From<u32> for Val {
    fn from(v: u32) -> Val {
        Val::Int(v as i64)
    }
}
impl From<f64> for Val {
    fn from(v: f64) -> Val {
        Val::Real(v)
    }
}
impl From<&str> for Val {
    fn from(v: &str) -> Val {
        Val::Text(v.into())
    }
}
impl From<String> for Val {
    fn from(v: String) -> Val {
        Val::Text(v)
    }
}
impl<T: Into<Val>> From<Option<T>> for Val {
    fn from(v: Option<T>) -> Val {
        v.map_or(Val::Null, Into::into)
    }
}

/// A store the archive can run its queries on.
pub(crate) trait Backend: Send {
    /// A statement with no rows back.
    fn execute(&mut self, sql: &str, args: &[Val]) -> Result<(), ArchiveError>;
    /// An INSERT; returns the new row's `id`.
    fn insert(&mut self, sql: &str, args: &[Val]) -> Result<i64, ArchiveError>;
    fn query(&mut self, sql: &str, args: &[Val]) -> Result<Vec<Vec<Val>>, ArchiveError>;
    /// The schema version the store is at (0: empty).
    fn version(&mut self) -> Result<i64, ArchiveError>;
    /// Runs `steps[from..]` and records each new version, all in one transaction.
    fn migrate(&mut self, steps: &[&str], from: i64) -> Result<(), ArchiveError>;
}

/// The embedded SQLite file.
pub(crate) struct Sqlite(pub rusqlite::Connection);

fn to_sqlite(v: &Val) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    match v {
        Val::Null => V::Null,
        Val::Int(i) => V::Integer(*i),
        Val::Real(r) => V::Real(*r),
        Val::Text(s) => V::Text(s.clone()),
    }
}

fn from_sqlite(v: rusqlite::types::ValueRef<'_>) -> Val {
    use rusqlite::types::ValueRef as R;
    match v {
        R::Null => Val::Null,
        R::Integer(i) => Val::Int(i),
        R::Real(r) => Val::Real(r),
        R::Text(t) | R::Blob(t) => Val::Text(String::from_utf8_lossy(t).into_owned()),
    }
}

impl Backend for Sqlite {
    fn execute(&mut self, sql: &str, args: &[Val]) -> Result<(), ArchiveError> {
        self.0
            .execute(sql, rusqlite::params_from_iter(args.iter().map(to_sqlite)))?;
        Ok(())
    }

    fn insert(&mut self, sql: &str, args: &[Val]) -> Result<i64, ArchiveError> {
        self.execute(sql, args)?;
        Ok(self.0.last_insert_rowid())
    }

    fn query(&mut self, sql: &str, args: &[Val]) -> Result<Vec<Vec<Val>>, ArchiveError> {
        let mut st = self.0.prepare(sql)?;
        let n = st.column_count();
        let rows = st.query_map(rusqlite::params_from_iter(args.iter().map(to_sqlite)), |r| {
            (0..n).map(|i| r.get_ref(i).map(from_sqlite)).collect()
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn version(&mut self) -> Result<i64, ArchiveError> {
        Ok(self.0.query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    fn migrate(&mut self, steps: &[&str], from: i64) -> Result<(), ArchiveError> {
        let tx = self.0.transaction()?;
        for (i, step) in steps.iter().enumerate().skip(from as usize) {
            tx.execute_batch(step)?;
            tx.pragma_update(None, "user_version", i as i64 + 1)?;
        }
        tx.commit()?;
        Ok(())
    }
}
