//! Partition values: the `key=value` folders of an input's path (`day=2026-12-01`,
//! `year=2026/month=12/day=01`, `env=prod`), as time-partitioned exports and Hive-style layouts
//! write them. Each run keeps those of the file it was read from, so reports and notebooks can
//! group by them.

/// The partition values of `source` (a path or an object's URL): every folder segment of the
/// form `key=value` with a non-empty key, outermost first; the file's own name is not one. A key
/// that appears twice keeps its innermost value. Values are kept as written (no decoding).
///
/// ```text
/// s3://logs/otel/year=2026/month=12/day=01/hour=17/batch.json.gz
///   -> [("year", "2026"), ("month", "12"), ("day", "01"), ("hour", "17")]
/// ```
pub fn partition_values(source: &str) -> Vec<(&str, &str)> {
    let folders = match source.rfind(['/', '\\']) {
        Some(end) => &source[..end],
        None => return Vec::new(),
    };
    let mut values: Vec<(&str, &str)> = Vec::new();
    for segment in folders.split(['/', '\\']) {
        let Some((key, value)) = segment.split_once('=') else {
            continue;
        };
        if key.is_empty() {
            continue;
        }
        values.retain(|(k, _)| *k != key);
        values.push((key, value));
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_of_key_value_form_are_partitions() {
        assert_eq!(
            partition_values("s3://logs/otel/year=2026/month=12/day=01/hour=17/batch.json.gz"),
            [
                ("year", "2026"),
                ("month", "12"),
                ("day", "01"),
                ("hour", "17")
            ]
        );
        assert_eq!(
            partition_values("nights/day=2026-12-01/env=prod/run.jsonl"),
            [("day", "2026-12-01"), ("env", "prod")]
        );
        // The file's name is not a partition, nor is a segment without a key.
        assert!(partition_values("logs/a=b.jsonl").is_empty());
        assert!(partition_values("logs/=x/run.jsonl").is_empty());
        assert!(partition_values("run.jsonl").is_empty());
        // An empty value is a value; `=` inside a value stays in it; the innermost wins.
        assert_eq!(
            partition_values("k=/q=a=b/k=2/f"),
            [("q", "a=b"), ("k", "2")]
        );
        assert_eq!(
            partition_values("C:\\logs\\env=dev\\x.json"),
            [("env", "dev")]
        );
    }
}
