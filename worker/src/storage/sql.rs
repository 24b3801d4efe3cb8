//! Named SQL parameters for D1, which binds only numbered ones: a
//! statement names its parameters (`:digest`), next to the row it writes,
//! and [`numbered`] turns them into `?1`, `?2`, … in the order of their
//! first use, with the names in that order for binding.

/// `sql` with `:name` parameters numbered, and the names by number. Text in
/// single quotes is left as it is.
pub fn numbered(sql: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(sql.len());
    let mut names: Vec<String> = Vec::new();
    let mut chars = sql.char_indices().peekable();
    let mut quoted = false;
    while let Some((i, ch)) = chars.next() {
        if ch == '\'' {
            quoted = !quoted;
            out.push(ch);
            continue;
        }
        if ch == ':' && chars.peek().is_some_and(|(_, n)| *n == ':') {
            out.push_str("::");
            chars.next();
            continue;
        }
        let starts_name = ch == ':'
            && !quoted
            && chars
                .peek()
                .is_some_and(|(_, n)| n.is_ascii_alphabetic() || *n == '_');
        if !starts_name {
            out.push(ch);
            continue;
        }
        let mut end = i + 1;
        while let Some(&(j, n)) = chars.peek() {
            if n.is_ascii_alphanumeric() || n == '_' {
                end = j + n.len_utf8();
                chars.next();
            } else {
                break;
            }
        }
        let name = &sql[i + 1..end];
        let number = match names.iter().position(|n| n == name) {
            Some(k) => k + 1,
            None => {
                names.push(name.to_string());
                names.len()
            }
        };
        out.push('?');
        out.push_str(&number.to_string());
    }
    (out, names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_numbers_in_order_of_first_use() {
        let (sql, names) = numbered(
            "INSERT INTO t (a, b) SELECT :digest, :size WHERE x = ':not' AND y = :digest AND z = :size_2",
        );
        assert_eq!(
            sql,
            "INSERT INTO t (a, b) SELECT ?1, ?2 WHERE x = ':not' AND y = ?1 AND z = ?3"
        );
        assert_eq!(names, ["digest", "size", "size_2"]);
        assert_eq!(numbered("SELECT 1").1, Vec::<String>::new());
        assert_eq!(numbered("a::b").0, "a::b");
    }
}
