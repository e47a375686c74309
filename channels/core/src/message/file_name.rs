//! [`safe_file_name`]: a name a platform or a user gave a file, made safe to store under.

/// A file name safe to store under: the base name only (no directories), without control
/// characters or leading dots, at most `max_bytes` on a character boundary; `None` when
/// nothing usable is left. A name too long is cut in its stem, its extension kept (`.pdf`
/// says what the file is: an allowed-extensions check and the agent read it), unless the
/// extension would take half the room. Adapters name attachments with it, and the manager
/// applies it again before uploading.
pub fn safe_file_name(name: &str, max_bytes: usize) -> Option<String> {
    /// The longest extension kept whole when the stem is cut (`.docx`, `.tar.gz`'s `.gz`).
    const MAX_EXTENSION_BYTES: usize = 16;
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let clean: String = base.chars().filter(|c| !c.is_control()).collect();
    let clean = clean.trim().trim_start_matches('.').trim();
    if clean.len() <= max_bytes {
        return (!clean.is_empty()).then(|| clean.to_owned());
    }
    let extension = clean
        .rfind('.')
        .map(|dot| &clean[dot..])
        .filter(|e| (2..=MAX_EXTENSION_BYTES).contains(&e.len()) && e.len() * 2 <= max_bytes)
        .filter(|e| !e.contains(char::is_whitespace))
        .unwrap_or("");
    let stem = &clean[..clean.len() - extension.len()];
    let stem = stem[..stem.floor_char_boundary(max_bytes - extension.len())].trim_end();
    if stem.is_empty() {
        let cut = clean[..clean.floor_char_boundary(max_bytes)].trim_end();
        return (!cut.is_empty()).then(|| cut.to_owned());
    }
    Some(format!("{stem}{extension}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_name_is_its_base_clean_and_cut_in_its_stem_keeping_the_extension() {
        assert_eq!(
            safe_file_name("../a/b\\..report\u{7}.pdf", 200).unwrap(),
            "report.pdf"
        );
        assert_eq!(safe_file_name(" .. ", 200), None);
        assert_eq!(safe_file_name("", 200), None);
        // 70 Chinese characters are 210 bytes: the stem is cut, `.pdf` kept.
        let long = format!("{}.pdf", "报".repeat(70));
        let cut = safe_file_name(&long, 200).unwrap();
        assert!(cut.ends_with("报.pdf") && cut.len() <= 200, "{cut}");
        assert_eq!(cut.len(), 65 * 3 + 4, "whole characters only");
        // No extension, or one too long to be one: cut at the end, on a character.
        let plain = safe_file_name(&"é".repeat(150), 201).unwrap();
        assert_eq!(plain.len(), 200);
        let odd = safe_file_name(&format!("{}.{}", "a".repeat(50), "b".repeat(40)), 60);
        assert_eq!(
            odd.unwrap(),
            format!("{}.{}", "a".repeat(50), "b".repeat(9))
        );
        // A small room keeps what it can.
        assert_eq!(safe_file_name("abcdefgh.pdf", 8).unwrap(), "abcd.pdf");
        assert_eq!(safe_file_name("abcdefgh.pdf", 6).unwrap(), "abcdef");
    }
}
