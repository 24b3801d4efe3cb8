//! What a push's requests may carry (docs/transfer.md, "Push" and
//! "Decoding limits"), pure: a create's query (the packet, its labels, its
//! bases), the decoders' limits, and the caps of a create body and of a
//! part as sent, with their refusals.

use pillbox_wire::recipes::{PushLimits, RecipeLimits};
use pillbox_wire::ApiCode;

use packet_core::Digest;

use crate::caps::{self, Caps};
use crate::config::Config;
use crate::problem::Problem;
pub use crate::query::MAX_BASES;
use crate::query::{upload_labels, Query};

/// `POST /v1/pushes?digest=…&size=…[&base=…][&label=…]`, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateQuery {
    /// The packet's digest.
    pub digest: Digest,
    /// Its size, as the client states it (checked against the manifest).
    pub size: u64,
    /// The labels to attach, sorted, each once.
    pub labels: Vec<String>,
    /// The bases named (at most [`MAX_BASES`]).
    pub bases: Vec<Digest>,
}

impl CreateQuery {
    /// Reads a create's query: 400 on a digest, size, label or base that
    /// is not one (in that order).
    pub fn parse(query: &Query) -> Result<CreateQuery, Problem> {
        let digest = query
            .get("digest")
            .unwrap_or("")
            .parse::<Digest>()
            .map_err(Problem::from_packet_error_400)?;
        let size = query
            .get("size")
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|&s| s > 0)
            .ok_or_else(|| {
                Problem::bad_request(
                    ApiCode::SizeInvalid,
                    "size= is the packet's size in bytes, a positive integer",
                )
            })?;
        let labels = upload_labels(query.all("label"))?;
        let named = query.all("base");
        if named.len() > MAX_BASES {
            return Err(Problem::bad_request(
                ApiCode::BasesInvalid,
                format!("a push names at most {MAX_BASES} bases"),
            ));
        }
        let bases = named
            .iter()
            .map(|b| b.parse::<Digest>())
            .collect::<Result<_, _>>()
            .map_err(Problem::from_packet_error_400)?;
        Ok(CreateQuery {
            digest,
            size,
            labels,
            bases,
        })
    }
}

/// The limits of a create body's decoder: its recipes, then its batch.
pub fn limits(config: &Config) -> PushLimits {
    PushLimits {
        recipes: RecipeLimits::DEFAULT,
        batch: config.batch_limits(),
    }
}

/// A push's create body: its recipes and a chunk batch, at most
/// [`PushLimits::max_body_bytes`] as sent (413 `push_too_large`); what
/// its frames decode to is held by the batch's limits.
pub fn create_caps(config: &Config) -> Caps {
    Caps {
        sent: limits(config).max_body_bytes(),
        refuse: |most| {
            Problem::new(
                ApiCode::PushTooLarge,
                format!("a push's body has at most {} as sent", caps::bytes(most)),
                "send fewer frames in the body and the rest as parts (the push's part_limits)",
            )
        },
    }
}

/// A part: a chunk batch within the part limits, table included, as sent
/// (413 `part_too_large`); what its frames decode to is held by the
/// batch's limits.
pub fn part_caps(config: &Config) -> Caps {
    Caps {
        sent: config.batch_limits().max_batch_bytes(),
        refuse: |most| {
            Problem::new(
                ApiCode::PartTooLarge,
                format!("a part has at most {most} bytes as sent"),
                "send fewer chunks per part (part_limits.max_bytes)",
            )
        },
    }
}

/// The recipes document of `POST /v1/pushes/{id}/recipes`: at most
/// [`RecipeLimits::DEFAULT`]'s bytes (413 `body_too_large`).
pub fn recipes_caps() -> Caps {
    Caps::bytes(RecipeLimits::DEFAULT.max_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> Query {
        Query::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    fn config() -> Config {
        Config::from_vars(|_| None)
    }

    fn code(p: &Problem) -> (u16, &str) {
        (p.status, p.error.code())
    }

    #[test]
    fn a_create_names_a_packet_its_size_labels_and_bases() {
        let digest = Digest::of(b"packet.json");
        let base = Digest::of(b"base");
        let q = query(&[
            ("digest", &digest.to_string()),
            ("size", "4096"),
            ("label", "b"),
            ("label", "a"),
            ("label", "b"),
            ("base", &base.to_string()),
        ]);
        assert_eq!(
            CreateQuery::parse(&q).unwrap(),
            CreateQuery {
                digest,
                size: 4096,
                labels: vec!["a".into(), "b".into()],
                bases: vec![base],
            }
        );
    }

    #[test]
    fn a_create_is_refused_in_the_order_of_its_query() {
        let digest = Digest::of(b"packet.json").to_string();
        let refused = |pairs: &[(&str, &str)]| CreateQuery::parse(&query(pairs)).unwrap_err();
        // No digest comes before a bad size.
        assert_eq!(refused(&[("size", "0")]).status, 400);
        for size in ["0", "-1", "x", ""] {
            let p = refused(&[("digest", &digest), ("size", size)]);
            assert_eq!(code(&p), (400, "size_invalid"), "size={size}");
        }
        let p = refused(&[("digest", &digest)]);
        assert_eq!(code(&p), (400, "size_invalid"));
        let base = Digest::of(b"base").to_string();
        let mut many = vec![("digest", digest.as_str()), ("size", "1")];
        many.extend(std::iter::repeat_n(("base", base.as_str()), MAX_BASES));
        assert!(CreateQuery::parse(&query(&many)).is_ok());
        many.push(("base", base.as_str()));
        assert_eq!(code(&refused(&many)), (400, "bases_invalid"));
        let p = refused(&[("digest", &digest), ("size", "1"), ("base", "nope")]);
        assert_eq!(p.status, 400);
        // Too many bases is told before a base that is not a digest.
        many.push(("base", "nope"));
        assert_eq!(code(&refused(&many)), (400, "bases_invalid"));
    }

    #[test]
    fn caps_hold_a_create_body_and_a_part_as_sent() {
        let config = config();
        let create = create_caps(&config);
        assert_eq!(create.sent, limits(&config).max_body_bytes());
        assert_eq!(code(&(create.refuse)(create.sent)), (413, "push_too_large"));
        let part = part_caps(&config);
        assert_eq!(part.sent, config.batch_limits().max_batch_bytes());
        assert_eq!(code(&(part.refuse)(part.sent)), (413, "part_too_large"));
        // A create body carries recipes beside a part's batch.
        assert!(create.sent > part.sent);
        let recipes = recipes_caps();
        assert_eq!(recipes.sent, RecipeLimits::DEFAULT.max_bytes);
        assert_eq!(
            code(&(recipes.refuse)(recipes.sent)),
            (413, "body_too_large")
        );
    }
}
