//! Writes the sample packet to stdout.
use std::io::Write;
fn main() {
    std::io::stdout()
        .write_all(&packet_core::in_memory::sample_packet())
        .unwrap();
}
