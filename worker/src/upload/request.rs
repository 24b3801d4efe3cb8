//! What an upload's requests may carry (docs/worker.md, "Multipart
//! uploads"), pure: the size of a packet sent in one request, and the body
//! of `POST /v1/uploads` (the packet, its size and part size, its labels),
//! with their refusals.

use packet_core::Digest;
use pillbox_wire::{ApiCode, CreateUpload};

use crate::config::Config;
use crate::problem::Problem;
use crate::query::upload_labels;

/// 413 `upload_too_large` when a packet sent in one request
/// (`PUT /v1/packets/{digest}`) is larger than a single upload may be:
/// it goes in parts.
pub fn check_single(size: u64, config: &Config) -> Result<(), Problem> {
    if size > config.max_single_upload_bytes {
        return Err(Problem::new(
            ApiCode::UploadTooLarge,
            format!(
                "a single upload takes at most {} bytes, this one is {size}",
                config.max_single_upload_bytes
            ),
            "upload it in parts: POST /v1/uploads (see docs/worker.md)",
        ));
    }
    Ok(())
}

/// `POST /v1/uploads`'s body, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Create {
    /// The packet's digest.
    pub digest: Digest,
    /// Its size (checked with the part size by [`crate::multipart::Plan`]).
    pub size: u64,
    /// The part size asked for, if any.
    pub part_size: Option<u64>,
    /// The labels to attach, sorted, each once.
    pub labels: Vec<String>,
}

impl Create {
    /// Reads a create body: 400 on a digest or a label that is not one
    /// (in that order).
    pub fn parse(body: CreateUpload) -> Result<Create, Problem> {
        let digest = body
            .digest
            .parse::<Digest>()
            .map_err(Problem::from_packet_error_400)?;
        let labels = upload_labels(body.labels)?;
        Ok(Create {
            digest,
            size: body.size,
            part_size: body.part_size,
            labels,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000abc";

    fn body(digest: &str, labels: &[&str]) -> CreateUpload {
        CreateUpload {
            digest: digest.into(),
            size: 7 << 20,
            part_size: Some(5 << 20),
            labels: labels.iter().map(|l| l.to_string()).collect(),
        }
    }

    #[test]
    fn a_single_upload_is_refused_over_its_limit_only() {
        let config = Config::from_vars(|_| None);
        let max = config.max_single_upload_bytes;
        assert_eq!(check_single(max, &config), Ok(()));
        let err = check_single(max + 1, &config).unwrap_err();
        assert_eq!((err.status, err.error.code()), (413, "upload_too_large"));
        assert!(err
            .error
            .refusal
            .details
            .message
            .ends_with(&format!("this one is {}", max + 1)));
    }

    #[test]
    fn a_create_body_is_read_digest_first_then_labels() {
        let created = Create::parse(body(D, &["b", "a", "b"])).unwrap();
        assert_eq!(
            created,
            Create {
                digest: D.parse().unwrap(),
                size: 7 << 20,
                part_size: Some(5 << 20),
                labels: vec!["a".into(), "b".into()],
            }
        );
        let err = Create::parse(body("sha256:ABC", &["a b"])).unwrap_err();
        assert_eq!((err.status, err.error.code()), (400, "digest_syntax"));
        let err = Create::parse(body(D, &["a b"])).unwrap_err();
        assert_eq!((err.status, err.error.code()), (400, "label_invalid"));
    }
}
