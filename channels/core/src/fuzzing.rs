//! Entry points for the fuzz targets in `fuzz/` (cargo feature `fuzzing`, off in every
//! build of the daemon): the checks the renderer's and the splitter's property tests run,
//! so a fuzz target asserts exactly what the tests assert. Not an API.

pub use crate::delivery::split::check::{check_chunks, check_truncate};
pub use crate::render::check::{check_final, check_preview};
