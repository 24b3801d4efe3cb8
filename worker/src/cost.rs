//! What requests cost in D1 and R2 (docs/worker.md, "Costs"), as the
//! metered bindings count them (`worker/js/meter.mjs`, opened by `meter`):
//! one table of counters, the `Pillbox-Cost` header's value and the JSON of
//! `GET /v1/bench/costs`.

/// One counter: its name in the meter (and the JSON), its key in the
/// header, and whether it is a time in milliseconds (else a count).
pub struct Field {
    /// The meter's (and the JSON's) name.
    pub name: &'static str,
    /// The header's key.
    pub key: &'static str,
    /// Milliseconds (written with one decimal), not a count.
    pub millis: bool,
}

const fn count(name: &'static str, key: &'static str) -> Field {
    Field {
        name,
        key,
        millis: false,
    }
}

/// Every counter, in the header's order.
pub const FIELDS: [Field; 12] = [
    // D1 round trips: a statement run alone, a batch, an exec.
    count("d1_calls", "d1"),
    // D1 statements run (each statement of a batch counts).
    count("d1_queries", "d1q"),
    count("rows_read", "rr"),
    count("rows_written", "rw"),
    // The time the database spent on them (D1's `meta.duration`).
    Field {
        name: "d1_ms",
        key: "d1ms",
        millis: true,
    },
    // R2 operations Cloudflare bills as class A (put, list, multipart
    // create, part, complete) and class B (get, head).
    count("r2_class_a", "r2a"),
    count("r2_class_b", "r2b"),
    // R2 deletes (free), and the bytes they freed.
    count("r2_deletes", "r2d"),
    count("bytes_put", "put"),
    count("bytes_deleted", "del"),
    count("bytes_read", "get"),
    // Wall time with a D1 or R2 call in flight.
    Field {
        name: "wait_ms",
        key: "wait",
        millis: true,
    },
];

/// Counter values, in [`FIELDS`]' order.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost(pub [f64; FIELDS.len()]);

impl Cost {
    /// The counters read by name (a missing one is 0).
    pub fn read(value: impl Fn(&str) -> Option<f64>) -> Cost {
        let mut out = [0.0; FIELDS.len()];
        for (slot, field) in out.iter_mut().zip(FIELDS.iter()) {
            *slot = value(field.name).filter(|v| v.is_finite()).unwrap_or(0.0);
        }
        Cost(out)
    }

    /// The value of the counter named `name`.
    pub fn get(&self, name: &str) -> Option<f64> {
        FIELDS
            .iter()
            .position(|f| f.name == name)
            .map(|i| self.0[i])
    }

    /// The `Pillbox-Cost` header's value, the request's wall time so far
    /// last: `d1=2;d1q=3;rr=40;…;wait=1.5;ms=12.0`.
    pub fn header(&self, wall_ms: f64) -> String {
        let mut parts: Vec<String> = FIELDS
            .iter()
            .zip(self.0.iter())
            .map(|(f, v)| format_value(f.key, f.millis, *v))
            .collect();
        parts.push(format_value("ms", true, wall_ms));
        parts.join(";")
    }

    /// The counters as a JSON object (names of [`FIELDS`]).
    pub fn to_json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        for (f, v) in FIELDS.iter().zip(self.0.iter()) {
            let value = if f.millis {
                serde_json::json!((v * 10.0).round() / 10.0)
            } else {
                serde_json::json!(*v as u64)
            };
            map.insert(f.name.to_string(), value);
        }
        serde_json::Value::Object(map)
    }
}

fn format_value(key: &str, millis: bool, v: f64) -> String {
    if millis {
        format!("{key}={v:.1}")
    } else {
        format!("{key}={}", v as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_lists_every_counter_in_order_then_the_wall_time() {
        let cost = Cost::read(|name| match name {
            "d1_calls" => Some(2.0),
            "d1_queries" => Some(3.0),
            "rows_read" => Some(40.0),
            "rows_written" => Some(6.0),
            "r2_class_a" => Some(1.0),
            "bytes_put" => Some(12345.0),
            "wait_ms" => Some(1.26),
            "bytes_read" => Some(f64::NAN),
            _ => None,
        });
        assert_eq!(
            cost.header(12.04),
            "d1=2;d1q=3;rr=40;rw=6;d1ms=0.0;r2a=1;r2b=0;r2d=0;put=12345;del=0;get=0;wait=1.3;ms=12.0"
        );
        assert_eq!(cost.get("rows_read"), Some(40.0));
        assert_eq!(cost.get("nothing"), None);
        let json = cost.to_json();
        assert_eq!(json["bytes_put"], 12345);
        assert_eq!(json["wait_ms"], 1.3);
        assert_eq!(json.as_object().unwrap().len(), FIELDS.len());
    }

    #[test]
    fn names_and_keys_are_unique() {
        for (i, a) in FIELDS.iter().enumerate() {
            for b in &FIELDS[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.key, b.key);
            }
            assert_ne!(a.key, "ms");
        }
    }
}
