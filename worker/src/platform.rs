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
pub fn zstd_decode(frame: &[u8], raw: u64, out: &mut Vec<u8>) -> Result<(), String> {
    imp::zstd_decode(frame, raw, out)
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use js_sys::{Object, Reflect, Uint8Array};
    use packet_core::Digest;
    use pillbox_wire::chunking::ZSTD_WINDOW_LOG;
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen(module = "node:crypto")]
    extern "C" {
        type Hash;
        #[wasm_bindgen(js_name = createHash)]
        fn create_hash(algorithm: &JsValue) -> Hash;
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

    thread_local! {
        /// Made once: JavaScript strings and objects cost a call each.
        static SHA256: JsValue = JsValue::from_str("sha256");
        static MAX_OUTPUT: JsValue = JsValue::from_str("maxOutputLength");
        static OPTIONS: Result<Object, String> = options();
    }

    /// `{ params: { [ZSTD_d_windowLogMax]: ZSTD_WINDOW_LOG } }`.
    fn options() -> Result<Object, String> {
        let text = |e: JsValue| crate::storage::stream::js_text(&e);
        let options = Object::new();
        let params = Object::new();
        let key = CONSTANTS
            .with(|c| Reflect::get(c, &JsValue::from_str("ZSTD_d_windowLogMax")))
            .map_err(text)?;
        Reflect::set(&params, &key, &JsValue::from(ZSTD_WINDOW_LOG)).map_err(text)?;
        Reflect::set(&options, &JsValue::from_str("params"), &params).map_err(text)?;
        Ok(options)
    }

    pub fn sha256(bytes: &[u8]) -> Digest {
        let h = SHA256.with(create_hash);
        h.update(bytes);
        let mut d = [0u8; 32];
        h.digest().copy_to(&mut d);
        Digest(d)
    }

    pub fn zstd_decode(frame: &[u8], raw: u64, out: &mut Vec<u8>) -> Result<(), String> {
        let options = OPTIONS.with(|o| o.clone())?;
        // The runtime checks its limit a block of output at a time: it
        // refuses a frame of exactly the limit's size unless a block (128
        // KiB) is allowed for; the exact size is checked below.
        MAX_OUTPUT
            .with(|k| Reflect::set(&options, k, &JsValue::from((raw + BLOCK) as f64)))
            .map_err(|e| crate::storage::stream::js_text(&e))?;
        let decoded = zstd_decompress_sync(frame, &options).map_err(|e| {
            let text = crate::storage::stream::js_text(&e);
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
    use pillbox_wire::chunking::ZSTD_MAX_WINDOW;
    use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

    pub fn sha256(bytes: &[u8]) -> Digest {
        Digest::of(bytes)
    }

    pub fn zstd_decode(frame: &[u8], raw: u64, out: &mut Vec<u8>) -> Result<(), String> {
        let start = out.len();
        let mut d = FrameDecoder::new();
        d.set_max_window_size(ZSTD_MAX_WINDOW);
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
