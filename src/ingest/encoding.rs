//! Text encodings recorded data carries inside its documents.

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use std::borrow::Cow;

/// Padding optional (canonical or fewer `=`), and the unused low bits of the last symbol ignored
/// rather than required to be zero: recorders differ on both and neither changes the bytes.
const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);
const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);
const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);

/// Base64 as recorders write it: the standard (`+/`) or the URL-safe (`-_`) alphabet, padded or
/// not, broken into lines or not (ASCII whitespace anywhere is skipped). `None` when the text is
/// neither: a symbol outside the alphabet, both alphabets mixed in one text, `=` before the end,
/// or a length no byte string encodes to (one symbol past a whole group).
pub fn base64_lenient(text: &str) -> Option<Vec<u8>> {
    let compact: Cow<'_, str> = if text.bytes().any(|b| b.is_ascii_whitespace()) {
        Cow::Owned(text.chars().filter(|c| !c.is_ascii_whitespace()).collect())
    } else {
        Cow::Borrowed(text)
    };
    let bytes = compact.as_bytes();
    STANDARD
        .decode(bytes)
        .or_else(|_| URL_SAFE.decode(bytes))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_reads_both_alphabets_padded_or_not_across_lines() {
        // Standard alphabet, with and without padding.
        assert_eq!(base64_lenient("aGk=").unwrap(), b"hi");
        assert_eq!(base64_lenient("aGk").unwrap(), b"hi");
        assert_eq!(base64_lenient("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_lenient("").unwrap(), b"");
        // Bytes whose encodings differ between the alphabets: 0xfb 0xff is `+/8` or `-_8`.
        assert_eq!(base64_lenient("+/8=").unwrap(), [0xfb, 0xff]);
        assert_eq!(base64_lenient("-_8=").unwrap(), [0xfb, 0xff]);
        assert_eq!(base64_lenient("-_8").unwrap(), [0xfb, 0xff]);
        // Line breaks and spaces anywhere, as YAML `!!binary` blocks and wrapped MIME text have.
        assert_eq!(
            base64_lenient("aGVs\nbG8g\r\nd29y bGQ=\n").unwrap(),
            b"hello world"
        );
        assert_eq!(base64_lenient("\taGk=\t").unwrap(), b"hi");
        // A 16-byte trace id in the protobuf JSON mapping (padded) and unpadded.
        let id: Vec<u8> = (0u8..16).collect();
        assert_eq!(base64_lenient("AAECAwQFBgcICQoLDA0ODw==").unwrap(), id);
        assert_eq!(base64_lenient("AAECAwQFBgcICQoLDA0ODw").unwrap(), id);
        // Unused low bits of the last symbol are ignored (`aGl` would be canonical).
        assert_eq!(
            base64_lenient("aGk").unwrap(),
            base64_lenient("aGl").unwrap()
        );
    }

    #[test]
    fn base64_refuses_what_is_not_base64() {
        for bad in [
            "not base64!",
            "aGk=aGk=", // padding before the end
            "aG=k",
            "+_8=",  // both alphabets in one text
            "aGVsb", // one symbol past a whole group
            "a",
            "aGk*",
        ] {
            assert_eq!(base64_lenient(bad), None, "{bad:?}");
        }
    }
}
