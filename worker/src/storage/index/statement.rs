//! Statements with named parameters ([`crate::storage::sql`]) prepared for
//! D1, the values they bind, conditions put together at run time, batches,
//! and the two values D1 and the runtime make: the time and fresh ids.

use std::borrow::Cow;

use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, Result};

use crate::storage::sql::numbered;

/// Statements per D1 batch.
pub const STATEMENTS_PER_BATCH: usize = 200;
/// Items per JSON array bound to one parameter (`json_each`): D1 binds at
/// most 100 parameters, so long lists go as one JSON text, kept well under
/// D1's largest value.
pub const JSON_ITEMS: usize = 4000;

/// Values by parameter name.
type Values = Vec<(Cow<'static, str>, JsValue)>;

/// A statement with named parameters.
pub struct Sql {
    text: Cow<'static, str>,
    values: Values,
}

/// A statement of `text`, its parameters named `:name`.
pub fn sql(text: &'static str) -> Sql {
    Sql {
        text: text.into(),
        values: Vec::new(),
    }
}

impl Sql {
    /// A statement put together at run time (its parameters still named).
    pub fn owned(text: String) -> Sql {
        Sql {
            text: text.into(),
            values: Vec::new(),
        }
    }

    /// Binds `:name`.
    pub fn bind(mut self, name: impl Into<Cow<'static, str>>, value: JsValue) -> Sql {
        self.values.push((name.into(), value));
        self
    }

    /// Binds the parameters of `condition`, which the text holds.
    pub fn bind_condition(mut self, condition: &Condition) -> Sql {
        self.values.extend(condition.values.iter().cloned());
        self
    }

    /// The prepared statement. A parameter with no value, or bound twice
    /// (a condition naming one of the statement's own), is an error.
    pub fn prepare(self, db: &D1Database) -> Result<D1PreparedStatement> {
        let (text, names) = numbered(&self.text);
        for (i, (name, _)) in self.values.iter().enumerate() {
            if self.values[..i].iter().any(|(k, _)| k == name) {
                return Err(worker::Error::from(format!(
                    ":{name} is bound twice in {}",
                    self.text
                )));
            }
        }
        let mut values = Vec::with_capacity(names.len());
        for n in &names {
            let v = self
                .values
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.clone())
                .ok_or_else(|| {
                    worker::Error::from(format!("no value for :{n} in {}", self.text))
                })?;
            values.push(v);
        }
        db.prepare(text).bind(&values)
    }
}

/// An SQL condition over named parameters, with their values: a guard that
/// a statement holds to, or a filter put together from a request. Its
/// names must differ from those of the statements that take it.
#[derive(Clone, Default)]
pub struct Condition {
    clauses: Vec<Cow<'static, str>>,
    values: Values,
}

impl Condition {
    /// The condition that always holds.
    pub fn always() -> Condition {
        Condition::default()
    }

    /// This condition and `clause`.
    pub fn and(mut self, clause: impl Into<Cow<'static, str>>) -> Condition {
        self.clauses.push(clause.into());
        self
    }

    /// Binds `:name`.
    pub fn bind(mut self, name: impl Into<Cow<'static, str>>, value: JsValue) -> Condition {
        self.values.push((name.into(), value));
        self
    }

    /// The condition as SQL (`1` when it always holds).
    pub fn text(&self) -> String {
        if self.clauses.is_empty() {
            String::from("1")
        } else {
            self.clauses.join(" AND ")
        }
    }
}

/// A text value.
pub fn text(s: &str) -> JsValue {
    JsValue::from_str(s)
}

/// An integer value.
pub fn int(n: u64) -> JsValue {
    JsValue::from_f64(n as f64)
}

/// A text value or NULL.
pub fn opt(s: Option<&str>) -> JsValue {
    s.map_or(JsValue::NULL, JsValue::from_str)
}

/// A BLOB value.
pub fn blob(bytes: &[u8]) -> JsValue {
    js_sys::Uint8Array::from(bytes).buffer().into()
}

/// A JSON array bound as one text value.
pub fn json<T: serde::Serialize>(items: &T) -> JsValue {
    text(&serde_json::to_string(items).unwrap_or_else(|_| "[]".into()))
}

/// Runs statements in batches (each batch a transaction).
pub async fn run_batches(db: &D1Database, mut statements: Vec<D1PreparedStatement>) -> Result<()> {
    while statements.len() > STATEMENTS_PER_BATCH {
        let rest = statements.split_off(STATEMENTS_PER_BATCH);
        db.batch(std::mem::replace(&mut statements, rest)).await?;
    }
    if !statements.is_empty() {
        db.batch(statements).await?;
    }
    Ok(())
}

/// The current time, RFC 3339 in UTC.
pub fn now() -> String {
    String::from(js_sys::Date::new_0().to_iso_string())
}

/// A fresh id (uploads, pushes, packs): 32 lowercase hex digits from
/// D1's random source.
pub async fn new_id(db: &D1Database) -> Result<String> {
    #[derive(Deserialize)]
    struct Id {
        id: String,
    }
    sql("SELECT lower(hex(randomblob(16))) AS id")
        .prepare(db)?
        .first::<Id>(None)
        .await?
        .map(|r| r.id)
        .ok_or_else(|| worker::Error::from("no random id"))
}
