//! What the runtime computes natively for the Worker: a chunk's SHA-256
//! (`node:crypto`) and the decoding of a zstd frame (`node:zlib`), both in
//! workerd's own code (BoringSSL, libzstd) rather than in wasm, several
//! times faster (docs/benchmarks.md, "Findings"). Natively (the crate's
//! unit tests) the same calls run on packet-core's SHA-256 and `ruzstd`.
//!
//! Only the bytes' meaning is checked here; the frame's shape (exactly one
//! frame, its window, its declared size) is checked before, in
//! [`crate::storage::frames`], so both decoders see the same frames. A
//! body's own SHA-256 stays packet-core's: its state is kept between pushes
//! (`HashState`), which the runtime's hash cannot give.

use packet_core::Digest;

/// The SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> Digest {
    imp::sha256(bytes)
}

/// Decodes the zstd frame `frame` (its shape checked) into `out`, whose
/// length it extends by exactly `raw` bytes, or says why not. Never
/// decodes more than `raw` bytes and one zstd block (128 KiB).
pub fn zstd_decode(
    frame: &[u8],
    raw: u64,
    window_log: u32,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    imp::zstd_decode(frame, raw, window_log, out)
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use js_sys::{Object, Reflect, Uint8Array};
    use packet_core::Digest;
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen(module = "node:crypto")]
    extern "C" {
        type Hash;
        #[wasm_bindgen(js_name = createHash)]
        fn create_hash(algorithm: &str) -> Hash;
        // `&[u8]` reaches JavaScript as a view of wasm's memory: no copy.
        #[wasm_bindgen(method)]
        fn update(this: &Hash, data: &[u8]) -> Hash;
        #[wasm_bindgen(method)]
        fn digest(this: &Hash) -> Uint8Array;
    }

    #[wasm_bindgen(module = "node:zlib")]
    extern "C" {
        #[wasm_bindgen(catch, js_name = zstdDecompressSync)]
        fn zstd_decompress_sync(data: &[u8], options: &Object) -> Result<Uint8Array, JsValue>;
        #[wasm_bindgen(thread_local_v2, js_name = constants)]
        static CONSTANTS: Object;
    }

    /// zstd's largest block.
    const BLOCK: u64 = 128 << 10;

    pub fn sha256(bytes: &[u8]) -> Digest {
        let h = create_hash("sha256");
        h.update(bytes);
        let mut d = [0u8; 32];
        h.digest().copy_to(&mut d);
        Digest(d)
    }

    pub fn zstd_decode(
        frame: &[u8],
        raw: u64,
        window_log: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let options = Object::new();
        let params = Object::new();
        let set = |o: &Object, k: &JsValue, v: JsValue| {
            Reflect::set(o, k, &v).map_err(|e| crate::store::js_text(&e))
        };
        let key = CONSTANTS
            .with(|c| Reflect::get(c, &JsValue::from_str("ZSTD_d_windowLogMax")))
            .map_err(|e| crate::store::js_text(&e))?;
        set(&params, &key, JsValue::from(window_log))?;
        set(&options, &JsValue::from_str("params"), params.into())?;
        // The runtime checks its limit a block of output at a time: it
        // refuses a frame of exactly the limit's size unless a block (128
        // KiB) is allowed for; the exact size is checked below.
        set(
            &options,
            &JsValue::from_str("maxOutputLength"),
            JsValue::from((raw + BLOCK) as f64),
        )?;
        let decoded = zstd_decompress_sync(frame, &options).map_err(|e| {
            let text = crate::store::js_text(&e);
            if e.is_instance_of::<js_sys::RangeError>() {
                format!("the zstd frame decodes to more than its {raw} bytes")
            } else {
                format!("a zstd block: {text}")
            }
        })?;
        if u64::from(decoded.length()) != raw {
            return Err(format!(
                "the zstd frame decodes to {} bytes, the chunk has {raw}",
                decoded.length()
            ));
        }
        let start = out.len();
        out.resize(start + raw as usize, 0);
        decoded.copy_to(&mut out[start..]);
        Ok(())
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use packet_core::Digest;
    use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

    pub fn sha256(bytes: &[u8]) -> Digest {
        Digest::of(bytes)
    }

    pub fn zstd_decode(
        frame: &[u8],
        raw: u64,
        window_log: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let start = out.len();
        let mut d = FrameDecoder::new();
        d.set_max_window_size(1 << window_log);
        let mut source = frame;
        d.reset(&mut source)
            .map_err(|e| format!("not a zstd frame: {e}"))?;
        loop {
            let finished = d
                .decode_blocks(&mut source, BlockDecodingStrategy::UptoBlocks(1))
                .map_err(|e| format!("a zstd block: {e}"))?;
            d.collect_to_writer(&mut *out)
                .map_err(|e| format!("zstd output: {e:?}"))?;
            if (out.len() - start) as u64 > raw {
                return Err(format!(
                    "the zstd frame decodes to more than its {raw} bytes"
                ));
            }
            if finished {
                break;
            }
        }
        if !d.is_finished() || (out.len() - start) as u64 != raw {
            return Err(format!(
                "the zstd frame decodes to {} bytes, the chunk has {raw}",
                out.len() - start
            ));
        }
        Ok(())
    }
}
