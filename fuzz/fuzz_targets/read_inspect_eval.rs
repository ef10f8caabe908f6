//! The Inspect `.eval` (ZIP) reader. An even first byte: the rest is the archive as it stands,
//! so the ZIP parsing itself is fuzzed. An odd one: the rest is members separated by NUL bytes,
//! each its name, a newline and its content, stored into a well-formed archive, so the fuzzer
//! reaches the JSON inside without having to keep a ZIP's checksums right.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;
use std::io::Write;
use traceaudit::Format;

fn archive(members: &[u8]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let mut names = HashSet::new();
    for member in members.split(|b| *b == 0) {
        let (name, content) = match member.iter().position(|b| *b == b'\n') {
            Some(i) => (&member[..i], &member[i + 1..]),
            None => (member, &[][..]),
        };
        let name = String::from_utf8_lossy(name).into_owned();
        if !names.insert(name.clone()) {
            continue;
        }
        zip.start_file(name, options)
            .expect("start a stored member");
        zip.write_all(content).expect("write a member");
    }
    zip.finish().expect("finish the archive").into_inner()
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let bytes = if mode % 2 == 0 {
        rest.to_vec()
    } else {
        archive(rest)
    };
    traceaudit_fuzz::read_and_check(Format::InspectAi, "input.eval", &bytes);
});
