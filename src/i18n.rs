//! Localization: Fluent catalogs embedded in the binary, optional operator overrides, and
//! language-tag negotiation.
//!
//! Every sentence a chat user can read is a message in `locales/<tag>/bridge.ftl`, named by
//! one of the ids in [`msg`]. Rust code never builds a user-facing sentence itself.
//!
//! - Catalogs for `en-US`, `zh-CN` (Simplified Chinese), `zh-TW` (Traditional Chinese, as
//!   written in Taiwan) and `ja-JP` are compiled in; `bridge.locales_dir` may add locales
//!   (a `ko-KR/bridge.ftl` there becomes available) or override single messages.
//! - Unicode isolation marks are off: chat clients show them as garbage.
//! - A message missing in the chosen locale falls back to `en-US` and is logged once per
//!   (locale, id); an id missing from `en-US` is caught by this module's tests.
//! - Negotiation matches by language, not string equality, and Chinese by script: `zh`,
//!   `zh-Hans`, `zh-SG`, `zh_CN` → `zh-CN`; `zh-Hant`, `zh-TW`, `zh-HK`, `zh-MO` → `zh-TW`;
//!   `ja`, `ja_JP.UTF-8` → `ja-JP`; `en-GB` → `en-US`.

mod catalog;
pub mod msg;

pub use catalog::{Arg, Catalogs, I18nError, Locale, check_dir};
