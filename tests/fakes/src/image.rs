//! What an uploaded picture is, by its first bytes, as the platforms that decode uploaded
//! pictures tell it (Feishu's image upload, DingTalk's `type=image`): a fake refuses a
//! picture its platform cannot show as one (an SVG is text, not a picture they decode).

/// A picture format a platform may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    /// `FF D8 FF`.
    Jpeg,
    /// `89 50 4E 47 0D 0A 1A 0A`.
    Png,
    /// `GIF87a` / `GIF89a`.
    Gif,
    /// `BM`.
    Bmp,
    /// `RIFF` … `WEBP`.
    Webp,
    /// `00 00 01 00`.
    Ico,
    /// `II*\0` / `MM\0*`.
    Tiff,
    /// An ISO media file of brand `heic`/`heix`/`mif1`.
    Heic,
}

/// The format `bytes` begin as, if a picture one.
pub fn sniff(bytes: &[u8]) -> Option<ImageFormat> {
    let starts = |magic: &[u8]| bytes.starts_with(magic);
    Some(if starts(b"\xff\xd8\xff") {
        ImageFormat::Jpeg
    } else if starts(b"\x89PNG\r\n\x1a\n") {
        ImageFormat::Png
    } else if starts(b"GIF87a") || starts(b"GIF89a") {
        ImageFormat::Gif
    } else if starts(b"BM") {
        ImageFormat::Bmp
    } else if starts(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        ImageFormat::Webp
    } else if starts(b"\x00\x00\x01\x00") {
        ImageFormat::Ico
    } else if starts(b"II*\x00") || starts(b"MM\x00*") {
        ImageFormat::Tiff
    } else if bytes.get(4..8) == Some(b"ftyp")
        && matches!(bytes.get(8..12), Some(b"heic" | b"heix" | b"mif1"))
    {
        ImageFormat::Heic
    } else {
        return None;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pictures_are_told_by_their_first_bytes() {
        assert_eq!(sniff(b"\xff\xd8\xff\xe0 jfif"), Some(ImageFormat::Jpeg));
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n...."), Some(ImageFormat::Png));
        assert_eq!(
            sniff(b"RIFF\x10\x00\x00\x00WEBPVP8 "),
            Some(ImageFormat::Webp)
        );
        assert_eq!(sniff(b"\x00\x00\x00\x18ftypheic"), Some(ImageFormat::Heic));
        assert_eq!(sniff(b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>"), None);
        assert_eq!(sniff(b""), None);
    }
}
