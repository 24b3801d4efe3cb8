//! The API's own refusal codes: one table with each code's HTTP status and
//! meaning. The Worker builds its refusals from it and the CLI matches on
//! it. A packet refused by the store's packet-core carries packet-core's
//! [`packet_core::ErrorCode`] instead, unchanged; the two tables together
//! are every code a refusal can have, and `tests/openapi.rs` checks them
//! against `x-codes` of the document's `Problem` both ways.

use core::fmt;
use core::str::FromStr;

macro_rules! api_codes {
    ($($name:ident = $code:literal, $status:literal, $meaning:literal;)*) => {
        /// A refusal code of the API's own (not packet-core's).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ApiCode {
            $(#[doc = $meaning] $name,)*
        }

        impl ApiCode {
            /// Every code, in the table's order.
            pub const ALL: &'static [ApiCode] = &[$(ApiCode::$name,)*];

            /// The stable machine-readable code.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ApiCode::$name => $code,)*
                }
            }

            /// The HTTP status a refusal with this code has.
            pub const fn status(self) -> u16 {
                match self {
                    $(ApiCode::$name => $status,)*
                }
            }

            /// What the code means, in one line.
            pub const fn meaning(self) -> &'static str {
                match self {
                    $(ApiCode::$name => $meaning,)*
                }
            }

            /// The code named `s`, if it is one of the API's.
            pub fn from_str_code(s: &str) -> Option<ApiCode> {
                match s {
                    $($code => Some(ApiCode::$name),)*
                    _ => None,
                }
            }
        }
    };
}

