//! Loading Fluent catalogs and formatting messages.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use fluent_bundle::concurrent::FluentBundle;
use fluent_bundle::{FluentArgs, FluentResource, FluentValue};
use unic_langid::LanguageIdentifier;

/// The locale every message must exist in, and the last step of every fallback.
pub const DEFAULT_LOCALE: &str = "en-US";

/// The catalogs shipped in the binary: (tag, file contents).
const EMBEDDED: &[(&str, &str)] = &[
    ("en-US", include_str!("../../locales/en-US/bridge.ftl")),
    ("zh-CN", include_str!("../../locales/zh-CN/bridge.ftl")),
    ("zh-TW", include_str!("../../locales/zh-TW/bridge.ftl")),
    ("ja-JP", include_str!("../../locales/ja-JP/bridge.ftl")),
];

/// A supported locale.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Locale(LanguageIdentifier);

impl Locale {
    /// The language subtag (`en`, `zh`).
    pub fn language(&self) -> &str {
        self.0.language.as_str()
    }
}

impl fmt::Display for Locale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A value for a message placeable.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// Text, inserted as is.
    Str(&'a str),
    /// A number; also drives plural selection.
    Num(i64),
}

/// Why catalogs could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum I18nError {
    /// A catalog file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A catalog has a syntax error.
    #[error("{path}:{line}: Fluent syntax error: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line of the first error.
        line: usize,
        /// What the parser said.
        message: String,
    },
    /// A directory name under `locales_dir` is not a language tag.
    #[error("{path}: the directory name is not a language tag such as ja-JP")]
    BadTag {
        /// The directory.
        path: PathBuf,
    },
}

type Bundle = FluentBundle<FluentResource>;

/// All loaded catalogs.
pub struct Catalogs {
    /// Supported locales, `en-US` first.
    locales: Vec<Locale>,
    bundles: HashMap<Locale, Bundle>,
    /// (locale, id) pairs already reported missing; bounded by locales × ids.
    reported: Mutex<HashSet<(Locale, String)>>,
}

impl fmt::Debug for Catalogs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Catalogs")
            .field("locales", &self.locales)
            .finish()
    }
}

impl Catalogs {
    /// The catalogs compiled into the binary.
    pub fn embedded() -> Result<Self, I18nError> {
        Self::load(None)
    }

    /// The embedded catalogs plus `<dir>/<tag>/*.ftl`: new tags add locales, messages in
    /// known tags override the embedded ones.
    pub fn load(dir: Option<&Path>) -> Result<Self, I18nError> {
        let mut catalogs = Self {
            locales: Vec::new(),
            bundles: HashMap::new(),
            reported: Mutex::new(HashSet::new()),
        };
        for (tag, source) in EMBEDDED {
            let locale = parse_tag(tag).ok_or_else(|| I18nError::BadTag {
                path: PathBuf::from(tag),
            })?;
            catalogs.add(
                locale,
                source,
                Path::new(&format!("locales/{tag}/bridge.ftl")),
            )?;
        }
        if let Some(dir) = dir {
            for (locale, file) in catalog_files(dir)? {
                let source = std::fs::read_to_string(&file).map_err(|source| I18nError::Io {
                    path: file.clone(),
                    source,
                })?;
                catalogs.add(locale, &source, &file)?;
            }
        }
        Ok(catalogs)
    }

    fn add(&mut self, locale: Locale, source: &str, path: &Path) -> Result<(), I18nError> {
        let resource = parse_resource(source, path)?;
        let bundle = self.bundles.entry(locale.clone()).or_insert_with(|| {
            let mut b = Bundle::new_concurrent(vec![locale.0.clone()]);
            b.set_use_isolating(false);
            b
        });
        bundle.add_resource_overriding(resource);
        if !self.locales.contains(&locale) {
            self.locales.push(locale);
        }
        Ok(())
    }

