//! Settings read from the Worker's variables (`[vars]` in wrangler.toml,
//! `--var` on `wrangler dev`). Unset or malformed values fall back to the
//! defaults documented in docs/worker.md.

use packet_core::Limits;

use pillbox_wire::{Chunking, Info, PartLimits, PartSizes, TRANSFER_DELTA, TRANSFER_WHOLE};

use crate::auth::{self, ReadAccess};
use crate::multipart::MIN_PART_SIZE;

/// The most frames one push part may carry (the chunk batch's limit).
pub const MAX_PART_FRAMES: u32 = pillbox_wire::chunks::BatchLimits::MAX_FRAMES;
/// The largest zstd window a frame may use: the decoder keeps one window of
/// decoded bytes in wasm memory.
pub const ZSTD_MAX_WINDOW: u64 = pillbox_wire::chunking::ZSTD_MAX_WINDOW;

/// How long a multipart upload may stay unfinished by default, in hours.
pub const DEFAULT_UPLOAD_TTL_HOURS: u64 = 24;
/// The longest `UPLOAD_TTL_HOURS` accepted (a year); larger values fall back
/// to the default.
pub const MAX_UPLOAD_TTL_HOURS: f64 = 24.0 * 366.0;
const HOUR_MS: u64 = 3_600_000;

/// Where the whole-packet SHA-256 is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketHasher {
    /// The runtime's native `crypto.DigestStream` (packet-core hashes
    /// members only).
    Platform,
    /// packet-core, in wasm.
    Core,
}

/// The Worker's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Limits passed to packet-core (clamped to the format's).
    pub limits: Limits,
    /// Largest body a single `PUT /v1/packets/{digest}` accepts.
    pub max_single_upload_bytes: u64,
    /// Part size when a client does not ask for one.
    pub default_part_size: u64,
    /// Who may read packets and refs by name (`READ_ACCESS`, default
    /// `token`).
    pub read_access: ReadAccess,
    /// Who may list packets and refs and search (`LIST_ACCESS`, default
    /// `token`; separate from reads so a public store is not also an
    /// enumerable one).
    pub list_access: ReadAccess,
    /// The origins other than the Worker's own whose pages may call the API
    /// (`CORS_ORIGIN`, comma-separated; `*` for any; default none).
    pub cors_origins: Vec<String>,
    /// Where the packet digest is computed.
    pub packet_hasher: PacketHasher,
    /// Multipart uploads and pushes older than this (milliseconds) are
    /// discarded by the scheduled clean-up, which also collects unused packs
    /// older than this (`UPLOAD_TTL_HOURS`, default 24, fractions allowed).
    pub upload_ttl_ms: u64,
    /// The most bytes of frames one push part (or a push's create body)
    /// carries, as sent (`PUSH_PART_BYTES`, default 64 MiB, 1 MiB to
    /// 64 MiB).
    pub push_part_bytes: u64,
    /// Whether the benchmark routes and timings are on (`BENCH_ROUTES`,
    /// off unless `1`; docs/worker.md, "Settings").
    pub bench_routes: bool,
}

