//! The multipart upload plan: how a packet of a given size is cut into
//! parts. Every part but the last has the same size (R2, like S3, needs
//! that, and at least 5 MiB per part); parts may arrive in any order and
//! any number of times.

use crate::problem::Problem;
use pillbox_wire::ApiCode;

/// R2's (and S3's) smallest part, except the last.
pub const MIN_PART_SIZE: u64 = 5 << 20;
/// R2's (and S3's) largest number of parts.
pub const MAX_PARTS: u16 = 10_000;

/// How one upload is cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The packet's size.
    pub size: u64,
    /// Every part's size but the last's.
    pub part_size: u64,
}

impl Plan {
    /// Checks a requested plan. `requested` is the client's part size, if it
    /// asked for one; `default_part_size` and `max_part_size` come from the
    /// server's configuration.
    pub fn new(
        size: u64,
        requested: Option<u64>,
        default_part_size: u64,
        max_part_size: u64,
    ) -> Result<Plan, Problem> {
        if size == 0 {
            return Err(Problem::bad_request(
                ApiCode::SizeInvalid,
                "a packet is never empty: `size` must be positive",
            ));
        }
        let part_size = requested.unwrap_or(default_part_size);
        if part_size < MIN_PART_SIZE || part_size > max_part_size {
            return Err(Problem::bad_request(
                ApiCode::PartSizeInvalid,
                format!("part_size must be between {MIN_PART_SIZE} and {max_part_size} bytes, not {part_size}"),
            ));
        }
        let plan = Plan { size, part_size };
        if plan.parts() > u64::from(MAX_PARTS) {
            return Err(Problem::bad_request(
                ApiCode::PartSizeInvalid,
                format!("{size} bytes in parts of {part_size} would need more than {MAX_PARTS} parts: use larger parts"),
            ));
        }
        Ok(plan)
    }

    /// How many parts.
    pub fn parts(&self) -> u64 {
        self.size.div_ceil(self.part_size)
    }

    /// The exact size part `number` (1-based) must have, or `None` if there
    /// is no such part.
    pub fn part_len(&self, number: u16) -> Option<u64> {
        let n = u64::from(number);
        if n == 0 || n > self.parts() {
            return None;
        }
        let start = (n - 1) * self.part_size;
        Some((self.size - start).min(self.part_size))
    }

    /// Part numbers not in `received`, ascending.
    pub fn missing(&self, received: &[u16]) -> Vec<u16> {
        (1..=self.parts() as u16)
            .filter(|n| !received.contains(n))
            .collect()
    }

    /// Checks a part before it is stored.
    pub fn check_part(&self, number: u16, length: u64) -> Result<(), Problem> {
        match self.part_len(number) {
            None => Err(Problem::bad_request(
                ApiCode::PartNumberInvalid,
                format!("this upload has parts 1 to {}, not {number}", self.parts()),
            )),
            Some(expected) if expected != length => Err(Problem::bad_request(
                ApiCode::PartSizeMismatch,
                format!("part {number} must be exactly {expected} bytes, this one is {length}"),
            )),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn parts_cover_the_packet_exactly() {
        let plan = Plan::new(12 * MIB + 3, Some(5 * MIB), 8 * MIB, 64 * MIB).unwrap();
        assert_eq!(plan.parts(), 3);
        assert_eq!(plan.part_len(1), Some(5 * MIB));
        assert_eq!(plan.part_len(3), Some(2 * MIB + 3));
        assert_eq!(plan.part_len(4), None);
        assert_eq!(plan.part_len(0), None);
        let total: u64 = (1..=3).map(|n| plan.part_len(n).unwrap()).sum();
        assert_eq!(total, plan.size);
        assert_eq!(plan.missing(&[3, 1]), vec![2]);
    }

    #[test]
    fn a_small_packet_is_one_part() {
        let plan = Plan::new(100, None, 8 * MIB, 64 * MIB).unwrap();
        assert_eq!((plan.parts(), plan.part_len(1)), (1, Some(100)));
    }

    #[test]
    fn part_sizes_are_checked() {
        assert_eq!(
            Plan::new(100, Some(MIB), 8 * MIB, 64 * MIB)
                .unwrap_err()
                .error
                .code(),
            "part_size_invalid"
        );
        assert_eq!(
            Plan::new(100, Some(65 * MIB), 8 * MIB, 64 * MIB)
                .unwrap_err()
                .error
                .code(),
            "part_size_invalid"
        );
        assert_eq!(
            Plan::new(0, None, 8 * MIB, 64 * MIB)
                .unwrap_err()
                .error
                .code(),
            "size_invalid"
        );
        assert!(Plan::new(
            MIN_PART_SIZE * 10_001,
            Some(MIN_PART_SIZE),
            MIN_PART_SIZE,
            64 * MIB
        )
        .is_err());
        let plan = Plan::new(12 * MIB, Some(5 * MIB), 8 * MIB, 64 * MIB).unwrap();
        assert!(plan.check_part(1, 5 * MIB).is_ok());
        assert_eq!(
            plan.check_part(1, 4 * MIB).unwrap_err().error.code(),
            "part_size_mismatch"
        );
        assert_eq!(
            plan.check_part(9, 1).unwrap_err().error.code(),
            "part_number_invalid"
        );
    }
}
