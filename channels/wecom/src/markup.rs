//! placeholder
/// x
#[derive(Clone, Copy, Debug, Default)]
pub struct WeComMarkdown;