impl Config {
    /// Reads the settings through `var` (a variable's value by name).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Config {
        let number = |name: &str| var(name).and_then(|v| v.trim().parse::<u64>().ok());
        let limits = Limits {
            max_packet_bytes: number("MAX_PACKET_BYTES").unwrap_or(Limits::FORMAT.max_packet_bytes),
            max_members: number("MAX_MEMBERS").unwrap_or(Limits::FORMAT.max_members),
            ..Limits::FORMAT
        }
        .clamped();
        let max_single_upload_bytes = number("MAX_SINGLE_UPLOAD_BYTES").unwrap_or(64 << 20).max(1);
        let default_part_size = number("PART_SIZE_BYTES")
            .unwrap_or(32 << 20)
            .clamp(MIN_PART_SIZE, max_single_upload_bytes.max(MIN_PART_SIZE));
        Config {
            limits,
            max_single_upload_bytes,
            default_part_size,
            read_access: auth::read_access(var("READ_ACCESS").as_deref()),
            list_access: auth::read_access(var("LIST_ACCESS").as_deref()),
            cors_origins: var("CORS_ORIGIN")
                .unwrap_or_default()
                .split(',')
                .map(|o| o.trim().trim_end_matches('/').to_string())
                .filter(|o| !o.is_empty())
                .collect(),
            packet_hasher: match var("PACKET_HASHER").as_deref().map(str::trim) {
                Some("core") => PacketHasher::Core,
                _ => PacketHasher::Platform,
            },
            upload_ttl_ms: var("UPLOAD_TTL_HOURS")
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|h| h.is_finite() && *h >= 0.0 && *h <= MAX_UPLOAD_TTL_HOURS)
                .map_or(DEFAULT_UPLOAD_TTL_HOURS * HOUR_MS, |h| {
                    (h * 3_600_000.0) as u64
                }),
            push_part_bytes: number("PUSH_PART_BYTES")
                .unwrap_or(64 << 20)
                .clamp(1 << 20, 64 << 20),
            bench_routes: var("BENCH_ROUTES").as_deref().map(str::trim) == Some("1"),
        }
    }

    /// The `Access-Control-Allow-Origin` for a request from `origin`:
    /// `*` if any origin is allowed, the origin itself if it is in the list,
    /// else none (the browser then keeps the answer from the page).
    pub fn allowed_origin(&self, origin: Option<&str>) -> Option<String> {
        if self.cors_origins.iter().any(|o| o == "*") {
            return Some("*".into());
        }
        let origin = origin?;
        self.cors_origins
            .iter()
            .any(|o| o == origin)
            .then(|| origin.to_string())
    }

    /// What one push part may hold ([`pillbox_wire::Push::part_limits`]).
    pub fn part_limits(&self) -> PartLimits {
        PartLimits {
            max_bytes: self.push_part_bytes,
            max_raw_bytes: self.push_raw_bytes(),
            max_frames: MAX_PART_FRAMES,
            encodings: ["identity", "zstd"].map(String::from).to_vec(),
            zstd_max_window: ZSTD_MAX_WINDOW,
        }
    }

    /// The most bytes the frames of one part (or of a push's create body)
    /// may decode to: twice what they may carry, and at least 64 MiB.
    pub fn push_raw_bytes(&self) -> u64 {
        (2 * self.push_part_bytes).max(64 << 20)
    }

    /// The chunk batch a part (or a push's create body) may carry.
    pub fn batch_limits(&self) -> pillbox_wire::chunks::BatchLimits {
        pillbox_wire::chunks::BatchLimits::upload(self.push_part_bytes, self.push_raw_bytes())
    }

    /// How the store expects bodies and `packet.json` to be cut
    /// (docs/transfer.md, "Units").
    pub fn chunking() -> Chunking {
        Chunking::ours()
    }

    /// The largest part a client may ask for.
    pub fn max_part_size(&self) -> u64 {
        self.max_single_upload_bytes.max(MIN_PART_SIZE)
    }

    /// What `GET /v1` answers: the settings a client needs to upload.
    pub fn info(&self) -> Info {
        Info {
            service: pillbox_wire::SERVICE.into(),
            api: pillbox_wire::API_VERSION,
            format: packet_core::FORMAT_ID.into(),
            max_packet_bytes: self.limits.max_packet_bytes,
            max_members: self.limits.max_members,
            max_single_upload_bytes: self.max_single_upload_bytes,
            part_size: PartSizes {
                default: self.default_part_size,
                min: MIN_PART_SIZE,
                max: self.max_part_size(),
            },
            read_access: self.read_access,
            transfer: vec![TRANSFER_WHOLE.into(), TRANSFER_DELTA.into()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let c = Config::from_vars(|_| None);
        assert_eq!(c.limits, Limits::FORMAT);
        assert_eq!(c.max_single_upload_bytes, 64 << 20);
        assert_eq!(c.default_part_size, 32 << 20);
        assert_eq!(c.read_access, ReadAccess::Token);
        assert_eq!(c.list_access, ReadAccess::Token);
        assert!(c.cors_origins.is_empty());
        assert_eq!(c.allowed_origin(Some("https://example.com")), None);
        assert_eq!(c.packet_hasher, PacketHasher::Platform);
        assert_eq!(c.upload_ttl_ms, 24 * 3_600_000);
        assert_eq!(c.push_part_bytes, 64 << 20);
        assert!(!c.bench_routes);
    }

    #[test]
    fn access_and_origins() {
        let c = Config::from_vars(|name| match name {
            "READ_ACCESS" => Some("public".into()),
            "CORS_ORIGIN" => Some(" https://a.example , https://b.example/ ,".into()),
            _ => None,
        });
        assert_eq!(c.read_access, ReadAccess::Public);
        assert_eq!(
            c.list_access,
            ReadAccess::Token,
            "listing has its own setting"
        );
        assert_eq!(c.cors_origins, ["https://a.example", "https://b.example"]);
        assert_eq!(
            c.allowed_origin(Some("https://b.example")).as_deref(),
            Some("https://b.example")
        );
        assert_eq!(c.allowed_origin(Some("https://c.example")), None);
        assert_eq!(c.allowed_origin(None), None);
        let any = Config::from_vars(|n| match n {
            "CORS_ORIGIN" => Some("*".into()),
            "LIST_ACCESS" => Some("public".into()),
            _ => None,
        });
        assert_eq!(any.allowed_origin(None).as_deref(), Some("*"));
        assert_eq!(any.list_access, ReadAccess::Public);
    }

    #[test]
    fn push_parts_and_bench_routes() {
        let c = Config::from_vars(|name| match name {
            "PUSH_PART_BYTES" => Some("1".into()),
            "BENCH_ROUTES" => Some("1".into()),
            _ => None,
        });
        assert_eq!(c.push_part_bytes, 1 << 20);
        assert!(c.bench_routes);
        assert_eq!(c.part_limits().max_bytes, 1 << 20);
        assert!(!Config::from_vars(|n| (n == "BENCH_ROUTES").then(|| "yes".into())).bench_routes);
    }

    #[test]
    fn upload_ttl_takes_fractional_hours_and_ignores_nonsense() {
        let ttl = |v: &str| {
            let v = v.to_string();
            Config::from_vars(move |name| (name == "UPLOAD_TTL_HOURS").then(|| v.clone()))
                .upload_ttl_ms
        };
        assert_eq!(ttl("48"), 48 * 3_600_000);
        assert_eq!(ttl(" 0.5 "), 1_800_000);
        assert_eq!(ttl("0"), 0);
        for bad in ["-1", "NaN", "inf", "soon", "", "1e9"] {
            assert_eq!(ttl(bad), 24 * 3_600_000, "{bad:?}");
        }
    }

    #[test]
    fn limits_can_tighten_but_not_loosen() {
        let c = Config::from_vars(|name| match name {
            "MAX_PACKET_BYTES" => Some("4096".into()),
            "MAX_MEMBERS" => Some("99999999".into()),
            "PART_SIZE_BYTES" => Some("1".into()),
            "READ_ACCESS" => Some("token".into()),
            "PACKET_HASHER" => Some("core".into()),
            _ => None,
        });
        assert_eq!(c.limits.max_packet_bytes, 4096);
        assert_eq!(c.limits.max_members, Limits::FORMAT.max_members);
        assert_eq!(c.default_part_size, MIN_PART_SIZE);
        assert_eq!(c.read_access, ReadAccess::Token);
        assert_eq!(c.packet_hasher, PacketHasher::Core);
    }

    #[test]
    fn get_v1_shows_the_settings_and_the_part_sizes_allowed() {
        let c = Config::from_vars(|name| match name {
            "MAX_SINGLE_UPLOAD_BYTES" => Some("1000".into()),
            "READ_ACCESS" => Some("token".into()),
            _ => None,
        });
        let info = serde_json::to_value(c.info()).unwrap();
        assert_eq!(
            info,
            serde_json::json!({
                "service": "pillbox",
                "api": 1,
                "format": "pillbox.session-packet/2",
                "max_packet_bytes": Limits::FORMAT.max_packet_bytes,
                "max_members": Limits::FORMAT.max_members,
                "max_single_upload_bytes": 1000,
                // Parts are never smaller than R2's minimum, even when a
                // single upload takes less.
                "part_size": { "default": MIN_PART_SIZE, "min": MIN_PART_SIZE, "max": MIN_PART_SIZE },
                "read_access": "token",
                "transfer": ["whole", "delta"],
            })
        );
    }
}
