//! The D1 tables of the store's storage, one file each, every statement
//! with named parameters ([`crate::storage::sql`]) next to the rows it
//! reads or writes:
//!
//! | module | table |
//! |---|---|
//! | [`packs`] | `packs`, `pack_users`: the R2 objects holding chunks, and who uses them |
//! | [`chunks`] | `chunks`: one row per unique chunk, a hint for not storing it again |
//! | [`ends`] | `body_ends`: the end state of bodies of several chunks |
//! | [`pushes`] | `pushes`, `push_parts`, and storing a pushed packet |
//! | [`refs`] | `refs`, `ref_history`: names for packets, and the packets each has named |

pub mod chunks;
pub mod ends;
pub mod packs;
pub mod pushes;
pub mod refs;

use wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, Result};

use super::sql::numbered;

/// Statements per D1 batch.
pub const STATEMENTS_PER_BATCH: usize = 200;
/// Items per JSON array bound to one parameter (`json_each`): D1 binds at
/// most 100 parameters, so long lists go as one JSON text, kept well under
/// D1's largest value.
pub const JSON_ITEMS: usize = 4000;

/// A statement with named parameters.
pub struct Sql {
    text: std::borrow::Cow<'static, str>,
    values: Vec<(&'static str, JsValue)>,
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
    pub fn bind(mut self, name: &'static str, value: JsValue) -> Sql {
        self.values.push((name, value));
        self
    }

    /// The prepared statement.
    pub fn prepare(self, db: &D1Database) -> Result<D1PreparedStatement> {
        let (text, names) = numbered(&self.text);
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

/// Bytes from a `hex(…)` column.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
