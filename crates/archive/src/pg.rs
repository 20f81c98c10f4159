//! The PostgreSQL backend (`--db postgres://USER:PASSWORD@HOST/DB`): one archive shared by many hosts
//! and people. Placeholders `?N` become `$N`; values are bound with the types the server expects for
//! each parameter (so a NULL or a count goes in as the column's type); the schema version lives in a
//! one-row table, and migrations take an advisory lock so two landspeeds opening a new archive at once
//! cannot both migrate it. A server that restarts (or a connection that drops) between statements is
//! reconnected to with back-off, and the statement is sent again: it never ran, since the server
//! closed the connection before it (a sweep stores every cell once through a restart).

use crate::backend::{Backend, Val};
use crate::ArchiveError;
use postgres::types::{ToSql, Type};
use postgres::{Client, NoTls};

pub(crate) struct Postgres {
    client: Client,
    url: String,
}

/// Waits between reconnection attempts: about 30 s in all, longer than a server's restart.
const BACKOFF_MS: [u64; 8] = [100, 250, 500, 1000, 2000, 4000, 8000, 14000];

/// Any number that identifies landspeed's migration lock.
const LOCK_KEY: i64 = 0x6c61_6e64_7370_6564;

impl Postgres {
    pub(crate) fn connect(url: &str) -> Result<Postgres, ArchiveError> {
        let client = Client::connect(url, NoTls).map_err(|err| ArchiveError::Postgres {
            url: redact(url),
            err,
        })?;
        Ok(Postgres {
            client,
            url: url.to_string(),
        })
    }

    /// Connects again after the connection was closed, waiting longer between attempts.
    fn reconnect(&mut self) -> Result<(), ArchiveError> {
        let mut last = None;
        for ms in BACKOFF_MS {
            std::thread::sleep(std::time::Duration::from_millis(ms));
            match Client::connect(&self.url, NoTls) {
                Ok(c) => {
                    self.client = c;
                    return Ok(());
                }
                Err(err) => last = Some(err),
            }
        }
        Err(ArchiveError::Postgres {
            url: redact(&self.url),
            err: last.expect("at least one attempt"),
        })
    }
}

/// An error that says the connection is over, though the client may not have seen its end yet: the
/// server closed it or the socket failed, or the server said it is going (a restart's or an
/// administrator's "terminating connection", SQLSTATE class 57P) or the connection broke (class
/// 08). Under load the server's last words can arrive before its close does.
fn server_gone(e: &postgres::Error) -> bool {
    let code = e.code().map(|c| c.code());
    e.is_closed()
        || code.is_some_and(|c| c.starts_with("57P") || c.starts_with("08"))
        || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
}

/// The URL without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{}@{}", &url[..s + 3], user, &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

fn dollar(sql: &str) -> String {
    sql.replace('?', "$")
}

fn bind(v: &Val, ty: &Type) -> Result<Box<dyn ToSql + Sync>, ArchiveError> {
    Ok(match (v, ty) {
        (Val::Null, t) if *t == Type::INT8 => Box::new(None::<i64>),
        (Val::Null, t) if *t == Type::INT4 => Box::new(None::<i32>),
        (Val::Null, t) if *t == Type::FLOAT8 => Box::new(None::<f64>),
        (Val::Null, _) => Box::new(None::<String>),
        (Val::Int(i), t) if *t == Type::INT4 => Box::new(*i as i32),
        (Val::Int(i), t) if *t == Type::FLOAT8 => Box::new(*i as f64),
        (Val::Int(i), _) => Box::new(*i),
        (Val::Real(r), _) => Box::new(*r),
        (Val::Text(s), _) => Box::new(s.clone()),
    })
}