    /// Supported locales, `en-US` first.
    pub fn supported(&self) -> &[Locale] {
        &self.locales
    }

    /// The supported locales as a list for a sentence or an error: `en-US, zh-CN`.
    pub fn supported_list(&self) -> String {
        self.locales
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// How `locale` names itself ("English", "简体中文"); its tag when its catalog does
    /// not say (an operator's added locale without `locale-name`).
    pub fn locale_name(&self, locale: &Locale) -> String {
        if self.has_message(locale, super::msg::LOCALE_NAME) {
            self.text(locale, super::msg::LOCALE_NAME, &[])
        } else {
            locale.to_string()
        }
    }

    /// `items` joined the way `locale` lists things in a sentence.
    pub fn join_list<S: AsRef<str>>(&self, locale: &Locale, items: &[S]) -> String {
        let separator = self.text(locale, super::msg::LIST_SEPARATOR, &[]);
        let mut joined = String::new();
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                joined.push_str(&separator);
            }
            joined.push_str(item.as_ref());
        }
        joined
    }

    /// The supported languages for a reader of `locale`: each by its own name with the tag
    /// to type, "English (en-US), 简体中文 (zh-CN)".
    pub fn supported_names(&self, locale: &Locale) -> String {
        let names: Vec<String> = self
            .locales
            .iter()
            .map(|l| format!("{} ({l})", self.locale_name(l)))
            .collect();
        self.join_list(locale, &names)
    }

    /// `en-US`.
    pub fn default_locale(&self) -> Locale {
        parse_tag(DEFAULT_LOCALE)
            .filter(|l| self.locales.contains(l))
            .or_else(|| self.locales.first().cloned())
            .unwrap_or_else(|| Locale(LanguageIdentifier::default()))
    }

    /// The supported locale a language tag asks for: an exact match, else, among the
    /// supported locales of the same language, the first one in the same script, preferring
    /// the same region, else the first of that language. A Chinese tag without a script is
    /// in the one its region writes: `zh-Hant`, `zh-Hant-HK`, `zh-HK`, `zh-MO` → `zh-TW`;
    /// `zh`, `zh-Hans`, `zh-SG` → `zh-CN`; `ja` → `ja-JP`; `en-GB` → `en-US`.
    pub fn negotiate(&self, tag: &str) -> Option<Locale> {
        let wanted = parse_tag(tag)?;
        if self.locales.contains(&wanted) {
            return Some(wanted);
        }
        let script = written_script(&wanted.0);
        self.locales
            .iter()
            .filter(|l| l.0.language == wanted.0.language)
            // `min_by_key` keeps the first of equals: the catalogs' order breaks ties.
            .min_by_key(|l| {
                (
                    written_script(&l.0) != script,
                    l.0.region != wanted.0.region,
                )
            })
            .cloned()
    }

    /// Whether the locale's own catalog (not the fallback) has message `id`.
    pub fn has_message(&self, locale: &Locale, id: &str) -> bool {
        self.bundles.get(locale).is_some_and(|b| b.has_message(id))
    }

    /// Formats message `id` in `locale`, falling back to `en-US`. Never fails: a message
    /// missing everywhere yields its id (and an error log), which tests rule out.
    pub fn text(&self, locale: &Locale, id: &str, args: &[(&str, Arg<'_>)]) -> String {
        let bundle = match self.bundles.get(locale).filter(|b| b.has_message(id)) {
            Some(b) => b,
            None => {
                self.report_missing(locale, id);
                match self
                    .bundles
                    .get(&self.default_locale())
                    .filter(|b| b.has_message(id))
                {
                    Some(b) => b,
                    None => return id.to_owned(),
                }
            }
        };
        let Some(pattern) = bundle.get_message(id).and_then(|m| m.value()) else {
            return id.to_owned();
        };
        let mut fluent_args = FluentArgs::with_capacity(args.len());
        for (name, value) in args {
            match value {
                Arg::Str(s) => fluent_args.set(*name, FluentValue::from(*s)),
                Arg::Num(n) => fluent_args.set(*name, FluentValue::from(*n)),
            }
        }
        let mut errors = Vec::new();
        let text = bundle.format_pattern(pattern, Some(&fluent_args), &mut errors);
        if !errors.is_empty() {
            tracing::warn!(locale = %locale, id, errors = errors.len(), "A message was formatted with errors.");
        }
        text.into_owned()
    }

    fn report_missing(&self, locale: &Locale, id: &str) {
        let mut reported = self.reported.lock().unwrap_or_else(|p| p.into_inner());
        if reported.insert((locale.clone(), id.to_owned())) {
            tracing::warn!(locale = %locale, id, "A message is missing in this locale; using en-US.");
        }
    }
}

/// Checks an operator's catalog directory the way `check-config` reports it: syntax errors
/// (with file and line) and placeables that differ from `en-US` are errors; ids `en-US`
/// does not have, and messages an added locale lacks (they fall back to `en-US`), are
/// warnings.
pub fn check_dir(dir: &Path) -> Result<Vec<String>, Vec<String>> {
    if let Err(error) = Catalogs::load(Some(dir)) {
        return Err(vec![error.to_string()]);
    }
    let base = placeables(EMBEDDED[0].1);
    let files = catalog_files(dir).map_err(|e| vec![e.to_string()])?;
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut seen: HashMap<Locale, HashSet<String>> = HashMap::new();
    for (locale, file) in &files {
        let source = std::fs::read_to_string(file)
            .map_err(|e| vec![format!("cannot read {}: {e}", file.display())])?;
        for (id, vars) in placeables(&source) {
            match base.get(&id) {
                None => warnings.push(format!(
                    "{}: message {id} is not one im-bridge uses; it is ignored",
                    file.display()
                )),
                Some(expected) if *expected != vars => errors.push(format!(
                    "{}: message {id} uses the placeables {{{}}} but en-US uses {{{}}}",
                    file.display(),
                    vars.iter()
                        .map(|v| format!("${v}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    expected
                        .iter()
                        .map(|v| format!("${v}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                )),
                Some(_) => {}
            }
            seen.entry(locale.clone()).or_default().insert(id);
        }
    }
    let embedded: HashSet<Locale> = EMBEDDED
        .iter()
        .filter_map(|(tag, _)| parse_tag(tag))
        .collect();
    for (locale, ids) in &seen {
        if embedded.contains(locale) {
            continue;
        }
        let missing = base.keys().filter(|id| !ids.contains(*id)).count();
        if missing > 0 {
            warnings.push(format!(
                "{}: {missing} messages are missing in {locale}; they will be sent in en-US",
                dir.display()
            ));
        }
    }
    if errors.is_empty() {
        Ok(warnings)
    } else {
        Err(errors)
    }
}

/// Message id → the variables it references, for one catalog source; each attribute is an
/// entry of its own, `id.attribute`. Unparsable entries are skipped (loading reports them).
pub(crate) fn placeables(
    source: &str,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    use fluent_syntax::ast;
    fn pattern(p: &ast::Pattern<&str>, vars: &mut std::collections::BTreeSet<String>) {
        for element in &p.elements {
            if let ast::PatternElement::Placeable { expression } = element {
                expr(expression, vars);
            }
        }
    }
    fn expr(e: &ast::Expression<&str>, vars: &mut std::collections::BTreeSet<String>) {
        match e {
            ast::Expression::Select { selector, variants } => {
                inline(selector, vars);
                for v in variants {
                    pattern(&v.value, vars);
                }
            }
            ast::Expression::Inline(i) => inline(i, vars),
        }
    }
    fn inline(i: &ast::InlineExpression<&str>, vars: &mut std::collections::BTreeSet<String>) {
        match i {
            ast::InlineExpression::VariableReference { id } => {
                vars.insert(id.name.to_owned());
            }
            ast::InlineExpression::Placeable { expression } => expr(expression, vars),
            ast::InlineExpression::FunctionReference { arguments, .. } => {
                let named = arguments.named.iter().map(|n| &n.value);
                for argument in arguments.positional.iter().chain(named) {
                    inline(argument, vars);
                }
            }
            _ => {}
        }
    }
    let resource = match fluent_syntax::parser::parse(source) {
        Ok(r) => r,
        Err((r, _)) => r,
    };
    let mut out = std::collections::BTreeMap::new();
    for entry in resource.body {
        if let ast::Entry::Message(m) = entry {
            let mut vars = std::collections::BTreeSet::new();
            if let Some(value) = &m.value {
                pattern(value, &mut vars);
            }
            out.insert(m.id.name.to_owned(), vars);
            for attribute in &m.attributes {
                let mut vars = std::collections::BTreeSet::new();
                pattern(&attribute.value, &mut vars);
                out.insert(format!("{}.{}", m.id.name, attribute.id.name), vars);
            }
        }
    }
    out
}

/// The script a tag is written in: its script subtag, else for Chinese the one its region
/// writes (Traditional in Taiwan, Hong Kong and Macau; Simplified elsewhere, and with no
/// region); `None` for other languages without a script subtag.
fn written_script(id: &LanguageIdentifier) -> Option<&str> {
    if let Some(script) = &id.script {
        return Some(script.as_str());
    }
    (id.language.as_str() == "zh").then(|| match id.region.as_ref().map(|r| r.as_str()) {
        Some("TW" | "HK" | "MO") => "Hant",
        _ => "Hans",
    })
}

/// Parses `zh_CN`, `zh-Hans`, `en-us`, `ja_JP.UTF-8` into a language identifier. Of a tag
/// that does not parse whole, the longest leading part that does counts (`zh-hant-raw`, a
/// client's private language pack, → `zh-Hant`).
fn parse_tag(tag: &str) -> Option<Locale> {
    let normalized = tag.trim().replace('_', "-");
    let mut candidate = normalized.split(['.', '@']).next()?;
    loop {
        if let Ok(id) = candidate.parse::<LanguageIdentifier>()
            && id.language.as_str() != "und"
        {
            return Some(Locale(id));
        }
        candidate = candidate.get(..candidate.rfind('-')?)?;
    }
}

fn parse_resource(source: &str, path: &Path) -> Result<FluentResource, I18nError> {
    FluentResource::try_new(source.to_owned()).map_err(|(_, errors)| {
        let first = errors.first();
        let offset = first.map(|e| e.pos.start).unwrap_or(0);
        let line = source
            .get(..offset)
            .map(|s| s.matches('\n').count() + 1)
            .unwrap_or(1);
        I18nError::Syntax {
            path: path.to_owned(),
            line,
            message: first
                .map(|e| e.kind.to_string())
                .unwrap_or_else(|| "unknown error".into()),
        }
    })
}

/// `<dir>/<tag>/*.ftl`, sorted for a stable override order.
fn catalog_files(dir: &Path) -> Result<Vec<(Locale, PathBuf)>, I18nError> {
    fn io(path: &Path) -> impl Fn(std::io::Error) -> I18nError + '_ {
        move |source| I18nError::Io {
            path: path.to_owned(),
            source,
        }
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let tag = entry.file_name().to_string_lossy().into_owned();
        let locale = parse_tag(&tag).ok_or_else(|| I18nError::BadTag { path: path.clone() })?;
        for file in std::fs::read_dir(&path).map_err(io(&path))? {
            let file = file.map_err(io(&path))?.path();
            if file.extension().is_some_and(|e| e == "ftl") {
                files.push((locale.clone(), file));
            }
        }
    }
    files.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(files)
}

#[cfg(test)]
mod tests;