api_codes! {
    BadPath = "bad_path", 400, "a `%` escape in the URL path is not two hex digits, or the path is not UTF-8 once decoded";
    BasesInvalid = "bases_invalid", 400, "more bases than a push or a chunk request may name";
    BodyInvalid = "body_invalid", 400, "no body, or a JSON body that does not match the API";
    ChunkUnknown = "chunk_unknown", 400, "a chunk asked for is not one of the packet's";
    CursorInvalid = "cursor_invalid", 400, "a cursor that no previous page gave";
    DigestPrefixInvalid = "digest_prefix_invalid", 400, "a digest prefix that is not `sha256:` and 8 to 64 lowercase hex digits";
    HarnessFilterInvalid = "harness_filter_invalid", 400, "a harness filter that is not codex, claude or opencode";
    LabelInvalid = "label_invalid", 400, "a label that is not the API's shape, or too many labels";
    LimitInvalid = "limit_invalid", 400, "a page limit out of its range";
    PartNumberInvalid = "part_number_invalid", 400, "a part number outside the upload's parts";
    PartSizeInvalid = "part_size_invalid", 400, "a part size outside the store's bounds, or one that needs too many parts";
    PartSizeMismatch = "part_size_mismatch", 400, "a part that is not exactly the size its number must have";
    PreconditionInvalid = "precondition_invalid", 400, "both If-Match and If-None-Match, or an If-None-Match other than `*`";
    RefNameInvalid = "ref_name_invalid", 400, "a ref name that is not `/`-separated segments of the allowed characters";
    SearchInvalid = "search_invalid", 400, "a search that does not name exactly one of path= and sha256=";
    SizeInvalid = "size_invalid", 400, "a packet size that is not a positive integer";
    SizeMismatch = "size_mismatch", 400, "a push whose size= is not the size its manifest makes";
    Unauthorized = "unauthorized", 401, "no bearer token";
    Forbidden = "forbidden", 403, "a bearer token the store does not know";
    ScopeMissing = "scope_missing", 403, "a token whose scopes do not allow the request";
    TokenNotConfigured = "token_not_configured", 403, "the store has no tokens configured";
    NotFound = "not_found", 404, "no such packet, ref, member, upload or push";
    NotAFile = "not_a_file", 404, "a member that is a directory or a symlink has no bytes";
    MethodNotAllowed = "method_not_allowed", 405, "the resource does not take this method";
    ManifestIncomplete = "manifest_incomplete", 409, "chunks of packet.json are neither in the push's body nor in a base";
    PacketReferenced = "packet_referenced", 409, "refs point at the packet to delete";
    PushBusy = "push_busy", 409, "the push's recipes changed while these were added";
    PushIncomplete = "push_incomplete", 409, "bodies or chunks of the push are still missing";
    RecipeConflict = "recipe_conflict", 409, "another recipe for the body was received";
    RefConflict = "ref_conflict", 409, "the ref does not hold the digest the request expects";
    UploadIncomplete = "upload_incomplete", 409, "parts of the upload are still missing";
    UploadNotAssembled = "upload_not_assembled", 409, "the store could not assemble the upload's parts";
    LengthRequired = "length_required", 411, "an upload without a Content-Length";
    BodyTooLarge = "body_too_large", 413, "a body over its route's cap";
    ChunksTooMany = "chunks_too_many", 413, "a chunk request for more chunks or bytes than one answer holds";
    PartTooLarge = "part_too_large", 413, "a push's part over the part limit";
    PushTooLarge = "push_too_large", 413, "a push's create body over its limit";
    UploadTooLarge = "upload_too_large", 413, "a single upload over its limit: send it in parts";
    EncodingUnsupported = "encoding_unsupported", 415, "a body in an encoding the route does not take";
    RangeNotSatisfiable = "range_not_satisfiable", 416, "a range outside the bytes asked for";
    ChunkBatchMagic = "chunk_batch_magic", 422, "a chunk batch that does not start with `PBCHUNK2`";
    ChunkBatchFrames = "chunk_batch_frames", 422, "a chunk batch with more frames than the limit";
    ChunkBatchFrameSize = "chunk_batch_frame_size", 422, "a frame whose raw size is 0 or over the limit";
    ChunkBatchEncoding = "chunk_batch_encoding", 422, "a frame in an encoding the format does not name";
    ChunkBatchStoredSize = "chunk_batch_stored_size", 422, "a frame whose stored size does not fit its encoding";
    ChunkBatchSize = "chunk_batch_size", 422, "frames that add up to more bytes than the limit";
    ChunkBatchTruncated = "chunk_batch_truncated", 422, "a chunk batch that ends before its table or a frame does";
    ChunkBatchTrailing = "chunk_batch_trailing", 422, "bytes after a chunk batch's last frame";
    ChunkDigestMismatch = "chunk_digest_mismatch", 422, "a frame whose bytes do not hash to its name";
    ChunkFrameInvalid = "chunk_frame_invalid", 422, "a zstd frame that does not decode to exactly its raw size";
    ChunkNotNeeded = "chunk_not_needed", 422, "a chunk the push does not need, or sent twice";
    ChunkSizeMismatch = "chunk_size_mismatch", 422, "a frame whose raw size is not its chunk's";
    ManifestChunksFirst = "manifest_chunks_first", 422, "a body's chunk before a chunk of packet.json";
    RecipeInvalid = "recipe_invalid", 422, "a recipe that does not make its body from chunks and base copies";
    RecipeNotNeeded = "recipe_not_needed", 422, "a recipe the push does not need";
    RecipesMagic = "recipes_magic", 422, "a recipes document or a push body that does not start with its magic";
    RecipesCount = "recipes_count", 422, "a count of chunks, bodies or runs over its limit";
    RecipesSize = "recipes_size", 422, "a chunk, a body or a copy of a size the format refuses";
    RecipesRun = "recipes_run", 422, "a run that is neither a chunk nor a copy";
    RecipesTruncated = "recipes_truncated", 422, "recipes that end early";
    RecipesTrailing = "recipes_trailing", 422, "bytes after the end of a recipes document";
    WholeUploadRequired = "whole_upload_required", 422, "a /1 packet, which the store takes only whole";
    ZstdWindowTooLarge = "zstd_window_too_large", 422, "a zstd frame that asks for a larger window than the store allows";
    Internal = "internal", 500, "a storage or runtime failure";
    TokensInvalid = "tokens_invalid", 500, "the store's token configuration cannot be read";
}

impl fmt::Display for ApiCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A code that is not one of the API's (it may be packet-core's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotAnApiCode;

impl FromStr for ApiCode {
    type Err = NotAnApiCode;

    fn from_str(s: &str) -> Result<ApiCode, NotAnApiCode> {
        ApiCode::from_str_code(s).ok_or(NotAnApiCode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use packet_core::ErrorCode;

    #[test]
    fn codes_are_distinct_read_back_and_none_is_packet_cores() {
        let mut seen: Vec<&str> = ApiCode::ALL.iter().map(|c| c.as_str()).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), ApiCode::ALL.len());
        for &code in ApiCode::ALL {
            assert_eq!(code.as_str().parse(), Ok(code));
            assert_eq!(ErrorCode::from_str_code(code.as_str()), None, "{code}");
            assert!((400..600).contains(&code.status()), "{code}");
            assert!(!code.meaning().is_empty());
        }
        assert_eq!(
            "member_digest_mismatch".parse::<ApiCode>(),
            Err(NotAnApiCode)
        );
    }
}
