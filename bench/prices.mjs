// Cloudflare's published prices (Workers Paid, marginal: without the
// included allowances or the plan's $5 a month), in dollars, read
// 2026-12 from developers.cloudflare.com/workers/platform/pricing,
// /d1/platform/pricing and /r2/pricing; and the limits the partition model
// (bench/partitions.mjs) is bound by, from /d1/platform/limits.
export const PRICES = {
  request: 0.30 / 1e6,
  cpu_ms: 0.02 / 1e6,
  d1_row_read: 0.001 / 1e6,
  d1_row_written: 1.00 / 1e6,
  d1_gb_month: 0.75,
  r2_class_a: 4.50 / 1e6,
  r2_class_b: 0.36 / 1e6,
  r2_gb_month: 0.015,
};

export const LIMITS = {
  d1_database_bytes: 10e9,
  d1_queries_per_invocation: 1000,
};

/** The operations' price of one measured operation (storage aside). */
export function dollars(op) {
  return op.requests * PRICES.request + op.busy_ms * PRICES.cpu_ms
    + op.rows_read * PRICES.d1_row_read + op.rows_written * PRICES.d1_row_written
    + op.r2_class_a * PRICES.r2_class_a + op.r2_class_b * PRICES.r2_class_b;
}