fn value(row: &postgres::Row, i: usize) -> Result<Val, ArchiveError> {
    let ty = row.columns()[i].type_().clone();
    let v = if ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(i)?.map(Val::Int)
    } else if ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(i)?.map(|x| Val::Int(x as i64))
    } else if ty == Type::FLOAT8 {
        row.try_get::<_, Option<f64>>(i)?.map(Val::Real)
    } else if ty == Type::FLOAT4 {
        row.try_get::<_, Option<f32>>(i)?.map(|x| Val::Real(x as f64))
    } else {
        row.try_get::<_, Option<String>>(i)?.map(Val::Text)
    };
    Ok(v.unwrap_or(Val::Null))
}

impl Postgres {
    /// Runs one statement; on a connection the server closed (a restart), reconnects and runs it
    /// once more.
    fn run(&mut self, sql: &str, args: &[Val]) -> Result<Vec<postgres::Row>, ArchiveError> {
        match self.run_once(sql, args) {
            Err(ArchiveError::Pg(e)) if self.client.is_closed() || server_gone(&e) => {
                self.reconnect()?;
                self.run_once(sql, args)
            }
            other => other,
        }
    }

    fn run_once(&mut self, sql: &str, args: &[Val]) -> Result<Vec<postgres::Row>, ArchiveError> {
        let st = self.client.prepare(&dollar(sql))?;
        let bound: Vec<Box<dyn ToSql + Sync>> = args
            .iter()
            .zip(st.params())
            .map(|(v, t)| bind(v, t))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|b| b.as_ref()).collect();
        Ok(self.client.query(&st, &refs)?)
    }
}

impl Backend for Postgres {
    fn execute(&mut self, sql: &str, args: &[Val]) -> Result<(), ArchiveError> {
        self.run(sql, args)?;
        Ok(())
    }

    fn insert(&mut self, sql: &str, args: &[Val]) -> Result<i64, ArchiveError> {
        let rows = self.run(&format!("{sql} RETURNING id"), args)?;
        let row = rows
            .first()
            .ok_or_else(|| ArchiveError::Type("INSERT returned no id".into()))?;
        value(row, 0)?.int()
    }

    fn query(&mut self, sql: &str, args: &[Val]) -> Result<Vec<Vec<Val>>, ArchiveError> {
        self.run(sql, args)?
            .iter()
            .map(|r| (0..r.len()).map(|i| value(r, i)).collect())
            .collect()
    }

    fn version(&mut self) -> Result<i64, ArchiveError> {
        let exists = self.client.query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'landspeed_schema'
               AND table_schema = current_schema()",
            &[],
        )?;
        if exists.get::<_, i64>(0) == 0 {
            return Ok(0);
        }
        let row = self
            .client
            .query_opt("SELECT version FROM landspeed_schema", &[])?;
        Ok(row.map_or(0, |r| r.get(0)))
    }

    fn migrate(&mut self, steps: &[&str], _from: i64) -> Result<(), ArchiveError> {
        let mut tx = self.client.transaction()?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS landspeed_schema (version BIGINT NOT NULL)")?;
        // Read again under the lock: another process may have migrated meanwhile.
        let found: i64 = tx
            .query_opt("SELECT version FROM landspeed_schema", &[])?
            .map_or(0, |r| r.get(0));
        if found == 0 {
            tx.execute("DELETE FROM landspeed_schema", &[])?;
            tx.execute("INSERT INTO landspeed_schema (version) VALUES (0)", &[])?;
        }
        for (i, step) in steps.iter().enumerate().skip(found as usize) {
            tx.batch_execute(step)?;
            tx.execute("UPDATE landspeed_schema SET version = $1", &[&(i as i64 + 1)])?;
        }
        tx.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_stay_out_of_messages() {
        assert_eq!(
            super::redact("postgres://ops:s3cret@db.example/landspeed"),
            "postgres://ops@db.example/landspeed"
        );
        assert_eq!(
            super::redact("postgres://db.example/x"),
            "postgres://db.example/x"
        );
        assert_eq!(super::dollar("a = ?1 AND b = ?2"), "a = $1 AND b = $2");
    }
}
